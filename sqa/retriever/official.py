"""StrategyQA's official BM25 retrieval baselines (Geva et al., TACL 2021, section 5;
eladsegal/strategyqa ``strategy_qa_reader.py``: ``_ir_q``, ``_ir_ora_d``, ``_ir_d``), reproduced on
any ``SearchBackend`` as the baseline to beat.

- IR-Q: one query, the cleaned question; its top 10.
- IR-ORA-D (gold steps) / IR-D (predicted steps): one query per cleaned decomposition step, taken
  literally ("#1" is searched as written, never substituted); all hits of all steps pooled, sorted
  by raw BM25 score (best first, stable), duplicate evidence IDs removed, top 10.

Cleaning is :func:`sqa.retriever.clean.official_clean`. Each step contributes its top
``per_step_k`` hits (default 10).
"""

from __future__ import annotations

from typing import Sequence

from sqa.retriever.clean import official_clean
from sqa.retriever.fusion import pool_by_score
from sqa.types import Hit, SearchBackend, Step


class OfficialRetriever:
    """The official IR-Q / IR-ORA-D / IR-D retrieval over ``backend`` (see module doc).

    ``retrieve(question, [])`` is IR-Q; ``retrieve(question, steps)`` is IR-ORA-D for gold steps
    and IR-D for predicted ones. Step answers are ignored (the baseline searches each step as
    written). ``last_queries`` holds the cleaned queries of the latest ``retrieve`` call.
    """

    name = "official"

    def __init__(self, backend: SearchBackend, per_step_k: int = 10):
        self.backend = backend
        self.per_step_k = per_step_k
        self.last_queries: list[str] = []

    def query(self, text: str) -> str:
        """The cleaned query for a question or step."""
        return official_clean(text)

    def step_query(self, step: Step, prior_steps: Sequence[Step] = (), question: str | None = None) -> str:
        """The cleaned step text, "#k" literal (``prior_steps`` and ``question`` unused)."""
        return self.query(step.question)

    def retrieve_step(
        self, step: Step, prior_steps: Sequence[Step] = (), k: int = 10, question: str | None = None
    ) -> list[Hit]:
        """Top-``k`` hits for the cleaned step text (``prior_steps`` and ``question`` unused)."""
        return self.backend.search(self.step_query(step), k)

    def retrieve(self, question: str, steps: Sequence[Step] = (), k: int = 10) -> list[Hit]:
        """IR-Q without steps, else IR-ORA-D / IR-D pooling by raw BM25 score; ``k`` unique hits at most."""
        if not steps:
            self.last_queries = [self.query(question)]
            return pool_by_score([self.backend.search(self.last_queries[0], k)], k)
        self.last_queries = [self.query(s.question) for s in steps]
        return pool_by_score([self.backend.search(q, max(k, self.per_step_k)) for q in self.last_queries], k)
