"""Issue 50, items 7, 9 and 10: bad input ends in one line naming what and where (file, line,
field), exit 2, nothing lost; a chat template that raises or runs away is one such line, not a
traceback or a run without end; a bad features meta names its setting and leaves no store behind;
corpus, download, predictions and dataset files are named with what to fix."""

from __future__ import annotations

import json
import time

import pytest

from helpers import fake_states_sqa, one_error_line, run_sqa, tiny_gguf
from sqa.indexing.download import CORPUS_NAME
from sqa.strategyqa import load_questions
from sqa.types import BadInput, ChatPrompt

PROMPT = ChatPrompt((("system", "Answer yes or no."), ("user", "Question: Is the sun a star?")), "Answer:")
RAISES = {  # a template that raises as it renders, and what the line must name
    "division": ("{{ messages|length // 0 }}", "ZeroDivisionError"),
    "recursion": ("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}", "RecursionError"),
    "huge string": ("{{ 'x' * (messages|length * 50000000) }}", "characters"),
    "huge sum": (
        "{% set ns = namespace(s='xy') %}{% for i in range(26) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
        "characters",
    ),
    "huge join": (
        "{% set ns = namespace(s='xy') %}{% for i in range(26) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "characters",
    ),
    "huge padding": ("{{ messages[0].content.ljust(100000000) }}", "characters"),
    "huge format": ("{{ '{:>100000000}'.format(1) }}", "characters"),
    "huge filter": ("{{ messages[0].content|center(100000000) }}", "characters"),
}
OK_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


# --- item 7: chat templates ---------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(RAISES))
def test_a_chat_template_that_raises_is_one_bad_input_naming_its_source_and_the_error(case):
    from sqa.models.chat import ChatTemplate

    text, named = RAISES[case]
    t = ChatTemplate(text, "gguf", where="m.gguf (its tokenizer.chat_template)")
    start = time.monotonic()
    with pytest.raises(BadInput) as e:
        t.render(PROMPT)
    msg = str(e.value)
    assert msg.startswith("m.gguf (its tokenizer.chat_template): ") and named in msg and "\n" not in msg, msg
    assert "--chat-template FILE" in msg and time.monotonic() - start < 30


def test_a_chat_template_that_runs_past_its_time_limit_is_one_bad_input(monkeypatch):
    import sqa.models.chat as chat

    monkeypatch.setattr(chat, "RENDER_SECONDS", 1.0)
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    t = chat.ChatTemplate(loops, "file", where="slow.jinja")
    start = time.monotonic()
    with pytest.raises(BadInput, match=r"^slow\.jinja: .*1 s"):
        t.render(PROMPT)
    assert time.monotonic() - start < 20
    assert chat.ChatTemplate(OK_TEMPLATE, "file", where="ok.jinja").render(PROMPT).startswith("system: Answer")


def test_the_cli_ends_a_raising_gguf_or_file_template_in_one_line_exit_2(tmp_path):
    pytest.importorskip("cyllama", reason="llama.cpp's binding (the models extra) reads the GGUF")
    gguf = tiny_gguf(tmp_path / "div.gguf", RAISES["division"][0])
    (tmp_path / "deep.jinja").write_text(RAISES["recursion"][0], encoding="utf-8")
    base = ["eval", "--reader", "steps", "--no-retrieval", "--split", "dev", "--limit", "1", "--model", gguf]
    for extra, where, named in (
        ([], "div.gguf (its tokenizer.chat_template)", "ZeroDivisionError"),
        (["--chat-template", tmp_path / "deep.jinja"], "deep.jinja", "RecursionError"),
    ):
        out = tmp_path / f"out{len(extra)}"
        r = run_sqa([*base, "--out", out, *extra], env={"SQA_HOME": str(tmp_path / "home")}, timeout=90, cwd=tmp_path)
        line = one_error_line(r, notices=True)
        assert where in line and named in line, line


