"""Crash-safe JSON files, shared by every stage (index manifest and checkpoint, run files).

``write_json_atomic`` writes to ``<name>.tmp`` in the same directory, fsyncs it and renames it over
the target (``os.replace`` is atomic on POSIX), so a reader or a run killed with ``kill -9`` sees
either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sqa.outfile import check_target


def write_json_atomic(path: str | Path, obj, *, indent: int = 1) -> Path:
    """Write ``obj`` as JSON (UTF-8, ``indent`` spaces, non-ASCII kept, trailing newline) to
    ``path`` atomically; returns the path. Raises OSError (e.g. a full disk) with the target
    unchanged; a left-over ``<name>.tmp`` is overwritten by the next write. Raises BadInput for a
    target (or ``.tmp``) that is a link, device, FIFO, socket or directory (``sqa.outfile``)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    check_target(path, tmp)  # never a link, device, FIFO, socket or directory (sqa.outfile)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path
