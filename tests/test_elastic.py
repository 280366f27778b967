"""The Elasticsearch backend against a real Elasticsearch-API server.

By default the tests start noida-db (a PyPI package shipping an Elasticsearch 8 API server,
``pip install noida-db``) on a free port and stop it afterwards. With ``SQA_ES_URL`` set (plus
``SQA_ES_API_KEY`` or ``SQA_ES_USER``/``SQA_ES_PASSWORD``) they run against that cluster instead,
e.g. the one from ``docker/docker-compose.yml``:

    SQA_ES_URL=http://localhost:9200 SQA_ES_USER=elastic SQA_ES_PASSWORD=... pytest -m es

Every test uses its own throw-away index (``sqa-test-<random>``) and deletes it. noida-db
searches slowly (about 1 s per query at 10k paragraphs), so the fixture corpus is a few hundred
real StrategyQA paragraphs; rankings (not scores: noida's differ from Lucene's by a constant
factor) are compared with the embedded tantivy backend on the same paragraphs.
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from helpers import default_sigint, free_port
from sqa.cli import main
from sqa.indexing import build_index, open_backend, read_manifest
from sqa.indexing.build import CHECKPOINT, MANIFEST
from sqa.indexing.elastic import ElasticsearchBackend, redact_url
from sqa.indexing.embedded import TantivyBackend
from sqa.strategyqa import PARAGRAPHS_FILE
from sqa.types import Paragraph, SqaError

CLI = [sys.executable, "-c", "import sys; from sqa.cli import main; sys.exit(main())"]
TOPICS = ("Black Sea", "Sea of Japan", "Caspian Sea", "Red Sea", "Mona Lisa", "Banana", "Louvre", "Dead Sea")
QUERIES = (
    "maximum depth of the Black Sea",
    "Is the Mona Lisa in the Louvre",
    "How many calories are in a banana",
    "salt content of the Dead Sea",
)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def es_url(tmp_path_factory):
    """URL of an Elasticsearch-API server: ``$SQA_ES_URL`` if set, else a noida-db started here."""
    if os.environ.get("SQA_ES_URL"):
        yield os.environ["SQA_ES_URL"]
        return
    exe = shutil.which("noida-db") or str(Path(sys.executable).with_name("noida-db"))
    if not Path(exe).exists():
        pytest.skip("noida-db is not installed (pip install noida-db) and SQA_ES_URL is not set")
    port = free_port()
    data = tmp_path_factory.mktemp("noida")
    log = open(data / "noida.log", "wb")
    proc = subprocess.Popen(
        [exe, "start", "--only", "elasticsearch", "--data-dir", str(data / "db"), "--elasticsearch-port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=default_sigint,
    )  # stopped with SIGINT below
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    while not _answers(url):
        if proc.poll() is not None or time.monotonic() - t0 > 60:
            proc.kill()
            log.close()
            tail = (data / "noida.log").read_text(errors="replace")[-500:]
            pytest.skip(f"noida-db could not start an Elasticsearch server on port {port}: {tail}")
        time.sleep(0.2)
    yield url
    proc.send_signal(signal.SIGINT)  # its Ctrl-C: saves and stops
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture()
def es_env(es_url, monkeypatch):
    """SQA_ES_URL pointing at the test server (credentials, if any, stay as the user set them)."""
    monkeypatch.setenv("SQA_ES_URL", es_url)
    return es_url


@pytest.fixture()
def es_index(es_env):
    """A unique throw-away index name; the index is deleted after the test."""
    name = f"sqa-test-{uuid.uuid4().hex[:10]}"
    yield name
    from sqa.indexing.elastic import connect

    es, _ = connect()
    es.options(ignore_status=404).indices.delete(index=name)
    es.close()


def gold_subset() -> dict:
    with lzma.open(PARAGRAPHS_FILE, "rt", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> tuple[Path, list[str]]:
    """A few hundred real StrategyQA paragraphs (every paragraph of TOPICS plus the first 300 of
    the file) as a full-corpus-format JSONL file; returns (path, evidence IDs in file order)."""
    data = gold_subset()
    rows, ids = [], []
    for n, (eid, rec) in enumerate(data.items()):
        title, _, para_id = eid.rpartition("-")
        if (n < 300 or rec["title"] in TOPICS) and title == rec["title"] and para_id.isdigit():
            rows.append(
                {
                    "title": title,
                    "para_id": int(para_id),
                    "para": rec["content"],
                    "section": rec.get("section") or "",
                    "headers": rec.get("headers") or [],
                }
            )
            ids.append(eid)
    path = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert "Black Sea-2" in ids and 300 <= len(ids) <= 600
    return path, ids


@pytest.fixture(scope="module")
def tantivy_small(small_corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("tantivy")
    be = TantivyBackend(d)
    build_index([small_corpus[0]], d, be)
    yield be
    be.close()


def settings_of(be: ElasticsearchBackend) -> dict:
    s = be.es.indices.get_settings(index=be.es_index, flat_settings=True)
    return next(iter(s.values()))["settings"]


# --- no server needed ----------------------------------------------------------------------------


def test_unreachable_url_is_one_clear_error_naming_the_url(monkeypatch, capsys, tmp_path):
    port = free_port()  # nothing listens here
    with pytest.raises(SqaError) as e:
        ElasticsearchBackend(url=f"http://127.0.0.1:{port}")
    assert f"http://127.0.0.1:{port}" in str(e.value) and "SQA_ES_URL" in str(e.value)
    # through the CLI: exit status 2, one line, credentials not echoed
    monkeypatch.setenv("SQA_ES_URL", f"http://elastic:s3cret@127.0.0.1:{port}")
    assert main(["search", "anything", "--backend", "elasticsearch"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach Elasticsearch at http://127.0.0.1:{port}" in err
    assert "s3cret" not in err and err.count("\n") == 1
    assert main(["index", "--corpus", "strategyqa", "--backend", "elasticsearch", "--index-dir", str(tmp_path)]) == 2
    assert f"http://127.0.0.1:{port}" in capsys.readouterr().err


def test_redact_url_drops_credentials_only():
    assert redact_url("https://elastic:pw@es.example.org:9243/prefix") == "https://es.example.org:9243/prefix"
    assert redact_url("http://localhost:9200") == "http://localhost:9200"
    assert redact_url("elastic:pw@es.example.org:9200") == "es.example.org:9200"  # no scheme
    assert redact_url("http://elastic:pw@host:9abc/x") == "http://host:9abc/x"  # a bad port never raises


@pytest.mark.parametrize(
    "url, expect",
    [
        ("elastic:Pa55word@127.0.0.1:9200", "has no scheme; write http://127.0.0.1:9200"),
        ("http://elastic:Pa55word@127.0.0.1:9abc", "is not a number from 1 to 65535"),
        ("http://127.0.0.1:99999", "is not a number from 1 to 65535"),
        ("ftp://elastic:Pa55word@127.0.0.1:9200", "the scheme must be http or https"),
    ],
)
def test_a_malformed_es_url_is_one_line_and_never_shows_the_password(tmp_path, url, expect):
    from helpers import one_error_line, run_sqa

    for args in (
        ["search", "black sea", "--backend", "elasticsearch"],
        ["index", "--corpus", "strategyqa", "--backend", "elasticsearch", "--index-dir", str(tmp_path)],
    ):
        r = run_sqa(args, env={"SQA_ES_URL": url})
        line = one_error_line(r)
        assert expect in line and "SQA_ES_URL=" in line
        assert "Pa55word" not in r.stderr + r.stdout


# --- against the server --------------------------------------------------------------------------


@pytest.mark.es
def test_build_count_search_and_rerun_without_duplicates(es_index, small_corpus, tantivy_small, tmp_path, capsys):
    corpus, ids = small_corpus
    d = tmp_path / "idx"
    be = ElasticsearchBackend(create=True, es_index=es_index, workers=3, chunk_size=50)
    created = settings_of(be)
    try:
        report = build_index([corpus], d, be, batch_size=100)
        assert report.read == len(ids) and report.skipped == 0
        assert report.count == be.count() == len(set(ids))
        assert be.item_errors == 0
        # load-time settings were restored and the saved copy cleared
        s = settings_of(be)
        assert s.get("index.refresh_interval") == created.get("index.refresh_interval") != "-1"
        assert s.get("index.number_of_replicas") == created.get("index.number_of_replicas")
        assert be._meta().get("sqa_settings_before_load") is None
        m = read_manifest(d)
        assert m["backend"] == "elasticsearch" and m["es_index"] == es_index
        assert m["es_url"] == redact_url(os.environ["SQA_ES_URL"]) and m["paragraph_count"] == len(ids)

        # ranking: same top 3 as the embedded backend (both BM25 over title+section+text)
        for q in QUERIES:
            es_ids = [h.evidence_id for h in be.search(q, k=5)]
            tv_ids = [h.evidence_id for h in tantivy_small.search(q, k=5)]
            assert es_ids[:3] == tv_ids[:3], q
        hits = be.search(QUERIES[0], k=10)
        assert hits[0].evidence_id == "Black Sea-2" and "2,212" in hits[0].paragraph.text
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        assert be.search("the of and", k=5) == []
        boosted = [h.evidence_id for h in be.search("Sea depth", k=3, title_boost=2.0)]
        assert boosted == [h.evidence_id for h in tantivy_small.search("Sea depth", k=3, title_boost=2.0)]
        got = be.get(["Red Sea-2", "no such paragraph-9", "Black Sea-2"])
        assert [p.evidence_id for p in got] == ["Red Sea-2", "Black Sea-2"]
        assert got[1].title == "Black Sea" and got[1].text == hits[0].paragraph.text

        # a second full build of the same files replaces, never duplicates
        again = build_index([corpus], d, be, batch_size=100)
        assert again.count == len(set(ids)) and again.read == len(ids)
    finally:
        be.close()

    # the CLI finds the index name in the manifest
    assert main(["search", "--json", QUERIES[0], "-k", "3", "--backend", "elasticsearch", "--index-dir", str(d)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["evidence_id"] == "Black Sea-2" and set(rows[0]) == {
        "evidence_id",
        "score",
        "title",
        "section",
        "text",
    }


class CrashAfterCommit:
    """Raises right after the ``crash_on``-th successful commit (data durable, checkpoint not yet written)."""

    def __init__(self, inner, crash_on):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "n", 0)
        object.__setattr__(self, "crash_on", crash_on)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __setattr__(self, name, value):
        setattr(self.inner, name, value)

    def commit(self):
        self.inner.commit()
        object.__setattr__(self, "n", self.n + 1)
        if self.n == self.crash_on:
            raise RuntimeError("simulated crash between commit and checkpoint")


def _crash_after_two_windows(es_index: str, corpus: Path, d: Path) -> Path:
    """Build ``corpus`` into ES_INDEX (manifest and checkpoint in ``d``) in windows of 100 and crash
    after the second window's commit, before its checkpoint; returns ``d``."""
    # commit 1 is the build's refresh at its start (sqa.indexing.resume.session_start), 2 and 3 the windows
    be = CrashAfterCommit(ElasticsearchBackend(create=True, es_index=es_index), crash_on=3)
    with pytest.raises(RuntimeError):
        build_index([corpus], d, be, commit_every=100, batch_size=100)
    be.inner.close()
    return d


