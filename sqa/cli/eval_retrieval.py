"""``sqa eval retrieval``: Recall@10 of the official StrategyQA retrieval and of the step retriever
on the current index (:func:`sqa.api.retrieval.run_retrieval_eval`), for the question alone, the
gold decompositions, or predicted decompositions from a file; added to ``sqa eval`` by :mod:`sqa.cli.eval`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from sqa.cli.common import BackendOpt, IndexDirOpt, opt

HELP = {
    "split": "dev, train-2061 or train (labelled questions).",
    "decomposition": "question (the question alone: IR-Q), gold (the gold decompositions: IR-ORA-D), or a JSONL FILE of {qid, decomposition} (predicted decompositions: IR-D)",
    "out": "JSON output (default sqa-eval/retrieval-SPLIT-DECOMPOSITION.json).",
    "rerank": "Rerank the step retriever's candidates with all-MiniLM-L6-v2 embeddings (opt-in; numpy on CPU, no torch; the minilm extra).",
}


def eval_retrieval_command(
    split: Annotated[str, opt("--split", help=HELP["split"], show_default=True)] = "dev",
    decomposition: Annotated[str, opt("--decomposition", help=HELP["decomposition"], show_default=True)] = "question",
    out: Annotated[Optional[Path], opt("--out", help=HELP["out"])] = None,
    rerank: Annotated[bool, opt("--rerank", help=HELP["rerank"], show_default=True)] = False,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Recall@10 of the official StrategyQA retrieval and the step retriever on the current index."""
    from rich.console import Console

    from sqa.api.retrieval import run_retrieval_eval
    from sqa.render.progress import RetrievalProgress
    from sqa.render.tables import retrieval_table

    console = Console()
    with RetrievalProgress(console) as progress:
        res = run_retrieval_eval(index_dir, backend, split, decomposition, out, progress, rerank=rerank)
    console.print(retrieval_table(res, split, decomposition))
    console.print(f"step - official: {res['delta']:+.4f}; written to {res['out']}")
