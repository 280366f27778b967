"""Recorded runs' outputs regenerate with today's code from their files alone
(``sqa.eval.regenerate``, issue 40): the same predictions and scores, a report.html whose columns
are the ones defined for the run, today's metrics.json vocabulary (``protocol`` = the question
set; an older file's cross-fitting scheme moved to ``out_of_fold.scheme``), and a steps run's own
final-answer decision kept."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sqa.eval.leaderboard import load_predictions
from sqa.eval.regenerate import migrated_out_of_fold, regenerate_run
from sqa.eval.report import oof_scheme, protocol_name

RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "runs"


def _copy(name: str, to: Path) -> Path:
    """The files a recorded run's outputs come from: run.json, the traces and the earlier metrics."""
    to.mkdir(parents=True)
    for f in ("run.json", "traces.jsonl.xz", "metrics.json"):
        shutil.copy(RUNS / name / f, to / f)
    return to


@pytest.mark.parametrize(
    "name, protocol, final, recall",
    [
        ("dev229-plain-h2055", "dev-229", None, False),  # no retrieval: no Recall@10 column
        ("dev229-facts-h2055", "dev-229", None, True),
        ("dev100-predicted-1.5b", None, "transcript", True),  # recorded before today's decision
    ],
)
def test_a_recorded_run_regenerates_with_the_same_answers(tmp_path, name, protocol, final, recall):
    run_dir = _copy(name, tmp_path / name)
    recorded = json.loads((RUNS / name / "metrics.json").read_text())
    s = regenerate_run(run_dir, plots=False)
    assert load_predictions(run_dir / "predictions.json") == load_predictions(RUNS / name / "predictions.json")
    m = s.metrics
    for key in ("n", "n_questions", "Accuracy", "Recall@10", "ECE"):
        assert m[key] == pytest.approx(recorded[key], abs=1e-12), key
    assert m["protocol"] == protocol and json.loads((run_dir / "run.json").read_text()).get("protocol") == protocol
    if final:
        assert m["final_answer"] == m["decision"] == final
    # the first 100 dev questions are a cut of the split, not a complete run (issue 48)
    words = "229 of 229 questions" if protocol else "first 100 of 229 questions (--limit 100)"
    assert m["complete"] is bool(protocol) and words in (run_dir / "report.md").read_text().splitlines()[0]
    assert words in (run_dir / "report.html").read_text()
    html = (run_dir / "report.html").read_text()
    assert html.count('<tr class="q ') == m["n"] and "https://" not in html
    assert ("<th>Recall@10</th>" in html) is recall and (
        "| Recall@10 |" in (run_dir / "report.md").read_text()
    ) is recall


def test_an_older_metrics_files_cross_fitting_scheme_is_read_and_moved(tmp_path):
    """metrics.json files written before ``protocol`` named the question set held the out-of-fold
    scheme there: the reports read it as the scheme, and regenerating moves it."""
    legacy = {
        "protocol": "out-of-fold, 5 term-grouped folds",
        "protocol_note": "each labelled question answered by a head fitted on the other 4 folds",
        "out_of_fold": {"answered_by": "facts head"},
    }
    assert oof_scheme(legacy) == "out-of-fold, 5 term-grouped folds" and protocol_name(legacy) is None
    moved = migrated_out_of_fold(legacy)
    assert moved["scheme"] == legacy["protocol"] and moved["note"].startswith("each labelled")
    assert protocol_name({"protocol": "train-first-500"}) == "train-first-500" and oof_scheme({}) is None

    run_dir = _copy("train200-0.5b-facts-oof", tmp_path / "oof")
    m = json.loads((run_dir / "metrics.json").read_text())
    oof = m["out_of_fold"]
    m["protocol"], m["protocol_note"] = oof.pop("scheme", None) or m["protocol"], oof.pop("note", "")
    (run_dir / "metrics.json").write_text(json.dumps(m))
    new = regenerate_run(run_dir, plots=False).metrics
    assert new["protocol"] is None and new["out_of_fold"]["scheme"] == "out-of-fold, 5 term-grouped folds"
    assert new["out_of_fold"]["folds"] == oof["folds"] and "protocol_note" not in new
    assert "Cross-fitting: **out-of-fold, 5 term-grouped folds**" in (run_dir / "report.md").read_text()
