"""Retrieval evaluation: Recall@10 (official StrategyQA definition, :mod:`sqa.eval.metrics`) of any
retrievers over a split's labelled questions, with the question alone, the gold decompositions or
predicted ones from a file. Used by ``sqa eval retrieval`` and ``experiments/retrieval.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from sqa.eval.metrics import recall_at_k
from sqa.types import Question, Retriever, SqaError, Step


def load_decompositions(path: str | Path) -> dict[str, list[str]]:
    """Read a JSONL file of ``{"qid": str, "decomposition": [str, ...]}`` lines (blank lines
    skipped). Raises SqaError naming the file and line of a malformed line, or if it is missing."""
    path = Path(path)
    out: dict[str, list[str]] = {}
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise SqaError(f"{path}: decomposition file not found; give question, gold, or a JSONL file path") from None
    with f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise SqaError(
                    f"{path}:{lineno}: not valid JSON ({e.msg}); one {{qid, decomposition}} object a line"
                ) from None
            if (
                not isinstance(obj, dict)
                or not isinstance(obj.get("qid"), str)
                or not isinstance(obj.get("decomposition"), list)
                or not all(isinstance(s, str) for s in obj["decomposition"])
            ):
                raise SqaError(f'{path}:{lineno}: expected {{"qid": str, "decomposition": [str, ...]}}')
            out[obj["qid"]] = obj["decomposition"]
    return out


def official_method(decomposition: str) -> str:
    """The official baseline's name for a decomposition source: IR-Q, IR-ORA-D or IR-D."""
    return {"question": "IR-Q", "gold": "IR-ORA-D"}.get(decomposition, "IR-D")


def retrieval_questions(split: str, decomposition: str) -> tuple[list[Question], Callable[[Question], list[str]]]:
    """The labelled questions of ``split`` and each one's steps: none (``question``), the gold ones
    (``gold``) or those of a JSONL file (only the split's questions in it). Raises SqaError for a
    split without labels or a file that matches no question of the split."""
    from sqa.strategyqa import load_questions

    questions = [q for q in load_questions(split) if q.answer is not None]
    if not questions:
        raise SqaError(f"split {split!r} has no labelled questions (no gold evidence); use dev, train-2061 or train")
    if decomposition == "question":
        return questions, lambda q: []
    if decomposition == "gold":
        return questions, lambda q: list(q.decomposition)
    predicted = load_decompositions(decomposition)
    unknown = [qid for qid in predicted if qid not in {q.qid for q in questions}]
    questions = [q for q in questions if q.qid in predicted]
    if not questions:
        raise SqaError(
            f"{decomposition}: no qid of split {split!r} in this file "
            f"(e.g. {unknown[0]!r} is not in it); pass the split the decompositions were made for"
        )
    return questions, lambda q: predicted[q.qid]


def evaluate_retrievers(
    retrievers: Mapping[str, Retriever],
    questions: Sequence[Question],
    steps_of: Callable[[Question], list[str]] = lambda q: [],
    k: int = 10,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict]:
    """``{name: {"Recall@10", "seconds", "n"}}``: mean Recall@``k`` of each retriever's
    ``retrieve(question, steps, k)`` over ``questions`` and its total wall-clock seconds.
    ``on_progress(done, total)`` after each question."""
    recalls: dict[str, list[float]] = {name: [] for name in retrievers}
    seconds = {name: 0.0 for name in retrievers}
    for i, q in enumerate(questions, start=1):
        steps = [Step(s) for s in steps_of(q)]
        for name, r in retrievers.items():
            t = time.perf_counter()
            hits = r.retrieve(q.question, steps, k=k)
            seconds[name] += time.perf_counter() - t
            recalls[name].append(recall_at_k(q.evidence, [h.evidence_id for h in hits], k))
        if on_progress:
            on_progress(i, len(questions))
    return {
        name: {"Recall@10": sum(v) / len(v), "seconds": round(seconds[name], 3), "n": len(v)}
        for name, v in recalls.items()
    }
