"""Streaming corpus readers.

Two formats, both read in constant memory (the paragraph file is the exception: it is a single
JSON object, 7.7 MB, so it is loaded whole):

- the full corpus format of ``corpus-enwiki-20200511-cirrussearch-parasv2.jsonl.gz`` (StrategyQA
  paper, Geva et al. 2021): one JSON object a line with ``title, para_id, para, docid, secid,
  headerid, section, headers``; plain or gzip; evidence ID = ``"{title}-{para_id}"``.
- StrategyQA's ``strategyqa_train_paragraphs.json``: ``{evidence_id: {title, section, headers,
  para_index, content}}``; the evidence ID is the key.

A malformed line never crashes a run and is never dropped silently: it is counted in
``ReadStats``, reported through ``on_error(file, line, reason)``, and skipped, or, with
``strict=True``, raises ``SqaError`` naming the file and line. Malformed: not JSON, not an
object, a required field missing, or any field of the wrong type (``title``/``para``/``content``
strings, ``para_id`` an integer or a non-empty string, ``section`` a string or null, ``headers`` a
list of strings or null). A file that cannot be read (permissions, a truncated or corrupt
``.gz``/``.xz``) raises ``SqaError`` naming it.
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from sqa.types import Paragraph, SqaError

ErrorCallback = Callable[[str, int, str], None]
# what a damaged compressed stream raises while it is read
_STREAM_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error)


def _damaged(path, e: BaseException) -> SqaError:
    if isinstance(e, PermissionError):
        return SqaError(f"{path}: permission denied reading the corpus file; check its permissions (chmod +r)")
    if isinstance(e, OSError) and not isinstance(e, gzip.BadGzipFile) and e.errno is not None:
        return SqaError(f"{path}: cannot read the corpus file ({e.strerror or e}); check the file and the disk")
    return SqaError(f"{path}: compressed stream is truncated or corrupt ({type(e).__name__}: {e or 'unexpected end'}); "
                    "re-create or re-download the file")


def optional_field_error(obj: dict) -> str | None:
    """Why the optional fields ``section`` / ``headers`` of a record are malformed, or None."""
    section, headers = obj.get("section"), obj.get("headers")
    if section is not None and not isinstance(section, str):
        return f"wrong field type: section must be a string, got {type(section).__name__} {_short(section)}"
    if headers is not None and (not isinstance(headers, list) or not all(isinstance(h, str) for h in headers)):
        return f"wrong field type: headers must be a list of strings, got {_short(headers)}"
    return None


def _short(value, width: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class ReadStats:
    """Counters of one read: paragraphs yielded, malformed lines skipped (with the first few
    ``(file, line, reason)`` kept for the report) and bytes of the compressed input consumed."""

    read: int = 0
    skipped: int = 0
    position: int = 0  # lines (JSONL) / entries (paragraph dict) consumed so far in the current file
    errors: list[tuple[str, int, str]] = field(default_factory=list)
    bytes_read: int = 0

    def record_error(self, path: str, line: int, reason: str, on_error: ErrorCallback | None, strict: bool) -> None:
        if strict:
            raise SqaError(f"{path}:{line}: {reason} (run without --strict to skip and count malformed lines)")
        self.skipped += 1
        if len(self.errors) < 100:
            self.errors.append((path, line, reason))
        if on_error is not None:
            on_error(path, line, reason)


def _open_binary(path: Path):
    try:
        raw = open(path, "rb")
        magic = raw.read(6)
        raw.seek(0)
    except FileNotFoundError:
        raise SqaError(f"{path}: corpus file not found; check the --corpus path") from None
    except IsADirectoryError:
        raise SqaError(f"{path}: is a directory; pass a corpus file to --corpus") from None
    except OSError as e:
        raise _damaged(path, e) from None
    # a 1 MiB buffer over the decompressor: line iteration on a bare GzipFile is ~30% slower
    if magic[:2] == b"\x1f\x8b":
        return raw, io.BufferedReader(gzip.GzipFile(fileobj=raw), 1 << 20)
    if magic == b"\xfd7zXZ\x00":
        return raw, io.BufferedReader(lzma.LZMAFile(raw), 1 << 20)
    return raw, raw


def detect_format(path: str | Path) -> str:
    """``"jsonl"`` (full-corpus schema, one object a line) or ``"strategyqa"`` (one dict keyed by
    evidence ID), from the first non-blank byte and the first record's keys."""
    raw, f = _open_binary(Path(path))
    try:
        head = f.read(65536).lstrip()
    except _STREAM_ERRORS as e:
        raise _damaged(path, e) from None
    finally:
        raw.close()
    if not head:
        return "jsonl"
    if head[:1] == b"{":
        first_line = head.split(b"\n", 1)[0]
        try:
            obj = json.loads(first_line)
        except ValueError:  # a JSON document over several lines (or one long line): the paragraph dict
            return "strategyqa"
        # one object on the first line: a JSONL line, unless it is the whole paragraph dict
        # ({evidence ID: {content, ...}} written on one line)
        if isinstance(obj, dict) and "para" not in obj and "title" not in obj and \
                any(isinstance(v, dict) for v in obj.values()):
            return "strategyqa"
        return "jsonl"
    raise SqaError(f"{path}:1: not a JSON corpus file (expected JSONL paragraphs or a StrategyQA paragraph dict)")


