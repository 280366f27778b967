"""Served models over chat and completions, read-out methods, the response cache and cost, and the
served items of issue 41, against a real HTTP stand-in on 127.0.0.1 (``helpers.StandIn``: a
stdlib server in a thread that behaves like vLLM, llama.cpp's server, Ollama or OpenAI, one switch
at a time). No model is loaded; seconds each.

Every test here is marked ``slow`` (subprocesses) and ``server``: ``python -m pytest -m server``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import StandIn, free_port, one_error_line, run_sqa, served_eval_args, throwaway_home, write_log_odds_head

pytestmark = [pytest.mark.slow, pytest.mark.server]
KEY = "sk-sqa-test-2b9e-KEEP-OUT"
ENV = {"OPENAI_API_KEY": KEY, "SQA_OPENAI_MAX_RETRIES": "0"}


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    monkeypatch.setenv("SQA_HOME", str(throwaway_home(tmp_path / "sqa_home")))
    for var in ("OPENAI_API_KEY", "SQA_OPENAI_API_KEY", "OPENAI_BASE_URL", "SQA_OPENAI_CONCURRENCY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def standin():
    servers: list[StandIn] = []

    def make(**kw) -> StandIn:
        servers.append(StandIn(**kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


@pytest.fixture
def head(tmp_path) -> Path:
    """A log-odds-only answer head for ``openai:fake-reader`` (P(yes) = sigmoid(plain log-odds))."""
    return write_log_odds_head(tmp_path / "head.json")


@pytest.fixture
def chat_head(tmp_path) -> Path:
    """The same head fitted on chat-form reads: what answers a model read over /v1/chat/completions
    (a text-form head is refused there, tests/test_chat_agreement.py)."""
    return write_log_odds_head(tmp_path / "chat_head.json", form="chat")


def _texts(*roots) -> str:
    return "\n".join(
        p.read_bytes().decode("utf-8", "replace") for r in roots for p in Path(r).rglob("*") if p.is_file()
    )


# -- endpoints and read-outs -------------------------------------------------------------------------


def test_chat_only_server_works_with_auto(standin, chat_head, tmp_path):
    """/v1/completions answers 404 (a chat-only server): --api auto reads over chat, from the first
    answer token's top_logprobs; run.json, metrics.json and ask --json say so."""
    s = standin(completions="404")
    out = tmp_path / "run"
    r = run_sqa(served_eval_args(s.url, chat_head, out), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert run["server"]["endpoint"] == "chat" and run["server"]["readout"] == "top_logprobs"
    assert run["server"]["fingerprint"].startswith("sha256:")
    m = json.loads((out / "metrics.json").read_text())
    assert m["yes_no_unread"]["top_logprobs"] == 6 and m["yes_no_unread"]["missing"] == 0
    chat_bodies = [b for p, b in s.requests if p == "/v1/chat/completions" and "Question:" in json.dumps(b)]
    assert chat_bodies and all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in chat_bodies)
    a = run_sqa(
        [
            "ask",
            "Is the sun a star?",
            "--no-retrieval",
            "--head",
            chat_head,
            "--model",
            "openai:fake-reader",
            "--base-url",
            s.url,
            "--json",
        ],
        env=ENV,
    )
    assert a.returncode == 0, a.stderr[-2000:]
    srv = json.loads(a.stdout)["server"]
    assert srv["endpoint"] == "chat" and srv["readout"] == "top_logprobs"


def test_api_completions_on_a_chat_model_is_one_line(standin, head, tmp_path):
    s = standin(completions="chat-model")
    line = one_error_line(
        run_sqa(served_eval_args(s.url, head, tmp_path / "run", "--api", "completions"), env=ENV), notices=True
    )
    assert "chat-only model" in line and "--api chat" in line


def test_no_logprobs_reads_by_generation(standin, chat_head, tmp_path):
    """Neither endpoint gives logprobs: each read-out is a short greedy answer parsed as Yes/No
    (P(yes) 1 or 0), counted as "generation"."""
    s = standin(completions="no-logprobs", chat="no-logprobs")
    out = tmp_path / "run"
    r = run_sqa(served_eval_args(s.url, chat_head, out), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert (
        run["server"]["readout"] == "generation" and run["model"]["capabilities"]["readout"] == "generation"
        if "capabilities" in run.get("model", {})
        else run["server"]["readout"] == "generation"
    )
    m = json.loads((out / "metrics.json").read_text())
    assert m["yes_no_unread"]["generation"] == 6 and m["yes_no_unread"]["missing"] == 0
    # the stand-in answers " Yes" exactly where its log-odds are positive: P(yes) 1 or 0 follows it
    recs = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()]
    assert all(list(r_["signals"].values())[0] in (0.0, 1.0) for r_ in recs)


