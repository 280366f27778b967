"""``sqa.Index``: a BM25 paragraph index on disk, opened or built (resumably), searched from Python.

>>> index = sqa.Index.build(corpus="mini", path="idx")   # or sqa.Index("idx") once it exists
>>> index.search("Aristotle", k=3)[0].evidence_id
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence, Union

from sqa.indexing import CORPORA
from sqa.indexing.build import BuildProgress
from sqa.types import BadInput, Hit, Paragraph, SqaWarning

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["BuildProgress", "CORPORA", "Index", "build_index_dir", "corpus_files"]

Corpus = Union[str, Path, Sequence[Union[str, Path]]]


def corpus_files(corpus: Corpus) -> tuple[list[Path], str | None]:
    """``(files, name)`` of a corpus: a name of :data:`sqa.indexing.CORPORA` (``mini``: the 9,251
    gold + 150,679 shipped distractor paragraphs = 159,930; ``strategyqa``: the gold only;
    ``full``: the 36.6M paragraphs of the StrategyQA release, downloaded to ``$SQA_HOME/corpus``
    when missing), corpus files (StrategyQA's full-corpus JSONL, plain/.gz/.xz, or
    ``strategyqa_train_paragraphs.json``), or ``["full", FILE]``: a copy of the full corpus on
    disk. Raises :class:`sqa.types.BadInput` for an unknown name or an empty list."""
    from sqa.indexing import corpus_files as named

    items = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
    names = [c for c in items if isinstance(c, str) and c in CORPORA]
    files = [Path(c) for c in items if not (isinstance(c, str) and c in CORPORA)]
    if not items:
        raise BadInput("no corpus given; use mini, strategyqa, full, or corpus file paths")
    if len(names) > 1 or (names and files and (names != ["full"] or len(files) != 1)):
        raise BadInput(
            f"corpus {' '.join(map(str, items))}: give one of {', '.join(CORPORA)}, or corpus files "
            "(only full takes a file too: a copy of the full corpus on disk, .jsonl.gz)"
        )
    if names and not files:
        return named(names[0]), names[0]
    for f in files:
        if not f.suffix and not f.exists() and "/" not in str(f):
            raise BadInput(f"unknown corpus {str(f)!r}; use {', '.join(CORPORA)}, or corpus file paths")
    return files, names[0] if names else None


def build_index_dir(
    files: Sequence[str | Path],
    index_dir: str | Path,
    backend: str = "embedded",
    *,
    name: str | None = None,
    download: bool = False,
    corpus_url: str | None = None,
    strict: bool = False,
    fresh: bool = False,
    commit_every: int | None = None,
    es_index: str = "sqa-paragraphs",
    es_workers: int = 4,
    progress: Callable | None = None,
    on_skip: Callable[[str, int, str], None] | None = None,
    on_note: Callable[[str], None] = lambda s: None,
    on_built: Callable | None = None,
):
    """Build (or resume building) the index of ``files`` in ``index_dir``; the driver of
    ``sqa index`` and :meth:`Index.build`. Returns the ``sqa.indexing.build.BuildReport``, or None
    when a corpus of the same content is already indexed there, wherever its files lie now
    (``sqa.indexing.manifest.same_corpus``: sizes and sha256; ``on_note`` says so; ``fresh`` rebuilds).

    ``name``: the corpus name recorded in the manifest; ``download``: fetch the full corpus first
    (``corpus_url``, default ``$SQA_CORPUS_URL`` or the StrategyQA release; resumable).
    ``progress`` gets ``sqa.indexing.build.BuildProgress`` after every batch (and
    ``sqa.indexing.download.FetchProgress`` while downloading); ``on_skip(file, line, reason)``
    each malformed line skipped (``strict``: raise instead); ``on_note(line)`` what is worth a
    line (already built, files ``fresh`` deleted, the download's source); ``on_built(report)`` the
    report as soon as the build ends, before the checks below. Paragraphs whose
    evidence ID was seen before replace the earlier copy: one :class:`sqa.types.SqaWarning`.
    Raises SqaError (one line) for an unknown backend, ``commit_every`` or ``es_workers`` below 1,
    a ``corpus_url`` without ``download``, an unreadable or empty corpus, another build holding the lock,
    a directory that is not an sqa index with ``fresh``, or paragraphs the backend rejected."""
    from sqa.indexing import build_index, read_manifest
    from sqa.indexing.manifest import same_corpus
    from sqa.indexing.build import CHECKPOINT, build_lock, remove_index
    from sqa.pipeline import open_index
    from sqa.types import SqaError

    if backend not in ("embedded", "elasticsearch"):
        raise BadInput(f"unknown backend {backend!r}; use one of embedded, elasticsearch")
    if commit_every is not None and commit_every < 1:
        raise BadInput(f"--commit-every must be at least 1 (got {commit_every})")
    if es_workers < 1:
        raise BadInput(f"--es-workers must be at least 1 (got {es_workers})")
    if corpus_url is not None and not download:
        raise BadInput("--corpus-url is for --corpus full")
    d = Path(index_dir).expanduser()
    if fresh:
        remove_index(d, dry_run=True)  # a directory that is not an sqa index: refused before anything is written
    with build_lock(d):
        if fresh:
            if backend == "elasticsearch":  # the cluster's index first: a refused one leaves d untouched
                open_index(d, backend, create=True, es_index=es_index, workers=es_workers, fresh=True).close()
            removed, kept = remove_index(d)
            if kept:
                on_note(
                    f"--fresh: deleted the index's {removed:,} files in {d}; kept {len(kept):,} other "
                    f"entries (e.g. {kept[0].name})"
                )
        manifest = read_manifest(d)
        if (
            manifest
            and manifest.get("backend") == backend
            and not (d / CHECKPOINT).exists()  # an interrupted build: resumed below (by content too)
            and same_corpus(manifest, files)  # by content: the same corpus at another path is built already
        ):
            rejected = manifest.get("es_item_errors") or manifest.get("paragraphs_rejected") or 0
            if rejected:
                first = "; ".join((manifest.get("es_first_errors") or [])[:1])
                raise SqaError(
                    f"{d}: this index was built, but {rejected:,} paragraphs were rejected by the "
                    f"{manifest['backend']} backend (first: {first}); fix the corpus, then rebuild with "
                    "--fresh"
                )
            on_note(
                f"index already built in {d}: {manifest['paragraph_count']:,} paragraphs "
                f"({manifest['backend']}); use --fresh to rebuild"
            )
            return None
        if download:
            files = [_fetch(corpus_url, progress, on_note)]
        options = {"es_index": es_index, "workers": es_workers} if backend == "elasticsearch" else {}
        be = open_index(d, backend, create=True, **options)
        try:
            report = build_index(
                files,
                d,
                be,
                strict=strict,
                commit_every=commit_every,
                on_progress=progress,
                on_error=on_skip,
                preset=name,
            )
        finally:
            be.close()
    if on_built is not None:
        on_built(report)
    item_errors = be.item_errors
    if item_errors:
        first = "; ".join(getattr(be, "first_errors", [])[:3])
        raise SqaError(
            f"{item_errors:,} paragraphs were rejected by the {report.backend} backend (first: {first}); "
            f"the index holds {report.count:,} of {report.read:,} paragraphs read (details in "
            f"{d / 'manifest.json'})"
        )
    if report.duplicates:
        before = (
            f"; the index already held {report.preexisting:,} paragraphs before this build (use --fresh to "
            f"rebuild from these files only)"
            if report.preexisting
            else ""
        )
        warnings.warn(
            f"{report.duplicates:,} paragraphs had an evidence ID seen before: the later copy replaced the "
            f"earlier one, so the index holds one copy of each ({report.count:,} paragraphs; counted as "
            f"duplicates_replaced in {d / 'manifest.json'}){before}",
            SqaWarning,
            stacklevel=2,
        )
    return report


def _fetch(url: str | None, progress: Callable | None, on_note: Callable[[str], None]) -> Path:
    """Download the full corpus (``sqa.indexing.download.fetch_corpus``), resumably; returns its path."""
    from sqa.indexing.download import corpus_dir, corpus_url, fetch_corpus, safe_url

    dest_dir = corpus_dir()
    said: set = set()

    def on_progress(p) -> None:
        if p.phase == "download" and p.phase not in said:  # connected: say what and where
            said.add(p.phase)
            size = f" ({p.total:,} bytes)" if p.total else ""
            on_note(f"downloading {safe_url(corpus_url(url))}{size} to {dest_dir}")
            if p.restarted:
                on_note("the server does not resume downloads (no range requests): starting again from the first byte")
            elif p.resumed_from:
                on_note(f"resuming the download at {p.resumed_from:,} bytes")
        if progress is not None:
            progress(p)

    path = fetch_corpus(url, dest_dir, on_progress=on_progress)
    if said:
        on_note(f"downloaded and checked {path}")
    return path


class Index:
    """A BM25 paragraph index in a directory (``sqa.indexing``: tantivy on disk, or Elasticsearch
    with ``backend="elasticsearch"``, whose manifest the directory keeps).

    ``Index(path)`` opens an index built before (default ``$SQA_HOME/index``); raises
    :class:`sqa.types.IndexNotFound` when there is none. ``len(index)``: its paragraphs. Use it as
    a context manager, or ``close()`` it, to release the engine's files."""

    def __init__(self, path: str | Path | None = None, backend: str = "embedded"):
        from sqa.paths import default_index_dir
        from sqa.pipeline import open_index

        self.path = Path(path).expanduser() if path is not None else default_index_dir()
        self.backend = backend
        self._be = open_index(self.path, backend)

    @classmethod
    def build(
        cls,
        corpus: Corpus = "mini",
        path: str | Path | None = None,
        *,
        backend: str = "embedded",
        progress: "Callable | bool | Console | None" = None,
        strict: bool = False,
        fresh: bool = False,
    ) -> "Index":
        """Build the index of ``corpus`` in ``path`` (default ``$SQA_HOME/index``) and open it.

        ``corpus``: ``"mini"`` (159,930 paragraphs: about 15 s on 2 cores), ``"strategyqa"``
        (9,251 gold paragraphs), ``"full"`` (36.6M, downloaded first) or corpus file paths (see
        :func:`corpus_files`). Resumable: calling it again after an interruption continues from
        the last checkpoint, and on a finished index of a corpus with the same content (wherever its
        files lie now: a moved checkout or venv) it only opens it.
        ``progress``: by default (None or True) a rich bar per corpus file on stderr (bytes read,
        paragraphs indexed and their rate: ``sqa.render.progress.IndexProgress``), drawn on a
        terminal and in Jupyter (as the cell's output), nothing in a log; a ``rich.console.Console``
        to draw it on; False for none; or a callback that gets a ``sqa.indexing.build.BuildProgress``
        (file, bytes read, paragraphs indexed, seconds) after every batch. Malformed lines are skipped and counted (``strict``:
        raise :class:`sqa.types.BadInput`-like SqaError instead); ``fresh`` deletes the index
        there first. Raises SqaError for an unreadable corpus or another build in progress."""
        from sqa.checks import path_arg
        from sqa.paths import default_index_dir

        if not isinstance(corpus, (str, Path)):
            list_corpus = corpus if isinstance(corpus, (list, tuple)) else [corpus]
            for c in list_corpus:
                path_arg("Index.build", "corpus", c, none_ok=False)
        path_arg("Index.build", "path", path)
        files, name = corpus_files(corpus)
        d = Path(path).expanduser() if path is not None else default_index_dir()
        download = corpus == "full"  # ["full", FILE] indexes a copy on disk
        from contextlib import nullcontext

        from sqa.render.progress import IndexProgress, default_drawer_console, drawn

        console = default_drawer_console(progress)
        bar = IndexProgress(console, disable=not drawn(console)) if console is not None else None
        with bar or nullcontext():
            drawer = bar or progress or None
            build_index_dir(
                files, d, backend, name=name, download=download, strict=strict, fresh=fresh, progress=drawer
            )
        return cls(d, backend)

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """The top-``k`` paragraphs for ``query`` by BM25 over title, section and text, best first:
        ``Hit`` with ``evidence_id``, ``title``, ``text``, ``score`` (BM25, engine units, comparable
        within one query) and ``rank`` (1-based). Raises :class:`sqa.types.BadInput` for an empty
        query or ``k`` outside 1..10,000."""
        from sqa.checks import int_arg, text_arg
        from sqa.types import MAX_K

        text_arg("Index.search", "query", query)
        int_arg("Index.search", "k", k, 1, MAX_K)
        if not query.strip():
            raise BadInput("empty query; give some words to search for")
        if not 1 <= k <= MAX_K:
            raise BadInput(f"k must be from 1 to {MAX_K:,} (got {k})")
        return self._be.search(query, k)

    def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """:meth:`search` for each of ``queries`` (a list of str), in order: one list of top-``k``
        hits per query. Raises :class:`sqa.types.BadInput` for a single ``str`` (pass a list), an
        empty or non-text query (naming its position) or ``k`` outside 1..10,000."""
        from sqa.checks import int_arg, list_arg
        from sqa.types import MAX_K

        qs = list_arg("Index.search_many", "queries", queries, "['Aristotle', 'laptop']")
        int_arg("Index.search_many", "k", k, 1, MAX_K)
        for i, q in enumerate(qs):
            if not q.strip():
                raise BadInput(f"Index.search_many: queries[{i}] is empty; give some words to search for")
        return [self._be.search(q, k) for q in qs]

    def get(self, evidence_ids: Sequence[str]) -> list[Paragraph]:
        """The paragraphs of ``evidence_ids`` (``"Title-N"``, as in StrategyQA's annotations) that
        the index holds, in the order given; unknown IDs are left out. Raises
        :class:`sqa.types.BadInput` for a single ``str`` (pass a list: ``["Laptop-1"]``) or an ID
        that is not text."""
        from sqa.checks import list_arg

        ids = list_arg("Index.get", "evidence_ids", evidence_ids, "['Laptop-1']")
        return self._be.get(ids)

    def __len__(self) -> int:
        return self._be.count()

    @property
    def manifest(self) -> dict:
        """What the index is (``manifest.json``: corpus files and name, paragraph count, backend,
        analyser, BM25 parameters, built_at)."""
        from sqa.indexing import read_manifest

        return read_manifest(self.path) or {}

    def close(self) -> None:
        """Release the engine's files (the index stays on disk)."""
        self._be.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, backend={self.backend!r})"
