"""``complete`` (n continuations per prompt, sampling with a seed, per-token logprobs) and
``usage`` on every runtime: the ``ModelBase`` default (greedy only, one-line errors otherwise), a
served model against the stand-in server (``helpers.StandIn``: ``n`` honoured, ignored or refused;
logprobs over completions and chat; a server without logprobs; the response cache), the tiny
transformers checkpoint (``tests/tiny_hf.py``) and, marked ``slow``, the packaged 0.5B GGUF on
llama.cpp."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import StandIn

from sqa.models.base import ModelBase
from sqa.types import BadInput, ChatPrompt, Generation, ServerError, SqaError

QUESTION = "Question: Is water wet?\nAnswer (Yes or No):"


class Echo(ModelBase):
    """A model with greedy ``generate`` only: the prompt's length in words."""

    name = "echo"

    def generate(self, prompts, max_tokens, stop=()):
        return [f" {len(str(p).split())} words" for p in prompts]


def test_model_base_complete_is_greedy_generate_and_refuses_the_rest():
    m = Echo()
    assert m.complete(["a b", "c"], 5) == [[Generation(" 2 words")], [Generation(" 1 words")]]
    assert m.usage() is None
    assert not m.capabilities.sampling and not m.capabilities.token_logprobs
    for kw, what in (
        ({"logprobs": True}, "gives no per-token logprobs"),
        ({"temperature": 0.7}, "cannot sample"),
        ({"n": 2}, "cannot sample"),
    ):
        with pytest.raises(SqaError) as e:
            m.complete(["a"], 5, **kw)
        msg = str(e.value)
        assert msg.startswith("echo: ") and what in msg and "\n" not in msg
    for kw in ({"temperature": -0.1}, {"temperature": math.nan}, {"n": 0}):
        with pytest.raises(BadInput, match="^echo: "):
            m.complete(["a"], 5, **kw)
    assert "sampling" in m.capabilities.to_dict() and "token_logprobs" in m.capabilities.to_dict()


