"""The features store (one parser/writer, torn-line repair only, one writer per directory), the
out-of-fold cross-fitting (nested, term-grouped, demonstrations never fitted on) and the out-of-fold
run folder, on synthetic records: no model is loaded (issues 34 item 1 and 35)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import (
    FAKE_STATES_MODEL as FAKE_MODEL,
    SMALL_MODEL,
    small_gguf,
    stored_features,
    throwaway_home,
    train_args,
)
from sqa.facts.crossfit import crossfit, crossfit_specs
from sqa.facts.features import FactSettings, read_done
from sqa.facts.store import FeaturesStore, settings_key, store_meta
from sqa.facts.prompt import QuestionFeatures, demo_qids
from sqa.facts.sources import Fact
from sqa.types import Question, SqaError

REPO = Path(__file__).resolve().parent.parent


def _record(qid: str, answer: bool, rng, states: bool = True, dim: int = 80) -> dict:
    """A features record whose hidden states and log-odds carry the answer (plus noise)."""
    sign = 1.0 if answer else -1.0
    st = {}
    if states:
        for name in ("plain", "f1", "f2"):
            v = rng.normal(size=dim).astype(np.float32)
            v[:4] += 0.8 * sign
            st[name] = v
    qf = QuestionFeatures(
        qid,
        f"question {qid}?",
        [Fact("a fact", "wikipedia", "A-1", 3.0), Fact("b fact", "train-facts", "q", 2.0)],
        ["A-1"],
        [5.0],
        st,
        {
            "plain": float(0.3 * sign + rng.normal()),
            "f1": float(0.5 * sign + rng.normal()),
            "f2": float(0.6 * sign + rng.normal()),
        },
        label=answer,
    )
    return qf.to_dict()


def _synthetic(n: int = 120, states: bool = True, seed: int = 0):
    rng = np.random.default_rng(seed)
    demos = sorted(demo_qids())[:2]
    qids = demos + [f"q{i:03d}" for i in range(n - len(demos))]
    y = [bool(rng.integers(0, 2)) for _ in qids]
    recs = [_record(q, a, rng, states) for q, a in zip(qids, y)]
    groups = [f"term{i // 2}" for i in range(len(qids))]  # two questions a term
    trainable = [q not in demos for q in qids]
    return recs, y, groups, trainable


def test_a_damaged_complete_line_is_refused_and_nothing_is_truncated(tmp_path):
    """Issue 34 item 1: garble line 3 of 19; the old repair cut the file to 2 records."""
    rng = np.random.default_rng(1)
    path = tmp_path / "train-2061.jsonl"
    lines = [json.dumps(_record(f"q{i}", bool(i % 2), rng, dim=8)) for i in range(19)]
    lines[2] = lines[2][:40] + "#garbled#" + lines[2][60:]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(SqaError, match=r"train-2061\.jsonl:3: damaged features line"):
        read_done(path, repair=True)
    assert path.read_bytes() == before  # finished work kept


def test_only_a_torn_last_line_is_cut(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "f.jsonl"
    whole = "".join(json.dumps(_record(f"q{i}", True, rng, dim=8)) + "\n" for i in range(5))
    path.write_text(whole + '{"qid": "q5", "quest', encoding="utf-8")
    assert len(read_done(path)) == 5 and not path.read_text().endswith("\n")  # readers leave the file alone
    assert len(read_done(path, repair=True)) == 5 and path.read_text() == whole


def _meta(**kw):
    return store_meta("m", "ab" * 32, FactSettings(sentence_paragraphs=3, **kw), {"paragraph_count": 10, "corpus": "c"})


def test_store_is_one_writer_and_checks_its_meta(tmp_path):
    root = tmp_path / "features" / "m" / settings_key(FactSettings(sentence_paragraphs=3))
    assert root.name == "facts-v1-k10-top3-w3t2-40w"
    with FeaturesStore(root, _meta()) as store:
        rng = np.random.default_rng(3)
        store.append(_record("q1", True, rng, dim=8))
        # a second writer, in another process, gets one line at once
        code = (
            "import sys; from sqa.facts.store import FeaturesStore\n"
            "from sqa.types import SqaError\n"
            f"try:\n    FeaturesStore({str(root)!r}, {_meta()!r}).__enter__()\n"
            "except SqaError as e:\n    print(e); sys.exit(2)\n"
        )
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={"PYTHONPATH": str(REPO), "PATH": ""},
        )
        assert r.returncode == 2 and "another sqa run is writing these features" in r.stdout
    with FeaturesStore(root, _meta()) as store:  # the lock is released; the record is there
        assert [r["qid"] for r in store.read().values()] == ["q1"]
    with pytest.raises(SqaError, match=r"made with other settings \(facts: stored"):
        FeaturesStore(root, _meta(k=5)).__enter__()


def test_import_checks_meta_and_skips_what_is_there(tmp_path):
    rng = np.random.default_rng(4)
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(_record(f"q{i}", True, rng, dim=8)) + "\n" for i in range(3)))
    old_meta = {
        "model": "m",
        "model_sha256": "ab" * 32,
        "prompt": "facts-v1",
        "facts": FactSettings(sentence_paragraphs=3).to_dict(),
        "index_paragraphs": 10,
        "index_preset": "mini",
    }
    with FeaturesStore(tmp_path / "store", _meta()) as store:
        done = store.read()
        assert store.import_files([dump], old_meta, done) == (3, 0)
        assert store.import_files([dump], old_meta, done) == (0, 3)
        with pytest.raises(SqaError, match="other settings \\(model_sha256\\)"):
            store.import_files([dump], {**old_meta, "model_sha256": "cd" * 32}, done)
    with FeaturesStore(tmp_path / "store", _meta()) as store:
        assert sorted(r["qid"] for r in store.read().values()) == ["q0", "q1", "q2"]


def test_crossfit_is_nested_term_grouped_and_never_fits_a_demonstration():
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    recs, y, groups, trainable = _synthetic()
    cf = crossfit([dict(r) for r in recs], y, groups, trainable, model="m", model_sha256=None, provenance={"x": 1})
    assert set(cf.fold.tolist()) == set(range(5))
    for g in set(groups):  # a term never straddles folds
        assert len({int(cf.fold[i]) for i, gg in enumerate(groups) if gg == g}) == 1
    fitted = cf.heads["facts"].provenance["fitted_qids"]
    assert set(fitted) == {r["qid"] for r, t in zip(recs, trainable) if t} and not set(fitted) & demo_qids()
    assert cf.heads["plain"].spec.states == ("plain",) and cf.heads["facts"].provenance["x"] == 1
    s = cf.summary(y)
    assert s["facts"]["accuracy"] > 0.75 and s["facts"]["n"] == len(y)
    # nested: flipping the labels of fold 0 changes nothing fold 0 is answered with
    flipped = [(not v) if int(cf.fold[i]) == 0 else v for i, v in enumerate(y)]
    cf2 = crossfit([dict(r) for r in recs], flipped, groups, trainable, model="m", model_sha256=None, provenance={})
    zero = cf.fold == 0
    assert np.allclose(cf.p_facts[zero], cf2.p_facts[zero]) and np.allclose(cf.p_plain[zero], cf2.p_plain[zero])
    assert not np.allclose(cf.p_facts[~zero], cf2.p_facts[~zero])
    # deterministic: the same records give the same answers
    cf3 = crossfit([dict(r) for r in recs], y, groups, trainable, model="m", model_sha256=None, provenance={})
    assert np.array_equal(cf.p_facts, cf3.p_facts)


def test_records_without_hidden_states_get_log_odds_only_heads():
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    recs, y, groups, trainable = _synthetic(states=False)
    cf = crossfit(recs, y, groups, trainable, model="served", model_sha256=None, provenance={})
    for h in cf.heads.values():
        assert h.spec.states == () and h.spec.log_odds
    plain, facts = crossfit_specs(2, states=False)
    assert facts[-1].log_odds == ("plain", "f1", "f2")


def test_unlabelled_rows_are_answered_by_the_final_heads_and_too_few_terms_are_refused():
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    recs, y, groups, trainable = _synthetic()
    y = list(y)
    y[-1] = None
    cf = crossfit(recs, y, groups, trainable, model="m", model_sha256=None, provenance={})
    assert (
        cf.fold[-1] == -1
        and 0 <= cf.p_facts[-1] <= 1
        and recs[-1]["qid"] not in cf.heads["facts"].provenance["fitted_qids"]
    )
    with pytest.raises(SqaError, match="at least 5 terms"):
        crossfit(recs[:8], y[:8], ["t"] * 8, trainable[:8], model="m", model_sha256=None, provenance={})


def test_oof_run_folder_says_out_of_fold_and_shows_only_what_is_defined(tmp_path):
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    from sqa.eval.oof import oof_head_identity, run_oof
    from sqa.eval.options import EvalOptions

    recs, y, groups, trainable = _synthetic()
    questions = [Question(qid=r["qid"], question=r["question"], answer=a, term=g) for r, a, g in zip(recs, y, groups)]
    options = EvalOptions(
        split="custom",
        dataset="synthetic.json:000000000000",
        model="m",
        decomposition="question",
        reader="facts",
        head=oof_head_identity(5),
        batch_size=1,
    )
    summary, cf = run_oof(
        options, tmp_path, questions, {r["qid"]: r for r in recs}, model="m", model_sha256=None, provenance={}
    )
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert (
        m["out_of_fold"]["scheme"] == "out-of-fold, 5 term-grouped folds"
        and m["out_of_fold"]["answered_by"] == "facts head"
    )
    assert m["Accuracy"] == pytest.approx(m["out_of_fold"]["all"]["facts"]["accuracy"], abs=1e-4)
    assert m["out_of_fold"]["without_demonstrations"]["facts"]["n"] == len(y) - 2
    assert len(m["Accuracy_interval95"]) == 2 and m["AUC"] > 0.5
    assert m["Recall@10"] is None and m["SARI"] is None and m["accuracy_by_steps"] == {}  # no annotations, no steps
    report = (tmp_path / "report.md").read_text()
    assert "by number of steps" not in report and "final answer: `?`" not in report
    assert "final answer: the facts answer head over" in report and "`facts head:plain+f2" in report
    traces = [json.loads(x) for x in (tmp_path / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == len(questions) and all("states" not in t for t in traces)
    assert "out-of-fold, 5 term-grouped folds" in traces[0]["decision"]
    run = json.loads((tmp_path / "run.json").read_text()) if (tmp_path / "run.json").exists() else None
    assert run is None  # run.json is the CLI's (check_run_file); its head option names the protocol
    assert oof_head_identity(5).startswith("out-of-fold, 5 term-grouped folds")


def _features_lines(home: Path) -> list[str]:
    return [rec["qid"] for rec in stored_features(home)]


def _only(folder: Path, pattern: str) -> Path:
    """The one file of ``folder`` matching ``pattern``."""
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def _train_run(home: Path, out: Path, index_dir, limit: int = 12) -> tuple[list[str], dict]:
    args = [sys.executable, "-c", FAKE_MODEL, *train_args(limit, index_dir, out)]
    return args, {**__import__("os").environ, "SQA_HOME": str(home), "PYTHONPATH": str(REPO)}


def _stop_at(args, env, home: Path, sig, at: int) -> subprocess.CompletedProcess:
    import signal
    import time

    proc = subprocess.Popen(
        args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    t0 = time.time()
    while len(_features_lines(home)) < at:
        assert proc.poll() is None, proc.communicate()
        assert time.time() - t0 < 900
        time.sleep(0.02)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _kill_ctrl_c_and_resume(args, env, home: Path) -> list[str]:
    """Run the 12-question train run ARGS, kill -9 it once 3 questions' features are stored, run it
    again and Ctrl-C it at 7 (exit 130, saying how to continue), then run it to the end; returns the
    stored qids, asserting each is there once (nothing read twice, nothing lost)."""
    import signal

    assert _stop_at(args, env, home, signal.SIGKILL, 3).returncode == -signal.SIGKILL
    r = _stop_at(args, env, home, signal.SIGINT, 7)
    assert r.returncode == 130 and "run the same command to continue" in r.stderr, r.stderr
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    qids = _features_lines(home)
    assert len(qids) == len(set(qids)) == 12
    return qids


def test_train_run_resumes_after_kill_9_and_ctrl_c_reading_nothing_twice(tmp_path, gold_index):
    """Issue 35 done-when, with a deterministic stand-in model: kill -9 and Ctrl-C during `sqa eval
    --split train`, then the same command: every question's features read once, the same
    predictions as an uninterrupted run, the heads written with the qids they were fitted on."""
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")

    a, b = tmp_path / "a", tmp_path / "b"
    args, env = _train_run(a, tmp_path / "run_a", gold_index.index_dir)
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "out-of-fold, 5 term-grouped folds" in r.stdout
    args, env = _train_run(b, tmp_path / "run_b", gold_index.index_dir)
    qids = _kill_ctrl_c_and_resume(args, env, b)
    pa = json.loads((tmp_path / "run_a" / "predictions.json").read_text())
    pb = json.loads((tmp_path / "run_b" / "predictions.json").read_text())
    assert pa == pb and len(pa) == 12
    head = json.loads(_only(b / "heads", "fake-states.facts.*.json").read_text())
    assert sorted(head["provenance"]["fitted_qids"]) == sorted(set(qids) - demo_qids())
    run = json.loads((tmp_path / "run_b" / "run.json").read_text())
    assert run["options"]["head"] == "out-of-fold, 5 term-grouped folds (facts head)"
    # the same command on a finished run reads nothing and gives the same predictions
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and len(_features_lines(b)) == 12
    assert json.loads((tmp_path / "run_b" / "predictions.json").read_text()) == pa
    # a --dataset of questions the head was fitted on is answered out-of-fold, never in-sample
    from sqa.strategyqa import questions_by_id

    known = questions_by_id()
    seen = [q for q in head["provenance"]["fitted_qids"]][:3]
    ds = tmp_path / "mine.json"
    ds.write_text(
        json.dumps(
            [{"qid": q, "question": known[q].question, "answer": known[q].answer, "term": known[q].term} for q in seen]
        )
    )
    r = subprocess.run(
        args[:4]
        + [
            "--dataset",
            str(ds),
            "--model",
            "fake-states",
            "--index-dir",
            str(gold_index.index_dir),
            "--out",
            str(tmp_path / "run_ds"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "run_ds" / "metrics.json").read_text())
    assert (
        m["out_of_fold"]["scheme"] == "out-of-fold, 5 term-grouped folds"
        and m["n"] == 3
        and len(_features_lines(b)) == 12
    )
    for qid in seen:  # the same out-of-fold answers as the train run's
        assert json.loads((tmp_path / "run_ds" / "predictions.json").read_text())[qid]["answer"] == pb[qid]["answer"]


@pytest.mark.slow
def test_train_run_resumes_after_kill_9_and_ctrl_c_with_the_same_predictions(tmp_path, gold_index):
    """Issue 35: kill -9 and Ctrl-C during `sqa eval --split train` (0.5B model, 12 questions), then
    the same command: nothing read twice, the same predictions as an uninterrupted run (the real
    model's read-outs do not depend on which process read a question, or after which other), and
    heads fitted on the run's non-demonstration questions. The model is assembled, not loaded, here:
    each of the four runs loads it in its own process."""
    import os

    small_gguf()

    def home(name: str) -> Path:
        return throwaway_home(tmp_path / name)

    def cmd(h: Path, out: Path) -> tuple[list[str], dict]:
        args = [sys.executable, "-c", "import sys; from sqa.cli import main; sys.exit(main(sys.argv[1:]))"]
        args += train_args(12, gold_index.index_dir, out, SMALL_MODEL)
        return args, {**os.environ, "SQA_HOME": str(h), "PYTHONPATH": str(REPO)}

    a, b = home("a"), home("b")
    args, env = cmd(a, tmp_path / "run_a")
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert len(_features_lines(a)) == 12

    args, env = cmd(b, tmp_path / "run_b")
    qids = _kill_ctrl_c_and_resume(args, env, b)
    pa = json.loads((tmp_path / "run_a" / "predictions.json").read_text())
    pb = json.loads((tmp_path / "run_b" / "predictions.json").read_text())
    assert pa == pb and len(pa) == 12
    ma = json.loads((tmp_path / "run_a" / "metrics.json").read_text())
    assert ma["out_of_fold"]["scheme"] == "out-of-fold, 5 term-grouped folds"
    head = json.loads(_only(b / "heads", f"{SMALL_MODEL}.facts.*.json").read_text())
    assert sorted(head["provenance"]["fitted_qids"]) == sorted(set(qids) - demo_qids())


def test_extract_into_a_file_another_process_writes_is_refused_at_once(tmp_path):
    from sqa.facts.features import FactSelector, extract

    path = tmp_path / "train-2061.jsonl"
    code = (
        "import fcntl, sys, time\n"
        f"f = open({str(path)!r}, 'a'); fcntl.flock(f.fileno(), fcntl.LOCK_EX); print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(SqaError, match="another sqa run is writing these features"):
            extract(object(), FactSelector(), [Question(qid="q1", question="Is it?")], path)
    finally:
        holder.communicate("")


def test_a_served_name_with_an_organisation_files_its_heads_apart_from_a_local_model():
    """``openai:ORG/NAME`` and a local ``ORG/NAME`` checkpoint never share head or features files."""
    from sqa.models.registry import model_stem

    assert model_stem("openai:Qwen/Qwen2.5-7B-Instruct") == "openai:Qwen--Qwen2.5-7B-Instruct"
    assert model_stem("Qwen/Qwen2.5-7B-Instruct") == "Qwen2.5-7B-Instruct"
    assert (
        model_stem("openai:qwen2.5-coder-0.5b") == "openai:qwen2.5-coder-0.5b"
    )  # heads written before keep their name
    assert model_stem("qwen2.5-coder-1.5b") == "qwen2.5-coder-1.5b"
