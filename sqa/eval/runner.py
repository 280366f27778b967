"""Batch evaluation of the full pipeline over a StrategyQA split, resumable from disk.

A run directory ``DIR`` holds:

- ``run.json``: the options that define the run (split, model, decomposition, top-k, index
  directory, backend, index paragraph count, number of cross-fitting folds). A later run with the
  same ``DIR`` must have the same options, else :class:`SqaError` (use another ``--out``).
- ``traces.jsonl``: the source of truth. One line per answered question:
  ``ReasoningResult.to_dict()`` (steps with query, evidence IDs + scores, answer, seconds; answer,
  p_yes, confidence, paragraphs, timings, model, fewshot_qids) plus an ``"eval"`` object (gold
  answer, correct, few-shot pool, wall-clock seconds, batch size, time written). Each line is
  written, flushed and fsync'd as soon as its question is answered (through the reasoner's
  ``on_result`` callback when it has one, else after each batch); a line cut by ``kill -9`` is
  dropped (and the file truncated to the last whole line) when the run is resumed.
- ``predictions.json`` (official leaderboard format, one entry per answered question),
  ``metrics.json``, ``report.md``, ``report.png``: regenerated from ``traces.jsonl`` at the end of
  every run (also after Ctrl-C), so there is exactly one prediction per question. The hidden-label
  test split gets predictions (and traces) only.

Few-shot exclusion (Geva et al., TACL 2021 split the 2,290 train questions into the baselines'
2,061 / 229 train / dev split): a question is never among the few-shot examples used to answer it.

- ``dev`` and ``test`` questions draw examples from ``train-2061``;
- ``train`` (and the train part of ``all``) uses cross-fitting: the 2,290 questions are split into
  ``folds`` folds by ``sha1(qid) mod folds`` and a question of fold f draws examples from the other
  folds; ``train-2061`` is cross-fitted the same way within its 2,061 questions.

The reasoner is anything with ``answer_batch(questions, decomposition=...) -> list[ReasoningResult]``
(:class:`BatchReasoner`); ``run_eval`` asks a factory for one per few-shot pool.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator, Protocol, Sequence

from sqa.eval.leaderboard import score_predictions, validate_predictions
from sqa.eval.metrics import recall_at_k
from sqa.reasoner.reasoner import DEFAULT_DECISION, SIGNALS, parse_decision
from sqa.reasoner.trace import ReasoningResult, StepTrace
from sqa.strategyqa import SPLITS, load_questions
from sqa.types import MAX_K, Question, SqaError

DECOMPOSITIONS = ("predicted", "gold", "question")
READERS = ("facts", "steps")
ORACLES = ("facts", "paragraphs")
DEFAULT_FOLDS = 5
RUN_FILE = "run.json"
TRACES_FILE = "traces.jsonl"
PREDICTIONS_FILE = "predictions.json"
METRICS_FILE = "metrics.json"
REPORT_MD = "report.md"
REPORT_PNG = "report.png"
RUN_FORMAT = 1


class BatchReasoner(Protocol):
    """What the runner needs from ``sqa.reasoner``: answers for a batch of questions, in order.

    ``decomposition``: ``predicted`` (the decomposer writes the steps), ``gold`` (StrategyQA's
    annotated steps) or ``question`` (one step: the question itself)."""

    def answer_batch(self, questions: Sequence[Question], decomposition: str = "predicted") -> list[ReasoningResult]:
        ...


# --------------------------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class EvalOptions:
    """Options of one evaluation run.

    The fields in :attr:`IDENTITY` define the run: resuming a directory with different values is
    refused. ``limit`` (first N questions of the split) and ``batch_size`` (questions per
    ``answer_batch`` call) may change between sessions. ``index_dir`` should be absolute.
    """

    split: str
    model: str
    decomposition: str = "predicted"
    k: int = 10
    index_dir: str = ""
    backend: str = "embedded"
    folds: int = DEFAULT_FOLDS
    limit: int | None = None
    batch_size: int = 32
    retrieval: bool = True
    decision: str = DEFAULT_DECISION
    signals: tuple[str, ...] = ()
    reader: str = "steps"  # the CLI's default is "facts"; "steps" is what runs recorded before it had
    oracle: str | None = None
    head: str = ""
    dataset: str = ""  # split "custom": "<file name>:<sha256 of its bytes, 12 hex>" (``sqa eval --dataset``)

    IDENTITY = ("split", "model", "decomposition", "k", "index_dir", "backend", "folds", "retrieval", "decision",
                "reader", "oracle", "head", "dataset")
    # identity keys added after runs were recorded, with the value those runs had
    LEGACY = {"reader": "steps", "oracle": None, "head": "", "dataset": ""}

    def __post_init__(self):
        if (self.split == "custom") != bool(self.dataset):
            raise SqaError("split 'custom' goes with a --dataset file, and a --dataset file with split 'custom'")
        if self.split not in SPLITS and self.split != "custom":
            raise SqaError(f"unknown split {self.split!r}; use one of {', '.join(SPLITS)}")
        if self.decomposition not in DECOMPOSITIONS:
            raise SqaError(f"unknown decomposition {self.decomposition!r}; use one of {', '.join(DECOMPOSITIONS)}")
        if self.decomposition == "gold" and self.split in ("test", "all"):
            raise SqaError(f"--decomposition gold needs annotated steps, which the {self.split} split's test questions "
                           "do not have; use predicted or question, or a labelled split (train, dev, train-2061)")
        if not 1 <= self.k <= MAX_K:
            raise SqaError(f"top-k must be from 1 to {MAX_K:,} (got {self.k})")
        if self.batch_size < 1:
            raise SqaError(f"batch size must be at least 1 (got {self.batch_size})")
        if self.folds < 2:
            raise SqaError(f"cross-fitting needs at least 2 folds (got {self.folds})")
        object.__setattr__(self, "decision", "+".join(parse_decision(self.decision)))  # frozen dataclass
        object.__setattr__(self, "signals", tuple(self.signals))
        bad = [x for x in self.signals if x not in SIGNALS]
        if bad:
            raise SqaError(f"unknown signal(s) {', '.join(bad)}; use {', '.join(SIGNALS)}")
        if self.reader not in READERS:
            raise SqaError(f"unknown reader {self.reader!r}; use {' or '.join(READERS)}")
        if self.oracle is not None:
            if self.oracle not in ORACLES:
                raise SqaError(f"unknown oracle {self.oracle!r}; use {' or '.join(ORACLES)}")
            if self.split in ("test", "all"):
                raise SqaError(f"--oracle {self.oracle} shows annotations the {self.split} split does not have (and "
                               "must never see); use dev, train or train-2061")
            if self.reader != "facts":
                raise SqaError("--oracle goes with --reader facts")
        if self.reader == "facts" and self.decomposition != "question":
            raise SqaError(f"--decomposition {self.decomposition}: the facts reader retrieves for the whole question; "
                           "use --decomposition question, or --reader steps")
        if self.limit is not None and self.limit < 1:
            raise SqaError(f"--limit must be at least 1 (got {self.limit})")

    def identity(self) -> dict:
        return {name: getattr(self, name) for name in self.IDENTITY}

    def to_dict(self) -> dict:
        return asdict(self)


def select_questions(split: str, limit: int | None = None) -> list[Question]:
    """The first ``limit`` questions (all if None) of ``split``, in release order."""
    qs = load_questions(split)
    return qs[:limit] if limit else qs


# --------------------------------------------------------------------------------------------
# Few-shot pools and cross-fitting


def fold_of(qid: str, folds: int = DEFAULT_FOLDS) -> int:
    """Cross-fitting fold of a question: the first 8 bytes of ``sha1(qid)`` (big-endian) mod ``folds``.
    Deterministic across machines and Python versions (unlike ``hash``)."""
    return int.from_bytes(hashlib.sha1(qid.encode("utf-8")).digest()[:8], "big") % folds


@dataclass(frozen=True)
class FewShotPool:
    """The questions a reasoner may draw few-shot examples from, for one group of evaluated
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
        return {"name": self.name, "source_split": self.source_split, "excluded_fold": self.fold,
                "folds": self.folds, "n": len(self.questions), "qids_sha1": digest}


