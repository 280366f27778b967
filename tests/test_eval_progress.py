"""Progress by default in ``sqa.evaluate``, ``Index.build`` and a Reader's first question (model
loading) (issue 48 item 2): a rich bar unless ``progress=False``, drawn on a terminal (and in
Jupyter: tests/test_notebook.py), with the rate in seconds per question below one a second."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sqa.render import progress as drawers
from sqa.render.progress import rate_text


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=120, color_system=None), out


@pytest.fixture
def reader(gold_index):
    import sqa
    from helpers import ScriptedModel

    model = ScriptedModel(["Who founded #0 Apple?", "When was #1 born?", "Is #2 before 1960?"])
    r = sqa.Reader(preset="steps", model=model, index=gold_index.index_dir)
    yield r
    r.close()


def test_rate_reads_seconds_per_question_below_one_a_second():
    assert rate_text(1 / 89) == "89.0 s/q" and rate_text(0.5) == "2.0 s/q"
    assert rate_text(2.5) == "2.50 q/s" and rate_text(1.0) == "1.00 q/s" and rate_text(None) == "– s/q"


def test_evaluate_draws_a_bar_by_default_and_nothing_with_progress_false(reader, tmp_path, monkeypatch, capfd):
    import sqa

    console, out = _terminal()
    monkeypatch.setattr(drawers, "default_console", lambda: console)
    run = sqa.evaluate(reader, split="dev", limit=2, out=tmp_path / "a")
    assert run.done == 2
    drawn = out.getvalue()
    assert "eval dev" in drawn and "2/2" in drawn and ("s/q" in drawn or "q/s" in drawn)

    console2, out2 = _terminal()
    monkeypatch.setattr(drawers, "default_console", lambda: console2)
    assert sqa.evaluate(reader, split="dev", limit=2, out=tmp_path / "b", progress=False).done == 2
    assert out2.getvalue() == ""
    captured = capfd.readouterr()
    assert "eval dev" not in captured.out + captured.err  # nothing went to the real stdout / stderr


def test_evaluate_draws_on_a_given_console_and_not_in_a_log(reader, tmp_path):
    import sqa

    console, out = _terminal()
    sqa.evaluate(reader, split="dev", limit=1, out=tmp_path / "a", progress=console)
    assert "1/1" in out.getvalue()
    log = io.StringIO()  # not a terminal: a log gets no bar
    sqa.evaluate(reader, split="dev", limit=1, out=tmp_path / "b", progress=Console(file=log))
    assert log.getvalue() == ""


def test_index_build_draws_a_bar_by_default_and_nothing_with_progress_false(tmp_path, monkeypatch):
    import sqa
    from helpers import real_lines

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(real_lines(300)) + "\n", encoding="utf-8")
    console, out = _terminal()
    monkeypatch.setattr(drawers, "default_console", lambda: console)
    sqa.Index.build(corpus=[corpus], path=tmp_path / "a").close()
    assert "c.jsonl" in out.getvalue() and "300 paragraphs" in out.getvalue()  # the file's bar, its count
    console2, out2 = _terminal()
    monkeypatch.setattr(drawers, "default_console", lambda: console2)
    sqa.Index.build(corpus=[corpus], path=tmp_path / "b", progress=False).close()
    log = io.StringIO()  # not a terminal: no bar
    sqa.Index.build(corpus=[corpus], path=tmp_path / "c", progress=Console(file=log)).close()
    assert out2.getvalue() == "" and log.getvalue() == ""
    with sqa.Index(tmp_path / "b") as b, sqa.Index(tmp_path / "c") as c:
        assert len(b) == len(c) == 300


def test_the_first_ask_says_the_model_loads_and_in_how_long(gold_index, monkeypatch):
    import re

    import sqa
    from helpers import ScriptedModel

    def reader(**kw):
        model = ScriptedModel(["Who founded #0 Apple?", "When was #1 born?", "Is #2 before 1960?"] * 2)
        return sqa.Reader(preset="steps", model=model, index=gold_index.index_dir, **kw)

    console, out = _terminal()
    monkeypatch.setattr(drawers, "default_console", lambda: console)
    with reader() as r:
        r.ask("Was Steve Jobs born before 1960?")
        assert re.search(r"loaded \S+ in \d+\.\d s", out.getvalue()), out.getvalue()
        n = len(out.getvalue())
        r.ask("Was Steve Jobs born before 1960?")  # loaded once: nothing more
        assert len(out.getvalue()) == n
    console2, out2 = _terminal()
    monkeypatch.setattr(drawers, "default_console", lambda: console2)
    with reader(progress=False) as r:
        r.ask("Was Steve Jobs born before 1960?")
    log = io.StringIO()
    with reader(progress=Console(file=log)) as r:
        r.ask("Was Steve Jobs born before 1960?")
    assert out2.getvalue() == "" and log.getvalue() == ""
    with pytest.raises(sqa.BadInput, match="progress"):
        reader(progress="yes")
