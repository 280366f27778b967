"""``sqa ask "QUESTION"``: answer one yes/no question with the reasoner and show how.

Prints a rich tree: each decomposition step, its answer and its top evidence (ID, title,
snippet), then the final Yes/No with its probability and the time taken. ``--json`` prints exactly
``ReasoningResult.to_ask_json()``: {"question", "decomposition": [{"step", "answer",
"evidence": [IDs]}], "answer", "confidence", "paragraphs"}.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.tree import Tree
from rich.markup import escape

from sqa.cli import app
from sqa.cli.common import BackendOpt, DecisionOpt, IndexDirOpt, resolve_index_dir
from sqa.reasoner.reasoner import DEFAULT_DECISION, parse_decision
from sqa.types import MAX_K, SqaError


def _snippet(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


@app.command("ask")
def ask_command(
    question: Annotated[str, typer.Argument(help="A yes/no question, e.g. \"Could a llama birth twice during the Vietnam War?\"")],
    model: Annotated[str, typer.Option("--model", help="qwen2.5-coder-1.5b (default), qwen2.5-coder-0.5b, a .gguf file, "
                                                       "or a Hugging Face checkpoint name/directory (transformers).")]
    = "qwen2.5-coder-1.5b",
    k: Annotated[int, typer.Option("-k", "--k", help="Evidence paragraphs retrieved per step and for the question (top-k).")] = 10,
    decomposition: Annotated[str, typer.Option("--decomposition", help="predicted (decompose into steps) or question "
                                                                       "(no decomposition: retrieve with the question).")]
    = "predicted",
    no_retrieval: Annotated[bool, typer.Option("--no-retrieval", help="Answer from the model alone (no evidence), "
                                                                      "the baseline that shows what retrieval adds.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
    decision: DecisionOpt = DEFAULT_DECISION,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Answer a yes/no question: decompose, retrieve evidence per step, answer each step, then Yes/No."""
    from sqa.reasoner import build_reasoner

    if not question.strip():
        raise SqaError("empty question; pass the question text, e.g. sqa ask \"Is the sun a star?\"")
    if not 1 <= k <= MAX_K:
        raise SqaError(f"--k must be from 1 to {MAX_K:,} (got {k})")
    if decomposition not in ("predicted", "question"):
        raise SqaError(f"--decomposition {decomposition!r}: use predicted or question")
    parse_decision(decision)  # fail before loading the model
    err = Console(stderr=True)
    with err.status(f"loading {model} and the index…", spinner="dots"):
        reasoner = build_reasoner(model, resolve_index_dir(index_dir), backend, k, retrieval=not no_retrieval,
                                  decision=decision)
    from sqa.types import Question

    with err.status("reasoning…", spinner="dots"):
        result = reasoner.answer_batch([Question(qid="", question=question)], decomposition=decomposition)[0]
    result.qid = None
    if as_json:
        typer.echo(json.dumps(result.to_ask_json(), ensure_ascii=False, indent=1))
        return
    ids = [s.evidence[0] for s in result.steps if s.evidence] + result.paragraphs[:1]
    paras = {}
    be = getattr(reasoner, "backend", None)
    if be is not None and ids:
        paras = {p.evidence_id: p for p in be.get(list(dict.fromkeys(ids)))}
    tree = Tree(f"[bold]{escape(result.question)}[/bold]")
    for s in result.steps:
        node = tree.add(f"[cyan]{s.index}.[/cyan] {escape(s.question)} → [bold green]{escape(s.answer or '?')}[/bold green]")
        if s.evidence:
            p = paras.get(s.evidence[0])
            title = escape(p.title) if p else ""
            node.add(f"[dim]{escape(s.evidence[0])}[/dim]  [bold]{title}[/bold]: " + (escape(_snippet(p.text)) if p else ""))
    if not result.steps and result.paragraphs:
        p = paras.get(result.paragraphs[0])
        tree.add(f"[dim]{escape(result.paragraphs[0])}[/dim]  " + (f"[bold]{escape(p.title)}[/bold]: {escape(_snippet(p.text))}" if p else ""))
    verdict = "Yes" if result.answer else "No"
    color = "green" if result.answer else "red"
    readings = ""
    if len(result.signals) > 1:  # the P(yes) readings averaged in log-odds (see Reasoner: decision)
        readings = "  [dim](" + ", ".join(f"{name} {p:.2f}" for name, p in result.signals.items()) + ")[/dim]"
    tree.add(f"[bold {color}]{verdict}[/bold {color}]  P(yes)={result.p_yes:.2f}{readings}  confidence={result.confidence:.2f}  "
             f"[dim]({result.timings.get('total', 0.0):.1f} s, {escape(result.model)})[/dim]")
    Console().print(tree)
