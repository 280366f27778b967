"""The readers on top of a ``LanguageModel`` and a ``Retriever`` (both from ``sqa.types``).

- ``models``: the model registry, GGUF assembly from PyPI part wheels, ``load_model``.
- ``llamacpp``: ``LlamaCppModel`` (CPU default, prefix KV-cache reuse); ``hf``: ``HFModel``
  (transformers + torch; CUDA bfloat16 batched when a GPU is present); ``chat``: ChatML rendering.
- ``facts``, ``factreader``, ``head``, ``facts_reasoner``: the default facts reader and its
  trained answer head.
- ``prompts``, ``operations``, ``reasoner``: the steps reader (``Reasoner``).
- ``trace``: ``StepTrace`` / ``ReasoningResult``.

Nothing here opens an index: ``sqa.pipeline`` wires backend, retriever and reader. Importing this
package does not import torch or load a model.
"""

from __future__ import annotations

from sqa.reasoner.models import DEFAULT_MODEL, MODELS, load_model
from sqa.reasoner.trace import ReasoningResult, StepTrace

__all__ = ["DEFAULT_MODEL", "MODELS", "ReasoningResult", "StepTrace", "load_model"]
