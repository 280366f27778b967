"""An index's ``manifest.json``, and the identity of an index derived from it.

An index is identified by what it is, never by where it is (as bm25s keeps its parameters in
``params.index.json`` next to the index): a run recorded on one machine resumes on another whose
index has the same identity, wherever its directory lies. The identity (``index_identity``):

- ``schema``: the manifest schema of this identity (``IDENTITY_SCHEMA``);
- ``backend``: ``embedded`` (tantivy) or ``elasticsearch``;
- ``corpus``: ``preset:<name>`` for a shipped corpus (``sqa index --corpus NAME``), else
  ``files:<12 hex>``, the sha256 of the corpus files' base names and byte sizes (``corpus_id``:
  cheap for a 36.6M-paragraph corpus, and the same wherever the files are);
- ``paragraph_count``: unique paragraphs in the index;
- ``analyzer``, ``bm25`` (``{"k1", "b"}``) and ``schema_version`` (the backend's index schema):
  what the backend records about how it ranks (``SearchBackend.manifest_extra``).

Indexes built before these fields were written get the values of their backend as it is today
(the analyser and BM25 parameters did not change since the first build), so older manifests
keep working.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

from sqa.types import SqaError

MANIFEST = "manifest.json"
IDENTITY_SCHEMA = 1
# what the backends recorded before manifests carried it (see the module doc)
_BACKEND_DEFAULTS = {
    "embedded": {
        "schema_version": 2,
        "bm25": {"k1": 1.2, "b": 0.75},
        "analyzer": "tantivy en: simple tokenizer, remove_long(40), lowercase, english stopwords, english stemmer",
    },
    "elasticsearch": {"schema_version": 1, "bm25": {"k1": 1.2, "b": 0.75}, "analyzer": "elasticsearch english"},
}


def read_manifest(index_dir: str | Path) -> dict | None:
    """The index's ``manifest.json`` as a dict, or None if the directory has none.

    Raises SqaError naming the file when it is not a JSON object or cannot be read."""
    p = Path(index_dir) / MANIFEST
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, OSError) as e:
        where = f"{p}:{e.lineno}" if isinstance(e, json.JSONDecodeError) else str(p)
        raise SqaError(
            f"{where}: cannot read the index manifest ({type(e).__name__}); rebuild with `sqa index --fresh`"
        ) from None
    if not isinstance(data, dict):
        raise SqaError(f"{p}: the index manifest is not a JSON object; rebuild with `sqa index --fresh`")
    return data


def corpus_id(files: Sequence[str | Path]) -> str:
    """``files:<12 hex>``: sha256 over ``"<base name>\\t<size in bytes>\\n"`` of each corpus file, in
    order. Location-independent and O(1) per file (the full corpus is 36.6M paragraphs); it does not
    read the bytes, so two different files of the same name and size would collide. Raises OSError
    for a missing file."""
    h = hashlib.sha256()
    for f in files:
        p = Path(f)
        h.update(f"{p.name}\t{p.stat().st_size}\n".encode("utf-8"))
    return "files:" + h.hexdigest()[:12]


def index_identity(manifest: dict | None, backend: str) -> dict:
    """The identity of an index (see the module doc) from its manifest (None: an index without
    one, e.g. a build that did not finish: corpus and paragraph count None). ``backend`` is the
    backend it is opened with (the manifest's own wins when it names one)."""
    m = manifest or {}
    name = m.get("backend") or backend
    defaults = _BACKEND_DEFAULTS.get(name, {})
    corpus = m.get("corpus") or (f"preset:{m['preset']}" if m.get("preset") else None)
    if corpus is None and m.get("corpus_files"):
        corpus = (
            "files:" + hashlib.sha256("".join(f"{Path(f).name}\n" for f in m["corpus_files"]).encode()).hexdigest()[:12]
        )  # sizes unknown now: names only
    return {
        "schema": IDENTITY_SCHEMA,
        "backend": name,
        "corpus": corpus,
        "paragraph_count": m.get("paragraph_count"),
        "analyzer": m.get("analyzer", defaults.get("analyzer")),
        "bm25": m.get("bm25", defaults.get("bm25")),
        "schema_version": m.get("schema_version", defaults.get("schema_version")),
    }


# sha256 of the files this process read: (resolved path, size, mtime_ns) -> hex, so one command
# (the already-built check, then the build's own) reads a multi-GB corpus file at most once
_SHA_SEEN: dict[tuple[str, int, int], str] = {}


def _sha256(path: Path, st) -> str:
    from sqa.hashing import file_sha256

    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_SEEN:
        _SHA_SEEN[key] = file_sha256(path)
    return _SHA_SEEN[key]


def corpus_content(files: Sequence[str | Path], known: dict | None = None) -> list[dict]:
    """What the corpus files hold, wherever they are: ``[{"name", "bytes", "sha256", "mtime_ns"}]``
    in order (``sqa.hashing.file_sha256``; the 29 MB of the mini corpus in well under a second).
    The manifest and a build's checkpoint record it (``corpus_content``); :func:`same_corpus` and
    :func:`same_content` compare it. ``known``: a record (checkpoint or manifest: ``corpus_files``
    and ``corpus_content``) whose sha256 is taken for a file at its recorded path with its recorded
    size and mtime, without reading it (as make and rsync judge a file unchanged); any other file
    is read once per process. Raises OSError for a missing file."""
    where, rec = (known or {}).get("corpus_files"), (known or {}).get("corpus_content")
    reuse = {}
    if isinstance(where, list) and isinstance(rec, list) and len(where) == len(rec):
        reuse = {
            (w, r.get("bytes"), r.get("mtime_ns")): r.get("sha256") for w, r in zip(where, rec) if isinstance(r, dict)
        }
    out = []
    for f in files:
        p = Path(f)
        st = p.stat()
        sha = reuse.get((str(f), st.st_size, st.st_mtime_ns)) or _sha256(p, st)
        out.append({"name": p.name, "bytes": st.st_size, "sha256": sha, "mtime_ns": st.st_mtime_ns})
    return out


def same_content(recorded: dict, content: list[dict]) -> bool:
    """Whether a record (a build's checkpoint or a manifest) names corpus files of the content
    ``content`` (:func:`corpus_content` of the files given now): the same number of files, each of
    the recorded size and sha256, whatever their names and paths. A record made before
    ``corpus_content`` was written never matches (the caller compares its paths instead)."""
    rec = recorded.get("corpus_content")
    if not isinstance(rec, list) or len(rec) != len(content):
        return False
    return all(
        isinstance(r, dict) and (r.get("bytes"), r.get("sha256")) == (c["bytes"], c["sha256"])
        for r, c in zip(rec, content)
    )


def same_corpus(manifest: dict, files: Sequence[str | Path]) -> bool:
    """Whether ``manifest``'s index was built from a corpus with the same content as ``files``:
    the same number of files, each of the recorded size and sha256 (``corpus_content``), wherever
    the files lie now (a moved checkout or venv, another machine). A file at its recorded path
    with its recorded size and mtime is not read again (as make and rsync judge a file unchanged:
    the 36.6M-paragraph corpus is gigabytes); one missing at its recorded path counts as the same
    (the full corpus's download may be removed once indexed). A manifest written before
    ``corpus_content`` was recorded is compared by the files' absolute paths, as it was then."""
    paths = [str(Path(f).expanduser().resolve()) for f in files]
    recorded = manifest.get("corpus_content")
    if not isinstance(recorded, list):
        return manifest.get("corpus_files") == paths
    if len(recorded) != len(paths):
        return False
    where = manifest.get("corpus_files") or [None] * len(paths)
    for path, was, rec in zip(paths, where, recorded):
        p = Path(path)
        if not p.exists():
            if path != was:
                return False
            continue
        st = p.stat()
        if st.st_size != rec.get("bytes"):
            return False
        if path == was and st.st_mtime_ns == rec.get("mtime_ns"):
            continue
        if _sha256(p, st) != rec.get("sha256"):
            return False
    return True
