"""Rendering a :class:`sqa.types.ChatPrompt` as ChatML, the chat template of Qwen2.5 (the shipped
GGUF models), for llama.cpp, which is given text, not messages.

ChatML: each turn is ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; the open assistant turn is
``<|im_start|>assistant\\n`` followed by the reply so far. This is what Qwen2.5's own template
(``tokenizer.apply_chat_template(..., add_generation_prompt=True)``) gives for a conversation that
has a system message. Hugging Face models apply their own template instead (``sqa.models.hf``).
"""

from __future__ import annotations

from sqa.types import ChatPrompt, Prompt

IM_START, IM_END = "<|im_start|>", "<|im_end|>"


def render_chatml(prompt: ChatPrompt) -> str:
    """The ChatML text of ``prompt`` (see the module doc)."""
    turns = "".join(f"{IM_START}{role}\n{content}{IM_END}\n" for role, content in prompt.messages)
    return f"{turns}{IM_START}assistant\n{prompt.reply}"


def as_chatml_text(prompt: Prompt) -> str:
    """Raw text stays as it is; a ChatPrompt is rendered as ChatML."""
    return prompt if isinstance(prompt, str) else render_chatml(prompt)
