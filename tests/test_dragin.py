"""DRAGIN (``sqa.methods.dragin``): RIND picks the first sentence with a content word above θ, the
query takes the words the triggering words attend to, and on a real transformers reader (the tiny
seeded checkpoint of ``tests/tiny_hf.py``) the attention read-outs equal DRAGIN's formulas computed
here independently, and ``--method dragin`` answers through ``sqa.Reader``, ``sqa ask`` and
``sqa eval``; llama.cpp and served readers are refused in one line (tests/test_methods.py)."""

from __future__ import annotations

import json

import pytest
from helpers import run_sqa

import sqa
from sqa.methods.dragin import QUERY_WORDS, attention_query, real_word, rind, sentences
from sqa.types import AttendedGeneration

QUESTION = "Did Aristotle use a laptop?"


def test_rind_flags_the_first_sentence_with_a_content_word_above_theta():
    words = ("Aristotle", "lived", "long", "ago.", "The", "laptop", "is", "new.")
    gen = AttendedGeneration(
        "Aristotle lived long ago. The laptop is new.",
        words,
        attention=(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 1.0),
        entropy=(0.1, 0.1, 0.1, 0.1, 0.1, 2.0, 3.0, 0.1),
    )
    # sentence 1: RIND 0.25 * 0.1 * 4 = 0.1 everywhere; sentence 2: "laptop" 1/8 * 2 * 4 = 1.0,
    # "is" 5/8 * 3 * 4 = 7.5 but a stopword
    assert rind(gen, 0.5) == ("Aristotle lived long ago.", ["The", "laptop", "is", "new."], [False, True, False, False])
    assert rind(gen, 1.0) is None  # RIND must exceed θ
    assert sentences("A b. C d? E") == ["A b.", "C d?", "E"]
    assert real_word("Laptop,") and not real_word("the") and not real_word("--")


class _Tools:
    def __init__(self, words, rows):
        self.words, self.rows, self.texts = words, rows, []

    def word_attention(self, text):
        self.texts.append(text)
        return self.words, self.rows


def test_the_query_keeps_the_real_words_the_flagged_words_attend_to_in_text_order():
    before = "Did Aristotle use a laptop? Aristotle lived in Athens."
    sentence, flags = ["The", "laptop", "arrived"], [False, True, False]
    words = before.split() + sentence
    n = len(words)
    rows = [[0.0] * n for _ in range(n)]
    flagged = n - 2  # "laptop" in the sentence
    for j, w in enumerate(words):
        rows[flagged][j] = {"Athens.": 0.5, "Aristotle": 0.2, "use": 0.1, "a": 0.9, "laptop?": 0.3}.get(w, 0.0)
    tools = _Tools(words, rows)
    q = attention_query(tools, before, sentence, flags)
    assert tools.texts == [before + " The laptop arrived"]
    # every real word but the flagged one, in text order ("a", "Did", "in", "The" are stopwords or
    # unattended but real words stay: fewer than QUERY_WORDS here)
    assert q.split() == ["Aristotle", "use", "laptop?", "Aristotle", "lived", "Athens.", "arrived"]
    assert QUERY_WORDS == 25


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_hf import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny_hf") / "tiny-qwen2")


def test_attention_read_outs_equal_dragins_formulas(tiny_dir):
    import torch

    from sqa.models.registry import load_model

    lm = load_model(str(tiny_dir))
    prompt = "Question: Did Aristotle use a laptop?\nAnswer:"
    gen = lm.attend(prompt, 12)
    assert len(gen.words) == len(gen.attention) == len(gen.entropy) >= 1
    # generate_attn recomputed here: greedy ids, then the "max" solver over the last layer's
    # attention of the generated tokens alone, and each step's entropy
    enc = lm.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    with torch.inference_mode():
        out = lm.model.generate(
            **enc, do_sample=False, max_new_tokens=12, output_scores=True, return_dict_in_generate=True
        )
        new = out.sequences[0, enc["input_ids"].shape[1] :]
        assert lm.tokenizer.eos_token_id not in new.tolist()
        lm.model.set_attn_implementation("eager")
        att = lm.model(input_ids=new[None], output_attentions=True).attentions[-1][0]
    received = att.max(dim=1).values.mean(dim=0)
    assert sum(gen.attention) == pytest.approx(float(received.sum()), rel=1e-4)
    p = [torch.softmax(s[0].double(), -1) for s in out.scores]
    entropy = [float(-(q * torch.log(q + 1e-10)).sum()) for q in p]
    assert all(min(entropy) - 1e-6 <= e <= max(entropy) + 1e-6 for e in gen.entropy)  # word means of these
    # keep_real_words' rows: each word's attention to earlier words sums to 1 (0 for the first word)
    words, rows = lm.word_attention("Aristotle lived in Athens. The laptop was invented in 1980")
    assert words[0] == "Aristotle" and len(rows) == len(words) == 10
    assert [round(sum(r), 6) for r in rows] == [0.0] + [1.0] * 9
    assert all(v == 0.0 for r, row in enumerate(rows) for v in row[r:])


def test_dragin_answers_on_a_transformers_reader(tiny_dir, gold_index, tmp_path):
    from sqa.models.registry import load_model

    lm = load_model(str(tiny_dir))
    settings = sqa.methods.MethodSettings("dragin", max_tokens=12, theta=0.5)
    a = sqa.Reader(model=lm, method="dragin", settings=settings, index=gold_index.index_dir).ask(QUESTION)
    cost = a.method["cost"]
    assert isinstance(a.answer, bool) and cost["retrievals"] >= 1 and cost["generations"] >= 2
    assert a.method["answer_rule"] == "answer-is-else-no" and [c["call"] for c in a.method["calls"]][:2] == [
        "attend",
        "word_attention",
    ]
    common = ["--method", "dragin", "--model", tiny_dir, "--index-dir", gold_index.index_dir, "--set", "max_tokens=8"]
    r = run_sqa(["ask", *common, QUESTION, "--json"])
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["method"]["name"] == "dragin"
    r = run_sqa(["eval", *common, "--split", "dev", "--limit", "1", "--out", tmp_path / "run"])
    assert r.returncode == 0, r.stderr[-2000:]
    run = sqa.Run.open(tmp_path / "run")
    assert run.options["method"] == "dragin" and run.options["method_settings"]["theta"] == 1.3
