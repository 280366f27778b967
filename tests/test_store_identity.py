"""Stored features are used only when they are what the run asks for (issue 41 items 3, 4, 10's
damaged .xz, 11, 12, 13, 15): a qid with another text is read anew, records of another model or
settings are refused naming file:line and field, messages name the real cause and lose nothing.
The CLI runs use the deterministic stand-in model of ``helpers.FAKE_STATES_MODEL``."""

from __future__ import annotations

import json
import lzma

import numpy as np
import pytest

from helpers import fake_states_sqa as _sqa, one_error_line, stored_features, train_args
from sqa.facts.features import FactSettings
from sqa.facts.prompt import QuestionFeatures
from sqa.facts.sources import Fact
from sqa.facts.store import FeaturesStore, made_with, settings_key, store_meta
from sqa.types import SqaError, StoreMismatch

SETTINGS = FactSettings(sentence_paragraphs=3)


def _rec(qid: str, dim: int = 8, question: str | None = None) -> dict:
    v = np.arange(dim, dtype=np.float32) / dim
    return QuestionFeatures(
        qid,
        question or f"question {qid}?",
        [Fact("a fact", "wikipedia", "A-1", 3.0)],
        ["A-1"],
        [5.0],
        {"plain": v},
        {"plain": 0.1, "f1": 0.2},
        label=True,
    ).to_dict()


def _meta(model: str = "m", **kw) -> dict:
    return store_meta(model, None, FactSettings(sentence_paragraphs=3, **kw), {"paragraph_count": 10, "corpus": "c"})


def test_a_dataset_question_reusing_a_qid_with_other_text_is_read_anew(tmp_path, gold_index):
    """Item 3: 0cf7775 answered "Is the moon made of cheese?" with the stored features of the train
    question of that qid. Item 11: a missing --index-dir is named as such, not as "features made
    with other settings (index); move the directory away"."""
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    home, idx = tmp_path / "home", gold_index.index_dir
    r = _sqa(home, *train_args(12, idx, tmp_path / "train"))
    assert r.returncode == 0, r.stderr[-3000:]
    before = stored_features(home)
    assert len(before) == 12 and all(rec.get("made_with") for rec in before)
    head = json.loads(next((home / "heads").glob("fake-states.facts.*.json")).read_text())
    qid = head["provenance"]["fitted_qids"][0]
    ds = tmp_path / "moon.json"
    ds.write_text(
        json.dumps([{"qid": qid, "question": "Is the moon made of cheese?", "answer": False, "term": "Moon"}])
    )
    r = _sqa(home, "eval", "--dataset", ds, "--model", "fake-states", "--index-dir", idx, "--out", tmp_path / "moon")
    assert r.returncode == 0, r.stderr[-3000:]
    after = stored_features(home)
    assert len(after) == 13 and after[-1]["qid"] == qid and after[-1]["question"] == "Is the moon made of cheese?"
    trace = json.loads((tmp_path / "moon" / "traces.jsonl").read_text().splitlines()[0])
    original = next(rec for rec in before if rec["qid"] == qid)
    assert trace["facts"] == after[-1]["facts"] != original["facts"]
    assert json.loads((tmp_path / "moon" / "run.json").read_text())["answering"] == "cross-fitted"

    line = one_error_line(_sqa(home, *train_args(12, tmp_path / "no-index", tmp_path / "train2")))
    assert "no-index" in line and "other settings" not in line and "move the directory" not in line, line


def test_too_few_questions_to_cross_fit_are_refused_before_reading(tmp_path, gold_index):
    """Item 12: 0cf7775 read the 5 questions (147 s with the 1.5B model) and then said "got 1
    questions on 1 terms"; now nothing is read and the line says how many are needed."""
    home = tmp_path / "home"
    # without --answering out-of-fold the cut is answered zero-shot (test_protocols.py)
    r = _sqa(home, *train_args(5, gold_index.index_dir, tmp_path / "run", "fake-states", "--answering", "out-of-fold"))
    line = one_error_line(r)
    assert "--limit 5" in line and "or more" in line and "nothing was read" in line, line
    n = int(line.split("or more")[0].rsplit("--limit ", 1)[1])
    assert n > 5 and stored_features(home) == []


