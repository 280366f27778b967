"""The model runtimes behind the ``LanguageModel`` protocol (``sqa.types``).

- ``registry``: the model registry, GGUF assembly from PyPI part wheels, ``load_model``.
- ``llamacpp``: ``LlamaCppModel`` (CPU default, prefix KV-cache reuse).
- ``hf``: ``HFModel`` (transformers + torch; CUDA bfloat16 batched when a GPU is present).
- ``openai``: ``OpenAIModel`` (``--model openai:NAME``: a model behind OpenAI-compatible servers),
  with ``served_url`` (URLs, key), ``served_http`` (one server's client and errors),
  ``served_probe`` (load-time checks, fingerprint), ``served_load`` (those checks recorded, taken
  as recorded until the first cache miss), ``served_read`` (read-outs from JSON) and
  ``served_cache`` (response cache, cost); docs/served.md.
- ``chat``: ChatML rendering.

Importing this package does not import torch or load a model.
"""

from __future__ import annotations

from sqa.models.registry import DEFAULT_MODEL, MODELS, load_model

__all__ = ["DEFAULT_MODEL", "MODELS", "load_model"]
