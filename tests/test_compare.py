"""``sqa compare`` (issue 40): paired statistics of runs on the questions they share, checked against
hand-computed cases and against the recorded dev runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import one_error_line, run_sqa

from sqa.eval.compare import compare_runs, mcnemar_exact
from sqa.eval.metrics import annotator_evidence, recall_at_k
from sqa.strategyqa import load_questions
from sqa.types import SqaError

RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "runs"
# McNemar's and Wilcoxon's tests are scipy's (the models extra; a lean `pip install -e .` lacks it)
pytest.importorskip("scipy", reason="scipy (the models extra) runs sqa compare's McNemar and Wilcoxon tests")


def write_run(
    path: Path,
    split: str,
    answers: dict[str, bool],
    paragraphs: dict[str, list[str]] | None = None,
    preset: str = "facts",
    retrieval: bool = True,
) -> Path:
    """A run folder as ``sqa eval`` writes it: run.json and one traces.jsonl line per answered question."""
    path.mkdir(parents=True)
    (path / "run.json").write_text(
        json.dumps({"format": 2, "options": {"split": split, "preset": preset, "retrieval": retrieval}})
    )
    by_id = {q.qid: q for q in load_questions(split)}
    with open(path / "traces.jsonl", "w") as f:
        f.writelines(
            json.dumps(
                {
                    "qid": qid,
                    "question": by_id[qid].question,
                    "answer": answer,
                    "p_yes": 0.8 if answer else 0.2,
                    "steps": [],
                    "paragraphs": (paragraphs or {}).get(qid, []),
                    "eval": {"gold": by_id[qid].answer},
                }
            )
            + "\n"
            for qid, answer in answers.items()
        )
    return path


def test_mcnemar_exact_by_hand():
    # b=7, c=2: 2 * P(X <= 2), X ~ Binomial(9, 0.5) = 2 * (1 + 9 + 36) / 512
    assert mcnemar_exact(7, 2) == pytest.approx(2 * (1 + 9 + 36) / 2**9) == pytest.approx(0.1797, abs=1e-4)
    assert mcnemar_exact(2, 7) == mcnemar_exact(7, 2)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0


def test_a_hand_built_pair(tmp_path):
    """20 dev questions: both right on 8, only A on 7, only B on 2, both wrong on 3."""
    qs = load_questions("dev")[:20]
    kinds = ["both"] * 8 + ["a"] * 7 + ["b"] * 2 + ["none"] * 3
    right = {"both": (True, True), "a": (True, False), "b": (False, True), "none": (False, False)}
    ans_a = {q.qid: q.answer == right[k][0] for q, k in zip(qs, kinds)}
    ans_b = {q.qid: q.answer == right[k][1] for q, k in zip(qs, kinds)}
    a = write_run(tmp_path / "A", "dev", ans_a)
    b = write_run(tmp_path / "B", "dev", ans_b, preset="no-retrieval", retrieval=False)
    c = compare_runs([a, b])
    assert len(c.qids) == 20 and [r.accuracy for r in c.runs] == [0.75, 0.5]
    # the interval metrics.json reports: Wilson's, by its closed form for 15 of 20 (z = 1.96)
    centre, half = 0.75 + 1.96**2 / 40, 1.96 * math.sqrt(0.75 * 0.25 / 20 + 1.96**2 / 1600)
    lo, hi = (centre - half) / (1 + 1.96**2 / 20), (centre + half) / (1 + 1.96**2 / 20)
    assert c.runs[0].interval95 == pytest.approx([lo, hi], abs=1.5e-4) and c.runs[0].interval95 == [0.5313, 0.8881]
    p = c.pairs[0]
    assert (p.only_a, p.only_b, p.both_right, p.both_wrong) == (7, 2, 8, 3)
    assert p.difference == pytest.approx(0.25)
    assert p.mcnemar_p == pytest.approx(0.1796875)
    # the bootstrap percentile interval is near the normal one of the mean of d in {+1 x7, -1 x2, 0 x11}
    se = math.sqrt((9 / 20 - 0.25**2) / 20)
    assert p.interval95[0] == pytest.approx(0.25 - 1.96 * se, abs=0.05)
    assert p.interval95[1] == pytest.approx(0.25 + 1.96 * se, abs=0.05)
    assert compare_runs([a, b]).pairs[0].interval95 == p.interval95  # seeded
    assert p.recall is None and c.runs[1].recall is None  # B retrieved nothing: no Recall@10


def test_recall_pairs_and_left_out(tmp_path):
    qs = [q for q in load_questions("dev")[:30]]
    first = {q.qid: sorted(annotator_evidence(q.evidence)[0])[:1] for q in qs}
    a = write_run(tmp_path / "A", "dev", {q.qid: True for q in qs}, paragraphs=first)
    b = write_run(tmp_path / "B", "dev", {q.qid: True for q in qs[:25]})
    c = compare_runs([a, b])
    assert len(c.qids) == 25 and [r.left_out for r in c.runs] == [5, 0]
    rec = [recall_at_k(q.evidence, first[q.qid]) for q in qs[:25]]
    assert c.pairs[0].recall["difference"] == pytest.approx(sum(rec) / 25)
    assert c.pairs[0].recall["higher_a"] == sum(r > 0 for r in rec) and c.pairs[0].recall["higher_b"] == 0
    assert c.pairs[0].recall["wilcoxon_p"] < 0.05


def test_runs_sharing_no_question_are_refused(tmp_path):
    dev = load_questions("dev")[0]
    train_only = next(q for q in load_questions("train-2061"))
    a = write_run(tmp_path / "A", "dev", {dev.qid: True})
    b = write_run(tmp_path / "B", "train", {train_only.qid: True})
    with pytest.raises(SqaError, match="share no labelled question"):
        compare_runs([a, b])
    line = one_error_line(run_sqa(["compare", a, b]))
    assert "A: 1 labelled questions (dev)" in line and "B: 1 labelled questions (train)" in line
    assert "no run.json" in one_error_line(run_sqa(["compare", a, tmp_path]))


def test_compare_the_recorded_dev_runs():
    """The done-when command: both accuracies, the paired difference with its interval, McNemar's p
    and the disagreement counts; --json gives the same numbers."""
    facts, plain = RUNS / "dev229-facts-h2055", RUNS / "dev229-plain-h2055"
    r = run_sqa(["compare", facts, plain], env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    c = compare_runs([facts, plain])
    p = c.pairs[0]
    assert (p.n, p.only_a, p.only_b) == (229, 6, 12) and p.accuracy_a == pytest.approx(152 / 229)
    assert p.mcnemar_p == pytest.approx(2 * sum(math.comb(18, i) for i in range(7)) / 2**18)
    for text in (
        "0.664",
        "0.690",
        "-0.026",
        f"[{p.interval95[0]:+.3f}, {p.interval95[1]:+.3f}]",
        f"McNemar p = {p.mcnemar_p:.4f}",
        "only A right 6",
        "only B right 12",
    ):
        assert text in r.stdout, text
    j = json.loads(run_sqa(["compare", facts, plain, "--json"]).stdout)
    assert j["pairs"][0]["mcnemar_p"] == p.mcnemar_p and j["pairs"][0]["interval95"] == p.interval95
    assert [x["accuracy"] for x in j["runs"]] == [r_.accuracy for r_ in c.runs] and j["n"] == 229


def test_a_run_with_predictions_only_is_compared_on_its_answers(tmp_path):
    """A run folder without traces (only run.json and the leaderboard predictions.json) still compares."""
    qs = load_questions("dev")[:10]
    a = write_run(tmp_path / "A", "dev", {q.qid: q.answer for q in qs})
    b = tmp_path / "B"
    b.mkdir()
    (b / "run.json").write_text(json.dumps({"format": 2, "options": {"split": "dev", "preset": "steps"}}))
    (b / "predictions.json").write_text(
        json.dumps({q.qid: {"answer": not q.answer, "decomposition": [q.question], "paragraphs": []} for q in qs[:8]})
    )
    c = compare_runs([a, b])
    assert len(c.qids) == 8 and [r.left_out for r in c.runs] == [2, 0]
    assert (c.pairs[0].only_a, c.pairs[0].only_b) == (8, 0) and c.pairs[0].mcnemar_p == pytest.approx(2 / 2**8)
