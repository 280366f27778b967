"""When a build resumes (``sqa.indexing.build``): a checkpoint is resumed only over corpus files of
the content it was made from (``resumable``), and a commit and its checkpoint are written under one
Ctrl-C hold (``hold_sigint``). And the count checks of a resumable build against a backend that says which documents were new
(Elasticsearch: ``SearchBackend.created``; issue 41 item 5). A server can lose documents between two
sessions of a build (a node restarted without its data, an index restored from an older snapshot)
or during one; the checkpoint alone cannot see that, so:

- the checkpoint records the backend's ``count()`` after each commit; a resumed build whose
  server now holds fewer documents re-sends the corpus from its first line (documents are keyed by
  evidence ID, so what is still there is replaced, never duplicated), with one warning line;
- at the end the count must be exactly the count at the session's start plus the documents this
  session created; otherwise the build stops with one line (the checkpoint is set to re-send
  everything, so the same command repairs the index).
"""

from __future__ import annotations

import signal
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqa.jsonio import write_json_atomic
from sqa.types import SearchBackend, SqaError, SqaWarning


def json_file(path: Path):
    """The parsed JSON of ``path``, or None when it is missing or not JSON."""
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def session_start(backend: SearchBackend) -> tuple[int, int] | None:
    """``(count, created)``: the backend's count at the start of a build session (after a refresh,
    so documents a killed load sent are counted) and its ``created`` so far; None when the backend
    does not say which additions are new."""
    if backend.created is None:
        return None
    backend.commit()  # waits for nothing, restores the settings of a killed load, refreshes
    return backend.count(), int(backend.created)


def lost_since_checkpoint(ckpt: dict, start: tuple[int, int] | None, where) -> bool:
    """True (after one warning line) when the resumed build must re-send the corpus from its start:
    the server holds fewer documents than the checkpoint recorded after its last commit, or the
    last session found documents missing at its end (``resend``)."""
    then = ckpt.get("count")
    if ckpt.get("resend"):
        why = "the last run found documents missing at its end"
    elif start is not None and isinstance(then, int) and start[0] < then:
        why = f"the index holds {start[0]:,} paragraphs, fewer than the {then:,} at the last checkpoint (the server lost documents)"
    else:
        return False
    warnings.warn(f"{where}: {why}; re-sending the corpus from its start", SqaWarning, stacklevel=3)
    return True


def check_final_count(backend: SearchBackend, start: tuple[int, int] | None, report, ckpt_path: Path) -> None:
    """Raise SqaError when the final ``report.count`` is not the session's ``start`` plus the
    documents it created (the server lost or gained documents during the build), after setting the
    checkpoint ``ckpt_path`` to re-send the whole corpus on the next run."""
    if start is None:
        return
    new = int(backend.created or 0) - start[1]
    want = start[0] + new
    if report.count == want:
        return
    write_json_atomic(
        ckpt_path,
        {
            "backend": backend.name,
            "corpus_files": report.corpus_files,
            "file_index": 0,
            "position": 0,
            "read": 0,
            "indexed": 0,
            "skipped": 0,
            "preexisting": report.preexisting,
            "rejected": 0,
            "count": None,
            "resend": True,
        },
        indent=2,
    )
    raise SqaError(
        f"{ckpt_path.parent}: the index holds {report.count:,} paragraphs, not the {want:,} this build should "
        f"have left ({start[0]:,} before this run + {new:,} new): the server lost documents during "
        "the build; run the same command to re-send the corpus (nothing is duplicated)"
    )


@contextmanager
def hold_sigint() -> Iterator[None]:
    """Hold Ctrl-C while the block runs (a commit and its checkpoint: both or neither), then raise
    KeyboardInterrupt if it came. A no-op outside the main thread or where SIGINT is ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGINT)
    if old in (signal.SIG_IGN, None):
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if received:
        raise KeyboardInterrupt


def resumable(ckpt: dict, files: list[str], content: list[dict], ckpt_path: Path) -> bool:
    """Whether checkpoint ``ckpt`` (of this backend, at ``ckpt_path``) was made from corpus files
    of ``content`` (``sqa.indexing.manifest.same_content``: sizes and sha256, wherever the files
    lie; one written before checkpoints recorded the content: from the same paths). When not, one
    ``SqaWarning`` line names the first file that differs: the build starts from the first line."""
    from sqa.indexing.manifest import same_content

    if isinstance(ckpt.get("corpus_content"), list) and same_content(ckpt, content):
        return True
    if not isinstance(ckpt.get("corpus_content"), list) and ckpt.get("corpus_files") == files:
        return True
    warnings.warn(_start_over_line(ckpt_path, ckpt, files, content), SqaWarning, stacklevel=4)
    return False


def _start_over_line(ckpt_path: Path, ckpt: dict, files: list[str], content: list[dict]) -> str:
    """The one line saying that an interrupted build is not resumed, and why."""
    rec = ckpt.get("corpus_content")
    if not isinstance(rec, list):
        why = f"other corpus files ({', '.join(map(str, ckpt.get('corpus_files') or []))})"
    elif len(rec) != len(content):
        why = f"{len(rec)} corpus files, not {len(content)}"
    else:
        i = next(
            i
            for i, (r, c) in enumerate(zip(rec, content))
            if (r.get("bytes"), r.get("sha256")) != (c["bytes"], c["sha256"])
        )
        r, c = rec[i], content[i]
        why = (
            f"{files[i]} holds other content ({c['bytes']:,} bytes, sha256 {c['sha256'][:12]}; the interrupted "
            f"build read {r.get('bytes'):,} bytes, sha256 {str(r.get('sha256'))[:12]})"
        )
    return (
        f"{ckpt_path}: not resumed, {why}; indexing from the first line again (the paragraphs indexed "
        "before stay, replaced where an evidence ID repeats; --fresh drops them)"
    )
