"""Build (or resume building) a paragraph index from corpus files, with a checkpoint and a manifest.

Resume protocol (kill -9 safe): paragraphs are added in windows of ``commit_every``; after each
window the backend commits, then ``checkpoint.json`` is atomically replaced with the position
reached (file index, lines consumed, counters) and what the corpus files hold (``corpus_content``:
sizes and sha256). A re-run over corpus files of the same content skips to that position, wherever
the files lie now (a moved copy, another name); other content (a changed byte) starts over from
the first line, said in one warning line (``sqa.indexing.resume.resumable``). The files are hashed once per build, for that check
and the manifest together, and not at all where a file is at its checkpointed path with its
recorded size and mtime. If the process died after a commit but before its checkpoint was written, the window
is re-added; a paragraph whose evidence ID is already in the index replaces it (tantivy: delete-
by-term + add, the ID looked up in the committed index and the window; Elasticsearch: ``_id`` =
evidence ID), so the index ends with one copy of every paragraph, whatever ``commit_every`` the
resumed run uses. An evidence ID twice in the input: the later copy replaces the earlier one,
counted (``duplicates_replaced`` = paragraphs held before + read - rejected - in the index at the
end). Elasticsearch's count is checked exactly against the checkpoint and at the end
(:mod:`sqa.indexing.resume`). When the build completes, ``manifest.json`` records what identifies
the index (:mod:`sqa.indexing.manifest`), the corpus files, counts and build time, and the
checkpoint is removed. A lock file (``.sqa-build.lock``, ``flock``) keeps a second build out of the
same directory; Ctrl-C is held while a commit and its checkpoint are written.
"""

from __future__ import annotations

import errno
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

from sqa.indexing.manifest import MANIFEST, corpus_content, corpus_id, read_manifest  # noqa: F401  (read_manifest re-exported)
from sqa.indexing.corpus import ReadStats, read_corpus
from sqa.indexing.resume import (
    check_final_count,
    hold_sigint,
    json_file as _json_file,
    lost_since_checkpoint,
    resumable,
    session_start,
)
from sqa.jsonio import write_json_atomic
from sqa.types import BadInput, SearchBackend, SqaError

# paragraphs between checkpoints when not given. embedded: 5,000,000 (about 2-3 minutes of work on
# 2 cores, the most a kill -9 loses). tantivy writes at least one segment per indexing thread at
# every commit (one more whenever a thread's share of the 1 GB writer heap fills, about every 1.85M
# resampled paragraphs), and its log merge policy merges 8 segments of a similar size into one.
# Side by side at 10M resampled paragraphs (bench/results/index_vs_lucene.json, 2 builds each,
# alternating): 2M windows made ten 1M segments and merged 8 of them (558-573 CPU-s, 3 segments
# left, peak RSS 4.8-5.3 GB); 5M windows make 1.85M and 0.65M ones per thread and merge nothing
# (483-522 CPU-s, 8 segments, peak RSS 1.8-2.2 GB), but one-core search p50 is 11.3-12.5 ms against
# 10.7 over 3 segments. Larger segments cost more per paragraph: two 5M-paragraph segments (6 GB
# heap, one window) took 580 CPU-s (bench/results/index_vs_lucene_big_segments.json). Smaller
# windows cost more too: 48-52 CPU-s for 1M paragraphs with a 1,000,000 or 2,000,000 window against
# 53-57 with 200,000 (bench/results/index_profile_commit_every.json). The 36.6M corpus is merged
# anyway: with 5M windows its build merged at about 20M and 29M paragraphs and ended with 9 segments
# in 22.1 min (bench/results/index_vs_lucene_36m.json); other windows, by the policy's rule, merge
# too. elasticsearch: 200,000 (a checkpoint there waits for the in-flight bulk requests and
# refreshes).
DEFAULT_COMMIT_EVERY = {"embedded": 5_000_000, "elasticsearch": 200_000}
CHECKPOINT = "checkpoint.json"
LOCK = ".sqa-build.lock"
# tantivy's own files: its meta, its list of managed files, its lock files, and segment files
# (``<uuid hex>.<component>``, deletes as ``<uuid hex>.<opstamp>.del``)
_TANTIVY_FILES = ("meta.json", ".managed.json", ".tantivy-meta.lock", ".tantivy-writer.lock")
_SEGMENT_FILE = re.compile(r"^[0-9a-f]{32}(\.\d+)?\.(idx|pos|term|fast|fieldnorm|store|del)$")


