"""The method interface (sqa.methods): settings, answer rules, the counted toolbox, and each
shipped method's calls per question, on a scripted model and the real gold-paragraph index."""

from __future__ import annotations

import json
import math

import pytest

import sqa
from sqa.methods import MethodSettings, rules
from sqa.methods.registry import load_method
from sqa.models.base import ModelBase
from sqa.types import BadInput, Generation, ModelCapabilities


class MethodModel(ModelBase):
    """A scripted model for the methods: ``script(prompt, i, temperature, seed)`` gives the text of
    continuation i (default: a sentence and "So the answer is yes."), every token (a word) has
    log-probability ``token_logprob(word)`` (default -0.1), P(yes) is 0.7. Counts calls and tokens
    (words) and records every prompt."""

    name = "method-fake"

    def __init__(self, script=None, token_logprob=None, concurrency: int = 1):
        self.script = script or (lambda prompt, i, t, seed: "It is known. So the answer is yes.")
        self.token_logprob = token_logprob or (lambda word: -0.1)
        self.capabilities = ModelCapabilities(sampling=True, token_logprobs=True, concurrency=concurrency)
        self.calls: list[dict] = []
        self.tokens = {"prompt_tokens": 0, "completion_tokens": 0}

    def complete(self, prompts, max_tokens, stop=(), *, temperature=0.0, seed=0, n=1, logprobs=False):
        out = []
        for p in prompts:
            self.calls.append({"kind": "generate", "prompt": p, "n": n, "temperature": temperature, "seed": seed})
            self.tokens["prompt_tokens"] += len(p.split())
            gens = []
            for i in range(n):
                text = self.script(p, i, temperature, seed)
                cut = min((text.find(s) for s in stop if s and s in text), default=-1)
                text = text[:cut] if cut >= 0 else text
                words = [w + " " for w in text.split(" ")]
                self.tokens["completion_tokens"] += len(words)
                lps = tuple(self.token_logprob(w) for w in words) if logprobs else ()
                gens.append(Generation(text, tuple(words) if logprobs else (), lps))
            out.append(gens)
        return out

    def generate(self, prompts, max_tokens, stop=()):
        return [g[0].text for g in self.complete(prompts, max_tokens, stop)]

    def yes_probability(self, prompts):
        for p in prompts:
            self.calls.append({"kind": "p_yes", "prompt": p})
            self.tokens["prompt_tokens"] += len(p.split())
        return [0.7 for _ in prompts]

    def usage(self):
        return dict(self.tokens)

    def kinds(self, kind: str) -> list[dict]:
        return [c for c in self.calls if c["kind"] == kind]


def evaluate(model, method, out, index_dir=None, limit=3, **settings):
    reader = sqa.Reader(
        model=model, method=method, settings=MethodSettings(method, **settings) if settings else None, index=index_dir
    )
    return sqa.evaluate(reader, "dev", limit=limit, out=out, progress=False)


def traces(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]


# -- settings and rules ----------------------------------------------------------------------------
def test_settings_are_validated_once_and_refused_where_a_method_does_not_read_them():
    with pytest.raises(BadInput, match="--samples must be from 1 to 64"):
        MethodSettings("sc", samples=0)
    with pytest.raises(BadInput, match="--answer-rule 'maybe'"):
        MethodSettings("cot", answer_rule="maybe")
    with pytest.raises(BadInput, match="--theta must be above 0"):
        MethodSettings("flare", theta=-1.0)
    with pytest.raises(BadInput, match="--theta must be between 0 and 1 .exclusive. for --method flare"):
        MethodSettings("flare", theta=1.5).resolve(load_method("flare"))
    assert MethodSettings("dragin", theta=1.5).resolve(load_method("dragin"))["theta"] == 1.5
    with pytest.raises(BadInput, match="--samples does not apply to --method cot"):
        MethodSettings("cot", samples=5).resolve(load_method("cot"))
    with pytest.raises(BadInput, match="--prompt 'nope'"):
        MethodSettings("cot", prompt="nope").resolve(load_method("cot"))
    resolved = MethodSettings("sc", samples=3).resolve(load_method("sc"))
    assert resolved == {
        "method": "sc",
        "prompt": "wei",
        "answer_rule": "answer-is",
        "samples": 3,
        "temperature": 0.7,
        "seed": 0,
        "max_tokens": 256,
    }


