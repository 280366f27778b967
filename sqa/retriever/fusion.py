"""How several ranked hit lists (one per query: the question, each decomposition step) become one.

- :func:`pool_by_score`: StrategyQA's official pooling (Geva et al., TACL 2021; eladsegal/strategyqa
  ``_ir_ora_d``): every hit of every list sorted by raw BM25 score, duplicates dropped. A step whose
  query has high raw scores (long, rare words) can crowd out all the others.
- :func:`round_robin`: ours: rank 1 of every list, then rank 2, ..., duplicates skipped, so every
  list contributes its best hits first. Chosen on train-2061 over reciprocal-rank fusion
  (Cormack et al., SIGIR 2009), max-normalised sums and raw-score pooling (measurements:
  bench/results/retrieval.json, bench/results/notes.md).
"""

from __future__ import annotations

from typing import Sequence

from sqa.types import Hit


def pool_by_score(hit_lists: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
    """The official pooling: all hits sorted by raw score (descending; ties keep list order, then
    rank), first occurrence of each evidence ID kept, top ``k``, re-ranked 1..k; ``Hit.score`` stays
    the backend's BM25."""
    pooled = sorted((h for hits in hit_lists for h in hits), key=lambda h: -h.score)
    out: list[Hit] = []
    seen: set[str] = set()
    for h in pooled:
        if h.evidence_id in seen:
            continue
        seen.add(h.evidence_id)
        out.append(Hit(paragraph=h.paragraph, score=h.score, rank=len(out) + 1))
        if len(out) == k:
            break
    return out


def round_robin(hit_lists: Sequence[Sequence[Hit]], k: int | None = None) -> list[Hit]:
    """Rank 1 of each list (in list order), then rank 2 of each, ...; an evidence ID already taken
    is skipped. Returns the first ``k`` (all if None), ranked 1..n, with ``Hit.score`` = -rank (no
    BM25 value is comparable across the lists; see ``sqa.types.Hit``)."""
    out: list[Hit] = []
    seen: set[str] = set()
    depth = max((len(h) for h in hit_lists), default=0)
    for r in range(depth):
        for hits in hit_lists:
            if r < len(hits) and hits[r].evidence_id not in seen:
                seen.add(hits[r].evidence_id)
                out.append(Hit(paragraph=hits[r].paragraph, score=float(-(len(out) + 1)), rank=len(out) + 1))
    return out[:k] if k is not None else out
