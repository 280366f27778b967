"""``sqa eval`` and ``sqa eval score`` from the command line: scoring a leaderboard file against
labels counted straight from the shipped data, a run through the real StepsReader + BM25 index (a
scripted model for speed; the real 0.5B GGUF in the slow test), resume and Ctrl-C exit codes."""

from __future__ import annotations

import json
import lzma
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sqa.models.registry as reasoner_pkg
from sqa.cli import main
from sqa.eval.leaderboard import load_predictions
from sqa.strategyqa import TRAIN_FILE, load_questions

TESTS = Path(__file__).resolve().parent


def _train_labels() -> dict[str, bool]:
    """qid -> answer read directly from the shipped xz file (independent of sqa.strategyqa)."""
    with lzma.open(TRAIN_FILE, "rt", encoding="utf-8") as f:
        return {d["qid"]: d["answer"] for d in json.load(f)}


def test_score_all_no_on_train_gives_the_majority_accuracy(tmp_path, capsys):
    labels = _train_labels()
    assert len(labels) == 2290
    want = sum(1 for a in labels.values() if a is False) / len(labels)
    path = tmp_path / "all_no.json"
    path.write_text(json.dumps({qid: {"answer": False} for qid in labels}))

    assert main(["eval", "score", str(path), "--split", "train", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == {"split": "train", "Accuracy": pytest.approx(want), "n": 2290}
    assert 0.5 < want < 0.6  # StrategyQA train: 1,219 of 2,290 answers are "no"

    assert main(["eval", "score", str(path)]) == 0  # split inferred: the train qids are not all in dev / train-2061
    out = capsys.readouterr().out
    assert "Accuracy" in out and f"{want:.4f}" in out and "train" in out


def test_score_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": {"answer": "yes"}}))
    assert main(["eval", "score", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "bad.json" in err and "\n" not in err

    dev = load_questions("dev")
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({q.qid: {"answer": True} for q in dev[:10]}))
    assert main(["eval", "score", str(partial), "--split", "dev"]) == 2
    assert "no prediction for 219 of 229" in capsys.readouterr().err
    assert main(["eval", "score", str(partial), "--split", "dev", "--allow-missing", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["n"] == 10 and got["Accuracy"] == pytest.approx(sum(q.answer for q in dev[:10]) / 10)

    test = tmp_path / "test.json"
    test.write_text(json.dumps({q.qid: {"answer": True} for q in load_questions("test")[:3]}))
    assert main(["eval", "score", str(test)]) == 2
    assert "no public labels" in capsys.readouterr().err


@pytest.fixture
def scripted(monkeypatch):
    """The real StepsReader and BM25 retrieval, with a scripted LanguageModel (no weights)."""
    from helpers import ScriptedModel

    model = ScriptedModel(["Who founded #0 Apple?", "When was #1 born?", "Is #2 before 1960?"])
    monkeypatch.setattr(reasoner_pkg, "load_model", lambda name, **kw: model)
    return model


def test_eval_through_the_real_reasoner_resume_and_score(tmp_path, gold_index, scripted, capsys):
    out = tmp_path / "run"
    args = [
        "eval",
        "--split",
        "dev",
        "--limit",
        "3",
        "--out",
        str(out),
        "--index-dir",
        str(gold_index.index_dir),
        "--batch-size",
        "2",
        "--reader",
        "steps",
    ]
    assert main(args) == 0
    stdout = capsys.readouterr().out
    assert "complete: 3/3 questions (3 new)" in stdout
    # a --limit cut is said to be one, in the summary line, metrics.json, report.md and report.html
    cut = "first 3 of 229 questions (--limit 3)"
    assert cut in " ".join(stdout.split()) and cut in (out / "report.md").read_text().splitlines()[0]
    assert (
        cut in (out / "report.html").read_text() and json.loads((out / "metrics.json").read_text())["complete"] is False
    )
    for name in ("run.json", "traces.jsonl", "predictions.json", "metrics.json", "report.md", "report.png"):
        assert (out / name).stat().st_size > 0
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    dev = load_questions("dev")[:3]
    assert [t["qid"] for t in traces] == [q.qid for q in dev]
    train_2061 = {q.qid for q in load_questions("train-2061")}
    for t in traces:
        assert [s["question"] for s in t["steps"]] == scripted.steps
        assert len(t["steps"][0]["evidence"]) == 10 and t["steps"][0]["query"]
        assert t["fewshot_qids"] and set(t["fewshot_qids"]) <= train_2061
        assert len(t["paragraphs"]) == 10
    m = json.loads((out / "metrics.json").read_text())
    assert m["index"]["paragraph_count"] == 9251 and m["model"] == "qwen2.5-coder-1.5b"
    assert m["options"]["decomposition"] == "predicted" and m["n"] == 3

    # the leaderboard scorer agrees with metrics.json
    assert main(["eval", "score", str(out / "predictions.json"), "--split", "dev", "--allow-missing", "--json"]) == 0
    score = json.loads(capsys.readouterr().out)
    assert score["Accuracy"] == pytest.approx(m["Accuracy"]) and score["SARI"] == pytest.approx(m["SARI"])
    assert score["Recall@10"] == pytest.approx(m["Recall@10"])

    # same command again: nothing redone; a longer --limit only does the new questions
    n_prompts = len(scripted.yes_prompts)
    assert main(args) == 0
    assert "(0 new)" in capsys.readouterr().out and len(scripted.yes_prompts) == n_prompts
    assert main(args[:4] + ["4"] + args[5:]) == 0
    assert "complete: 4/4 questions (1 new)" in capsys.readouterr().out
    assert len(load_predictions(out / "predictions.json")) == 4

    # other options in the same directory: refused with a one-line error
    assert main(args + ["--k", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "k: 10 -> 5" in err and "another --out" in err and "\n" not in err


def test_cli_ctrl_c_exits_130_with_outputs(tmp_path):
    out = tmp_path / "run"
    code = (
        "import signal, sys, helpers, sqa.pipeline as PL\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # see helpers.py
        "PL.reader_factory = lambda *a, **kw: (lambda pool: helpers.FakeReader(pool, delay=0.03))\n"
        "from sqa.cli import main\n"
        f"sys.exit(main(['eval', '--split', 'dev', '--reader', 'steps', '--out', {str(out)!r}, '--index-dir', {str(tmp_path)!r}]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    t0 = time.time()
    while not ((out / "traces.jsonl").exists() and (out / "traces.jsonl").read_bytes().count(b"\n") >= 5):
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < 60
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted:" in stdout and "run the same command again to resume" in stderr
    n = len((out / "traces.jsonl").read_text().splitlines())
    assert len(load_predictions(out / "predictions.json")) == n < 229
    assert json.loads((out / "metrics.json").read_text())["n"] == n


@pytest.mark.slow
def test_eval_real_model_dev_questions(local_steps_dev):
    """The whole pipeline with the 0.5B GGUF on llama.cpp: ``sqa eval --preset steps`` of the
    first STEPS_DEV_N dev questions on the gold index (the session's ``local_steps_dev`` run, which
    tests/test_server.py compares the served run with)."""
    from helpers import SMALL_MODEL, STEPS_DEV_N

    out = local_steps_dev
    preds = load_predictions(out / "predictions.json")
    assert list(preds) == [q.qid for q in load_questions("dev")[:STEPS_DEV_N]]
    for p in preds.values():
        assert 1 <= len(p["decomposition"]) and 1 <= len(p["paragraphs"]) <= 10
    m = json.loads((out / "metrics.json").read_text())
    assert m["n"] == STEPS_DEV_N and m["seconds_per_question"] > 0 and m["model"] == SMALL_MODEL
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == STEPS_DEV_N and all(t["steps"] and t["timings"]["total"] > 0 for t in traces)
