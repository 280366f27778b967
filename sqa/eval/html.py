"""``report.html``: one self-contained page per run (written beside ``report.md``) or per comparison
(``sqa compare --html FILE``, ``sqa eval --preset A,B``), drawn from the run files alone.

Self-contained: inline CSS, inline vanilla JavaScript and inline SVG charts, a Content-Security-
Policy of ``default-src 'none'`` (inline styles and scripts allowed, nothing fetched), no URL in any
``src``/``href``; it opens from disk. One table row per question, failures first (for a comparison
the questions the runs disagree on first, then those every run got wrong); each row holds the gold
and predicted answers, P(yes) (marked calibrated, or the model's own), and, folded, the facts with
their sources, the retrieved evidence IDs with the annotated (gold) ones marked, and the steps
where the reader wrote them, and a folded "gold" block (the gold decomposition, facts and evidence
paragraphs' text, each paragraph marked retrieved / read as a fact: :mod:`sqa.eval.html_explain`).
Columns undefined for a run (Recall@10 without annotations or retrieval, steps for the facts
reader, cost where the records count none) are left out; clicking the P(yes), Recall@10 or cost
header sorts the rows (ascending, descending, then back to failures first). Each run with gold
labels gets its gold x predicted confusion counts; below 30 questions the charts are replaced by a
one-line note. Filters (all / correct / incorrect / disagreeing) and a search box (over the rows
without their gold blocks); ``#filter=incorrect&q=word`` in the URL sets them on opening.
Templated with jinja2 (autoescaping on), the template is ``sqa/eval/templates/report.html.j2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqa.eval.wording import plain_answer
from sqa.eval.coverage import coverage_metrics, record_calibrated
from sqa.eval.html_explain import (
    charts_note,
    confusion,
    cost_of,
    cost_text,
    cost_unit,
    gold_block,
    paragraph_source,
)
from sqa.eval.metrics import annotator_evidence, recall_at_k
from sqa.eval.run_metrics import calibration_bins, questions_summary
from sqa.eval.svg import COLOURS, coverage_svg, reliability_svg
from sqa.types import Question
from sqa.outfile import write_text_atomic

TEMPLATE = "report.html.j2"
REPORT_HTML = "report.html"


@dataclass
class RunView:
    """One run as the page shows it: ``name``, a one-line ``label``, the headline ``facts``
    (metric name -> text), which optional columns it has, and the per-question ``cells``."""

    name: str
    label: str
    colour: str
    facts: dict[str, str]
    has_recall: bool
    has_steps: bool
    has_facts: bool
    cells: dict[str, dict] = field(default_factory=dict)
    bins: list[dict] = field(default_factory=list)
    curve: list[dict] | None = None
    cost_unit: str | None = None
    confusion: dict | None = None


def _cell(rec: dict, q: Question | None, has_recall: bool) -> dict:
    """What one run said about one question (from its trace record)."""
    gold_ids = set().union(*annotator_evidence(q.evidence)) if q is not None and q.evidence else set()
    gold = q.answer if q is not None else (rec.get("eval") or {}).get("gold")
    answer = bool(rec.get("answer"))
    p = rec.get("p_yes")
    steps = [
        {
            "question": s.get("question", ""),
            "answer": s.get("answer"),
            "evidence": [(e, e in gold_ids) for e in s.get("evidence", [])],
        }
        for s in rec.get("steps") or []
    ]
    return {
        "gold": gold,
        "answer": answer,
        "correct": None if gold is None else answer == gold,
        "p_yes": None if p is None else float(p),
        "calibrated": record_calibrated(rec),
        "readings": {k: float(v) for k, v in (rec.get("signals") or {}).items() if isinstance(v, (int, float))},
        "confidence": None if p is None else (float(p) if answer else 1 - float(p)),
        "recall": recall_at_k(q.evidence, rec.get("paragraphs") or []) if has_recall and q is not None else None,
        "paragraphs": [(e, e in gold_ids) for e in rec.get("paragraphs") or []],
        "facts": [
            {"text": f.get("text", ""), "source": f.get("source", ""), "ref": f.get("ref", "")}
            for f in rec.get("facts") or []
        ],
        "steps": steps,
        "retrieved": set(rec.get("paragraphs") or ())
        | {e for s in rec.get("steps") or [] for e in s.get("evidence", [])},
        "read": {f.get("ref") for f in rec.get("facts") or [] if f.get("ref")},
        "cost": cost_of(rec),
        "decision": rec.get("decision", ""),
        "head": rec.get("head", ""),
        "demonstration": bool((rec.get("eval") or {}).get("demonstration")),
    }


def run_view(
    name: str,
    label: str,
    records: dict[str, dict],
    questions: dict[str, Question],
    has_recall: bool,
    index: int = 0,
    facts: dict[str, str] | None = None,
) -> RunView:
    """A :class:`RunView` from a run's trace records (``{qid: record}``) and the questions by qid."""
    cells = {qid: _cell(rec, questions.get(qid), has_recall) for qid, rec in records.items()}
    rows = [
        {"confidence": c["confidence"], "correct": c["correct"], "calibrated": c["calibrated"]}
        for c in cells.values()
        if c["confidence"] is not None
    ]
    labelled = [c for c in cells.values() if c["correct"] is not None]
    cov = coverage_metrics(rows)
    unit = cost_unit(list(cells.values()))
    for c in cells.values():
        c["cost_sort"], c["cost_shown"], c["cost_detail"] = cost_text(c["cost"], unit)
    headline = dict(facts or {})
    if labelled and "Accuracy" not in headline:
        headline["Accuracy"] = f"{sum(c['correct'] for c in labelled) / len(labelled):.3f} ({len(labelled)} questions)"
    if cov:
        headline.update(
            {f"Accuracy at {a['coverage']:.0%} coverage": f"{a['Accuracy']:.3f} ({a['n']})" for a in cov["at"][:2]}
        )
        headline["P(yes)"] = "calibrated (answer head)" if cov["calibrated"] else "the model's own, uncalibrated"
    return RunView(
        name=name,
        label=label,
        colour=COLOURS[index % len(COLOURS)],
        facts=headline,
        has_recall=has_recall,
        has_steps=any(c["steps"] for c in cells.values()),
        has_facts=any(c["facts"] for c in cells.values()),
        cells=cells,
        bins=calibration_bins(rows),
        curve=cov["curve"] if cov else None,
        cost_unit=unit,
        confusion=confusion(list(cells.values())),
    )