@pytest.mark.es
def test_resume_after_crash_between_commit_and_checkpoint(es_index, small_corpus, tmp_path):
    corpus, ids = small_corpus
    d = _crash_after_two_windows(es_index, corpus, tmp_path / "idx")
    assert json.loads((d / CHECKPOINT).read_text())["indexed"] == 100
    be = ElasticsearchBackend(create=True, es_index=es_index)
    try:
        assert be.count() == 200  # two windows committed, one of them not checkpointed
        report = build_index([corpus], d, be, commit_every=50, batch_size=50)  # another --commit-every
        assert report.resumed and report.read == len(ids)
        assert report.count == len(set(ids)) and report.duplicates == 0
        assert read_manifest(d)["duplicates_replaced"] == 0
        assert (d / MANIFEST).exists() and not (d / CHECKPOINT).exists()
    finally:
        be.close()


def _lose(be: ElasticsearchBackend, ids: list[str]) -> None:
    """The server loses documents (as a node restarted without its data would)."""
    for i in ids:
        be.es.delete(index=be.es_index, id=i)
    be.es.indices.refresh(index=be.es_index)


@pytest.mark.es
def test_a_resume_after_the_server_lost_documents_re_sends_them(es_index, small_corpus, tmp_path):
    """Issue 41 item 5: 0cf7775 resumed at its checkpoint whatever the server held, and ended with
    exit 0, an incomplete index and the missing documents reported as "duplicates replaced"."""
    corpus, ids = small_corpus
    d = _crash_after_two_windows(es_index, corpus, tmp_path / "idx")
    be = ElasticsearchBackend(create=True, es_index=es_index)
    try:
        assert be.count() == 200  # two windows committed, the second not checkpointed (count 100 recorded)
        _lose(be, ids[:150])
        with pytest.warns(UserWarning, match="holds 50 paragraphs, fewer than the 100 at the last checkpoint"):
            report = build_index([corpus], d, be, commit_every=100, batch_size=100)
        assert report.count == len(set(ids)) == be.count() and report.duplicates == 0
        assert read_manifest(d)["paragraph_count"] == len(set(ids))
    finally:
        be.close()


