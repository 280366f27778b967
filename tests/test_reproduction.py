"""Recorded runs reproduce (in the style of pyserini's regression checks): every
``bench/results/runs/*/predictions.json`` re-scored with the official metrics gives its
``metrics.json``; an old run's outputs regenerate from its traces; a recorded run copied to
another folder, with the index built in another folder, resumes there without recomputing."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest

from sqa.eval.leaderboard import load_predictions, score_predictions
from sqa.strategyqa import load_questions

RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "runs"
RUN_DIRS = sorted(p for p in RUNS.iterdir() if (p / "predictions.json").exists())


def test_there_are_recorded_runs():
    assert len(RUN_DIRS) >= 10 and {"dev229", "dev229-facts", "dev229-plain"} <= {p.name for p in RUN_DIRS}


@pytest.mark.parametrize("run_dir", RUN_DIRS, ids=[p.name for p in RUN_DIRS])
def test_predictions_rescore_to_the_recorded_metrics(run_dir):
    metrics = json.loads((run_dir / "metrics.json").read_text())
    preds = load_predictions(run_dir / "predictions.json")
    questions = [q for q in load_questions(metrics["split"]) if q.qid in preds and q.answer is not None]
    scores = score_predictions(preds, questions, allow_missing=True, source=str(run_dir))
    assert scores["n"] == metrics["n"] == len(preds)
    for name in ("Accuracy", "Recall@10", "SARI"):
        assert scores[name] == pytest.approx(metrics[name], abs=1e-12), name


def _copy_run(name: str, to: Path) -> Path:
    to.mkdir(parents=True)
    shutil.copy(RUNS / name / "run.json", to / "run.json")
    (to / "traces.jsonl").write_bytes(lzma.decompress((RUNS / name / "traces.jsonl.xz").read_bytes()))
    return to


def test_an_old_steps_run_regenerates_its_outputs_from_its_traces(tmp_path):
    """dev100-predicted-1.5b was recorded with run.json format 1 and a decision the steps reader no
    longer has: its predictions and metrics still regenerate from the traces, unchanged."""
    from sqa.eval.options import EvalOptions
    from sqa.eval.rundir import read_traces
    from sqa.eval.run_metrics import finalize_run

    out = _copy_run("dev100-predicted-1.5b", tmp_path / "run")
    run = json.loads((out / "run.json").read_text())
    opts = EvalOptions.from_dict(run["options"])
    done = read_traces(out)
    questions = load_questions("dev")[:100]
    summary = finalize_run(out, opts, questions, done, index_info=run["index"], plots=False)
    assert summary.complete and load_predictions(out / "predictions.json") == load_predictions(
        RUNS / "dev100-predicted-1.5b" / "predictions.json"
    )
    recorded = json.loads((RUNS / "dev100-predicted-1.5b" / "metrics.json").read_text())
    for name in ("Accuracy", "Recall@10", "SARI", "ECE", "yes_rate"):
        assert summary.metrics[name] == pytest.approx(recorded[name], abs=1e-12), name


def test_a_recorded_run_copied_elsewhere_resumes_without_recomputing(
    tmp_path, mini_index, gold_index, monkeypatch, capsys
):
    """dev100-of-229 (preset steps, recorded on another machine with its index in another folder):
    copied to a new folder and resumed against a mini index built in yet another folder, it is
    recognised as the same run, answers nothing anew (no model is even loaded) and regenerates the
    recorded predictions. An index with another identity (the 9,251 gold paragraphs, indexed from
    their file rather than as a preset) is refused."""
    import sqa.pipeline
    from sqa.cli import main

    out = _copy_run("dev100-of-229", tmp_path / "copied" / "run")

    def no_reader(*a, **kw):
        raise AssertionError("a complete run must not build a reader")

    monkeypatch.setattr(sqa.pipeline, "reader_factory", lambda *a, **kw: no_reader)
    args = ["eval", "--split", "dev", "--limit", "100", "--preset", "steps", "--batch-size", "4", "--out", str(out)]
    assert main(args + ["--index-dir", str(mini_index)]) == 0
    assert "complete: 100/100 questions (0 new)" in capsys.readouterr().out
    assert load_predictions(out / "predictions.json") == load_predictions(RUNS / "dev100-of-229" / "predictions.json")
    m = json.loads((out / "metrics.json").read_text())
    assert m["Accuracy"] == json.loads((RUNS / "dev100-of-229" / "metrics.json").read_text())["Accuracy"]
    assert main(args + ["--index-dir", str(gold_index.index_dir)]) == 2
    err = capsys.readouterr().err
    assert "index.corpus: 'preset:mini' -> 'files:" in err and "index.paragraph_count: 159930 -> 9251" in err
