"""Per-step evidence retrieval on top of a ``SearchBackend``.

Three retrievers share the ``sqa.types.Retriever`` Protocol:
- ``OfficialRetriever`` (``sqa.retriever.official``): StrategyQA's own BM25 baselines, IR-Q and
  IR-ORA-D / IR-D (Geva et al., TACL 2021), reproduced as the baseline to beat.
- ``StepRetriever`` (``sqa.retriever.steps``): the step retriever, named ``step`` (see its docstring for what it adds).
- ``BackendRetriever`` (``sqa.retriever.backend``): the minimal one, straight on the backend.

How several hit lists become one is in ``sqa.retriever.fusion``; query cleaning and "#k"
resolution in ``sqa.retriever.clean``.
"""

from __future__ import annotations

from sqa.types import Retriever

__all__ = ["Retriever"]
