"""Few-shot pools and cross-fitting: a question is never among the few-shot examples used to answer it.

Geva et al. (TACL 2021) split the 2,290 train questions into the baselines' 2,061 / 229 train / dev
split.

- ``dev`` and ``test`` questions draw examples from ``train-2061``;
- ``train`` (and the train part of ``all``) uses cross-fitting: the 2,290 questions are split into
  ``folds`` folds by ``sha1(qid) mod folds`` and a question of fold f draws examples from the other
  folds; ``train-2061`` is cross-fitted the same way within its 2,061 questions;
- a ``--dataset`` file (split ``custom``) draws from train-2061 minus the file's own questions.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

from sqa.eval.options import DEFAULT_FOLDS
from sqa.strategyqa import load_questions
from sqa.types import Question, SqaError


def fold_of(qid: str, folds: int = DEFAULT_FOLDS) -> int:
    """Cross-fitting fold of a question: the first 8 bytes of ``sha1(qid)`` (big-endian) mod ``folds``.
    Deterministic across machines and Python versions (unlike ``hash``)."""
    return int.from_bytes(hashlib.sha1(qid.encode("utf-8")).digest()[:8], "big") % folds


@dataclass(frozen=True)
class FewShotPool:
    """The questions a reader may draw few-shot examples from, for one group of evaluated
    questions. ``name`` is e.g. ``"train-2061"`` or ``"train minus fold 2/5"``."""

    name: str
    questions: tuple[Question, ...]
    source_split: str
    fold: int | None = None
    folds: int | None = None

    @property
    def qids(self) -> frozenset[str]:
        return frozenset(q.qid for q in self.questions)

    def describe(self) -> dict:
        """JSON description: name, source split, excluded fold, size and sha1 of the sorted qids."""
        digest = hashlib.sha1("\n".join(sorted(q.qid for q in self.questions)).encode()).hexdigest()
        return {
            "name": self.name,
            "source_split": self.source_split,
            "excluded_fold": self.fold,
            "folds": self.folds,
            "n": len(self.questions),
            "qids_sha1": digest,
        }


def plan_fewshot(
    split: str, questions: Sequence[Question], folds: int = DEFAULT_FOLDS
) -> list[tuple[FewShotPool, list[Question]]]:
    """Group ``questions`` (of ``split``) by the few-shot pool they must use; see the module doc.

    Returns ``[(pool, questions answered with it)]`` with questions kept in the given order within a
    group and groups ordered by first appearance. Raises SqaError if a question would be in its own
    pool (cannot happen for the shipped splits; guards against a changed split file).
    """
    train = load_questions("train")
    t2061 = load_questions("train-2061")
    train_ids = {q.qid for q in train}
    t2061_ids = {q.qid for q in t2061}
    pools: dict[str, FewShotPool] = {}
    groups: dict[str, list[Question]] = {}

    def fold_pool(base: list[Question], base_name: str, f: int) -> FewShotPool:
        name = f"{base_name} minus fold {f}/{folds}"
        if name not in pools:
            pools[name] = FewShotPool(name, tuple(q for q in base if fold_of(q.qid, folds) != f), base_name, f, folds)
        return pools[name]

    for q in questions:
        if split in ("train", "all") and q.qid in train_ids:
            pool = fold_pool(train, "train", fold_of(q.qid, folds))
        elif split == "train-2061" and q.qid in t2061_ids:
            pool = fold_pool(t2061, "train-2061", fold_of(q.qid, folds))
        elif split == "custom":  # a --dataset file: train-2061 minus the file's own questions
            name = "train-2061 minus the dataset's questions"
            if name not in pools:
                mine = {x.qid for x in questions}
                pools[name] = FewShotPool(name, tuple(x for x in t2061 if x.qid not in mine), "train-2061")
            pool = pools[name]
        else:
            pool = pools.setdefault("train-2061", FewShotPool("train-2061", tuple(t2061), "train-2061"))
        if q.qid in pool.qids:
            raise SqaError(
                f"question {q.qid} would be among its own few-shot examples (pool {pool.name}); "
                "check sqa/_data/strategyqa/split_qids.json.xz"
            )
        groups.setdefault(pool.name, []).append(q)
    return [(pools[name], qs) for name, qs in groups.items()]


def fewshot_description(split: str, folds: int = DEFAULT_FOLDS) -> dict:
    """What ``metrics.json`` says about where few-shot examples came from for ``split``."""
    if split == "custom":
        rule = "every question of the --dataset file: examples from train-2061 minus the file's own questions"
    elif split in ("dev", "test"):
        rule = f"every {split} question: examples from train-2061 (2,061 questions, disjoint from {split})"
    elif split == "train-2061":
        rule = (
            f"cross-fitting over train-2061: fold = sha1(qid)[:8] mod {folds}; a question of fold f "
            f"draws examples from train-2061 minus fold f"
        )
    else:
        rule = (
            f"cross-fitting over train (2,290): fold = sha1(qid)[:8] mod {folds}; a question of fold f "
            f"draws examples from train minus fold f" + ("; test questions from train-2061" if split == "all" else "")
        )
    return {"rule": rule, "folds": folds if split in ("train", "all", "train-2061") else None}
