"""The one place files are hashed (sha256): a model's weights, a question file's identity in
``run.json``, an answer head's."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path, chunk: int = 1 << 22) -> str:
    """The sha256 (64 hex) of a whole file, read in ``chunk``-byte blocks (a 1 GB model: a few
    seconds). Raises OSError for a missing or unreadable file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def content_digest(path: str | Path, length: int = 12) -> str:
    """The first ``length`` hex digits of the sha256 of a file's bytes, or of a directory's files
    (each file's relative path, then its bytes, in sorted order; e.g. a ``datasets`` folder):
    the identity of a question file in ``run.json`` (``dataset``). Raises OSError."""
    path = Path(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        h.update(str(p.relative_to(path) if path.is_dir() else p.name).encode())
        with open(p, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
    return h.hexdigest()[:length]
