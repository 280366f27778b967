"""``sqa search``: BM25 search of the paragraph index from the terminal."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt, resolve_index_dir
from sqa.types import MAX_K, SqaError


def snippet(text: str, width: int = 160) -> str:
    """The first ``width`` characters of ``text`` on one line, with an ellipsis if cut."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


@app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="Free-text query.")],
    k: Annotated[int, typer.Option("-k", "--k", help="Number of paragraphs (top-k).")] = 10,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of {evidence_id, score, title, section, text}.")
    ] = False,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Search the paragraph index (BM25 over title, section and text)."""
    from sqa.api.index import Index

    if not query.strip():
        raise SqaError("empty query; give some words to search for")
    if k < 1:
        raise SqaError(f"-k must be at least 1 (got {k})")
    if k > MAX_K:
        raise SqaError(f"-k must be at most {MAX_K:,} (got {k}); use e.g. -k 10")
    with Index(resolve_index_dir(index_dir), backend) as index:
        hits = index.search(query, k)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "evidence_id": h.evidence_id,
                        "score": h.score,
                        "title": h.paragraph.title,
                        "section": h.paragraph.section,
                        "text": h.paragraph.text,
                    }
                    for h in hits
                ],
                ensure_ascii=False,
                indent=1,
            )
        )
        return
    table = Table(title=f"top {k} for {query!r}", show_lines=True)
    table.add_column("rank", justify="right")
    table.add_column("score", justify="right")
    table.add_column("evidence ID", style="bold cyan")
    table.add_column("title / section")
    table.add_column("snippet")
    for h in hits:
        p = h.paragraph
        table.add_row(
            str(h.rank),
            f"{h.score:.2f}",
            p.evidence_id,
            p.title + (f" / {p.section}" if p.section else ""),
            snippet(p.text),
        )
    Console().print(table)
