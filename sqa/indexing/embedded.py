"""The embedded default backend: a tantivy (Rust, Lucene-like) index in a directory on disk.

Chosen by measurement over bm25s (see bench/index.py and bench/results/index.json): tantivy
streams segments to disk, so the index never has to fit in RAM, indexes with every core and
answers a top-10 BM25 query in milliseconds (p50 8.5 ms at 2M paragraphs, one core); bm25s
builds its token lists and sparse matrix in memory (peak RSS 3.1 GB at 1M paragraphs, about
70 GB extrapolated to 36.6M), too much for 36.6M paragraphs on 24 GiB.

Schema (version 2):
- ``evidence_id``: raw (untokenised) and stored, so a paragraph can be replaced or fetched by ID.
- ``title``: stored, analysed with term frequencies (for display, and for title-boosted queries).
- ``section``, ``text``, ``headers`` (joined with " > "): stored only, as UTF-8 bytes fields
  (tantivy-py has no stored-but-unindexed text field), for display.
- ``body``: title + section + text, analysed with term frequencies, not stored: the BM25 field,
  i.e. one document per paragraph with everything in one field, as in StrategyQA's
  Elasticsearch baseline and the Lucene reference numbers in the data README.
No positions are indexed: queries are bags of terms (BM25 needs only term frequencies). Indexing
the text once (in ``body``) instead of twice, without positions, raised the indexing rate of the
150,679 distractors from about 6k to 11k paragraphs/s in a side-by-side run on the same (shared)
2 cores, and cut the mini index from 103 MB to 68 MB. Indexes built with the version 1 schema
(``section``/``text`` analysed text fields, positions) are still opened, searched and extended.

Analyser ``en``: word tokens, lowercased, tantivy's English stopword list removed, Snowball
English stemmer. BM25 with tantivy's defaults k1=1.2, b=0.75 (Robertson & Zaragoza 2009).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import tantivy

from sqa.indexing.query import check_k, query_terms
from sqa.types import Hit, Paragraph, SqaError

ANALYZER = "en"
SCHEMA_VERSION = 2
ANALYZER_DESCRIPTION = "tantivy en: simple tokenizer, remove_long(40), lowercase, english stopwords, english stemmer"
BM25 = {"k1": 1.2, "b": 0.75}  # tantivy's fixed BM25 parameters
SEARCH_FIELDS = ("body",)


def analyzer() -> "tantivy.TextAnalyzer":
    """A new instance of the index's text analyser (``ANALYZER_DESCRIPTION``: simple tokenizer, tokens
    over 40 bytes dropped, lowercase, English stopwords, Snowball English stemmer); public so that the
    indexing benchmarks (bench/index_profile.py) time exactly what the index runs."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _schema() -> "tantivy.Schema":
    b = tantivy.SchemaBuilder()
    b.add_text_field("evidence_id", stored=True, tokenizer_name="raw", index_option="basic")
    b.add_text_field("title", stored=True, tokenizer_name=ANALYZER, index_option="freq")
    b.add_bytes_field("section", stored=True, indexed=False)
    b.add_bytes_field("text", stored=True, indexed=False)
    b.add_bytes_field("headers", stored=True, indexed=False)
    b.add_text_field("body", stored=False, tokenizer_name=ANALYZER, index_option="freq")
    return b.build()


def _is_v1_index(index_dir: Path) -> bool:
    """True for an index built with the version 1 schema (``text`` an analysed text field)."""
    import json

    try:
        fields = json.loads((index_dir / "meta.json").read_text(encoding="utf-8")).get("schema", [])
    except (OSError, ValueError):
        return False
    return any(f.get("name") == "text" and f.get("type") == "text" for f in fields)