@dataclass
class BuildProgress:
    """Passed to the progress callback after every batch: the file being read (index and path),
    its compressed size and bytes consumed, and the run's running counters."""

    file_index: int
    file: str
    file_bytes: int
    bytes_read: int
    read: int
    indexed: int
    skipped: int
    seconds: float


@dataclass
class BuildReport:
    """The end-of-build summary: paragraphs read (valid), indexed (added, this run and resumed
    runs together), skipped (malformed), ``count`` = unique paragraphs in the index at the end,
    seconds (this run), and whether the run resumed from a checkpoint."""

    backend: str
    corpus_files: list[str]
    read: int = 0
    indexed: int = 0
    skipped: int = 0
    count: int = 0
    seconds: float = 0.0
    resumed: bool = False
    errors: list = field(default_factory=list)
    preexisting: int = 0  # paragraphs the index held before this build started
    rejected: int = 0  # paragraphs the backend refused (Elasticsearch per-item errors)
    duplicates: int = 0  # paragraphs that replaced one with the same evidence ID (see the module doc)

    def summary(self) -> str:
        return (
            f"paragraphs read {self.read:,}, indexed {self.indexed:,}, skipped (malformed) {self.skipped:,}, "
            f"in index {self.count:,}"
            + (f", duplicates replaced {self.duplicates:,}" if self.duplicates else "")
            + f", {self.seconds:,.1f} s"
            + (" (resumed)" if self.resumed else "")
        )


def index_files(index_dir: str | Path) -> tuple[list[Path], list[Path]]:
    """``(ours, others)``: the entries of ``index_dir`` that belong to an sqa index (its manifest,
    checkpoint and lock, and the tantivy files of an index with sqa's ``evidence_id`` field that
    tantivy recorded: listed in its ``.managed.json`` or of a segment its ``meta.json`` names; a
    file that only looks like a segment file is another's) and every other entry. An index is recognised by a manifest or checkpoint naming its backend and
    corpus files, or by tantivy's ``meta.json`` with sqa's schema; without one, every entry counts
    as other (nothing is ours)."""
    d = Path(index_dir)
    try:
        entries = sorted(d.iterdir())
    except FileNotFoundError:
        return [], []
    except NotADirectoryError:
        raise SqaError(f"{d}: is a file, not an index directory; give a directory to --index-dir") from None

    def sqa_record(name: str) -> bool:
        obj = _json_file(d / name)
        return isinstance(obj, dict) and "backend" in obj and "corpus_files" in obj

    meta = _json_file(d / "meta.json")
    tantivy_ok = (
        isinstance(meta, dict)
        and "segments" in meta
        and any(isinstance(f, dict) and f.get("name") == "evidence_id" for f in meta.get("schema") or [])
    )
    if not (sqa_record(MANIFEST) or sqa_record(CHECKPOINT) or tantivy_ok):
        lock = [e for e in entries if e.name == LOCK and e.is_file()]
        return lock, [e for e in entries if e not in lock]  # a lock alone: what a build left before its first write
    managed = _json_file(d / ".managed.json") if tantivy_ok else None
    managed = set(managed) if isinstance(managed, list) and all(isinstance(x, str) for x in managed) else set()
    # segments named by meta.json (its ids with dashes; files carry them without): recorded too
    segments = (
        {str(s.get("segment_id", "")).replace("-", "") for s in (meta.get("segments") or []) if isinstance(s, dict)}
        if tantivy_ok
        else set()
    )
    own = {MANIFEST, CHECKPOINT, MANIFEST + ".tmp", CHECKPOINT + ".tmp", LOCK}
    ours, others = [], []
    for e in entries:
        n = e.name
        # only files recorded as the index's: a name that merely looks like a segment file is kept
        seg = _SEGMENT_FILE.match(n)
        is_ours = n in own or (
            tantivy_ok and (n in _TANTIVY_FILES or n in managed or (seg is not None and n[:32] in segments))
        )
        (ours if is_ours and not e.is_dir() else others).append(e)
    return ours, others


