"""Rich tables of sqa's results: metrics (``sqa eval``, ``sqa eval score``), search hits, Recall@10
of the retrieval evaluation, a comparison of runs, the answer heads; and the served model's
read-out notes as lines."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sqa.render.answers import snippet
from sqa.text import printable


def metrics_table(metrics: dict, title: str) -> Table:
    """A table of the headline numbers of a ``metrics.json`` / score result (name -> value)."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        table.add_row(name, f"{value:.4f}" if isinstance(value, float) else str(value))
    return table


def served_notes(model) -> list[str]:
    """What a served model's yes/no read-outs (``model.readout_stats``, ``sqa.models.openai``) are
    worth a line for: read-outs with neither Yes nor No among the top logprobs (a ``warning:``),
    read-outs by generation (a ``note:``); [] for an in-process model."""
    stats, lines = model.readout_stats, []
    if stats and stats.get("missing"):
        lines.append(
            f"warning: {stats['missing']} of {stats['readouts']} yes/no read-outs had neither Yes nor No among "
            f"the server's top {model.capabilities.top_logprobs} logprobs (or no usable value) and were read as 0.5"
        )
    if stats and stats.get("generation"):
        lines.append(
            f"note: {stats['generation']} of {stats['readouts']} yes/no read-outs were read by generation (the "
            "server gives no logprobs): P(yes) is 1 or 0 there; docs/served.md"
        )
    return lines


def hits_table(hits, title: str) -> Table:
    """A table of search hits (``sqa.types.Hit``): rank, BM25 score, evidence ID, title / section, snippet."""
    table = Table(title=title, show_lines=True)
    for name, justify in (("rank", "right"), ("score", "right"), ("evidence ID", "left")):
        table.add_column(name, justify=justify, style="bold cyan" if name == "evidence ID" else None)
    table.add_column("title / section")
    table.add_column("snippet")
    for h in hits:
        p = h.paragraph
        section = p.title + (f" / {p.section}" if p.section else "")
        table.add_row(str(h.rank), f"{h.score:.2f}", p.evidence_id, section, snippet(p.text))
    return table


def retrieval_table(res: dict, split: str, decomposition: str) -> Table:
    """Recall@10 and milliseconds per question of each method of ``sqa.api.retrieval.run_retrieval_eval``'s result."""
    table = Table(
        title=f"Recall@10 on {split} ({res['n']} questions, decomposition: {decomposition}, "
        f"{res['paragraphs']:,} paragraphs)"
    )
    table.add_column("method")
    table.add_column("Recall@10", justify="right")
    table.add_column("ms / question", justify="right")
    for name, m in res["methods"].items():
        table.add_row(name, f"{m['Recall@10']:.4f}", f"{1000 * m['seconds'] / res['n']:.1f}")
    return table


def _pct(x: float | None, signed: bool = False) -> str:
    return "–" if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")


def _interval(iv) -> str:
    if not iv:
        return "–"
    return f"[{iv[0]:+.3f}, {iv[1]:+.3f}]" if min(iv) < 0 else f"[{iv[0]:.3f}, {iv[1]:.3f}]"


def print_comparison(comparison, console: Console | None = None) -> None:
    """Print a :class:`sqa.eval.compare.Comparison`: a table of the runs, then one paragraph per pair."""
    console = console or Console()
    n = len(comparison.qids)
    runs = Table(title=f"sqa compare: {n} shared labelled questions")
    runs.add_column("run", no_wrap=True)
    runs.add_column("preset, split")
    runs.add_column("Accuracy (95 % interval)", justify="right")
    if any(r.recall is not None for r in comparison.runs):
        runs.add_column("Recall@10", justify="right")
    costs = any(r.cost for r in comparison.runs)
    if costs:  # a method's cost beside its accuracy
        runs.add_column("per question: calls, generated tokens, retrievals, seconds", justify="right")
    runs.add_column("left out", justify="right")
    for r in comparison.runs:
        cells = [
            escape(printable(r.name)),
            escape(printable(r.label)),
            f"{r.accuracy:.3f} {_interval(r.interval95)} {r.correct}/{n}",
        ]
        if any(x.recall is not None for x in comparison.runs):
            cells.append(_pct(r.recall))
        if costs:
            c = r.cost or {}
            cells.append(
                ", ".join(
                    "–" if c.get(k) is None else f"{c[k]:.1f}"
                    for k in ("calls", "generated_tokens", "retrievals", "seconds")
                )
            )
        runs.add_row(*cells, str(r.left_out))
    console.print(runs)
    console.print(
        f"Paired differences A - B: 95 % paired-bootstrap interval ({comparison.resamples:,} resamples, "
        f"seed {comparison.seed}); McNemar's exact test on the questions only one run got right."
    )
    many = len(comparison.runs) > 2  # Holm-adjusted p-values beside the raw ones (Holm 1979)
    if many:
        console.print(f"Holm p: McNemar p adjusted for the {len(comparison.pairs)} pairs (Holm 1979).")
    for p, holm in zip(comparison.pairs, comparison.holm_p):
        console.print(
            f"[bold]A {escape(printable(p.a))}[/bold] vs [bold]B {escape(printable(p.b))}[/bold] ({p.n} questions): Accuracy "
            f"{p.accuracy_a:.3f} vs {p.accuracy_b:.3f}, difference {_pct(p.difference, True)} "
            f"{_interval(p.interval95)}, McNemar p = {p.mcnemar_p:.4f}"
            f"{f' (Holm p = {holm:.4f})' if many else ''}; only A right {p.only_a}, "
            f"only B right {p.only_b}, both right {p.both_right}, both wrong {p.both_wrong}",
            highlight=False,
        )
        if p.recall:
            r = p.recall
            w = "–" if r["wilcoxon_p"] is None else f"{r['wilcoxon_p']:.4f}"
            console.print(
                f"  Recall@10 {r['a']:.3f} vs {r['b']:.3f}, difference {_pct(r['difference'], True)} "
                f"{_interval(r['interval95'])}, Wilcoxon p = {w}; higher in A {r['higher_a']}, "
                f"higher in B {r['higher_b']}",
                highlight=False,
            )


