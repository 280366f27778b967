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
Several processes may share the file: SQLite's own locking (WAL journal, a 30 s busy timeout)
serialises writers; a write that still fails is skipped (the answer is not lost, only not cached).
``$SQA_OPENAI_CACHE=0`` turns the cache off.

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
from dataclasses import asdict, dataclass
from pathlib import Path

CACHE_DIR = Path("cache") / "responses"
CACHE_FILE = "responses.sqlite"


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


class ResponseCache:
    """A concurrency-safe key -> JSON store in one SQLite file (see the module doc). ``path`` None:
    ``$SQA_HOME/cache/responses/responses.sqlite``. ``get`` and ``put`` never raise for a damaged or
    locked file: a read that fails is a miss, a write that fails is skipped (``errors`` counts them)."""

    def __init__(self, path: str | Path | None = None):
        if path is None:
            from sqa.paths import sqa_home

            path = sqa_home() / CACHE_DIR / CACHE_FILE
        self.path = Path(path)
        self.errors = 0
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection | None:
        c = getattr(self._local, "conn", None)
        if c is None:
            for attempt in range(3):  # two processes creating the file at once: one waits
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    c = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                    if c.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                        c.execute("PRAGMA journal_mode=WAL")
                    c.execute(
                        "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, endpoint TEXT, "
                        "response TEXT NOT NULL)"
                    )
                    c.execute("CREATE TABLE IF NOT EXISTS loads (key TEXT PRIMARY KEY, record TEXT NOT NULL)")
                    break
                except sqlite3.OperationalError:
                    c = None
                    time.sleep(0.05 * (attempt + 1))
                except (OSError, sqlite3.Error):
                    c = None
                    break
            if c is None:
                self.errors += 1
                return None
            self._local.conn = c
        return c

    def get(self, key: str) -> dict | None:
        c = self._conn()
        if c is None:
            return None
        try:
            row = c.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
            return json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError):
            self.errors += 1
            return None

    def put(self, key: str, endpoint: str, response: dict) -> None:
        try:
            row = (key, endpoint, json.dumps(response, ensure_ascii=False))
        except (TypeError, ValueError):
            self.errors += 1
            return
        self._write("INSERT OR REPLACE INTO responses (key, endpoint, response) VALUES (?, ?, ?)", row)

    def get_load(self, key: str) -> dict | None:
        """The load-time findings recorded under ``key`` (``sqa.models.served_load.load_key``), or None."""
        c = self._conn()
        if c is None:
            return None
        try:
            row = c.execute("SELECT record FROM loads WHERE key = ?", (key,)).fetchone()
            rec = json.loads(row[0]) if row else None
            return rec if isinstance(rec, dict) else None
        except (sqlite3.Error, ValueError):
            self.errors += 1
            return None

    def put_load(self, key: str, record: dict) -> None:
        """Record the load-time findings under ``key`` (the newest replaces the older)."""
        try:
            row = (key, json.dumps(record, ensure_ascii=False, sort_keys=True))
        except (TypeError, ValueError):
            self.errors += 1
            return
        self._write("INSERT OR REPLACE INTO loads (key, record) VALUES (?, ?)", row)

    def _write(self, sql: str, row: tuple) -> None:
        for attempt in range(3):  # a lock held past the busy timeout by another process: try again
            c = self._conn()
            if c is None:
                return
            try:
                c.execute(sql, row)
                return
            except sqlite3.OperationalError:
                time.sleep(0.05 * (attempt + 1))
            except sqlite3.Error:
                break
        self.errors += 1

    def __bool__(self) -> bool:  # an empty cache is still a cache
        return True

    def __len__(self) -> int:
        c = self._conn()
        try:
            return int(c.execute("SELECT COUNT(*) FROM responses").fetchone()[0]) if c else 0
        except sqlite3.Error:
            return 0
