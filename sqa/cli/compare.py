"""``sqa compare RUN_DIR RUN_DIR...``: paired comparison of eval runs on the questions they share
(:mod:`sqa.eval.compare`): a table per run and per pair, ``--json`` for scripts,
``--html FILE`` for a self-contained page (:mod:`sqa.eval.html`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from sqa.cli import app
from sqa.cli.common import opt
from sqa.text import printable

HTML_HELP = "Also write a self-contained HTML page here (the questions the runs disagree on first; opens from disk)."


@app.command("compare")
def compare_command(
    runs: Annotated[list[Path], typer.Argument(help="Two or more `sqa eval` run folders (run.json + traces.jsonl).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as one JSON object.")] = False,
    html: Annotated[Path | None, opt("--html", help=HTML_HELP)] = None,
) -> None:
    """Compare eval runs on the questions they share: accuracy, McNemar, who got which right.

    Accuracy with 95 % intervals, paired differences (paired bootstrap), McNemar's exact test (Holm-
    adjusted beside the raw p with three runs or more), the questions each run alone got right,
    Recall@10 where the runs' retrieval differs."""
    from sqa.eval.compare import compare_runs
    from sqa.render.tables import print_comparison

    comparison = compare_runs(runs)
    if html is not None:
        from sqa.eval.html import write_comparison_html

        write_comparison_html(html, comparison)
    if as_json:
        typer.echo(json.dumps(comparison.to_dict(), indent=1))
    else:
        print_comparison(comparison)
        left = [f"{printable(r.name)}: {r.left_out}" for r in comparison.runs if r.left_out]
        if left:
            typer.echo(f"left out (answered by some runs, not all): {', '.join(left)}")
    if html is not None:
        typer.echo(f"report -> {html}", err=as_json)
