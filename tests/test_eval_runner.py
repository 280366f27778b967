"""The batch evaluation runner on real StrategyQA questions with a deterministic stand-in reader
(tests/helpers.py): outputs, resume after kill -9 / a cut last line / Ctrl-C, few-shot
exclusion, refusal to mix runs. The real pipeline is exercised in test_eval_cli.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import FakeReader, fake_p_yes
from sqa.eval.leaderboard import load_predictions
from sqa.eval.metrics import recall_at_k
from sqa.eval.runner import EvalOptions, TraceLog, fold_of, plan_fewshot, read_traces, run_eval, select_questions
from sqa.strategyqa import load_questions
from sqa.types import SqaError

TESTS = Path(__file__).resolve().parent


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _opts(split="dev", limit=30, batch_size=7, **kw) -> EvalOptions:
    return EvalOptions(split=split, model="fake", limit=limit, batch_size=batch_size, **kw)


class Factory:
    """reader_for(pool) that remembers every reader it built (and for which pool)."""

    def __init__(self, cls=FakeReader, **kw):
        self.cls, self.kw, self.made = cls, kw, []

    def __call__(self, pool):
        r = self.cls(pool, **self.kw)
        self.made.append(r)
        return r

    def answered(self) -> list[str]:
        return [qid for r in self.made for b in r.batches for qid in b]


# ---------------------------------------------------------------------------------------------
# few-shot pools


def test_train_cross_fitting_never_uses_a_question_as_its_own_example():
    train = load_questions("train")
    plan = plan_fewshot("train", train, folds=5)
    assert len(plan) == 5
    seen = [q.qid for _, qs in plan for q in qs]
    assert sorted(seen) == sorted(q.qid for q in train)  # every question exactly once
    for pool, qs in plan:
        assert pool.source_split == "train" and pool.folds == 5
        pool_ids = pool.qids
        assert not pool_ids & {q.qid for q in qs}
        assert {fold_of(q.qid) for q in qs} == {pool.fold}
        assert len(pool_ids) + len(qs) == 2290  # the pool is exactly the other folds
    sizes = [len(qs) for _, qs in plan]
    assert min(sizes) > 2290 / 5 * 0.8  # sha1 folds are roughly balanced


def test_dev_test_use_train_2061_and_train_2061_is_cross_fitted_within_itself():
    ((pool, qs),) = plan_fewshot("dev", load_questions("dev"))
    assert pool.name == "train-2061" and len(pool.questions) == 2061 and len(qs) == 229
    ((pool, qs),) = plan_fewshot("test", load_questions("test"))
    assert pool.name == "train-2061" and len(qs) == 490
    t2061 = load_questions("train-2061")
    dev_ids = {q.qid for q in load_questions("dev")}
    for pool, qs in plan_fewshot("train-2061", t2061):
        assert not pool.qids & dev_ids and not pool.qids & {q.qid for q in qs}
        assert len(pool.qids) + len(qs) == 2061
    plan = plan_fewshot("all", load_questions("all"))
    test_group = [qs for pool, qs in plan if pool.name == "train-2061"]
    assert len(test_group) == 1 and len(test_group[0]) == 490


# ---------------------------------------------------------------------------------------------
# outputs


def test_run_writes_leaderboard_predictions_metrics_and_reports(tmp_path):
    factory = Factory()
    summary = run_eval(_opts(limit=30), tmp_path, factory)
    qs = load_questions("dev")[:30]
    assert summary.complete and summary.done == 30 and summary.new == 30 and not summary.interrupted

    preds = load_predictions(tmp_path / "predictions.json")  # validates the leaderboard format
    assert list(preds) == [q.qid for q in qs]
    for q in qs:
        assert set(preds[q.qid]) == {"answer", "decomposition", "paragraphs"}
        assert preds[q.qid]["answer"] == (fake_p_yes(q.qid) >= 0.5)
        assert preds[q.qid]["decomposition"] == list(q.decomposition)

    traces = _lines(tmp_path / "traces.jsonl")
    assert [t["qid"] for t in sorted(traces, key=lambda t: [q.qid for q in qs].index(t["qid"]))] == [q.qid for q in qs]
    t0 = traces[0]
    assert {"steps", "answer", "p_yes", "confidence", "paragraphs", "timings", "model", "eval"} <= set(t0)
    assert {"index", "question", "query", "answer", "evidence", "scores", "seconds"} <= set(t0["steps"][0])
    assert t0["eval"]["fewshot_pool"] == "train-2061"

    m = json.loads((tmp_path / "metrics.json").read_text())
    want_acc = sum((fake_p_yes(q.qid) >= 0.5) == q.answer for q in qs) / 30
    want_majority = sum(q.answer is False for q in qs) / 30
    want_recall = sum(recall_at_k(q.evidence, preds[q.qid]["paragraphs"]) for q in qs) / 30
    assert m["n"] == 30 and m["n_questions"] == 30
    # a --limit cut is not the split: not complete, and said so in every output (issue 48)
    assert m["complete"] is False and m["questions_in_set"] == 229 and m["limit"] == 30
    cut = "first 30 of 229 questions (--limit 30)"
    assert cut in (tmp_path / "report.md").read_text().splitlines()[0]
    assert cut in (tmp_path / "report.html").read_text()
    assert m["Accuracy"] == pytest.approx(want_acc)
    assert m["majority_baseline"]["Accuracy"] == pytest.approx(want_majority)
    assert m["Recall@10"] == pytest.approx(want_recall)
    assert m["SARI"] == pytest.approx(1.0)  # gold steps as the decomposition
    assert m["fewshot"]["questions_per_pool"] == {"train-2061": 30}
    assert set(m["fewshot"]["example_qids"]) <= {q.qid for q in load_questions("train-2061")}
    assert sum(v["n"] for v in m["accuracy_by_steps"].values()) == 30
    assert sum(b["n"] for b in m["calibration"]) == 30

    md = (tmp_path / "report.md").read_text()
    n_errors = 30 - round(want_acc * 30)
    assert f"## Errors ({n_errors}," in md
    wrong = [q for q in qs if (fake_p_yes(q.qid) >= 0.5) != q.answer]
    assert all(q.qid in md for q in wrong)
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_test_split_writes_predictions_only(tmp_path):
    summary = run_eval(_opts(split="test", limit=5), tmp_path, Factory())
    assert summary.metrics is None
    assert len(load_predictions(tmp_path / "predictions.json")) == 5
    assert len(_lines(tmp_path / "traces.jsonl")) == 5
    assert not (tmp_path / "metrics.json").exists() and not (tmp_path / "report.md").exists()


def test_train_run_records_which_pools_were_used(tmp_path):
    summary = run_eval(_opts(split="train", limit=40, batch_size=16), tmp_path, Factory())
    per_pool = summary.metrics["fewshot"]["questions_per_pool"]
    assert sum(per_pool.values()) == 40 and all(name.startswith("train minus fold") for name in per_pool)
    for t in _lines(tmp_path / "traces.jsonl"):
        assert t["eval"]["fewshot_pool"] == f"train minus fold {fold_of(t['qid'])}/5"
        assert t["qid"] not in t["fewshot_qids"]


# ---------------------------------------------------------------------------------------------
# resume


def test_resume_after_a_cut_last_line_redoes_only_what_is_missing(tmp_path):
    run_eval(_opts(limit=20), tmp_path, Factory())
    path = tmp_path / "traces.jsonl"
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    lost = json.loads(data[last_start:])["qid"]
    path.write_bytes(data[: last_start + 25])  # kill -9 in the middle of writing the 20th line

    factory = Factory()
    summary = run_eval(_opts(limit=30), tmp_path, factory)
    assert summary.repaired_bytes == 25
    qs = select_questions("dev", 30)
    expected_new = {lost} | {q.qid for q in qs[20:]}
    assert sorted(factory.answered()) == sorted(expected_new)  # nothing recomputed
    qids = [t["qid"] for t in _lines(path)]
    assert len(qids) == len(set(qids)) == 30  # no duplicate, no gap
    assert list(load_predictions(tmp_path / "predictions.json")) == [q.qid for q in qs]
    assert json.loads((tmp_path / "metrics.json").read_text())["n"] == 30


def test_finished_run_regenerates_outputs_without_a_reasoner(tmp_path):
    run_eval(_opts(limit=10), tmp_path, Factory())
    (tmp_path / "predictions.json").unlink()

    def no_reasoner(pool):
        raise AssertionError("a finished run must not build a reader")

    summary = run_eval(_opts(limit=10), tmp_path, no_reasoner)
    assert summary.new == 0 and summary.complete
    assert len(load_predictions(tmp_path / "predictions.json")) == 10


def test_corrupt_middle_line_is_an_error_naming_the_line(tmp_path):
    run_eval(_opts(limit=5), tmp_path, Factory())
    lines = (tmp_path / "traces.jsonl").read_text().splitlines()
    lines[1] = lines[1][:40]
    (tmp_path / "traces.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SqaError, match=r"traces\.jsonl:2:"):
        run_eval(_opts(limit=5), tmp_path, Factory())


def test_resume_with_other_options_is_refused(tmp_path):
    run_eval(_opts(limit=5), tmp_path, Factory())
    with pytest.raises(SqaError, match=r"decomposition: 'predicted' -> 'gold'.*another --out"):
        run_eval(_opts(limit=5, decomposition="gold"), tmp_path, Factory())
    with pytest.raises(SqaError, match="split"):
        run_eval(_opts(split="train", limit=5), tmp_path, Factory())
    with pytest.raises(SqaError, match=r"decision: 'transcript\+direct\+plain' -> None; reader: 'steps' -> 'facts'"):
        run_eval(_opts(limit=5, reader="facts", decomposition="question"), tmp_path, Factory())
    # limit and batch size may change between sessions
    assert run_eval(_opts(limit=8, batch_size=3), tmp_path, Factory()).done == 8


def test_bad_options_are_one_line_errors():
    with pytest.raises(SqaError, match="annotated steps"):
        _opts(split="test", decomposition="gold")
    with pytest.raises(SqaError, match="unknown split 'val'"):
        _opts(split="val")
    with pytest.raises(SqaError, match="unknown decomposition"):
        _opts(decomposition="oracle")
    with pytest.raises(SqaError, match="unknown reader 'vote'"):
        _opts(reader="vote")
    with pytest.raises(SqaError, match="--oracle goes with --reader facts"):
        _opts(oracle="facts")


def test_a_second_writer_is_refused(tmp_path):
    with TraceLog(tmp_path / "traces.jsonl"):
        with pytest.raises(SqaError, match="another `sqa eval`"):
            with TraceLog(tmp_path / "traces.jsonl"):
                pass


def test_reader_results_out_of_order_or_self_example_are_errors(tmp_path):
    class Swapped(FakeReader):
        def answer_batch(self, questions, decomposition="predicted", on_result=None):
            out = list(reversed(super().answer_batch(questions, decomposition)))
            for r in out:
                on_result(r)
            return out

    with pytest.raises(SqaError, match="in the place of"):
        run_eval(_opts(limit=4), tmp_path / "a", Factory(Swapped))

    class Cheater(FakeReader):
        def answer_batch(self, questions, decomposition="predicted", on_result=None):
            out = super().answer_batch(questions, decomposition)
            for r in out:
                r.fewshot_qids = [r.qid]
                on_result(r)
            return out

    with pytest.raises(SqaError, match="its own few-shot example"):
        run_eval(_opts(limit=4), tmp_path / "b", Factory(Cheater))


def test_ctrl_c_while_a_line_is_written_keeps_that_line(tmp_path, monkeypatch, python_sigint):
    """Ctrl-C arriving during the write of the 4th line: the line is finished, counted in the
    predictions, and not redone on resume."""
    real_append = TraceLog.append
    calls = []

    def append_then_ctrl_c(self, records):
        real_append(self, records)
        calls.append(1)
        if len(calls) == 4:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(TraceLog, "append", append_then_ctrl_c)
    summary = run_eval(_opts(limit=10, batch_size=3), tmp_path, Factory())
    assert summary.interrupted and summary.done == 4 and summary.new == 4
    assert len(load_predictions(tmp_path / "predictions.json")) == 4 == len(_lines(tmp_path / "traces.jsonl"))
    monkeypatch.setattr(TraceLog, "append", real_append)
    factory = Factory()
    assert run_eval(_opts(limit=10, batch_size=3), tmp_path, factory).complete
    assert len(factory.answered()) == 6 and len({t["qid"] for t in _lines(tmp_path / "traces.jsonl")}) == 10


def _start(out: Path, limit: int, delay: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(TESTS / "helpers.py"), str(out), "dev", str(limit), str(delay), "4"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        if proc.poll() is not None:
            raise AssertionError(f"runner exited early: {proc.communicate()}")
        time.sleep(0.02)
    raise AssertionError("runner too slow")


def test_resume_after_kill_9_mid_run(tmp_path):
    proc = _start(tmp_path, limit=60, delay=0.03)
    _wait_for_lines(tmp_path / "traces.jsonl", 10, proc)
    proc.kill()  # SIGKILL: no cleanup at all
    proc.wait()
    before = read_traces(tmp_path)  # what survived (a cut last line is not counted)
    assert 10 <= len(before) < 60

    factory = Factory()
    summary = run_eval(_opts(limit=60, batch_size=4), tmp_path, factory)
    assert set(factory.answered()) == {q.qid for q in select_questions("dev", 60)} - set(before)
    qids = [t["qid"] for t in _lines(tmp_path / "traces.jsonl")]
    assert len(qids) == len(set(qids)) == 60 and summary.complete
    assert len(load_predictions(tmp_path / "predictions.json")) == 60


def test_ctrl_c_saves_finished_work_and_resume_completes(tmp_path):
    proc = _start(tmp_path, limit=60, delay=0.03)
    _wait_for_lines(tmp_path / "traces.jsonl", 8, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted=True" in out
    traces = _lines(tmp_path / "traces.jsonl")  # every line whole: the write was finished
    assert (tmp_path / "traces.jsonl").read_bytes().endswith(b"\n")
    preds = load_predictions(tmp_path / "predictions.json")
    assert set(preds) == {t["qid"] for t in traces} and len(preds) == len(traces) < 60
    assert json.loads((tmp_path / "metrics.json").read_text())["n"] == len(traces)

    summary = run_eval(_opts(limit=60, batch_size=4), tmp_path, Factory())
    assert summary.new == 60 - len(traces) and summary.complete
    assert len({t["qid"] for t in _lines(tmp_path / "traces.jsonl")}) == len(_lines(tmp_path / "traces.jsonl")) == 60


INDEX = {
    "schema": 1,
    "backend": "embedded",
    "corpus": "preset:mini",
    "paragraph_count": 159930,
    "analyzer": "tantivy en: simple tokenizer, remove_long(40), lowercase, english stopwords, english stemmer",
    "bm25": {"k1": 1.2, "b": 0.75},
    "schema_version": 2,
}


def test_run_recorded_before_an_identity_key_existed_still_resumes(tmp_path):
    """A run.json written before ``retrieval`` joined the identity resumes with the default (True)
    and is refused with --no-retrieval."""
    from sqa.eval.runner import check_run_file

    opts = EvalOptions(split="dev", model="m", decomposition="predicted")
    rec = check_run_file(tmp_path, opts, INDEX)
    run = tmp_path / "run.json"
    data = json.loads(run.read_text())
    del data["identity"]["retrieval"]
    run.write_text(json.dumps(data))
    assert check_run_file(tmp_path, opts, INDEX)["identity"] == data["identity"]
    (tmp_path / "traces.jsonl").write_text('{"qid": "x"}\n')  # an answered question: the run is protected
    with pytest.raises(SqaError, match="retrieval: True -> False"):
        check_run_file(tmp_path, EvalOptions(split="dev", model="m", decomposition="predicted", retrieval=False), None)
    assert rec["identity"]["retrieval"] is True and "index_dir" not in json.dumps(rec)


def test_a_steps_run_read_in_turns_never_resumes_one_read_continued(tmp_path):
    """``prefill`` (``--no-prefill``: the steps reader's transcript in closed chat turns) is part of
    the run's identity: a run recorded before it existed resumes as prefill=True, and once a question
    is answered, the other form is refused (its answers would mix two prompt forms)."""
    from sqa.eval.runner import check_run_file

    opts = EvalOptions(split="dev", model="m", decomposition="predicted")
    check_run_file(tmp_path, opts, INDEX)
    run = tmp_path / "run.json"
    data = json.loads(run.read_text())
    assert data["identity"]["prefill"] is True
    del data["identity"]["prefill"]
    run.write_text(json.dumps(data))
    (tmp_path / "traces.jsonl").write_text('{"qid": "x"}\n')
    assert check_run_file(tmp_path, opts, INDEX)
    with pytest.raises(SqaError, match="prefill: True -> False"):
        check_run_file(tmp_path, EvalOptions(split="dev", model="m", decomposition="predicted", prefill=False), INDEX)


def test_format_1_run_json_with_an_index_path_resumes_on_an_index_of_the_same_identity(tmp_path):
    """run.json format 1 named the index directory (absolute) and the steps reader's decision: it
    resumes wherever an index with the same backend, corpus and paragraph count is, and a run
    recorded with a decision the steps reader no longer has is refused, not mixed."""
    from sqa.eval.runner import check_run_file

    old = {
        "split": "dev",
        "model": "m",
        "decomposition": "predicted",
        "k": 10,
        "index_dir": "/elsewhere/indexes/mini",
        "backend": "embedded",
        "folds": 5,
        "retrieval": True,
        "decision": "transcript+direct+plain",
        "index_paragraphs": 159930,
    }
    run = {
        "format": 1,
        "identity": old,
        "options": {**old, "limit": None, "batch_size": 4, "signals": ["compact"]},
        "index": {
            "index_dir": "/elsewhere/indexes/mini",
            "backend": "embedded",
            "paragraph_count": 159930,
            "preset": "mini",
            "built_at": "x",
        },
    }
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "traces.jsonl").write_text('{"qid": "x"}\n')
    opts = EvalOptions(split="dev", model="m", decomposition="predicted", batch_size=4)
    assert check_run_file(tmp_path, opts, {**INDEX, "built_at": "y"})["format"] == 1  # same identity: resumes
    with pytest.raises(SqaError, match=r"index.paragraph_count: 159930 -> 9251"):
        check_run_file(tmp_path, opts, {**INDEX, "corpus": "preset:mini", "paragraph_count": 9251})
    run["identity"]["decision"] = "transcript"
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(SqaError, match=r"decision: 'transcript' -> 'transcript\+direct\+plain'"):
        check_run_file(tmp_path, opts, INDEX)
    assert EvalOptions.from_dict(run["options"]) == opts  # old keys (index_dir, decision, signals) ignored


def test_signal_accuracy_scores_each_recorded_reading_against_gold():
    from sqa.eval.runner import signal_accuracy

    qs = select_questions("dev", 6)
    rows = [
        {"correct": True, "gold": q.answer, "signals": {"plain": 0.9 if q.answer else 0.1, "direct": 0.7}} for q in qs
    ]
    acc = signal_accuracy(rows)
    yes = sum(q.answer for q in qs) / len(qs)
    assert acc["plain"] == {"n": 6, "Accuracy": 1.0, "mean_p_yes": pytest.approx(0.1 + 0.8 * yes)}
    assert acc["direct"]["Accuracy"] == pytest.approx(yes)  # always yes
    assert signal_accuracy([{**r, "signals": {}} for r in rows]) == {}