def test_unknown_method_and_a_class_that_is_no_method_are_one_line_each(tmp_path, monkeypatch):
    with pytest.raises(BadInput, match="unknown method 'nope'; use one of direct, cot"):
        load_method("nope")
    (tmp_path / "not_a_method.py").write_text("class Thing:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInput, match="not a subclass of sqa.methods.Method"):
        load_method("not_a_method:Thing")
    with pytest.raises(BadInput, match="cannot import module 'no_such_module'"):
        load_method("no_such_module:X")


@pytest.mark.parametrize(
    "text, answer_is, else_no",
    [
        ("Hamsters are prey. So the answer is yes.", True, (True, True)),
        ("So the answer is: No.", False, (False, True)),
        ("So the answer is: yes.", True, (False, True)),  # DRAGIN skips one character: ": y" is not "yes"
        ("The answer is yes.", True, (False, False)),  # DRAGIN's find is case-sensitive
        ("So the final answer is: Yes", True, (False, False)),  # DRAGIN looks for "the answer is" only
        ('so the answer is "yes"', True, (False, True)),
        ("I cannot tell.", None, (False, False)),
        ("So the answer is maybe.", None, (False, True)),
    ],
)
def test_answer_rules_read_what_they_say(text, answer_is, else_no):
    assert rules.answer_is(text) is answer_is
    assert rules.answer_is_else_no(text) == else_no


def test_forced_reads_after_the_reasoning_without_its_stated_answer():
    assert rules.forced_prompt("Q: x\nA:", " It is so. So the answer is no.") == "Q: x\nA: It is so. So the answer is"
    assert rules.forced_prompt("Q: x\nA:", " It is so.") == "Q: x\nA: It is so. So the answer is"


# -- the methods' calls ----------------------------------------------------------------------------
def test_cot_one_generation_per_question_and_a_run_that_records_method_settings_and_cost(tmp_path):
    m = MethodModel()
    run = evaluate(m, "cot", tmp_path / "run")
    assert len(m.kinds("generate")) == 3 and not m.kinds("p_yes")
    assert all(c["prompt"].rstrip().endswith("A:") and c["temperature"] == 0.0 for c in m.calls)
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert recorded["options"]["method"] == "cot"
    assert recorded["options"]["method_settings"] == {
        "method": "cot",
        "prompt": "wei",
        "answer_rule": "answer-is",
        "max_tokens": 256,
    }
    t = traces(tmp_path / "run")
    assert [r["answer"] for r in t] == [True] * 3 and all(r["p_yes"] == 1.0 for r in t)
    cost = t[0]["method"]["cost"]
    assert cost["calls"] == 1 and cost["generations"] == 1 and cost["retrievals"] == 0
    assert cost["generated_tokens"] == len("It is known. So the answer is yes.".split())
    assert cost["prompt_tokens"] == len(m.calls[0]["prompt"].split())
    method = run.metrics["method"]
    assert method["cost_per_question"]["calls"] == 1.0 and method["unread_outputs"] == 0
    assert "| cost per question | 1.0 calls" in (tmp_path / "run" / "report.md").read_text()
    page = (tmp_path / "run" / "report.html").read_text()
    assert "cost per question" in page and "cot, answer-is" in page and "1.0 calls" in page
    assert run.metrics["answering"] == "zero-shot" and run.metrics["calibrated"] is False


def test_an_unread_output_is_counted_and_answered_by_the_forced_read_out_never_silently_no(tmp_path):
    m = MethodModel(script=lambda p, i, t, s: "Nobody knows that.")
    run = evaluate(m, "cot", tmp_path / "run", limit=2)
    assert len(m.kinds("p_yes")) == 2
    assert m.kinds("p_yes")[0]["prompt"].endswith("Nobody knows that. So the answer is")
    assert [r["answer"] for r in traces(tmp_path / "run")] == [True, True]  # P(yes) 0.7
    assert run.metrics["method"]["unread_outputs"] == 2 and run.metrics["method"]["unread_questions"] == 2
    # DRAGIN's rule scores the same outputs "no", and says it could not read them
    run = evaluate(
        MethodModel(script=lambda p, i, t, s: "Nobody knows that."),
        "cot",
        tmp_path / "dragin",
        limit=2,
        answer_rule="answer-is-else-no",
    )
    assert [r["answer"] for r in traces(tmp_path / "dragin")] == [False, False]
    assert run.metrics["method"]["unread_outputs"] == 2


def test_sc_asks_for_k_samples_in_one_call_and_votes(tmp_path):
    answers = ["yes", "no", "yes", "yes", "no"]
    m = MethodModel(script=lambda p, i, t, s: f"Path {i}. So the answer is {answers[i]}.")
    evaluate(m, "sc", tmp_path / "run", limit=2, samples=5, seed=7)
    gens = m.kinds("generate")
    assert len(gens) == 2 and all(c["n"] == 5 and c["temperature"] == 0.7 and c["seed"] == 7 for c in gens)
    t = traces(tmp_path / "run")
    assert t[0]["answer"] is True and t[0]["p_yes"] == pytest.approx(0.6)
    assert t[0]["method"]["votes"] == [True, False, True, True, False]
    assert t[0]["method"]["cost"]["generations"] == 5 and t[0]["method"]["cost"]["calls"] == 1


def test_iter_retgen_t_generations_and_t_retrievals_with_the_previous_generation_in_the_query(tmp_path, gold_index):
    m = MethodModel(script=lambda p, i, t, s: "Hamsters are eaten by snakes. So the answer is yes.")
    evaluate(m, "iter-retgen", tmp_path / "run", index_dir=gold_index.index_dir, limit=2, iterations=3)
    t = traces(tmp_path / "run")
    assert len(m.kinds("generate")) == 6
    cost = t[0]["method"]["cost"]
    assert cost["generations"] == 3 and cost["retrievals"] == 3
    queries = [c["query"] for c in t[0]["method"]["calls"] if c["call"] == "search"]
    assert (
        queries[0] == t[0]["question"]
        and queries[1] == f"{t[0]['question']} Hamsters are eaten by snakes. So the answer is yes."
    )
    assert all(len(c["evidence"]) == 5 for c in t[0]["method"]["calls"] if c["call"] == "search")
    assert 1 <= len(t[0]["paragraphs"]) <= 10
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["Recall@10"] is not None


def test_rag_retrieves_once_with_the_question_and_reads_the_paragraphs(tmp_path, gold_index):
    m = MethodModel()
    evaluate(m, "rag", tmp_path / "run", index_dir=gold_index.index_dir, limit=1)
    t = traces(tmp_path / "run")[0]
    hits = gold_index.search(t["question"], 3)
    assert t["paragraphs"] == [h.evidence_id for h in hits]
    assert all(" ".join(h.text.split())[:60] in m.calls[0]["prompt"] for h in hits)


def test_self_ask_asks_at_most_five_follow_ups_then_the_final_answer(tmp_path, gold_index):
    def script(prompt, i, t, seed):
        if prompt.endswith("So the final answer is:"):
            return " No"
        return (
            " Yes.\nFollow up: When was the laptop invented?"
            if prompt.endswith("needed here:")
            else "\nFollow up: When did Aristotle live?"
        )

    m = MethodModel(script=script)
    evaluate(m, "self-ask", tmp_path / "run", index_dir=gold_index.index_dir, limit=1)
    t = traces(tmp_path / "run")[0]
    assert len(m.kinds("generate")) == 6 and t["method"]["cost"]["retrievals"] == 5
    assert t["answer"] is False and t["method"]["read"] is True
    assert "Intermediate answer:" in m.kinds("generate")[1]["prompt"]
    assert [s["question"] for s in t["steps"]][:2] == ["When was the laptop invented?", "When did Aristotle live?"]


def test_flare_retrieves_exactly_for_the_sentences_with_a_token_below_theta(tmp_path, gold_index):
    sentences = ["Hamsters are small.", "Snakes eat hamsters.", "So the answer is yes."]

    def script(prompt, i, t, seed):
        done = sum(s in prompt.rsplit("Answer:", 1)[-1] for s in sentences)
        return " ".join(sentences[done:])

    unsure = {"Snakes "}  # the one token FLARE doubts (p = 0.1 < theta 0.4)
    m = MethodModel(script=script, token_logprob=lambda w: math.log(0.1) if w in unsure else -0.05)
    evaluate(m, "flare", tmp_path / "run", index_dir=gold_index.index_dir, limit=1)
    t = traces(tmp_path / "run")[0]
    searches = [c for c in t["method"]["calls"] if c["call"] == "search"]
    assert [c["query"] for c in searches] == ["eat hamsters."]  # the masked query: the doubted token left out
    assert t["method"]["cost"]["generations"] == 4  # 3 look-aheads + 1 regenerated sentence
    assert t["answer"] is True


def test_a_method_that_needs_what_the_model_lacks_is_refused_before_anything_is_written(tmp_path, gold_index):
    m = MethodModel()
    m.capabilities = ModelCapabilities()
    with pytest.raises(BadInput, match="--method sc needs sampling"):
        evaluate(m, "sc", tmp_path / "sc")
    with pytest.raises(BadInput, match="--method flare needs the log-probability of every generated token"):
        evaluate(m, "flare", tmp_path / "flare", index_dir=gold_index.index_dir)
    with pytest.raises(BadInput, match="--method dragin needs attention weights"):
        evaluate(m, "dragin", tmp_path / "dragin", index_dir=gold_index.index_dir)
    assert not any((tmp_path / n).exists() for n in ("sc", "flare", "dragin"))


def test_questions_are_answered_concurrently_up_to_the_models_concurrency_and_reported_in_order(tmp_path):
    import threading
    import time

    live, most = [0], [0]
    lock = threading.Lock()

    def script(prompt, i, t, seed):
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])
        time.sleep(0.2)
        with lock:
            live[0] -= 1
        return "So the answer is no."

    m = MethodModel(script=script, concurrency=4)
    started = time.perf_counter()
    evaluate(m, "cot", tmp_path / "run", limit=8)
    assert most[0] == 4 and time.perf_counter() - started < 8 * 0.2
    qids = [q.qid for q in sqa.load_questions("dev", limit=8)]
    assert [r["qid"] for r in traces(tmp_path / "run")] == qids