class LoseAfterCommit(CrashAfterCommit):
    """The server loses ``lost`` documents right after the ``crash_on``-th commit (mid-build)."""

    def __init__(self, inner, crash_on, lost):
        super().__init__(inner, crash_on)
        object.__setattr__(self, "lost", lost)

    def commit(self):
        self.inner.commit()
        object.__setattr__(self, "n", self.n + 1)
        if self.n == self.crash_on:
            _lose(self.inner, self.lost)


@pytest.mark.es
def test_documents_lost_during_a_build_stop_it_and_the_same_command_repairs_it(es_index, small_corpus, tmp_path):
    """Issue 41 item 5: the final count check is exact (start + created), not "duplicates replaced"."""
    corpus, ids = small_corpus
    d = tmp_path / "idx"
    be = LoseAfterCommit(ElasticsearchBackend(create=True, es_index=es_index), crash_on=3, lost=ids[:10])
    try:
        with pytest.raises(SqaError, match="the server lost documents during the build; run the same command"):
            build_index([corpus], d, be, commit_every=100, batch_size=100)
        assert not (d / MANIFEST).exists() and json.loads((d / CHECKPOINT).read_text())["resend"] is True
    finally:
        be.inner.close()
    be = ElasticsearchBackend(create=True, es_index=es_index)
    try:
        with pytest.warns(UserWarning, match="found documents missing"):
            report = build_index([corpus], d, be, commit_every=100, batch_size=100)
        assert report.count == len(set(ids)) == be.count() and report.duplicates == 0
    finally:
        be.close()


