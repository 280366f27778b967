"""Accuracy at coverage: how accurate the reader is when it answers only the questions it is surest
of (selective prediction; El-Yaniv & Wiener, "On the Foundations of Noise-free Selective
Classification", JMLR 2010; the risk-coverage curve of Geifman & El-Yaniv, NeurIPS 2017).

Questions are ranked by the confidence of the given answer, max(P(yes), 1 - P(yes)) (the
calibrated P(yes) of an answer head, or the model's own where the trace says ``calibrated``
false), most confident first, ties in split order; the accuracy at coverage c is the accuracy of
the first ceil(c * n) of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

COVERAGES = (0.5, 0.8, 1.0)
CURVE_STEPS = 20  # the curve in metrics.json: coverage 0.05, 0.10, ..., 1.00


def record_calibrated(rec: dict) -> bool:
    """Whether a trace record's P(yes) came from an answer head: its ``calibrated`` field, or, in
    records written before the field existed, whether its ``decision`` names a head ("head:...")."""
    if "calibrated" in rec:
        return bool(rec["calibrated"])
    return str(rec.get("decision", "")).startswith("head")


def ranked_correct(rows: Sequence[dict]) -> list[bool]:
    """``correct`` of the labelled rows (``question_rows``: confidence, correct), most confident first."""
    labelled = [r for r in rows if r.get("correct") is not None and r.get("confidence") is not None]
    order = sorted(range(len(labelled)), key=lambda i: -float(labelled[i]["confidence"]))
    return [bool(labelled[i]["correct"]) for i in order]


def accuracy_at(correct: Sequence[bool], coverage: float) -> dict | None:
    """``{"coverage", "n", "Accuracy"}`` of the first ceil(coverage * len) of ``correct`` (ranked
    most confident first); None for no rows. Raises ValueError for a coverage outside (0, 1]."""
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    if not correct:
        return None
    n = max(1, math.ceil(coverage * len(correct) - 1e-9))
    return {"coverage": coverage, "n": n, "Accuracy": sum(correct[:n]) / n}


def coverage_metrics(rows: Sequence[dict]) -> dict | None:
    """The ``metrics.json`` entry ``accuracy_at_coverage``: ``{"at": [accuracy_at(c) for c in
    COVERAGES], "curve": [accuracy_at(k / CURVE_STEPS) ...], "calibrated": bool, "note"}``; None
    without labelled rows. ``calibrated`` is False when any row's P(yes) is the model's own."""
    correct = ranked_correct(rows)
    if not correct:
        return None
    calibrated = all(r.get("calibrated", True) for r in rows if r.get("correct") is not None)
    how = "calibrated by the answer head" if calibrated else "the model's own P(yes), uncalibrated"
    return {
        "at": [accuracy_at(correct, c) for c in COVERAGES],
        "curve": [accuracy_at(correct, k / CURVE_STEPS) for k in range(1, CURVE_STEPS + 1)],
        "calibrated": calibrated,
        "note": f"answering only the most confident share of the questions, by max(P(yes), 1 - P(yes)) ({how})",
    }