def test_records_of_another_model_or_settings_are_refused_naming_file_line_and_field(tmp_path):
    """Item 4: records carry their store's identity (``made_with``) and are checked, as is the state
    width; nothing is deleted."""
    root = tmp_path / "store"
    with FeaturesStore(root, _meta()) as store:
        store.append(_rec("q1"))
        assert store.read()
    path = next(root.glob("*.jsonl"))
    other = {**_rec("q2"), "made_with": made_with(_meta(k=5))}
    with open(path, "a") as f:
        f.write(json.dumps(other) + "\n")
    before = path.read_bytes()
    with FeaturesStore(root, _meta()) as store, pytest.raises(StoreMismatch) as e:
        store.read()
    assert f"{path}:2: field 'made_with'" in str(e.value) and path.read_bytes() == before
    # a record without a stamp (written before issue 41) with another state width: refused as well
    path.write_bytes(before.splitlines(keepends=True)[0] + (json.dumps(_rec("q3", dim=12)) + "\n").encode())
    with (
        FeaturesStore(root, _meta()) as store,
        pytest.raises(StoreMismatch, match=r":2: field 'states' holds 12 floats"),
    ):
        store.read()
    # a registry model's width is known: 8-float states are not the 0.5B model's 896
    with FeaturesStore(tmp_path / "s05", _meta("qwen2.5-coder-0.5b")) as store:
        store.append(_rec("q1"))
    with (
        FeaturesStore(tmp_path / "s05", _meta("qwen2.5-coder-0.5b")) as store,
        pytest.raises(StoreMismatch, match="896"),
    ):
        store.read()


def test_import_checks_the_records_against_meta_and_names_a_damaged_xz(tmp_path, gold_index):
    """Item 4 (`features import --meta` is checked, not trusted), item 10 (a damaged .jsonl.xz
    was an LZMAError traceback) and item 13 (`--model openai:ORG/NAME` files where sqa eval reads)."""
    from sqa.facts.store import store_meta as sm
    from sqa.pipeline import index_info

    home = tmp_path / "home"
    info = index_info(gold_index.index_dir)
    stem = "openai:ORG--NAME"
    meta = sm(stem, None, SETTINGS, info)
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "meta.json").write_text(json.dumps(meta))
    (dump / "train-2061.jsonl").write_text(json.dumps(_rec("q1")) + "\n" + json.dumps(_rec("q2")) + "\n")
    served = ["--model", "openai:ORG/NAME", "--index-dir", gold_index.index_dir]
    r = _sqa(home, "features", "import", dump / "train-2061.jsonl", *served)
    assert r.returncode == 0, r.stderr
    stored = home / "features" / stem / settings_key(SETTINGS)
    assert [x["qid"] for x in stored_features(home)] == ["q1", "q2"] and stored.is_dir()
    # records of another store (another model's stamp) under this meta: refused, naming file:line and field
    bad = dump / "other.jsonl"
    bad.write_text(json.dumps({**_rec("q3"), "made_with": made_with(_meta("x"))}) + "\n")
    line = one_error_line(_sqa(home, "features", "import", bad, "--meta", dump / "meta.json", *served))
    assert f"{bad}:1: field 'made_with'" in line
    # a damaged .jsonl.xz: one line naming the file
    xz = dump / "train-2061.jsonl.xz"
    data = lzma.compress((json.dumps(_rec("q4")) + "\n").encode() * 50)
    xz.write_bytes(data[:40] + bytes(b ^ 0xFF for b in data[40:80]) + data[80:])
    line = one_error_line(_sqa(home, "features", "import", xz, "--meta", dump / "meta.json", *served))
    assert str(xz) in line and "not a readable .xz file" in line
    assert [x["qid"] for x in stored_features(home)] == ["q1", "q2"]  # nothing lost, nothing added


def test_a_full_disk_and_a_damaged_meta_are_named_and_lose_nothing(tmp_path):
    """Item 15: a full disk under $SQA_HOME/features named no path; a damaged meta.json said to
    delete the whole features directory."""
    root = tmp_path / "store"
    with FeaturesStore(root, _meta()) as store:
        store.append(_rec("q1"))
    full = tmp_path / "full"
    full.mkdir()
    (full / "other.jsonl").symlink_to("/dev/full")  # every write there fails with ENOSPC
    with FeaturesStore(full, _meta()) as store, pytest.raises(SqaError) as e:
        store.append(_rec("q2"))
    assert f"{full / 'other.jsonl'}: cannot write features (the disk is full)" in str(e.value)
    assert "run the same command to continue" in str(e.value)
    (root / "meta.json").write_text("{damaged")
    with pytest.raises(StoreMismatch) as e:
        FeaturesStore(root, _meta()).__enter__()
    assert "delete" not in str(e.value) and "intact" in str(e.value) and "rename meta.json" in str(e.value)
    assert [json.loads(x)["qid"] for x in (root / "other.jsonl").read_text().splitlines()] == ["q1"]
