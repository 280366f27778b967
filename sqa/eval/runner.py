"""Batch evaluation of a reader over a StrategyQA split, resumable from disk.

A run directory holds ``run.json`` and ``traces.jsonl`` (:mod:`sqa.eval.rundir`: what defines the
run, and one fsync'd line per answered question, the source of truth), and ``predictions.json``
(official leaderboard format), ``metrics.json``, ``report.md``, ``report.png``, regenerated from
``traces.jsonl`` at the end of every session, also after Ctrl-C (:mod:`sqa.eval.run_metrics`).
Few-shot examples never include the question answered (:mod:`sqa.eval.fewshot`); the options
are :class:`sqa.eval.options.EvalOptions`.

The reader is anything with ``answer_batch(questions, decomposition=..., on_result=...)``
(:class:`sqa.types.BatchReader`); ``run_eval`` asks a factory for one per few-shot pool.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from sqa.eval.fewshot import FewShotPool, fewshot_description, fold_of, plan_fewshot  # noqa: F401  (re-exported)
from sqa.eval.options import (
    DECOMPOSITIONS,
    DEFAULT_FOLDS,
    ORACLES,
    READERS,
    STEPS_DECISION,  # noqa: F401
    EvalOptions,
    select_questions,
)
from sqa.eval.run_metrics import (
    METRICS_FILE,
    PREDICTIONS_FILE,
    REPORT_MD,
    REPORT_PNG,  # noqa: F401
    EvalSummary,
    calibration_bins,
    compute_metrics,
    expected_calibration_error,
    finalize_run,
    question_rows,
    signal_accuracy,
)
from sqa.eval.rundir import (
    RUN_FILE,
    TRACES_FILE,
    TraceLog,
    check_run_file,
    now,
    read_traces,  # noqa: F401
    result_from_dict,
)
from sqa.jsonio import write_json_atomic
from sqa.trace import ReasoningResult
from sqa.types import BatchReader, Question, SqaError


@dataclass
class EvalProgress:
    """Progress of a run: ``done`` of ``total`` questions answered (``new`` in this session);
    ``correct`` of ``scored`` labelled ones right; ``cost``: a served model's calls and tokens in
    this session (``sqa.models.served_cache.Cost.to_dict()``), None for others."""

    done: int
    total: int
    new: int
    correct: int
    scored: int
    cost: dict | None = None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.scored if self.scored else None


@contextmanager
def _defer_sigint() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) while a block runs (writing trace lines), then raise KeyboardInterrupt.
    A no-op outside the main thread, where signal handlers cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if received and old is not signal.SIG_IGN:  # (a background job that ignores Ctrl-C goes on ignoring it)
        raise KeyboardInterrupt


def _batches(items: Sequence, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def run_eval(
    options: EvalOptions,
    out_dir: str | Path,
    reader_for: Callable[[FewShotPool], BatchReader],
    *,
    questions: Sequence[Question] | None = None,
    index_info: dict | None = None,
    on_progress: Callable[[EvalProgress], None] | None = None,
) -> EvalSummary:
    """Evaluate ``questions`` (default: ``select_questions(options.split, options.limit)``) into
    ``out_dir``, resuming what ``traces.jsonl`` already holds.

    ``reader_for(pool)`` returns the reader to use for the questions whose few-shot pool is
    ``pool``; it is called only when some question still needs answering (a finished run just
    regenerates its outputs). ``index_info`` (backend, paragraph_count, ...) goes into
    ``run.json``/``metrics.json``. ``on_progress`` is called once at the start and after each answered question.

    Ctrl-C (KeyboardInterrupt) is caught: lines being written are finished, the outputs are
    regenerated from what is done, and the summary comes back with ``interrupted=True``. Any other
    error also regenerates the outputs, then propagates. Raises SqaError when ``out_dir`` holds a run
    with other options, when another process is writing it, or when the reader returns results
    that do not match the batch.
    """
    out_dir = Path(out_dir)
    if questions is None:
        questions = select_questions(options.split, options.limit)
    out_dir.mkdir(parents=True, exist_ok=True)
    run_info = check_run_file(out_dir, options, index_info)
    interrupted = False
    with TraceLog(out_dir / TRACES_FILE) as log:
        records = log.read()
        done: dict[str, dict] = {}
        for rec in records:
            done.setdefault(rec["qid"], rec)
        stats = EvalProgress(
            done=sum(1 for q in questions if q.qid in done), total=len(questions), new=0, correct=0, scored=0
        )
        for q in questions:
            rec = done.get(q.qid)
            if rec is not None and q.answer is not None:
                stats.scored += 1
                stats.correct += int(bool(rec.get("answer")) == q.answer)
        if on_progress:
            on_progress(stats)
        pending = [q for q in questions if q.qid not in done]
        reported: dict[int, dict] = {}
        demos = None
        if options.reader == "facts":
            from sqa.facts.prompt import demo_qids

            demos = demo_qids()
        served: list[dict] = []  # the served models' server_info (a load from a record turns "live" mid-run)
        cost = None
        try:
            try:
                for pool, group in plan_fewshot(options.split, pending, options.folds):
                    reader = reader_for(pool)
                    shown = _method_demonstrations(reader, questions)
                    demos = shown if shown is not None else demos
                    model = reader.model  # None for a stand-in reader without a model
                    readouts = model.readout_stats if model is not None else None  # a served model's yes/no counts
                    cost = model.cost if model is not None else None  # a served model's calls and tokens
                    _record_server(out_dir, model.server_info if model is not None else None)
                    served += [model.server_info] if model is not None and model.server_info else []
                    _record_model(out_dir, model)
                    for batch in _batches(group, options.batch_size):
                        clock = [time.perf_counter()]
                        written: list[dict] = []

                        def on_result(r: ReasoningResult, batch=batch, written=written, clock=clock, pool=pool) -> None:
                            # one durable line per finished question, so Ctrl-C / kill -9 loses at most the
                            # question being worked on
                            if len(written) >= len(batch):
                                raise SqaError(
                                    f"the reader returned more results than the {len(batch)} questions "
                                    f"of a batch (first qid {batch[0].qid}); this is a bug in the reader"
                                )
                            q = batch[len(written)]
                            _check_qid(q, r)
                            now = time.perf_counter()
                            rec = _record(q, r, pool, now - clock[0], len(batch))
                            if demos is not None:  # its answer is in the reader's or method's prompt (leaked)
                                rec["eval"]["demonstration"] = q.qid in demos
                            clock[0] = now
                            if readouts is not None:
                                # unread since the last written question (in a lockstep batch the
                                # first question written carries the batch's count; the sum is exact)
                                seen = reported.get(id(readouts), {k: 0 for k in readouts})
                                rec["eval"]["yes_no_unread"] = {k: readouts[k] - seen.get(k, 0) for k in readouts}
                                reported[id(readouts)] = dict(readouts)
                            if cost is not None:  # calls and tokens since the last written question
                                from copy import copy

                                rec["eval"]["cost"] = cost.minus(reported.get(id(cost), type(cost)()))
                                reported[id(cost)] = copy(cost)
                            with _defer_sigint():  # the line and the bookkeeping, or neither
                                log.append([rec])
                                written.append(rec)
                                done[q.qid] = rec
                                if q.answer is not None:
                                    stats.scored += 1
                                    stats.correct += int(bool(rec["answer"]) == q.answer)
                                stats.done += 1
                                stats.new += 1
                                stats.cost = cost.to_dict() if cost is not None else None
                            if on_progress:
                                on_progress(stats)

                        try:
                            results = reader.answer_batch(
                                batch, decomposition=options.decomposition, on_result=on_result
                            )
                        except SqaError as e:  # name the question being worked on
                            at = batch[min(len(written), len(batch) - 1)].qid
                            if at and at not in str(e):
                                raise SqaError(f"question {at}: {e}") from None
                            raise
                        if len(results) != len(batch) or len(written) != len(batch):
                            raise SqaError(
                                f"the reader returned {len(results)} results ({len(written)} reported) "
                                f"for a batch of {len(batch)} questions (first qid {batch[0].qid}); "
                                "this is a bug in the reader"
                            )
            except KeyboardInterrupt:
                interrupted = True
        finally:
            # outputs come from the file, the source of truth, not from memory
            on_disk: dict[str, dict] = {}
            for rec in log.read():
                on_disk.setdefault(rec["qid"], rec)
            summary = finalize_run(
                out_dir, options, questions, on_disk, index_info=run_info.get("index") or index_info, new=stats.new
            )
            # requests answered for questions not written (the run stopped mid-batch): counted too (issue 50, 5f)
            _record_cost(out_dir, on_disk, cost.minus(reported.get(id(cost), type(cost)())) if cost else None)
            for info in served[-1:]:  # as it stands now: contacted or not
                _record_server(out_dir, dict(info))
    summary.interrupted = interrupted
    summary.repaired_bytes = log.repaired_bytes
    return summary


def _record_server(out_dir: Path, info: dict | None) -> None:
    """Add ``info`` (a served model's ``server_info``: API, URL without credentials, model, engine,
    endpoint, read-out, fingerprint) to ``run.json`` as ``"server"``: where this session's answers
    come from. A run resumed through other weights (another fingerprint) or through none of the
    servers it was answered by is refused (StoreMismatch, one line), so its answers never mix."""
    if not info:
        return
    path = out_dir / RUN_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    old = recorded.get("server")
    if isinstance(old, dict) and old.get("fingerprint") and info.get("fingerprint"):
        from sqa.types import StoreMismatch

        from sqa.models.served_probe import same_reads

        before = set(old.get("base_urls") or [old.get("base_url")])
        other = old["fingerprint"] != info["fingerprint"] and not same_reads(
            old.get("fingerprint_reads"), info.get("fingerprint_reads")
        )
        if other or not before & set(info.get("base_urls") or []):
            what = (
                "other weights or settings (fingerprint " + f"{info['fingerprint']} vs {old['fingerprint']})"
                if other
                else f"{', '.join(info['base_urls'])}"
            )
            raise StoreMismatch(
                f"{path}: this run was answered through {', '.join(sorted(before))}, and this session "
                f"reads through {what}; resume it with its --base-url, or give another --out"
            )
    if old != info:
        recorded["server"] = info
        write_json_atomic(path, recorded)


def _record_cost(out_dir: Path, done: dict[str, dict], unwritten: dict | None = None) -> None:
    """``run.json``'s ``cost``: a served model's calls sent and answered from the response cache,
    prompt and completion tokens (the server's ``usage``), summed over the answered questions'
    ``eval.cost``, with seconds per question; nothing for a run without them. ``unwritten``: what
    this process's requests cost beyond its written questions (a run stopped mid-batch: answered
    requests of questions not written, whose answers are in the response cache), added up over
    processes in ``run.json``'s ``cost_unwritten`` and counted in the totals
    (``unwritten_calls_sent``), so every request a server answered is counted."""
    path = out_dir / RUN_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    extra = recorded.get("cost_unwritten") if isinstance(recorded.get("cost_unwritten"), dict) else {}
    changed = bool(unwritten and any(v > 0 for v in unwritten.values()))
    if changed:
        extra = {k: round(float(extra.get(k, 0) or 0) + v, 3) for k, v in unwritten.items()}
        recorded["cost_unwritten"] = extra
    costs = [r["eval"]["cost"] for r in done.values() if isinstance(r.get("eval", {}).get("cost"), dict)]
    if not costs and not extra:
        return
    keys = costs[0] if costs else extra
    total = {k: round(sum(float(c.get(k, 0) or 0) for c in costs) + float(extra.get(k, 0) or 0), 3) for k in keys}
    total = {k: int(v) if float(v).is_integer() and k != "request_seconds" else v for k, v in total.items()}
    secs = [float(r["eval"].get("seconds", 0) or 0) for r in done.values()]
    total.update(questions=len(costs), seconds_per_question=round(sum(secs) / max(len(secs), 1), 3))
    if extra:
        total["unwritten_calls_sent"] = int(extra.get("calls_sent", 0) or 0)
    if recorded.get("cost") != total or changed:
        recorded["cost"] = total
        write_json_atomic(path, recorded)


def _record_model(out_dir: Path, model) -> None:
    """Add the model's name and ``capabilities`` (``sqa.types.ModelCapabilities.to_dict()``: hidden
    states, endpoint, read-out, which chat template rendered its chat prompts, ...) to ``run.json``
    as ``"model"``, as this session loaded it (not part of the run's identity)."""
    if model is None:
        return
    caps = model.capabilities
    path = out_dir / RUN_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    info = {"name": model.name, "capabilities": caps.to_dict()}
    if recorded.get("model") != info:
        recorded["model"] = info
        write_json_atomic(path, recorded)


def _check_qid(q: Question, r: ReasoningResult) -> None:
    if r.qid is None:
        r.qid = q.qid
    elif r.qid != q.qid:
        raise SqaError(
            f"the reader returned a result for {r.qid} in the place of {q.qid}; results must "
            "come back in the order of the questions"
        )


def _record(q: Question, r: ReasoningResult, pool: FewShotPool, seconds: float, batch_size: int) -> dict:
    rec = r.to_dict()
    rec["qid"] = q.qid
    rec["eval"] = {
        "gold": q.answer,
        "correct": None if q.answer is None else bool(r.answer) == q.answer,
        "fewshot_pool": pool.name,
        "seconds": round(seconds, 4),
        "batch_size": batch_size,
        "written_at": now(),
    }
    fewshot_qids = rec.get("fewshot_qids")
    if fewshot_qids and q.qid in fewshot_qids:
        raise SqaError(
            f"the reader used question {q.qid} as its own few-shot example (pool {pool.name}); "
            "this is a bug in the reader's example selection"
        )
    return rec


def _method_demonstrations(reader, questions) -> set[str] | None:
    """qids of ``questions`` whose text is one of the method's prompt exemplars
    (``Method.demonstrations``; whitespace and case ignored); None when ``reader`` is no
    ``sqa.methods.reader.MethodReader``."""
    method = getattr(reader, "method", None)
    if method is None or not hasattr(method, "demonstrations"):
        return None
    shown = {" ".join(t.lower().split()) for t in method.demonstrations(getattr(reader, "settings", {}) or {})}
    return {q.qid for q in questions if " ".join(q.question.lower().split()) in shown}
