"""``sqa index``: build (or resume building) the paragraph index (:func:`sqa.api.index.build_index_dir`)."""

from __future__ import annotations

import sys
import warnings
from typing import Annotated, Optional

import typer
from rich.console import Console

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt, opt, resolve_index_dir
from sqa.types import SqaError, SqaWarning

HELP = {
    "corpus": "mini (9,251 gold + 150,679 distractors = 159,930 paragraphs; the default), strategyqa (gold only), full (the 36.6M-paragraph StrategyQA corpus: downloaded to $SQA_HOME/corpus first, resumably), or corpus file(s): full-corpus JSONL (plain/.gz) or strategyqa_train_paragraphs.json. Repeatable. --corpus full --corpus FILE: a copy of the full corpus on disk (no download).",
    "corpus_url": "Where --corpus full downloads the corpus from (default: $SQA_CORPUS_URL, else the StrategyQA release).",
    "strict": "Stop at the first malformed line instead of skipping and counting it.",
    "fresh": "Delete the index in --index-dir (and its checkpoint) first; only a directory that sqa recognises as its index is touched, and only the index's files.",
    "commit_every": "Paragraphs between checkpoints (resume granularity); default 5,000,000 (embedded) or 200,000 (elasticsearch).",
}


@app.command("index")
def index_command(
    corpus: Annotated[Optional[list[str]], opt("--corpus", help=HELP["corpus"])] = None,
    preset: Annotated[Optional[str], opt("--preset", hidden=True, help="The old spelling of --corpus NAME.")] = None,
    corpus_url: Annotated[Optional[str], opt("--corpus-url", help=HELP["corpus_url"])] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    strict: Annotated[bool, opt("--strict/--no-strict", help=HELP["strict"], show_default=True)] = False,
    fresh: Annotated[bool, opt("--fresh/--no-fresh", help=HELP["fresh"], show_default=True)] = False,
    es_index: Annotated[
        str, opt("--es-index", help="Elasticsearch index name (elasticsearch backend).", show_default=True)
    ] = "sqa-paragraphs",
    es_workers: Annotated[
        int, opt("--es-workers", help="Parallel bulk workers (elasticsearch backend).", show_default=True)
    ] = 4,
    commit_every: Annotated[Optional[int], opt("--commit-every", help=HELP["commit_every"])] = None,
) -> None:
    """Build the BM25 paragraph index once; re-running after an interruption resumes it."""
    from sqa.api.index import build_index_dir, corpus_files
    from sqa.render.progress import IndexProgress

    if preset is not None:  # the old spelling: `sqa index --preset NAME` is `--corpus NAME`
        warnings.warn(
            f"`sqa index --preset {preset}` is now `sqa index --corpus {preset}` (--preset names reader "
            "configurations in ask and eval)",
            SqaWarning,
            stacklevel=1,
        )
        if corpus and preset != "full":
            raise SqaError(f"give either --corpus or the old --preset {preset}, not both")
        corpus = [preset, *(corpus or [])]
    corpus = corpus or ["mini"]
    files, name = corpus_files(corpus)
    console = Console(stderr=True, soft_wrap=True)  # one message, one line
    with IndexProgress(console, disable=not console.is_terminal and not sys.stderr.isatty()) as progress:
        build_index_dir(
            files,
            resolve_index_dir(index_dir),
            backend,
            name=name,
            download=corpus == ["full"],
            corpus_url=corpus_url,
            strict=strict,
            fresh=fresh,
            commit_every=commit_every,
            es_index=es_index,
            es_workers=es_workers,
            progress=progress,
            on_skip=progress.skip,
            on_note=lambda line: console.print(line, highlight=False, markup=False),
            on_built=lambda report: typer.echo(report.summary()),
        )
