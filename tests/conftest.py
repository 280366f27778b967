"""Shared pytest fixtures, and the skip report.

Every skipped test is counted and listed with its reason at the end of the run (a test that
needs a missing package or server must say so, never pass silently). In CI (``CI=true``) or with
``SQA_NO_SKIP=1`` a skip fails the run: CI installs everything (noida-db for the Elasticsearch
tests, the GGUF models, torch), so a skip there means a test did not run that must.

No test writes into the user's ``$SQA_HOME`` (``~/.cache/sqa`` by default): the whole session runs
with ``$SQA_HOME`` at a temporary folder (so session- and module-scoped fixtures write there too),
and each test gets a fresh one of its own (``throwaway_home``: the real ``index`` and ``models``
linked in, so the mini index and the assembled GGUF files are shared, never rebuilt). Features,
heads, prefix and response caches, corpus downloads and runs written under ``$SQA_HOME`` go away
with the test's temporary folder.
"""

from __future__ import annotations

import os
import signal

import pytest

from helpers import throwaway_home  # imported first: helpers.REAL_HOME is read before $SQA_HOME moves


def pytest_configure(config):
    """Point ``$SQA_HOME`` at a throw-away folder for the whole session, before any fixture runs
    (the per-test ``_throwaway_sqa_home`` then gives each test its own)."""
    import tempfile

    session_home = tempfile.mkdtemp(prefix="sqa-test-home-")
    config._sqa_home_before = os.environ.get("SQA_HOME")
    os.environ["SQA_HOME"] = str(throwaway_home(session_home))
    config._sqa_session_home = session_home


def pytest_unconfigure(config):
    import shutil

    home = getattr(config, "_sqa_session_home", None)
    if home:
        shutil.rmtree(home, ignore_errors=True)  # the links themselves and what tests wrote; never REAL_HOME
        if config._sqa_home_before is None:
            os.environ.pop("SQA_HOME", None)
        else:
            os.environ["SQA_HOME"] = config._sqa_home_before


@pytest.fixture(autouse=True)
def _throwaway_sqa_home(tmp_path_factory, monkeypatch):
    """Every test runs with a fresh ``$SQA_HOME`` of its own (the real index and models linked in;
    in ``helpers.REAL_HOME`` at most a missing ``models`` folder is made): nothing one test writes there (features, heads, caches)
    is seen by another test or left in the user's home. A test may still set its own."""
    monkeypatch.setenv("SQA_HOME", str(throwaway_home(tmp_path_factory.mktemp("sqa_home"))))


@pytest.fixture(scope="session")
def gold_index(tmp_path_factory):
    """An embedded (tantivy) index of the 9,251 StrategyQA gold paragraphs, built once per test
    session in a temporary directory; yields the open ``SearchBackend``."""
    from sqa.indexing import build_index, open_backend, corpus_files

    index_dir = tmp_path_factory.mktemp("gold_index")
    be = open_backend(index_dir, "embedded", create=True)
    build_index(corpus_files("strategyqa"), index_dir, be)
    yield be
    be.close()


@pytest.fixture(scope="session")
def demo_embeddings(tmp_path_factory):
    """The step decomposer's demonstration selector by meaning (``sqa.steps.prompts.MiniLMDemoSelector``,
    all-MiniLM-L6-v2 in numpy) and the cache folder it wrote the train questions' embeddings into
    (``demo-embeddings-minilm-<sha>.npy``, about 3 MB): computed once per test session (10-25 s on 2
    cores) for the tests that need them; a test that decomposes with MiniLM copies the file into its
    own cache folder, as a user's ``$SQA_HOME/cache`` keeps it between runs. Yields ``(selector, folder)``."""
    from sqa.retriever.minilm import default_encoder
    from sqa.steps.prompts import MiniLMDemoSelector

    folder = tmp_path_factory.mktemp("demo_embeddings")
    return MiniLMDemoSelector(encode=default_encoder(), cache_dir=folder), folder


