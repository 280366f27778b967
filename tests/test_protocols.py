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
    assert set(PROTOCOLS) == {"dev-229", "train-first-500", "train-first-1000", "train-2290"}
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
    assert m["protocol"] == "out-of-fold, 5 term-grouped folds"  # answered as --split train is
    assert "Question set: **train-first-500**" in (out / "report.md").read_text()
