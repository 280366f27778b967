"""Named question sets (``sqa eval --protocol``, issue 40): the release's order, --limit cuts, the
protocol recorded in run.json and metrics.json, and train protocols answered out-of-fold by the
facts reader (a stand-in model that reads hidden states from a hash of the prompt)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import one_error_line, run_sqa

from sqa.eval.protocols import (
    PROTOCOLS,
    get_protocol,
    protocol_limit,
    protocol_of,
    question_set,
)
from sqa.strategyqa import load_questions
from sqa.types import SqaError

REPO = Path(__file__).resolve().parent.parent

STAND_IN = """
import sys, zlib
import numpy as np
import sqa.models.registry as R
from sqa.models.base import ModelBase
from sqa.types import ModelCapabilities


class StateModel(ModelBase):
    name = "fake-states"
    capabilities = ModelCapabilities(hidden_states=True, hidden_size=16)

    def hidden_states(self, prompts):
        out = []
        for p in prompts:
            v = np.random.default_rng(zlib.crc32(str(p).encode())).normal(size=16).astype(np.float32)
            out.append((v, float(v[0])))
        return out


R.load_model = lambda *a, **kw: StateModel()
from sqa.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_protocols_name_their_questions():
    assert set(PROTOCOLS) == {
        "dev-229",
        "train-first-500",
        "train-first-1000",
        "train-2290",
        "dragin-1000",
        "shao-500",
        "bigbench-2290",
    }
    assert get_protocol("bigbench-2290").method == "bigbench" and get_protocol("bigbench-2290").n is None
    assert get_protocol("dragin-1000").settings == {"prompt": "dragin", "answer_rule": "answer-is-else-no", "k": 3}
    assert protocol_limit(get_protocol("train-first-500"), None) == 500
    assert protocol_limit(get_protocol("train-first-500"), 5) == 5
    assert protocol_limit(get_protocol("train-first-1000"), 5000) == 1000
    assert protocol_limit(get_protocol("dev-229"), None) is None
    assert protocol_of("dev", 229) == "dev-229" and protocol_of("train", 2290) == "train-2290"
    assert protocol_of("train", 1000) == "train-first-1000" and protocol_of("train", 5) == ""
    assert protocol_of("custom", 229) == "" and protocol_of("train-2061", 2061) == ""
    assert question_set("train-first-500", 5)["cut_to"] == 5 and "cut_to" not in question_set("dev-229", 229)
    assert question_set("dev-229", 10)["cut_to"] == 10 and question_set("", 10) is None
    with pytest.raises(SqaError, match="unknown protocol 'train-500'; use one of dev-229"):
        get_protocol("train-500")


def test_protocol_usage_errors_are_one_line(tmp_path):
    assert "unknown protocol" in one_error_line(run_sqa(["eval", "--protocol", "nope", "--out", tmp_path / "r"]))
    line = one_error_line(run_sqa(["eval", "--protocol", "dev-229", "--split", "train", "--out", tmp_path / "r"]))
    assert "--protocol dev-229 names its own questions; leave out --split" in line


