"""Answer heads are data the user paid for (issue 41 item 1): a train run writes its heads beside the
others, named by what they were fitted on; the head fitted on the most questions answers and is
named in ``sqa ask`` (printed and ``--json``) and ``run.json``; ``sqa heads list|rm``. Run with a
deterministic stand-in model (``helpers.FAKE_STATES_MODEL``), so no model file is needed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import fake_states_sqa as _sqa, train_args
from sqa.facts.head import AnswerHead, FeatureSpec
from sqa.types import HeadNotFound, SqaError


def _train(home: Path, out: Path, index_dir, limit: int, *extra: str) -> subprocess.CompletedProcess:
    r = _sqa(home, *train_args(limit, index_dir, out, "fake-states", *extra))
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_a_trial_train_run_never_takes_over_from_a_head_fitted_on_more_questions(tmp_path, gold_index):
    """Done-when of issue 41: after a 30-question train run, `sqa eval --split train --limit 12`
    writes its head beside it, and `sqa ask --json` still answers with the 30-question head and names
    it (0cf7775 wrote the trial head over it, and nothing said which head answered)."""
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    home, idx = tmp_path / "home", gold_index.index_dir
    _train(home, tmp_path / "run30", idx, 30)
    big = sorted((home / "heads").glob("fake-states.facts.*.json"))
    assert len(big) == 1 and ".n" in big[0].name
    n_big = len(json.loads(big[0].read_text())["provenance"]["fitted_qids"])
    r = _train(home, tmp_path / "run12", idx, 12)
    assert "still answers" in r.stderr and "--replace-heads" in r.stderr, r.stderr
    heads = sorted((home / "heads").glob("fake-states.facts.*.json"))
    assert len(heads) == 2 and big[0] in heads  # beside, not over
    run = json.loads((tmp_path / "run12" / "run.json").read_text())
    assert run["answering"] == "out-of-fold"

    a = _sqa(home, "ask", "Did Aristotle use a laptop?", "--json", "--model", "fake-states", "--index-dir", str(idx))
    assert a.returncode == 0, a.stderr[-3000:]
    out = json.loads(a.stdout)
    assert out["head"] == str(big[0]) and out["head_fitted_on"] == n_big
    a = _sqa(home, "ask", "Did Aristotle use a laptop?", "--model", "fake-states", "--index-dir", str(idx))
    shown = " ".join(a.stdout.split())  # rich wraps lines
    assert a.returncode == 0 and f"answer head {big[0].name}, fitted on {n_big} questions" in shown, a.stdout

    # sqa eval names the head too, on stderr and in run.json (test: questions no head was fitted on)
    r = _sqa(
        home,
        "eval",
        "--split",
        "test",
        "--limit",
        3,
        "--model",
        "fake-states",
        "--index-dir",
        idx,
        "--out",
        tmp_path / "dev3",
    )
    assert r.returncode == 0 and f"answer head {big[0]} (fitted on {n_big} questions)" in " ".join(r.stderr.split())
    run = json.loads((tmp_path / "dev3" / "run.json").read_text())
    assert run["answering"] == "head" and run["head"] == {"file": str(big[0]), "fitted_on": n_big}

    ls = _sqa(home, "heads", "list", "--model", "fake-states")
    assert ls.returncode == 0 and big[0].name in ls.stdout, ls.stdout
    # the shipped head is never removed; the user's is, and the next head answers
    rm = _sqa(home, "heads", "rm", "qwen2.5-coder-1.5b.facts.json")
    assert rm.returncode == 2 and "never removed" in rm.stderr
    assert _sqa(home, "heads", "rm", big[0].name).returncode == 0 and not big[0].exists()
    a = _sqa(home, "ask", "Did Aristotle use a laptop?", "--json", "--model", "fake-states", "--index-dir", str(idx))
    small = [h for h in heads if h != big[0]][0]
    assert json.loads(a.stdout)["head"] == str(small)

    # --replace-heads: the run's head answers and the model's other heads of that kind are gone
    _train(home, tmp_path / "run30", idx, 30, "--replace-heads")
    assert sorted((home / "heads").glob("fake-states.facts.*.json")) == big


def _head(n: int, model: str = "m") -> AnswerHead:
    qids = [f"q{i}" for i in range(n)]
    return AnswerHead(
        FeatureSpec((), ("plain",)),
        np.ones(1, dtype=np.float32),
        0.0,
        model,
        None,
        {"kind": "plain", "fitted_qids": qids},
    )


def test_the_head_fitted_on_the_most_questions_answers_and_a_damaged_one_is_named(tmp_path, monkeypatch):
    from sqa.facts.heads import choose_head, save_heads

    monkeypatch.setenv("SQA_HOME", str(tmp_path))
    with pytest.raises(HeadNotFound, match="no answer head for model m"):
        choose_head("m", "plain", "sqa eval --split train --model m")
    ((p50, best),) = save_heads({"plain": _head(50)}, "m", "facts-v1-k10")
    assert best.path == p50 and best.n == 50
    ((p20, best),) = save_heads({"plain": _head(20)}, "m", "facts-v1-k10")
    assert p20 != p50 and p50.exists() and best.path == p50
    p50.write_text("{not json")
    with pytest.raises(SqaError) as e:
        choose_head("m", "plain", "")
    assert (
        str(p50) in str(e.value) and f"sqa heads rm {p50.name}" in str(e.value) and "--split train" not in str(e.value)
    )
