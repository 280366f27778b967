"""The transformers backend (``sqa.models.hf.HFModel``) on the real 0.5B model, loaded from the
same GGUF file with ``from_pretrained(dir, gguf_file=...)``: its yes/no probabilities agree with
llama.cpp's and its batched generation stops at stop strings. Slow on CPU (dequantises the GGUF to
float32: minutes on 2 cores)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")
pytest.importorskip("accelerate")


def _chat(q: str) -> str:
    return (
        f"<|im_start|>system\nAnswer the question with Yes or No.<|im_end|>\n"
        f"<|im_start|>user\nQuestion: {q}<|im_end|>\n<|im_start|>assistant\nAnswer:"
    )


@pytest.mark.slow
def test_hf_model_on_gguf_agrees_with_llamacpp():
    from sqa.models.hf import gguf_hf_model
    from sqa.models.registry import MODELS, assemble_gguf, load_model

    path = assemble_gguf(MODELS["qwen2.5-coder-0.5b"])
    hf = gguf_hf_model(path, device="cpu")
    assert not hf.prefers_batches  # CPU
    # a chat prompt is rendered with the checkpoint's own template: for Qwen2.5, the ChatML llama.cpp gets
    from sqa.models.chat import render_chatml
    from sqa.types import ChatPrompt

    chat = ChatPrompt(
        (("system", "Answer the question with Yes or No."), ("user", "Question: Is Paris in France?")), reply="Answer:"
    )
    assert hf.render(chat) == render_chatml(chat) == _chat("Is Paris in France?")
    assert hf.render("raw text stays") == "raw text stays"
    prompts = [_chat("Is Paris the capital of France?"), _chat("Is Paris the capital of Germany?")]
    p_hf = hf.yes_probability(prompts)
    cpp = load_model("qwen2.5-coder-0.5b", n_ctx=512)
    p_cpp = cpp.yes_probability(prompts)
    # the answer head's features: the same hidden state and log-odds from both backends
    import numpy as np

    for (h, lo), (hc, _), p in zip(hf.hidden_states(prompts), cpp.hidden_states(prompts), p_hf):
        assert h.shape == hc.shape == (896,)
        assert 1 / (1 + np.exp(-lo)) == pytest.approx(p, abs=1e-4)
        assert float(h @ hc / np.linalg.norm(h) / np.linalg.norm(hc)) > 0.9
    assert p_hf[0] > p_hf[1]
    # float32 dequantised weights vs llama.cpp's quantised kernels: close, not identical
    assert p_hf == pytest.approx(p_cpp, abs=0.05)
    outs = hf.generate(
        [
            "<|im_start|>user\nList three colours, one per line, numbered.<|im_end|>\n<|im_start|>assistant\n1.",
            "<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n",
        ],
        12,
        stop=["\n"],
    )
    assert len(outs) == 2 and outs[0].strip() and "\n" not in outs[0]