def test_a_transformers_checkpoint_with_a_raising_template_file_is_one_bad_input(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_hf import build_tiny_checkpoint

    import sqa.models.chat as chat
    from sqa.models.hf import HFModel

    d = build_tiny_checkpoint(tmp_path / "tiny-qwen2")
    for name, text, named in (
        ("div.jinja", RAISES["division"][0], "ZeroDivisionError"),
        ("deep.jinja", RAISES["recursion"][0], "RecursionError"),
        ("slow.jinja", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "1 s"),
    ):
        (tmp_path / name).write_text(text, encoding="utf-8")
        monkeypatch.setattr(chat, "RENDER_SECONDS", 1.0, raising=False)
        m = HFModel(str(d), device="cpu", chat_template=tmp_path / name)
        with pytest.raises(BadInput) as e:
            m.render(PROMPT)
        assert str(e.value).startswith(f"{tmp_path / name}: ") and named in str(e.value), str(e.value)


@pytest.mark.parametrize("command", ["ask", "eval"])
def test_chat_template_with_the_facts_reader_plain_prompts_is_refused_saying_what_to_use(tmp_path, command):
    (tmp_path / "ok.jinja").write_text(OK_TEMPLATE, encoding="utf-8")
    args = [command, "--model", "nowhere.gguf", "--chat-template", "ok.jinja"]
    args += ["Is the sun a star?"] if command == "ask" else ["--limit", "1", "--out", tmp_path / "out"]
    line = one_error_line(run_sqa(args, env={"SQA_HOME": str(tmp_path / "home")}, timeout=120, cwd=tmp_path))
    assert "--chat-template" in line and "no effect" in line, line
    assert "--apply-chat-template" in line and "--reader steps" in line, line


# --- item 9: a features meta with a bad setting ----------------------------------------------------


def test_features_import_names_the_meta_file_and_bad_setting_and_leaves_no_store(tmp_path, gold_index):
    from sqa.facts.features import FactSettings
    from sqa.facts.store import store_meta
    from sqa.pipeline import index_info

    home, dump = tmp_path / "home", tmp_path / "dump"
    dump.mkdir()
    good = store_meta("openai:ORG--NAME", None, FactSettings(sentence_paragraphs=3), index_info(gold_index.index_dir))
    bad = json.loads(json.dumps(good))
    bad["facts"]["k"] = "ten"
    (dump / "meta.json").write_text(json.dumps(bad))
    import numpy as np

    from sqa.facts.prompt import QuestionFeatures
    from sqa.facts.sources import Fact

    v = np.arange(8, dtype=np.float32) / 8
    fact = [Fact("a fact", "wikipedia", "A-1", 3.0)]
    rec = QuestionFeatures("q1", "Is it?", fact, ["A-1"], [5.0], {"plain": v}, {"plain": 0.1}, label=True).to_dict()
    rec["made_with"] = "0123456789abcdef"  # another store's stamp
    (dump / "train.jsonl").write_text(json.dumps(rec) + "\n")
    args = ["features", "import", dump / "train.jsonl", "--meta", dump / "meta.json"]
    line = one_error_line(
        fake_states_sqa(home, *args, "--model", "openai:ORG/NAME", "--index-dir", gold_index.index_dir)
    )
    assert str(dump / "meta.json") in line and "facts.k" in line and "ten" in line, line
    assert "made_with" not in line, line
    assert not (home / "features").exists(), list((home / "features").rglob("*"))
    # a meta that is right, records of another store: refused (naming the record), and no new store is left
    (dump / "meta.json").write_text(json.dumps(good))
    line = one_error_line(
        fake_states_sqa(home, *args, "--model", "openai:ORG/NAME", "--index-dir", gold_index.index_dir)
    )
    assert f"{dump / 'train.jsonl'}:1: field 'made_with'" in line, line
    assert not (home / "features").exists(), list((home / "features").rglob("*"))


# --- item 10: corpus, download, predictions and dataset files ----------------------------------------


def _paragraphs(n: int) -> list[str]:
    return [
        json.dumps({"title": f"Thing {i}", "para_id": i, "para": f"A paragraph about thing {i}."}) for i in range(n)
    ]


@pytest.mark.parametrize("first", ["oops, not JSON", '{"title": "cut', '{"title": "T", "para": 5}'])
def test_a_bad_first_corpus_line_is_skipped_and_counted_like_the_others(tmp_path, first):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join([first, *_paragraphs(5)]) + "\n", encoding="utf-8")
    r = run_sqa(["index", "--corpus", corpus, "--index-dir", tmp_path / "idx"])
    assert r.returncode == 0, r.stderr
    assert "paragraphs read 5, indexed 5, skipped (malformed) 1" in r.stdout and f"{corpus}:1:" in r.stderr


