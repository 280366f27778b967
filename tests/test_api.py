"""sqa's Python API (issue 39): the library calls the CLI is drawn over."""

from __future__ import annotations

import pytest

from helpers import StateModel


def test_out_of_fold_run_is_a_library_call_with_progress_events(tmp_path, gold_index, monkeypatch):
    """run_out_of_fold reads the features (one event per question), cross-fits, writes the run
    folder and the heads, and returns the Run; the same call again reads nothing."""
    pytest.importorskip("sklearn", reason="scikit-learn (the models extra) fits the answer heads")
    import sqa.models.registry as registry
    from sqa.api.out_of_fold import run_out_of_fold
    from sqa.eval.oof import OofOptions, oof_pool
    from sqa.eval.options import select_questions
    from sqa.settings import ReaderSettings

    monkeypatch.setenv("SQA_HOME", str(tmp_path / "home"))
    loads = []
    monkeypatch.setattr(registry, "load_model", lambda *a, **kw: loads.append(a) or StateModel())
    questions = select_questions("train", 12)
    pool, settings = oof_pool("fake-states", True, None, "train", questions)
    opts = OofOptions(
        split="train",
        questions=questions,
        reader=ReaderSettings(model="fake-states", index=gold_index.index_dir),
        limit=12,
        out=tmp_path / "run",
        pool=pool,
        settings=settings,
    )
    events = []
    run = run_out_of_fold(opts, events.append)
    stages = [e.stage for e in events]
    assert stages[0] == "loading" and stages.count("features") == 13 and "crossfit" in stages and stages[-1] == "heads"
    ticks = [e for e in events if e.stage == "features"]
    assert [e.done for e in ticks] == list(range(13)) and all(e.total == 12 for e in ticks)
    assert ticks[-1].seconds_per_question > 0
    assert run.path == tmp_path / "run" and run.complete and run.done == 12
    assert run.metrics["out_of_fold"]["scheme"] == "out-of-fold, 5 term-grouped folds" and len(run.predictions) == 12
    assert sorted(run.heads) == ["facts", "plain"] and all(p.is_file() for p in run.heads.values())
    assert run.options["head"] == "out-of-fold, 5 term-grouped folds (facts head)"
    assert run.settings == opts.reader  # run.json's "settings": the reader's, as given
    events.clear()
    again = run_out_of_fold(opts, events.append)  # resumed: nothing read, the model never loads
    assert len(loads) == 1 and "features" not in [e.stage for e in events]
    assert again.predictions == run.predictions


def test_the_retired_train_head_is_hidden_from_help_and_features_import_is_listed(capsys):
    from sqa.cli import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "features" in out and "train-head" not in out


# the public API, held as httpx's tests/test_exported_members.py holds its own: adding or removing a
# name is a decision, made here
EXPORTED = [
    "Answer",
    "BadInput",
    "Fact",
    "HeadNotFound",
    "Hit",
    "Index",
    "IndexNotFound",
    "ModelNotFound",
    "Paragraph",
    "Question",
    "Reader",
    "ReaderSettings",
    "Run",
    "RunNotFound",
    "ServerError",
    "ServerLost",
    "SqaError",
    "SqaWarning",
    "StoreMismatch",
    "__version__",
    "compare",
    "Comparison",
    "evaluate",
    "load_questions",
    "presets",
    "score",
]


def test_exported_members_are_the_curated_list_and_each_is_documented():
    import inspect

    import sqa

    assert sorted(sqa.__all__) == sorted(EXPORTED)
    for name in sqa.__all__:
        if name == "__version__":
            continue
        obj = getattr(sqa, name)
        doc = inspect.getdoc(obj) or ""
        assert len(doc) > 40, f"sqa.{name} needs a docstring"
        if inspect.isfunction(obj):  # functions say what they return and raise
            assert "Raise" in doc or "raise" in doc, f"sqa.{name}: say what it raises"
    for name in ("Index", "Reader"):
        for attr, member in vars(getattr(sqa, name)).items():
            if not attr.startswith("_") and callable(getattr(member, "__func__", member)):
                assert inspect.getdoc(getattr(getattr(sqa, name), attr)), f"sqa.{name}.{attr} needs a docstring"
    assert set(dir(sqa)) >= set(EXPORTED)
    with pytest.raises(AttributeError):
        sqa.nothing_like_this  # noqa: B018


