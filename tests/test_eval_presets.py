"""``sqa eval --preset facts,no-retrieval ...`` (issue 40): each preset on the same questions into a
sibling folder, the comparison at the end, and the readings both presets share (the facts reader's
plain prompt) read once: a stand-in model counts every prompt it reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, TESTS, one_error_line, run_sqa

from sqa.models.memo import SharedReadings
from sqa.strategyqa import load_questions


# ``python -c COUNTING ARGS``: sqa with one ``helpers.StateModel`` for every model load; at exit it
# writes {"loads": number of loads, "reads": {prompt: times read}} to $READS_FILE
COUNTING = f"""
import atexit, json, os, sys
sys.path.insert(0, {TESTS!r})
import sqa.models.registry as R
from helpers import StateModel
MODEL, LOADS = StateModel(), []
R.load_model = lambda *a, **kw: LOADS.append(a) or MODEL
atexit.register(lambda: open(os.environ["READS_FILE"], "w").write(json.dumps({{"loads": len(LOADS), "reads": MODEL.reads}})))
from sqa.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_shared_readings_reads_each_prompt_once():
    calls = []

    class Model:
        name = "m"

        def hidden_states(self, prompts):
            calls.append(list(prompts))
            return [(None, float(len(p))) for p in prompts]

    lm = SharedReadings(Model())
    assert lm.hidden_states(["a", "bb"]) == [(None, 1.0), (None, 2.0)]
    assert lm.hidden_states(["bb", "ccc", "a"]) == [(None, 2.0), (None, 3.0), (None, 1.0)]
    assert calls == [["a", "bb"], ["ccc"]] and (lm.read, lm.shared) == (3, 2) and lm.name == "m"
    lazy = SharedReadings(load=lambda: Model(), name="m")
    assert not lazy.loaded and lazy.name == "m" and not lazy.loaded  # the name needs no model
    lazy.hidden_states(["x"])
    assert lazy.loaded


def test_two_presets_on_the_same_questions_share_the_plain_reading(tmp_path, gold_index):
    pytest.importorskip("scipy", reason="scipy (the models extra) runs the closing comparison's McNemar test")
    out, reads = tmp_path / "matrix", tmp_path / "reads.json"
    args = [
        sys.executable,
        "-c",
        COUNTING,
        "eval",
        "--preset",
        "facts,no-retrieval",
        "--split",
        "dev",
        "--limit",
        "10",
        "--model",
        "fake-states",
        "--index-dir",
        str(gold_index.index_dir),
        "--out",
        str(out),
    ]
    env = {
        **os.environ,
        "SQA_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(REPO),
        "READS_FILE": str(reads),
        "COLUMNS": "200",
    }
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    counts = json.loads(reads.read_text())
    assert counts["loads"] == 1  # one model for both presets
    plain = [p for p in counts["reads"] if "Facts:" not in p]
    assert len(plain) == 10 and set(counts["reads"].values()) == {1}  # every prompt, the plain ones too, read once
    qids = [q.qid for q in load_questions("dev")[:10]]
    for name in ("facts", "no-retrieval"):
        preds = json.loads((out / name / "predictions.json").read_text())
        assert list(preds) == qids
        assert json.loads((out / name / "run.json").read_text())["options"]["preset"] == name
    comparison = json.loads((out / "compare.json").read_text())
    assert [x["name"] for x in comparison["runs"]] == ["facts", "no-retrieval"] and comparison["n"] == 10
    p = comparison["pairs"][0]
    assert "A facts vs B no-retrieval (10 questions)" in r.stdout and f"McNemar p = {p['mcnemar_p']:.4f}" in r.stdout
    assert "10 shared between presets" in r.stderr
    # the same command again: both runs are complete, nothing is read, the comparison is printed again
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0 and json.loads(reads.read_text())["loads"] == 0 and "McNemar p" in r.stdout


def test_options_of_one_reader_are_refused_with_several_presets(tmp_path):
    line = one_error_line(run_sqa(["eval", "--preset", "facts,steps", "--no-retrieval", "--out", tmp_path / "x"]))
    assert "--retrieval/--no-retrieval picks one reader's setting" in line
    assert "unknown preset 'nope'" in one_error_line(
        run_sqa(["eval", "--preset", "facts,nope", "--out", tmp_path / "x"])
    )
