"""Corpus files, streamed (``read_corpus``; "reader" in sqa means the language-model reader).

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

import orjson
from isal import igzip_threaded, isal_zlib

from sqa.types import BadInput, Paragraph, SqaError

ErrorCallback = Callable[[str, int, str], None]
# what a damaged compressed stream raises while it is read
_STREAM_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, isal_zlib.error)


def _damaged(path, e: BaseException) -> SqaError:
    if isinstance(e, PermissionError):
        return SqaError(f"{path}: permission denied reading the corpus file; check its permissions (chmod +r)")
    if isinstance(e, OSError) and not isinstance(e, gzip.BadGzipFile) and e.errno is not None:
        return SqaError(f"{path}: cannot read the corpus file ({e.strerror or e}); check the file and the disk")
    return SqaError(
        f"{path}: compressed stream is truncated or corrupt ({type(e).__name__}: {e or 'unexpected end'}); "
        "re-create or re-download the file"
    )


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
            raise BadInput(f"{path}:{line}: {reason} (run without --strict to skip and count malformed lines)")
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
        raise BadInput(f"{path}: corpus file not found; check the --corpus path") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a directory; pass a corpus file to --corpus") from None
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
    if _later_line_is_jsonl(head):  # a bad first line is skipped and counted like any other (issue 50 item 10a)
        return "jsonl"
    if head[:1] == b"{":
        first_line = head.split(b"\n", 1)[0]
        try:
            obj = json.loads(first_line)
        except ValueError:  # a JSON document over several lines (or one long line): the paragraph dict
            return "strategyqa"
        # one object on the first line: a JSONL line, unless it is the whole paragraph dict
        # ({evidence ID: {content, ...}} written on one line)
        if (
            isinstance(obj, dict)
            and "para" not in obj
            and "title" not in obj
            and any(isinstance(v, dict) for v in obj.values())
        ):
            return "strategyqa"
        return "jsonl"
    raise BadInput(f"{path}:1: not a JSON corpus file (expected JSONL paragraphs or a StrategyQA paragraph dict)")


def _later_line_is_jsonl(head: bytes, lines: int = 20) -> bool:
    """Whether one of the next ``lines`` complete lines after the first of ``head`` is a JSONL
    paragraph record (an object with ``title`` or ``para``): then the file is JSONL whatever its
    first line holds."""
    for line in head.split(b"\n")[1:-1][:lines]:
        if line.strip()[:1] == b"{":
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and ("para" in obj or "title" in obj):
                return True
    return False


def _open_jsonl(path: Path):
    """``(raw, lines)`` for a JSONL corpus file: gzip is decompressed by ISA-L in a background
    thread (``isal.igzip_threaded``: the GIL is released while it inflates, so it runs beside the
    parser; ISA-L inflates and splits lines in 0.9 us a paragraph against 2.4-2.5 for zlib,
    bench/results/index_profile.json); xz and plain files as in ``_open_binary``."""
    raw, f = _open_binary(path)
    if isinstance(getattr(f, "raw", None), gzip.GzipFile):
        f.close()  # the stdlib reader _open_binary made (nothing read; it leaves ``raw`` open)
        try:
            raw.seek(0)
            f = igzip_threaded.open(raw, "rb", block_size=1 << 20)
        except BaseException:
            raw.close()
            raise
    return raw, f


def _record_error(obj) -> str | None:
    """Why a decoded JSONL record is malformed (see the module doc), or None when it is valid."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    title, para_id, text = obj.get("title"), obj.get("para_id"), obj.get("para")
    missing = [k for k, v in (("title", title), ("para_id", para_id), ("para", text)) if v is None]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if not isinstance(title, str) or not title.strip():
        return f"wrong field type: title must be a non-empty string, got {_short(title)}"
    if not (
        (isinstance(para_id, int) and not isinstance(para_id, bool)) or (isinstance(para_id, str) and para_id.strip())
    ):
        return f"wrong field type: para_id must be an integer or a non-empty string, got {_short(para_id)}"
    if not isinstance(text, str):
        return f"wrong field type: para must be a string, got {type(text).__name__} {_short(text)}"
    return optional_field_error(obj)


def _loads(line: bytes):
    """Decode one JSON line: orjson (0.7 us a paragraph against 2.6 for ``json.loads``,
    bench/results/index_profile.json), falling back to the
    standard library for what orjson refuses and ``json`` accepts (NaN, integers over 64 bits,
    UTF-16/32 text, lone surrogates), so that the set of valid lines is the standard library's.
    Raises ``json.JSONDecodeError`` / ``UnicodeDecodeError`` as ``json.loads`` does."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        obj = json.loads(line)
    where = not_text_field(obj)  # orjson refuses lone surrogates; json takes them, and no index can write them
    if where is not None:
        raise NotText(f"field {where!r} holds a lone surrogate (\\ud800-\\udfff), not Unicode text; fix the line")
    return obj


class NotText(ValueError):
    """A corpus record whose text holds a lone surrogate (JSON ``"\\ud800"``): not Unicode text."""


def not_text_field(obj, key: str = "") -> str | None:
    """The field (``key`` of the record) of the first string in ``obj`` that is not Unicode text
    (a lone surrogate), or None."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
        except UnicodeEncodeError:
            return key or "the record"
    elif isinstance(obj, dict):
        for k, v in obj.items():
            where = not_text_field(k, "a key") or not_text_field(v, key or str(k))
            if where is not None:
                return where
    elif isinstance(obj, list):
        return next((w for w in (not_text_field(v, key) for v in obj) if w is not None), None)
    return None


