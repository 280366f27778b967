"""Build + search with the embedded (tantivy) backend on the real StrategyQA paragraphs, the
``sqa index`` / ``sqa search`` commands and their exit codes, and resuming a build killed with
SIGKILL (kill -9) at several points."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sqa.cli import main
from sqa.indexing import build_index, open_backend, corpus_files, read_manifest
from sqa.indexing.build import CHECKPOINT, MANIFEST
from sqa.indexing.embedded import TantivyBackend
from sqa.strategyqa import DISTRACTORS_FILE, PARAGRAPHS_FILE
from sqa.types import SqaError

N_GOLD = 9_251
QUERY = "maximum depth of the Black Sea"
CLI = [sys.executable, "-c", "import sys; from sqa.cli import main; sys.exit(main())"]


def distractor_file(path: Path, n: int, start: int = 0) -> Path:
    """The first ``n`` real distractor paragraphs (from line ``start``) as a gzip JSONL file."""
    with gzip.open(DISTRACTORS_FILE, "rt", encoding="utf-8") as src, gzip.open(path, "wt", encoding="utf-8") as dst:
        dst.writelines(itertools.islice(src, start, start + n))
    return path


@pytest.fixture(scope="module")
def gold_index_dir(tmp_path_factory):
    """The 9,251 gold paragraphs indexed by the real command ``sqa index --corpus strategyqa``."""
    d = tmp_path_factory.mktemp("gold") / "index"
    assert main(["index", "--corpus", "strategyqa", "--index-dir", str(d)]) == 0
    return d


def test_gold_index_has_every_paragraph_and_finds_black_sea(gold_index_dir):
    be = open_backend(gold_index_dir)
    try:
        assert be.count() == N_GOLD
        hits = be.search(QUERY, k=10)
        ids = [h.evidence_id for h in hits]
        assert "Black Sea-2" in ids
        assert ids[0] == "Black Sea-2"
        assert [h.rank for h in hits] == list(range(1, 11))
        assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
        top = hits[0].paragraph
        assert top.title == "Black Sea" and "2,212" in top.text
        # get() returns stored paragraphs in the order asked, leaving unknown IDs out
        got = be.get(["Sea of Japan-15", "no such paragraph-1", "Black Sea-2"])
        assert [p.evidence_id for p in got] == ["Sea of Japan-15", "Black Sea-2"]
        # query syntax is never interpreted: quotes, colons, dashes, '#1' are plain words
        odd = [h.evidence_id for h in be.search('"Black Sea" depth: -maximum #1 AND (', k=5)]
        assert "Black Sea-2" in odd
        assert be.search("the of and", k=5) == []  # all stopwords
    finally:
        be.close()
    m = read_manifest(gold_index_dir)
    assert m["backend"] == "embedded" and m["preset"] == "strategyqa"
    assert m["paragraph_count"] == m["paragraphs_read"] == N_GOLD
    assert m["corpus_files"] == [str(PARAGRAPHS_FILE.resolve())]
    assert not (gold_index_dir / CHECKPOINT).exists()


def test_cli_search_json_and_table(gold_index_dir, capsys):
    assert main(["search", "--json", QUERY, "--index-dir", str(gold_index_dir), "-k", "5"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 5
    assert rows[0]["evidence_id"] == "Black Sea-2"
    assert set(rows[0]) == {"evidence_id", "score", "title", "section", "text"}
    assert main(["search", QUERY, "--index-dir", str(gold_index_dir)]) == 0
    out = capsys.readouterr().out
    assert "Black Sea-2" in out and "rank" in out


def test_cli_rerun_of_a_finished_index_is_a_no_op(gold_index_dir, capsys):
    before = read_manifest(gold_index_dir)
    assert main(["index", "--corpus", "strategyqa", "--index-dir", str(gold_index_dir)]) == 0
    assert read_manifest(gold_index_dir) == before
    assert "already built" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["search", QUERY], "no index here"),
        (["search", "  "], "empty query"),
        (["search", QUERY, "-k", "0"], "-k must be at least 1"),
        (["index", "--corpus", "bogus"], "unknown corpus 'bogus'"),
        (["index", "--corpus", "mini", "--corpus", "x.jsonl"], "only full takes a file too"),
        (["index", "--corpus", "/nonexistent/corpus.jsonl.gz"], "/nonexistent/corpus.jsonl.gz"),
        (["search", QUERY, "--backend", "lucene"], "unknown backend 'lucene'"),
    ],
)
def test_cli_errors_exit_2_with_one_line(tmp_path, capsys, argv, message):
    code = main(argv + ["--index-dir", str(tmp_path / "empty")])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_cli_usage_error_and_process_exit_code(tmp_path):
    # the real process: SqaError -> exit status 2 and one line on stderr
    r = subprocess.run(CLI + ["search", QUERY, "--index-dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "no index here" in r.stderr
    r = subprocess.run(CLI + ["search"], capture_output=True, text=True)  # missing QUERY
    assert r.returncode == 2 and "missing argument" in r.stderr.lower()


def test_malformed_lines_skipped_and_counted_or_fatal_under_strict(tmp_path, capsys):
    good = [line for line in gzip.open(DISTRACTORS_FILE, "rt", encoding="utf-8").readlines()[:40]]
    lines = good[:10] + ["{not json\n", '{"title": "T", "para_id": 1}\n'] + good[10:]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(lines), encoding="utf-8")
    d = tmp_path / "idx"
    assert main(["index", "--corpus", str(corpus), "--index-dir", str(d), "--strict"]) == 2
    assert f"{corpus}:11:" in capsys.readouterr().err
    assert main(["index", "--corpus", str(corpus), "--index-dir", str(d), "--fresh"]) == 0
    cap = capsys.readouterr()
    assert "paragraphs read 40, indexed 40, skipped (malformed) 2, in index 40" in cap.out
    assert f"{corpus}:11:" in cap.err and f"{corpus}:12:" in cap.err
    m = read_manifest(d)
    assert m["paragraphs_skipped"] == 2 and m["paragraph_count"] == 40


# --- resume ------------------------------------------------------------------------------------


class CrashAfterCommit:
    """Wraps a backend; raises right after its ``crash_on``-th commit has succeeded, i.e. in the
    window where the data is durable but the build driver has not yet written its checkpoint."""

    def __init__(self, inner, crash_on: int):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "commits", 0)
        object.__setattr__(self, "crash_on", crash_on)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __setattr__(self, name, value):  # e.g. the driver's backend.upsert = ...
        setattr(self.inner, name, value)

    def commit(self):
        self.inner.commit()
        object.__setattr__(self, "commits", self.commits + 1)
        if self.commits == self.crash_on:
            raise RuntimeError("simulated crash between commit and checkpoint")


def test_crash_between_commit_and_checkpoint_leaves_no_duplicates(tmp_path):
    corpus = distractor_file(tmp_path / "d.jsonl.gz", 5_000)
    d = tmp_path / "idx"
    be = CrashAfterCommit(TantivyBackend(d), crash_on=2)
    with pytest.raises(RuntimeError):
        build_index([corpus], d, be, commit_every=1_000, batch_size=500)
    be.inner.close()
    ckpt = json.loads((d / CHECKPOINT).read_text())
    assert ckpt["indexed"] == 1_000  # the 2nd window (paragraphs 1,001-2,000) is committed but not checkpointed
    be = TantivyBackend(d)
    assert be.count() == 2_000
    report = build_index([corpus], d, be, commit_every=1_000, batch_size=500)
    be.close()
    assert report.resumed and report.read == 5_000 and report.skipped == 0
    assert report.count == 5_000  # the re-added window replaced its committed copy
    # and a full re-run into a complete index (manifest removed) still does not duplicate
    (d / MANIFEST).unlink()
    be = TantivyBackend(d)
    report = build_index([corpus], d, be, commit_every=1_000, batch_size=500)
    be.close()
    assert report.count == report.read == 5_000


def test_an_interrupted_build_resumes_by_corpus_content_not_path(tmp_path, monkeypatch):
    """A checkpoint is matched by what the corpus holds (sizes and sha256), not where it lies: a moved
    copy under another name resumes from the checkpoint (hashed once for the check and the manifest
    together; an untouched file at its checkpointed path is not read at all), and one changed byte
    starts over from the first line with one warning line naming the file."""
    import shutil

    import sqa.hashing
    from sqa.types import SqaWarning

    hashed: list[str] = []
    real_sha = sqa.hashing.file_sha256
    monkeypatch.setattr(sqa.hashing, "file_sha256", lambda p, *a: hashed.append(str(p)) or real_sha(p, *a))
    (tmp_path / "a").mkdir()
    src = distractor_file(tmp_path / "d.jsonl.gz", 3_000)
    with gzip.open(src, "rt", encoding="utf-8") as f:  # plain text, so one byte can be changed in place
        lines = f.readlines()
    corpus = tmp_path / "a" / "d.jsonl"
    corpus.write_text("".join(lines), encoding="utf-8")

    def interrupted(d: Path) -> dict:
        be = CrashAfterCommit(TantivyBackend(d), crash_on=2)
        with pytest.raises(RuntimeError):
            build_index([corpus], d, be, commit_every=1_000, batch_size=500)
        be.inner.close()
        ckpt = json.loads((d / CHECKPOINT).read_text())
        assert ckpt["indexed"] == 1_000 and ckpt["corpus_content"][0]["bytes"] == corpus.stat().st_size
        return ckpt

    def resume(d: Path, files) -> tuple:
        first: list[int] = []
        hashed.clear()
        be = TantivyBackend(d)
        try:
            report = build_index(
                files, d, be, commit_every=1_000, batch_size=500, on_progress=lambda p: first.append(p.read)
            )
        finally:
            be.close()
        return report, first[0], list(hashed)

    # the same file at its checkpointed path: resumed, nothing hashed
    d = tmp_path / "same"
    interrupted(d)
    report, first, h = resume(d, [corpus])
    assert report.resumed and first == 1_500 and report.count == report.read == 3_000 and h == []
    # a moved copy under another name: resumed from the checkpoint, hashed once
    d = tmp_path / "moved"
    ckpt = interrupted(d)
    moved = tmp_path / "b" / "copy.jsonl"
    moved.parent.mkdir()
    shutil.copy(corpus, moved)
    report, first, h = resume(d, [moved])
    assert report.resumed and first == 1_500 and report.count == report.read == 3_000
    assert h == [str(moved)]
    m = read_manifest(d)
    assert m["corpus_files"] == [str(moved)] and m["corpus_content"][0]["sha256"] == ckpt["corpus_content"][0]["sha256"]
    # one changed byte (same size): from the first line again, said in one warning line
    d = tmp_path / "changed"
    interrupted(d)
    text = moved.read_text(encoding="utf-8")
    i = text.index(" the ", len(text) // 2)
    moved.write_text(text[:i] + " thE " + text[i + 5 :], encoding="utf-8")
    assert moved.stat().st_size == corpus.stat().st_size
    with pytest.warns(SqaWarning) as w:
        report, first, h = resume(d, [moved])
    (line,) = [str(x.message) for x in w if issubclass(x.category, SqaWarning)]
    assert str(moved) in line and "other content" in line and "from the first line" in line and "\n" not in line
    assert not report.resumed and first == 500 and report.read == 3_000 and report.count == 3_000
    assert h == [str(moved)]  # once: the check and the manifest share it
    assert read_manifest(d)["corpus_content"][0]["sha256"] != ckpt["corpus_content"][0]["sha256"]


def _wait_for(pred, proc, timeout=120.0):
    t0 = time.monotonic()
    while not pred():
        assert proc.poll() is None, "the build finished before it could be interrupted"
        assert time.monotonic() - t0 < timeout, "timed out waiting for the build"
        time.sleep(0.005)


def _checkpoint(d: Path) -> dict | None:
    try:
        return json.loads((d / CHECKPOINT).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def test_sqa_index_killed_with_sigkill_resumes_to_the_exact_count(tmp_path):
    """gold (9,251) + 10,000 distractors, checkpoints every 2,000 paragraphs; kill -9 right after
    the first checkpoint appears, then mid-window of the resumed run, then let it finish."""
    dist = distractor_file(tmp_path / "dist.jsonl.gz", 10_000)
    d = tmp_path / "idx"
    argv = CLI + [
        "index",
        "--corpus",
        str(PARAGRAPHS_FILE),
        "--corpus",
        str(dist),
        "--index-dir",
        str(d),
        "--commit-every",
        "2000",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    # 1) kill as soon as the first checkpoint is on disk
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _wait_for(lambda: _checkpoint(d) is not None, p)
    p.send_signal(signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL
    first = _checkpoint(d)
    assert first["indexed"] < 19_251 and not (d / MANIFEST).exists()

    # 2) resume, and kill in the middle of a later window
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _wait_for(lambda: (_checkpoint(d) or first)["indexed"] > first["indexed"], p)
    time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL
    second = _checkpoint(d)
    assert second["indexed"] < 19_251 and not (d / MANIFEST).exists()

    # 3) run to the end
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "(resumed)" in r.stdout
    assert "paragraphs read 19,251" in r.stdout and "in index 19,251" in r.stdout
    assert "warning" not in r.stderr
    m = read_manifest(d)
    assert m["paragraph_count"] == m["paragraphs_read"] == 19_251
    assert not (d / CHECKPOINT).exists()
    be = open_backend(d)
    try:
        assert be.count() == 19_251
        ids = [h.evidence_id for h in be.search(QUERY, k=10)]
        assert ids.count("Black Sea-2") == 1 and ids[0] == "Black Sea-2"
    finally:
        be.close()


def test_corpus_files_are_the_shipped_corpora():
    assert corpus_files("strategyqa") == [PARAGRAPHS_FILE]
    assert corpus_files("mini") == [PARAGRAPHS_FILE, DISTRACTORS_FILE]
    from sqa.indexing.download import CORPUS_NAME
    from sqa.paths import sqa_home

    assert corpus_files("full") == [sqa_home() / "corpus" / CORPUS_NAME]  # where --corpus full downloads it
    with pytest.raises(SqaError, match="unknown corpus 'bogus'; use mini, strategyqa, full"):
        corpus_files("bogus")


def test_a_fresh_build_finds_repeated_ids_without_index_lookups_and_a_resumed_one_looks_them_up(tmp_path, monkeypatch):
    """A build that starts on an empty index checks each evidence ID against the hashes of its own
    earlier commits (no look-up in the index: 2.7 us a paragraph at 10M paragraphs); one that
    starts on an index holding paragraphs looks each ID up. Both replace a repeated ID."""
    import dataclasses

    from sqa.indexing.corpus import read_corpus

    paras = list(read_corpus(distractor_file(tmp_path / "c.jsonl", 3_000)))
    calls = []
    real = TantivyBackend._in_committed
    monkeypatch.setattr(TantivyBackend, "_in_committed", lambda self, eid: calls.append(eid) or real(self, eid))
    be = TantivyBackend(tmp_path / "idx")
    try:
        for start in range(0, 3_000, 1_000):  # three commit windows
            be.add(paras[start : start + 1_000])
            be.commit()
        assert be.count() == 3_000 and calls == []
        again = dataclasses.replace(paras[5], text="REPLACED TEXT")  # a repeat two windows later
        be.add([again, paras[2_999]])  # and one from the last window
        be.commit()
        assert be.count() == 3_000 and calls == []
        assert [p.text for p in be.get([paras[5].evidence_id])] == ["REPLACED TEXT"]
    finally:
        be.close()
    be = TantivyBackend(tmp_path / "idx")  # the index now holds paragraphs: each ID is looked up
    try:
        be.add([dataclasses.replace(paras[7], text="SECOND PROCESS"), paras[1_500]])
        be.commit()
        assert be.count() == 3_000 and calls == [paras[7].evidence_id, paras[1_500].evidence_id]
        assert [p.text for p in be.get([paras[7].evidence_id])] == ["SECOND PROCESS"]
    finally:
        be.close()
