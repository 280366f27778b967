"""The response cache and cost meter of served models (``sqa.models.openai``).

:class:`ResponseCache`: one SQLite file, ``$SQA_HOME/cache/responses/responses.sqlite``, mapping
``sha256(identity, endpoint, request body)`` to the server's JSON answer. ``identity`` is the
served model's identity string (its ``/v1/models`` entry and a fingerprint of its read-outs,
``OpenAIModel.fingerprint``), so other weights served under the same name never hit the old
answers; the request body holds every sampling parameter (temperature, max_tokens, logprobs,
stop, ...), so a request is answered from the cache only when it is exactly the same request.
A re-run, a resumed run, or another preset sharing a reading therefore sends no request twice.
The same file keeps, per (servers, model name, ``--api``), what loading the model found (its
``/v1/models`` entry, endpoint, read-out, fingerprint, concurrency: ``sqa.models.served_load``), so
a run whose every request is cached sends none at all.
Several processes may share the file: SQLite's own locking (WAL journal) serialises writers. A
lock held longer by another process is waited out for at most ``LOCK_WAIT_S`` seconds in all (one
warning line when the wait starts), then the run stops in one line naming the file (issue 50,
item 6). A cache file that is damaged, truncated, not a regular file or not writable stops the
run in one line naming it and what to do (item 5): nothing is silently left uncached. The run goes
on without the cache only when the user says so: ``$SQA_OPENAI_CACHE=0`` turns the cache off.

:class:`Cost`: calls sent, calls answered from the cache, prompt and completion tokens (the
server's ``usage``) and seconds spent waiting for the server; ``sqa eval`` records the difference
per question in ``traces.jsonl`` and the sums in ``run.json`` (``cost``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from sqa.types import SqaError, SqaWarning

CACHE_DIR = Path("cache") / "responses"
CACHE_FILE = "responses.sqlite"
LOCK_WAIT_S = 4.0  # seconds in all one cache object waits on locks held by other processes
_BUSY_S = 0.5  # SQLite's own wait per statement (another sqa process's write takes milliseconds)


@dataclass
class Cost:
    """What a served model's requests cost so far (counts; seconds of wall-clock time spent in requests)."""

    calls_sent: int = 0
    calls_cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    request_seconds: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["request_seconds"] = round(d["request_seconds"], 3)
        return d

    def minus(self, other: "Cost") -> dict:
        """This cost less ``other`` (an earlier copy), as a dict."""
        a, b = self.to_dict(), other.to_dict()
        return {k: round(a[k] - b[k], 3) if isinstance(a[k], float) else a[k] - b[k] for k in a}


def cache_enabled() -> bool:
    return (os.environ.get("SQA_OPENAI_CACHE") or "1").strip().lower() not in ("0", "false", "no", "off")


