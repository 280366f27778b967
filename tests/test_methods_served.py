"""Methods over a served model: a stand-in OpenAI-compatible server on 127.0.0.1 that counts the
requests (tests/helpers.py ``StandIn``), driven through ``sqa eval --method`` / ``sqa ask --method``
in a fresh process, as a user runs them."""

from __future__ import annotations

import json
import math

import pytest
from helpers import StandIn, one_error_line, run_sqa

import sqa

pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")

COT = " Hamsters are prey animals. So the answer is yes."


def served(server, method, out, *extra, limit=3, index=None, command="eval"):
    args = [command, "--method", method, "--model", "openai:fake-reader", "--base-url", server.url]
    if command == "eval":
        args += ["--split", "dev", "--limit", limit, "--out", out]
    if index is not None:
        args += ["--index-dir", index.index_dir]
    return run_sqa(args + list(extra))


def for_questions(server, limit: int) -> list[list[dict]]:
    """Per dev question (first ``limit``): the bodies of the generation requests whose prompt holds it."""
    qs = sqa.load_questions("dev", limit=limit)
    bodies = [b for _, b in server.requests if int(b.get("max_tokens") or 0) > 8]
    return [[b for b in bodies if q.question in json.dumps(b, ensure_ascii=False)] for q in qs]


def test_cot_one_generation_per_question_and_a_rerun_into_a_new_folder_sends_nothing(tmp_path):
    server = StandIn(reason=lambda text: COT)
    try:
        r = served(server, "cot", tmp_path / "a")
        assert r.returncode == 0, r.stderr[-2000:]
        per_question = for_questions(server, 3)
        assert [len(b) for b in per_question] == [1, 1, 1]
        assert all(b[0]["temperature"] == 0.0 for b in per_question)
        traces = [json.loads(x) for x in (tmp_path / "a" / "traces.jsonl").read_text().splitlines()]
        assert all(t["answer"] is True and t["method"]["cost"]["calls"] == 1 for t in traces)
        assert all(t["method"]["cost"]["generated_tokens"] == len(COT.split()) for t in traces)
        sent = len(server.requests)
        r = served(server, "cot", tmp_path / "b")
        assert r.returncode == 0, r.stderr[-2000:]
        assert len(server.requests) == sent  # every answer came from the response cache
    finally:
        server.close()


@pytest.mark.parametrize("n_choices, per_question", [("honour", 1), ("refuse", 5)])
def test_sc_sends_one_request_of_n_samples_or_k_seeded_requests(tmp_path, n_choices, per_question):
    server = StandIn(reason=lambda text: COT, n_choices=n_choices)
    try:
        r = served(server, "sc", tmp_path / "run", "--samples", "5", "--set", "seed=3", limit=2)
        assert r.returncode == 0, r.stderr[-2000:]
        for bodies in for_questions(server, 2):
            sampled = [b for b in bodies if b.get("temperature") == 0.7]
            assert len([b for b in sampled if n_choices == "honour" or int(b.get("n") or 1) == 1]) == per_question
            if n_choices == "honour":
                assert sampled[0]["n"] == 5 and sampled[0]["seed"] == 3
            else:  # the first question's n = 5 request was refused (400); then one request per seed
                assert sorted(b["seed"] for b in sampled if int(b.get("n") or 1) == 1) == [3, 4, 5, 6, 7]
        t = json.loads((tmp_path / "run" / "traces.jsonl").read_text().splitlines()[0])
        assert t["method"]["votes"] == [True] * 5 and t["p_yes"] == 1.0
    finally:
        server.close()


def test_iter_retgen_and_self_ask_stay_within_their_calls(tmp_path, gold_index):
    server = StandIn(reason=lambda text: COT)
    try:
        r = served(server, "iter-retgen", tmp_path / "irg", index=gold_index, limit=2)
        assert r.returncode == 0, r.stderr[-2000:]
        # T = 2 generations each (a second prompt equal to the first is answered by the response cache)
        assert [len(b) for b in for_questions(server, 2)] in ([2, 2], [2, 1], [1, 2])
        for line in (tmp_path / "irg" / "traces.jsonl").read_text().splitlines():
            cost = json.loads(line)["method"]["cost"]
            assert cost["retrievals"] == 2 and cost["generations"] == 2 and cost["calls"] == 2
    finally:
        server.close()
    server = StandIn(reason=lambda text: " Yes.\nFollow up: When was it made?\nIntermediate answer: long ago")
    try:
        r = served(server, "self-ask", tmp_path / "sa", index=gold_index, limit=2)
        assert r.returncode == 0, r.stderr[-2000:]
        assert [len(b) for b in for_questions(server, 2)] == [6, 6]
        assert all(b["stop"] == ["\nIntermediate answer:"] for b in for_questions(server, 2)[0][:5])
    finally:
        server.close()