def remove_index(index_dir: str | Path, dry_run: bool = False) -> tuple[int, list[Path]]:
    """Delete the sqa index in ``index_dir`` (``sqa index --fresh``): only the files
    ``index_files`` recognises as the index's, never anything else. Returns ``(files deleted,
    other entries kept)``. A missing or empty directory is fine (nothing to do). ``dry_run``: only
    check, delete nothing.

    Raises SqaError, deleting nothing, when the directory holds entries but no recognisable sqa
    index (a slip such as ``--index-dir .`` or ``~``), when another process holds the index's
    tantivy writer lock, or when ``index_dir`` is a file."""
    d = Path(index_dir)
    ours, others = index_files(d)
    if not [e for e in ours if e.name != LOCK]:
        if others:
            shown = ", ".join(e.name for e in others[:3]) + (
                f" and {len(others) - 3:,} more" if len(others) > 3 else ""
            )
            raise SqaError(
                f"{d}: not an sqa index (it holds {shown}); --fresh deletes only an index that sqa built, "
                "so nothing was deleted; give the index's own directory or a new one to --index-dir"
            )
        return 0, []
    if dry_run:
        return 0, others
    # tantivy's writer lock (an flock): taken by any process writing this index, sqa or not
    writer_lock = open(d / ".tantivy-writer.lock", "a+b") if (d / ".tantivy-writer.lock").exists() else None
    try:
        if writer_lock is not None:
            _lock_or_busy(
                writer_lock,
                f"{d}: another process is writing this index (tantivy's writer lock is taken), "
                "so --fresh deleted nothing; wait for it to finish, then run the same command again",
            )
        # the manifest last: an interrupted removal still leaves a directory recognised as an index
        ours.sort(key=lambda e: e.name == MANIFEST)
        n = 0
        for e in ours:
            if e.name == LOCK:
                continue  # held by this build (see build_lock); kept
            try:
                e.unlink()
                n += 1
            except FileNotFoundError:
                pass
        return n, others
    finally:
        if writer_lock is not None:
            writer_lock.close()


def _lock_or_busy(f, busy_message: str) -> None:
    """Take an exclusive non-blocking ``flock`` on open file ``f``; raise SqaError(``busy_message``)
    when another process holds it (other OS errors propagate)."""
    import fcntl

    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise SqaError(busy_message) from None
        raise


_held_locks: dict[str, int] = {}


