"""The facts reader's prompt form (``sqa.facts.prompt``: "text" or "chat"), issue 42.

- A head fitted on text-form reads never answers chat-form reads (served over
  ``/v1/chat/completions``, or ``--apply-chat-template``), nor the other way round: the head is
  chosen among the heads of the reader's form, an explicit ``--head`` of the other form is one
  line, and the features store keys the two forms apart (no model, no server; fast).
- In-process ``--apply-chat-template`` and a real llama.cpp server (llama-cpp-python[server]
  0.3.36, the session's ``llama_server`` fixture of tests/conftest.py) over ``--api chat`` read the same
  chat-form prompts: the same facts-reader P(yes) within ``TOLERANCE`` (slow, server; the 0.5B,
  2 dev questions).
- The steps reader's transcript in turns (``--no-prefill``) in-process and over that server's chat
  endpoint (which carries it as turns): the same prompt tokens and P(yes) (slow, server; one prompt).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import one_error_line, run_sqa, throwaway_home, write_log_odds_head
from test_server import KEY, MODEL, TOLERANCE

from sqa.facts.features import FactSettings
from sqa.facts.head import AnswerHead, FeatureSpec
from sqa.facts.prompt import in_form, plain_prompt, prompt_version
from sqa.facts.reader import FactsReader, head_form
from sqa.facts.store import settings_key
from sqa.pipeline import load_head
from sqa.types import ChatPrompt, ModelCapabilities, SqaError

SERVED = "openai:fake-reader"


def _head(path, form: str):
    """A log-odds head for SERVED whose provenance says which prompt form it was fitted on."""
    AnswerHead(
        FeatureSpec((), ("plain",), ()),
        np.asarray([1.0], dtype=np.float32),
        0.0,
        SERVED,
        None,
        {"prompt": prompt_version(form), "facts": FactSettings(form=form).to_dict(), "train_size": 10},
    ).save(path)
    return path


class _ChatServed:
    """A stand-in for a model served over /v1/chat/completions (no requests made here)."""

    name = SERVED
    hidden_size = None
    capabilities = ModelCapabilities(endpoint="chat", readout="top_logprobs", chat_template="server")


def test_a_text_form_head_never_answers_chat_form_reads(tmp_path, monkeypatch):
    home = throwaway_home(tmp_path / "home")
    monkeypatch.setenv("SQA_HOME", str(home))
    heads = home / "heads"
    heads.mkdir()
    text = _head(heads / "openai:fake-reader.plain.facts-v1-k10-top3-w3t2-40w.n10-00000000.json", "text")
    assert head_form(AnswerHead.load(text)) == "text"
    assert head_form(AnswerHead.load(write_log_odds_head(tmp_path / "old.json"))) == "text"  # no prompt recorded
    # chosen by form: the text head answers text reads; chat reads have no head (zero-shot)
    h, ident = load_head(SERVED, False, None, form="text")
    assert h is not None and h.source == str(text)
    assert load_head(SERVED, False, None, form="chat") == (None, "zero-shot:plain")
    # a reader whose model reads the chat form refuses the text head, whatever form was asked
    with pytest.raises(SqaError, match="text-form reads.*chat form"):
        FactsReader(_ChatServed(), h, None)
    # a chat-form head answers chat reads only, and is what the reader of a served chat model reads with
    chat = _head(heads / "openai:fake-reader.plain.facts-v1-chat-k10-top3-w3t2-40w.n10-11111111.json", "chat")
    h2, _ = load_head(SERVED, False, None, form="chat")
    assert h2.source == str(chat) and load_head(SERVED, False, None, form="text")[0].source == str(text)
    r = FactsReader(_ChatServed(), h2, None)
    assert r.prompt_form == "chat" and r.settings.form == "chat"
    # the two forms never share a features store, and a chat read is one user turn
    assert settings_key(FactSettings(form="chat")).startswith("facts-v1-chat-")
    assert settings_key(FactSettings()).startswith("facts-v1-k")
    p = plain_prompt("Is the sun a star?")
    assert in_form(p, "text") == p and in_form(p, "chat") == ChatPrompt((("user", p),))


def test_a_head_of_the_other_form_is_one_line_before_anything_loads(tmp_path):
    """``--head`` of the text form with ``--api chat`` (nothing listens at the URL: the refusal comes
    before the model loads), and a chat-form head without the chat form."""
    env = {"SQA_HOME": str(throwaway_home(tmp_path / "home")), "OPENAI_API_KEY": KEY}
    text, chat = _head(tmp_path / "text.json", "text"), _head(tmp_path / "chat.json", "chat")
    base = ["eval", "--no-retrieval", "--split", "dev", "--limit", "1", "--out", tmp_path / "run"]
    served = ["--model", SERVED, "--base-url", "http://127.0.0.1:9/v1"]
    line = one_error_line(run_sqa([*base, *served, "--api", "chat", "--head", text], env=env))
    assert "text-form reads" in line and "chat form" in line
    line = one_error_line(run_sqa([*base, *served, "--api", "completions", "--head", chat], env=env))
    assert "chat-form reads" in line and "--api chat" in line
    line = one_error_line(run_sqa([*base, *served, "--api", "completions", "--apply-chat-template"], env=env))
    assert "--api chat" in line


@pytest.mark.slow
@pytest.mark.server
def test_apply_chat_template_in_process_reads_what_the_server_reads_over_chat(llama_server, gold_index, tmp_path):
    """The facts reader, zero-shot (no head of the chat form), on 2 dev questions: in-process with
    ``--apply-chat-template`` and served with ``--api chat`` give the same answers and P(yes) within
    TOLERANCE; both runs record the chat prompt form."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    env = {"SQA_HOME": str(throwaway_home(tmp_path / "home")), "OPENAI_API_KEY": KEY, "SQA_OPENAI_TIMEOUT": "600"}
    base = ["eval", "--split", "dev", "--limit", "2", "--index-dir", gold_index.index_dir]
    local = run_sqa([*base, "--model", MODEL, "--apply-chat-template", "--out", tmp_path / "local"], env=env)
    served = run_sqa(
        [
            *base,
            "--model",
            f"openai:{MODEL}",
            "--base-url",
            llama_server,
            "--api",
            "chat",
            "--out",
            tmp_path / "served",
        ],
        env=env,
        timeout=900,
    )
    assert local.returncode == 0 and served.returncode == 0, (local.stderr[-2000:], served.stderr[-2000:])

    def traces(d):
        return {json.loads(x)["qid"]: json.loads(x) for x in (d / "traces.jsonl").read_text().splitlines()}

    a, b = traces(tmp_path / "local"), traces(tmp_path / "served")
    assert len(a) == len(b) == 2 and set(a) == set(b)
    for q in a:
        assert a[q]["answer"] == b[q]["answer"] and abs(a[q]["p_yes"] - b[q]["p_yes"]) <= TOLERANCE, (a[q], b[q])
        assert a[q]["decision"] == b[q]["decision"] == "zero-shot:facts"
    for d in ("local", "served"):
        run = json.loads((tmp_path / d / "run.json").read_text())
        assert run["options"]["prompt_form"] == "chat" and run["answering"] == "zero-shot"


