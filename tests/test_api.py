"""sqa's Python API (issue 39): the library calls the CLI is drawn over."""

from __future__ import annotations

import zlib

import numpy as np
import pytest


class StateModel:
    """A deterministic stand-in reader: each prompt's state and log-odds from its CRC32."""

    name = "fake-states"
    path = None

    def hidden_states(self, prompts):
        out = []
        for p in prompts:
            v = np.random.default_rng(zlib.crc32(str(p).encode())).normal(size=16).astype(np.float32)
            out.append((v, float(v[0])))
        return out


def test_out_of_fold_run_is_a_library_call_with_progress_events(tmp_path, gold_index, monkeypatch):
    """run_out_of_fold reads the features (one event per question), cross-fits, writes the run
    folder and the heads, and returns the Run; the same call again reads nothing."""
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    import sqa.models.registry as registry
    from sqa.api.out_of_fold import run_out_of_fold
    from sqa.eval.oof import OofOptions, oof_pool
    from sqa.eval.options import select_questions

    monkeypatch.setenv("SQA_HOME", str(tmp_path / "home"))
    loads = []
    monkeypatch.setattr(registry, "load_model", lambda *a, **kw: loads.append(a) or StateModel())
    questions = select_questions("train", 12)
    pool, settings = oof_pool("fake-states", True, None, "train", questions)
    opts = OofOptions(split="train", questions=questions, model="fake-states", index_dir=gold_index.index_dir,
                      limit=12, out=tmp_path / "run", pool=pool, settings=settings)
    events = []
    run = run_out_of_fold(opts, events.append)
    stages = [e.stage for e in events]
    assert stages[0] == "loading" and stages.count("features") == 13 and "crossfit" in stages and stages[-1] == "heads"
    ticks = [e for e in events if e.stage == "features"]
    assert [e.done for e in ticks] == list(range(13)) and all(e.total == 12 for e in ticks)
    assert ticks[-1].seconds_per_question > 0
    assert run.path == tmp_path / "run" and run.complete and run.done == 12
    assert run.metrics["protocol"] == "out-of-fold, 5 term-grouped folds" and len(run.predictions) == 12
    assert sorted(run.heads) == ["facts", "plain"] and all(p.is_file() for p in run.heads.values())
    assert run.options["head"] == "out-of-fold, 5 term-grouped folds (facts head)"
    events.clear()
    again = run_out_of_fold(opts, events.append)  # resumed: nothing read, the model never loads
    assert len(loads) == 1 and "features" not in [e.stage for e in events]
    assert again.predictions == run.predictions


def test_the_retired_train_head_is_hidden_from_help_and_features_import_is_listed(capsys):
    from sqa.cli import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "features" in out and "train-head" not in out