def plan_fewshot(split: str, questions: Sequence[Question],
                 folds: int = DEFAULT_FOLDS) -> list[tuple[FewShotPool, list[Question]]]:
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
            raise SqaError(f"question {q.qid} would be among its own few-shot examples (pool {pool.name}); "
                           "check sqa/_data/strategyqa/split_qids.json.xz")
        groups.setdefault(pool.name, []).append(q)
    return [(pools[name], qs) for name, qs in groups.items()]


def fewshot_description(split: str, folds: int = DEFAULT_FOLDS) -> dict:
    """What ``metrics.json`` says about where few-shot examples came from for ``split``."""
    if split == "custom":
        rule = "every question of the --dataset file: examples from train-2061 minus the file's own questions"
    elif split in ("dev", "test"):
        rule = f"every {split} question: examples from train-2061 (2,061 questions, disjoint from {split})"
    elif split == "train-2061":
        rule = (f"cross-fitting over train-2061: fold = sha1(qid)[:8] mod {folds}; a question of fold f "
                f"draws examples from train-2061 minus fold f")
    else:
        rule = (f"cross-fitting over train (2,290): fold = sha1(qid)[:8] mod {folds}; a question of fold f "
                f"draws examples from train minus fold f" + ("; test questions from train-2061" if split == "all" else ""))
    return {"rule": rule, "folds": folds if split in ("train", "all", "train-2061") else None}