def request_key(identity: str, endpoint: str, body: dict) -> str:
    """The cache key of one request: sha256 of the identity, endpoint and canonical JSON body."""
    blob = json.dumps(
        {"identity": identity, "endpoint": endpoint, "body": body},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _is_lock(e: sqlite3.Error) -> bool:
    return isinstance(e, sqlite3.OperationalError) and any(w in str(e).lower() for w in ("locked", "busy"))


def _short_by(path: Path) -> int:
    """Bytes an SQLite file at ``path`` lacks of the size its header states (0: whole, or unknown).
    The header (sqlite.org/fileformat.html, section 1.3): page size at offset 16, the page count at 28,
    valid when the change counter at 24 equals the version-valid-for number at 92. Not checked while
    a write-ahead log holds pages (they may grow the file at the next checkpoint)."""
    try:
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            return 0
        with open(path, "rb") as f:
            head = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return 0
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0") or head[24:28] != head[92:96]:
        return 0
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    return max(0, page * int.from_bytes(head[28:32], "big") - size)


def cache_unusable(path: Path, why: str) -> SqaError:
    """The one line that stops a run whose response cache ``path`` cannot be used (``why``)."""
    return SqaError(
        f"the response cache {path} {why}; move it aside (mv '{path}' '{path}.bad') and run again to "
        "start an empty cache, or set SQA_OPENAI_CACHE=0 to run without the cache"
    )


class ResponseCache:
    """A concurrency-safe key -> JSON store in one SQLite file (see the module doc). ``path`` None:
    ``$SQA_HOME/cache/responses/responses.sqlite``. ``get``, ``put`` and their ``_load`` kin raise
    SqaError (one line naming the file and what to do) when the file is damaged, truncated, not a
    regular file or unwritable, or stays locked by another process past ``LOCK_WAIT_S`` seconds in
    all; a value that is not JSON is skipped (``errors`` counts those)."""

    def __init__(self, path: str | Path | None = None):
        if path is None:
            from sqa.paths import sqa_home

            path = sqa_home() / CACHE_DIR / CACHE_FILE
        self.path = Path(path)
        self.errors = 0
        self.lock_waited = 0.0  # seconds waited on other processes' locks so far
        self._local = threading.local()
        self._state = threading.Lock()
        self._warned = False

    def _conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is not None:
            return c
        if os.path.lexists(self.path) and not self.path.is_file():
            kind = "a folder" if self.path.is_dir() else "not a regular file"
            raise cache_unusable(self.path, f"is {kind}, not an SQLite file")
        if self.path.is_file() and (short := _short_by(self.path)):
            raise cache_unusable(self.path, f"is truncated ({short:,} bytes short of the size its header states)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise cache_unusable(self.path, f"cannot be created ({e.strerror or e})") from None

        def connect(c):
            c = sqlite3.connect(self.path, timeout=_BUSY_S, isolation_level=None)
            try:
                if c.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    c.execute("PRAGMA journal_mode=WAL")
                c.execute(
                    "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, endpoint TEXT, response TEXT NOT NULL)"
                )
                c.execute("CREATE TABLE IF NOT EXISTS loads (key TEXT PRIMARY KEY, record TEXT NOT NULL)")
            except BaseException:
                c.close()
                raise
            return c

        self._local.conn = c = self._run(connect, None)
        return c

    def _run(self, op, c):
        """``op(c)``, waiting out other processes' locks (``LOCK_WAIT_S`` in all); SqaError otherwise."""
        while True:
            t = time.monotonic()
            try:
                return op(c)
            except sqlite3.Error as e:
                if not _is_lock(e):
                    what = "is damaged" if type(e) is sqlite3.DatabaseError else "cannot be used"
                    raise cache_unusable(self.path, f"{what} ({e})") from None
                with self._state:
                    self.lock_waited += time.monotonic() - t
                    waited, warn, self._warned = self.lock_waited, not self._warned, True
                if waited >= LOCK_WAIT_S:
                    raise cache_unusable(
                        self.path, f"stayed locked by another process for {waited:.0f} s (let it finish first)"
                    ) from None
                if warn:
                    warnings.warn(
                        f"the response cache {self.path} is locked by another process; "
                        f"waiting for it at most {LOCK_WAIT_S:g} s in all",
                        SqaWarning,
                        stacklevel=2,
                    )
                time.sleep(0.1)

    def _one(self, sql: str, key: str):
        c = self._conn()
        row = self._run(lambda c: c.execute(sql, (key,)).fetchone(), c)
        try:
            return json.loads(row[0]) if row else None
        except ValueError:
            self.errors += 1
            return None

    def get(self, key: str) -> dict | None:
        """The answer cached under ``key``, or None."""
        return self._one("SELECT response FROM responses WHERE key = ?", key)

    def put(self, key: str, endpoint: str, response: dict) -> None:
        """Cache ``response`` under ``key`` (the newest replaces the older)."""
        try:
            row = (key, endpoint, json.dumps(response, ensure_ascii=False))
        except (TypeError, ValueError):
            self.errors += 1
            return
        self._write("INSERT OR REPLACE INTO responses (key, endpoint, response) VALUES (?, ?, ?)", row)

    def get_load(self, key: str) -> dict | None:
        """The load-time findings recorded under ``key`` (``sqa.models.served_load.load_key``), or None."""
        rec = self._one("SELECT record FROM loads WHERE key = ?", key)
        return rec if isinstance(rec, dict) else None

    def put_load(self, key: str, record: dict) -> None:
        """Record the load-time findings under ``key`` (the newest replaces the older)."""
        try:
            row = (key, json.dumps(record, ensure_ascii=False, sort_keys=True))
        except (TypeError, ValueError):
            self.errors += 1
            return
        self._write("INSERT OR REPLACE INTO loads (key, record) VALUES (?, ?)", row)

    def _write(self, sql: str, row: tuple) -> None:
        self._run(lambda c: c.execute(sql, row), self._conn())

    def __bool__(self) -> bool:  # an empty cache is still a cache
        return True

    def __len__(self) -> int:
        return int(self._run(lambda c: c.execute("SELECT COUNT(*) FROM responses").fetchone()[0], self._conn()))