def test_a_corpus_line_whose_text_is_not_unicode_is_skipped_naming_it_not_resumed(tmp_path):
    corpus = tmp_path / "c.jsonl"
    lines = _paragraphs(4) + ['{"title": "Bad", "para_id": 9, "para": "half \\ud800 a character"}']
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = run_sqa(["index", "--corpus", corpus, "--index-dir", tmp_path / "idx"])
    assert r.returncode == 0, r.stderr
    assert "paragraphs read 4, indexed 4, skipped (malformed) 1" in r.stdout, r.stdout
    assert f"{corpus}:5:" in r.stderr and "'para'" in r.stderr and "run the same command" not in r.stderr, r.stderr


def test_a_partial_file_in_the_download_folder_says_how_to_index_it(tmp_path):
    home = tmp_path / "home"
    (home / "corpus").mkdir(parents=True)
    part = home / "corpus" / (CORPUS_NAME + ".part")
    part.write_text("\n".join(_paragraphs(3)) + "\n")
    r = run_sqa(
        ["index", "--corpus", "full", "--corpus-url", "http://127.0.0.1:9/c.jsonl.gz", "--index-dir", tmp_path / "i"],
        env={"SQA_HOME": str(home)},
    )
    line = one_error_line(r)
    assert f"--corpus full --corpus {part}" in line and "move it away" in line, line
    assert part.read_text().count("\n") == 3


def test_scoring_refuses_a_qid_predicted_twice_and_an_empty_object(tmp_path):
    qids = [q.qid for q in load_questions("dev")[:2]]
    dup = tmp_path / "dup.json"
    dup.write_text(
        "{\n"
        + f'"{qids[0]}": {{"answer": true}},\n"{qids[1]}": {{"answer": true}},\n"{qids[0]}": {{"answer": false}}\n}}'
    )
    line = one_error_line(run_sqa(["eval", "score", dup, "--allow-missing"]))
    assert str(dup) in line and qids[0] in line and "twice" in line, line
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    line = one_error_line(run_sqa(["eval", "score", empty, "--allow-missing"]))
    assert str(empty) in line and "no predictions" in line, line


@pytest.mark.parametrize("name", ["latin1.json", "latin1.json.gz"])
def test_a_dataset_file_that_is_not_utf8_is_named(tmp_path, name):
    import gzip

    data = json.dumps([{"qid": "c1", "question": "Is the caf\u00e9 open?"}], ensure_ascii=False).encode("latin-1")
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    r = run_sqa(["eval", "--dataset", path, "--model", "nowhere.gguf", "--no-retrieval", "--out", tmp_path / "o"])
    line = one_error_line(r)
    assert str(path) in line and "UTF-8" in line, line


def test_a_question_that_is_not_unicode_is_named_not_blamed_on_the_file(tmp_path):
    ds = tmp_path / "qs.jsonl"
    ds.write_text(
        json.dumps({"qid": "s1", "question": "Is the sun a star?"})
        + "\n"
        + '{"qid": "s2", "question": "Is the \\ud800 moon hot?"}\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    r = fake_states_sqa(
        tmp_path / "home", "eval", "--dataset", ds, "--model", "fake-states", "--no-retrieval", "--out", out
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{ds}: entry 2 (s2) skipped: field 'question'" in r.stderr and "the file" not in r.stderr, r.stderr
    assert len((out / "predictions.json").read_text().split('"answer"')) == 2  # the good question answered
    # a question given on the command line with bytes that are not UTF-8: the question is named
    import os
    import subprocess
    import sys

    from helpers import FAKE_STATES_MODEL, REPO

    env = {**os.environ, "SQA_HOME": str(tmp_path / "home"), "PYTHONPATH": REPO, "SQA_TEST_READ_DELAY": "0"}
    argv = [os.fsencode(a) for a in (sys.executable, "-c", FAKE_STATES_MODEL, "ask", "--no-retrieval")]
    r = subprocess.run([*argv, b"Is the \xff moon hot?"], env=env, capture_output=True, text=True, timeout=120)
    line = one_error_line(r)
    assert "question" in line and "the file" not in line, line
