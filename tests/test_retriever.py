"""The official StrategyQA retrieval (cleaning, pooling), ours, and ``sqa eval retrieval``, on real
questions and a gold-paragraph index (``gold_index`` fixture in conftest.py)."""

from __future__ import annotations

import json

import pytest

from sqa.retriever import Retriever
from sqa.retriever.clean import content_words, official_clean, resolve_references
from sqa.retriever.fusion import pool_by_score, round_robin
from sqa.retriever.official import OfficialRetriever
from sqa.retriever.steps import StepRetriever
from sqa.retriever.stopwords import NLTK_ENGLISH_STOPWORDS
from sqa.strategyqa import questions_by_id
from sqa.types import Hit, Paragraph, SqaError, Step

QS = questions_by_id()
ALBANY = QS["29bf9aa61ed4124cd84c"]  # dev: "Will the Albany in Georgia reach a hundred thousand occupants ..."


def _hit(eid: str, score: float, rank: int = 1) -> Hit:
    return Hit(Paragraph(eid, eid.rsplit("-", 1)[0], "text"), score, rank)


def test_nltk_stopword_list():
    assert len(NLTK_ENGLISH_STOPWORDS) == len(set(NLTK_ENGLISH_STOPWORDS)) == 179
    assert {"will", "before", "wouldn't", "it's", "d"} <= set(NLTK_ENGLISH_STOPWORDS)


def test_official_cleaning_on_real_question():
    assert official_clean(ALBANY.question) == "Albany Georgia reach hundred thousand occupants one New York?"
    assert [official_clean(s) for s in ALBANY.decomposition] == [
        "population Albany, Georgia?",
        "population Albany, New York?",
        "difference 100,000 #1?",
        "difference 100,000 #2?",
        "#3 smaller #4?",
    ]
    # punctuation stays attached, so "it?" is not a stopword but "it" is
    assert official_clean("Is it? it is") == "it?"


def test_official_pooling_sorts_by_raw_score_and_dedupes():
    step1 = [_hit("A-1", 9.0, 1), _hit("B-1", 5.0, 2)]
    step2 = [_hit("C-1", 12.0, 1), _hit("A-1", 7.0, 2), _hit("D-1", 1.0, 3)]
    pooled = pool_by_score([step1, step2], k=3)
    assert [h.evidence_id for h in pooled] == ["C-1", "A-1", "B-1"]
    assert [h.rank for h in pooled] == [1, 2, 3] and pooled[1].score == 9.0


def test_official_ir_ora_d_on_real_question(gold_index):
    r = OfficialRetriever(gold_index)
    assert isinstance(r, Retriever)
    hits = r.retrieve(ALBANY.question, [Step(s) for s in ALBANY.decomposition])
    assert r.last_queries[4] == "#3 smaller #4?"
    # equals pooling by hand: every step's top 10 for its cleaned query, by raw score, deduplicated
    pool = sorted(
        (h for s in ALBANY.decomposition for h in gold_index.search(official_clean(s), 10)), key=lambda h: -h.score
    )
    expected = list(dict.fromkeys(h.evidence_id for h in pool))[:10]
    assert [h.evidence_id for h in hits] == expected
    assert "Albany, Georgia-1" in expected and "Albany, New York-2" in expected
    ir_q = r.retrieve(ALBANY.question, [])
    assert [h.evidence_id for h in ir_q] == [
        h.evidence_id for h in gold_index.search(official_clean(ALBANY.question), 10)
    ]


def test_content_words_and_reference_resolution():
    assert content_words("What's the population of Albany, Georgia?") == ["population", "Albany", "Georgia"]
    assert content_words("Is it? #1 Jay-Z's U.S. tour") == ["Jay-Z", "U.S", "tour"]
    prior = [("What is the population of Albany, Georgia?", None)]
    assert (
        resolve_references("What is the difference between 100,000 and #1?", prior)
        == "What is the difference between 100,000 and population Albany Georgia ?"
    )
    # "Where" is a stopword, so the unanswered step 2 contributes nothing
    assert (
        resolve_references("Is #1 more than #2?", [("Who won?", "75,000"), ("Where?", None)]) == "Is 75,000 more than ?"
    )
    assert resolve_references("Is #1 big?", [("Who won?", None)], unknown="") == "Is big?"
    assert resolve_references("Is #7 big?", []) == "Is big?"


def test_round_robin_interleaves_lists_whatever_their_raw_scores():
    a = [_hit("A-1", 50.0), _hit("A-2", 40.0), _hit("A-3", 30.0)]
    b = [_hit("B-1", 2.0), _hit("A-3", 1.0), _hit("B-3", 0.5)]
    fused = round_robin([a, b])
    # rank 1 of each list, then rank 2 (A-3 taken from b's rank 2 first? no: a's rank 2 is A-2), ...
    assert [h.evidence_id for h in fused] == ["A-1", "B-1", "A-2", "A-3", "B-3"]
    assert [h.rank for h in fused] == [1, 2, 3, 4, 5] and [h.score for h in fused] == [-1.0, -2.0, -3.0, -4.0, -5.0]
    assert [h.evidence_id for h in round_robin([a, b], k=2)] == ["A-1", "B-1"]


def test_the_resolver_puts_answers_in_place_and_keeps_or_explains_unanswered_references():
    prior = [("Who wrote Hamlet?", "Shakespeare"), ("What is the population of Albany, Georgia?", None)]
    assert resolve_references("Where is #1's grave?", prior) == "Where is Shakespeare's grave?"
    assert resolve_references("Is #2 larger than #1?", prior, unknown="keep") == "Is #2 larger than Shakespeare?"
    assert resolve_references("Is #2 larger?", prior) == "Is population Albany Georgia larger?"