# --------------------------------------------------------------------------------------------
# traces.jsonl


def result_from_dict(d: dict) -> ReasoningResult:
    """Rebuild a ReasoningResult from one ``traces.jsonl`` object (``to_dict()`` output; unknown
    keys such as ``confidence`` and ``eval`` are ignored)."""
    step_keys = {f.name for f in fields(StepTrace)}
    res_keys = {f.name for f in fields(ReasoningResult)} - {"steps"}
    steps = [StepTrace(**{k: v for k, v in s.items() if k in step_keys}) for s in d.get("steps", [])]
    return ReasoningResult(steps=steps, **{k: v for k, v in d.items() if k in res_keys})


class TraceLog:
    """Append-only ``traces.jsonl`` with crash repair and an exclusive lock.

    Use as a context manager: entering takes an exclusive ``flock`` on the file (SqaError if another
    process holds it), :meth:`read` returns the whole records (repairing a cut last line),
    :meth:`append` writes lines and fsyncs them.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._f = None
        self.repaired_bytes = 0

    def __enter__(self) -> "TraceLog":
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a+b")
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._f.close()
            self._f = None
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise SqaError(f"{self.path}: another `sqa eval` is writing to this directory; wait for it "
                               "or use another --out") from None
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._f is not None:
            self._f.close()  # closing releases the lock
            self._f = None

    def read(self) -> list[dict]:
        """All complete records in file order. A last line that is cut (no newline) or not valid
        JSON is a write interrupted by a crash: it is dropped and the file truncated before it.
        Raises SqaError naming the line for a bad line elsewhere."""
        data = read_trace_bytes(self.path)
        records, good_end = _parse_traces(data, self.path)
        if good_end < len(data):
            self.repaired_bytes = len(data) - good_end
            if self._f is not None:
                self._f.flush()
                os.ftruncate(self._f.fileno(), good_end)
                os.fsync(self._f.fileno())
        return records

    def append(self, records: Sequence[dict]) -> None:
        """Write one line per record, then flush and fsync (durable before returning)."""
        if self._f is None:
            raise RuntimeError("TraceLog.append outside `with`")
        for rec in records:
            self._f.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
        self._f.flush()
        os.fsync(self._f.fileno())


def read_trace_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return b""


def _parse_traces(data: bytes, path: Path) -> tuple[list[dict], int]:
    """Records and the byte offset just after the last good line."""
    records: list[dict] = []
    pos = 0
    lineno = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        lineno += 1
        if nl == -1:  # cut line (kill -9 during the write)
            return records, pos
        last = not data[nl + 1:].strip()
        line = data[pos:nl].strip()
        if line:
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or "qid" not in rec:
                    raise ValueError("not a trace object with a qid")
            except ValueError as e:
                if last:
                    return records, pos
                raise SqaError(f"{path}:{lineno}: not a valid trace line ({e}); delete that line (the question "
                               "will be redone) or use another --out") from None
            records.append(rec)
        pos = nl + 1
    return records, pos


def read_traces(out_dir: str | Path) -> dict[str, dict]:
    """``{qid: trace record}`` of a run directory without locking or repairing (first record wins
    if a qid occurs twice)."""
    path = Path(out_dir) / TRACES_FILE
    records, _ = _parse_traces(read_trace_bytes(path), path)
    out: dict[str, dict] = {}
    for rec in records:
        out.setdefault(rec["qid"], rec)
    return out


# --------------------------------------------------------------------------------------------
# run.json


def _write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=1, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def check_run_file(out_dir: Path, options: EvalOptions, index_info: dict | None) -> dict:
    """Create ``run.json`` or check that the recorded run has the same identity.

    Raises SqaError listing the differing options, telling the user to pick another ``--out``
    (a recorded run without a single answered question is replaced instead), or when ``out_dir``
    is a file."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SqaError(f"--out {out_dir}: is a file; give a directory for the run (a new one starts a run, the same "
                       "one resumes it)")
    identity = options.identity()
    identity["index_paragraphs"] = (index_info or {}).get("paragraph_count")
    path = out_dir / RUN_FILE
    if path.exists():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
            old = recorded["identity"]
        except (ValueError, KeyError, TypeError):
            raise SqaError(f"{path}: not a valid run file; delete the directory or use another --out") from None
        fields = EvalOptions.__dataclass_fields__
        # a key added to the identity after the run was recorded counts as its default value
        old = {key: old.get(key, EvalOptions.LEGACY.get(key, fields[key].default if key in fields else None))
               for key in identity} | old
        diff = [f"{key}: {old.get(key)!r} -> {identity.get(key)!r}" for key in identity if old.get(key) != identity.get(key)]
        if not diff:
            return recorded
        if (out_dir / TRACES_FILE).exists() and (out_dir / TRACES_FILE).stat().st_size:
            raise SqaError(f"{out_dir}: holds a run with other options ({'; '.join(diff)}); use another --out "
                           "to start a new run, or the recorded options to resume it")
        # no question answered yet (a first session that failed, e.g. before the index existed):
        # nothing to protect, so the new options replace the recorded ones
    elif (out_dir / TRACES_FILE).exists() and (out_dir / TRACES_FILE).stat().st_size:
        raise SqaError(f"{out_dir}: has {TRACES_FILE} but no {RUN_FILE}, so its options are unknown; use another --out")
    recorded = {"format": RUN_FORMAT, "identity": identity, "options": options.to_dict(), "index": index_info or {},
                "created_at": _now()}
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json_atomic(path, recorded)
    return recorded


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")


