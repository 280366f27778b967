"""Every shipped method on a real model: the packaged 0.5B GGUF in-process (llama.cpp) and served by
llama.cpp's server (llama-cpp-python[server], as CI installs it), and the transformers reader on a
tiny seeded checkpoint; each answers one question with its calls counted, on the gold index."""

from __future__ import annotations

import json

import pytest
from helpers import SMALL_MODEL, run_sqa, small_gguf

import sqa
from sqa.methods import MethodSettings
from sqa.methods.registry import load_method

QUESTION = "Did Aristotle use a laptop?"
SHORT = 16  # tokens a generation may write: a sentence, cheap on 2 cores
# one method per mechanism (greedy generation, sampling, search, per-token logprobs, iteration,
# follow-up questions); every method's calls are counted against a stand-in in test_methods_served.py
IN_PROCESS = ["direct", "cot", "sc", "rag", "flare", "self-ask"]
SERVED = ["direct", "cot", "sc", "flare"]


def settings(method: str) -> MethodSettings:
    m = load_method(method)
    return MethodSettings(
        method,
        max_tokens=SHORT if "max_tokens" in m.defaults else None,
        samples=2 if "samples" in m.defaults else None,
        max_steps=2 if "max_steps" in m.defaults else None,
    )


def check(answer, method: str) -> None:
    assert isinstance(answer.answer, bool) and 0.0 <= answer.p_yes <= 1.0
    cost = answer.method["cost"]
    assert cost["calls"] >= 1
    if load_method(method).retrieves:
        assert cost["retrievals"] >= 1 or method == "flare"  # flare searches only for a doubted sentence
    if method == "sc":
        assert len(answer.method["votes"]) == 2 and cost["generations"] == 2
    if method == "direct":
        assert cost["generations"] == 0 and cost["p_yes_reads"] == 1


@pytest.mark.slow
def test_the_methods_answer_with_the_small_model_in_process(gold_index):
    from sqa.models.registry import load_model

    lm = load_model(str(small_gguf()))
    for method in IN_PROCESS:
        reader = sqa.Reader(model=lm, method=method, settings=settings(method), index=gold_index.index_dir)
        a = reader.ask(QUESTION)
        check(a, method)
        assert a.method["cost"]["generated_tokens"] is not None  # llama.cpp counts its tokens


@pytest.mark.slow
def test_the_methods_answer_through_llama_cpps_server(llama_server, gold_index, monkeypatch):
    monkeypatch.setenv("SQA_OPENAI_TIMEOUT", "300")  # a few-shot prompt on a loaded 2-core machine
    for method in SERVED:
        reader = sqa.Reader(
            model=f"openai:{SMALL_MODEL}",
            base_url=llama_server,
            method=method,
            settings=settings(method),
            index=gold_index.index_dir,
        )
        check(reader.ask(QUESTION), method)
        reader.close()


@pytest.mark.slow
def test_sqa_ask_with_a_method_on_the_small_model(gold_index):
    small_gguf()
    args = [
        "--method",
        "rag",
        "--model",
        SMALL_MODEL,
        "--index-dir",
        gold_index.index_dir,
        "--set",
        f"max_tokens={SHORT}",
    ]
    r = run_sqa(["ask", *args, QUESTION, "--json"])
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["method"]["name"] == "rag" and got["method"]["cost"]["retrievals"] == 1 and len(got["paragraphs"]) == 3


@pytest.mark.slow
def test_methods_on_a_transformers_reader(tmp_path, gold_index):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_hf import build_tiny_checkpoint

    from sqa.models.registry import load_model

    lm = load_model(str(build_tiny_checkpoint(tmp_path / "tiny-qwen2")))
    for method in ("sc", "flare"):  # sampling; per-token logprobs (dragin: test_dragin.py)
        a = sqa.Reader(model=lm, method=method, settings=settings(method), index=gold_index.index_dir).ask(QUESTION)
        check(a, method)