def _rows(views: Sequence[RunView], order: Sequence[str], questions: dict[str, Question]) -> list[dict]:
    """One row per question answered by every run, ordered: disagreeing (several runs), then wrong
    somewhere, then right everywhere, then unlabelled; most confident mistakes first within."""
    paragraphs, unavailable = paragraph_source()
    names = [v.name for v in views]
    rows = []
    for i, qid in enumerate(order):
        cells = [v.cells[qid] for v in views]
        corr = [c["correct"] for c in cells]
        q = questions.get(qid)
        labelled = all(c is not None for c in corr)
        disagree = len(views) > 1 and len({c["answer"] for c in cells}) > 1
        wrong = labelled and not all(corr)
        conf = max((c["confidence"] or 0) for c in cells if c["correct"] is False) if wrong else 0
        rank = 0 if disagree else 1 if wrong else 2 if labelled else 3
        only = {  # per ordered pair of runs: run i right, run j wrong (the page's "only ... right" filters)
            f"only-{a}-{b}": int(cells[a]["correct"] is True and cells[b]["correct"] is False)
            for a in range(len(cells))
            for b in range(len(cells))
            if a != b
        }
        rows.append(
            {
                "qid": qid,
                "question": q.question if q else "",
                "gold": cells[0]["gold"],
                "cells": cells,
                "correct": labelled and all(corr),
                "incorrect": wrong,
                "disagreeing": disagree,
                "only": only,
                "demonstration": any(c["demonstration"] for c in cells),
                "gold_block": gold_block(q, cells, names, paragraphs, unavailable),
                "sort": (rank, -conf, i),
            }
        )
    rows.sort(key=lambda r: r["sort"])
    return rows


