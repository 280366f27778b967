"""The official StrategyQA metrics on real questions, with expected values worked out by hand."""

from __future__ import annotations

import json

import pytest

from sqa.eval.leaderboard import load_predictions, score_predictions, write_predictions
from sqa.eval.metrics import accuracy, annotator_evidence, mean_recall_at_k, recall_at_k
from sqa.eval.sari import decomposition_sari, sari_score, sqa_tokenize
from sqa.strategyqa import load_questions, questions_by_id
from sqa.types import Prediction, SqaError

QS = questions_by_id()
ALBANY = QS["29bf9aa61ed4124cd84c"]  # dev; annotators {GA-1, NY-2}, {GA-35, NY-2}, {GA-1, NY-2}
ASL = QS["f95956c13e22f073310a"]  # train; annotators {ASL-40}, {ASL-1, ASL-29}, {} (no_evidence only)
NO_EVIDENCE = QS["90e003dc429517ba3ebc"]  # the one train question where no annotator gave an ID
TEST_Q = load_questions("test")[0]  # hidden labels


def test_annotator_evidence_ignores_tags():
    assert annotator_evidence(ASL.evidence) == [
        {"American Sign Language-40"},
        {"American Sign Language-1", "American Sign Language-29"},
        set(),
    ]
    assert annotator_evidence(ALBANY.evidence)[1] == {"Albany, Georgia-35", "Albany, New York-2"}


def test_recall_max_over_annotators_and_empty_annotator():
    # annotator 2 sees 1 of 2 IDs; annotator 1 has 0 of 1; annotator 3 has no IDs -> 0
    assert recall_at_k(ASL.evidence, ["American Sign Language-1", "Deacon-1"]) == 0.5
    assert recall_at_k(ASL.evidence, ["American Sign Language-40"]) == 1.0
    assert recall_at_k(ALBANY.evidence, ["Albany, New York-2"]) == 0.5
    assert recall_at_k(ALBANY.evidence, ["Albany, Georgia-35", "Albany, New York-2"]) == 1.0
    assert recall_at_k(NO_EVIDENCE.evidence, ["anything-1"]) == 0.0


def test_recall_empty_prediction_and_cutoff_at_10():
    assert recall_at_k(ALBANY.evidence, []) == 0.0
    filler = [f"Filler-{i}" for i in range(9)]
    # rank 10 counts, rank 11 does not
    assert recall_at_k(ASL.evidence, filler + ["American Sign Language-1", "American Sign Language-29"]) == 0.5
    assert recall_at_k(ASL.evidence, filler + ["Filler-9", "American Sign Language-40"]) == 0.0
    # duplicates in the prediction do not count twice
    assert recall_at_k(ALBANY.evidence, ["Albany, New York-2"] * 5) == 0.5


def test_mean_recall_and_accuracy():
    preds = {ALBANY.qid: ["Albany, New York-2"], ASL.qid: ["American Sign Language-40"]}
    assert mean_recall_at_k([ALBANY, ASL, NO_EVIDENCE], preds) == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert accuracy([(True, True), (False, True), (False, False), (True, False)]) == 0.5


def test_sqa_tokenize():
    assert sqa_tokenize("Is #1 greater than 5?  Yes?") == ["Is", "#1", "greater", "than", "5", "?", "Yes", "?"]


def test_sari_exact_match_is_one():
    assert sari_score(["a", "b"], ["a", "c"], [["a", "c"]]).sari == pytest.approx(1.0)


def test_sari_empty_prediction_by_hand():
    # n=1: keep 0 (nothing kept, "a" should be), del 1/2 ("a" wrongly deleted), add 0 ("c" missing)
    # n=2: keep 1 (0/0), del 1 ("a b" rightly deleted), add 0; n=3,4: all 0/0 -> 1
    s = sari_score(["a", "b"], [], [["a", "c"]])
    assert (s.keep, s.delete, s.add) == pytest.approx((0.75, 0.875, 0.5))
    assert s.sari == pytest.approx(2.125 / 3)