@pytest.mark.es
def test_settings_of_a_load_killed_midway_are_restored_by_the_next_run(es_index, small_corpus):
    be = ElasticsearchBackend(create=True, es_index=es_index)
    before = settings_of(be)
    be.add([Paragraph("Black Sea-2", "Black Sea", "The Black Sea has a maximum depth of 2,212 m.")])
    be._wait(0)
    assert settings_of(be)["index.refresh_interval"] == "-1"
    be.es.close()  # "killed": no commit, no close -> refresh stays off, the old values sit in _meta
    be2 = ElasticsearchBackend(create=True, es_index=es_index)
    try:
        assert be2._meta()["sqa_settings_before_load"]["refresh_interval"] == before.get("index.refresh_interval")
        be2.commit()
        after = settings_of(be2)
        assert after.get("index.refresh_interval") == before.get("index.refresh_interval")
        assert after.get("index.number_of_replicas") == before.get("index.number_of_replicas")
        assert be2.count() == 1
    finally:
        be2.close()


def _es_index_cli(es_index: str, corpus, index_dir: Path, *extra: str) -> int:
    """``sqa index --backend elasticsearch --es-index ES_INDEX --corpus CORPUS --index-dir INDEX_DIR
    EXTRA`` in this process; returns the exit status."""
    args = ["--es-index", es_index, "--corpus", str(corpus), "--index-dir", str(index_dir), *extra]
    return main(["index", "--backend", "elasticsearch", *args])