# -- your own method (docs/methods.md) -------------------------------------------------------------
def docs_method_source() -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "methods.md").read_text()
    block = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(block.strip().splitlines()) <= 40
    return block


def test_docs_own_method_runs_through_sqa_evaluate_and_sqa_eval(tmp_path, monkeypatch, gold_index):
    from helpers import StandIn, run_sqa

    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    (tmp_path / "my_method.py").write_text(docs_method_source())
    monkeypatch.chdir(tmp_path)
    m = MethodModel()
    run = evaluate(m, "my_method:TopParagraphs", tmp_path / "py", index_dir=gold_index.index_dir, limit=2)
    assert len(m.kinds("p_yes")) == 2 and not m.kinds("generate")
    assert run.metrics["method"]["name"] == "top-paragraphs"
    t = traces(tmp_path / "py")
    assert len(t[0]["paragraphs"]) == 2 and t[0]["method"]["cost"]["retrievals"] == 1
    server = StandIn()
    try:
        r = run_sqa(
            [
                "eval",
                "--method",
                "my_method:TopParagraphs",
                "--model",
                "openai:fake-reader",
                "--base-url",
                server.url,
                "--split",
                "dev",
                "--limit",
                "3",
                "-k",
                "3",
                "--index-dir",
                gold_index.index_dir,
                "--out",
                tmp_path / "cli",
            ],
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        assert server.question_requests == 3
        options = json.loads((tmp_path / "cli" / "run.json").read_text())["options"]
        assert options["method"] == "my_method:TopParagraphs"
        assert options["method_settings"] == {"method": "top-paragraphs", "k": 3}
        assert all(len(r["paragraphs"]) == 3 for r in traces(tmp_path / "cli"))
    finally:
        server.close()


def test_a_protocol_pins_a_papers_settings_for_the_methods_that_read_them(tmp_path):
    m = MethodModel()
    reader = sqa.Reader(model=m, method="cot")
    run = sqa.evaluate(reader, protocol="dragin-1000", limit=2, out=tmp_path / "cot", progress=False)
    recorded = json.loads((tmp_path / "cot" / "run.json").read_text())["options"]
    assert recorded["protocol"] == "dragin-1000" and recorded["split"] == "train"
    assert recorded["method_settings"] == {
        "method": "cot",
        "prompt": "dragin",
        "answer_rule": "answer-is-else-no",
        "max_tokens": 256,
    }  # cot reads no top-k: the pinned k = 3 does not apply
    assert m.calls[0]["prompt"].endswith("Question: " + sqa.load_questions("train", limit=1)[0].question + "\nAnswer:")
    assert run.metrics["question_set"]["settings"]["k"] == 3
    given = sqa.Reader(model=m, method="cot", settings=MethodSettings("cot", answer_rule="answer-is"))
    with pytest.raises(BadInput, match="--protocol dragin-1000 pins --answer-rule answer-is-else-no"):
        sqa.evaluate(given, protocol="dragin-1000", limit=2, out=tmp_path / "clash", progress=False)
    assert not (tmp_path / "clash").exists()


def test_a_protocol_pins_the_settings_of_a_reader_that_has_answered_already(tmp_path):
    m = MethodModel()
    reader = sqa.Reader(model=m, method="cot")
    reader.ask("Is the sun a star?")  # the reader is built with the Wei prompt
    sqa.evaluate(reader, protocol="dragin-1000", limit=1, out=tmp_path / "run", progress=False)
    assert m.calls[-1]["prompt"].startswith("Question: ")  # DRAGIN's wording, not Table 25's "Q: "
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["options"]["method_settings"]
    assert recorded["prompt"] == "dragin" and recorded["answer_rule"] == "answer-is-else-no"


def test_a_methods_exemplar_questions_in_the_run_are_marked_as_demonstrations(tmp_path):
    brooke = "3ca5966b88394e62271e"  # dev question 24 is Table 25's "Could Brooke Shields succeed at ...?"
    run = evaluate(MethodModel(script=lambda p, i, t, s: "So the answer is yes."), "cot", tmp_path / "cot", limit=24)
    marked = [r["qid"] for r in traces(tmp_path / "cot") if r["eval"].get("demonstration")]
    assert marked == [brooke] and run.metrics["demonstrations"]["qids"] == [brooke]
    assert run.metrics["demonstrations"]["without_demonstrations"]["n"] == 23
    assert "a method's exemplars" in run.metrics["demonstrations"]["note"]
    evaluate(MethodModel(script=lambda p, i, t, s: "So the answer is yes."), "direct", tmp_path / "direct", limit=24)
    assert [r["qid"] for r in traces(tmp_path / "direct") if r["eval"].get("demonstration")] == [brooke]
    assert load_method("self-ask").demonstrations({})[0] == "Who lived longer, Muhammad Ali or Alan Turing?"
    assert (
        load_method("iter-retgen").demonstrations({})[2]
        == "Hydrogen's atomic number squared exceeds number of Spice Girls?"
    )


def test_bigbench_2290_reads_yes_against_no_after_q_a_on_the_train_questions(tmp_path):
    m = MethodModel()
    run = sqa.evaluate(
        sqa.Reader(model=m, method="bigbench"), protocol="bigbench-2290", limit=2, out=tmp_path / "bb", progress=False
    )
    first_two = sqa.load_questions("train", limit=2)
    assert [c["prompt"] for c in m.calls] == [f"Q: {q.question}\nA:" for q in first_two]  # zero-shot: no exemplars
    assert [c["kind"] for c in m.calls] == ["p_yes", "p_yes"]
    recorded = json.loads((tmp_path / "bb" / "run.json").read_text())["options"]
    assert recorded["protocol"] == "bigbench-2290" and recorded["split"] == "train" and recorded["method"] == "bigbench"
    assert run.metrics["question_set"]["method"] == "bigbench" and run.metrics["question_set"]["cut_to"] == 2
    with pytest.raises(BadInput, match="--protocol bigbench-2290 is --method bigbench: add --method bigbench"):
        sqa.evaluate(
            sqa.Reader(model=m, method="cot"), protocol="bigbench-2290", limit=2, out=tmp_path / "x", progress=False
        )
    assert not (tmp_path / "x").exists()
