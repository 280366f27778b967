"""A tiny Hugging Face checkpoint built in a few seconds, with no download: a byte-level BPE tokenizer
trained on a few chat prompts (``tokenizers``) and a 2-layer Qwen2 model with seeded random weights
(``transformers.Qwen2ForCausalLM``), saved with ``save_pretrained`` so ``HFModel`` loads it exactly as
it loads a real checkpoint directory. It exercises the transformers reader's code (chat rendering,
left-padded batches, the yes/no read, hidden states, greedy generation with stop strings) on CPU and
on CUDA; its answers mean nothing.

``layers``/``hidden`` set its size: the defaults make a checkpoint of about 0.4 MB (418 kB here); the shape of
Qwen2.5-1.5B (28 layers, 1536 wide, 151,936-token vocabulary, ``qwen_1_5b_config``) is used only for
timing on a GPU, built in memory, never saved.
"""

from __future__ import annotations

from pathlib import Path

CHAT_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

PROMPTS = [
    "<|im_start|>system\nAnswer the question with Yes or No.<|im_end|>\n"
    "<|im_start|>user\nQuestion: Is Paris the capital of France?<|im_end|>\n<|im_start|>assistant\nAnswer:",
    "<|im_start|>user\nQuestion: Did Aristotle use a laptop?<|im_end|>\n<|im_start|>assistant\nAnswer:",
    "Facts: The laptop was invented in 1980. Aristotle died in 322 BC.\nQuestion: Did Aristotle use a laptop?\nAnswer:",
    "Question: Is a llama's gestation period longer than a year? Facts: A llama's gestation period is 11.5 "
    "months. A year has 12 months. Steps: 1. How long is a llama's gestation period? 2. Is #1 longer than a "
    "year?\nAnswer:",
    "Yes or no?",
]


def _corpus() -> list[str]:
    words = " Yes yes YES No no NO Answer Question Facts Steps the a of is was in"
    return PROMPTS * 20 + [words] * 50


def build_tiny_checkpoint(out: Path, seed: int = 0, layers: int = 2, hidden: int = 64) -> Path:
    """Write a tiny checkpoint (tokenizer files, config.json, model.safetensors) to ``out`` and
    return it. The tokenizer is a byte-level BPE (about 400 tokens) whose vocabulary holds each
    spelling of yes/no that ``sqa.models.llamacpp.YES_WORDS``/``NO_WORDS`` lists as one token;
    the model is ``Qwen2ForCausalLM`` with ``torch.manual_seed(seed)`` random weights
    (initializer_range 0.2, so that its next-token distributions differ between prompts). Needs
    torch, transformers and tokenizers."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=CHAT_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", additional_special_tokens=CHAT_SPECIALS[1:]
    )
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        initializer_range=0.2,
        eos_token_id=fast.eos_token_id,
        bos_token_id=fast.eos_token_id,
    )
    Qwen2ForCausalLM(cfg).save_pretrained(out)
    return out


def qwen_1_5b_config(vocab_size: int, **overrides):
    """Qwen2.5-1.5B's shape (28 layers, hidden 1536, intermediate 8960, 12 heads, 2 KV heads: its
    published config.json) with ``vocab_size`` set and any field overridden, for timing with random
    weights."""
    from transformers import Qwen2Config

    shape = dict(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
    )
    return Qwen2Config(vocab_size=vocab_size, **{**shape, **overrides})
