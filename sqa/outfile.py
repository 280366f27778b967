"""The one rule for every file sqa writes (issue 50, item 1).

sqa writes only regular files. Before it writes (or renames a temporary file over) a path,
``check_target`` looks at what is there, without following a link (``os.lstat``):

- nothing, or a regular file: written (a regular file is replaced atomically where the writer
  renames; that file is sqa's output or the user named it as the output);
- a device, a FIFO, a socket or a directory: refused with ``BadInput`` naming the path and what
  it is; it is never renamed over, written into, or deleted;
- a symbolic link (to anything, or dangling): refused with ``BadInput`` naming the link and its
  target. sqa neither writes through a link (it could land anywhere, e.g. on ``/dev/null``) nor
  replaces it; give the link's target, or another path, instead.

The temporary file beside the target (``<name>.tmp``) is checked the same way, so a link or a
FIFO planted under that name is refused rather than followed or blocked on.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sqa.types import BadInput

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of(path: str | Path) -> str | None:
    """What ``path`` is when it is something sqa must not write over: ``"a symbolic link to T"``,
    ``"a directory"``, ``"a FIFO (named pipe)"``, ...; None for nothing there or a regular file."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return None  # unreadable: the write itself reports it
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"a symbolic link to {target}"
    if stat.S_ISREG(st.st_mode):
        return None
    for test, name in _KINDS:
        if test(st.st_mode):
            return name
    return "not a regular file"


def check_target(*paths: str | Path) -> None:
    """Raise ``BadInput`` (one line naming the path and what it is) when any of ``paths`` is a
    symbolic link, a device, a FIFO, a socket or a directory (see the module doc); else return."""
    for p in paths:
        kind = kind_of(p)
        if kind is not None:
            raise BadInput(
                f"{p}: is {kind}, not a regular file; sqa writes only regular files and never writes "
                "through or replaces anything else; give a file path (or remove what is there yourself)"
            )


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through ``<name>.tmp`` and a rename, after
    ``check_target`` on both; returns the path. Raises BadInput or OSError with the target unchanged."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    check_target(path, tmp)
    tmp.write_text(text, encoding="utf-8")
    check_target(path)
    os.replace(tmp, path)
    return path
