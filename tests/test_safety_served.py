"""Issue 50, the served-model items: chat prompts over /v1/completions in the model's own template
(5c), several servers with other weights under one name (4), the default timeout (5d), concurrency
measured one server at a time (5e), every answered request counted (5f), and HTTP 400/403 lines (8).
Stand-in servers on 127.0.0.1 (tests/helpers.py ``StandIn``); the llama.cpp test is marked slow."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from helpers import StandIn
from sqa.types import ChatPrompt, ServerError

pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")

# Meta's Llama-3 Instruct template (as tests/test_chat_template.py)
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
PROMPT = ChatPrompt(
    (("system", "Answer yes/no questions."), ("user", "Question: Can a goldfish drive a car?")), "Steps:\n1."
)
LLAMA3_TEXT = (
    "<|start_header_id|>system<|end_header_id|>\n\nAnswer yes/no questions.<|eot_id|><|start_header_id|>user"
    "<|end_header_id|>\n\nQuestion: Can a goldfish drive a car?<|eot_id|><|start_header_id|>assistant"
    "<|end_header_id|>\n\nSteps:\n1."
)


def _model(url, **kw):
    from sqa.models.openai import OpenAIModel

    return OpenAIModel("fake-reader", url, cache=False, concurrency=1, **kw)


def _sent(server) -> str:
    """The prompt of the last completions request the stand-in received."""
    return next(b["prompt"] for p, b in reversed(server.requests) if p == "/v1/completions")


def test_chat_prompts_over_completions_are_never_silently_chatml(tmp_path):
    """Item 5c: over /v1/completions a ChatPrompt is rendered in the template the server says
    (``GET /props``, as llama-server), or a ``--chat-template`` file, with the leading BOS left to
    the server's tokenizer; ChatML only where the server's chat endpoint reads ChatML; otherwise
    the first ChatPrompt is one line saying what to pass, while raw text still goes."""
    own = StandIn(template="own")  # its chat template is not ChatML and it does not say which it is
    props = StandIn(template="own", props={"chat_template": LLAMA3, "bos_token": "<|begin_of_text|>"})
    qwen = StandIn()  # its chat endpoint reads ChatML (Qwen2.5)
    try:
        m = _model(own.url)
        assert m.capabilities.chat_template == "none" and m.server_info["chat_template"] == "none"
        m.generate(["Question: Is it? Answer:"], 2)  # raw text (the facts reader's prompts) goes as it is
        assert _sent(own) == "Question: Is it? Answer:"
        sent = len(own.requests)
        with pytest.raises(ServerError) as e:
            m.generate([PROMPT], 2)
        line = str(e.value)
        assert "\n" not in line and own.url in line and "--chat-template FILE" in line and "--api chat" in line
        assert len(own.requests) == sent  # nothing sent as ChatML

        m = _model(props.url)
        assert m.capabilities.chat_template == "props"
        m.generate([PROMPT], 2)
        assert _sent(props) == LLAMA3_TEXT  # the server adds BOS itself, as it does for llama-server

        f = tmp_path / "llama3.jinja"
        f.write_text(LLAMA3, encoding="utf-8")
        m = _model(own.url, chat_template=f)
        assert m.capabilities.chat_template == "file"
        m.generate([PROMPT], 2)
        assert _sent(own) == LLAMA3_TEXT

        m = _model(qwen.url)
        assert m.capabilities.chat_template == "chatml"
        m.generate([PROMPT], 2)
        assert _sent(qwen).startswith("<|im_start|>system\nAnswer yes/no questions.<|im_end|>\n")
        with pytest.raises(ServerError, match="--chat-template llama3.jinja: .* /v1/chat/completions"):
            _model(qwen.url, chat_template=f, api="chat")
    finally:
        for s in (own, props, qwen):
            s.close()


@contextmanager
def _llama_cpp_server(gguf, alias: str, log):
    """``python -m llama_cpp.server`` (llama-cpp-python[server]) serving ``gguf`` as ``alias`` on
    127.0.0.1 (as tests/conftest.py's ``llama_server`` starts it); yields its base URL."""
    import subprocess
    import sys
    import time
    import urllib.request

    from helpers import free_port

    port = free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", "1"]
    with open(log, "wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"llama.cpp's server did not start: {open(log).read()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.slow
def test_a_llama3_gguf_served_by_llama_cpp_reads_the_steps_prompts_token_for_token_as_in_process(tmp_path):
    """Item 5c's done-when: a Llama-3-template GGUF (written by the ``gguf`` package) served by
    llama.cpp's server (llama-cpp-python's, which has no ``/props``) and read over
    ``--api completions`` with ``--chat-template`` its template: the server tokenizes every prompt of
    the steps reader into exactly the tokens the in-process model reads (BOS once: the server adds
    it), and ``sqa ask --preset steps --api completions`` answers through it. Without the file the
    server's chat endpoint shows that the model does not read ChatML: refused in one line."""
    import json
    import urllib.request

    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed")
    pytest.importorskip("cyllama", reason="llama.cpp's binding (the models extra) reads the GGUF")
    from test_chat_template import LLAMA3 as TEMPLATE
    from test_chat_template import tiny_gguf

    from helpers import one_error_line, run_sqa
    from sqa.models.llamacpp import LlamaCppModel
    from sqa.models.openai import OpenAIModel
    from sqa.steps.prompts import DemoSelector, question_prompt

    assert TEMPLATE == LLAMA3
    gguf = tiny_gguf(tmp_path / "llama3.gguf", LLAMA3)
    f = tmp_path / "llama3.jinja"
    f.write_text(LLAMA3, encoding="utf-8")
    q = "Could a llama birth twice during the Vietnam War?"
    demos = DemoSelector().select(q, 3, None)
    prompts = [question_prompt(demos, q), question_prompt(demos, q, decompose=False).extend("Answer:"), PROMPT]
    local = LlamaCppModel(gguf, n_ctx=8192, n_threads=1)
    with _llama_cpp_server(gguf, "tiny-llama3", tmp_path / "server.log") as url:
        served = OpenAIModel("tiny-llama3", url, api="completions", chat_template=f, cache=False, concurrency=1)
        assert served.capabilities.chat_template == "file" and served.endpoint == "completions"
        for p in prompts:
            want = local.tokenize(local.template.render(p))
            assert want[0] == 1 and want[1] != 1  # <|begin_of_text|> once
            text = served._completions_text(p)
            req = urllib.request.Request(
                url.removesuffix("/v1") + "/extras/tokenize",
                json.dumps({"input": text, "model": "tiny-llama3"}).encode(),
                {"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=60) as r:
                assert json.loads(r.read())["tokens"] == want
            body = served._body("completions", p, 1, 0)
            assert served._request("completions", body, use_cache=False)["usage"]["prompt_tokens"] == len(want)
        plain = OpenAIModel("tiny-llama3", url, api="completions", cache=False, concurrency=1)
        assert plain.capabilities.chat_template == "none"
        with pytest.raises(ServerError, match="--chat-template FILE"):
            plain.generate([PROMPT], 1)
        args = ["ask", q, "--reader", "steps", "--no-retrieval", "--model", "openai:tiny-llama3", "--base-url", url]
        env = {"SQA_HOME": str(tmp_path / "home"), "SQA_OPENAI_TIMEOUT": "600"}
        r = run_sqa(args + ["--api", "completions", "--chat-template", f, "--json"], env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout)["server"]["chat_template"] == "file"
        line = one_error_line(run_sqa(args + ["--api", "completions"], env=env, timeout=600), notices=True)
        assert "does not say which chat template 'tiny-llama3' reads" in line and "--chat-template FILE" in line


def test_two_servers_with_other_weights_under_one_name_stop_the_run_naming_both(tmp_path):
    """Item 4: every server's fingerprint is checked, at load and (a load taken as recorded) at the
    first cache miss; a server with other weights stops the run in one line naming both servers,
    before any of its answers is kept."""
    import json

    from helpers import one_error_line, run_sqa, served_eval_args, write_log_odds_head

    a, b = StandIn(), StandIn(weights="other")
    head = write_log_odds_head(tmp_path / "head.json")
    env = {"SQA_HOME": str(tmp_path / "home"), "SQA_OPENAI_CONCURRENCY": "1", "SQA_OPENAI_MAX_RETRIES": "0"}
    try:
        line = one_error_line(run_sqa(served_eval_args([a.url, b.url], head, tmp_path / "x"), env=env), notices=True)
        assert a.url in line and b.url in line and "other weights" in line, line
        assert a.question_requests == b.question_requests == 0 and not (tmp_path / "x" / "predictions.json").exists()
        b.weights = ""  # the same weights: the run goes, and its load is recorded
        r = run_sqa(served_eval_args([a.url, b.url], head, tmp_path / "y", limit=4), env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        b.weights = "other"  # swapped behind the name: the recorded load is checked at the first miss
        sent = (a.question_requests, b.question_requests)
        r = run_sqa(served_eval_args([a.url, b.url], head, tmp_path / "z", limit=6), env=env)
        line = one_error_line(r, notices=True)
        assert a.url in line and b.url in line and "other weights" in line, line
        assert (a.question_requests, b.question_requests) == sent  # nothing asked of either
        done = tmp_path / "z" / "predictions.json"
        assert not done.exists() or len(json.loads(done.read_text())) <= 4
    finally:
        a.close()
        b.close()


LONG_QUESTION = "Is it true that " + "the quick brown fox jumps over the lazy dog and " * 40 + "so on?"


def _ask(server, tmp_path, env_extra):
    from helpers import run_sqa, write_log_odds_head

    head = write_log_odds_head(tmp_path / "head.json")
    env = {"SQA_HOME": str(tmp_path / "home"), "SQA_OPENAI_CONCURRENCY": "1", **env_extra}
    args = ["ask", LONG_QUESTION, "--no-retrieval", "--head", head, "--model", "openai:fake-reader"]
    return run_sqa(args + ["--base-url", server.url, "--json"], env=env, timeout=300)


def test_a_timed_out_answer_says_what_to_set_and_ask_does_not_talk_about_eval(tmp_path):
    """Item 5d: a server slower than the timeout on a long prompt: the line says which timeout ran
    out and what to set $SQA_OPENAI_TIMEOUT to, and from ``sqa ask`` says nothing of ``sqa eval``;
    a load that measured a fast pace keeps the 20 s floor."""
    from helpers import one_error_line

    from sqa.models.openai import OpenAIModel

    s = StandIn(per_token=0.004)  # a load probe ~0.05 s, the long question's prompt ~2 s
    try:
        r = _ask(s, tmp_path, {"SQA_OPENAI_TIMEOUT": "1", "SQA_OPENAI_MAX_RETRIES": "0"})
        line = one_error_line(r, notices=True)
        assert "did not answer within 1 s (1 try; $SQA_OPENAI_TIMEOUT)" in line, line
        assert "set $SQA_OPENAI_TIMEOUT to more seconds, e.g. 600" in line and "sqa eval" not in line, line
        fast = StandIn()
        try:
            assert OpenAIModel("fake-reader", fast.url, cache=False, concurrency=1).timeout == 20.0
        finally:
            fast.close()
        m = OpenAIModel("fake-reader", s.url, cache=False, concurrency=1)
        assert 20.0 <= m.timeout <= 900 and m.server_info["timeout_s"] == m.timeout
    finally:
        s.close()


@pytest.mark.slow
def test_the_default_timeout_lets_a_cpu_paced_server_answer_a_long_facts_prompt(tmp_path):
    """Item 5d: a server reading ~22 tokens a second (the 1.5B on two CPU cores read ~470 tokens in
    35-40 s): the long question's facts prompt takes over 20 s, the old timeout a try; the timeout
    measured at load lets it answer (about 30 s in all here)."""
    import json

    s = StandIn(per_token=0.045)
    try:
        r = _ask(s, tmp_path, {})
        assert r.returncode == 0, r.stderr[-2000:]
        got = json.loads(r.stdout)
        assert got["server"]["readout_stats"]["missing"] == 0 and got["answer"] in (True, False)
    finally:
        s.close()


def test_http_400_on_both_endpoints_and_403_say_what_failed_without_false_tries(tmp_path):
    """Item 8: a 400 on both endpoints is "refused both" with each endpoint's reason (not "refused
    neither ... nor", not "after 2 tries": the SDK retries no 400); a 403 names the refusal and
    what to check, not "after N tries"."""
    from helpers import one_error_line, run_sqa, served_eval_args, write_log_odds_head

    head = write_log_odds_head(tmp_path / "head.json")
    env = {"SQA_HOME": str(tmp_path / "home"), "SQA_OPENAI_CONCURRENCY": "1"}
    both, forbidden = StandIn(completions="400", chat="400"), StandIn(echo_auth=403)
    try:
        line = one_error_line(run_sqa(served_eval_args(both.url, head, tmp_path / "a"), env=env), notices=True)
        assert "refused both /v1/completions (HTTP 400: unknown field in completions request) and " in line, line
        assert "/v1/chat/completions (HTTP 400: unknown field in chat request)" in line, line
        assert "neither" not in line and "tries" not in line, line
        line = one_error_line(run_sqa(served_eval_args(forbidden.url, head, tmp_path / "b"), env=env), notices=True)
        assert "answered HTTP 403 Forbidden" in line and "may use 'fake-reader' there" in line, line
        assert "tries" not in line, line
    finally:
        both.close()
        forbidden.close()


def test_concurrency_is_measured_one_server_at_a_time(monkeypatch):
    """Item 5e: two servers (say two llama-cpp-python servers on one host, each one request at a
    time): each server's concurrency is measured while the other is idle, so neither's requests
    slow the other's measurement; each gets 1 slot."""
    monkeypatch.delenv("SQA_OPENAI_CONCURRENCY", raising=False)
    from sqa.models.openai import OpenAIModel

    a, b = StandIn(latency=0.1, serial=True), StandIn(latency=0.1, serial=True)
    try:
        m = OpenAIModel("fake-reader", [a.url, b.url], cache=False)
        assert m.server_info["concurrency"] == {a.url: 1, b.url: 1} and m.capabilities.concurrency == 2
        spans = [[(t0, t1) for t0, t1, text in s.spans if text.startswith("Count ")] for s in (a, b)]
        assert len(spans[0]) == len(spans[1]) == 5  # two one at a time, then three at once
        assert max(t1 for _, t1 in spans[0]) <= min(t0 for t0, _ in spans[1])  # b measured after a
        m.close()
    finally:
        a.close()
        b.close()


def test_every_answered_request_is_counted_and_ask_json_shows_every_server(tmp_path):
    """Item 5f: a server that dies mid-run under the steps reader (two questions in lockstep, each
    several requests): run.json's calls sent count every request the server answered, those of
    the questions the run stopped before writing included (``unwritten_calls_sent``), and after
    the resumed run they still add up; ``sqa ask --json`` with two ``--base-url`` s shows both."""
    import json

    from helpers import one_error_line, run_sqa, write_log_odds_head

    head = write_log_odds_head(tmp_path / "head.json")
    env = {"SQA_HOME": str(tmp_path / "home"), "SQA_OPENAI_CONCURRENCY": "2", "SQA_OPENAI_MAX_RETRIES": "0"}
    s = StandIn(die_after=5, latency=0.1)
    out = tmp_path / "run"
    args = ["eval", "--reader", "steps", "--no-retrieval", "--model", "openai:fake-reader", "--base-url", s.url]
    args += ["--split", "dev", "--limit", "4", "--out", out]
    try:
        line = one_error_line(run_sqa(args, env=env), notices=True)
        assert "HTTP 500" in line and s.answered == 5, line
        written = len((out / "traces.jsonl").read_text().splitlines()) if (out / "traces.jsonl").exists() else 0
        assert written < 4
        cost = json.loads((out / "run.json").read_text())["cost"]
        assert cost["calls_sent"] == 5 and cost["unwritten_calls_sent"] > 0, cost
        s.die_after = None  # back: the resumed run takes the answered ones from the response cache
        r = run_sqa(args, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        cost = json.loads((out / "run.json").read_text())["cost"]
        assert cost["calls_sent"] == s.answered, (cost, s.answered)
        b = StandIn()
        try:
            ask = ["ask", "Is the sun a star?", "--no-retrieval", "--head", head, "--model", "openai:fake-reader"]
            r = run_sqa(ask + ["--base-url", s.url, "--base-url", b.url, "--json"], env=env)
            assert r.returncode == 0, r.stderr[-2000:]
            assert json.loads(r.stdout)["server"]["base_urls"] == [s.url, b.url]
        finally:
            b.close()
    finally:
        s.close()