def read_corpus_jsonl(path: str | Path, stats: ReadStats | None = None, on_error: ErrorCallback | None = None,
                      strict: bool = False, skip_lines: int = 0) -> Iterator[Paragraph]:
    """Yield paragraphs from a full-corpus JSONL file (plain, .gz or .xz), one per valid line.

    ``skip_lines`` lines are passed over without parsing (used to resume a build). Required
    fields: ``title`` (str), ``para_id`` (int or non-empty str), ``para`` (str); ``section`` (str)
    and ``headers`` (list of str) are optional. Raises SqaError for a missing, unreadable or
    damaged file, or for a malformed line when ``strict``.
    """
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    raw, f = _open_binary(path)
    name = str(path)
    try:
        for lineno, line in enumerate(f, start=1):
            if lineno <= skip_lines:
                continue
            stats.position = lineno
            if not lineno & 255:  # tell() is a system call: update the progress position every 256 lines
                stats.bytes_read = raw.tell()
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                stats.record_error(name, lineno, f"invalid JSON ({e})", on_error, strict)
                continue
            if not isinstance(obj, dict):
                stats.record_error(name, lineno, "not a JSON object", on_error, strict)
                continue
            title, para_id, text = obj.get("title"), obj.get("para_id"), obj.get("para")
            missing = [k for k, v in (("title", title), ("para_id", para_id), ("para", text)) if v is None]
            if missing:
                stats.record_error(name, lineno, f"missing field(s) {', '.join(missing)}", on_error, strict)
                continue
            reason = None
            if not isinstance(title, str) or not title.strip():
                reason = f"wrong field type: title must be a non-empty string, got {_short(title)}"
            elif not ((isinstance(para_id, int) and not isinstance(para_id, bool))
                      or (isinstance(para_id, str) and para_id.strip())):
                reason = f"wrong field type: para_id must be an integer or a non-empty string, got {_short(para_id)}"
            elif not isinstance(text, str):
                reason = f"wrong field type: para must be a string, got {type(text).__name__} {_short(text)}"
            else:
                reason = optional_field_error(obj)
            if reason:
                stats.record_error(name, lineno, reason, on_error, strict)
                continue
            stats.read += 1
            yield Paragraph(evidence_id=f"{title}-{para_id}", title=title, text=text,
                            section=obj.get("section") or "", headers=tuple(obj.get("headers") or ()))
        stats.bytes_read = raw.tell()
    except _STREAM_ERRORS as e:
        raise _damaged(path, e) from None
    finally:
        raw.close()


def read_strategyqa_paragraphs(path: str | Path, stats: ReadStats | None = None,
                               on_error: ErrorCallback | None = None, strict: bool = False,
                               skip_lines: int = 0) -> Iterator[Paragraph]:
    """Yield paragraphs from StrategyQA's paragraph file (dict evidence ID -> title, section,
    headers, para_index, content; plain, .gz or .xz), in file order. An entry whose value is not
    an object with a string ``content`` is a malformed record: "line" is its 1-based entry number.
    ``skip_lines`` entries are passed over (resume)."""
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    raw, f = _open_binary(path)
    try:
        data = json.load(f)
        stats.bytes_read = raw.tell()
    except json.JSONDecodeError as e:
        raise SqaError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); expected StrategyQA's paragraph dict") from None
    except UnicodeDecodeError as e:
        raise SqaError(f"{path}: not UTF-8 text (byte {e.start:,}); save the file as UTF-8") from None
    except _STREAM_ERRORS as e:
        raise _damaged(path, e) from None
    finally:
        raw.close()
    if not isinstance(data, dict):
        raise SqaError(f"{path}:1: expected a JSON object keyed by evidence ID")
    for n, (eid, rec) in enumerate(data.items(), start=1):
        if n <= skip_lines:
            continue
        stats.position = n
        if not isinstance(rec, dict) or not isinstance(rec.get("content"), str):
            stats.record_error(str(path), n, f"entry {eid!r} has no string 'content'", on_error, strict)
            continue
        title = rec.get("title")
        reason = optional_field_error(rec)
        if not eid.strip():
            reason = "empty evidence ID"
        elif title is not None and not isinstance(title, str):
            reason = f"wrong field type: title must be a string, got {_short(title)}"
        if reason:
            stats.record_error(str(path), n, f"entry {eid!r}: {reason}", on_error, strict)
            continue
        stats.read += 1
        yield Paragraph(evidence_id=eid, title=title or eid.rsplit("-", 1)[0], text=rec["content"],
                        section=rec.get("section") or "", headers=tuple(rec.get("headers") or ()))


def read_corpus(path: str | Path, stats: ReadStats | None = None, on_error: ErrorCallback | None = None,
                strict: bool = False, skip_lines: int = 0) -> Iterator[Paragraph]:
    """Yield paragraphs from a corpus file of either format (detected from its content)."""
    reader = read_corpus_jsonl if detect_format(path) == "jsonl" else read_strategyqa_paragraphs
    return reader(path, stats=stats, on_error=on_error, strict=strict, skip_lines=skip_lines)