def test_flare_retrieves_exactly_for_the_sentences_the_server_doubts(tmp_path, gold_index):
    sentences = [" Hamsters are small pets.", " Snakes eat hamsters.", " So the answer is yes."]

    def reason(text):
        tail = text.rsplit("Answer:", 1)[-1]
        return "".join(s for s in sentences if s.strip() not in tail)

    server = StandIn(reason=reason, reason_logprob=lambda w: math.log(0.05) if w == " Snakes" else -0.01)
    try:
        r = served(server, "flare", tmp_path / "run", index=gold_index, limit=1)
        assert r.returncode == 0, r.stderr[-2000:]
        t = json.loads((tmp_path / "run" / "traces.jsonl").read_text())
        queries = [c["query"] for c in t["method"]["calls"] if c["call"] == "search"]
        assert queries == ["eat hamsters."]
        assert t["method"]["text"] == "Hamsters are small pets. Snakes eat hamsters. So the answer is yes."
        assert all(b.get("logprobs") == 1 for b in for_questions(server, 1)[0])
    finally:
        server.close()


@pytest.mark.parametrize("method", ["flare", "dragin"])
def test_a_method_the_server_cannot_serve_is_one_line_and_nothing_is_written(tmp_path, gold_index, method):
    server = StandIn(completions="no-logprobs", chat="no-logprobs")
    try:
        line = one_error_line(served(server, method, tmp_path / "run", index=gold_index))
        need = "the log-probability of every generated token" if method == "flare" else "attention weights"
        assert f"--method {method} needs {need}, which openai:fake-reader does not give" in line
        assert not (tmp_path / "run").exists()
    finally:
        server.close()


def test_ask_with_a_method_shows_its_reasoning_and_cost(tmp_path):
    server = StandIn(reason=lambda text: COT)
    try:
        r = served(server, "cot", None, "Do hamsters provide food for any animals?", command="ask")
        assert r.returncode == 0, r.stderr[-2000:]
        assert "reasoning Hamsters are prey animals. So the answer is yes." in " ".join(r.stdout.split())
        assert "method cot, rule answer-is; 1 call" in " ".join(r.stdout.split())
        r = served(server, "cot", None, "Do hamsters provide food for any animals?", "--json", command="ask")
        got = json.loads(r.stdout)
        assert got["answer"] is True and got["method"]["cost"]["calls"] == 1
    finally:
        server.close()


def test_questions_go_to_the_server_at_once_at_its_measured_concurrency(tmp_path, monkeypatch):
    """40 questions over a stand-in that answers each request after 0.2 s, the model loaded first:
    at the measured concurrency against one request at a time, timed inside answer_batch (the
    reports written at the end are not the method's time; bench/results/methods_throughput.json)."""
    server = StandIn(reason=lambda text: COT, latency=0.2)
    monkeypatch.setenv("SQA_OPENAI_CACHE", "0")
    try:
        times, slots = {}, {}
        for conc in ("0", "1"):  # 0: measured at load
            monkeypatch.setenv("SQA_OPENAI_CONCURRENCY", conc)
            reader = sqa.Reader(model="openai:fake-reader", base_url=server.url, method="cot")
            slots[conc] = reader.pipeline.model.capabilities.concurrency
            run = sqa.evaluate(reader, "dev", limit=40, out=tmp_path / conc, progress=False)
            assert run.metrics["n"] == 40
            times[conc] = run.metrics["seconds_per_question"] * 40  # inside answer_batch: reports not counted
            reader.close()
        assert slots["1"] == 1 and slots["0"] >= 4
        assert times["1"] >= 40 * 0.2 and times["1"] / times["0"] >= 4, (times, slots)
    finally:
        server.close()


def test_several_methods_run_on_the_same_questions_and_are_compared(tmp_path, gold_index):
    pytest.importorskip("scipy", reason="scipy (the models extra) runs the comparison's McNemar test")
    server = StandIn(reason=lambda text: COT)
    try:
        r = served(server, "cot,rag", tmp_path / "m", index=gold_index, limit=4)
        assert r.returncode == 0, r.stderr[-2000:]
        compared = json.loads((tmp_path / "m" / "compare.json").read_text())
        assert [run["name"] for run in compared["runs"]] == ["cot", "rag"]
        cot, rag = compared["runs"]
        assert cot["cost"]["calls"] == 1.0 and cot["cost"]["retrievals"] == 0.0 and rag["cost"]["retrievals"] == 1.0
        shown = run_sqa(["compare", tmp_path / "m" / "cot", tmp_path / "m" / "rag"], env={"COLUMNS": "200"})
        assert "calls, generated tokens, retrievals, seconds" in " ".join(shown.stdout.split())
        for name in ("cot", "rag"):
            assert json.loads((tmp_path / "m" / name / "run.json").read_text())["options"]["method"] == name
        assert (tmp_path / "m" / "compare.html").exists()
    finally:
        server.close()


def test_evaluate_takes_a_method_or_a_reader_not_both(tmp_path):
    reader = sqa.Reader(model="openai:fake-reader", base_url="http://127.0.0.1:9/v1", method="cot")
    with pytest.raises(sqa.BadInput, match="give the method to the Reader"):
        sqa.evaluate(reader, "dev", method="rag", out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_sc_against_a_server_that_refuses_sampling_is_one_line_and_nothing_is_written(tmp_path):
    server = StandIn(sampling="refuse", reason=lambda text: COT)
    try:
        line = one_error_line(served(server, "sc", tmp_path / "run", limit=1))
        assert "--method sc needs sampling (temperature and seed), which the server of openai:fake-reader" in line
        assert "refuses" in line and not (tmp_path / "run").exists()
        assert server.question_requests == 0
        r = served(server, "cot", tmp_path / "cot", limit=1)  # greedy methods are not asked to sample
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        server.close()