@pytest.mark.es
def test_rejected_paragraphs_are_counted_and_fail_the_cli(es_index, small_corpus, tmp_path, capsys):
    corpus, ids = small_corpus
    bad = tmp_path / "bad.jsonl"
    long_title = "Very long title " * 40  # evidence ID > 512 bytes: Elasticsearch rejects the _id
    lines = corpus.read_text(encoding="utf-8").splitlines()[:20]
    lines.insert(5, json.dumps({"title": long_title, "para_id": 1, "para": "text"}))
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = _es_index_cli(es_index, bad, tmp_path / "idx")
    cap = capsys.readouterr()
    assert code == 2
    assert "paragraphs read 21" in cap.out and "in index 20" in cap.out
    assert "1 paragraphs were rejected" in cap.err and "512" in cap.err
    m = read_manifest(tmp_path / "idx")
    assert m["es_item_errors"] == 1 and m["paragraph_count"] == 20
    # the same command again must not call the failed build "already built"
    code = _es_index_cli(es_index, bad, tmp_path / "idx")
    err = capsys.readouterr().err
    assert code == 2 and "already built" not in err
    assert "1 paragraphs were rejected" in err and "--fresh" in err and err.count("\n") == 1


@pytest.mark.es
def test_an_evidence_id_twice_in_the_input_keeps_one_copy_and_is_counted(es_index, small_corpus, tmp_path, capsys):
    corpus, ids = small_corpus
    lines = corpus.read_text(encoding="utf-8").splitlines()[:30]
    row = json.loads(lines[3])
    lines.append(json.dumps({**row, "para": "the later copy"}))
    dups = tmp_path / "dups.jsonl"
    dups.write_text("\n".join(lines) + "\n", encoding="utf-8")
    d = tmp_path / "idx"
    assert _es_index_cli(es_index, dups, d) == 0
    cap = capsys.readouterr()
    assert "paragraphs read 31, indexed 31, skipped (malformed) 0, in index 30, duplicates replaced 1" in cap.out
    assert "1 paragraphs had an evidence ID seen before" in cap.err
    m = read_manifest(d)
    assert m["duplicates_replaced"] == 1 and m["paragraph_count"] == 30
    be = open_backend(d, "elasticsearch")
    try:
        assert [p.text for p in be.get([f"{row['title']}-{row['para_id']}"])] == ["the later copy"]
    finally:
        be.close()


@pytest.mark.es
def test_fresh_never_deletes_an_index_sqa_did_not_create(es_env, tmp_path, capsys):
    from sqa.indexing.elastic import connect

    name = f"someone-else-{uuid.uuid4().hex[:8]}"
    es, _ = connect()
    try:
        es.indices.create(index=name, mappings={"properties": {"invoice": {"type": "keyword"}}})
        es.index(index=name, id="1", document={"invoice": "A-17"}, refresh=True)
        for extra in (["--fresh"], []):
            code = _es_index_cli(name, "strategyqa", tmp_path / "idx", *extra)
            err = capsys.readouterr().err
            assert code == 2 and f"'{name}' was not created by sqa" in err and err.count("\n") == 1
        assert es.count(index=name)["count"] == 1 and es.get(index=name, id="1")["_source"] == {"invoice": "A-17"}
    finally:
        es.options(ignore_status=404).indices.delete(index=name)
        es.close()


@pytest.mark.es
def test_missing_index_is_an_error_unless_created(es_env):
    name = f"sqa-test-missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(SqaError, match=f"no Elasticsearch index '{name}'"):
        ElasticsearchBackend(es_index=name)


@pytest.mark.es
def test_sqa_index_killed_with_sigkill_resumes_to_the_exact_count(es_index, tmp_path):
    """``sqa index --backend elasticsearch`` on the 9,251 gold paragraphs, checkpoints every 2,000:
    kill -9 once the first checkpoint exists, re-run to the end, count = 9,251."""
    d = tmp_path / "idx"
    argv = CLI + [
        "index",
        "--corpus",
        "strategyqa",
        "--backend",
        "elasticsearch",
        "--es-index",
        es_index,
        "--index-dir",
        str(d),
        "--commit-every",
        "2000",
    ]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while not (d / CHECKPOINT).exists():
        assert p.poll() is None, p.stderr.read().decode()
        assert time.monotonic() - t0 < 120
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    assert p.wait() == -signal.SIGKILL
    assert not (d / MANIFEST).exists()
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "(resumed)" in r.stdout and "in index 9,251" in r.stdout and "paragraphs read 9,251" in r.stdout
    assert read_manifest(d)["paragraph_count"] == 9_251
    be = open_backend(d, "elasticsearch")
    try:
        assert be.count() == 9_251
        assert settings_of(be).get("index.refresh_interval") != "-1"
    finally:
        be.close()