def render(
    title: str,
    subtitle: str,
    views: Sequence[RunView],
    order: Sequence[str],
    questions: dict[str, Question],
    pairs: Sequence[dict] = (),
    notes: Sequence[str] = (),
    baseline: float | None = None,
    subtitle_tag: str = "",
    command: str = "",
) -> str:
    """The page's HTML text (``subtitle_tag``: the internal tag the subtitle's words stand for, its tooltip;
    ``command``: the ``sqa`` command that made the run, shown under it)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("sqa.eval", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    names = [v.name for v in views]
    rows = _rows(views, order, questions)
    no_charts = charts_note(len(rows))
    charts = (
        []
        if no_charts
        else [
            jinja2.utils.markupsafe.Markup(reliability_svg(names, [v.bins for v in views])),
            jinja2.utils.markupsafe.Markup(coverage_svg(names, [v.curve for v in views], baseline)),
        ]
    )
    return env.get_template(TEMPLATE).render(
        title=title,
        subtitle=subtitle,
        subtitle_tag=subtitle_tag,
        command=command,
        views=views,
        rows=rows,
        pairs=list(pairs),
        notes=list(notes),
        charts=charts,
        charts_note=no_charts,
        comparison=len(views) > 1,
        holm=len(views) > 2,
        only_filters=[
            {
                "key": f"only-{a}-{b}",
                "label": f"only {names[a]} right" if len(views) == 2 else f"{names[a]} right, {names[b]} wrong",
            }
            for a in range(len(views))
            for b in range(len(views))
            if a != b
        ]
        if len(views) > 1
        else [],
        any_recall=any(v.has_recall for v in views),
        any_steps=any(v.has_steps for v in views),
        any_facts=any(v.has_facts for v in views),
        any_evidence=any(c["paragraphs"] for v in views for c in v.cells.values()),
    )


def _write(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, text)  # sqa.outfile: no link, device, FIFO or directory


def write_run_html(path: str | Path, metrics: dict, questions: Sequence[Question], done: dict[str, dict]) -> Path:
    """Write one run's ``report.html`` from its ``metrics.json`` object, its questions and trace
    records (``{qid: record}``); returns the path."""
    from sqa.eval.report import has_recall

    by_id = {q.qid: q for q in questions}
    order = [q.qid for q in questions if q.qid in done]
    opts = metrics.get("options") or {}
    name = opts.get("preset") or metrics.get("reader") or "run"
    qs = metrics.get("question_set")
    facts = {
        "Accuracy": (
            f"{metrics['Accuracy']:.3f}"
            + (
                f" (95 % interval {metrics['Accuracy_interval95'][0]:.3f}–{metrics['Accuracy_interval95'][1]:.3f})"
                if metrics.get("Accuracy_interval95")
                else ""
            )
            if metrics.get("Accuracy") is not None
            else "–"
        ),
        "questions": questions_summary(metrics),
    }
    if has_recall(metrics):
        facts["Recall@10"] = f"{metrics['Recall@10']:.3f}"
    if metrics.get("ECE") is not None:
        facts["ECE (10 bins)"] = f"{metrics['ECE']:.3f}"
    from sqa.eval.report import method_facts

    facts.update(method_facts(metrics.get("method")))  # a method's run: as report.md shows it
    notes = [metrics["oracle_note"]] if metrics.get("oracle_note") else []
    if metrics.get("answering_note"):  # a train cut answered zero-shot: why
        notes.append(f"Answering: zero-shot: {metrics['answering_note']}.")
    demos = metrics.get("demonstrations")
    if demos:
        w = demos["without_demonstrations"]
        notes.append(f"{demos['n']} of the questions are {demos['note']}.")
        if w["Accuracy"] is not None:
            facts["Accuracy without demonstrations"] = f"{w['Accuracy']:.3f} ({w['n']} questions)"
    view = run_view(
        name, f"{metrics.get('model')}", {q: done[q] for q in order}, by_id, has_recall(metrics), facts=facts
    )
    tag = metrics.get("final_answer") or metrics.get("answering")
    subtitle = (
        f"{metrics['split']}{', ' + qs['protocol'] if qs else ''}: model {metrics.get('model')}, preset "
        f"{name}, final answer: {plain_answer(tag)}"
    )
    return _write(
        path,
        render(
            f"sqa eval {name} – {metrics['split']} ({questions_summary(metrics)})",  # as report.md's heading
            subtitle,
            [view],
            order,
            by_id,
            notes=notes,
            subtitle_tag=tag or "",
            command=metrics.get("command") or "",
            baseline=(metrics.get("majority_baseline") or {}).get("Accuracy"),
        ),
    )


def write_comparison_html(path: str | Path, comparison) -> Path:
    """Write the page of a :class:`sqa.eval.compare.Comparison` (its runs' trace records and the
    paired statistics); returns the path."""
    from sqa.strategyqa import load_questions

    questions: dict[str, Question] = {}
    for d in comparison.data:
        split = d.options.get("split", "dev")
        if split != "custom":
            questions.update({q.qid: q for q in load_questions(split) if q.qid in d.rows})
    views = [
        run_view(
            s.name,
            s.label,
            {q: d.records[q] for q in comparison.qids},
            questions,
            d.has_recall,
            i,
            facts={
                "Accuracy": f"{s.accuracy:.3f} ({s.interval95[0]:.3f}–{s.interval95[1]:.3f})",
                "left out": str(s.left_out),
                **({"Recall@10": f"{s.recall:.3f}"} if s.recall is not None else {}),
            },
        )
        for i, (s, d) in enumerate(zip(comparison.runs, comparison.data))
    ]
    n = len(comparison.qids)
    return _write(
        path,
        render(
            f"sqa compare: {len(views)} runs on {n} questions",
            f"paired bootstrap ({comparison.resamples:,} resamples, seed {comparison.seed}); McNemar's exact test",
            views,
            comparison.qids,
            questions,
            pairs=[{**p.__dict__, "mcnemar_p_holm": h} for p, h in zip(comparison.pairs, comparison.holm_p)],
        ),
    )
