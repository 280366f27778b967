"""Fetch the full StrategyQA corpus (``sqa index --corpus full``): a resumable HTTP download into
``$SQA_HOME/corpus``, then an integrity check.

The file is ``corpus-enwiki-20200511-cirrussearch-parasv2.jsonl.gz`` of the StrategyQA release
(Geva et al. 2021; URL as in the StrategyQA repository's README and docs/elasticsearch.md): 36.6M
paragraphs in the full-corpus JSONL format read by ``sqa.indexing.corpus``.

Protocol (standard library ``urllib``; no extra dependency):

- The bytes go to ``NAME.part`` next to the destination, recorded as this module's by
  ``NAME.part.json`` (the URL without credentials, and the size once known) written before the
  first byte; a ``.part`` without that record is refused (neither continued nor deleted), one
  recorded for another URL is started anew. A ``.part`` left by an interrupted run
  (Ctrl-C, kill -9, a lost connection) is continued with an HTTP ``Range: bytes=N-`` request; a
  server that answers ``206 Partial Content`` with ``Content-Range: bytes N-.../TOTAL`` appends
  to it. A server that ignores ranges (``200``) restarts the file from byte 0, and says so. A
  connection lost mid-transfer is retried from where it stopped, at most ``retries`` times in a
  row without getting past the most bytes held before (a server that ignores ranges and always
  hangs up half-way would otherwise restart for ever).
- Size: the total from ``Content-Length`` (200) or ``Content-Range`` (206) must equal the bytes
  on disk at the end. Checksum: the release publishes none and this machine cannot fetch the
  file, so no SHA-256 is known here (``EXPECTED_SHA256`` is None); the SHA-256 of what was
  downloaded is computed while it arrives and recorded in ``NAME.json`` beside the file, and is
  compared when one is given (``expected_sha256``). Integrity: the whole gzip stream is then
  inflated once (ISA-L in a thread: 2.6 s for bench/index.py's 2M-paragraph, 504 MB corpus on
  this machine, so about 50 s for the 36.6M paragraphs) and its lines counted: a truncated or corrupt stream fails its CRC or length check here, not
  half-way through indexing. A ``.part`` that fails a check was made by this module, so it is
  deleted (and the error says the next run downloads again); nothing else is ever deleted.
- Only then is ``NAME.part`` renamed to ``NAME``; ``NAME.json`` records url (credentials
  removed), size, sha256 and lines. A later call finds ``NAME`` and ``NAME.json`` agreeing and
  returns at once.

Errors (offline, DNS failure, refused connection, HTTP error, a failed check) raise SqaError with
one line naming the URL without its credentials (``user:password@``, as the Elasticsearch
backend shows its URL).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from sqa.redact import redact_url as safe_url, split_credentials  # safe_url: the URL without user:password@
from sqa.paths import sqa_home
from sqa.types import SqaError
from sqa.outfile import check_target

CORPUS_NAME = "corpus-enwiki-20200511-cirrussearch-parasv2.jsonl.gz"
# the StrategyQA release (README of github.com/eladsegal/strategyqa; docs/elasticsearch.md)
CORPUS_URL = f"https://storage.googleapis.com/ai2i/strategyqa/data/{CORPUS_NAME}"
URL_ENV = "SQA_CORPUS_URL"
# not published with the release and not measurable offline: the size is checked against the
# server's Content-Length / Content-Range, integrity by inflating the whole gzip stream
EXPECTED_SIZE: int | None = None
EXPECTED_SHA256: str | None = None

_CHUNK = 1 << 20  # bytes per read/write (1 MiB)


@dataclass
class FetchProgress:
    """Passed to the progress callback: the phase (``download`` or ``verify``), bytes done and the
    total (None while unknown), and how the download started (``resumed_from`` bytes already on
    disk, ``restarted`` when the server ignored the range request)."""

    phase: str
    done: int
    total: int | None
    resumed_from: int = 0
    restarted: bool = False


def corpus_dir() -> Path:
    """Where downloaded corpora live: ``$SQA_HOME/corpus``."""
    return sqa_home() / "corpus"


def corpus_url(url: str | None = None) -> str:
    """The URL to fetch: ``url`` if given (an empty one too: ``fetch_corpus`` refuses it), else
    ``$SQA_CORPUS_URL`` when set and not empty, else ``CORPUS_URL``."""
    if url is not None:
        return url
    return os.environ.get(URL_ENV) or CORPUS_URL


def _request(url: str, start: int, timeout: float):
    """Open ``url`` from byte ``start`` (a Range request when ``start`` > 0). Credentials in the URL
    become a Basic Authorization header (urllib would otherwise refuse the URL)."""
    bare, user, password = split_credentials(url)  # a password may hold / # ? @ : (see sqa.redact)
    headers = {"User-Agent": "sqa-corpus-fetch", "Accept-Encoding": "identity"}
    if user is not None:
        import base64

        token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
        url = bare
    if start:
        headers["Range"] = f"bytes={start}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _total_from(resp) -> tuple[int, int | None]:
    """(offset the body starts at, total size or None) from a 200/206 response."""
    if resp.status == 206:
        m = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)", resp.headers.get("Content-Range", ""))
        if not m:
            raise ValueError(f"206 without a usable Content-Range ({resp.headers.get('Content-Range')!r})")
        return int(m.group(1)), None if m.group(3) == "*" else int(m.group(3))
    length = resp.headers.get("Content-Length")
    return 0, int(length) if length and length.isdigit() else None


def _hash_file(path: Path, upto: int) -> "hashlib._Hash":
    h = hashlib.sha256()
    with open(path, "rb") as f:
        left = upto
        while left > 0:
            b = f.read(min(_CHUNK, left))
            if not b:
                break
            h.update(b)
            left -= len(b)
    return h


def _net_error(url: str, e: BaseException) -> SqaError:
    shown = safe_url(url)
    if isinstance(e, urllib.error.HTTPError):
        return SqaError(
            f"{shown}: HTTP {e.code} {e.reason}; check the URL (--corpus-url / ${URL_ENV}) or pass "
            f"--corpus PATH for a copy on disk"
        )
    reason = getattr(e, "reason", None) or e
    if isinstance(reason, socket.gaierror):
        why = f"cannot resolve the host: {reason.strerror or reason}; offline?"
    elif isinstance(reason, (ConnectionRefusedError,)):
        why = "connection refused"
    elif isinstance(reason, (TimeoutError, socket.timeout)):
        why = "timed out"
    else:
        why = f"{type(reason).__name__}: {reason}"
    return SqaError(
        f"{shown}: cannot download the corpus ({why}); check the network, or download it elsewhere "
        f"and pass --corpus PATH"
    )


def verify_gzip(path: Path, on_progress: Callable[[FetchProgress], None] | None = None) -> int:
    """Inflate the whole gzip file ``path`` and return its line count. Raises SqaError naming the
    file when the stream is truncated or corrupt (CRC or length mismatch, bad header)."""
    from sqa.indexing.corpus import _STREAM_ERRORS
    from isal import igzip_threaded

    size = path.stat().st_size
    lines = 0
    tail = b""
    with open(path, "rb") as raw:
        try:
            with igzip_threaded.open(raw, "rb") as f:
                n = 0
                while True:
                    b = f.read(_CHUNK * 4)
                    if not b:
                        break
                    lines += b.count(b"\n")
                    tail = b[-1:]
                    n += 1
                    if on_progress and not n & 7:
                        on_progress(FetchProgress("verify", raw.tell(), size))
        except _STREAM_ERRORS as e:
            raise SqaError(
                f"{path}: the downloaded file is not a complete gzip stream ({type(e).__name__}: "
                f"{e or 'unexpected end'})"
            ) from None
    if tail and tail != b"\n":
        lines += 1  # a last line without its newline
    if on_progress:
        on_progress(FetchProgress("verify", size, size))
    return lines


def fetch_corpus(
    url: str | None = None,
    dest_dir: str | Path | None = None,
    name: str = CORPUS_NAME,
    on_progress: Callable[[FetchProgress], None] | None = None,
    timeout: float = 60.0,
    retries: int = 5,
    expected_sha256: str | None = EXPECTED_SHA256,
    expected_size: int | None = EXPECTED_SIZE,
) -> Path:
    """Download ``url`` (default ``corpus_url()``) to ``dest_dir/name`` (default
    ``$SQA_HOME/corpus``) as described in the module doc, and return the file's path. Returns at
    once when the file is already there and its record ``NAME.json`` agrees (same size).

    ``timeout``: seconds without data before a connection counts as lost; ``retries``: how many
    times in a row a connection lost mid-transfer is resumed within this call (1 s, 2 s, 4 s ...
    apart, at most 30 s; only getting past the most bytes held before resets the count). A
    failure to connect before any byte arrived is not retried: offline, a DNS failure or a refused connection is reported at once.
    Raises SqaError (one line, URL redacted) for these, an HTTP error, a connection that keeps
    failing, a failed size/checksum/gzip check, or a file of the same name that this function
    did not download; KeyboardInterrupt leaves the ``.part`` for the next call to continue.
    """
    url = corpus_url(url)
    shown = safe_url(url)
    if not url.strip():
        raise SqaError(
            f"--corpus-url / ${URL_ENV} is empty; give an http(s) URL, or leave it out for the StrategyQA release"
        )
    try:
        parts = urlsplit(split_credentials(url)[0])
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:  # urllib's message quotes the bad port, which may be a password: not shown
        raise SqaError(
            f"{shown}: not a usable URL (the host or port cannot be read); give an http(s) URL to "
            f"--corpus-url / ${URL_ENV}"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SqaError(
            f"{shown}: not an http(s) URL; give one to --corpus-url / ${URL_ENV}, or a file on disk to --corpus"
        )
    d = Path(dest_dir) if dest_dir else corpus_dir()
    dest, part, record = d / name, d / (name + ".part"), d / (name + ".json")
    done = _record(record)
    if dest.is_file() and done and done.get("size") == dest.stat().st_size:
        return dest
    if dest.exists():
        raise SqaError(
            f"{dest}: a file of this name is already there, but not one this command downloaded and "
            f"checked (no matching {record.name}); index it as it is with `sqa index --corpus full --corpus {dest}`, "
            "or move it away to download the corpus"
        )
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SqaError(
            f"{d}: cannot create the corpus directory ({e.strerror or e}); set SQA_HOME to a writable place"
        ) from None

    lock = open(d / (name + ".lock"), "a+b")
    try:
        import fcntl

        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise SqaError(
                f"{part}: another sqa is downloading this file; wait for it to finish, then run the same command again"
            ) from None
        done = _record(record)
        if dest.is_file() and done and done.get("size") == dest.stat().st_size:
            return dest  # the other download finished meanwhile
        return _fetch_locked(
            url, shown, dest, part, record, on_progress, timeout, retries, expected_sha256, expected_size
        )
    finally:
        lock.close()


def part_sidecar(part: Path) -> Path:
    """``NAME.part.json`` beside a ``.part``: ``{"url": redacted URL, "size": total or null}``, written
    before the first byte; a ``.part`` without one was not written here: never appended to or deleted."""
    return part.with_name(part.name + ".json")


def _write_sidecar(part: Path, shown: str, total: int | None) -> None:
    side = part_sidecar(part)
    tmp = side.with_name(side.name + ".tmp")
    check_target(side, tmp)  # sqa.outfile
    tmp.write_text(json.dumps({"url": shown, "size": total}) + "\n", encoding="utf-8")
    os.replace(tmp, side)


def _drop_part(part: Path) -> None:  # a .part this module wrote (its sidecar says so), and the sidecar
    part.unlink(missing_ok=True)
    part_sidecar(part).unlink(missing_ok=True)


def _fetch_locked(
    url: str,
    shown: str,
    dest: Path,
    part: Path,
    record: Path,
    on_progress,
    timeout: float,
    retries: int,
    expected_sha256: str | None,
    expected_size: int | None,
) -> Path:
    side = _record(part_sidecar(part))
    if part.exists():
        if not part.is_file() or side is None or side.get("url") is None:
            raise SqaError(
                f"{part}: a partial file that sqa did not record (no {part_sidecar(part).name} beside it), "
                f"so it is neither continued nor deleted; if it is a whole copy of the corpus, index it with "
                f"`sqa index --corpus full --corpus {part}`, else move it away, then run the same command again"
            )
        if side.get("url") != shown:
            _drop_part(part)  # ours (recorded), but of another URL: its bytes cannot continue this one
    recorded_size = side.get("size") if side and part.is_file() else None
    have = part.stat().st_size if part.is_file() else 0
    resumed_from = have
    h = _hash_file(part, have) if have else hashlib.sha256()
    total: int | None = None
    restarted = False
    # failures: connections lost in a row without getting past ``best``, the most bytes held so far
    # (a server that ignores ranges and always hangs up half-way never gets past it: bounded too)
    failures, received, best = 0, 0, have
    last_error: BaseException | None = None

    def lost() -> SqaError:
        return SqaError(
            f"{shown}: the connection was lost {failures} times in a row without getting past "
            f"{best:,} bytes (last: {type(last_error).__name__ if last_error else 'closed early'}); "
            f"{have:,} bytes are kept in {part}: run the same command again to resume"
        )

    while total is None or have < total:
        if failures:
            if failures > retries:
                raise lost()
            time.sleep(min(30, 2 ** (failures - 1)))
        try:
            resp = _request(url, have, timeout)
        except urllib.error.HTTPError as e:
            if e.code == 416 and have:  # the range starts at or past the server's end
                m = re.match(r"bytes \*/(\d+)", (e.headers or {}).get("Content-Range", "") or "")
                if m and int(m.group(1)) == have:
                    total = have  # the .part was complete already
                    break
                _drop_part(part)  # ours (its sidecar says so), and longer than the server's file: invalid
                have, h, restarted, best = 0, hashlib.sha256(), True, 0
                continue
            raise _net_error(url, e) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            if not received:
                raise _net_error(url, e) from None
            failures, last_error = failures + 1, e
            continue
        with resp:
            try:
                offset, size = _total_from(resp)
            except ValueError as e:
                raise SqaError(f"{shown}: {e}; cannot resume this download") from None
            if resp.status == 206 and offset != have:
                raise SqaError(
                    f"{shown}: asked for bytes from {have:,}, the server sent them from {offset:,}; "
                    f"cannot resume ({part} is kept)"
                )
            if offset != have:  # a 200 to a range request: this server does not do ranges; start again
                restarted = restarted or have > 0
                have, h = 0, hashlib.sha256()
            if size is not None and recorded_size is not None and size != recorded_size and have:
                _drop_part(part)  # ours; its bytes are of the earlier file
                raise SqaError(
                    f"{shown}: the file on the server changed since the partial download ({recorded_size:,} "
                    f"then {size:,} bytes); the partial file was deleted, run the same command again to "
                    "download it anew"
                )
            if size is not None:
                if total is not None and size != total:
                    raise SqaError(
                        f"{shown}: the file changed on the server during the download ({total:,} then "
                        f"{size:,} bytes); run the same command again"
                    )
                total = size
            if expected_size is not None and total is not None and total != expected_size:
                raise SqaError(
                    f"{shown}: the server's file has {total:,} bytes, expected {expected_size:,}; check the URL"
                )
            _write_sidecar(part, shown, total)  # before the first byte: the .part is recorded as ours
            with open(part, "r+b" if have and part.exists() else "wb") as f:
                f.seek(have)
                f.truncate()
                if on_progress:
                    on_progress(FetchProgress("download", have, total, resumed_from, restarted))
                while True:
                    try:
                        b = resp.read(_CHUNK)
                    except (OSError, http.client.HTTPException) as e:  # reset, timeout, IncompleteRead
                        failures, last_error = failures + 1, e
                        break
                    if not b:
                        if total is not None and have < total:  # closed early without an error
                            failures, last_error = failures + 1, None
                        break
                    f.write(b)  # a disk error (ENOSPC) propagates: not a network failure
                    h.update(b)
                    have += len(b)
                    received += len(b)
                    if have > best:  # past the previous maximum: progress, the count starts again
                        best, failures = have, 0
                    if on_progress:
                        on_progress(FetchProgress("download", have, total, resumed_from, restarted))
        if total is None and not failures:
            break  # no announced size: the end of the body is the end of the file

    size = part.stat().st_size
    if total is not None and size != total:
        _drop_part(part)
        raise SqaError(
            f"{shown}: downloaded {size:,} bytes, the server announced {total:,}; the partial file was "
            "deleted, run the same command again to download it anew"
        )
    digest = h.hexdigest()
    if expected_sha256 and digest != expected_sha256.lower():
        _drop_part(part)
        raise SqaError(
            f"{shown}: SHA-256 {digest} differs from the expected {expected_sha256}; the download was "
            "deleted, run the same command again to download it anew"
        )
    try:
        lines = verify_gzip(part, on_progress)
    except SqaError as e:
        _drop_part(part)
        raise SqaError(f"{e}; it was deleted, run the same command again to download it anew") from None
    os.replace(part, dest)
    part_sidecar(part).unlink(missing_ok=True)
    tmp = record.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "url": shown,
                "size": size,
                "sha256": digest,
                "lines": lines,
                "resumed_from": resumed_from,
                "restarted": restarted,
                "downloaded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    os.replace(tmp, record)
    return dest


def _record(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def corpus_record(dest: Path) -> dict | None:
    """The ``NAME.json`` record written next to a completed download (url, size, sha256, lines), or None."""
    return _record(dest.with_name(dest.name + ".json"))