def test_sari_copying_the_question_by_hand():
    # source [Is a cat big ?], prediction = source, target [How big is a cat ?]
    # keep: n=1 F1(4/5, 1)=8/9, n=2 F1(1/4, 1)=2/5, n=3,4 precision 0 -> 0; delete 1 (nothing deleted,
    # 0/0); add 0 (nothing added, target adds "How", "is").  SARI = (29/90 + 1 + 0) / 3 = 119/270
    s = sari_score(sqa_tokenize("Is a cat big?"), sqa_tokenize("Is a cat big?"), [sqa_tokenize("How big is a cat?")])
    assert s.keep == pytest.approx(29 / 90)
    assert (s.delete, s.add) == (1.0, 0.0)
    assert s.sari == pytest.approx(119 / 270)
    assert decomposition_sari("Is a cat big?", ["Is a cat big?"], ["How big is a cat?"]) == pytest.approx(119 / 270)


def test_sari_two_targets_weighting_by_hand():
    # targets [a b] and [a]: unigram weights a:1, b:1/2; bigrams only from the non-empty target.
    # n=1 keep F1(1, 1/1.5)=0.8, del 0.5/1, add 1;  n=2 keep 0, del 0, add 1;  n=3,4 all 1.
    s = sari_score(["a", "b"], ["a"], [["a", "b"], ["a"]])
    assert (s.keep, s.delete, s.add) == pytest.approx((0.7, 0.625, 1.0))
    assert s.sari == pytest.approx(0.775)


def test_sari_gold_decomposition_against_itself_on_real_question():
    assert decomposition_sari(ALBANY.question, ALBANY.decomposition, ALBANY.decomposition) == pytest.approx(1.0)
    # the question itself as a one-step decomposition scores well below 1
    assert decomposition_sari(ALBANY.question, [ALBANY.question], ALBANY.decomposition) < 0.5


def test_leaderboard_roundtrip_and_score(tmp_path):
    preds = [
        Prediction(
            ALBANY.qid,
            answer=False,
            confidence=0.9,
            decomposition=list(ALBANY.decomposition),
            paragraphs=["Albany, New York-2"],
        ),
        Prediction(ASL.qid, answer=False, confidence=0.6, decomposition=[], paragraphs=["American Sign Language-40"]),
    ]
    path = write_predictions(preds, tmp_path / "p.json")
    data = load_predictions(path)
    assert data[ALBANY.qid] == {
        "answer": False,
        "decomposition": list(ALBANY.decomposition),
        "paragraphs": ["Albany, New York-2"],
    }
    scores = score_predictions(data, [ALBANY, ASL])
    assert scores["Accuracy"] == 0.5  # Albany is False (right), ASL is True (wrong)
    assert scores["Recall@10"] == pytest.approx(0.75)
    assert scores["SARI"] == pytest.approx((1.0 + decomposition_sari(ASL.question, [], ASL.decomposition)) / 2)
    assert scores["n"] == 2


def test_leaderboard_only_present_keys_and_errors(tmp_path):
    only_answers = {ALBANY.qid: {"answer": False}}
    assert score_predictions(only_answers, [ALBANY]) == {"Accuracy": 1.0, "n": 1}
    with pytest.raises(SqaError, match="no prediction"):
        score_predictions(only_answers, [ALBANY, ASL])
    assert score_predictions(only_answers, [ALBANY, ASL], allow_missing=True)["n"] == 1
    with pytest.raises(SqaError, match="not in the gold set"):
        score_predictions(only_answers, [ASL])
    with pytest.raises(SqaError, match="same things"):
        score_predictions({ALBANY.qid: {"answer": False}, ASL.qid: {"paragraphs": []}}, [ALBANY, ASL])
    with pytest.raises(SqaError, match="true or false"):
        score_predictions({ALBANY.qid: {"answer": "no"}}, [ALBANY])
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": ')
    with pytest.raises(SqaError, match="bad.json:1"):
        load_predictions(bad)
    with pytest.raises(SqaError, match="no labels"):
        score_predictions({TEST_Q.qid: {"answer": True}}, [TEST_Q])
    written = write_predictions({ALBANY.qid: {"paragraphs": ["Albany, New York-2"]}}, tmp_path / "o.json")
    assert json.loads(written.read_text(encoding="utf-8")) == {ALBANY.qid: {"paragraphs": ["Albany, New York-2"]}}
    assert load_predictions(written) == {ALBANY.qid: {"paragraphs": ["Albany, New York-2"]}}