def test_step_retriever_uses_answers_and_returns_unique_top_k(gold_index):
    r = StepRetriever(gold_index)
    assert isinstance(r, Retriever)
    steps = [Step(s) for s in ALBANY.decomposition]
    assert r.step_query(steps[2], steps[:2]) == "difference 100,000 population Albany Georgia"
    steps[0].answer = "75,000"
    assert r.step_query(steps[2], steps[:2]) == "difference 100,000 75,000"
    hits = r.retrieve(ALBANY.question, steps, k=10)
    ids = [h.evidence_id for h in hits]
    assert len(ids) == len(set(ids)) == 10 and [h.rank for h in hits] == list(range(1, 11))
    assert {"Albany, Georgia-1", "Albany, New York-2"} <= set(ids)
    one = r.retrieve_step(Step("What is the population of Albany, Georgia?"), [], k=3)
    assert len(one) == 3 and one[0].paragraph.title.startswith("Albany")
    assert len(r.retrieve(ALBANY.question, [], k=5)) == 5


def test_eval_retrieval_on_gold_index(gold_index, tmp_path):
    from sqa.api.retrieval import run_retrieval_eval
    from sqa.eval.retrieval import load_decompositions

    index_dir = gold_index.index_dir
    res = run_retrieval_eval(index_dir, "embedded", "dev", "gold", tmp_path / "gold.json")
    assert res["n"] == 229 and res["paragraphs"] == 9251
    official, ours = res["methods"]["official (IR-ORA-D)"]["Recall@10"], res["methods"]["step"]["Recall@10"]
    assert 0.8 < official < 0.95  # the Lucene reference on the gold paragraphs is 0.854 / 0.874
    assert ours > official
    assert json.loads((tmp_path / "gold.json").read_text())["methods"]["step"]["Recall@10"] == ours

    # a FILE of predicted decompositions: only its questions are scored
    f = tmp_path / "pred.jsonl"
    f.write_text(
        json.dumps(
            {
                "qid": ALBANY.qid,
                "decomposition": [
                    "What is the population of Albany, Georgia?",
                    "What is the population of Albany, New York?",
                ],
            }
        )
        + "\n\n"
    )
    res = run_retrieval_eval(index_dir, "embedded", "dev", str(f), tmp_path / "pred.json")
    assert res["n"] == 1 and "official (IR-D)" in res["methods"]
    assert res["methods"]["official (IR-D)"]["Recall@10"] == 1.0  # both IDs of annotator 1 retrieved
    f.write_text('{"qid": "x"}\n')
    with pytest.raises(SqaError, match="pred.jsonl:1"):
        load_decompositions(f)
    with pytest.raises(SqaError, match="no labelled questions"):
        run_retrieval_eval(index_dir, "embedded", "test", "question", tmp_path / "t.json")


@pytest.mark.slow
def test_minilm_rerank_reorders_candidates(gold_index):
    """Opt-in reranking (numpy MiniLM on CPU, no torch): same candidates, reordered by embedding similarity."""
    step = Step("What is the population of Albany, Georgia?")
    plain = StepRetriever(gold_index, candidates=8).retrieve_step(step, [], k=8)
    reranked = StepRetriever(gold_index, candidates=8, rerank=True, rerank_alpha=1.0, rerank_depth=8).retrieve_step(
        step, [], k=8
    )
    assert {h.evidence_id for h in reranked} == {h.evidence_id for h in plain}
    assert [h.rank for h in reranked] == list(range(1, 9))
    assert all(a.score >= b.score for a, b in zip(reranked, reranked[1:]))  # alpha=1: ordered by cosine
    assert reranked[0].paragraph.title == "Albany, Georgia"


def test_sqa_eval_retrieval_command(gold_index, tmp_path, capsys):
    from sqa.cli import main

    out = tmp_path / "q.json"
    rc = main(
        [
            "eval",
            "retrieval",
            "--split",
            "dev",
            "--decomposition",
            "question",
            "--index-dir",
            str(gold_index.index_dir),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "official (IR-Q)" in printed and "Recall@10" in printed
    res = json.loads(out.read_text())
    assert res["n"] == 229 and set(res["methods"]) == {"official (IR-Q)", "step"}
    assert (
        main(
            [
                "eval",
                "retrieval",
                "--decomposition",
                str(tmp_path / "missing.jsonl"),
                "--index-dir",
                str(gold_index.index_dir),
                "--out",
                str(out),
            ]
        )
        == 2
    )


def test_the_step_retriever_is_named_step_and_its_old_name_still_works(gold_index):
    """``make_retriever`` names the step retriever ``step`` (issue 33); ``ours``, its name before,
    still gives it, so old commands and files keep working; another name is one clear error."""
    from sqa.pipeline import RETRIEVERS, make_retriever
    from sqa.retriever.steps import StepRetriever
    from sqa.types import SqaError

    assert RETRIEVERS[0] == "step" and "ours" not in RETRIEVERS
    for name in ("step", "ours"):
        r = make_retriever(gold_index, name)
        assert isinstance(r, StepRetriever) and r.name == "step"
    assert isinstance(make_retriever(gold_index), StepRetriever)
    with pytest.raises(SqaError, match="unknown retriever 'mine'; use step, official, backend"):
        make_retriever(gold_index, "mine")
