"""A recorded run's outputs regenerated with today's code from its files alone: ``run.json`` (the
options and index identity), its traces (``traces.jsonl``, or the ``traces.jsonl.xz`` a recorded
run under ``bench/results/runs/`` keeps) and its earlier ``metrics.json`` (for how many questions
it set out to answer and an out-of-fold run's cross-fitting figures, which come from its features
and are not recomputed, except that each accuracy's 95 % interval there is redrawn as today's
Wilson score interval from its accuracy and n: ``wilson_refreshed``). A steps run recorded with another final-answer decision than today's
keeps its own (``run.json``'s identity), as its traces' answers were made with it. No model, index or features store is opened, nothing is read anew.

Written: ``predictions.json`` (the same answers), ``metrics.json``, ``report.md``, ``report.html``
and ``report.png`` (:func:`sqa.eval.run_metrics.finalize_run`); ``run.json`` gains ``protocol``
when the run covers a named question set (:func:`sqa.eval.protocols.protocol_of`), as a resumed
run's does.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sqa.eval.options import EvalOptions
from sqa.eval.protocols import protocol_of
from sqa.eval.rundir import RUN_FILE, TRACES_FILE, read_recorded_traces
from sqa.eval.run_metrics import METRICS_FILE, EvalSummary, finalize_run
from sqa.jsonio import write_json_atomic
from sqa.types import SqaError


def migrated_out_of_fold(metrics: dict) -> dict | None:
    """An earlier ``metrics.json``'s ``out_of_fold`` in today's vocabulary: its cross-fitting
    scheme and note, once top-level ``protocol`` / ``protocol_note``, moved into it as ``scheme`` /
    ``note`` (``protocol`` now names the question set, as in ``run.json``); None without one."""
    oof = metrics.get("out_of_fold")
    if not isinstance(oof, dict):
        return None
    old = metrics.get("protocol")
    scheme = oof.get("scheme") or (old if isinstance(old, str) and old.startswith("out-of-fold") else None)
    note = oof.get("note") or metrics.get("protocol_note")
    return {**({"scheme": scheme} if scheme else {}), **({"note": note} if note else {}), **oof}


def wilson_refreshed(obj):
    """``obj`` (an earlier ``out_of_fold`` block) with every ``interval95`` beside an ``accuracy``
    and a question count ``n`` recomputed as the Wilson score interval of ``round(accuracy * n)``
    right of ``n`` (``sqa.facts.head.wilson_interval``; the accuracies are recorded to 4 places, so
    the count is exact below 5,000 questions); runs recorded before sqa used it had the normal
    approximation there. Everything else is returned as it was."""
    from sqa.facts.head import wilson_interval

    if isinstance(obj, list):
        return [wilson_refreshed(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: wilson_refreshed(v) for k, v in obj.items()}
    n, acc = out.get("n"), out.get("accuracy")
    if isinstance(out.get("interval95"), list) and isinstance(n, int) and n > 0 and isinstance(acc, (int, float)):
        out["interval95"] = [round(v, 4) for v in wilson_interval(round(acc * n), n)]
    return out


def regenerate_run(run_dir: str | Path, *, plots: bool = True) -> EvalSummary:
    """Rewrite the outputs of the run in ``run_dir`` (the module doc) and return its summary.

    The run's questions: the first ``options.limit`` of its split, else as many as its earlier
    ``metrics.json`` says it set out to answer (``n_questions``: runs recorded before ``limit`` was
    kept), else the whole split. Raises SqaError (one line) for a folder without ``run.json`` or
    traces, or a run of a ``--dataset`` file (its questions are in that file, not here)."""
    from sqa.strategyqa import load_questions

    run_dir = Path(run_dir)
    try:
        run = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SqaError(f"{run_dir / RUN_FILE}: cannot read the run's options ({e})") from None
    done = read_recorded_traces(run_dir)
    if not done:
        raise SqaError(f"{run_dir}: no {TRACES_FILE}(.xz) records; its outputs come from them")
    options = EvalOptions.from_dict(run.get("options") or {})
    if options.split == "custom":
        raise SqaError(f"{run_dir}: a --dataset run; re-run `sqa eval --dataset FILE --out {run_dir}` to regenerate it")
    try:
        old = json.loads((run_dir / METRICS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    questions = load_questions(options.split)
    n = options.limit or old.get("n_questions") or len(questions)
    questions = questions[:n]
    protocol = options.protocol or run.get("protocol") or protocol_of(options.split, len(questions))
    if protocol and run.get("protocol") != protocol:
        run["protocol"] = protocol
        write_json_atomic(run_dir / RUN_FILE, run)
    options = dataclasses.replace(options, protocol=protocol)
    extra: dict = {}
    oof = migrated_out_of_fold(old)
    if oof:
        extra["out_of_fold"] = wilson_refreshed(oof)
    decision = (run.get("identity") or {}).get("decision")  # a steps run recorded before today's decision
    if options.reader == "steps" and decision and decision != options.decision:
        extra.update(decision=decision, final_answer=decision)
    return finalize_run(
        run_dir, options, questions, done, index_info=run.get("index") or None, plots=plots, extra=extra or None
    )
