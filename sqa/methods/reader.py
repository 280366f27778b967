"""``MethodReader``: a :class:`sqa.methods.base.Method` as a :class:`sqa.types.BatchReader`, so
``sqa eval``, ``sqa ask`` and ``sqa.evaluate`` run any method as they run the facts and steps
readers: one :class:`sqa.methods.toolbox.Tools` per question, questions answered at once up to the
model's concurrency (a served model's measured slots; 1 in-process), results reported in order.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from sqa.methods.toolbox import Tools
from sqa.trace import ReasoningResult
from sqa.types import Question


class MethodReader:
    """Answers batches of questions with ``method`` over ``model`` (a ``LanguageModel``) and
    ``backend`` (a ``SearchBackend``, None when the method does not search) with the resolved
    ``settings``. ``concurrency``: questions answered at once (default: the model's
    ``capabilities.concurrency``)."""

    def __init__(self, method, model, backend, settings: dict, concurrency: int | None = None):
        self.method, self.model, self.backend, self.settings = method, model, backend, settings
        self.concurrency = max(1, concurrency or model.capabilities.concurrency)

    def answer_batch(
        self, questions: Sequence[Question], decomposition: str = "question", on_result: Callable | None = None
    ) -> list[ReasoningResult]:
        """``ReasoningResult`` per question, in order, each passed to ``on_result`` as soon as it
        and those before it are done. ``decomposition`` is ignored (a method makes its own steps)."""
        results: list[ReasoningResult] = []
        if self.concurrency <= 1 or len(questions) <= 1:
            for q in questions:
                results.append(self.answer_one(q))
                if on_result:
                    on_result(results[-1])
            return results
        with ThreadPoolExecutor(min(self.concurrency, len(questions))) as pool:
            futures = [pool.submit(self.answer_one, q) for q in questions]
            try:
                for f in futures:
                    results.append(f.result())
                    if on_result:
                        on_result(results[-1])
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
        return results

    def answer_one(self, q: Question) -> ReasoningResult:
        """One question's ``ReasoningResult``: the method's answer, the first 10 distinct
        paragraphs it retrieved, its steps, and ``method`` (name, rule, read, votes, final text,
        cost, calls log)."""
        tools = Tools(self.model, self.backend, self.settings)
        started = time.perf_counter()
        out = self.method.answer(q.question, tools)
        seconds = time.perf_counter() - started
        rule = self.settings.get("answer_rule") or self.method.answer_rule
        return ReasoningResult(
            question=q.question,
            steps=list(out.steps),
            answer=bool(out.answer),
            p_yes=float(out.p_yes),
            paragraphs=tools.evidence_ids(),
            qid=q.qid or None,
            timings={"total": round(seconds, 4)},
            model=self.model.name,
            decision=f"method:{self.method.name}:{rule}",
            calibrated=False,
            method={
                "name": self.method.name,
                "answer_rule": rule,
                "read": bool(out.read),
                "unread_outputs": tools.unread,
                "votes": list(out.votes),
                "text": out.text,
                "cost": tools.cost.to_dict(),
                "calls": tools.log,
            },
        )