def test_import_sqa_is_fast_and_loads_no_engine_or_runtime():
    import subprocess
    import sys

    code = (
        "import sys, sqa; import sqa.api; bad = [m for m in ('torch', 'tantivy', 'llama_cpp', 'numpy', 'rich', "
        "'openai', 'sklearn') if m in sys.modules]; print(bad)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]", r.stdout


def test_index_build_is_resumable_searches_and_gets(tmp_path, capsys):
    import json

    import sqa
    from helpers import real_lines

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(real_lines(300)) + "\n", encoding="utf-8")
    seen = []
    index = sqa.Index.build(corpus=[corpus], path=tmp_path / "idx", progress=seen.append)
    assert seen and seen[-1].indexed == 300 and len(index) == 300
    title = json.loads(real_lines(1)[0])["title"]
    hits = index.search(title, k=3)
    assert [h.rank for h in hits] == [1, 2, 3] and hits[0].score >= hits[1].score
    assert hits[0].title == title and hits[0].evidence_id.startswith(title) and hits[0].text
    assert [p.evidence_id for p in index.get([hits[1].evidence_id, "No such-1"])] == [hits[1].evidence_id]
    index.close()
    seen.clear()
    with sqa.Index.build(corpus=[corpus], path=tmp_path / "idx", progress=seen.append) as again:  # a no-op
        assert len(again) == 300 and seen == []
    with pytest.raises(sqa.BadInput):
        again.search("   ")
    with pytest.raises(sqa.IndexNotFound, match="no index here"):
        sqa.Index(tmp_path / "nothing")
    with pytest.raises(sqa.BadInput, match="unknown corpus"):
        sqa.Index.build(corpus="tiny", path=tmp_path / "x")


