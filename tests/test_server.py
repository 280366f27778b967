"""Readers behind an OpenAI-compatible server (``--model openai:NAME``, ``sqa.models.openai``).

Two kinds of server, both real HTTP servers on 127.0.0.1:

- llama.cpp's server (``llama-cpp-python[server]==0.3.36``, installed by .ci/run) serving the
  packaged 0.5B GGUF: ``sqa ask`` and ``sqa eval --split dev --limit 8`` through it give the same
  answers as the same model in-process, and an out-of-fold train run through it writes the
  log-odds heads ``sqa ask`` then answers with;
- a small stdlib ``http.server`` in a thread that speaks the same API and misbehaves on purpose
  (nothing listening, unknown model, no logprobs, HTTP 500 mid-run, a stall past the timeout):
  one line and exit 2, a resumable stop that the same command continues, never a traceback, and
  the key in ``$OPENAI_API_KEY`` in no output or file (no model; seconds each).

Every test here is marked ``slow`` and ``server``: ``python -m pytest -m server`` runs them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from helpers import (
    STEPS_DEV_N,
    free_port,
    one_error_line,
    run_sqa,
    served_eval_args,
    throwaway_home,
    write_log_odds_head,
)

# all of them slow (subprocesses, and llama.cpp's server for two): out of the fast lane, whose install
# has no server extra
pytestmark = [pytest.mark.slow, pytest.mark.server]


@pytest.fixture(autouse=True)
def _openai_sdk(tmp_path, monkeypatch):
    """The server extra, and a throw-away $SQA_HOME (its response cache, heads and runs; the index
    and assembled models of the real one linked in)."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    monkeypatch.setenv("SQA_HOME", str(throwaway_home(tmp_path / "sqa_home")))


MODEL = "qwen2.5-coder-0.5b"
KEY = "sk-sqa-test-7f3a9c-KEEP-OUT"  # a recognisable key: must appear in no output and no file
# |P(yes) served - P(yes) in-process| allowed per question (bench/results/server_agreement.json: the
# largest difference measured on these 20 dev questions was about 0.02, from llama.cpp builds that
# differ (llama-cpp-python 0.3.36's vs cyllama 0.2.18's), not from tokens, BOS or template, which
# are identical; 0.05 leaves room for thread-count and load noise)
TOLERANCE = 0.05