# --------------------------------------------------------------------------------------------
# Running


@dataclass
class EvalProgress:
    """Progress of a run: ``done`` of ``total`` questions answered (``new`` in this session);
    ``correct`` of ``scored`` labelled ones right."""

    done: int
    total: int
    new: int
    correct: int
    scored: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.scored if self.scored else None


@dataclass
class EvalSummary:
    """What a run produced: counts, the metrics (None for the test split or before any answer),
    whether it was interrupted, and the files written."""

    out_dir: Path
    total: int
    done: int
    new: int
    metrics: dict | None
    interrupted: bool = False
    repaired_bytes: int = 0
    files: list[Path] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.done == self.total


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
        yield list(items[i:i + size])


def run_eval(
    options: EvalOptions,
    out_dir: str | Path,
    reasoner_for: Callable[[FewShotPool], BatchReasoner],
    *,
    questions: Sequence[Question] | None = None,
    index_info: dict | None = None,
    on_progress: Callable[[EvalProgress], None] | None = None,
) -> EvalSummary:
    """Evaluate ``questions`` (default: ``select_questions(options.split, options.limit)``) into
    ``out_dir``, resuming what ``traces.jsonl`` already holds.

    ``reasoner_for(pool)`` returns the reasoner to use for the questions whose few-shot pool is
    ``pool``; it is called only when some question still needs answering (a finished run just
    regenerates its outputs). ``index_info`` (backend, paragraph_count, ...) goes into
    ``run.json``/``metrics.json``. ``on_progress`` is called once at the start and after each answered question.

    Ctrl-C (KeyboardInterrupt) is caught: lines being written are finished, the outputs are
    regenerated from what is done, and the summary comes back with ``interrupted=True``. Any other
    error also regenerates the outputs, then propagates. Raises SqaError when ``out_dir`` holds a run
    with other options, when another process is writing it, or when the reasoner returns results
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
        stats = EvalProgress(done=sum(1 for q in questions if q.qid in done), total=len(questions), new=0,
                             correct=0, scored=0)
        for q in questions:
            rec = done.get(q.qid)
            if rec is not None and q.answer is not None:
                stats.scored += 1
                stats.correct += int(bool(rec.get("answer")) == q.answer)
        if on_progress:
            on_progress(stats)
        pending = [q for q in questions if q.qid not in done]
        try:
            try:
                for pool, group in plan_fewshot(options.split, pending, options.folds):
                    reasoner = reasoner_for(pool)
                    for batch in _batches(group, options.batch_size):
                        clock = [time.perf_counter()]
                        written: list[dict] = []

                        def on_result(r: ReasoningResult, batch=batch, written=written, clock=clock, pool=pool) -> None:
                            # one durable line per finished question, so Ctrl-C / kill -9 loses at most the
                            # question being worked on
                            if len(written) >= len(batch):
                                raise SqaError(f"the reasoner returned more results than the {len(batch)} questions "
                                               f"of a batch (first qid {batch[0].qid}); this is a bug in the reasoner")
                            q = batch[len(written)]
                            _check_qid(q, r)
                            now = time.perf_counter()
                            rec = _record(q, r, pool, now - clock[0], len(batch))
                            clock[0] = now
                            with _defer_sigint():  # the line and the bookkeeping, or neither
                                log.append([rec])
                                written.append(rec)
                                done[q.qid] = rec
                                if q.answer is not None:
                                    stats.scored += 1
                                    stats.correct += int(bool(rec["answer"]) == q.answer)
                                stats.done += 1
                                stats.new += 1
                            if on_progress:
                                on_progress(stats)

                        if _accepts_on_result(reasoner):
                            results = reasoner.answer_batch(batch, decomposition=options.decomposition,
                                                            on_result=on_result)
                        else:
                            results = reasoner.answer_batch(batch, decomposition=options.decomposition)
                            share = (time.perf_counter() - clock[0]) / max(len(results), 1)
                            for r in results:  # the batch's wall time, shared equally
                                clock[0] = time.perf_counter() - share
                                on_result(r)
                        if len(results) != len(batch) or len(written) != len(batch):
                            raise SqaError(f"the reasoner returned {len(results)} results ({len(written)} reported) "
                                           f"for a batch of {len(batch)} questions (first qid {batch[0].qid}); "
                                           "this is a bug in the reasoner")
            except KeyboardInterrupt:
                interrupted = True
        finally:
            # outputs come from the file, the source of truth, not from memory
            on_disk: dict[str, dict] = {}
            for rec in log.read():
                on_disk.setdefault(rec["qid"], rec)
            summary = finalize_run(out_dir, options, questions, on_disk,
                                   index_info=run_info.get("index") or index_info, new=stats.new)
    summary.interrupted = interrupted
    summary.repaired_bytes = log.repaired_bytes
    return summary


def _accepts_on_result(reasoner) -> bool:
    import inspect

    try:
        params = inspect.signature(reasoner.answer_batch).parameters
    except (TypeError, ValueError):
        return False
    return "on_result" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _check_qid(q: Question, r: ReasoningResult) -> None:
    if r.qid is None:
        r.qid = q.qid
    elif r.qid != q.qid:
        raise SqaError(f"the reasoner returned a result for {r.qid} in the place of {q.qid}; results must "
                       "come back in the order of the questions")


def _record(q: Question, r: ReasoningResult, pool: FewShotPool, seconds: float, batch_size: int) -> dict:
    rec = r.to_dict()
    rec["qid"] = q.qid
    rec["eval"] = {
        "gold": q.answer,
        "correct": None if q.answer is None else bool(r.answer) == q.answer,
        "fewshot_pool": pool.name,
        "seconds": round(seconds, 4),
        "batch_size": batch_size,
        "written_at": _now(),
    }
    fewshot_qids = rec.get("fewshot_qids")
    if fewshot_qids and q.qid in fewshot_qids:
        raise SqaError(f"the reasoner used question {q.qid} as its own few-shot example (pool {pool.name}); "
                       "this is a bug in the reasoner's example selection")
    return rec


# --------------------------------------------------------------------------------------------
# Outputs


def question_rows(questions: Sequence[Question], done: dict[str, dict]) -> list[dict]:
    """One row per answered question (in split order): qid, question, gold, answer, correct,
    p_yes, confidence, n_steps, recall (Recall@10; None without labels), decomposition, seconds."""
    rows = []
    for q in questions:
        rec = done.get(q.qid)
        if rec is None:
            continue
        r = result_from_dict(rec)
        labelled = q.answer is not None
        ev = rec.get("eval") or {}
        rows.append({
            "qid": q.qid, "question": q.question, "gold": q.answer, "answer": bool(r.answer),
            "correct": (bool(r.answer) == q.answer) if labelled else None,
            "p_yes": float(r.p_yes), "confidence": float(r.confidence), "n_steps": len(r.steps),
            "recall": recall_at_k(q.evidence, r.paragraphs) if labelled else None,
            "decomposition": r.decomposition, "paragraphs": list(r.paragraphs),
            "seconds": ev.get("seconds"),
            "timings": dict(r.timings), "fewshot_pool": ev.get("fewshot_pool"),
            "fewshot_qids": rec.get("fewshot_qids"), "signals": dict(rec.get("signals") or {}),
        })
    return rows


def calibration_bins(rows: Sequence[dict], n_bins: int = 10) -> list[dict]:
    """Reliability table: labelled rows binned by confidence into ``n_bins`` equal-width bins on
    [0, 1]; each bin gives lo, hi, n, mean confidence and accuracy (None when empty)."""
    bins = [{"lo": i / n_bins, "hi": (i + 1) / n_bins, "n": 0, "confidence": None, "accuracy": None}
            for i in range(n_bins)]
    sums = [[0.0, 0.0] for _ in range(n_bins)]
    for r in rows:
        if r["correct"] is None:
            continue
        i = min(int(r["confidence"] * n_bins), n_bins - 1)
        bins[i]["n"] += 1
        sums[i][0] += r["confidence"]
        sums[i][1] += float(r["correct"])
    for b, (c, a) in zip(bins, sums):
        if b["n"]:
            b["confidence"] = c / b["n"]
            b["accuracy"] = a / b["n"]
    return bins


def expected_calibration_error(bins: Sequence[dict]) -> float | None:
    """ECE (Guo et al., "On Calibration of Modern Neural Networks", ICML 2017):
    sum over bins of n_b / n * |accuracy_b - confidence_b|; None without labelled rows."""
    n = sum(b["n"] for b in bins)
    if not n:
        return None
    return sum(b["n"] / n * abs(b["accuracy"] - b["confidence"]) for b in bins if b["n"])


def signal_accuracy(rows: Sequence[dict]) -> dict[str, dict]:
    """Accuracy (P(yes) >= 0.5) and mean P(yes) of every P(yes) reading recorded for all labelled
    rows (``--signals``; see ``sqa.reasoner.Reasoner``): e.g. ``plain`` is the no-retrieval answer of the
    same questions. ``{name: {"n", "Accuracy", "mean_p_yes"}}``; empty when none was recorded."""
    labelled = [r for r in rows if r["correct"] is not None]
    if not labelled:
        return {}
    names = [n for n in labelled[0]["signals"] if all(n in r["signals"] for r in labelled)]
    out = {}
    for n in names:
        ps = [float(r["signals"][n]) for r in labelled]
        out[n] = {"n": len(ps), "Accuracy": sum((p >= 0.5) == bool(r["gold"]) for p, r in zip(ps, labelled)) / len(ps),
                  "mean_p_yes": sum(ps) / len(ps)}
    return out


def compute_metrics(options: EvalOptions, questions: Sequence[Question], done: dict[str, dict],
                    predictions: dict[str, dict], rows: Sequence[dict], index_info: dict | None) -> dict:
    """The ``metrics.json`` object (see the module doc of :mod:`sqa.eval.report` for its use)."""
    labelled_q = [q for q in questions if q.answer is not None and q.qid in predictions]
    scores = score_predictions({q.qid: predictions[q.qid] for q in labelled_q}, labelled_q, source="predictions.json")
    majority = score_predictions({q.qid: {"answer": False} for q in labelled_q}, labelled_q, source="majority baseline")
    seconds = [r["seconds"] for r in rows if r["seconds"] is not None]
    phases: dict[str, list[float]] = {}
    for r in rows:
        for name, s in r["timings"].items():
            phases.setdefault(name, []).append(float(s))
    by_steps: dict[int, list[bool]] = {}
    for r in rows:
        if r["correct"] is not None:
            by_steps.setdefault(r["n_steps"], []).append(r["correct"])
    bins = calibration_bins(rows)
    pools: dict[str, int] = {}
    used_examples: set[str] = set()
    for r in rows:
        pools[r["fewshot_pool"] or "?"] = pools.get(r["fewshot_pool"] or "?", 0) + 1
        used_examples.update(r["fewshot_qids"] or ())
    yes_rate = sum(r["answer"] for r in rows) / len(rows) if rows else None
    return {
        "split": options.split,
        "n": scores["count"],
        "n_predicted": len(predictions),
        "n_questions": len(questions),
        "complete": len(predictions) == len(questions),
        "Accuracy": scores.get("Accuracy"),
        "Recall@10": scores.get("Recall@10"),
        "SARI": scores.get("SARI"),
        "majority_baseline": {"answer": False, "Accuracy": majority.get("Accuracy"),
                              "note": "always 'no', the majority answer of the StrategyQA train file"},
        "yes_rate": yes_rate,
        "ECE": expected_calibration_error(bins),
        "calibration": bins,
        "accuracy_by_steps": {str(n): {"n": len(v), "Accuracy": sum(v) / len(v)} for n, v in sorted(by_steps.items())},
        "decision": options.decision if options.reader == "steps" else None,
        "reader": options.reader,
        "oracle": options.oracle,
        "oracle_note": (f"ORACLE run: the reader was shown each question's annotated {options.oracle}; an upper "
                        "bound for diagnosis, not a system result") if options.oracle else None,
        "head": options.head or None,
        "signals": signal_accuracy(rows),
        "model": options.model,
        "index": index_info or {},
        "options": options.to_dict(),
        "fewshot": {**fewshot_description(options.split, options.folds), "questions_per_pool": pools,
                    "example_qids": sorted(used_examples) if used_examples else None},
        "seconds_per_question": sum(seconds) / len(seconds) if seconds else None,
        "seconds_per_question_note": "wall-clock seconds inside answer_batch between one finished question and "
                                     "the next (batch start for the first), mean over answered questions of all "
                                     "sessions of this run (model loading not included)",
        "phase_seconds_mean": {k: sum(v) / len(v) for k, v in sorted(phases.items())},
        "written_at": _now(),
    }


def finalize_run(out_dir: str | Path, options: EvalOptions, questions: Sequence[Question], done: dict[str, dict],
                 *, index_info: dict | None = None, new: int = 0, plots: bool = True) -> EvalSummary:
    """Regenerate ``predictions.json`` (+ ``metrics.json``, ``report.md``, ``report.png`` unless the
    split is ``test``) from the trace records ``done`` (``{qid: record}``) for ``questions``."""
    out_dir = Path(out_dir)
    predictions = {q.qid: result_from_dict(done[q.qid]).to_prediction().to_leaderboard()
                   for q in questions if q.qid in done}
    validate_predictions(predictions, str(out_dir / PREDICTIONS_FILE))
    _write_json_atomic(out_dir / PREDICTIONS_FILE, predictions)
    files = [out_dir / TRACES_FILE, out_dir / PREDICTIONS_FILE]
    metrics = None
    if options.split != "test" and predictions:
        from sqa.eval import report

        rows = question_rows(questions, done)
        metrics = compute_metrics(options, questions, done, predictions, rows, index_info)
        _write_json_atomic(out_dir / METRICS_FILE, metrics)
        report.write_markdown(out_dir / REPORT_MD, metrics, rows)
        files += [out_dir / METRICS_FILE, out_dir / REPORT_MD]
        if plots:
            report.write_plots(out_dir / REPORT_PNG, metrics, rows)
            files.append(out_dir / REPORT_PNG)
    return EvalSummary(out_dir=out_dir, total=len(questions), done=len(predictions), new=new, metrics=metrics,
                       files=files)
