"""``sqa eval retrieval``: Recall@10 of the official StrategyQA retrieval and of the step retriever on the current
index, for the question alone, the gold decompositions, or predicted decompositions from a file.

The evaluation is :func:`sqa.api.retrieval.run_retrieval_eval`; ``eval_retrieval_command`` is the
typer command, added to ``sqa eval`` as ``retrieval`` by :mod:`sqa.cli.eval`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from sqa.cli.common import BackendOpt, IndexDirOpt

DECOMPOSITION_HELP = (
    "question (the question alone: IR-Q), gold (the gold decompositions: IR-ORA-D), or a JSONL "
    "FILE of {qid, decomposition} (predicted decompositions: IR-D)"
)


def eval_retrieval_command(
    split: Annotated[str, typer.Option("--split", help="dev, train-2061 or train (labelled questions).")] = "dev",
    decomposition: Annotated[str, typer.Option("--decomposition", help=DECOMPOSITION_HELP)] = "question",
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out", help="JSON output (default sqa-eval/retrieval-SPLIT-DECOMPOSITION.json).", show_default=False
        ),
    ] = None,
    rerank: Annotated[
        bool,
        typer.Option(
            "--rerank",
            help="Rerank the step retriever's candidates with all-MiniLM-L6-v2 embeddings (opt-in; numpy on CPU, no torch; the minilm extra).",
        ),
    ] = False,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Recall@10 of the official StrategyQA retrieval and the step retriever on the current index."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from sqa.api.retrieval import run_retrieval_eval

    console = Console()
    with Progress(
        TextColumn("retrieving"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("retrieval", total=None, rate="")
        start = time.perf_counter()

        def on_progress(done: int, total: int) -> None:
            progress.update(
                task, completed=done, total=total, rate=f"{done / max(time.perf_counter() - start, 1e-9):.1f} q/s"
            )

        res = run_retrieval_eval(index_dir, backend, split, decomposition, out, on_progress, rerank=rerank)
    table = Table(
        title=f"Recall@10 on {split} ({res['count']} questions, decomposition: {decomposition}, "
        f"{res['paragraphs']:,} paragraphs)"
    )
    table.add_column("method")
    table.add_column("Recall@10", justify="right")
    table.add_column("ms / question", justify="right")
    for name, m in res["methods"].items():
        table.add_row(name, f"{m['Recall@10']:.4f}", f"{1000 * m['seconds'] / res['count']:.1f}")
    console.print(table)
    console.print(f"step - official: {res['delta']:+.4f}; written to {res['out']}")
