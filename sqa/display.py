"""Compact displays of the library's results for a terminal and a notebook: one-line ``repr`` texts
and small HTML tables (Jupyter's ``_repr_html_``) of a :class:`sqa.Run`, an :class:`sqa.Answer`, a
:class:`sqa.eval.compare.Comparison` and an :class:`sqa.Hit`, and :func:`comparison_table` (a
rich Table, which renders in both). Every value put into HTML is escaped (``html.escape``); the
tables carry inline styles only, so they read the same in a notebook and in an exported page."""

from __future__ import annotations

from html import escape

from rich.table import Table

_TABLE = '<table style="border-collapse: collapse; text-align: left">'
_CELL = 'style="padding: 2px 8px; text-align: left"'


def _html_table(rows: list[tuple[str, str]], caption: str = "") -> str:
    """A two-column HTML table of (name, value) rows, escaped."""
    cap = f"<caption style='text-align: left; font-weight: bold'>{escape(caption)}</caption>" if caption else ""
    body = "".join(f"<tr><th {_CELL}>{escape(k)}</th><td {_CELL}>{escape(v)}</td></tr>" for k, v in rows)
    return f"{_TABLE}{cap}{body}</table>"


def _grid(header: list[str], rows: list[list[str]], caption: str = "") -> str:
    """An HTML table with a header row, escaped."""
    cap = f"<caption style='text-align: left; font-weight: bold'>{escape(caption)}</caption>" if caption else ""
    head = "".join(f"<th {_CELL}>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td {_CELL}>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"{_TABLE}{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _accuracy(acc: float | None, interval: list | None) -> str:
    """``0.655 [0.591, 0.714]`` (the interval: 95 %, Wilson score), ``0.655``, or ``–``."""
    if acc is None:
        return "–"
    return f"{acc:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else f"{acc:.3f}"


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def run_facts(run, questions: str) -> list[tuple[str, str]]:
    """(name, value) rows describing a :class:`sqa.Run`: Accuracy with its 95 % Wilson interval,
    ``questions`` (how many answered of how many, ``sqa.eval.run_metrics.questions_summary``), the
    method (preset, else reader), model, folder, and Recall@10 / ECE where the run has them."""
    m = run.metrics or {}
    try:
        opts = run.options
    except (OSError, ValueError):
        opts = {}
    rows = [("Accuracy (95 % interval)", _accuracy(m.get("Accuracy"), m.get("Accuracy_interval95")))]
    rows.append(("questions", questions))
    rows += [
        ("method", str(opts.get("preset") or opts.get("reader") or m.get("reader") or "?")),
        ("model", str(opts.get("model") or m.get("model") or "?")),
        ("folder", str(run.path)),
    ]
    if m.get("Recall@10") is not None and (opts.get("retrieval", True) or opts.get("oracle")):
        rows.insert(1, ("Recall@10", f"{m['Recall@10']:.3f}"))
    if m.get("ECE") is not None:
        rows.append(("ECE (10 bins)", f"{m['ECE']:.3f}"))
    return rows


def run_repr(run, questions: str) -> str:
    """One line: ``<sqa.Run facts, MODEL: Accuracy 0.655 [0.591, 0.714], 229 of 229 questions, FOLDER>``."""
    f = dict(run_facts(run, questions))
    state = ", interrupted" if run.interrupted else ""
    return (
        f"<sqa.Run {f['method']}, {f['model']}: Accuracy {f['Accuracy (95 % interval)']}, "
        f"{f['questions']}{state}, {f['folder']}>"
    )


def run_html(run, questions: str) -> str:
    """The run's facts (:func:`run_facts`) as an HTML table."""
    return _html_table(run_facts(run, questions), "sqa.Run")


def answer_repr(a) -> str:
    """One line: ``<sqa.Answer no, P(yes) 0.06 calibrated, MODEL: 'QUESTION'>`` (question cut at 60)."""
    how = "calibrated" if a.calibrated else "model's own"
    model = f", {a.model}" if a.model else ""
    return f"<sqa.Answer {'yes' if a.answer else 'no'}, P(yes) {a.p_yes:.2f} {how}{model}: {_short(a.question)!r}>"


def answer_html(a) -> str:
    """The answer, P(yes) (calibrated or the model's own), model, answer head, then the facts read
    (source, ref, text), as HTML."""
    rows = [
        ("question", a.question),
        ("answer", "yes" if a.answer else "no"),
        ("P(yes)", f"{a.p_yes:.3f} ({'calibrated, answer head' if a.calibrated else 'the model' + chr(39) + 's own'})"),
        ("model", a.model or "?"),
    ]
    if a.head:
        rows.append(("answer head", a.head))
    out = _html_table(rows, "sqa.Answer")
    if a.facts:
        facts = [[f.source, f.ref, _short(f.text, 200)] for f in a.facts]
        out += _grid(["source", "ref", "fact read"], facts)
    return out


def hit_repr(h) -> str:
    """One line: ``<sqa.Hit #1 Laptop-48 score 12.40: 'Laptop'>``."""
    return f"<sqa.Hit #{h.rank} {h.evidence_id} score {h.score:.2f}: {_short(h.title)!r}>"


def hit_html(h) -> str:
    """Rank, evidence ID, score, title and the start of the text, as an HTML table row."""
    return _grid(
        ["rank", "evidence ID", "score", "title", "text"],
        [[str(h.rank), h.evidence_id, f"{h.score:.2f}", h.title, _short(h.text, 120)]],
    )


def comparison_repr(c) -> str:
    """One line: the runs' accuracies and each pair's McNemar p (Holm-adjusted too with more than
    two runs), e.g. ``<sqa.Comparison 229 questions: A 0.664, B 0.690; A vs B McNemar p 0.238>``."""
    runs = ", ".join(f"{r.name} {r.accuracy:.3f}" for r in c.runs)
    many = len(c.runs) > 2
    pairs = "; ".join(
        f"{p.a} vs {p.b} McNemar p {p.mcnemar_p:.3f}" + (f" (Holm {h:.3f})" if many else "")
        for p, h in zip(c.pairs, c.holm_p)
    )
    return f"<sqa.Comparison {len(c.qids)} questions: {runs}; {pairs}>"


def comparison_rows(c) -> list[dict]:
    """One dict per pair: ``A``, ``B``, ``n``, ``Accuracy A``, ``Accuracy B``, ``A - B`` (with its
    95 % paired-bootstrap interval), ``McNemar p``, ``Holm p`` (more than two runs only),
    ``only A right``, ``only B right`` (counts), as strings ready to print."""
    many = len(c.runs) > 2
    out = []
    for p, h in zip(c.pairs, c.holm_p):
        row = {
            "A": p.a,
            "B": p.b,
            "n": str(p.n),
            "Accuracy A": f"{p.accuracy_a:.3f}",
            "Accuracy B": f"{p.accuracy_b:.3f}",
            "A - B": f"{p.difference:+.3f} [{p.interval95[0]:+.3f}, {p.interval95[1]:+.3f}]",
            "McNemar p": f"{p.mcnemar_p:.4f}",
        }
        if many:
            row["Holm p"] = f"{h:.4f}"
        row.update({"only A right": str(p.only_a), "only B right": str(p.only_b)})
        out.append(row)
    return out


def comparison_table(c) -> Table:
    """:func:`comparison_rows` as a rich Table titled with the shared questions."""
    rows = comparison_rows(c)
    t = Table(title=f"sqa compare: {len(c.qids)} shared labelled questions")
    for col in rows[0] if rows else ():
        t.add_column(col, justify="left" if col in ("A", "B") else "right")
    for r in rows:
        t.add_row(*r.values())
    return t


def comparison_html(c) -> str:
    """The runs (Accuracy with its 95 % Wilson interval) and the pairs (:func:`comparison_rows`) as HTML."""
    runs = [[r.name, r.label, _accuracy(r.accuracy, r.interval95), f"{r.correct}/{len(c.qids)}"] for r in c.runs]
    out = _grid(["run", "method, questions", "Accuracy (95 % interval)", "right"], runs, "sqa.Comparison")
    rows = comparison_rows(c)
    if rows:
        out += _grid(list(rows[0]), [list(r.values()) for r in rows])
    return out
