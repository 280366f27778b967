"""Recall@10 of the official StrategyQA retrieval and of the step retriever over an index
(``sqa eval retrieval``): the evaluation is :mod:`sqa.eval.retrieval`; this wires it to an index
and writes the result as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from sqa.eval.retrieval import official_method
from sqa.outfile import write_text_atomic


def default_out(split: str, decomposition: str) -> Path:
    """``sqa-eval/retrieval-{split}-{question|gold|file stem}.json`` under the working directory."""
    tag = decomposition if decomposition in ("question", "gold") else Path(decomposition).stem
    return Path("sqa-eval") / f"retrieval-{split}-{tag}.json"


def run_retrieval_eval(
    index_dir: str | Path | None,
    backend: str = "embedded",
    split: str = "dev",
    decomposition: str = "question",
    out: str | Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    rerank: bool = False,
) -> dict:
    """Recall@10 (official StrategyQA definition) of the official retrieval and of the step retriever.

    ``decomposition``: "question" (IR-Q vs the step retriever on the question), "gold" (IR-ORA-D vs the step retriever on the
    gold steps) or a JSONL path of predicted decompositions (IR-D vs the step retriever; only the split's
    questions in the file are scored). ``on_progress(done, total)`` is called after each
    question. Writes the result as JSON to ``out`` (default :func:`default_out`) and returns it:
    ``{"split", "decomposition", "backend", "paragraphs" (index size), "n",
    "methods": {name: {"Recall@10", "seconds"}}, "delta" (the step retriever - official), "out"}``.

    Raises SqaError for an unknown split or backend, a missing index, the unlabelled test split,
    or a decomposition file that matches no question of the split.
    """
    from sqa.eval.retrieval import evaluate_retrievers, retrieval_questions
    from sqa.paths import default_index_dir
    from sqa.pipeline import make_retriever, open_index

    questions, steps_of = retrieval_questions(split, decomposition)
    be = open_index(Path(index_dir).expanduser() if index_dir else default_index_dir(), backend)
    try:
        retrievers = {
            f"official ({official_method(decomposition)})": make_retriever(be, "official"),
            "step" + (" + MiniLM rerank" if rerank else ""): make_retriever(be, "step", rerank=rerank),
        }
        methods = evaluate_retrievers(retrievers, questions, steps_of, on_progress=on_progress)
        paragraphs = be.count()
    finally:
        be.close()

    names = list(methods)
    result = {
        "split": split,
        "decomposition": str(decomposition),
        "backend": backend,
        "paragraphs": paragraphs,
        "n": len(questions),
        "methods": methods,
        "delta": methods[names[1]]["Recall@10"] - methods[names[0]]["Recall@10"],
    }
    out = Path(out) if out else default_out(split, str(decomposition))
    out.parent.mkdir(parents=True, exist_ok=True)
    result["out"] = str(out)
    write_text_atomic(out, json.dumps(result, indent=1) + "\n")  # sqa.outfile's rule
    return result
