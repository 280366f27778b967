"""``sqa search``: BM25 search of the paragraph index from the terminal."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt, opt, resolve_index_dir
from sqa.types import MAX_K, SqaError


@app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="Free-text query.")],
    k: Annotated[int, opt("-k", "--k", help="Number of paragraphs (top-k).", show_default=True)] = 10,
    as_json: Annotated[
        bool, opt("--json", help="Print a JSON list of {evidence_id, score, title, section, text}.", show_default=True)
    ] = False,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Search the paragraph index (BM25 over title, section and text)."""
    from sqa.api.index import Index
    from sqa.render.tables import hits_table

    if not query.strip():
        raise SqaError("empty query; give some words to search for")
    if not 1 <= k <= MAX_K:
        raise SqaError(
            f"-k must be at least 1 (got {k})" if k < 1 else f"-k must be at most {MAX_K:,} (got {k}); use e.g. -k 10"
        )
    with Index(resolve_index_dir(index_dir), backend) as index:
        hits = index.search(query, k)
    if as_json:
        typer.echo(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=1))
    else:
        Console().print(hits_table(hits, f"top {k} for {query!r}"))