@pytest.mark.parametrize("honor", [False, True])
def test_thinking_model_is_read_after_its_block(standin, tmp_path, honor):
    """A chat model whose answer opens with <think>: read after </think> (the stand-in's answer token
    there carries the real top logprobs), or, where the server honours ``chat_template_kwargs``
    ``enable_thinking: false``, asked with thinking off."""
    from helpers import standin_log_odds

    from sqa.models.openai import OpenAIModel

    s = standin(completions="404", chat="think", honor_no_thinking=honor)
    m = OpenAIModel("fake-reader", s.url, concurrency=1)
    assert m.thinking == ("disabled" if honor else "read-after")
    p = m.yes_probability(["Question: Is water wet?\nAnswer (Yes or No):"])[0]
    body = s.requests[-1][1]
    expect = standin_log_odds(s.text_of("chat", body)[0])  # what the stand-in's chat template renders
    assert abs(p - 1 / (1 + np.exp(-expect))) < 1e-6
    assert m.readout_stats["after_thinking" if not honor else "top_logprobs"] == 1
    assert m.readout_stats["missing"] == 0
    assert (body.get("chat_template_kwargs") == {"enable_thinking": False}) == honor
    m.close()


@pytest.mark.parametrize(
    "prefill,strict,expect",
    [("continue", False, "continue_final_message"), ("always", True, "final-assistant"), ("none", True, "turns")],
)
def test_steps_transcript_over_chat(standin, prefill, strict, expect):
    """A ChatPrompt's reply (the steps reader's transcript) over chat: continued as the final
    assistant message where the server can (vLLM's flag, llama-server's default), else carried as
    turns (an assistant turn, then a user turn asking to continue)."""
    from sqa.models.openai import OpenAIModel
    from sqa.types import CONTINUE, ChatPrompt

    s = standin(completions="404", prefill=prefill, strict=strict)
    m = OpenAIModel("fake-reader", s.url, api="chat", concurrency=1)
    assert m.prefill == expect and m.capabilities.prefill == (expect != "turns")
    m.generate([ChatPrompt((("system", "Answer."), ("user", "Q?")), "Steps:\n1.")], 5)
    body = s.requests[-1][1]
    if expect == "turns":
        assert body["messages"][-1] == {"role": "user", "content": CONTINUE}
        assert body["messages"][-2] == {"role": "assistant", "content": "Steps:\n1."}
    else:
        assert body["messages"][-1] == {"role": "assistant", "content": "Steps:\n1."}
        assert bool(body.get("continue_final_message")) == (expect == "continue_final_message")
    assert m.capabilities.chat_template == "server" and m.capabilities.endpoint == "chat"
    m.close()