def test_an_index_is_built_already_for_the_same_corpus_content_at_another_path(tmp_path):
    """The "already built" check compares the corpus's content (sizes + sha256), not where its
    files lie: a moved copy of the corpus (a moved checkout or venv) opens the index as it is; the
    same size with other bytes, or an older manifest's other path, builds again."""
    import json
    import shutil

    import sqa
    from helpers import real_lines
    from sqa.api.index import build_index_dir
    from sqa.indexing import read_manifest

    first = tmp_path / "a" / "c.jsonl"
    first.parent.mkdir()
    first.write_text("\n".join(real_lines(200)) + "\n", encoding="utf-8")
    idx = tmp_path / "idx"
    sqa.Index.build(corpus=[first], path=idx).close()
    built = read_manifest(idx)
    assert [c["bytes"] for c in built["corpus_content"]] == [first.stat().st_size]
    assert built["corpus_files"] == [str(first.resolve())]  # informational: where they were
    moved = tmp_path / "b" / "renamed.jsonl"
    moved.parent.mkdir()
    shutil.copyfile(first, moved)
    shutil.rmtree(first.parent)  # the old checkout is gone
    notes = []
    assert build_index_dir([moved], idx, on_note=notes.append) is None
    assert "already built" in notes[0] and read_manifest(idx) == built
    # the same size, other bytes: a different corpus, built again (paragraphs of the same IDs replaced)
    text = moved.read_text(encoding="utf-8")
    moved.write_text(text.replace("a", "b", 1) if "a" in text else text.replace("e", "f", 1), encoding="utf-8")
    assert moved.stat().st_size == built["corpus_content"][0]["bytes"]
    notes.clear()
    with pytest.warns(sqa.SqaWarning, match="evidence ID seen before"):
        report = build_index_dir([moved], idx, on_note=notes.append)
    assert (
        report is not None
        and not notes
        and read_manifest(idx)["corpus_content"][0]["sha256"] != (built["corpus_content"][0]["sha256"])
    )
    # a manifest written before corpus_content: compared by path as then (the same path: built)
    m = read_manifest(idx)
    del m["corpus_content"]
    (idx / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    assert build_index_dir([moved], idx) is None


def test_reader_asks_and_evaluate_writes_a_resumable_run(tmp_path, gold_index):
    """The steps preset over the gold index with a scripted model: ask, ask_many, evaluate on 3 dev
    questions into a run folder, the same call again answers nothing new; score agrees."""
    import sqa
    from helpers import ScriptedModel

    model = ScriptedModel(["Who founded #0 Apple?", "When was #1 born?", "Is #2 before 1960?"])
    reader = sqa.Reader(preset="steps", model=model, index=gold_index.index_dir)
    assert not reader.loaded
    a = reader.ask("Did Aristotle use a laptop?")
    assert isinstance(a, sqa.Answer) and reader.loaded
    assert a.answer == (a.p_yes >= 0.5) and a.confidence == max(a.p_yes, 1 - a.p_yes) and len(a.steps) == 3
    assert [s.answer for s in a.steps][:2] == ["ANSWER1", "ANSWER2"] and a.model == "scripted"
    assert a.to_dict()["question"] == "Did Aristotle use a laptop?" and a.paragraphs
    many = reader.ask_many(["Is the sun a star?", "Can a goldfish drive?"], batch_size=1)
    assert [x.question for x in many] == ["Is the sun a star?", "Can a goldfish drive?"]
    progress = []
    run = sqa.evaluate(reader, split="dev", limit=3, out=tmp_path / "run", progress=progress.append)
    assert run.complete and run.done == run.new == 3 and progress[-1].done == 3
    assert set(run.predictions) == {q.qid for q in sqa.load_questions("dev", limit=3)}
    assert run.metrics["n"] == 3 and 0 <= run.metrics["Accuracy"] <= 1
    assert sqa.score(run, "dev", allow_missing=True)["Accuracy"] == pytest.approx(run.metrics["Accuracy"])
    again = sqa.evaluate(reader, split="dev", limit=3, out=tmp_path / "run")
    assert again.new == 0 and again.predictions == run.predictions
    with pytest.raises(sqa.SqaError, match="other options"):  # another run's folder is refused, nothing lost
        sqa.evaluate(
            sqa.Reader(preset="steps", model=model, index=gold_index.index_dir, k=5),
            split="dev",
            limit=3,
            out=tmp_path / "run",
        )
    with pytest.raises(sqa.BadInput, match="unknown preset"):
        sqa.Reader(preset="nope")
    with pytest.raises(sqa.BadInput, match="empty question"):
        reader.ask(" ")
    reader.close()


def test_load_questions_and_score_take_splits_files_and_runs(tmp_path):
    import json

    import sqa

    dev = sqa.load_questions("dev")
    assert len(dev) == 229 and all(isinstance(q.answer, bool) for q in dev)
    f = tmp_path / "mine.json"
    f.write_text(json.dumps([{"qid": q.qid, "question": q.question, "answer": q.answer} for q in dev[:4]]))
    assert [q.qid for q in sqa.load_questions(f)] == [q.qid for q in dev[:4]]
    assert len(sqa.load_questions("train", limit=7)) == 7
    with pytest.raises(sqa.BadInput, match="unknown split"):
        sqa.load_questions("devv")
    preds = {q.qid: {"answer": not q.answer} for q in dev}
    assert sqa.score(preds)["Accuracy"] == 0.0 and sqa.score(preds)["split"] == "dev"
    with pytest.raises(sqa.BadInput, match="not StrategyQA questions"):
        sqa.score({"nope": {"answer": True}})
    with pytest.raises(sqa.BadInput, match="no public labels"):
        sqa.score({q.qid: {"answer": True} for q in sqa.load_questions("test")[:3]}, "test")


def test_errors_are_the_subclass_a_caller_can_act_on(tmp_path):
    import sqa
    from sqa.models.registry import resolve_gguf

    with pytest.raises(sqa.ModelNotFound, match="not a built-in model"):
        resolve_gguf("no-such-model")
    with pytest.raises(sqa.ModelNotFound, match="not found"):
        resolve_gguf(str(tmp_path / "gone.gguf"))
    with pytest.raises(sqa.BadInput, match="file not found"):
        sqa.load_questions(tmp_path / "none.json")
    with pytest.raises(sqa.BadInput, match="corpus file not found"):
        sqa.Index.build(corpus=[tmp_path / "none.jsonl"], path=tmp_path / "idx")
    assert issubclass(sqa.ServerLost, sqa.ServerError) and all(
        issubclass(getattr(sqa, n), sqa.SqaError)
        for n in ("BadInput", "IndexNotFound", "ModelNotFound", "HeadNotFound", "StoreMismatch", "ServerError")
    )


def test_sqa_index_preset_is_the_old_spelling_of_corpus_with_a_one_line_pointer(gold_index, capsys):
    from sqa.cli import main

    assert main(["index", "--preset", "strategyqa", "--index-dir", str(gold_index.index_dir)]) == 0
    err = capsys.readouterr().err.splitlines()
    pointer = [x for x in err if x.startswith("warning:")]
    assert pointer == [
        "warning: `sqa index --preset strategyqa` is now `sqa index --corpus strategyqa` (--preset "
        "names reader configurations in ask and eval)"
    ]
    assert any("already built" in x for x in err)
    assert main(["index", "--corpus", "strategyqa", "--index-dir", str(gold_index.index_dir)]) == 0
    assert not [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning:")]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--split", "train", "--limit", "5", "--answering", "head"],
            "--answering head: the train questions are answered out-of-fold",
        ),
        (
            ["--split", "dev", "--limit", "5", "--answering", "out-of-fold"],
            "--answering out-of-fold: the facts reader answers dev",
        ),
        (["--split", "dev", "--answering", "sometimes"], "answering 'sometimes': use one of auto, head, out-of-fold"),
    ],
)
def test_how_a_split_is_answered_is_an_option_refused_where_it_cannot_hold(tmp_path, args, message):
    from helpers import one_error_line, run_sqa

    line = one_error_line(
        run_sqa(
            ["eval", *args, "--out", tmp_path / "run", "--index-dir", tmp_path / "none"],
            env={"SQA_HOME": str(tmp_path / "home")},
        )
    )
    assert message in line and not (tmp_path / "run").exists()


