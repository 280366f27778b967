"""``sqa eval retrieval``: Recall@10 of the official StrategyQA retrieval and of the step retriever on the current
index, for the question alone, the gold decompositions, or predicted decompositions from a file.

The evaluation itself is :mod:`sqa.eval.retrieval`; ``run_retrieval_eval`` wires it to an index
and writes the result as JSON; ``eval_retrieval_command`` is the typer command, added to ``sqa
eval`` as ``retrieval`` by :mod:`sqa.cli.eval`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer

from sqa.cli.common import BackendOpt, IndexDirOpt, resolve_index_dir
from sqa.eval.retrieval import load_decompositions, official_method  # noqa: F401  (re-exported)

DECOMPOSITION_HELP = ("question (the question alone: IR-Q), gold (the gold decompositions: IR-ORA-D), or a JSONL "
                      "FILE of {qid, decomposition} (predicted decompositions: IR-D)")


def default_out(split: str, decomposition: str) -> Path:
    """``sqa-eval/retrieval-{split}-{question|gold|file stem}.json`` under the working directory."""
    tag = decomposition if decomposition in ("question", "gold") else Path(decomposition).stem
    return Path("sqa-eval") / f"retrieval-{split}-{tag}.json"


def run_retrieval_eval(index_dir: str | Path | None, backend: str = "embedded", split: str = "dev",
                       decomposition: str = "question", out: str | Path | None = None,
                       on_progress: Callable[[int, int], None] | None = None,
                       rerank: bool = False) -> dict:
    """Recall@10 (official StrategyQA definition) of the official retrieval and of the step retriever.

    ``decomposition``: "question" (IR-Q vs the step retriever on the question), "gold" (IR-ORA-D vs the step retriever on the
    gold steps) or a JSONL path of predicted decompositions (IR-D vs the step retriever; only the split's
    questions in the file are scored). ``on_progress(done, total)`` is called after each
    question. Writes the result as JSON to ``out`` (default :func:`default_out`) and returns it:
    ``{"split", "decomposition", "backend", "paragraphs" (index size), "count",
    "methods": {name: {"Recall@10", "seconds"}}, "delta" (the step retriever - official), "out"}``.

    Raises SqaError for an unknown split or backend, a missing index, the unlabelled test split,
    or a decomposition file that matches no question of the split.
    """
    from sqa.eval.retrieval import evaluate_retrievers, retrieval_questions
    from sqa.pipeline import open_index
    from sqa.retriever.official import OfficialRetriever
    from sqa.retriever.steps import StepRetriever

    questions, steps_of = retrieval_questions(split, decomposition)
    index_dir = resolve_index_dir(Path(index_dir) if index_dir else None)
    be = open_index(index_dir, backend)
    try:
        retrievers = {f"official ({official_method(decomposition)})": OfficialRetriever(be),
                      "step" + (" + MiniLM rerank" if rerank else ""): StepRetriever(be, rerank=rerank)}
        methods = evaluate_retrievers(retrievers, questions, steps_of, on_progress=on_progress)
        paragraphs = be.count()
    finally:
        be.close()

    names = list(methods)
    result = {
        "split": split, "decomposition": str(decomposition), "backend": backend,
        "paragraphs": paragraphs, "count": len(questions), "methods": methods,
        "delta": methods[names[1]]["Recall@10"] - methods[names[0]]["Recall@10"],
    }
    out = Path(out) if out else default_out(split, str(decomposition))
    out.parent.mkdir(parents=True, exist_ok=True)
    result["out"] = str(out)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def eval_retrieval_command(
    split: Annotated[str, typer.Option("--split", help="dev, train-2061 or train (labelled questions).")] = "dev",
    decomposition: Annotated[str, typer.Option("--decomposition", help=DECOMPOSITION_HELP)] = "question",
    out: Annotated[Optional[Path], typer.Option("--out", help="JSON output (default sqa-eval/retrieval-SPLIT-DECOMPOSITION.json).",
                                                show_default=False)] = None,
    rerank: Annotated[bool, typer.Option("--rerank", help="Rerank the step retriever's candidates with all-MiniLM-L6-v2 embeddings (opt-in; numpy on CPU, no torch; the minilm extra).")] = False,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Recall@10 of the official StrategyQA retrieval and the step retriever on the current index."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    console = Console()
    with Progress(TextColumn("retrieving"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                  TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task("retrieval", total=None, rate="")
        start = time.perf_counter()

        def on_progress(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total,
                            rate=f"{done / max(time.perf_counter() - start, 1e-9):.1f} q/s")

        res = run_retrieval_eval(index_dir, backend, split, decomposition, out, on_progress, rerank=rerank)
    table = Table(title=f"Recall@10 on {split} ({res['count']} questions, decomposition: {decomposition}, "
                        f"{res['paragraphs']:,} paragraphs)")
    table.add_column("method")
    table.add_column("Recall@10", justify="right")
    table.add_column("ms / question", justify="right")
    for name, m in res["methods"].items():
        table.add_row(name, f"{m['Recall@10']:.4f}", f"{1000 * m['seconds'] / res['count']:.1f}")
    console.print(table)
    console.print(f"step - official: {res['delta']:+.4f}; written to {res['out']}")
