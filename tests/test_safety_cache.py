"""Issue 50, items 5 and 6: a response cache that is damaged, truncated, a folder or locked by
another process stops a served run in one line naming the file and what to do, within seconds;
the run goes on without the cache only when told to (``SQA_OPENAI_CACHE=0``)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time

import pytest

from helpers import StandIn, one_error_line, run_sqa, served_eval_args, throwaway_home, write_log_odds_head

ENV = {"OPENAI_API_KEY": "sk-test", "SQA_OPENAI_MAX_RETRIES": "0", "SQA_OPENAI_CONCURRENCY": "1"}


@pytest.fixture
def setup(tmp_path):
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    home = throwaway_home(tmp_path / "home")
    server = StandIn()
    env = {**ENV, "SQA_HOME": str(home)}
    head = write_log_odds_head(tmp_path / "head.json")

    def run(out, limit=3, **extra):
        args = served_eval_args(server.url, head, tmp_path / out, limit=limit)
        return run_sqa(args, env={**env, **extra}, timeout=60)

    yield run, home / "cache" / "responses" / "responses.sqlite"
    server.close()


def _cost(r, tmp_path, out):
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads((tmp_path / out / "run.json").read_text())["cost"]


def _damage(db, kind):
    c = sqlite3.connect(db, isolation_level=None)  # the answers in the main file, as after a clean exit
    c.execute("CREATE TABLE filler (x TEXT)")
    c.executemany("INSERT INTO filler VALUES (?)", [("x" * 400,)] * 300)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    for extra in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        extra.unlink(missing_ok=True)
    data = db.read_bytes()
    if kind == "garbage":
        db.write_bytes(b"this is no database\n" * 300)
    elif kind == "truncated":
        db.write_bytes(data[: len(data) // 3])
    elif kind == "zeroed":  # pages in the middle overwritten
        db.write_bytes(data[:4096] + b"\0" * (len(data) - 8192) + data[-4096:])
    else:
        db.unlink()
        db.mkdir()
        (db / "note.txt").write_text("not a cache")


def _filled(db):
    from sqa.models.served_cache import ResponseCache

    cache = ResponseCache(db)
    for i in range(300):
        cache.put(f"k{i}", "completions", {"text": "x" * 400})
    cache.put_load("load", {"entry": {}})
    del cache
    return db


@pytest.mark.parametrize("kind", ["garbage", "truncated", "zeroed", "folder"])
def test_a_damaged_cache_file_is_one_line_naming_it(tmp_path, kind):
    """Garbage, a file cut to a third, pages zeroed in the middle, a folder: the first use of the
    cache raises SqaError in one line naming the file and both ways on (main: a miss, silently)."""
    from sqa.models.served_cache import ResponseCache
    from sqa.types import SqaError

    db = _filled(tmp_path / "responses.sqlite")
    _damage(db, kind)
    cache = ResponseCache(db)
    with pytest.raises(SqaError) as e:
        cache.get_load("load")
        for i in range(300):
            cache.get(f"k{i}")
    line = str(e.value)
    assert "\n" not in line and f"the response cache {db}" in line and "SQA_OPENAI_CACHE=0" in line, line
    assert ("folder" in line) if kind == "folder" else ("damaged" in line or "truncated" in line), line
    assert db.is_dir() if kind == "folder" else db.is_file()


@pytest.mark.server
def test_a_damaged_cache_stops_the_run_and_a_rerun_counts_right(setup, tmp_path):
    """A damaged cache stops ``sqa eval`` in one line naming the file; the run goes on without the
    cache only under SQA_OPENAI_CACHE=0. Once moved aside, a run sends its 3 requests and a re-run
    answers all 3 from the new cache (main went on silently, and its re-run cached none)."""
    run, db = setup
    db.parent.mkdir(parents=True)
    _damage(_filled(db), "garbage")
    line = one_error_line(run("damaged"))
    assert f"the response cache {db} is damaged" in line and "SQA_OPENAI_CACHE=0" in line, line
    assert not (tmp_path / "damaged" / "run.json").exists()
    assert _cost(run("without", SQA_OPENAI_CACHE="0"), tmp_path, "without")["calls_sent"] == 3
    shutil.move(str(db), str(db) + ".bad")
    assert _cost(run("anew"), tmp_path, "anew")["calls_sent"] == 3
    cost = _cost(run("again"), tmp_path, "again")
    assert (cost["calls_sent"], cost["calls_cached"]) == (0, 3), cost


@pytest.mark.server
def test_a_locked_cache_waits_seconds_with_a_line_then_stops(setup, tmp_path):
    """Another process holds the cache's write lock (``BEGIN EXCLUSIVE``) for the whole run: the
    run says so in a warning line, waits a few seconds in all and stops in one line naming the
    file (main waited out a 30 s busy timeout up to 3 times per write: minutes)."""
    run, db = setup
    assert _cost(run("first"), tmp_path, "first")["calls_sent"] == 3
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t = time.monotonic()
        r = run("locked", limit=5)  # two questions not cached: their answers are to be written
        took = time.monotonic() - t
        line = one_error_line(r, notices=True)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert f"the response cache {db}" in r.stderr and "locked by another process" in r.stderr, r.stderr[-2000:]
    assert f"the response cache {db} stayed locked by another process" in line and "SQA_OPENAI_CACHE=0" in line
    assert took < 20, took
    # the lock gone, the run resumes from the cache
    cost = _cost(run("after", limit=5), tmp_path, "after")
    assert cost["calls_cached"] >= 3 and cost["calls_sent"] + cost["calls_cached"] == 5, cost
