"""sqa: retrieval-backed multi-step question answering for StrategyQA.

Stages (each its own package): ``sqa.indexing`` (corpus readers, BM25 backends) ->
``sqa.retriever`` (per-step evidence) -> ``sqa.models``, ``sqa.steps``, ``sqa.facts`` (models, decomposer, readers) -> ``sqa.eval``
(metrics, batch runs). Shared types live in ``sqa.types``.
"""

__version__ = "0.1.0"