# --- served ---------------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path, monkeypatch):
    """``make(api, **standin_switches) -> (StandIn, OpenAIModel)`` with a response cache in tmp_path."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    for var in ("OPENAI_API_KEY", "SQA_OPENAI_API_KEY", "OPENAI_BASE_URL", "SQA_OPENAI_CONCURRENCY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SQA_OPENAI_MAX_RETRIES", "0")
    from sqa.models.openai import OpenAIModel
    from sqa.models.served_cache import ResponseCache

    made: list = []

    def make(api: str, server: StandIn | None = None, **kw):
        s = server or StandIn(**kw)
        m = OpenAIModel("fake-reader", s.url, api=api, concurrency=1, cache=ResponseCache(tmp_path / "r.sqlite"))
        made.append((s, m))
        return s, m

    yield make
    for s, m in made:
        m.close()
        s.close()


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_served_n_samples_in_one_request_with_logprobs_and_cached(served, api):
    s, m = served(api)
    assert m.endpoint == api and m.capabilities.sampling and m.capabilities.token_logprobs
    sent = len(s.requests)
    out = m.complete([QUESTION], 8, temperature=0.7, seed=5, n=3, logprobs=True)
    assert len(s.requests) == sent + 1  # one request asked for the 3 choices
    body = s.requests[-1][1]
    assert (body["n"], body["seed"], body["temperature"]) == (3, 5, 0.7)
    if api == "completions":
        assert body["logprobs"] == 1
    else:
        assert body["logprobs"] is True and body["top_logprobs"] == 1
    (gens,) = out
    assert [g.text.rsplit(" ", 1)[-1] for g in gens] == ["s5.0", "s5.1", "s5.2"]
    for g in gens:
        assert "".join(g.tokens) == g.text and len(g.logprobs) == len(g.tokens) == 3
        assert all(v <= 0 for v in g.logprobs)
        if api == "completions":  # the stand-in's own values: the answer token's, " because" -0.5, the sample's -1.5
            assert g.logprobs[1:] == (-0.5, -1.5) and -1.3 <= g.logprobs[0] <= -0.2
        else:
            assert g.logprobs == (-0.01,) * 3
    assert m.usage() == {"prompt_tokens": m.cost.prompt_tokens, "completion_tokens": m.cost.completion_tokens}
    assert m.usage()["completion_tokens"] == 9
    # greedy complete sends generate's body: cached by either, and its text is generate's
    greedy = m.generate([QUESTION], 8)
    sent = len(s.requests)
    assert m.complete([QUESTION], 8, n=2) == [[Generation(greedy[0])] * 2]
    assert len(s.requests) == sent
    # a new model object on the same response cache (its load recorded there) sends nothing
    s2, m2 = served(api, server=s)
    assert m2.complete([QUESTION], 8, temperature=0.7, seed=5, n=3, logprobs=True) == out
    assert len(s.requests) == sent and m2.usage() == {"prompt_tokens": 0, "completion_tokens": 0}
    assert m2.cost.calls_cached == 1


@pytest.mark.parametrize("mode", ["ignore", "refuse"])
def test_served_n_falls_back_to_one_request_per_seed(served, mode):
    s, m = served("completions", n_choices=mode)
    sent = len(s.requests)
    out = m.complete([QUESTION, "Question: Is fire hot?\nAnswer (Yes or No):"], 8, temperature=1.0, seed=7, n=3)
    bodies = [b for _, b in s.requests[sent:]]
    # the first prompt: the n=3 request (ignored or refused), then seeds 7, 8, 9; the second: seeds only
    assert [b.get("n") for b in bodies] == [3] + [None] * 6
    assert [b["seed"] for b in bodies[1:]] == [7, 8, 9] * 2
    for gens in out:
        assert [g.text.rsplit(" ", 1)[-1] for g in gens] == ["s7.0", "s8.0", "s9.0"]


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_served_without_logprobs_is_one_line(served, api):
    s, m = served(api, completions="no-logprobs", chat="no-logprobs")
    assert m.readout == "generation" and not m.capabilities.token_logprobs and m.capabilities.sampling
    sent = len(s.requests)
    with pytest.raises(ServerError) as e:
        m.complete([QUESTION], 8, logprobs=True)
    msg = str(e.value)
    assert "\n" not in msg and s.url in msg and "needs per-token logprobs" in msg
    assert len(s.requests) == sent  # known at load: nothing sent
    assert m.complete([QUESTION], 8)[0][0].text  # text alone still works
    # a server that gave logprobs at load but none in an answer: the same line, after the request
    s2, m2 = served(api)
    assert m2.capabilities.token_logprobs
    setattr(s2, api, "no-logprobs")
    with pytest.raises(ServerError, match="needs per-token logprobs") as e:
        m2.complete([QUESTION], 8, logprobs=True)
    assert "\n" not in str(e.value) and s2.url in str(e.value)


def test_served_logprobs_cut_with_the_stop_string(served):
    """A stop string cut here (the stand-in does not stop) keeps the tokens that text is made of."""
    s, m = served("completions")
    (g,) = m.complete([QUESTION], 8, stop=[" bec"], logprobs=True)[0]
    assert " bec" not in g.text and len(g.tokens) == 1 and g.tokens[0] == g.text
    (g,) = m.complete([QUESTION], 8, stop=["cause"], logprobs=True)[0]
    assert g.text.endswith(" be") and len(g.tokens) == 2  # " because" straddles the cut: kept


# --- transformers (tiny checkpoint) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_hf_model(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from tiny_hf import build_tiny_checkpoint

    from sqa.models.hf import HFModel

    return HFModel(str(build_tiny_checkpoint(tmp_path_factory.mktemp("tiny_hf") / "tiny")), device="cpu")


def test_hf_complete_greedy_logprobs_and_seeded_samples(tiny_hf_model):
    import torch
    from tiny_hf import PROMPTS

    m = tiny_hf_model
    assert m.capabilities.sampling and m.capabilities.token_logprobs
    before = m.usage()
    greedy = m.generate(PROMPTS[:3], 6)
    out = m.complete(PROMPTS[:3], 6, logprobs=True)
    assert [g[0].text for g in out] == greedy
    for p, (g,) in zip(PROMPTS[:3], out):
        assert len(g.tokens) == len(g.logprobs) > 0 and all(v <= 0 for v in g.logprobs)
        enc = m.tokenizer(p, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            lsm = torch.log_softmax(m.model(**enc).logits[0, -1].double(), -1)
        assert g.logprobs[0] == pytest.approx(float(lsm.max()), abs=1e-5)  # the greedy token is the most likely
        assert float(lsm.exp().sum()) == pytest.approx(1.0, abs=1e-9)
    a = m.complete(PROMPTS[:2], 6, temperature=1.0, seed=3, n=3)
    assert m.complete(PROMPTS[:2], 6, temperature=1.0, seed=3, n=3) == a
    assert all(len(g) == 3 for g in a)
    texts = {g.text for g in a[0]} | {m.complete(PROMPTS[:2], 6, temperature=1.0, seed=4)[0][0].text}
    assert len(texts) >= 2
    after = m.usage()
    assert after["prompt_tokens"] > before["prompt_tokens"] and after["completion_tokens"] > before["completion_tokens"]


# --- llama.cpp (the packaged 0.5B GGUF) -----------------------------------------------------------


@pytest.mark.slow
def test_llamacpp_complete_greedy_logprobs_and_seeded_samples():
    from helpers import small_gguf

    from sqa.models.llamacpp import LlamaCppModel

    m = LlamaCppModel(small_gguf(), n_ctx=1024, n_threads=2)
    assert m.capabilities.sampling and m.capabilities.token_logprobs
    prompt = "The three largest cities of France are"
    greedy = m.generate([prompt], 10)[0]
    (g,) = m.complete([prompt], 10, logprobs=True)[0]
    assert g.text == greedy and len(g.tokens) == len(g.logprobs) == 10 and "".join(g.tokens) == g.text
    assert all(v <= 0 for v in g.logprobs)
    # the first token's logprob is the maximum of the log-softmax of its logits row
    m._prepare(m.tokenize(prompt))
    row = np.asarray(m.ctx.get_logits_ith(-1), dtype=np.float64)
    lsm = row - row.max() - np.log(np.exp(row - row.max()).sum())
    assert g.logprobs[0] == pytest.approx(lsm.max(), abs=1e-9) and np.exp(lsm).sum() == pytest.approx(1.0)
    # stop cuts text and tokens alike
    (c,) = m.complete([prompt], 10, stop=[g.tokens[2]], logprobs=True)[0]
    assert c.text == "".join(g.tokens[:2]) and c.tokens == g.tokens[:2] and c.logprobs == g.logprobs[:2]
    # sampling: same seed, same text; seeds 0..3 in one call, seed 1 alone equals the second
    poem = ChatPrompt((("user", "Write one line of a poem about the sea."),))
    before = m.usage()
    a = m.complete([poem], 8, temperature=0.7, seed=0, n=4, logprobs=True)[0]
    assert len(a) == 4 and len({x.text for x in a}) >= 2
    assert m.complete([poem], 8, temperature=0.7, seed=1)[0][0].text == a[1].text
    assert m.complete([poem], 8, temperature=0.7, seed=0)[0][0].text == a[0].text
    assert all(len(x.logprobs) == len(x.tokens) > 0 and max(x.logprobs) <= 0 for x in a)
    after = m.usage()
    assert after["completion_tokens"] - before["completion_tokens"] >= 4 * 7
    assert after["prompt_tokens"] - before["prompt_tokens"] == 6 * len(m.tokenize(m.template.render(poem)))
