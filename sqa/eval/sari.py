"""SARI (Xu, Napoles, Pavlick, Chen, Callison-Burch: "Optimizing Statistical Machine Translation
for Text Simplification", TACL 2016), with the semantics of Tensor2Tensor's ``sari_hook.py`` that
the official StrategyQA leaderboard evaluator (allenai/strategyqa-evaluator, ``evaluator/sari.py``)
uses:

- n-grams of orders 1..4 are counted as *sets* (each distinct n-gram counts once);
- each of keep / add / delete is an F-score per order with 0/0 defined as 1 (an empty selection has
  precision 1, an empty relevant set recall 1), and 0 whenever precision or recall is 0;
- keep and add are F1; delete is precision only (beta = 0), as in the paper; the deletion score is
  the "fixed" one: relevant = n-grams of the source that are not in the targets
  (cocoxu/simplification issue 6);
- with several targets, an n-gram's target weight is (number of targets holding it) / (number of
  non-empty targets); add uses unweighted (0/1) target n-grams;
- SARI = (mean_n keep_n + mean_n add_n + mean_n del_n) / 3, in [0, 1].

Tokens are strings; the StrategyQA evaluator tokenizes by ``text.replace("?", " ?").split()``
(see :func:`sqa_tokenize`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

MAX_GRAM = 4


def sqa_tokenize(text: str) -> list[str]:
    """The StrategyQA evaluator's tokenization: a space before every "?", then split on whitespace."""
    return text.replace("?", " ?").split()


def _ngram_set(tokens: Sequence[str], n: int) -> Counter:
    """Distinct n-grams of ``tokens`` as a Counter with every count 1 (empty if len < n)."""
    return Counter({tuple(tokens[i : i + n]): 1 for i in range(len(tokens) - n + 1)})


def _fbeta(true_positives: float, selected: float, relevant: float, beta: float = 1.0) -> float:
    """F-beta with 0/0 := 1 for precision and recall; 0 when either is 0; beta=0 gives precision."""
    precision = true_positives / selected if selected > 0 else 1.0
    if beta == 0:
        return precision
    recall = true_positives / relevant if relevant > 0 else 1.0
    if precision > 0 and recall > 0:
        b2 = beta * beta
        return (1 + b2) * precision * recall / (b2 * precision + recall)
    return 0.0


def _keep(src: Counter, pred: Counter, tgt: Counter) -> float:
    src_pred = src & pred
    src_tgt = src & tgt
    return _fbeta(sum((src_pred & src_tgt).values()), sum(src_pred.values()), sum(src_tgt.values()))


def _add(src: Counter, pred: Counter, tgt01: Counter) -> float:
    added = pred - src
    return _fbeta(sum((added & tgt01).values()), sum(added.values()), sum((tgt01 - src).values()))


def _delete(src: Counter, pred: Counter, tgt: Counter) -> float:
    deleted = src - pred
    src_not_tgt = src - tgt
    return _fbeta(sum((deleted & src_not_tgt).values()), sum(deleted.values()), sum(src_not_tgt.values()), beta=0)


@dataclass(frozen=True)
class SariScore:
    """SARI and its three components (each averaged over n-gram orders 1..4), all in [0, 1]."""

    sari: float
    keep: float
    add: float
    delete: float


def sari_score(
    source: Sequence[str], prediction: Sequence[str], targets: Sequence[Sequence[str]], max_gram: int = MAX_GRAM
) -> SariScore:
    """SARI of one tokenized ``prediction`` against one or more tokenized ``targets`` for the
    tokenized ``source`` (see the module docstring for the exact definition)."""
    keeps, adds, dels = [], [], []
    for n in range(1, max_gram + 1):
        src = _ngram_set(source, n)
        pred = _ngram_set(prediction, n)
        weighted: Counter = Counter()
        nonempty = 0
        for t in targets:
            c = _ngram_set(t, n)
            if c:
                weighted += c
                nonempty += 1
        tgt01 = Counter({g: 1 for g in weighted})
        for g in weighted:
            weighted[g] = weighted[g] / nonempty
        keeps.append(_keep(src, pred, weighted))
        dels.append(_delete(src, pred, weighted))
        adds.append(_add(src, pred, tgt01))
    keep, add, delete = sum(keeps) / max_gram, sum(adds) / max_gram, sum(dels) / max_gram
    return SariScore(sari=(keep + add + delete) / 3.0, keep=keep, add=add, delete=delete)


def decomposition_sari(question: str, predicted_steps: Sequence[str], gold_steps: Sequence[str]) -> float:
    """SARI of a predicted decomposition as the StrategyQA leaderboard computes it: source = the
    question, prediction = the predicted steps joined by spaces, target = the gold steps joined by
    spaces, all tokenized with :func:`sqa_tokenize`."""
    return sari_score(
        sqa_tokenize(question), sqa_tokenize(" ".join(predicted_steps)), [sqa_tokenize(" ".join(gold_steps))]
    ).sari
