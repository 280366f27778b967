"""Accuracy at coverage in metrics.json and report.md (issue 40), and report.md's columns: only
those defined for the run (no steps for a reader without them, no Recall@10 without annotations or
retrieval)."""

from __future__ import annotations

import json

import pytest
from helpers import FakeReader, fake_p_yes

from sqa.eval.coverage import accuracy_at, coverage_metrics, ranked_correct
from sqa.eval.runner import EvalOptions, run_eval
from sqa.strategyqa import load_questions
from sqa.trace import ReasoningResult


def test_accuracy_at_coverage_by_hand():
    # confidences 0.9 (right), 0.8 (wrong), 0.7 (right), 0.6 (right), 0.55 (wrong): ranked r w r r w
    rows = [
        {"confidence": c, "correct": k} for c, k in ((0.6, True), (0.9, True), (0.55, False), (0.8, False), (0.7, True))
    ] + [{"confidence": 1.0, "correct": None}]
    assert ranked_correct(rows) == [True, False, True, True, False]
    assert accuracy_at(ranked_correct(rows), 0.5) == {"coverage": 0.5, "n": 3, "Accuracy": pytest.approx(2 / 3)}
    assert accuracy_at(ranked_correct(rows), 0.8) == {"coverage": 0.8, "n": 4, "Accuracy": 0.75}
    assert accuracy_at(ranked_correct(rows), 1.0)["Accuracy"] == pytest.approx(3 / 5)
    m = coverage_metrics(rows)
    assert [a["n"] for a in m["at"]] == [3, 4, 5] and len(m["curve"]) == 20 and m["calibrated"]
    assert m["curve"][0] == {"coverage": 0.05, "n": 1, "Accuracy": 1.0}
    assert coverage_metrics([{"confidence": 0.5, "correct": None}]) is None
    with pytest.raises(ValueError):
        accuracy_at([True], 0)


class FactsLikeReader(FakeReader):
    """The facts reader's shape: no steps, the model's own P(yes) (``calibrated`` False), and (with
    ``retrieve`` False) no paragraphs."""

    def __init__(self, pool=None, retrieve=True):
        super().__init__(pool)
        self.retrieve = retrieve

    def answer_batch(self, questions, decomposition="question", on_result=None):
        out = []
        for q in questions:
            p = fake_p_yes(q.qid)
            out.append(
                ReasoningResult(
                    question=q.question,
                    steps=[],
                    answer=p >= 0.5,
                    p_yes=p,
                    qid=q.qid,
                    paragraphs=["x-1"] if self.retrieve else [],
                    calibrated=False,
                )
            )
            on_result(out[-1])
        return out


@pytest.mark.parametrize("retrieve", [True, False])
def test_metrics_and_report_of_a_reader_without_steps(tmp_path, retrieve):
    opts = EvalOptions(
        split="dev", model="fake", limit=40, reader="facts", decomposition="question", retrieval=retrieve
    )
    run_eval(opts, tmp_path, lambda pool: FactsLikeReader(pool, retrieve))
    qs = load_questions("dev")[:40]
    m = json.loads((tmp_path / "metrics.json").read_text())
    cov = m["accuracy_at_coverage"]
    ranked = sorted(qs, key=lambda q: -max(fake_p_yes(q.qid), 1 - fake_p_yes(q.qid)))
    right = [(fake_p_yes(q.qid) >= 0.5) == q.answer for q in ranked]
    assert [a["Accuracy"] for a in cov["at"]] == pytest.approx(
        [sum(right[:20]) / 20, sum(right[:32]) / 32, sum(right) / 40]
    )
    assert cov["at"][2]["Accuracy"] == pytest.approx(m["Accuracy"]) and cov["calibrated"] is False
    md = (tmp_path / "report.md").read_text()
    assert "| Accuracy at 50% coverage (the 20 most confident, the model's own P(yes), uncalibrated) |" in md
    header = next(line for line in md.splitlines() if line.startswith("| qid |"))
    assert header == "| qid | question | gold | predicted | confidence |" + (" Recall@10 |" if retrieve else "")
    assert ("| Recall@10 |" in md) == retrieve
    assert "SARI" not in md  # no decomposition written: SARI would only score the question against itself