@pytest.fixture(scope="session")
def local_steps_dev(gold_index, tmp_path_factory):
    """``sqa eval --preset steps --split dev --limit STEPS_DEV_N`` with the packaged 0.5B model
    in-process on the gold index (a fresh process and ``$SQA_HOME`` of its own), run once per
    session: the whole steps pipeline on a real model (tests/test_eval_cli.py) and the in-process
    answers the served run is compared with (tests/test_server.py). Yields the run folder; no test
    writes into it."""
    from helpers import SMALL_MODEL, STEPS_DEV_N, run_sqa, small_gguf

    small_gguf()  # assembled, not loaded: the eval loads it once
    out = tmp_path_factory.mktemp("local_steps_dev") / "run"
    home = throwaway_home(tmp_path_factory.mktemp("local_steps_home"))
    args = ["eval", "--preset", "steps", "--split", "dev", "--limit", STEPS_DEV_N, "--index-dir", gold_index.index_dir]
    r = run_sqa(args + ["--model", SMALL_MODEL, "--out", out], env={"SQA_HOME": str(home)}, timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """``python -m llama_cpp.server`` (llama-cpp-python[server]==0.3.36) serving the packaged 0.5B
    GGUF as ``qwen2.5-coder-0.5b`` on 127.0.0.1 (n_ctx 4096, 1 generation thread, 2 for prompts:
    the command of bench/server.py); yields its base URL. Started once per test session, on first
    use, for every module that compares a served reader with the in-process one (the model loads
    once, not once per module); stopped at the end of the session. The tests only send it requests
    (no test changes its state), and a test's own ``$SQA_HOME`` keeps sqa's response cache apart."""
    import subprocess
    import sys
    import time
    import urllib.request

    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server]==0.3.36 is not installed")
    from helpers import SMALL_MODEL, free_port, small_gguf

    gguf = small_gguf()
    port = free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", SMALL_MODEL]
    argv += [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        "1",
        "--n_threads_batch",
        "2",
    ]
    with open(log, "wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(url + "/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama.cpp's server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def python_sigint():
    """Python's own Ctrl-C handler (KeyboardInterrupt) while the test runs, whatever the test run
    was started with: a run started as a background job has SIGINT ignored, so a test that sends
    itself SIGINT would otherwise see nothing happen."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


_NO_CUDA: list[str] = []
_NOT_SLOW: list[str] = []


def pytest_deselected(items):
    """Remember the model-loading tests (marked ``slow``) that ``-m "not slow"`` left out, so the
    summary can list them: the fast lane must say what it did not run."""
    _NOT_SLOW.extend(it.nodeid for it in items if it.get_closest_marker("slow") and not it.get_closest_marker("cuda"))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a CUDA device: where torch sees none they are deselected (not
    skipped: CI has no GPU, and a skip fails CI) and named in the summary; ``pytest -m cuda`` on a
    CUDA machine runs them."""
    cuda_items = [it for it in items if it.get_closest_marker("cuda")]
    if not cuda_items:
        return
    try:
        import torch

        have = torch.cuda.is_available()
    except ImportError:
        have = False
    if have:
        return
    config.hook.pytest_deselected(items=cuda_items)
    items[:] = [it for it in items if not it.get_closest_marker("cuda")]
    _NO_CUDA.extend(it.nodeid for it in cuda_items)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print how many tests were skipped and why (missing package, server or model), which
    model-loading tests ``-m "not slow"`` left out, and which CUDA tests were left out for want of a GPU."""
    skipped = terminalreporter.stats.get("skipped", [])
    tr = terminalreporter
    if _NOT_SLOW:
        tr.write_sep(
            "=",
            f"slow: {len(_NOT_SLOW)} model-loading test(s) did NOT run (-m 'not slow'); "
            "all tests: pip install -e '.[models,minilm,hf,rerank,server,dev]' 'llama-cpp-python[server]==0.3.36' && python -m pytest",
            yellow=True,
            bold=True,
        )
        for nodeid in _NOT_SLOW:
            tr.write_line(f"  {nodeid}")
    if _NO_CUDA:
        tr.write_sep(
            "=",
            f"cuda: {len(_NO_CUDA)} test(s) need a CUDA device and did NOT run here "
            "(on a GPU machine: python -m pytest -m cuda)",
            yellow=True,
            bold=True,
        )
        for nodeid in _NO_CUDA:
            tr.write_line(f"  {nodeid}")
    if not skipped:
        tr.write_sep(
            "=",
            "skipped: 0 (every test ran)"
            if not (_NO_CUDA or _NOT_SLOW)
            else "skipped: 0 (every selected test ran; not run: the ones listed above)",
            green=True,
        )
        return
    reasons: dict[str, int] = {}
    for rep in skipped:
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    tr.write_sep("=", f"skipped: {len(skipped)} test(s) did NOT run", yellow=True, bold=True)
    for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        tr.write_line(f"  {n:3d} x {reason}")
    if _no_skip():
        tr.write_line("CI=true / SQA_NO_SKIP=1: a skipped test fails this run", red=True, bold=True)


def _no_skip() -> bool:
    return bool(os.environ.get("SQA_NO_SKIP")) or os.environ.get("CI", "").lower() == "true"


def pytest_sessionfinish(session, exitstatus):
    if _no_skip() and exitstatus == 0:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None and tr.stats.get("skipped"):
            session.exitstatus = 1


@pytest.fixture(scope="session")
def mini_index(tmp_path_factory):
    """The mini preset (159,930 paragraphs) built in a fresh temporary folder (~10-15 s), once a session."""
    from sqa.cli import main

    d = tmp_path_factory.mktemp("elsewhere") / "some" / "index"
    assert main(["index", "--corpus", "mini", "--index-dir", str(d)]) == 0
    return d
