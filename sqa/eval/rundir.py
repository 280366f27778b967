"""A run directory: ``run.json`` (what defines the run) and ``traces.jsonl`` (what is done).

- ``run.json``: ``{"format": 2, "identity", "options", "index", "protocol", "created_at"}``
  (``protocol``: the named question set of the last session, :mod:`sqa.eval.protocols`, when it had one). ``identity`` is
  :meth:`EvalOptions.identity` plus ``index``, the identity of the index searched
  (:func:`sqa.indexing.manifest.index_identity`: backend, corpus, paragraph count, analyser, BM25
  parameters; never its directory), so a run copied to another machine or folder resumes there
  against any index with the same identity. A later run with the same directory must have the same
  identity, else SqaError (use another ``--out``). Format-1 files (which recorded the index
  directory) are read through :func:`sqa.eval.options.legacy_identity`.
- ``traces.jsonl``: the source of truth, one line per answered question
  (``ReasoningResult.to_dict()`` plus an ``"eval"`` object), written, flushed and fsync'd as soon as
  the question is answered; a line cut by ``kill -9`` is dropped (the file truncated to the last
  whole line) when the run is resumed. :class:`TraceLog` holds an exclusive lock while writing.
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from sqa.eval.options import EvalOptions, legacy_default, legacy_identity
from sqa.jsonio import write_json_atomic
from sqa.trace import ReasoningResult, StepTrace
from sqa.types import SqaError

RUN_FILE = "run.json"
TRACES_FILE = "traces.jsonl"
RUN_FORMAT = 2


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
                raise SqaError(
                    f"{self.path}: another `sqa eval` is writing to this directory; wait for it or use another --out"
                ) from None
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
            # allow_nan=False: a NaN would make the line invalid JSON, refused on every resume
            self._f.write((json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"))
        self._f.flush()
        os.fsync(self._f.fileno())


def read_trace_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return b""


def _no_nan(word: str):
    """json.loads' hook for NaN / Infinity: refused (a damaged model's reading; invalid JSON)."""
    raise ValueError(f"{word} where a number belongs, written by a damaged model")


def _parse_traces(data: bytes, path: Path) -> tuple[list[dict], int]:
    """Records and the byte offset just after the last good line; linear in the data's size
    (issue 50, item 7b: a copy of the rest per line made ``sqa compare`` quadratic)."""
    records: list[dict] = []
    pos = 0
    lineno = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        lineno += 1
        if nl == -1:  # cut line (kill -9 during the write)
            return records, pos
        line = data[pos:nl].strip()
        if line:
            try:
                rec = json.loads(line, parse_constant=_no_nan)
                if not isinstance(rec, dict) or "qid" not in rec:
                    raise ValueError("not a trace object with a qid")
            except ValueError as e:
                # only here is the rest looked at: copying it on every line made reading quadratic
                if not data[nl + 1 :].strip():  # the last line: a cut write, dropped
                    return records, pos
                raise SqaError(
                    f"{path}:{lineno}: not a valid trace line ({e}); delete that line (the question "
                    "will be redone) or use another --out"
                ) from None
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


def read_recorded_traces(run_dir: str | Path) -> dict[str, dict] | None:
    """``{qid: trace record}`` of a run folder from its ``traces.jsonl``, else the
    ``traces.jsonl.xz`` a recorded run keeps (``bench/results/runs/``); None when it has neither.
    Raises SqaError for an xz file that does not decompress or a line that does not parse."""
    import lzma

    run_dir = Path(run_dir)
    if (run_dir / TRACES_FILE).exists():
        return read_traces(run_dir)
    xz = run_dir / (TRACES_FILE + ".xz")
    if not xz.exists():
        return None
    try:
        data = lzma.decompress(xz.read_bytes())
    except lzma.LZMAError as e:
        raise SqaError(f"{xz}: not a valid xz file ({e})") from None
    out: dict[str, dict] = {}
    for rec in _parse_traces(data, xz)[0]:
        out.setdefault(rec["qid"], rec)
    return out


INDEX_KEYS = ("schema", "backend", "corpus", "paragraph_count", "analyzer", "bm25", "schema_version")


def run_identity(options: EvalOptions, index_info: dict | None) -> dict:
    """What defines a run: the options' identity plus ``index``, the identity of the index searched
    (``INDEX_KEYS`` of ``index_info``; None when the run searches no index it knows of)."""
    identity = options.identity()
    identity["index"] = {key: index_info.get(key) for key in INDEX_KEYS} if index_info else None
    return identity


def recorded_identity(recorded: dict) -> dict:
    """The identity a ``run.json`` records, in today's terms (format 1: see ``legacy_identity``;
    its index identity is rebuilt from the recorded backend, preset and paragraph count)."""
    old = recorded["identity"]
    if recorded.get("format", 1) >= 2:
        return old
    from sqa.indexing.manifest import index_identity

    info = dict(recorded.get("index") or {})
    if old.get("index_paragraphs") is not None:
        info["paragraph_count"] = old["index_paragraphs"]
    out = legacy_identity(old)
    reads_evidence = out.get("retrieval", True) or out.get("oracle")
    out["index"] = (
        index_identity(info, old.get("backend", "embedded")) if reads_evidence and info.get("paragraph_count") else None
    )
    return out


def _diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for key in dict.fromkeys([*new, *old]):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict) and key == "index":
            out += _diff(a, b, "index.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def check_run_file(out_dir: Path, options: EvalOptions, index_info: dict | None, record: dict | None = None) -> dict:
    """Create ``run.json`` or check that the recorded run has the same identity (see the module
    doc; ``index_info``: the index identity, plus ``built_at``, as ``sqa.pipeline.index_info`` gives).
    ``record``: further top-level fields written into ``run.json`` (not part of the identity), e.g.
    ``answering`` ("head" | "cross-fitted" | "out-of-fold" | "zero-shot") and ``head`` (the file
    that answers and the questions it was fitted on); added to a recorded run that lacks them.

    Raises SqaError listing the differing options, telling the user to pick another ``--out``
    (a recorded run without a single answered question is replaced instead), or when ``out_dir``
    is a file."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SqaError(
            f"--out {out_dir}: is a file; give a directory for the run (a new one starts a run, the same "
            "one resumes it)"
        )
    identity = run_identity(options, index_info)
    path = out_dir / RUN_FILE
    if path.exists():
        try:
            recorded = json.loads(path.read_text(encoding="utf-8"))
            old = recorded_identity(recorded)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise SqaError(f"{path}: not a valid run file; delete the directory or use another --out") from None
        diff = _diff({k: old[k] if k in old else legacy_default(k) for k in identity}, identity)
        if not diff:
            if options.protocol and recorded.get("protocol") != options.protocol:  # this session's question set
                recorded["protocol"] = options.protocol
                write_json_atomic(path, recorded)
            if record and any(recorded.get(k) != v for k, v in record.items()):
                recorded.update(record)
                write_json_atomic(path, recorded)
            return recorded
        if (out_dir / TRACES_FILE).exists() and (out_dir / TRACES_FILE).stat().st_size:
            raise SqaError(
                f"{out_dir}: holds a run with other options ({'; '.join(diff)}); use another --out "
                "to start a new run, or the recorded options to resume it"
            )
        # no question answered yet (a first session that failed, e.g. before the index existed):
        # nothing to protect, so the new options replace the recorded ones
    elif (out_dir / TRACES_FILE).exists() and (out_dir / TRACES_FILE).stat().st_size:
        raise SqaError(f"{out_dir}: has {TRACES_FILE} but no {RUN_FILE}, so its options are unknown; use another --out")
    recorded = {
        "format": RUN_FORMAT,
        "identity": identity,
        "options": options.to_dict(),
        "index": index_info or {},
        "answering": options.answering,
        **({"protocol": options.protocol} if options.protocol else {}),
        **(record or {}),
        **({"command": command} if (command := invocation()) else {}),
        "created_at": now(),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, recorded)
    return recorded


def invocation() -> str | None:
    """The ``sqa ...`` command line this process runs (as typed, shell-quoted), None when sqa was
    called from Python: what run.json, metrics.json and the reports record as the run's command,
    with any credential in it (a base URL's ``user:password@``, a known secret) as ``***``."""
    import sys

    from sqa.redact import redact

    line = getattr(sys.modules.get("sqa.cli"), "INVOCATION", None)
    return redact(line) if line else None


def now() -> str:
    """The current UTC time as written into run files (``2026-11-23T09:54:03+0000``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")