def test_a_train_protocol_is_answered_out_of_fold_and_recorded(tmp_path, gold_index):
    """``--protocol train-first-500 --limit 12`` through the facts reader: the first 12 train
    questions in the release's order, cross-fitted out-of-fold as ``--split train`` is, and
    run.json / metrics.json / report.md name the protocol."""
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    out = tmp_path / "run"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            STAND_IN,
            "eval",
            "--protocol",
            "train-first-500",
            "--limit",
            "12",
            "--model",
            "fake-states",
            "--index-dir",
            str(gold_index.index_dir),
            "--out",
            str(out),
        ],
        env={**__import__("os").environ, "SQA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["protocol"] == "train-first-500" and run["options"]["split"] == "train"
    preds = json.loads((out / "predictions.json").read_text())
    assert list(preds) == [q.qid for q in load_questions("train")[:12]]
    m = json.loads((out / "metrics.json").read_text())
    assert m["question_set"]["protocol"] == "train-first-500" and m["question_set"]["cut_to"] == 12
    assert m["protocol"] == run["protocol"]  # one word, one meaning: the named question set
    assert m["answering"] == run["answering"] == "out-of-fold"  # answered as --split train is
    assert m["out_of_fold"]["scheme"] == "out-of-fold, 5 term-grouped folds"
    assert "Question set: **train-first-500**" in (out / "report.md").read_text()


def _stand_in_eval(tmp_path, gold_index, *args):
    return subprocess.run(
        [
            sys.executable,
            "-c",
            STAND_IN,
            "eval",
            *args,
            "--model",
            "fake-states",
            "--index-dir",
            str(gold_index.index_dir),
        ],
        env={**__import__("os").environ, "SQA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_train_cut_too_small_to_cross_fit_is_answered_zero_shot_with_its_demonstrations_marked(tmp_path, gold_index):
    """Done-when of issue 40: ``--protocol train-first-500 --limit 5`` evaluates the first 5 train
    questions. 4 of them are the facts reader's demonstrations, so no out-of-fold head can be
    fitted: the cut is answered zero-shot (the model's own P(yes), uncalibrated), said in the
    notice, run.json, metrics.json, report.md and report.html, and the 4 demonstrations (answer in
    the prompt) are marked and counted, with the accuracy without them."""
    from sqa.facts.prompt import demo_qids

    out = tmp_path / "run"
    r = _stand_in_eval(tmp_path, gold_index, "--protocol", "train-first-500", "--limit", "5", "--out", str(out))
    assert r.returncode == 0, r.stderr
    first5 = [q.qid for q in load_questions("train")[:5]]
    demos = [q for q in first5 if q in demo_qids()]
    assert len(demos) == 4
    assert "answered zero-shot, with the model's own P(yes), uncalibrated" in r.stderr, r.stderr
    assert "4 of them are the prompt's demonstrations" in r.stderr and "the first 10 of train are enough" in r.stderr
    assert "sqa eval train-first-500 (facts" in r.stdout and "without the 4 demonstrations (n=1)" in r.stdout, r.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["protocol"] == "train-first-500" and run["answering"] == "zero-shot"
    assert "too few questions to cross-fit" in run["answering_note"]
    assert list(json.loads((out / "predictions.json").read_text())) == first5
    m = json.loads((out / "metrics.json").read_text())
    assert m["answering"] == "zero-shot" and m["calibrated"] is False and m["n"] == 5
    assert m["protocol"] == "train-first-500" and "out_of_fold" not in m
    assert m["answering_note"] == run["answering_note"]
    assert m["demonstrations"]["n"] == 4 and m["demonstrations"]["qids"] == demos
    traces = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()]
    assert [t["qid"] for t in traces if t["eval"]["demonstration"]] == demos
    assert all(t["decision"].startswith("zero-shot:") for t in traces)
    rest = [t for t in traces if not t["eval"]["demonstration"]]
    w = m["demonstrations"]["without_demonstrations"]
    assert w["n"] == 1 and w["Accuracy"] == float(rest[0]["eval"]["correct"])
    md = (out / "report.md").read_text()
    assert "Answering: **zero-shot**" in md and "too few questions to cross-fit" in md
    assert "Demonstrations: **4** of the questions" in md
    html = (out / "report.html").read_text()
    assert html.count("demonstration: its answer is in the facts reader's prompt (leaked)") == 4
    assert "Accuracy without demonstrations" in html

    # without --out, the run folder is named by the protocol (as sqa eval --preset A,B names it)
    r = subprocess.run(
        [sys.executable, "-c", STAND_IN, "eval", "--protocol", "train-first-500", "--limit", "5", "--model",
         "fake-states", "--index-dir", str(gold_index.index_dir)],
        env={**__import__("os").environ, "SQA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)},
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "runs/eval/train-first-500-facts-fake-states/run.json").read_text())["protocol"]

    # required out-of-fold, the same cut is refused in one line naming a cut that can be cross-fitted
    r = _stand_in_eval(
        tmp_path, gold_index, "--protocol", "train-first-500", "--limit", "5", "--answering", "out-of-fold",
        "--out", str(tmp_path / "oof"),
    )  # fmt: skip
    assert r.returncode == 2 and "--limit 10 or more" in one_error_line(r), r.stderr
