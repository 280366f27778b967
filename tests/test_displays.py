"""Compact displays (issue 48 item 3): one-line reprs and escaped HTML (``_repr_html_``) of Run,
Answer, Comparison and Hit on the committed runs; ``Comparison.table()``; ``sqa.presets()``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

import sqa
from sqa.api.reader import Answer
from sqa.facts.sources import Fact
from sqa.presets import PRESETS
from sqa.types import Hit, Paragraph

RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "runs"


def test_run_repr_is_one_line_with_accuracy_interval_questions_method_model_folder():
    run = sqa.Run.open(RUNS / "dev229-facts")
    m = run.metrics
    lo, hi = m["Accuracy_interval95"]
    text = repr(run)
    assert "\n" not in text and len(text) < 200
    assert f"Accuracy {m['Accuracy']:.3f} [{lo:.3f}, {hi:.3f}]" in text
    assert "229 of 229 questions" in text and "facts" in text and m["model"] in text and str(run.path) in text
    html = run._repr_html_()
    assert f"{m['Accuracy']:.3f} [{lo:.3f}, {hi:.3f}]" in html and f"{m['Recall@10']:.3f}" in html
    assert "Recall@10" not in sqa.Run.open(RUNS / "dev229-plain")._repr_html_()  # no retrieval


def test_run_html_escapes_the_folder_name(tmp_path):
    folder = tmp_path / "<b>run&co"
    folder.mkdir()
    for f in ("run.json", "metrics.json", "predictions.json"):
        shutil.copy(RUNS / "dev229-plain" / f, folder / f)
    html = sqa.Run.open(folder)._repr_html_()
    assert "&lt;b&gt;run&amp;co" in html and "<b>" not in html


def test_answer_repr_and_html_keep_to_dict():
    a = Answer(
        "Is <script>x</script> & y alive?", False, 0.06, True, [Fact("t <i>", "wikipedia", "L-1", 1.0)], model="qw"
    )
    text = repr(a)
    assert text == "<sqa.Answer no, P(yes) 0.06 calibrated, qw: 'Is <script>x</script> & y alive?'>"
    html = a._repr_html_()
    assert "&lt;script&gt;" in html and "<script>" not in html and "t &lt;i&gt;" in html and "calibrated" in html
    assert a.to_dict() == {"question": a.question, "answer": False, "p_yes": 0.06, "calibrated": True}
    own = Answer("q" * 100, True, 0.7, False)
    assert "model's own" in repr(own) and len(repr(own)) < 110


def test_hit_repr_and_html():
    h = Hit(Paragraph("Laptop-48", "Laptop <x>", "A laptop & more"), 12.4, 1)
    assert repr(h) == "<sqa.Hit #1 Laptop-48 score 12.40: 'Laptop <x>'>"
    html = h._repr_html_()
    assert "Laptop-48" in html and "12.40" in html and "Laptop &lt;x&gt;" in html and "&amp; more" in html


def test_comparison_repr_table_and_html():
    pytest.importorskip("scipy", reason="scipy (the models extra) runs sqa compare's McNemar test")
    c = sqa.compare([RUNS / "dev229-facts-h2055", RUNS / "dev229-plain-h2055"], resamples=200)
    text = repr(c)
    assert "\n" not in text and c.qids[0] not in text and len(text) < 300
    assert "dev229-facts-h2055 0.664" in text and f"McNemar p {c.pairs[0].mcnemar_p:.3f}" in text
    t = c.table()
    assert isinstance(t, Table) and t.row_count == 1 and "Holm p" not in [col.header for col in t.columns]
    console = Console(record=True, width=200)
    console.print(t)
    out = console.export_text()
    assert "0.664" in out and "0.690" in out and f"{c.pairs[0].mcnemar_p:.4f}" in out
    html = c._repr_html_()
    assert "0.664" in html and "McNemar p" in html and "only A right" in html
    three = sqa.compare(
        [RUNS / "dev229-facts-h2055", RUNS / "dev229-plain-h2055", RUNS / "dev229-facts"], resamples=200
    )
    assert three.table().row_count == 3 and "Holm p" in [col.header for col in three.table().columns]
    assert "Holm" in repr(three)


def test_presets_lists_every_preset_with_its_summary():
    assert sqa.presets() == {name: p.summary for name, p in PRESETS.items()}
    import sqa.presets as module  # the submodule of the same name answers the same call

    assert module() == sqa.presets() and all(sqa.presets().values())


def test_the_eval_table_gives_accuracy_with_its_interval_and_seconds_to_a_tenth():
    """The table ``sqa eval`` prints at the end: Accuracy with its 95 % interval on one row,
    seconds per question with one decimal (not 4)."""
    from rich.console import Console

    from sqa.render.tables import run_table

    run = sqa.Run.open(RUNS / "dev229-facts-h2055")
    con = Console(record=True, width=100)
    con.print(run_table(run))
    text = con.export_text()
    lo, hi = run.metrics["Accuracy_interval95"]
    assert f"{run.metrics['Accuracy']:.3f} ({lo:.3f}–{hi:.3f})" in text
    assert f"{run.metrics['seconds_per_question']:.1f} " in text
    assert f"{run.metrics['seconds_per_question']:.4f}" not in text
