"""``sqa compare RUN_DIR RUN_DIR...``: paired comparison of eval runs on the questions they share
(:mod:`sqa.eval.compare`): a table per run and per pair, ``--json`` for scripts,
``--html FILE`` for a self-contained page (:mod:`sqa.eval.html`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sqa.cli import app


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
    runs.add_column("left out", justify="right")
    for r in comparison.runs:
        cells = [r.name, r.label, f"{r.accuracy:.3f} {_interval(r.interval95)} {r.correct}/{n}"]
        if len(runs.columns) == 5:
            cells.append(_pct(r.recall))
        runs.add_row(*cells, str(r.left_out))
    console.print(runs)
    console.print(
        f"Paired differences A - B: 95 % paired-bootstrap interval ({comparison.resamples:,} resamples, "
        f"seed {comparison.seed}); McNemar's exact test on the questions only one run got right."
    )
    for p in comparison.pairs:
        console.print(
            f"[bold]A {p.a}[/bold] vs [bold]B {p.b}[/bold] ({p.n} questions): Accuracy "
            f"{p.accuracy_a:.3f} vs {p.accuracy_b:.3f}, difference {_pct(p.difference, True)} "
            f"{_interval(p.interval95)}, McNemar p = {p.mcnemar_p:.4f}; only A right {p.only_a}, "
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


@app.command("compare")
def compare_command(
    runs: Annotated[list[Path], typer.Argument(help="Two or more `sqa eval` run folders (run.json + traces.jsonl).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as one JSON object.")] = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write a self-contained HTML page here (the "
            "questions the runs disagree on first; opens from disk).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Compare eval runs on the questions they share: Accuracy with 95 % intervals, paired differences
    (paired bootstrap), McNemar's exact test, who got which questions right, Recall@10 where defined."""
    from sqa.eval.compare import compare_runs

    comparison = compare_runs(runs)
    if html is not None:
        from sqa.eval.html import write_comparison_html

        write_comparison_html(html, comparison)
    if as_json:
        typer.echo(json.dumps(comparison.to_dict(), indent=1))
    else:
        print_comparison(comparison)
        left = [f"{r.name}: {r.left_out}" for r in comparison.runs if r.left_out]
        if left:
            typer.echo(f"left out (answered by some runs, not all): {', '.join(left)}")
    if html is not None:
        typer.echo(f"report -> {html}", err=as_json)