def read_corpus_jsonl(
    path: str | Path,
    stats: ReadStats | None = None,
    on_error: ErrorCallback | None = None,
    strict: bool = False,
    skip_lines: int = 0,
) -> Iterator[Paragraph]:
    """Yield paragraphs from a full-corpus JSONL file (plain, .gz or .xz), one per valid line.

    ``skip_lines`` lines are passed over without parsing (used to resume a build). Required
    fields: ``title`` (str), ``para_id`` (int or non-empty str), ``para`` (str); ``section`` (str)
    and ``headers`` (list of str) are optional. Raises SqaError for a missing, unreadable or
    damaged file, or for a malformed line when ``strict``.
    """
    path = Path(path)
    stats = stats if stats is not None else ReadStats()
    raw, f = _open_jsonl(path)
    name = str(path)
    str_, int_, list_, dict_ = str, int, list, dict
    try:
        lineno = 0
        if skip_lines:
            for lineno, _ in zip(range(1, skip_lines + 1), f):  # noqa: B007 (the count is used below)
                pass
        for lineno, line in enumerate(f, start=lineno + 1):  # noqa: B020 (numbering goes on from the skipped lines)
            stats.position = lineno
            if not lineno & 255:  # tell() is a system call: update the progress position every 256 lines
                stats.bytes_read = raw.tell()
            try:
                obj = _loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                if not line.strip():
                    continue
                stats.record_error(name, lineno, f"invalid JSON ({e})", on_error, strict)
                continue
            except NotText as e:
                stats.record_error(name, lineno, str(e), on_error, strict)
                continue
            # the fast path: exact types as a JSON decoder makes them; anything else is checked
            # (and explained) by _record_error
            if type(obj) is dict_:
                title, para_id, text = obj.get("title"), obj.get("para_id"), obj.get("para")
                section, headers = obj.get("section"), obj.get("headers")
                if (
                    type(title) is str_
                    and type(text) is str_
                    and title.strip()
                    and (type(para_id) is int_ or (type(para_id) is str_ and para_id.strip()))
                    and (section is None or type(section) is str_)
                    and (headers is None or (type(headers) is list_ and all(type(h) is str_ for h in headers)))
                ):
                    stats.read += 1
                    yield Paragraph(f"{title}-{para_id}", title, text, section or "", tuple(headers) if headers else ())
                    continue
            reason = _record_error(obj)
            if reason:
                stats.record_error(name, lineno, reason, on_error, strict)
                continue
            stats.read += 1  # valid, but not in the fast path's exact types (an int subclass, say)
            yield Paragraph(
                evidence_id=f"{obj['title']}-{obj['para_id']}",
                title=obj["title"],
                text=obj["para"],
                section=obj.get("section") or "",
                headers=tuple(obj.get("headers") or ()),
            )
        stats.bytes_read = raw.tell()
    except _STREAM_ERRORS as e:
        raise _damaged(path, e) from None
    finally:
        f.close()
        raw.close()


def read_strategyqa_paragraphs(
    path: str | Path,
    stats: ReadStats | None = None,
    on_error: ErrorCallback | None = None,
    strict: bool = False,
    skip_lines: int = 0,
) -> Iterator[Paragraph]:
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
        raise BadInput(f"{path}:{e.lineno}: not valid JSON ({e.msg}); expected StrategyQA's paragraph dict") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start:,}); save the file as UTF-8") from None
    except _STREAM_ERRORS as e:
        raise _damaged(path, e) from None
    finally:
        raw.close()
    if not isinstance(data, dict):
        raise BadInput(f"{path}:1: expected a JSON object keyed by evidence ID")
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
        elif not_text_field({eid: rec}) is not None:
            reason = f"field {not_text_field({eid: rec})!r} holds a lone surrogate, not Unicode text"
        elif title is not None and not isinstance(title, str):
            reason = f"wrong field type: title must be a string, got {_short(title)}"
        if reason:
            stats.record_error(str(path), n, f"entry {eid!r}: {reason}", on_error, strict)
            continue
        stats.read += 1
        yield Paragraph(
            evidence_id=eid,
            title=title or eid.rsplit("-", 1)[0],
            text=rec["content"],
            section=rec.get("section") or "",
            headers=tuple(rec.get("headers") or ()),
        )


def read_corpus(
    path: str | Path,
    stats: ReadStats | None = None,
    on_error: ErrorCallback | None = None,
    strict: bool = False,
    skip_lines: int = 0,
) -> Iterator[Paragraph]:
    """Yield paragraphs from a corpus file of either format (detected from its content)."""
    reader = read_corpus_jsonl if detect_format(path) == "jsonl" else read_strategyqa_paragraphs
    return reader(path, stats=stats, on_error=on_error, strict=strict, skip_lines=skip_lines)