def test_llama_server_completions_logprobs_are_read_as_top_logprobs(standin, head, tmp_path):
    """llama.cpp's own llama-server answers /v1/completions with logprobs in the chat format
    (``helpers.llama_server_completion``, copied from a body captured from it): ``--api completions``
    and ``auto`` both read them as top logprobs (20 asked), never by generation, and P(yes) is the
    stand-in's; a CLI run records the read-out in run.json and metrics.json."""
    from helpers import standin_log_odds

    from sqa.models.openai import OpenAIModel

    s = standin(completions="llama-server")
    for api in ("completions", "auto"):
        m = OpenAIModel("fake-reader", s.url, api=api, concurrency=1, cache=False)
        assert (m.endpoint, m.top_logprobs, m.capabilities.readout) == ("completions", 20, "top_logprobs")
        p = m.yes_probability(["Question: Is water wet?\nAnswer (Yes or No):"])[0]
        body = s.requests[-1][1]
        assert s.requests[-1][0] == "/v1/completions" and body["logprobs"] == 20
        assert abs(p - 1 / (1 + np.exp(-standin_log_odds(body["prompt"])))) < 1e-6
        assert m.readout_stats["top_logprobs"] == 1 and m.readout_stats["generation"] == 0
        m.close()
    out = tmp_path / "run"
    r = run_sqa(served_eval_args(s.url, head, out, "--api", "completions"), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    srv = json.loads((out / "run.json").read_text())["server"]
    assert (srv["endpoint"], srv["readout"], srv["top_logprobs"]) == ("completions", "top_logprobs", 20)
    unread = json.loads((out / "metrics.json").read_text())["yes_no_unread"]
    assert unread["top_logprobs"] == 6 and unread["generation"] == 0 and unread["missing"] == 0


def test_a_load_recorded_by_an_older_reader_is_probed_again(standin, head, tmp_path):
    """A load record of llama-server made by a sqa whose reader took its /v1/completions logprobs
    for none (before ``served_read.READ_VERSION`` 2: read-out generation, no ``read_version``) is
    not taken as recorded: the next command probes live, reads top logprobs and records its own
    findings (it was taken, so every read-out was made by generation, P(yes) 0 or 1, and the first
    cache miss blamed "other weights")."""
    from sqa.models.served_cache import ResponseCache
    from sqa.models.served_load import load_key

    s = standin(completions="llama-server")
    ask = ["ask", "--no-retrieval", "--head", head, "--model", "openai:fake-reader", "--base-url", s.url]
    a = run_sqa([*ask, "--api", "completions", "--json", "Is the sun a star?"], env=ENV)
    assert a.returncode == 0, a.stderr[-2000:]
    cache, key = ResponseCache(), load_key([s.url], "fake-reader", "completions")
    rec = cache.get_load(key)
    assert rec["endpoint"] == "completions" and rec["top_logprobs"] == 20
    old = {k: v for k, v in rec.items() if k != "read_version"}  # as the older reader recorded it
    old.update(top_logprobs=0, fingerprint="sha256:5d1e0ba6f0e1b2c3", fingerprint_reads=[" Yes because"] * 3)
    cache.put_load(key, old)
    a = run_sqa([*ask, "--api", "completions", "--json", "Is the moon a star?"], env=ENV)
    assert a.returncode == 0, a.stderr[-2000:]
    srv = json.loads(a.stdout)["server"]
    assert (srv["contacted"], srv["identity"], srv["readout"], srv["top_logprobs"]) == (
        True,
        "live",
        "top_logprobs",
        20,
    )
    assert srv["readout_stats"]["generation"] == 0
    from sqa.models.served_read import READ_VERSION

    rec = cache.get_load(key)
    assert rec["read_version"] == READ_VERSION and rec["top_logprobs"] == 20


def test_logprobs_in_a_form_sqa_cannot_read_are_refused_not_read_by_generation(standin, monkeypatch):
    """Logprobs the reader cannot read (here llama-server's /v1/completions ones, given to the reader
    as it was before ``READ_VERSION`` 2, which read the chat format over chat only) stop the load in
    one line naming their fields, instead of a read by generation (P(yes) 0 or 1, which that reader
    chose silently); with ``auto`` the chat endpoint, whose logprobs it reads, is taken."""
    from sqa.models import served_read as R
    from sqa.models.openai import OpenAIModel
    from sqa.types import ServerError

    real = R.token_positions

    def before_v2(resp, endpoint):
        lp = R._choice(resp).get("logprobs")
        return [] if endpoint != "chat" and isinstance(lp, dict) and "tokens" not in lp else real(resp, endpoint)

    monkeypatch.setattr(R, "token_positions", before_v2)
    s = standin(completions="llama-server")
    with pytest.raises(ServerError, match=r"logprobs in a form sqa does not read \(fields: content\).*--api chat"):
        OpenAIModel("fake-reader", s.url, api="completions", concurrency=1, cache=False)
    m = OpenAIModel("fake-reader", s.url, api="auto", concurrency=1, cache=False)
    assert (m.endpoint, m.capabilities.readout) == ("chat", "top_logprobs")
    m.close()


def test_a_head_file_without_identity_is_used_with_a_notice_and_recorded(standin, head, tmp_path):
    """A ``--head FILE`` from outside $SQA_HOME/heads that records no served identity cannot be
    checked against the weights served: it answers (on the user's word) with one notice line saying
    so, and run.json ``head.identity_checked`` / ``sqa ask --json`` ``head_identity_checked`` are
    false. A head recording the identity of the weights served now says true, without the notice;
    one recording another server's weights stays refused in one line."""
    s = standin()
    out = tmp_path / "run"
    r = run_sqa(served_eval_args(s.url, head, out, limit=3), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    said = "could not be checked against the weights served as openai:fake-reader"
    notes = [x for x in (r.stdout + r.stderr).splitlines() if said in x]
    assert len(notes) == 1 and str(head) in notes[0], r.stdout[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert run["head"]["identity_checked"] is False and run["head"]["file"] == str(head)
    ask = ["ask", "Is the sun a star?", "--no-retrieval", "--model", "openai:fake-reader", "--base-url", s.url]
    a = run_sqa([*ask, "--head", head, "--json"], env=ENV)
    assert a.returncode == 0, a.stderr[-2000:]
    assert json.loads(a.stdout)["head_identity_checked"] is False
    assert [x for x in a.stderr.splitlines() if said in x] and sum(said in x for x in a.stderr.splitlines()) == 1
    import sqa
    from sqa.types import SqaWarning

    with (
        pytest.warns(SqaWarning, match=said),
        sqa.Reader("no-retrieval", "openai:fake-reader", base_url=s.url, head=head) as rd,
    ):
        assert 0 < rd.ask("Is the sun a star?").p_yes < 1  # from Python: the same warning, as one line
    keep = ("fingerprint", "fingerprint_reads", "endpoint", "models_entry", "base_urls")
    ident = {k: run["server"][k] for k in keep}

    def with_served(name: str, served: dict) -> Path:
        obj = json.loads(head.read_text())
        obj["provenance"]["served"] = served
        (tmp_path / name).write_text(json.dumps(obj))
        return tmp_path / name

    a = run_sqa([*ask, "--head", with_served("same.json", ident), "--json"], env=ENV)
    assert a.returncode == 0, a.stderr[-2000:]
    assert json.loads(a.stdout)["head_identity_checked"] is True and said not in a.stderr
    flipped = [{t: -v - 1 for t, v in x.items()} if isinstance(x, dict) else x for x in ident["fingerprint_reads"]]
    other = with_served("other.json", {**ident, "fingerprint": "sha256:0123456789abcdef", "fingerprint_reads": flipped})
    line = one_error_line(run_sqa([*ask, "--head", other, "--json"], env=ENV), notices=True)
    assert "read from other weights behind openai:fake-reader" in line and "sha256:0123456789abcdef" in line


# -- cache and cost -------------------------------------------------------------------------------------


def test_rerun_into_new_out_sends_no_request(standin, head, tmp_path):
    """A finished served eval run again into a new --out sends no request at all (the server counts
    none, GET or POST): every question's request is answered from the response cache and the
    load-time findings are taken as recorded; run.json says so (``contacted`` false, the identity
    "as recorded at ...") and its cost shows calls sent, cached and tokens. ``sqa ask`` of a cached
    question sends none either; an uncached one probes the server first, then asks."""
    s = standin()
    r = run_sqa(served_eval_args(s.url, head, tmp_path / "a"), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert s.question_requests == 6
    run = json.loads((tmp_path / "a" / "run.json").read_text())
    assert run["server"]["contacted"] is True and run["server"]["identity"] == "live"
    cost = run["cost"]
    assert cost["calls_sent"] == 6 and cost["calls_cached"] == 0 and cost["prompt_tokens"] > 0
    assert cost["completion_tokens"] == 6 and cost["seconds_per_question"] >= 0
    sent = (len(s.requests), s.gets)
    r = run_sqa(served_eval_args(s.url, head, tmp_path / "b"), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (len(s.requests), s.gets) == sent  # nothing sent at all
    run = json.loads((tmp_path / "b" / "run.json").read_text())
    assert run["server"]["contacted"] is False and run["server"]["identity"].startswith("as recorded at 20")
    assert (
        run["server"]["fingerprint"] == json.loads((tmp_path / "a" / "run.json").read_text())["server"]["fingerprint"]
    )
    cost = run["cost"]
    assert cost["calls_sent"] == 0 and cost["calls_cached"] == 6 and cost["prompt_tokens"] == 0
    a = json.loads((tmp_path / "a" / "predictions.json").read_text())
    assert a == json.loads((tmp_path / "b" / "predictions.json").read_text())
    # one more question than cached: the load is checked live at the first miss, then the question sent
    r = run_sqa(served_eval_args(s.url, head, tmp_path / "c", limit=7), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert s.question_requests == 7 and s.gets == sent[1] + 1
    run = json.loads((tmp_path / "c" / "run.json").read_text())
    assert run["server"]["contacted"] is True and run["server"]["identity"] == "live"
    assert run["cost"]["calls_sent"] == 1 and run["cost"]["calls_cached"] == 6
    sent = (len(s.requests), s.gets)
    ask = ["ask", "--no-retrieval", "--head", head, "--model", "openai:fake-reader", "--base-url", s.url, "--json"]
    # the StrategyQA dev question of the first run's first prediction, asked again: cached, nothing sent
    from sqa.strategyqa import load_questions

    q = next(x for x in load_questions("dev") if x.qid == next(iter(a)))
    r = run_sqa([*ask, q.question], env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    srv = json.loads(r.stdout)["server"]
    assert (len(s.requests), s.gets) == sent and srv["contacted"] is False and srv["cost"]["calls_cached"] == 1


def test_other_weights_under_the_same_name_miss_the_cache_and_refuse_the_resume(standin, head, tmp_path):
    """Other weights behind the same name (another fingerprint): the cached answers are not used,
    and resuming the old run folder through them is refused in one line."""
    s = standin()
    out = tmp_path / "run"
    assert run_sqa(served_eval_args(s.url, head, out, limit=3), env=ENV).returncode == 0
    s.close()
    t = standin()
    import helpers

    orig = helpers.standin_log_odds
    try:
        helpers.standin_log_odds = lambda text: -orig(text)  # other weights: other read-outs, other fingerprint
        r = run_sqa(served_eval_args(t.url, head, tmp_path / "other", limit=3), env=ENV)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads((tmp_path / "other" / "run.json").read_text())["cost"]["calls_sent"] == 3
        line = one_error_line(run_sqa(served_eval_args(t.url, head, out, limit=6), env=ENV), notices=True)
        assert "answered through" in line and "fingerprint" in line and "another --out" in line
    finally:
        helpers.standin_log_odds = orig


def test_other_weights_behind_the_same_url_are_found_at_the_first_miss(standin, head, tmp_path):
    """Other weights behind the same URL and name after a finished run: a re-run answered wholly
    from the cache sends nothing and says its identity is as recorded; the first request the cache
    cannot answer probes the server, finds another fingerprint and stops in one line naming both
    (no answer of the new weights mixed with cached ones); the next command goes by the new weights."""
    import helpers

    s = standin()
    assert run_sqa(served_eval_args(s.url, head, tmp_path / "a", limit=3), env=ENV).returncode == 0
    fp = json.loads((tmp_path / "a" / "run.json").read_text())["server"]["fingerprint"]
    orig = helpers.standin_log_odds
    try:
        helpers.standin_log_odds = lambda text: -orig(text)
        sent = len(s.requests)
        r = run_sqa(served_eval_args(s.url, head, tmp_path / "b", limit=3), env=ENV)
        assert r.returncode == 0 and len(s.requests) == sent, r.stderr[-2000:]
        assert "as recorded at" in json.loads((tmp_path / "b" / "run.json").read_text())["server"]["identity"]
        line = one_error_line(run_sqa(served_eval_args(s.url, head, tmp_path / "c", limit=5), env=ENV), notices=True)
        assert fp in line and "otherwise than recorded at" in line and "run the command again" in line
        assert s.question_requests == 3  # only the probes were sent
        traces = (tmp_path / "c" / "traces.jsonl").read_text().splitlines()
        assert len(traces) <= 3  # the cached answers only
        r = run_sqa(served_eval_args(s.url, head, tmp_path / "d", limit=5), env=ENV)
        assert r.returncode == 0, r.stderr[-2000:]
        run = json.loads((tmp_path / "d" / "run.json").read_text())
        assert run["server"]["fingerprint"] != fp and run["cost"]["calls_sent"] == 5
        line = one_error_line(run_sqa(served_eval_args(s.url, head, tmp_path / "a", limit=5), env=ENV), notices=True)
        assert "answered through" in line and fp in line
    finally:
        helpers.standin_log_odds = orig


def test_features_and_heads_of_other_weights_under_the_same_name_are_refused(standin, tmp_path):
    """A served train run records the served identity (fingerprint, its reads, endpoint) in the
    features store's meta.json and in its heads' provenance; the same weights reuse both (the train
    run again reads nothing, ``sqa ask`` answers with the head); other weights served under the same
    name are refused in one line each, naming both fingerprints and the command that builds heads."""
    import helpers

    s = standin()
    train = ["eval", "--split", "train", "--limit", 30, "--preset", "no-retrieval", "--model", "openai:fake-reader"]
    r = run_sqa([*train, "--base-url", s.url, "--out", tmp_path / "train"], env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    home = Path(__import__("os").environ["SQA_HOME"])
    (meta,) = (home / "features").rglob("meta.json")
    served = json.loads(meta.read_text())["served"]
    fp = served["fingerprint"]
    assert fp.startswith("sha256:") and served["endpoint"] == "completions" and len(served["fingerprint_reads"]) == 3
    heads = sorted((home / "heads").glob("openai:fake-reader.*.json"))
    assert heads and all(json.loads(h.read_text())["provenance"]["served"]["fingerprint"] == fp for h in heads)
    ask = ["ask", "Is the sun a star?", "--no-retrieval", "--model", "openai:fake-reader", "--json"]
    a = run_sqa([*ask, "--base-url", s.url], env=ENV)
    assert a.returncode == 0, a.stderr[-2000:]
    assert "openai:fake-reader.plain." in a.stdout  # its own head answers
    before = (len(s.requests), s.gets)
    r = run_sqa([*train, "--base-url", s.url, "--out", tmp_path / "again"], env=ENV)
    assert r.returncode == 0 and (len(s.requests), s.gets) == before, r.stderr[-2000:]  # reused, nothing sent
    run = json.loads((tmp_path / "again" / "run.json").read_text())
    assert run["server"]["fingerprint"] == fp and run["server"]["contacted"] is False
    assert run["cost"]["calls_sent"] == 0 and run["cost"]["features_stored"] == 30
    t = standin()
    orig = helpers.standin_log_odds
    try:
        helpers.standin_log_odds = lambda text: -orig(text)  # other weights, the same name
        line = one_error_line(
            run_sqa([*train, "--base-url", t.url, "--out", tmp_path / "other"], env=ENV), notices=True
        )
        assert "meta.json: the stored features were read from other weights behind openai:fake-reader" in line
        assert fp in line and t.url in line and "nothing was deleted" in line
        assert t.question_requests == 0  # nothing read into the store
        line = one_error_line(run_sqa([*ask, "--base-url", t.url], env=ENV), notices=True)
        assert "its features were read from other weights" in line and fp in line
        assert f"`sqa eval --split train --model openai:fake-reader --base-url {t.url}`" in line
    finally:
        helpers.standin_log_odds = orig


def test_fingerprint_reads_allow_serving_noise_only():
    from sqa.models.served_probe import same_reads

    a = [{" Yes": -0.44, " No": -1.09, " True": -5.9}, {" No": -0.2, " Yes": -1.8}, "Paris"]
    noisy = [{" Yes": -0.47, " No": -1.05, " True": -5.8}, {" No": -0.21, " Yes": -1.75}, "Paris"]
    flipped = [{" No": -0.5, " Yes": -0.9}, a[1], "Paris"]
    assert same_reads(a, noisy) and not same_reads(a, flipped) and not same_reads(a, a[:2] + ["Lyon"])
    assert not same_reads(a, [{" Yes": -0.9, " No": -1.09}, a[1], "Paris"])  # 0.46 away


def test_two_servers_share_the_work(standin, head, tmp_path):
    a, b = standin(latency=0.05), standin(latency=0.05)
    out = tmp_path / "run"
    r = run_sqa(served_eval_args([a.url, b.url], head, out, limit=8), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    run = json.loads((out / "run.json").read_text())
    assert sorted(run["server"]["base_urls"]) == sorted([a.url, b.url])
    assert a.question_requests + b.question_requests == 8 and a.question_requests and b.question_requests


# -- issue 41: URLs, keys, bodies and values that must not stop a run or leak --------------------------


def test_password_with_url_characters_is_sent_as_basic_auth_and_shown_nowhere(standin, head, tmp_path):
    import base64

    pw = "p/w#x?y@z:Q9-SECRET"
    s = standin()
    url = s.url.replace("http://", f"http://sqauser:{pw}@")
    out = tmp_path / "run"
    r = run_sqa(served_eval_args(url, head, out, limit=2), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"Basic {base64.b64encode(f'sqauser:{pw}'.encode()).decode()}" in s.auth
    assert "SECRET" not in r.stdout + r.stderr + _texts(out)
    bad = url.replace(f":{s.url.rsplit(':', 1)[1].split('/')[0]}/", ":80a/")
    r = run_sqa(served_eval_args(bad, head, tmp_path / "run2", limit=2), env=ENV)
    line = one_error_line(r, notices=True)
    assert "port is not a number" in line and "SECRET" not in r.stdout + r.stderr


@pytest.mark.parametrize("bad", ["null", "nan", "inf", "absurd"])
def test_non_finite_or_absurd_logprobs_count_as_missing(standin, head, tmp_path, bad):
    s = standin(bad=bad)  # in the questions' answers only (the load-time probes read well)
    out = tmp_path / "run"
    r = run_sqa(served_eval_args(s.url, head, out, limit=3), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "metrics.json").read_text())
    assert m["yes_no_unread"]["missing"] == 3


@pytest.mark.parametrize("bad,words", [("malformed", "not JSON"), ("cut", "closed the connection")])
def test_malformed_or_cut_body_is_one_line(standin, head, tmp_path, bad, words):
    s = standin(bad=bad)
    line = one_error_line(run_sqa(served_eval_args(s.url, head, tmp_path / "run", limit=2), env=ENV), notices=True)
    assert words in line and s.url in line


def test_keys_timeouts_paths_and_aliases(standin, head, tmp_path):
    s = standin(key="right-key-123")
    line = one_error_line(
        run_sqa(served_eval_args(s.url, head, tmp_path / "r1"), env={"SQA_OPENAI_MAX_RETRIES": "0"}), notices=True
    )
    assert "none is set" in line and "$SQA_OPENAI_API_KEY" in line
    line = one_error_line(run_sqa(served_eval_args(s.url, head, tmp_path / "r2"), env=ENV), notices=True)
    assert "refused the key in $OPENAI_API_KEY" in line and KEY not in line
    r = run_sqa(served_eval_args(s.url, head, tmp_path / "r3", limit=2), env={"SQA_OPENAI_API_KEY": "right-key-123"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "right-key-123" not in r.stdout + r.stderr + _texts(tmp_path / "r3")
    line = one_error_line(
        run_sqa(served_eval_args(s.url, head, tmp_path / "r4"), env={**ENV, "SQA_OPENAI_TIMEOUT": "inf"}), notices=True
    )
    assert "$SQA_OPENAI_TIMEOUT='inf'" in line
    t = standin()
    line = one_error_line(run_sqa(served_eval_args(t.url[:-3], head, tmp_path / "r5"), env=ENV), notices=True)
    assert "does not end in /v1" in line and f"{t.url}" in line
    t.answer_as = "other-model"
    line = one_error_line(run_sqa(served_eval_args(t.url, head, tmp_path / "r6"), env=ENV), notices=True)
    assert "answered as model 'other-model'" in line and "--allow-model-alias" in line
    r = run_sqa(served_eval_args(t.url, head, tmp_path / "r7", "--allow-model-alias", limit=2), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]


HUNG = "test_hung_server_is_bounded_well_under_a_minute"


@pytest.fixture(scope="module", autouse=True)
def _hung_ask(request, tmp_path_factory):
    """``sqa ask`` through a server that never answers (``HUNG``), started in the background when
    this module starts and only where that test is selected: it spends about 41 s waiting on the
    default timeout and retries, so the module's other tests run meanwhile instead of after it.
    Yields ``(thread, result)``: the thread that waits for it, and ``result`` (the
    CompletedProcess ``r`` and the seconds ``took`` from its start to its exit); None where the
    test is not selected. The same environment as the test's own: a throw-away ``$SQA_HOME``, no
    key or base URL, concurrency 1."""
    import os
    import subprocess
    import threading

    from helpers import default_sigint, sqa_argv

    if not any(getattr(it, "originalname", it.name) == HUNG for it in request.session.items):
        yield None
        return
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    tmp = tmp_path_factory.mktemp("hung")
    s = StandIn(latency=120)
    head = write_log_odds_head(tmp / "head.json")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "SQA_OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.pop("SQA_DEBUG", None)
    env.update(SQA_HOME=str(throwaway_home(tmp / "sqa_home")), SQA_OPENAI_CONCURRENCY="1")
    args = ["ask", "Is the sun a star?", "--no-retrieval", "--head", head, "--model", "openai:fake-reader"]
    t = time.monotonic()
    proc = subprocess.Popen(
        sqa_argv() + [str(a) for a in args + ["--base-url", s.url]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=default_sigint,
    )
    result: dict = {}

    def wait() -> None:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        result["took"] = time.monotonic() - t
        result["r"] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    yield thread, result
    if proc.poll() is None:
        proc.kill()
    thread.join(30)
    s.close()


def test_hung_server_is_bounded_well_under_a_minute(_hung_ask):
    """The default timeout and retries: a server that never answers holds ``sqa ask`` for about
    41 s (20 s a try, 2 tries), not minutes. The run is started in the background by ``_hung_ask``
    when the module starts; here its result and wall time from start to exit are checked."""
    thread, result = _hung_ask
    thread.join(150)
    r, took = result["r"], result["took"]
    assert "did not answer within 20 s (2 tries" in one_error_line(r, notices=True)
    assert took < 55, took


def test_nothing_listening_on_any_server(head, tmp_path):
    urls = [f"http://127.0.0.1:{free_port()}/v1", f"http://127.0.0.1:{free_port()}/v1"]
    line = one_error_line(run_sqa(served_eval_args(urls, head, tmp_path / "run"), env=ENV), notices=True)
    assert "no OpenAI-compatible server answers at" in line


def test_response_cache_is_shared_by_processes(tmp_path):
    """Two processes writing 300 answers each into one cache file at once: all 600 are read back,
    none lost, no write refused (SQLite's locking, WAL journal, busy timeout)."""
    import subprocess
    import sys

    path = tmp_path / "responses.sqlite"
    code = (
        "import sys; from sqa.models.served_cache import ResponseCache\n"
        "c = ResponseCache(sys.argv[1])\n"
        "for i in range(300): c.put(f'{sys.argv[2]}-{i}', 'chat', {'i': i, 'who': sys.argv[2]})\n"
        "sys.exit(c.errors)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), w]) for w in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    from sqa.models.served_cache import ResponseCache

    c = ResponseCache(path)
    assert len(c) == 600 and c.get("b-299") == {"i": 299, "who": "b"} and c.get("nope") is None


def test_served_flags_with_a_local_model_are_one_line(tmp_path):
    r = run_sqa(
        [
            "eval",
            "--preset",
            "no-retrieval",
            "--model",
            "qwen2.5-coder-0.5b",
            "--api",
            "chat",
            "--limit",
            "1",
            "--out",
            tmp_path / "run",
        ]
    )
    assert "--api goes with a served model" in one_error_line(r, notices=True)
    r = run_sqa(
        [
            "eval",
            "--preset",
            "no-retrieval",
            "--model",
            "openai:x",
            "--api",
            "neither",
            "--limit",
            "1",
            "--out",
            tmp_path / "run",
        ]
    )
    assert "--api 'neither': use one of auto, chat, completions" in one_error_line(r, notices=True)


def test_a_lost_server_hands_its_requests_to_the_other(standin, head, tmp_path):
    """Two servers; one goes away mid-run: its requests go to the other and the run completes."""
    import threading

    a, b = standin(latency=0.05), standin(latency=0.05)

    def stop_a():
        while a.question_requests < 2:
            time.sleep(0.01)
        a.close()

    threading.Thread(target=stop_a, daemon=True).start()
    out = tmp_path / "run"
    r = run_sqa(served_eval_args([a.url, b.url], head, out, limit=8), env=ENV)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "complete: 8/8" in r.stdout
    assert 2 <= a.question_requests <= 3 and b.question_requests >= 5  # a answered no more once closed
