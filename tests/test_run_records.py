"""``sqa.Run`` read back in Python (issue 48 item 1): per-question records from the committed runs'
``traces.jsonl.xz``, checked against their ``metrics.json`` (written by the official scorer),
``run.errors()``, ``run.to_pandas()`` and the error of a folder that is no run."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

import sqa
from sqa.eval.metrics import recall_at_k
from sqa.eval.results import Record
from sqa.strategyqa import load_questions

RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "runs"


def test_records_of_a_recorded_run_agree_with_its_metrics():
    run = sqa.Run.open(RUNS / "dev229-facts")
    recs = run.records
    assert len(recs) == run.metrics["n"] == 229 and all(isinstance(r, Record) for r in recs)
    assert [r.qid for r in recs] == [q.qid for q in load_questions("dev")]  # split order
    assert sum(r.correct for r in recs) / 229 == pytest.approx(run.metrics["Accuracy"])
    # Recall@10 per question, averaged, is the official scorer's number in metrics.json
    assert sum(r.recall for r in recs) / 229 == pytest.approx(run.metrics["Recall@10"])
    first = recs[0]
    q = load_questions("dev")[0]
    assert (first.qid, first.question, first.gold) == (q.qid, q.question, q.answer)
    assert first.recall == recall_at_k(q.evidence, list(first.paragraphs))
    assert first.calibrated and first.confidence == pytest.approx(first.p_yes if first.answer else 1 - first.p_yes)
    assert set(first.signals) == {"plain", "facts"} and len(first.paragraphs) == 10
    assert {"text", "source", "ref"} <= set(first.facts[0]) and first.cost == {}
    assert run.records is recs  # read once
    with pytest.raises(AttributeError):
        first.answer = not first.answer  # frozen
    assert json.loads(json.dumps(first.to_dict()))["paragraphs"] == list(first.paragraphs)


def test_errors_are_the_wrong_labelled_answers_most_confident_first():
    run = sqa.Run.open(RUNS / "dev229-facts")
    errors = run.errors()
    assert len(errors) == round(229 * (1 - run.metrics["Accuracy"]))
    assert all(r.answer != r.gold for r in errors)
    conf = [r.confidence for r in errors]
    assert conf == sorted(conf, reverse=True)


def test_a_run_without_retrieval_has_no_recall():
    recs = sqa.Run.open(RUNS / "dev229-plain").records
    assert len(recs) == 229 and all(r.recall is None and r.paragraphs == () for r in recs)


def test_records_from_an_uncompressed_trace_with_cost(tmp_path):
    src = RUNS / "dev229-facts"
    dst = tmp_path / "run"
    dst.mkdir()
    shutil.copy(src / "run.json", dst / "run.json")
    import lzma

    lines = lzma.decompress((src / "traces.jsonl.xz").read_bytes()).decode().splitlines()[:3]
    recs = [json.loads(line) for line in lines]
    recs[1]["eval"]["cost"] = {"calls_sent": 2, "prompt_tokens": 300}
    recs[1]["eval"]["method_cost"] = {"retrieval_calls": 1}
    (dst / "traces.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = sqa.Run.open(dst)
    assert [r.qid for r in run.records] == [r["qid"] for r in recs]
    assert run.records[1].cost == {"calls_sent": 2, "prompt_tokens": 300, "retrieval_calls": 1}
    assert run.records[0].seconds == recs[0]["eval"]["seconds"]


def test_open_of_a_missing_folder_is_an_sqa_error_naming_it(tmp_path):
    with pytest.raises(sqa.RunNotFound, match="nope: not a run folder") as e:
        sqa.Run.open("nope")
    assert isinstance(e.value, sqa.BadInput) and not isinstance(e.value, FileNotFoundError)
    with pytest.raises(sqa.SqaError, match="no run.json in it"):
        sqa.Run.open(tmp_path)


def test_to_pandas_without_pandas_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(sqa.BadInput, match="pip install pandas"):
        sqa.Run.open(RUNS / "dev229-plain").to_pandas()


def test_to_pandas_one_row_per_record():
    pytest.importorskip("pandas", reason="pandas is the optional `pandas` extra")
    run = sqa.Run.open(RUNS / "dev229-facts")
    df = run.to_pandas()
    assert len(df) == 229 and list(df["qid"]) == [r.qid for r in run.records]
    assert df["correct"].mean() == pytest.approx(run.metrics["Accuracy"])
    assert "recall" in df.columns and "signals" in df.columns