class TantivyBackend:
    """BM25 paragraph index in ``index_dir`` (created if missing). See the module doc for the schema.

    ``heap_mb`` is the writer's total indexing memory budget (split across ``threads``, default
    every core). ``add`` replaces a paragraph already indexed under the same evidence ID (committed,
    or added earlier in the window not yet committed): it checks the ID (in the window's set, then
    against the hashes of this object's own commits when it started on an empty index, else by a
    look-up in the committed index: ``_maybe_ours``) and deletes by term only then, so a re-run, a
    resumed build or a corpus with a repeated ID never duplicates, while new paragraphs are added
    at full speed. ``heap_mb`` 1024: 4 and 8 GB did not lower the CPU
    (bench/results/index_profile_heap.json). ``upsert = True`` forces the
    delete for every paragraph. Raises SqaError if the directory holds something that is not a
    compatible index, when another process holds tantivy's writer lock, or when writing fails
    (full disk: the message names the directory).
    """

    name = "embedded"

    def __init__(self, index_dir: str | Path, create: bool = True, threads: int | None = None, heap_mb: int = 1024):
        self.index_dir = Path(index_dir)
        self.threads = threads or os.cpu_count() or 1
        self.heap_mb = heap_mb
        if not create and not (self.index_dir / "meta.json").exists():
            raise SqaError(
                f"{self.index_dir}: no index here; build one with `sqa index --corpus mini --index-dir {self.index_dir}`"
            )
        if self.index_dir.exists() and not self.index_dir.is_dir():
            raise SqaError(f"{self.index_dir}: is a file, not an index directory; give a directory to --index-dir")
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self._v1 = _is_v1_index(self.index_dir)
        try:
            if (self.index_dir / "meta.json").exists():
                self.index = tantivy.Index.open(str(self.index_dir))
            else:
                self.index = tantivy.Index(_schema(), path=str(self.index_dir), reuse=True)
        except (OSError, ValueError) as e:
            raise self._read_error(e, "open the tantivy index") from None
        self._analyzer = analyzer()
        self.index.register_tokenizer(ANALYZER, self._analyzer)
        self._writer = None
        self._dirty = False  # paragraphs added since the last commit
        self._window: set[str] = set()  # evidence IDs added since the last commit
        self._committed = None  # searcher over the committed index (False: it is empty)
        self._base_docs: int | None = None  # paragraphs committed before this object first wrote
        self._ours: list[np.ndarray] = []  # per commit of this object: sorted hash() of its evidence IDs
        self.upsert = False

    def _read_error(self, e: Exception, what: str) -> SqaError:
        """One line for an index that cannot be read: a permission problem says so (the index may
        be intact: ``--fresh`` would delete it), a damaged one names the directory and the rebuild."""
        msg = " ".join(str(e).split())
        unreadable = (
            [p for p in [self.index_dir, *self.index_dir.iterdir()] if not os.access(p, os.R_OK)]
            if os.access(self.index_dir, os.R_OK | os.X_OK)
            else [self.index_dir]
        )
        if unreadable or "Permission denied" in msg or "os error 13" in msg:
            shown = unreadable[0] if unreadable else self.index_dir
            return SqaError(
                f"{shown}: cannot {what}: permission denied; the index may be intact, so give this user "
                "read access (or use another --index-dir); do not rebuild it"
            )
        return SqaError(
            f"{self.index_dir}: cannot {what} ({type(e).__name__}: {msg}); its files are damaged: "
            f"rebuild it with `sqa index --fresh --index-dir {self.index_dir}` (deletes only the index's "
            "own files)"
        )

    def _fail(self, e: Exception, what: str) -> SqaError:
        msg = str(e)
        if "LockBusy" in msg:
            return SqaError(
                f"{self.index_dir}: another process is writing this index (tantivy's writer lock is taken); "
                "wait for it to finish, then run the same command again"
            )
        hint = "run the same command again to resume"
        if isinstance(e, UnicodeError):  # a paragraph no index can hold: running again fails the same way
            hint = "a paragraph's text is not Unicode (a lone surrogate); fix that corpus line, then run again"
        elif "os error 28" in msg or "No space left" in msg or self._disk_full():
            # a tantivy worker thread that hits a full disk reports only "A worker thread encountered
            # an error (io::Error most likely)", so the free space is checked too
            hint = "no space left on the device: free some space, then run the same command again to resume"
        elif "os error 27" in msg:
            hint = "a file grew past the file-size limit: raise it or free space, then run the same command again to resume"
        return SqaError(f"{self.index_dir}: could not {what} ({msg}); {hint}")

    def _disk_full(self, min_free: int = 1 << 20) -> bool:
        """True when the index's file system has less than ``min_free`` bytes free (1 MiB)."""
        import shutil

        try:
            return shutil.disk_usage(self.index_dir).free < min_free
        except OSError:
            return False

    # -- writing -------------------------------------------------------------------------
    def _get_writer(self):
        if self._writer is None:
            try:
                self._writer = self.index.writer(heap_size=self.heap_mb * 1_000_000, num_threads=self.threads)
            except (OSError, ValueError) as e:
                raise self._fail(e, "open the index for writing") from None
        return self._writer

    def _maybe_ours(self, ids: list[str]) -> np.ndarray | None:
        """For a build that started on an empty index: True where an ID may already be in a commit
        of this object (its ``hash`` is in ``_ours``; a collision only costs a needless delete),
        so that no ID is looked up in the index. None when the index held paragraphs before this
        object wrote (a resumed build, or adding to an index): then each ID is looked up.

        Why: at 10M resampled paragraphs (8M of them looked up, with 2M-paragraph windows) the
        look-ups in the committed index (``_in_committed``) cost the reader thread 2.7 us a
        paragraph (17.5 vs 14.8 us) and 0.6 GB of peak RSS (bench/results/index_profile_lookups.json,
        one build each); hashing and ``np.searchsorted`` over the commits' sorted hashes cost well
        under 1 us."""
        if self._base_docs is None:
            self.index.reload()
            self._base_docs = self.index.searcher().num_docs
        if self._base_docs:
            return None
        found = np.zeros(len(ids), dtype=bool)
        if self._ours:
            h = np.fromiter((hash(e) for e in ids), dtype=np.int64, count=len(ids))
            for arr in self._ours:
                i = np.searchsorted(arr, h)
                i[i == len(arr)] = 0
                found |= arr[i] == h
        return found

    def _in_committed(self, evidence_id: str) -> bool:
        if self._committed is None:
            self.index.reload()
            searcher = self.index.searcher()
            self._committed = searcher if searcher.num_docs else False
        return bool(self._committed) and self._committed.doc_freq("evidence_id", evidence_id) > 0

    def add(self, paragraphs: Iterable[Paragraph]) -> int:
        """Queue paragraphs; returns how many. A paragraph replaces the one with its evidence ID if
        there is one. They become searchable after ``commit``."""
        w = self._get_writer()
        window, upsert, v1 = self._window, self.upsert, self._v1
        Document, add_document = tantivy.Document, w.add_document
        paragraphs = paragraphs if isinstance(paragraphs, list) else list(paragraphs)
        ours = None if upsert else self._maybe_ours([p.evidence_id for p in paragraphs])
        self._dirty = True
        n = 0
        try:
            for i, p in enumerate(paragraphs):
                eid, title, section, text = p.evidence_id, p.title, p.section, p.text
                if upsert or eid in window or (self._in_committed(eid) if ours is None else ours[i]):
                    w.delete_documents_by_term("evidence_id", eid)
                window.add(eid)
                headers = " > ".join(filter(None, p.headers)) if p.headers else ""
                doc = Document()
                doc.add_text("evidence_id", eid)
                doc.add_text("title", title)
                if v1:
                    doc.add_text("section", section)
                    doc.add_text("text", text)
                    doc.add_text("headers", headers)
                else:
                    doc.add_bytes("section", section.encode())
                    doc.add_bytes("text", text.encode())
                    doc.add_bytes("headers", headers.encode())
                doc.add_text("body", f"{title}\n{section}\n{text}" if section else f"{title}\n{text}")
                add_document(doc)
                n += 1
        except (OSError, ValueError) as e:
            raise self._fail(e, "add paragraphs to the index") from None
        return n

    def commit(self) -> None:
        """Make every added paragraph durable and searchable. Raises SqaError when the write fails
        (the index keeps its last commit; re-running the build resumes from there).

        The writer stays open across commits and segment merges run in the background: waiting
        for them at every checkpoint (as before) stalled the reader for each merge (1.6 s of a
        15.1 s build of 300,000 paragraphs with a commit every 30,000, timed once around
        ``wait_merging_threads`` on the shared 2 cores). ``close`` lets them finish."""
        if self._base_docs == 0 and self._window:  # see _maybe_ours
            self._ours.append(
                np.sort(np.fromiter((hash(e) for e in self._window), dtype=np.int64, count=len(self._window)))
            )
        self._window = set()
        self._committed = None
        w = self._writer
        if w is not None:
            try:
                w.commit()
            except (OSError, ValueError) as e:
                self._writer = None  # a writer whose commit failed is not reused
                raise self._fail(e, "commit the index") from None
            self._dirty = False
        self.index.reload()

    item_errors = 0  # tantivy accepts every paragraph (the SearchBackend Protocol's count of refused ones)
    created = None  # tantivy does not say which additions were new (the build's count check is Elasticsearch's)

    def manifest_extra(self) -> dict:
        """What ``manifest.json`` records about how this index ranks (part of its identity):
        schema version, analyser and BM25 parameters (see the module doc)."""
        return {"schema_version": SCHEMA_VERSION, "analyzer": ANALYZER_DESCRIPTION, "bm25": dict(BM25)}

    # -- reading -------------------------------------------------------------------------
    def _to_paragraph(self, doc) -> Paragraph:
        def first(f: str) -> str:
            v = doc.get_first(f) or ""
            return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else v

        headers = tuple(h for h in first("headers").split(" > ") if h)
        return Paragraph(
            evidence_id=first("evidence_id"),
            title=first("title"),
            text=first("text"),
            section=first("section"),
            headers=headers,
        )

    def search(self, query: str, k: int = 10, title_boost: float = 0.0) -> list[Hit]:
        """Top-``k`` hits by BM25 on ``body`` (title+section+text); with ``title_boost`` > 0 a
        match in the title field adds its own BM25 score times that boost. Any free text is
        accepted (see ``query_terms``); an empty or all-stopword query returns []. Raises SqaError
        for ``k`` outside 0..``MAX_K``."""
        check_k(k)
        terms = query_terms(query)
        tokens = self._analyzer.analyze(" ".join(terms)) if terms and k > 0 else []
        if not tokens:
            return []  # nothing left after stopwords
        # OR of one term query per analysed query token, scores summed; a repeated token counts
        # each time, as in Lucene/Elasticsearch's match query and Anserini's bag-of-words query.
        # No query syntax, and no phrase queries (they would need positions).
        schema = self.index.schema
        Q, should = tantivy.Query, tantivy.Occur.Should
        clauses = [(should, Q.term_query(schema, "body", t, index_option="freq")) for t in tokens]
        if title_boost > 0:
            clauses += [
                (should, Q.boost_query(Q.term_query(schema, "title", t, index_option="freq"), title_boost))
                for t in tokens
            ]
        q = Q.boolean_query(clauses)
        try:
            searcher = self.index.searcher()
            result = searcher.search(q, k, count=False)
            return [
                Hit(paragraph=self._to_paragraph(searcher.doc(addr)), score=float(score), rank=i)
                for i, (score, addr) in enumerate(result.hits, start=1)
            ]
        except (OSError, ValueError, RuntimeError) as e:  # a damaged segment file
            raise self._read_error(e, "search the index") from None

    def count(self) -> int:
        self.index.reload()
        return self.index.searcher().num_docs

    def get(self, ids: Sequence[str]) -> list[Paragraph]:
        """The paragraphs with these evidence IDs (missing ones left out). Raises SqaError naming
        the index when its files cannot be read."""
        out = []
        try:
            searcher = self.index.searcher()
            for eid in ids:
                q = tantivy.Query.term_query(self.index.schema, "evidence_id", eid)
                res = searcher.search(q, 1, count=False)
                if res.hits:
                    out.append(self._to_paragraph(searcher.doc(res.hits[0][1])))
        except (OSError, ValueError, RuntimeError) as e:  # a damaged segment file
            raise self._read_error(e, "read the index") from None
        return out

    def close(self) -> None:
        """Drop what was added since the last commit and release the writer lock. When nothing
        was pending (a finished build), first wait for the segment merges under way, so that the
        index is left merged; after an interrupted build (uncommitted paragraphs) it does not
        wait: those merges are abandoned and their files collected by the next writer."""
        w, self._writer = self._writer, None
        dirty, self._dirty = self._dirty, False
        self._window = set()
        if w is not None:
            try:
                if dirty:
                    w.rollback()
                else:
                    w.wait_merging_threads()  # consumes the writer
            except (RuntimeError, ValueError, OSError):
                pass  # already consumed or failed: dropping it releases the lock as well
