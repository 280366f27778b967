"""``BackendRetriever``: the minimal ``Retriever``, straight on a ``SearchBackend`` (no cleaning, no
title boost): each step's query is its text with "#k" resolved, the steps' lists pooled by raw
BM25 score as StrategyQA's IR-D does. A reference point and a stand-in for tests."""

from __future__ import annotations

from typing import Sequence

from sqa.retriever.clean import resolve_references
from sqa.retriever.fusion import pool_by_score
from sqa.types import Hit, SearchBackend, Step


class BackendRetriever:
    """See the module doc. ``retrieve(question, [])`` searches the question alone;
    ``retrieve(question, steps)`` pools the steps' top-``k`` lists (``fusion.pool_by_score``)."""

    name = "backend"

    def __init__(self, backend: SearchBackend):
        self.backend = backend
        self.last_queries: list[str] = []

    def step_query(self, step: Step, prior_steps: Sequence[Step] = (), question: str | None = None) -> str:
        """The step's text with "#k" replaced by known answers (unanswered ones by that step's
        content words; ``sqa.retriever.clean.resolve_references``)."""
        return resolve_references(step.question, [(s.question, s.answer) for s in prior_steps])

    def retrieve_step(
        self, step: Step, prior_steps: Sequence[Step] = (), k: int = 10, question: str | None = None
    ) -> list[Hit]:
        return self.backend.search(self.step_query(step, prior_steps), k)

    def retrieve(self, question: str, steps: Sequence[Step] = (), k: int = 10) -> list[Hit]:
        if not steps:
            self.last_queries = [question]
            return pool_by_score([self.backend.search(question, k)], k)
        self.last_queries = [self.step_query(s, steps[:i]) for i, s in enumerate(steps)]
        return pool_by_score([self.backend.search(q, k) for q in self.last_queries], k)