def test_search_many_answers_each_query_as_search_does(gold_index):
    import sqa

    index = sqa.Index(gold_index.index_dir)
    queries = ["Aristotle", "laptop invented", "Brooke Shields"]
    many = index.search_many(queries, k=3)
    assert [[h.evidence_id for h in hits] for hits in many] == [
        [h.evidence_id for h in index.search(q, k=3)] for q in queries
    ]
    assert len(many) == 3 and all(len(hits) == 3 for hits in many)
    with pytest.raises(sqa.BadInput, match="queries must be a list, not one str"):
        index.search_many("Aristotle")
    with pytest.raises(sqa.BadInput, match=r"queries\[1\] is empty"):
        index.search_many(["Aristotle", " "])


def test_the_literal_names_are_the_presets_methods_and_splits_sqa_takes():
    """``sqa.types.PresetName``, ``MethodName`` and ``SplitName`` (what an editor completes in
    ``sqa.Reader(preset=...)``, ``method=`` and ``sqa.evaluate(split=...)``) list exactly the
    names sqa accepts."""
    import typing

    from sqa.methods.registry import METHODS, MethodName, load_method
    from sqa.presets import PRESETS
    from sqa.strategyqa import SPLITS
    from sqa.types import PresetName, SplitName

    assert set(typing.get_args(PresetName)) == set(PRESETS)
    assert METHODS == typing.get_args(MethodName) and len(set(METHODS)) == len(METHODS) >= 12
    assert [load_method(n).name for n in METHODS] == list(METHODS)  # each name loads its method
    assert set(typing.get_args(SplitName)) == set(SPLITS)
    import sqa.api.evaluate
    import sqa.api.reader

    reader, evaluate = sqa.api.reader.Reader.__init__.__annotations__, sqa.api.evaluate.evaluate.__annotations__
    assert "PresetName" in reader["preset"] and "MethodName" in reader["method"]
    assert "SplitName" in evaluate["split"] and "MethodName" in evaluate["method"]
