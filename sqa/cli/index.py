"""``sqa index``: build (or resume building) the paragraph index."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
                           TransferSpeedColumn)

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt, resolve_index_dir
from sqa.types import SqaError


@app.command("index")
def index_command(
    preset: Annotated[Optional[str], typer.Option(help="mini (9,251 gold + 150,679 distractors = 159,930 paragraphs), strategyqa (gold only) or full (the 36.6M-paragraph StrategyQA corpus: downloaded to $SQA_HOME/corpus first, resumably).")] = None,
    corpus: Annotated[Optional[list[Path]], typer.Option("--corpus", help="Corpus file(s): full-corpus JSONL (plain/.gz) or strategyqa_train_paragraphs.json. Repeatable. With --preset full: a copy of the full corpus on disk (no download).")] = None,
    corpus_url: Annotated[Optional[str], typer.Option("--corpus-url", help="Where --preset full downloads the corpus from (default: $SQA_CORPUS_URL, else the StrategyQA release).", show_default=False)] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    strict: Annotated[bool, typer.Option(help="Stop at the first malformed line instead of skipping and counting it.")] = False,
    fresh: Annotated[bool, typer.Option(help="Delete the index in --index-dir (and its checkpoint) first; only a directory "
                                             "that sqa recognises as its index is touched, and only the index's files.")] = False,
    es_index: Annotated[str, typer.Option(help="Elasticsearch index name (elasticsearch backend).")] = "sqa-paragraphs",
    es_workers: Annotated[int, typer.Option(help="Parallel bulk workers (elasticsearch backend).")] = 4,
    commit_every: Annotated[Optional[int], typer.Option(help="Paragraphs between checkpoints (resume granularity); default 5,000,000 (embedded) or 200,000 (elasticsearch).", show_default=False)] = None,
) -> None:
    """Build the BM25 paragraph index once; re-running after an interruption resumes it."""
    from sqa.indexing import preset_files, read_manifest
    from sqa.indexing.build import CHECKPOINT, build_lock, remove_index

    if preset and corpus and preset != "full":
        raise SqaError("give either --preset or --corpus, not both (only --preset full takes --corpus: a copy of the "
                       "full corpus on disk)")
    if corpus_url is not None and preset != "full":
        raise SqaError("--corpus-url is for --preset full")
    if preset == "full" and corpus and len(corpus) != 1:
        raise SqaError("--preset full takes one --corpus file (the full corpus, .jsonl.gz)")
    if not preset and not corpus:
        preset = "mini"
    if backend not in ("embedded", "elasticsearch"):
        raise SqaError(f"unknown backend {backend!r}; use one of embedded, elasticsearch")
    if commit_every is not None and commit_every < 1:
        raise SqaError(f"--commit-every must be at least 1 (got {commit_every})")
    if es_workers < 1:
        raise SqaError(f"--es-workers must be at least 1 (got {es_workers})")
    files = list(corpus) if corpus else preset_files(preset)
    download = preset == "full" and not corpus
    d = resolve_index_dir(index_dir)
    console = Console(stderr=True, soft_wrap=True)  # one message, one line

    if fresh:
        remove_index(d, dry_run=True)  # a directory that is not an sqa index: refused before anything is written
    with build_lock(d):
        if fresh:
            _remove_local(d, backend, es_index, es_workers, console)
        manifest = read_manifest(d)
        resolved = [str(Path(f).expanduser().resolve()) for f in files]
        if manifest and manifest.get("corpus_files") == resolved and manifest.get("backend") == backend \
                and not (d / CHECKPOINT).exists():
            rejected = manifest.get("es_item_errors") or manifest.get("paragraphs_rejected") or 0
            if rejected:
                first = "; ".join((manifest.get("es_first_errors") or [])[:1])
                raise SqaError(f"{d}: this index was built, but {rejected:,} paragraphs were rejected by the "
                               f"{manifest['backend']} backend (first: {first}); fix the corpus, then rebuild with --fresh")
            console.print(f"index already built in {d}: {manifest['paragraph_count']:,} paragraphs "
                          f"({manifest['backend']}); use --fresh to rebuild")
            return
        if download:
            files = [_fetch(corpus_url, console)]
        _build(files, d, backend, preset, strict, fresh, es_index, es_workers, commit_every, console)


def _fetch(url: Optional[str], console: Console) -> Path:
    """Download the full corpus (``sqa.indexing.download.fetch_corpus``) with a progress bar
    (bytes, rate, time left); returns its path."""
    from sqa.indexing.download import corpus_dir, corpus_url, fetch_corpus, safe_url

    dest_dir = corpus_dir()

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                  disable=not console.is_terminal and not sys.stderr.isatty()) as progress:
        tasks: dict[str, int] = {}

        def on_progress(p) -> None:
            if p.phase not in tasks:
                if p.phase == "download":  # connected: say what and where (also when stderr is not a terminal)
                    size = f" ({p.total:,} bytes)" if p.total else ""
                    console.print(f"downloading {safe_url(corpus_url(url))}{size} to {dest_dir}", highlight=False)
                    if p.restarted:
                        console.print("the server does not resume downloads (no range requests): starting again "
                                      "from the first byte", highlight=False)
                    elif p.resumed_from:
                        console.print(f"resuming the download at {p.resumed_from:,} bytes", highlight=False)
                desc = f"download {safe_url(corpus_url(url)).rsplit('/', 1)[-1]}" if p.phase == "download" \
                    else "check gzip"
                tasks[p.phase] = progress.add_task(desc, total=p.total)
            progress.update(tasks[p.phase], completed=p.done, total=p.total)

        path = fetch_corpus(url, dest_dir, on_progress=on_progress)
    if tasks:
        console.print(f"downloaded and checked {path}", highlight=False)
    return path


def _remove_local(d: Path, backend: str, es_index: str, es_workers: int, console: Console) -> None:
    """``--fresh``: delete the index files sqa recognises in ``d``. For Elasticsearch, the cluster's
    index is deleted (and checked to be sqa's) first, so a refused index leaves ``d`` untouched."""
    from sqa.indexing import open_backend
    from sqa.indexing.build import remove_index

    if backend == "elasticsearch":
        open_backend(d, backend, create=True, es_index=es_index, workers=es_workers, fresh=True).close()
    removed, kept = remove_index(d)
    if kept:
        console.print(f"--fresh: deleted the index's {removed:,} files in {d}; kept {len(kept):,} other "
                      f"entries (e.g. {kept[0].name})", highlight=False)


def _build(files, d: Path, backend: str, preset, strict: bool, fresh: bool, es_index: str, es_workers: int,
           commit_every: Optional[int], console: Console) -> None:
    from sqa.indexing import build_index, open_backend

    # (--fresh already deleted and recreated the Elasticsearch index in _remove_local)
    options = {"es_index": es_index, "workers": es_workers} if backend == "elasticsearch" else {}
    be = open_backend(d, backend, create=True, **options)
    warned = 0

    def on_error(path: str, line: int, reason: str) -> None:
        nonlocal warned
        warned += 1
        if warned <= 20:
            console.print(f"[yellow]skipped[/] {path}:{line}: {reason}", markup=True, highlight=False)
        elif warned == 21:
            console.print("[yellow]more malformed lines skipped; the count is in the summary[/]")

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
                  TextColumn("{task.fields[paras]:>12,} paragraphs  {task.fields[rate]:>8,.0f}/s"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                  disable=not console.is_terminal and not sys.stderr.isatty()) as progress:
        tasks: dict[int, int] = {}

        def on_progress(p) -> None:
            if p.file_index not in tasks:
                tasks[p.file_index] = progress.add_task(Path(p.file).name, total=p.file_bytes, paras=0, rate=0.0)
            progress.update(tasks[p.file_index], completed=p.bytes_read, paras=p.indexed,
                            rate=p.indexed / p.seconds if p.seconds else 0.0)

        try:
            report = build_index(files, d, be, strict=strict, commit_every=commit_every,
                                 on_progress=on_progress, on_error=on_error, preset=preset)
        finally:
            be.close()
    typer.echo(report.summary())
    item_errors = getattr(be, "item_errors", 0)
    if item_errors:
        first = "; ".join(getattr(be, "first_errors", [])[:3])
        raise SqaError(f"{item_errors:,} paragraphs were rejected by the {report.backend} backend (first: {first}); "
                       f"the index holds {report.count:,} of {report.read:,} paragraphs read (details in {d / 'manifest.json'})")
    if report.duplicates:
        before = (f"; the index already held {report.preexisting:,} paragraphs before this build (use --fresh to "
                  f"rebuild from these files only)" if report.preexisting else "")
        console.print(f"[yellow]warning:[/] {report.duplicates:,} paragraphs had an evidence ID seen before: the later "
                      f"copy replaced the earlier one, so the index holds one copy of each ({report.count:,} paragraphs; "
                      f"counted as duplicates_replaced in {d / 'manifest.json'}){before}")
