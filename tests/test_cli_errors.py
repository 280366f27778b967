"""Bad input as a new user types it, through the real ``sqa`` process with the README's install
(click hidden when typer vendors it): one ``error:`` line on stderr, exit status 2, no traceback,
nothing lost. Ctrl-C: 130."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import REPO, one_error_line, run_sqa, step_reader
from sqa.cli import main
from sqa.indexing.embedded import TantivyBackend
from sqa.strategyqa import load_questions

# --- usage errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expect",
    [
        (["search"], "missing argument"),
        (["search", "black sea", "-k", "abc"], "invalid value for '-k'"),
        (["search", "black sea", "--bogus"], "no such option: --bogus"),
        (["bogus"], "no such command 'bogus'"),
        (["index", "--commit-every", "many"], "invalid value for '--commit-every'"),
        (["eval", "score"], "missing argument"),
        (["ask"], "missing argument"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args, expect):
    line = one_error_line(run_sqa(args, stdin=subprocess.DEVNULL))  # `sqa ask` on a terminal opens a prompt
    assert expect in line.lower()
    assert f"sqa {args[0]}" in line or args[0] == "bogus"
    assert "--help" in line


@pytest.mark.parametrize(
    "args", [["train-head"], ["train-head", "--limit", "20", "--features", "F"], ["train-head", "--help"]]
)
def test_train_head_is_retired_with_a_one_line_pointer(args):
    line = one_error_line(run_sqa(args, timeout=60))
    assert "`sqa train-head` is retired: `sqa eval --split train --model M`" in line


@pytest.mark.parametrize(
    "args, expect",
    [
        (
            ["eval", "--split", "train", "--head", "h.json"],
            "--head with --split train: these questions are answered out-of-fold",
        ),
        (["features", "import", "nope.jsonl.xz"], "nope"),
    ],
)
def test_out_of_fold_usage_errors_are_one_line(args, expect, tmp_path):
    assert expect in one_error_line(run_sqa(args, timeout=60))


@pytest.mark.parametrize(
    "args, expect",
    [
        (["--decomposition", "question"], "--decomposition goes with the steps reader"),
        (["--preset", "facts", "--decomposition", "predicted"], "--decomposition goes with the steps reader"),
        (["--reader", "steps", "--steps"], "--steps goes with the facts reader"),
        (["--preset", "steps", "--head", "h.json"], "--head goes with the facts reader"),
    ],
)
def test_ask_rejects_a_flag_its_reader_would_ignore_before_any_model_loads(args, expect):
    """A flag that does nothing for the chosen reader is one line and exit 2 (issue 33), not silently
    ignored; checked before the index or a model is opened (the index directory does not exist)."""
    line = one_error_line(run_sqa(["ask", "Is the sun a star?", *args, "--index-dir", "no-such-index"], timeout=60))
    assert expect in line


def test_bare_sqa_lists_the_commands_and_exits_2():
    r = run_sqa([])
    line = one_error_line(r)
    assert "no command given" in line
    for cmd in ("index", "search", "ask", "eval"):
        assert cmd in r.stdout  # the help goes to stdout


def test_help_still_exits_0():
    r = run_sqa(["search", "--help"])
    assert r.returncode == 0 and "QUERY" in r.stdout.upper() and r.stderr == ""


# --- search / ask / eval input ----------------------------------------------------------------------

BIG = "99999999999999999999"


def test_an_absurd_top_k_is_one_line(gold_index):
    d = str(gold_index.index_dir)
    for args in (
        ["search", "black sea", "-k", BIG, "--index-dir", d],
        ["search", "black sea", "-k", "10001", "--index-dir", d],
        ["ask", "Is the Black Sea deep?", "--k", BIG, "--index-dir", d],
    ):
        line = one_error_line(run_sqa(args))
        assert "10,000" in line and args[args.index("-k" if "-k" in args else "--k") + 1] in line
    from sqa.eval.runner import EvalOptions
    from sqa.types import SqaError

    with pytest.raises(SqaError, match=f"top-k must be from 1 to 10,000 \\(got {BIG}\\)"):
        EvalOptions(split="dev", model="m", k=int(BIG))
    with pytest.raises(SqaError, match="top-k must be from 1 to 10,000"):  # the backends check too
        gold_index.search("black sea", k=int(BIG))
    r = run_sqa(["search", "black sea", "-k", "10000", "--json", "--index-dir", d])  # the bound itself works
    assert r.returncode == 0 and 100 < len(json.loads(r.stdout)) < 9_251  # every paragraph with a query word


def test_a_partial_index_is_searched_with_a_warning_and_an_empty_one_is_an_error(tmp_path, gold_index):
    partial = tmp_path / "partial"
    shutil.copytree(gold_index.index_dir, partial)
    os.replace(partial / "manifest.json", partial / "checkpoint.json")  # a build interrupted after a checkpoint
    r = run_sqa(["search", "maximum depth of the Black Sea", "--json", "-k", "3", "--index-dir", partial])
    assert r.returncode == 0 and json.loads(r.stdout)[0]["evidence_id"] == "Black Sea-2"
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "partial index (9,251 paragraphs)" in lines[0]
    assert "sqa index" in lines[0]

    empty = tmp_path / "empty"
    TantivyBackend(empty).commit()  # a tantivy index without a paragraph
    for args in (["search", "black sea"], ["ask", "Is the Black Sea deep?", *step_reader("ask")]):
        line = one_error_line(run_sqa(args + ["--index-dir", empty]))
        assert f"{empty}: the index holds no paragraphs" in line and "sqa index" in line


def test_eval_out_pointing_at_a_file_is_one_line(tmp_path, gold_index):
    f = tmp_path / "notes.txt"
    f.write_text("mine", encoding="utf-8")
    line = one_error_line(
        run_sqa(
            [
                "eval",
                "--split",
                "dev",
                "--limit",
                "1",
                "--out",
                f,
                *step_reader("eval"),
                "--index-dir",
                gold_index.index_dir,
            ]
        )
    )
    assert f"--out {f}: is a file" in line and f.read_text(encoding="utf-8") == "mine"


def test_eval_score_of_a_non_utf8_file_a_directory_or_unknown_qids_is_one_line(tmp_path):
    dev = load_questions("dev")
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(
        json.dumps({dev[0].qid: {"answer": True, "decomposition": ["café?"]}}, ensure_ascii=False).encode("latin-1")
    )
    line = one_error_line(run_sqa(["eval", "score", latin1]))
    assert f"{latin1}: not UTF-8 text" in line
    line = one_error_line(run_sqa(["eval", "score", tmp_path]))
    assert f"{tmp_path}: is a directory" in line
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"not-a-qid": {"answer": True}, dev[0].qid: {"answer": False}}), encoding="utf-8")
    line = one_error_line(run_sqa(["eval", "score", unknown]))
    assert "1 of 2 predictions are for qids that are not StrategyQA questions, e.g. 'not-a-qid'" in line
    assert "test split" not in line


def test_a_failed_first_eval_does_not_block_the_same_command_later(tmp_path, gold_index, monkeypatch, capsys):
    """The first session fails (no index yet) after run.json was written; once the index exists the
    same command runs instead of refusing "index.paragraph_count: None -> 9251"."""
    import sqa.models.registry as reasoner_pkg
    from helpers import ScriptedModel

    model = ScriptedModel(["Who founded #0 Apple?", "When was #1 born?", "Is #2 before 1960?"])
    monkeypatch.setattr(reasoner_pkg, "load_model", lambda name, **kw: model)
    idx, out = tmp_path / "index", tmp_path / "run"
    args = ["eval", "--split", "dev", "--limit", "2", "--out", str(out), "--index-dir", str(idx), *step_reader("eval")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "no index here" in err and err.count("\n") == 1, err  # one line: no progress-bar frame before it
    assert json.loads((out / "run.json").read_text())["identity"]["index"]["paragraph_count"] is None
    shutil.copytree(gold_index.index_dir, idx)
    assert main(args) == 0
    assert "complete: 2/2 questions (2 new)" in capsys.readouterr().out
    assert json.loads((out / "run.json").read_text())["identity"]["index"]["paragraph_count"] == 9_251
    # a run that answered questions is still protected
    assert main(args + ["--k", "5"]) == 2
    assert "k: 10 -> 5" in capsys.readouterr().err


@pytest.mark.slow
def test_a_question_too_long_for_the_context_blames_the_question_not_k(gold_index):
    """The real 0.5B GGUF (4,096-token context): evidence is trimmed to a fixed size, so only the
    question can make the prompt overflow."""
    from sqa.models.registry import MODELS, assemble_gguf
    from sqa.types import SqaError

    try:
        assemble_gguf(MODELS["qwen2.5-coder-0.5b"])
    except SqaError as e:
        pytest.skip(f"0.5B model not available: {e}")
    question = "Is it true that " + " ".join(["the quick brown fox jumps over the lazy dog by the river"] * 600) + "?"
    line = one_error_line(
        run_sqa(
            [
                "ask",
                question,
                "--model",
                "qwen2.5-coder-0.5b",
                "-k",
                "3",
                *step_reader("ask"),
                "--index-dir",
                gold_index.index_dir,
            ]
        )
    )
    assert "does not fit the model's context of 4,096 tokens" in line and "shorten the question" in line
    assert "fewer evidence paragraphs" not in line and "n_ctx" not in line


def test_the_cpu_reader_without_its_bindings_is_one_line_naming_the_extra(monkeypatch, tmp_path):
    """Without the models extra (cyllama absent) loading the packaged reader is a SqaError naming the
    extra, not a ModuleNotFoundError traceback."""
    import sys

    from sqa.models.llamacpp import LlamaCppModel
    from sqa.types import SqaError

    for name in [m for m in sys.modules if m == "cyllama" or m.startswith("cyllama.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cyllama", None)  # import cyllama now raises ImportError
    with pytest.raises(SqaError, match=r"models extra"):
        LlamaCppModel(tmp_path / "m.gguf")


def test_eval_refuses_a_decomposition_the_facts_reader_would_ignore_before_loading_a_model(tmp_path, capsys):
    """``sqa eval --decomposition gold`` with the default facts reader is one line and exit 2 at once
    (no index or model is opened: the index directory does not even exist)."""
    from sqa.cli import main

    rc = main(
        [
            "eval",
            "--split",
            "dev",
            "--limit",
            "1",
            "--decomposition",
            "gold",
            "--index-dir",
            str(tmp_path / "no-index"),
            "--out",
            str(tmp_path / "run"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--reader steps" in err[0], err
    assert not (tmp_path / "run").exists()


def test_eval_help_groups_its_options_in_panels_and_hides_the_retired_flags():
    r = run_sqa(["eval", "--help"], env={"COLUMNS": "100"})
    assert r.returncode == 0
    panels = [line.split("─ ")[1].split(" ─")[0] for line in r.stdout.splitlines() if line.startswith("╭─ ")]
    assert panels[:5] == ["Options", "Basics", "Reader and method", "Advanced", "Served models"]
    rows = [line.strip("│ ").split()[0] for line in r.stdout.splitlines() if line.startswith("│ --")]
    assert "--split" in rows and "--method" in rows and "--base-url" in rows
    assert not {"--reader", "--oracle", "--retrieval/--no-retrieval"} & set(rows)
    assert len(r.stdout.splitlines()) <= 60  # 167 lines in one panel before; 127 with the panels alone
    r = run_sqa(["eval", "--oracle", "nonsense", "--limit", "1"])  # hidden, still accepted: its own error
    assert r.returncode == 2 and "No such option" not in r.stderr and "oracle" in r.stderr


def test_no_help_shows_a_bool_type_and_the_commands_come_in_the_workflows_order():
    """Every command's --help (the flags and --help itself) shows no ``<bool>``; ``sqa --help``
    lists index, search, ask, eval, compare, heads, features in that order; each option's first
    sentence is what --help shows, the whole text is docs/cli.md's (generated, up to date)."""
    from sqa.cli import click_command

    sys.path.insert(0, REPO)
    from experiments.cli_reference import DOC, _commands, reference

    names = [n for n, cmd in _commands(click_command()) if not getattr(cmd, "hidden", False)]
    for name in names:
        r = run_sqa([*name.split()[1:], "--help"], env={"COLUMNS": "100"})
        assert r.returncode == 0 and "<bool>" not in r.stdout, (name, r.stdout[-2000:])
    r = run_sqa(["--help"], env={"COLUMNS": "100"})
    listed = [
        line.strip("│ ").split()[0]
        for line in r.stdout.split("Commands")[1].splitlines()
        if line.startswith("│ ") and line[2] != " "
    ]
    assert listed == ["index", "search", "ask", "eval", "compare", "heads", "features"], listed
    assert DOC.read_text() == reference(), "run python -m experiments.cli_reference"
    assert "i.e. ~/.cache/sqa/index" in DOC.read_text() and "Holm" in DOC.read_text()