def run_table(run) -> Table | None:
    """The metrics table of a finished :func:`sqa.evaluate` run (``sqa.eval.results.Run``): n,
    Accuracy, the majority baseline, Accuracy at coverage, Recall@10 / SARI where defined, ECE and
    seconds per question; for an out-of-fold run its interval, AUC and the heads without the
    demonstrations. None when the run has no metrics yet."""
    m, o = run.metrics, run.options
    if not m:
        return None
    if "out_of_fold" in m:
        rows = {
            "n": m["n"],
            "Accuracy": m["Accuracy"],
            "95 % interval": "–".join(f"{v:.4f}" for v in m["Accuracy_interval95"] or []),
            "AUC": m["AUC"],
            "majority (always no)": m["majority_baseline"]["Accuracy"],
            "Recall@10": m["Recall@10"],
            "ECE": m["ECE"],
        }
        for kind, v in m["out_of_fold"]["without_demonstrations"].items():
            rows[f"{kind} head, without the demonstrations (n={v['n']})"] = v["accuracy"]
        return metrics_table(rows, f"sqa eval {o['split']} (facts reader, {m['out_of_fold']['scheme']})")
    from sqa.eval.report import has_recall, has_steps

    iv = m.get("Accuracy_interval95")
    rows = {
        "n": m["n"],
        "Accuracy (95 % interval)": f"{m['Accuracy']:.3f} ({iv[0]:.3f}–{iv[1]:.3f})" if iv else m["Accuracy"],
    }
    d = m.get("demonstrations")  # the facts reader's demonstration questions, answered with their answers shown
    if d and d["without_demonstrations"]["n"]:  # an empty remainder has no accuracy: no row
        rows[f"without the {d['n']} demonstrations (n={d['without_demonstrations']['n']})"] = d[
            "without_demonstrations"
        ]["Accuracy"]
    rows["majority (always no)"] = m["majority_baseline"]["Accuracy"]
    for a in (m.get("accuracy_at_coverage") or {}).get("at", [])[:2]:
        rows[f"Accuracy at {a['coverage']:.0%} coverage"] = a["Accuracy"]
    if has_recall(m):
        rows["Recall@10"] = m["Recall@10"]
    if has_steps(m) and m["SARI"] is not None:
        rows["SARI"] = m["SARI"]
    rows.update({"ECE": m["ECE"], "seconds/question": f"{m['seconds_per_question']:.1f}"})
    oracle = f", ORACLE {o['oracle']}" if o["oracle"] else ""
    zero = ", zero-shot: the model's own P(yes), uncalibrated" if m.get("answering") == "zero-shot" else ""
    title = f"sqa eval {m.get('protocol') or o['split']} ({o['reader']}{oracle}, {o['decomposition']}{zero})"
    return metrics_table(rows, title)


def run_line(run) -> str:
    """The one summary line of a :func:`sqa.evaluate` run: its state, questions done, where it is, its files."""
    files = ", ".join(p.name for p in run.files)
    m = run.metrics
    if m and "out_of_fold" in m:
        return f"complete: {run.done}/{run.total} questions, {m['out_of_fold']['scheme']} -> {run.path} ({files})"
    state = "interrupted" if run.interrupted else ("complete" if run.complete else "incomplete")
    cut = ""
    if m and m.get("complete") is False and m.get("questions_in_set"):  # a --limit cut says so (issue 48)
        from sqa.eval.run_metrics import questions_summary

        cut = f"; {questions_summary(m)}"
    return f"{state}: {run.done}/{run.total} questions ({run.new} new) -> {run.path} ({files}){cut}"


def heads_table(entries) -> Table:
    """The answer heads (``sqa.facts.heads.list_heads``): name, yours or the package's, model,
    questions fitted on, and whether it answers (``sqa.facts.heads.answering_paths``)."""
    from sqa.facts.heads import answering_paths

    answering = answering_paths(entries)
    t = Table("name", "where", "model", "questions", "answers", title="answer heads")
    for e in entries:
        where = "package" if e.shipped else "yours"
        name = escape(printable(e.name))  # a file name is data: no control sequence, no rich markup
        if e.head is None:
            t.add_row(name, where, "?", "?", f"damaged: {escape(printable(e.problem[:60]))}")
        else:
            t.add_row(name, where, escape(printable(e.head.model)), f"{e.n:,}", "yes" if e.path in answering else "")
    return t
