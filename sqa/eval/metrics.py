"""The StrategyQA metrics, computed exactly as the official leaderboard evaluator does
(allenai/strategyqa-evaluator, ``evaluator/eval.py``; Geva et al., TACL 2021):

- Accuracy: predicted boolean == gold answer, averaged over questions.
- Recall@10: per annotator, E = the set of evidence IDs that annotator gave over all steps (only
  the ID lists; the tags "operation" and "no_evidence" are not IDs); score = |E ∩ first 10
  predicted IDs| / |E|, or 0 when E is empty; the maximum over annotators; averaged over questions.
- SARI of the decomposition: see :mod:`sqa.eval.sari`.

All per-question functions return floats in [0, 1]; the corpus-level ones their mean (0.0 for no
questions, as the evaluator's SARI does; the evaluator would divide by zero for the others).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from sqa.eval.sari import decomposition_sari
from sqa.types import Question

RETRIEVAL_LIMIT = 10


def annotator_ids(annotator: Sequence) -> list:
    """The evidence IDs of one annotator of a StrategyQA ``evidence`` annotation (steps -> entries,
    each entry an ID list or the tag "operation"/"no_evidence"), in the order written."""
    return [eid for step in annotator for entry in step if isinstance(entry, list) for eid in entry]


def annotator_evidence(evidence: Sequence) -> list[set[str]]:
    """One set of evidence IDs per annotator (:func:`annotator_ids`) of a StrategyQA ``evidence``
    annotation (annotators -> steps -> entries)."""
    return [set(annotator_ids(annotator)) for annotator in evidence]


def recall_at_k(evidence: Sequence, predicted: Sequence[str], k: int = RETRIEVAL_LIMIT) -> float:
    """Recall@k of one question: max over annotators of |E ∩ predicted[:k]| / |E| (0 for an
    annotator with no IDs, and 0 for a question with no annotators)."""
    retrieved = set(predicted[:k])
    scores = [len(e & retrieved) / len(e) if e else 0.0 for e in annotator_evidence(evidence)]
    return max(scores) if scores else 0.0


def _mean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def accuracy(pairs: Iterable[tuple[bool, bool]]) -> float:
    """Mean of ``predicted == gold`` over ``(predicted, gold)`` pairs."""
    return _mean(float(p == g) for p, g in pairs)


def mean_recall_at_k(
    questions: Sequence[Question], predicted: dict[str, Sequence[str]], k: int = RETRIEVAL_LIMIT
) -> float:
    """Mean Recall@k over ``questions``; ``predicted`` maps qid -> evidence IDs (best first).
    A question missing from ``predicted`` scores 0."""
    return _mean(recall_at_k(q.evidence, predicted.get(q.qid, ()), k) for q in questions)


def mean_sari(questions: Sequence[Question], predicted: dict[str, Sequence[str]]) -> float:
    """Mean decomposition SARI over ``questions``; ``predicted`` maps qid -> predicted steps
    (a missing question counts as an empty decomposition)."""
    return _mean(decomposition_sari(q.question, predicted.get(q.qid, ()), q.decomposition) for q in questions)