def _all_text(paths) -> str:
    out = []
    for root in paths:
        for p in Path(root).rglob("*"):
            if p.is_file():
                out.append(p.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(out)


# -- a misbehaving OpenAI-compatible server (stdlib) ---------------------------------------------


class FakeServer:
    """``/v1/models`` and ``/v1/completions`` on 127.0.0.1 in a thread. ``mode``: "ok", "no-logprobs",
    "fail" (HTTP 500 from completion request ``fail_after`` + 1 on), "stall" (completion requests from
    ``fail_after`` + 1 on wait ``stall_s`` before answering). Counts requests, records the keys sent."""

    def __init__(self, model: str = "fake-reader"):
        self.model = model
        self.mode = "ok"
        self.fail_after = 0
        self.stall_s = 5.0
        self.completions = 0
        self.keys: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def do_GET(self):
                outer.keys.add(self.headers.get("Authorization", ""))
                if self.path.rstrip("/").endswith("/v1/models"):
                    return self._send(
                        200,
                        {"object": "list", "data": [{"id": outer.model, "object": "model", "owned_by": "fake-engine"}]},
                    )
                return self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                outer.keys.add(self.headers.get("Authorization", ""))
                n = int(self.headers.get("Content-Length") or 0)
                req = json.loads(self.rfile.read(n) or b"{}")
                if not self.path.rstrip("/").endswith("/v1/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                outer.completions += 1
                late = outer.completions > outer.fail_after
                if outer.mode == "fail" and late:
                    # a careless server that echoes the request's key in its error message
                    return self._send(
                        500, {"error": {"message": f"model crashed ({self.headers.get('Authorization')})"}}
                    )
                if outer.mode == "stall" and late:
                    time.sleep(outer.stall_s)
                # a deterministic P(yes) per prompt: log-odds in [-1, 1)
                h = int(hashlib.sha256(req.get("prompt", "").encode()).hexdigest()[:4], 16) / 65536
                lo = 2 * h - 1
                top = {" Yes": -0.7 + lo / 2, " No": -0.7 - lo / 2, " Maybe": -4.0}
                logprobs = (
                    {"tokens": [" Yes"], "token_logprobs": [top[" Yes"]], "top_logprobs": [top], "text_offset": [0]}
                    if outer.mode != "no-logprobs" and req.get("logprobs")
                    else None
                )
                return self._send(
                    200,
                    {
                        "id": "cmpl-1",
                        "object": "text_completion",
                        "created": 0,
                        "model": outer.model,
                        "choices": [{"text": " Yes", "index": 0, "logprobs": logprobs, "finish_reason": "length"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake():
    srv = FakeServer()
    yield srv
    srv.close()


@pytest.fixture
def log_odds_head(tmp_path):
    """A log-odds-only answer head for ``openai:fake-reader`` (P(yes) = sigmoid(plain log-odds))."""
    return write_log_odds_head(tmp_path / "head.json")


def _ask_args(url: str, head: Path, model: str = "openai:fake-reader") -> list:
    return ["ask", "Is the sun a star?", "--no-retrieval", "--head", head, "--model", model, "--base-url", url]


ENV = {"OPENAI_API_KEY": KEY, "SQA_OPENAI_MAX_RETRIES": "1"}


def test_served_eval_records_server_and_counts(fake, log_odds_head, tmp_path):
    """A served run: run.json names the server (URL without credentials, engine), metrics.json and
    report.md count the read-outs; neither the key nor the URL's password is written anywhere (the
    URL's ``user:password@`` goes to the server as HTTP basic auth, httpx's rule, in place of the key)."""
    out = tmp_path / "run"
    url = fake.url.replace("http://", "http://sqauser:sqa-url-pass@")
    r = run_sqa(served_eval_args(url, log_odds_head, out), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "complete: 6/6" in r.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["server"]["base_url"] == fake.url and run["server"]["engine"] == "fake-engine"
    assert run["server"]["model"] == "fake-reader" and run["server"]["top_logprobs"] == 20
    m = json.loads((out / "metrics.json").read_text())
    assert m["yes_no_unread"]["readouts"] == 6 and m["yes_no_unread"]["missing"] == 0
    assert "neither Yes nor No" in (out / "report.md").read_text()
    assert any(k.startswith("Basic ") for k in fake.keys)
    text = r.stdout + r.stderr + _all_text([out])
    assert KEY not in text and "sqa-url-pass" not in text


def test_nothing_listening_is_one_line(tmp_path, log_odds_head):
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = run_sqa(served_eval_args(url, log_odds_head, tmp_path / "run"), env=ENV)
    line = one_error_line(r, notices=True)
    assert "no OpenAI-compatible server answers at" in line and url in line
    r = run_sqa(_ask_args(url, log_odds_head), env={**ENV, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert url in one_error_line(r, notices=True)  # --base-url wins over $OPENAI_BASE_URL
    assert KEY not in r.stdout + r.stderr


def test_ask_through_server(fake, log_odds_head):
    """``sqa ask`` with $OPENAI_BASE_URL (no --base-url): the answer head over the served log-odds."""
    r = run_sqa(_ask_args(fake.url, log_odds_head)[:-2] + ["--json"], env={**ENV, "OPENAI_BASE_URL": fake.url})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["answer"] in (True, False) and 0.5 <= out["confidence"] <= 1.0
    assert fake.keys == {f"Bearer {KEY}"}  # the key went to the server, and is in no output
    assert KEY not in r.stdout + r.stderr


def test_unknown_model_and_no_logprobs(fake, log_odds_head, tmp_path):
    r = run_sqa(served_eval_args(fake.url, log_odds_head, tmp_path / "run0", model="openai:nope"), env=ENV)
    line = one_error_line(r, notices=True)
    assert "does not serve 'nope'" in line and "openai:fake-reader" in line
    fake.mode = "no-logprobs"  # read by generation (tests/test_server_chat.py)
    r = run_sqa(served_eval_args(fake.url, log_odds_head, tmp_path / "run"), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["yes_no_unread"]["generation"] == 6 and m["yes_no_unread"]["top_logprobs"] == 0
    assert KEY not in r.stdout + r.stderr


def test_head_that_reads_states_is_refused(fake, tmp_path):
    from sqa.facts.head import AnswerHead, FeatureSpec

    head = tmp_path / "states.json"
    AnswerHead(
        FeatureSpec(("plain",), ("plain",), ()), np.zeros(897, dtype=np.float32), 0.0, "openai:fake-reader", None, {}
    ).save(head)
    r = run_sqa(served_eval_args(fake.url, head, tmp_path / "run"), env=ENV)
    line = one_error_line(r, notices=True)
    assert "reads hidden states" in line and "openai:fake-reader" in line
    assert fake.completions == 0  # refused before the server was asked anything


@pytest.mark.parametrize("mode", ["fail", "stall"])
def test_server_lost_mid_run_resumes(fake, log_odds_head, tmp_path, mode):
    """HTTP 500 (after the SDK's retry) or a stall past the timeout from the 7th completion on (the
    load-time probe and the 3 fingerprint read-outs are the first 4; a fixed concurrency skips its
    measurement): one line, exit 2, the 2 answered questions kept; the same command then finishes
    the run once the server is back."""
    out = tmp_path / "run"
    fake.mode, fake.fail_after, fake.stall_s = mode, 6, 3.0
    env = {**ENV, "SQA_OPENAI_TIMEOUT": "0.5", "SQA_OPENAI_CONCURRENCY": "1"}
    r = run_sqa(served_eval_args(fake.url, log_odds_head, out), env=env)
    line = one_error_line(r, notices=True)
    assert ("HTTP 500" in line) if mode == "fail" else ("did not answer within 0.5 s" in line)
    assert "the same command resumes" in line
    assert KEY not in r.stdout + r.stderr  # scrubbed even where the server echoes it
    assert len((out / "traces.jsonl").read_text().splitlines()) == 2
    fake.mode = "ok"
    r = run_sqa(served_eval_args(fake.url, log_odds_head, out), env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "complete: 6/6 questions (4 new)" in r.stdout
    assert KEY not in r.stdout + r.stderr + _all_text([out])


def test_base_url_needs_a_served_model(tmp_path):
    r = run_sqa(
        [
            "eval",
            "--preset",
            "steps",
            "--model",
            MODEL,
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--limit",
            "1",
            "--out",
            tmp_path / "run",
        ]
    )
    assert "--base-url goes with a served model" in one_error_line(r, notices=True)


# -- llama.cpp's server, the packaged 0.5B model (the session's ``llama_server``, tests/conftest.py) ----


ASK = "Is the sun a star?"
DEV_N = STEPS_DEV_N  # dev questions read in-process and served (bench/results/server_agreement.json: 20)
SERVED_ENV = {"OPENAI_API_KEY": KEY, "SQA_OPENAI_CONCURRENCY": "1", "SQA_OPENAI_TIMEOUT": "600"}


@pytest.fixture(scope="module")
def local_ask(gold_index):
    """``sqa ask ASK --preset steps --json`` with the 0.5B model in-process: the answer both served
    ``ask`` tests compare with (read once for the module)."""
    r = run_sqa(["ask", ASK, "--preset", "steps", "--json", "--index-dir", gold_index.index_dir, "--model", MODEL])
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_ask_through_llama_server_matches_in_process(llama_server, gold_index, local_ask):
    """``sqa ask --preset steps`` through llama.cpp's server over /v1/completions: the in-process
    answer, P(yes) within TOLERANCE; the key is in no output."""
    args = ["ask", ASK, "--preset", "steps", "--json", "--index-dir", gold_index.index_dir]
    served = run_sqa(
        args + ["--model", f"openai:{MODEL}", "--base-url", llama_server],
        env={"OPENAI_API_KEY": KEY, "SQA_OPENAI_TIMEOUT": "600"},
    )
    assert served.returncode == 0, served.stderr[-2000:]
    a, b = local_ask, json.loads(served.stdout)
    assert a["answer"] == b["answer"]
    assert abs(a["confidence"] - b["confidence"]) <= TOLERANCE, (a["confidence"], b["confidence"])
    assert KEY not in served.stdout + served.stderr


def test_ask_over_chat_through_llama_server_matches_in_process(llama_server, gold_index):
    """``--api chat``: the steps reader's prompts go as messages and llama-cpp-python's server
    applies the GGUF's own template; that server closes a final assistant message (probed: prefill
    "turns"), so the steps reader reads it in turns (``sqa.steps.prompts``), and it runs one request
    at a time (measured: 1 slot). In-process ``--no-prefill`` reads the same messages: the same
    steps and answer, P(yes) within TOLERANCE."""
    args = ["ask", ASK, "--preset", "steps", "--json", "--index-dir", gold_index.index_dir]
    local = run_sqa(args + ["--model", MODEL, "--no-prefill"])
    served = run_sqa(
        args + ["--model", f"openai:{MODEL}", "--base-url", llama_server, "--api", "chat"],
        env={"OPENAI_API_KEY": KEY, "SQA_OPENAI_TIMEOUT": "600"},
        timeout=900,
    )
    assert local.returncode == 0 and served.returncode == 0, (local.stderr[-2000:], served.stderr[-2000:])
    a, b = json.loads(local.stdout), json.loads(served.stdout)
    assert a["prefill"] is False and [d["step"] for d in a["decomposition"]] == [d["step"] for d in b["decomposition"]]
    assert a["answer"] == b["answer"] and abs(a["p_yes"] - b["p_yes"]) <= TOLERANCE, (a["p_yes"], b["p_yes"])
    assert b["server"]["endpoint"] == "chat" and b["server"]["readout"] == "top_logprobs"
    assert b["server"]["prefill"] == "turns" and b["server"]["readout_stats"]["missing"] == 0
    assert KEY not in served.stdout + served.stderr


def test_eval_dev_through_llama_server_matches_in_process(llama_server, gold_index, local_steps_dev, tmp_path):
    """``sqa eval --preset steps --split dev --limit DEV_N`` in-process (the session's
    ``local_steps_dev`` run) and through the server: the same answer on all but at most one
    question and P(yes) within TOLERANCE on all but at most one (greedy decompositions may part at
    a near-tie). The 20-question measurement is recorded in bench/results/server_agreement.json
    ``eval``: 19 answers agree (the flip, question 18, at 0.489 vs 0.511), P(yes) differs by at
    most 0.022. run.json names the server, metrics.json counts 3 read-outs a question; the key is
    in no output or file."""
    base = ["eval", "--preset", "steps", "--split", "dev", "--limit", DEV_N, "--index-dir", gold_index.index_dir]
    served = run_sqa(
        base + ["--model", f"openai:{MODEL}", "--base-url", llama_server, "--out", tmp_path / "served"],
        env=SERVED_ENV,
        timeout=1800,
    )
    assert served.returncode == 0, served.stderr[-2000:]

    def traces(d):
        return {json.loads(x)["qid"]: json.loads(x) for x in (d / "traces.jsonl").read_text().splitlines()}

    a, b = traces(local_steps_dev), traces(tmp_path / "served")
    assert len(a) == len(b) == DEV_N and set(a) == set(b)
    same = sum(a[q]["answer"] == b[q]["answer"] for q in a)
    close = sum(abs(a[q]["p_yes"] - b[q]["p_yes"]) <= TOLERANCE for q in a)
    assert same >= DEV_N - 1 and close >= DEV_N - 1, (same, close, {q: (a[q]["p_yes"], b[q]["p_yes"]) for q in a})
    run = json.loads((tmp_path / "served" / "run.json").read_text())
    assert run["server"]["base_url"] == llama_server and run["server"]["model"] == MODEL
    m = json.loads((tmp_path / "served" / "metrics.json").read_text())
    assert m["yes_no_unread"]["readouts"] >= 3 * DEV_N  # 3 readings per question
    assert KEY not in served.stdout + served.stderr + _all_text([tmp_path / "served"])


def test_train_run_through_llama_server_writes_log_odds_heads_that_ask_uses(llama_server, gold_index, tmp_path):
    """``sqa eval --split train --limit 12 --model openai:NAME``: the out-of-fold run through the
    served model (12 questions: 6 fitted on, 6 demonstrations, 5 term-grouped folds) writes
    log-odds-only heads (the server returns no hidden states) filed under the served name and
    fitted on exactly the run's non-demonstration questions, and ``sqa ask --model openai:NAME``
    then answers with that head; the key is in no output or file."""
    from sqa.facts.prompt import demo_qids

    home = throwaway_home(tmp_path / "home")
    env = {**SERVED_ENV, "SQA_HOME": str(home)}
    served = ["--model", f"openai:{MODEL}", "--base-url", llama_server, "--index-dir", gold_index.index_dir]
    r = run_sqa(
        ["eval", "--split", "train", "--limit", "12", "--out", tmp_path / "run", *served], env=env, timeout=1800
    )
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["n"] == 12 and m["out_of_fold"]["scheme"] == "out-of-fold, 5 term-grouped folds", m.get("out_of_fold")
    qids = set(json.loads((tmp_path / "run" / "predictions.json").read_text()))
    assert len(qids) == 12
    heads = sorted((home / "heads").glob("*.json"))
    facts = [h for h in heads if h.name.startswith(f"openai:{MODEL}.facts.")]  # named by what it was fitted on
    assert len(facts) == 1, [h.name for h in heads]
    head = json.loads(facts[0].read_text())
    assert head["spec"]["states"] == [] and head["spec"]["log_odds"], head["spec"]
    assert sorted(head["provenance"]["fitted_qids"]) == sorted(qids - demo_qids())
    a = run_sqa(["ask", "Can a goldfish drive a car?", "--json", *served], env=env)
    assert a.returncode == 0, a.stderr[-3000:]
    out = json.loads(a.stdout)
    assert out["answer"] in (True, False) and out["calibrated"] is True
    assert Path(out["head"]).name == facts[0].name, out.get("head")  # the head the train run wrote
    assert KEY not in r.stdout + r.stderr + a.stdout + a.stderr + _all_text([tmp_path / "run", home])
