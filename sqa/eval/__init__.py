"""Evaluation: the official StrategyQA metrics (accuracy, Recall@10, SARI), the leaderboard
predictions format, and batch runs.

- :mod:`sqa.eval.metrics`, :mod:`sqa.eval.sari`: the metrics as the official evaluator computes them.
- :mod:`sqa.eval.leaderboard`: load / validate / write / score leaderboard predictions files.
- :mod:`sqa.eval.runner`: ``sqa eval`` batch runs, with :mod:`~sqa.eval.options` (what defines a
  run), :mod:`~sqa.eval.fewshot` (few-shot pools, cross-fitting), :mod:`~sqa.eval.rundir`
  (``run.json``, the resumable ``traces.jsonl``), :mod:`~sqa.eval.run_metrics` (predictions and
  metrics regenerated from traces) and :mod:`~sqa.eval.report` (``report.md``, ``report.png``).
- :mod:`sqa.eval.compare`: paired comparison of runs on the questions they share (``sqa compare``).
- :mod:`sqa.eval.retrieval`: Recall@10 of retrievers (``sqa eval retrieval``, experiments/retrieval.py).

The names below are imported on first use, so ``import sqa.eval.metrics`` stays light.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "accuracy": "metrics",
    "recall_at_k": "metrics",
    "mean_recall_at_k": "metrics",
    "mean_sari": "metrics",
    "load_predictions": "leaderboard",
    "validate_predictions": "leaderboard",
    "write_predictions": "leaderboard",
    "score_predictions": "leaderboard",
    "EvalOptions": "options",
    "EvalProgress": "runner",
    "EvalSummary": "run_metrics",
    "FewShotPool": "fewshot",
    "plan_fewshot": "fewshot",
    "fold_of": "fewshot",
    "run_eval": "runner",
    "finalize_run": "run_metrics",
    "read_traces": "rundir",
    "select_questions": "options",
    "compare_runs": "compare",
    "Comparison": "compare",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"sqa.eval.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'sqa.eval' has no attribute {name!r}")