@contextmanager
def build_lock(index_dir: str | Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``index_dir/.sqa-build.lock`` (created, with the directory, if
    missing) while a build runs; re-entrant within one process. Raises SqaError when another
    process holds it, or when ``index_dir`` is a file."""
    d = Path(index_dir)
    if d.exists() and not d.is_dir():
        raise SqaError(f"{d}: is a file, not an index directory; give a directory to --index-dir")
    d.mkdir(parents=True, exist_ok=True)
    key = str(d.resolve())
    if _held_locks.get(key):
        _held_locks[key] += 1
        try:
            yield
        finally:
            _held_locks[key] -= 1
        return
    f = open(d / LOCK, "a+b")
    try:
        _lock_or_busy(
            f,
            f"{d}: another `sqa index` is building this index; wait for it to finish (or stop it), "
            "then run the same command again",
        )
        _held_locks[key] = 1
        try:
            yield
        finally:
            _held_locks.pop(key, None)
    finally:
        f.close()  # releases the lock


def build_index(
    corpus_files: Sequence[str | Path],
    index_dir: str | Path,
    backend: SearchBackend,
    strict: bool = False,
    commit_every: int | None = None,
    batch_size: int = 2_000,
    on_progress: Callable[[BuildProgress], None] | None = None,
    on_error: Callable[[str, int, str], None] | None = None,
    preset: str | None = None,
) -> BuildReport:
    """Index every paragraph of ``corpus_files`` (either format, plain/gz/xz) into ``backend``,
    resuming from ``index_dir/checkpoint.json`` when it was made from files of the same content
    (see the module doc; a checkpoint of other content is not resumed: one ``SqaWarning`` line).

    ``index_dir`` holds the checkpoint, manifest and build lock (for the embedded backend it is
    also the index itself). Malformed lines are skipped and counted (or raise SqaError with
    ``strict``); a repeated evidence ID keeps one copy (the last) and is counted in
    ``BuildReport.duplicates`` and the manifest. Returns a BuildReport. Raises SqaError for a
    missing or unreadable corpus file, a damaged compressed file, another build holding the
    lock, ``commit_every``/``batch_size`` below 1, or input without a single valid paragraph (no
    manifest is written then). Interrupting (Ctrl-C, kill -9) loses at most the current window
    (``commit_every`` paragraphs; None: ``DEFAULT_COMMIT_EVERY`` of the backend), which the next
    run redoes.
    """
    if commit_every is None:
        commit_every = DEFAULT_COMMIT_EVERY.get(backend.name, 200_000)
    if commit_every < 1 or batch_size < 1:
        raise SqaError(f"--commit-every must be at least 1 (got {commit_every}; batch size {batch_size})")
    index_dir = Path(index_dir)
    files = [str(Path(f).expanduser().resolve()) for f in corpus_files]
    for f in files:
        fp = Path(f)
        if fp.is_dir():
            raise BadInput(
                f"{f}: is a directory; pass a corpus file (.jsonl, .jsonl.gz or the StrategyQA paragraph "
                "file) to --corpus"
            )
        if not fp.is_file():
            raise BadInput(f"{f}: corpus file not found; pass an existing file to --corpus")
        if not os.access(fp, os.R_OK):
            raise BadInput(f"{f}: permission denied reading the corpus file; check its permissions (chmod +r)")
    with build_lock(index_dir):
        return _build(files, index_dir, backend, strict, commit_every, batch_size, on_progress, on_error, preset)


def _build(
    files: list[str],
    index_dir: Path,
    backend: SearchBackend,
    strict: bool,
    commit_every: int,
    batch_size: int,
    on_progress,
    on_error,
    preset: str | None,
) -> BuildReport:
    report = BuildReport(backend=backend.name, corpus_files=files)

    start_file, start_pos, rejected_before = 0, 0, 0
    ckpt_path = index_dir / CHECKPOINT
    ckpt = _json_file(ckpt_path) if ckpt_path.exists() else None
    ckpt = ckpt if isinstance(ckpt, dict) and ckpt.get("backend") == backend.name else None
    # what the files hold, read once per build for the resume check and the manifest alike
    content = corpus_content(files, known=ckpt)
    start = session_start(backend)  # the count now, for the exact checks of sqa.indexing.resume (Elasticsearch)
    if ckpt is not None and not resumable(ckpt, files, content, ckpt_path):
        ckpt = None  # other content: from the first line again (one warning line says why)
    if ckpt is not None:
        report.preexisting = int(ckpt.get("preexisting", 0))
        report.resumed = True
        if not lost_since_checkpoint(ckpt, start, index_dir):
            start_file, start_pos = ckpt["file_index"], ckpt["position"]
            report.read, report.indexed, report.skipped = ckpt["read"], ckpt["indexed"], ckpt["skipped"]
            rejected_before = int(ckpt.get("rejected", 0))
    else:
        report.preexisting = backend.count() if start is None else start[0]

    def rejected() -> int:
        return rejected_before + int(backend.item_errors or 0)

    t0 = time.perf_counter()
    pending = 0

    def checkpoint(file_index: int, position: int) -> None:
        with hold_sigint():  # the commit and the checkpoint that records it, or neither
            backend.commit()
            write_json_atomic(
                ckpt_path,
                indent=2,
                obj={
                    "backend": backend.name,
                    "corpus_files": files,
                    "corpus_content": content,
                    "file_index": file_index,
                    "position": position,
                    "read": report.read,
                    "indexed": report.indexed,
                    "skipped": report.skipped,
                    "preexisting": report.preexisting,
                    "rejected": rejected(),
                    "count": None if start is None else backend.count(),
                },
            )

    for fi in range(start_file, len(files)):
        path = files[fi]
        stats = ReadStats()
        skip = start_pos if fi == start_file else 0
        size = os.path.getsize(path)
        batch = []
        stream = read_corpus(path, stats=stats, on_error=on_error, strict=strict, skip_lines=skip)

        def flush() -> None:
            nonlocal pending, batch
            report.indexed += backend.add(batch)
            pending += len(batch)
            batch = []
            if on_progress:
                on_progress(
                    BuildProgress(
                        fi,
                        path,
                        size,
                        stats.bytes_read,
                        report.read + stats.read,
                        report.indexed,
                        report.skipped + stats.skipped,
                        time.perf_counter() - t0,
                    )
                )

        for p in stream:
            batch.append(p)
            if len(batch) >= batch_size:
                flush()
                if pending >= commit_every:
                    report.read += stats.read
                    report.skipped += stats.skipped
                    stats.read = stats.skipped = 0
                    checkpoint(fi, stats.position)
                    pending = 0
        if batch:
            flush()
        report.read += stats.read
        report.skipped += stats.skipped
        report.errors.extend(stats.errors)
        # the file is done: the next file starts at its beginning
        checkpoint(fi + 1, 0)
        pending = 0
        if on_progress:
            on_progress(
                BuildProgress(
                    fi, path, size, size, report.read, report.indexed, report.skipped, time.perf_counter() - t0
                )
            )

    backend.commit()
    report.count = backend.count()
    report.rejected = rejected()
    report.duplicates = max(0, report.preexisting + report.read - report.rejected - report.count)
    check_final_count(backend, start, report, ckpt_path)  # exact (Elasticsearch); else the next run re-sends all
    report.seconds = time.perf_counter() - t0
    if report.count == 0:
        ckpt_path.unlink(missing_ok=True)  # nothing to resume: a re-run reads the files again
        names = ", ".join(files)
        why = (
            f"all {report.skipped:,} non-blank lines were malformed (see the messages above)"
            if report.skipped
            else "the input holds no paragraphs (empty file?)"
        )
        raise BadInput(
            f"{names}: no paragraph indexed, {why}; check --corpus (one JSON object a line with "
            "title, para_id, para; or StrategyQA's paragraph file)"
        )
    manifest = {
        "backend": backend.name,
        "preset": preset,
        "corpus": f"preset:{preset}" if preset else corpus_id(files),
        "corpus_files": files,  # where they were: informational (sqa.indexing.manifest.same_corpus)
        "corpus_content": content,
        "paragraphs_read": report.read,
        "paragraphs_skipped": report.skipped,
        "paragraph_count": report.count,
        "paragraphs_before": report.preexisting,
        "paragraphs_rejected": report.rejected,
        "duplicates_replaced": report.duplicates,
        "build_seconds": round(report.seconds, 2),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    manifest.update(backend.manifest_extra())
    if report.resumed and "es_item_errors" in manifest:  # this session's errors plus the earlier sessions'
        manifest["es_item_errors"] = report.rejected
    write_json_atomic(index_dir / MANIFEST, manifest, indent=2)
    ckpt_path.unlink(missing_ok=True)
    return report
