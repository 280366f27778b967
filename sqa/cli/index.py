"""``sqa index``: build (or resume building) the paragraph index."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt, resolve_index_dir
from sqa.types import SqaError, SqaWarning


@app.command("index")
def index_command(
    corpus: Annotated[
        Optional[list[str]],
        typer.Option(
            "--corpus",
            help="mini (9,251 gold + 150,679 distractors = "
            "159,930 paragraphs; the default), strategyqa (gold only), full (the 36.6M-paragraph StrategyQA "
            "corpus: downloaded to $SQA_HOME/corpus first, resumably), or corpus file(s): full-corpus JSONL "
            "(plain/.gz) or strategyqa_train_paragraphs.json. Repeatable. --corpus full --corpus FILE: a "
            "copy of the full corpus on disk (no download).",
            show_default=False,
        ),
    ] = None,
    preset: Annotated[
        Optional[str], typer.Option("--preset", hidden=True, help="The old spelling of --corpus NAME.")
    ] = None,
    corpus_url: Annotated[
        Optional[str],
        typer.Option(
            "--corpus-url",
            help="Where --corpus full downloads the corpus from (default: $SQA_CORPUS_URL, else the StrategyQA release).",
            show_default=False,
        ),
    ] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    strict: Annotated[
        bool, typer.Option(help="Stop at the first malformed line instead of skipping and counting it.")
    ] = False,
    fresh: Annotated[
        bool,
        typer.Option(
            help="Delete the index in --index-dir (and its checkpoint) first; only a directory "
            "that sqa recognises as its index is touched, and only the index's files."
        ),
    ] = False,
    es_index: Annotated[str, typer.Option(help="Elasticsearch index name (elasticsearch backend).")] = "sqa-paragraphs",
    es_workers: Annotated[int, typer.Option(help="Parallel bulk workers (elasticsearch backend).")] = 4,
    commit_every: Annotated[
        Optional[int],
        typer.Option(
            help="Paragraphs between checkpoints (resume granularity); default 5,000,000 (embedded) or 200,000 (elasticsearch).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Build the BM25 paragraph index once; re-running after an interruption resumes it."""
    from sqa.api.index import BuildProgress, build_index_dir, corpus_files

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
    if backend not in ("embedded", "elasticsearch"):
        raise SqaError(f"unknown backend {backend!r}; use one of embedded, elasticsearch")
    if commit_every is not None and commit_every < 1:
        raise SqaError(f"--commit-every must be at least 1 (got {commit_every})")
    if es_workers < 1:
        raise SqaError(f"--es-workers must be at least 1 (got {es_workers})")
    corpus = corpus or ["mini"]
    files, name = corpus_files(corpus)
    download = corpus == ["full"]
    if corpus_url is not None and not download:
        raise SqaError("--corpus-url is for --corpus full")
    console = Console(stderr=True, soft_wrap=True)  # one message, one line
    skipped = [0]

    def on_skip(path: str, line: int, reason: str) -> None:
        skipped[0] += 1
        if skipped[0] <= 20:
            console.print(f"[yellow]skipped[/] {path}:{line}: {reason}", markup=True, highlight=False)
        elif skipped[0] == 21:
            console.print("[yellow]more malformed lines skipped; the count is in the summary[/]")

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal and not sys.stderr.isatty(),
    ) as progress:
        tasks: dict = {}

        def on_progress(p) -> None:
            build = isinstance(p, BuildProgress)  # else the full corpus's download (FetchProgress)
            key = ("build", p.file_index) if build else p.phase
            if key not in tasks:
                desc = Path(p.file).name if build else "download" if p.phase == "download" else "check gzip"
                tasks[key] = progress.add_task(desc, total=p.file_bytes if build else p.total, info="")
            if build:
                rate = p.indexed / p.seconds if p.seconds else 0.0
                progress.update(
                    tasks[key], completed=p.bytes_read, info=f"{p.indexed:>12,} paragraphs  {rate:>8,.0f}/s"
                )
            else:
                progress.update(tasks[key], completed=p.done, total=p.total)

        build_index_dir(
            files,
            resolve_index_dir(index_dir),
            backend,
            name=name,
            download=download,
            corpus_url=corpus_url,
            strict=strict,
            fresh=fresh,
            commit_every=commit_every,
            es_index=es_index,
            es_workers=es_workers,
            progress=on_progress,
            on_skip=on_skip,
            on_note=lambda line: console.print(line, highlight=False, markup=False),
            on_built=lambda report: typer.echo(report.summary()),
        )