def test_a_continued_message_echoed_whole_is_cut_to_its_continuation():
    """llama.cpp's llama-server returns a continued final assistant message whole (the prefill
    included: measured on the build llama-cpp-python 0.3.36 vendors); vLLM returns the continuation
    only. Either way the steps reader gets the continuation."""
    from sqa.models.served_read import strip_prefill

    reply = "1, 2, 3, 4, 5, 6, 7, 8,"
    assert strip_prefill(reply + " 9,", reply) == " 9,"  # llama-server
    assert strip_prefill(" 9,", reply) == " 9,"  # vLLM
    assert strip_prefill("anything", "") == "anything"


def test_completions_logprobs_in_the_chat_format_are_read():
    """llama-server (the build llama-cpp-python 0.3.36 vendors) answers /v1/completions with
    ``logprobs.content`` (the chat format) instead of ``tokens`` / ``top_logprobs``: read as such,
    not taken for a server without logprobs (which would be read by generation, P(yes) 0 or 1)."""
    from sqa.models import served_read as R

    resp = {
        "choices": [
            {
                "text": " Yes",
                "logprobs": {
                    "content": [
                        {
                            "token": " Yes",
                            "logprob": -0.81,
                            "top_logprobs": [{"token": " Yes", "logprob": -0.81}, {"token": " No", "logprob": -1.60}],
                        }
                    ]
                },
            }
        ]
    }
    lo, kind = R.log_odds(R.answer_position(R.token_positions(resp, "completions")))
    assert kind == "both" and abs(lo - 0.79) < 1e-9


@pytest.mark.slow
@pytest.mark.server
def test_no_prefill_in_process_reads_the_tokens_the_server_reads_over_chat(llama_server, monkeypatch):
    """The steps reader's final reading in turns on a real dev question (its demonstrations, the
    gold decomposition): llama-cpp-python's chat endpoint cannot continue an assistant message, so
    the steps reader reads that server in turns; in-process with ``prefill=False`` the 0.5B reads the
    same messages: as many prompt tokens as the server's ``usage`` counts, and P(yes) within
    TOLERANCE."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    from sqa.models.openai import OpenAIModel
    from sqa.models.registry import load_model
    from sqa.steps import prompts as P
    from sqa.steps.reader import StepsReader
    from sqa.strategyqa import load_questions

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    q = load_questions("dev")[0]
    demos = P.default_selector().select(q.question, 3, exclude_qid=q.qid)
    steps = "Steps:\n" + P.format_steps(list(q.decomposition))
    prompt = P.question_prompt(demos, q.question).extend(steps).extend(f"Question: {q.question}\nAnswer:")
    served = OpenAIModel(MODEL, llama_server, api="chat", concurrency=1)
    assert served.prefill == "turns" and StepsReader(served, None, retrieval=False).turns
    local = load_model(MODEL)
    turns = P.yes_no_turns(prompt, q.question)
    assert turns.reply == "" and turns.messages[-2] == ("assistant", "Steps:\n" + P.format_steps(list(q.decomposition)))
    p_served = served.yes_probability([turns])[0]
    assert served.cost.calls_sent == 1 and served.cost.prompt_tokens == len(
        local.tokenize(local.template.render(turns))
    )
    p_local = local.yes_probability([turns])[0]
    assert abs(p_local - p_served) <= TOLERANCE, (p_local, p_served)
