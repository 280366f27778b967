"""Progress by default in ``sqa.evaluate`` (issue 48 item 2): a rich bar unless ``progress=False``,
drawn on a terminal (and in Jupyter), with the rate in seconds per question below one a second."""

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
