"""``sqa compare`` down to the question (issue 48 item 4): per pair, the qids each run alone got
right (JSON, Python, the page's filters for both directions), checked against an independent
computation from the runs' predictions.json files; Holm-adjusted p-values with more than two runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_sqa

from sqa.eval.compare import compare_runs, holm_adjusted
from sqa.strategyqa import load_questions
from sqa.types import SqaError

RUNS = Path(__file__).resolve().parents[1] / "bench" / "results" / "runs"
FACTS, PLAIN, ORACLE = RUNS / "dev229-facts-h2055", RUNS / "dev229-plain-h2055", RUNS / "dev229-oracle-facts-h2055"
pytest.importorskip("scipy", reason="scipy (the models extra) runs sqa compare's McNemar test")


def _right(run: Path) -> set[str]:
    """The dev qids a run answered right, from its predictions.json and the dev file's labels."""
    preds = json.loads((run / "predictions.json").read_text())
    return {q.qid for q in load_questions("dev") if q.qid in preds and preds[q.qid]["answer"] == q.answer}


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04); capped at 1
    assert holm_adjusted([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjusted([0.5, 0.6]) == pytest.approx([1.0, 1.0]) and holm_adjusted([0.2]) == [0.2]


def test_compare_json_lists_the_qids_each_run_alone_got_right():
    r = run_sqa(["compare", FACTS, PLAIN, "--json"])
    assert r.returncode == 0, r.stderr
    pair = json.loads(r.stdout)["pairs"][0]
    a, b = _right(FACTS), _right(PLAIN)
    assert set(pair["only_a_qids"]) == a - b and set(pair["only_b_qids"]) == b - a
    assert (len(pair["only_a_qids"]), len(pair["only_b_qids"])) == (pair["only_a"], pair["only_b"]) == (6, 12)
    assert pair["mcnemar_p_holm"] == pair["mcnemar_p"]  # one pair: nothing to adjust


def test_only_right_in_python_by_name_or_index():
    c = compare_runs([FACTS, PLAIN])
    assert c.only_right(0, 1) == c.only_right("dev229-facts-h2055", "dev229-plain-h2055")
    assert set(c.only_right(1, 0)) == _right(PLAIN) - _right(FACTS)
    assert c.only_right(0, 1) == [q for q in c.qids if q in _right(FACTS) - _right(PLAIN)]  # shared order
    with pytest.raises(SqaError, match="no run 'x'"):
        c.only_right("x", 0)


def test_three_runs_get_holm_adjusted_p_values_beside_the_raw_ones(tmp_path):
    c = compare_runs([FACTS, PLAIN, ORACLE], resamples=200)
    raw = [p.mcnemar_p for p in c.pairs]
    assert c.holm_p == pytest.approx(holm_adjusted(raw)) and all(h >= p for h, p in zip(c.holm_p, raw))
    assert [p["mcnemar_p_holm"] for p in c.to_dict()["pairs"]] == c.holm_p
    r = run_sqa(["compare", FACTS, PLAIN, ORACLE], env={"COLUMNS": "300"})
    assert r.returncode == 0, r.stderr
    assert "Holm 1979" in r.stdout
    for p, h in zip(c.pairs, c.holm_p):
        assert f"McNemar p = {p.mcnemar_p:.4f} (Holm p = {h:.4f})" in r.stdout
    from sqa.eval.html import write_comparison_html

    html = write_comparison_html(tmp_path / "three.html", c).read_text(encoding="utf-8")
    assert '<th title="adjusted for all pairs, Holm 1979">Holm p</th>' in html
    for h in c.holm_p:
        assert f"<td>{h:.4f}</td>" in html
    assert html.count('data-filter="only-') == 6  # each ordered pair of the three runs
    assert "dev229-facts-h2055 right, dev229-plain-h2055 wrong" in html
    two = run_sqa(["compare", FACTS, PLAIN], env={"COLUMNS": "300"})
    assert "Holm" not in two.stdout  # two runs: one test, nothing to adjust


def test_the_page_has_a_filter_for_each_direction(tmp_path):
    page = tmp_path / "cmp.html"
    r = run_sqa(["compare", FACTS, PLAIN, "--html", page])
    assert r.returncode == 0, r.stderr
    html = page.read_text(encoding="utf-8")
    assert 'data-filter="only-0-1">only dev229-facts-h2055 right<' in html
    assert 'data-filter="only-1-0">only dev229-plain-h2055 right<' in html
    rows = re.findall(r'<tr class="q [^"]*" data-qid="([^"]+)"[^>]*>', html)
    only01 = set(re.findall(r'data-qid="([^"]+)"[^>]*data-only-0-1="1"', html))
    only10 = set(re.findall(r'data-qid="([^"]+)"[^>]*data-only-1-0="1"', html))
    assert len(rows) == 229
    assert only01 == _right(FACTS) - _right(PLAIN) and only10 == _right(PLAIN) - _right(FACTS)
    assert "Holm p" not in html
