"""``sqa ask``: the --json shape, the rich tree and the one-line errors."""

from __future__ import annotations

import json

import pytest

import sqa.models.registry as models_module
from sqa.cli import main
from sqa.strategyqa import load_questions

from helpers import ScriptedModel


@pytest.fixture
def scripted(monkeypatch):
    """Make ``sqa.pipeline.build_reader`` load a ScriptedModel instead of a GGUF (fast CLI tests)."""
    model = ScriptedModel(["Who founded #0 Apple?", "When was #1 born?", "Is #2 before 1960?"])
    monkeypatch.setattr(models_module, "load_model", lambda name: model)
    return model


def _check_shape(obj: dict, question: str) -> None:
    keys = {"question", "decomposition", "answer", "confidence", "paragraphs", "p_yes", "calibrated", "prefill"}
    keys |= {"model", "readings", "timings"}  # what the text shows: the model, its own readings, the seconds
    keys |= {"settings"}  # the reader's sqa.ReaderSettings, as it answered
    assert set(obj) == keys and obj["prefill"] is True  # the steps reader continued its transcript
    assert obj["settings"]["preset"] == "steps" and obj["settings"]["k"] == 10
    assert obj["timings"]["total"] >= 0 and all(0 <= p <= 1 for p in obj["readings"].values())
    assert obj["question"] == question
    assert isinstance(obj["answer"], bool) and 0.0 <= obj["confidence"] <= 1.0
    assert obj["confidence"] >= 0.5  # confidence is P(the given answer)
    assert isinstance(obj["paragraphs"], list) and all(isinstance(p, str) for p in obj["paragraphs"])
    assert len(obj["paragraphs"]) == len(set(obj["paragraphs"])) <= 10
    for s in obj["decomposition"]:
        assert set(s) == {"step", "answer", "evidence"}
        assert isinstance(s["step"], str) and isinstance(s["evidence"], list)


def _ask_steps(gold_index, *extra: str) -> int:
    """``sqa ask "Was Steve Jobs born before 1960?" --reader steps --k 3 EXTRA`` on the gold index,
    in this process (the ``scripted`` model reads); returns the exit status."""
    q = "Was Steve Jobs born before 1960?"
    return main(["ask", q, "--reader", "steps", "--k", "3", *extra, "--index-dir", str(gold_index.index_dir)])


def test_ask_json_shape(gold_index, scripted, capsys):
    q = load_questions("dev")[0].question
    rc = main(["ask", q, "--json", "--preset", "steps", "--index-dir", str(gold_index.index_dir)])
    out = capsys.readouterr().out
    assert rc == 0
    obj = json.loads(out)
    _check_shape(obj, q)
    assert [s["step"] for s in obj["decomposition"]] == scripted.steps
    assert obj["decomposition"][0]["answer"] == "ANSWER1" and len(obj["decomposition"][0]["evidence"]) == 10
    assert obj["answer"] is False and obj["confidence"] == pytest.approx(0.548, abs=1e-3)  # see the next test
    assert len(obj["paragraphs"]) == 10


def test_ask_steps_averages_three_readings(gold_index, scripted, capsys):
    """The steps reader's fixed decision transcript+direct+plain: the scripted model says P(yes)=0.9 after the steps
    (transcript holds "ANSWER1") and 0.2 on the two step-free prompts, so the log-odds mean is
    sigmoid((logit 0.9 + 2 logit 0.2) / 3) = 0.452 -> No with confidence 0.548."""
    import math

    rc = _ask_steps(gold_index)
    out = capsys.readouterr().out
    assert rc == 0
    z = (math.log(0.9 / 0.1) + 2 * math.log(0.2 / 0.8)) / 3
    p = 1 / (1 + math.exp(-z))
    assert "No" in out and f"P(yes)={p:.2f}" in out
    flat = " ".join(out.split())  # rich wraps the line at the terminal's width
    assert "transcript 0.90" in flat and "direct 0.20" in flat and "plain 0.20" in flat
    assert "(the model's own, uncalibrated: transcript" in flat  # no answer head reads them (issue 42)
    rc = _ask_steps(gold_index, "--json")
    obj = json.loads(capsys.readouterr().out)
    assert obj["answer"] is False and obj["confidence"] == pytest.approx(1 - p, abs=1e-6)
    assert obj["readings"] == pytest.approx({"transcript": 0.9, "direct": 0.2, "plain": 0.2}, abs=1e-6)
    assert obj["calibrated"] is False


def test_ask_tree(gold_index, scripted, capsys):
    rc = _ask_steps(gold_index)
    out = capsys.readouterr().out
    assert rc == 0
    assert "Who founded #0 Apple?" in out and "ANSWER1" in out and "No" in out and "P(yes)=0.45" in out
    # a preset and a flag that disagree, and a preset that needs annotations: one-line usage errors
    assert main(["ask", "Is the sun a star?", "--preset", "steps", "--reader", "facts"]) == 2
    assert "--preset steps and --reader 'facts' disagree" in capsys.readouterr().err
    assert main(["ask", "Is the sun a star?", "--preset", "oracle-facts"]) == 2
    assert "annotations" in capsys.readouterr().err


def test_ask_errors_are_one_line(tmp_path, gold_index, capsys):
    assert main(["ask", "  ", "--index-dir", str(gold_index.index_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: empty question") and "\n" not in err
    assert main(["ask", "Is the sun a star?", "--index-dir", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "no index" in err and "sqa index" in err
    assert (
        main(
            [
                "ask",
                "Is the sun a star?",
                "--index-dir",
                str(gold_index.index_dir),
                "--model",
                str(tmp_path / "missing.gguf"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and "missing.gguf" in err and "not found" in err


@pytest.mark.slow
def test_ask_real_small_model_json(gold_index, capsys):
    """End to end with the real 0.5B GGUF on llama.cpp over the gold index."""
    q = "Is the Eiffel Tower in the same country as the Louvre?"
    rc = main(
        [
            "ask",
            q,
            "--json",
            "--reader",
            "steps",
            "--model",
            "qwen2.5-coder-0.5b",
            "--index-dir",
            str(gold_index.index_dir),
        ]
    )
    assert rc == 0
    obj = json.loads(capsys.readouterr().out)
    _check_shape(obj, q)
    assert 1 <= len(obj["decomposition"]) <= 5 and len(obj["paragraphs"]) == 10
