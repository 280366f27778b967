"""Corpus -> index: corpus files streamed (``corpus``), the BM25 backends (``embedded``: tantivy;
``elastic``: Elasticsearch) and the resumable build driver (``build``).

``open_backend`` is the one place that maps a backend name to an implementation.
"""

from __future__ import annotations

from pathlib import Path

import warnings

from sqa.indexing.build import CHECKPOINT, BuildReport, build_index, read_manifest
from sqa.types import BadInput, MAX_K, SearchBackend, SqaError, SqaWarning

BACKENDS = ("embedded", "elasticsearch")


CORPORA = ("mini", "strategyqa", "full")


def corpus_files(name: str) -> list[Path]:
    """The files of a named corpus: ``strategyqa`` = the 9,251 gold paragraphs; ``mini`` = gold +
    the 150,679 shipped distractors (159,930 paragraphs); ``full`` = the StrategyQA release's
    36.6M-paragraph corpus at ``$SQA_HOME/corpus/`` (where ``sqa index --corpus full`` downloads
    it, see ``sqa.indexing.download``; the path is returned whether or not it is there yet).
    Raises BadInput for another name."""
    from sqa.strategyqa import DISTRACTORS_FILE, PARAGRAPHS_FILE

    if name == "strategyqa":
        return [PARAGRAPHS_FILE]
    if name == "mini":
        return [PARAGRAPHS_FILE, DISTRACTORS_FILE]
    if name == "full":
        from sqa.indexing.download import CORPUS_NAME, corpus_dir

        return [corpus_dir() / CORPUS_NAME]
    raise BadInput(f"unknown corpus {name!r}; use {', '.join(CORPORA)}, or corpus file paths")


def open_backend(index_dir: str | Path, backend: str = "embedded", create: bool = False, **options) -> SearchBackend:
    """Open the search backend named ``backend`` for ``index_dir``.

    ``embedded``: the tantivy index in ``index_dir`` (raises SqaError if missing and not ``create``).
    ``elasticsearch``: the cluster at ``$SQA_ES_URL`` (index name from ``options['es_index']``,
    the manifest, or ``sqa-paragraphs``); ``index_dir`` keeps the manifest and checkpoint.
    To search (``create`` false), an index without a single paragraph raises SqaError, and a
    partial one (a build was interrupted, or no build finished: a checkpoint and no manifest)
    issues an ``SqaWarning`` saying how to finish it (the CLI prints it as one line).
    """
    if backend == "embedded":
        from sqa.indexing.embedded import TantivyBackend

        be = TantivyBackend(index_dir, create=create, **options)
    elif backend == "elasticsearch":
        from sqa.indexing.elastic import ElasticsearchBackend

        manifest = read_manifest(index_dir) or {}
        if "es_index" not in options and manifest.get("es_index"):
            options["es_index"] = manifest["es_index"]
        be = ElasticsearchBackend(create=create, **options)
    else:
        raise SqaError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    if not create:
        try:
            check_searchable(index_dir, be)
        except BaseException:
            be.close()
            raise
    return be


def check_searchable(index_dir: str | Path, be: SearchBackend) -> None:
    """Raise SqaError if ``be`` holds no paragraph; warn (``SqaWarning``) if the build of
    ``index_dir`` did not finish. See ``open_backend``."""
    d = Path(index_dir)
    where = d if be.name == "embedded" else f"Elasticsearch index {getattr(be, 'es_index', '?')!r} ({d})"
    n = be.count()
    build = f"`sqa index --index-dir {d}` with the same options" + (
        " --backend elasticsearch" if be.name != "embedded" else ""
    )
    if n == 0:
        raise SqaError(f"{where}: the index holds no paragraphs; build it with {build}")
    if (d / CHECKPOINT).exists():
        warnings.warn(
            f"{where}: partial index ({n:,} paragraphs): its build was interrupted; run {build} to finish it",
            SqaWarning,
            stacklevel=3,
        )
    elif read_manifest(d) is None and be.name == "embedded":
        warnings.warn(
            f"{where}: no manifest.json, so this index's build may not have finished ({n:,} paragraphs); "
            f"run {build} to finish it",
            SqaWarning,
            stacklevel=3,
        )


__all__ = [
    "BACKENDS",
    "MAX_K",
    "CORPORA",
    "BuildReport",
    "build_index",
    "check_searchable",
    "open_backend",
    "corpus_files",
    "read_manifest",
]
