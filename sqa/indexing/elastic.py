"""The Elasticsearch backend: the same ``SearchBackend`` interface as the embedded tantivy index,
for the full 36.6M-paragraph corpus or a shared cluster. Uses the official ``elasticsearch``
client (8.x; its major version must match the server's, see ``docker/docker-compose.yml``).

Connection (environment only, never from code or the command line):

- ``SQA_ES_URL``: e.g. ``http://localhost:9200`` (default when unset); ``https://`` works too,
  with ``SQA_ES_CA_CERTS`` pointing at the cluster's CA certificate if it is self-signed.
- ``SQA_ES_API_KEY`` (the base64 "encoded" form Kibana / the API key API prints), or
  ``SQA_ES_USER`` (default ``elastic``) + ``SQA_ES_PASSWORD``.

Index mapping (``mapping()``): ``_id`` = evidence ID, so re-indexing a paragraph replaces it and
a re-run never duplicates; ``evidence_id`` keyword; ``title``, ``section``, ``text`` and ``body``
analysed with ES's built-in ``english`` analyzer (standard tokenizer, possessive removal,
lowercase, English stopwords, Porter stemmer). ``body`` = title + section + text, the default
BM25 field, built exactly as the embedded backend builds its own (``"{title}\\n{section}\\n{text}"``)
so both backends rank by BM25 over one combined field (k1=1.2, b=0.75 in both). ``body`` is sent
with each document rather than filled by ``copy_to`` because not every ES-API server implements
``copy_to`` (noida-db, used by the tests, does not); it is excluded from ``_source``, so it costs
no stored bytes.

Bulk loading: ``add`` hands each batch to a pool of ``workers`` threads, each running
``elasticsearch.helpers.streaming_bulk`` (chunks of ``chunk_size``), which retries documents and
whole requests rejected with HTTP 429 with exponential backoff (``initial_backoff`` s doubling up
to ``max_backoff``, ``max_retries`` times). While loading, the index has ``refresh_interval: -1``
and ``number_of_replicas: 0``; ``commit()`` waits for every in-flight request, restores the
previous values and refreshes. The previous values are also saved in the index mapping's
``_meta`` so that a run killed mid-load (kill -9) still restores them on its next run. Per-item
failures (e.g. a mapping error) are counted in ``item_errors`` with the first few kept in
``first_errors``; they never pass silently: the build report's final ``_count`` falls short of
the paragraphs read, and ``sqa index`` exits non-zero naming the first error.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable, Sequence

from sqa.indexing.es_connect import _HELP, DEFAULT_URL, check_url, connect, redact_url  # noqa: F401  (re-exported)
from sqa.indexing.query import check_k, query_terms
from sqa.types import Hit, Paragraph, SqaError

DEFAULT_INDEX = "sqa-paragraphs"
ANALYZER = "english"
SCHEMA_VERSION = 1  # of mapping()
_SAVED_KEY = "sqa_settings_before_load"  # key in the index's mapping _meta
_FIELDS = {"evidence_id", "title", "section", "text", "headers", "body"}


def is_sqa_mapping(mappings: dict) -> bool:
    """True for the mapping of an index sqa created: ``_meta.created_by == "sqa"``, or (an index
    created before that mark existed) exactly sqa's fields."""
    meta = mappings.get("_meta") or {}
    if meta.get("created_by") == "sqa":
        return True
    return set((mappings.get("properties") or {})) == _FIELDS


_SOURCE_EXCLUDES = ["body"]


def mapping() -> dict:
    """The index mapping (see the module doc). ``dynamic: strict``: a document with an unknown
    field is rejected and counted as an item error rather than silently widening the mapping.
    ``_meta.created_by = "sqa"`` marks the index as sqa's (``--fresh`` deletes no other index)."""
    text = {"type": "text", "analyzer": ANALYZER}
    return {
        "dynamic": "strict",
        "_meta": {"created_by": "sqa"},
        "_source": {"excludes": list(_SOURCE_EXCLUDES)},
        "properties": {
            "evidence_id": {"type": "keyword"},
            "title": dict(text),
            "section": dict(text),
            "text": dict(text),
            "headers": {"type": "keyword", "index": False, "doc_values": False},
            "body": dict(text),
        },
    }


def body_text(p: Paragraph) -> str:
    """The combined BM25 field, identical to the embedded backend's ``body``."""
    return f"{p.title}\n{p.section}\n{p.text}" if p.section else f"{p.title}\n{p.text}"


class ElasticsearchBackend:
    """BM25 paragraph index in the Elasticsearch index ``es_index`` (see the module doc).

    ``create``: create the index if missing (else a missing index raises SqaError); ``fresh``:
    delete and recreate it first. ``workers`` bulk threads, ``chunk_size`` documents per bulk
    request; 429 retries: ``max_retries`` with backoff from ``initial_backoff`` seconds.
    ``shards`` / ``replicas``: for a new index (replicas default: 0 on a one-node cluster, else 1).
    ``url``: overrides ``$SQA_ES_URL`` (credentials still come from the environment).
    Raises SqaError when the cluster is unreachable, a bulk request fails for good, or the index
    exists but was not created by sqa (see ``is_sqa_mapping``; ``fresh`` then deletes nothing).
    """

    name = "elasticsearch"

    def __init__(
        self,
        create: bool = False,
        es_index: str = DEFAULT_INDEX,
        workers: int = 4,
        fresh: bool = False,
        url: str | None = None,
        chunk_size: int = 500,
        max_retries: int = 8,
        initial_backoff: float = 2.0,
        max_backoff: float = 60.0,
        shards: int = 1,
        replicas: int | None = None,
        request_timeout: float = 120.0,
    ):
        from elasticsearch import NotFoundError

        self._not_found = NotFoundError
        self.es, self.url = connect(url, request_timeout=request_timeout, connections=workers)
        self.es_index = es_index
        self.workers = max(1, int(workers))
        self.chunk_size = chunk_size
        self.max_retries = max_retries
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.item_errors = 0
        self.created = 0  # documents new to the index ("result": "created"), counted for the build's exact check
        self.first_errors: list[str] = []
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future] = []
        self._saved_settings: dict | None = None  # settings to restore after the load (None: not loading)
        self._loading = False  # refresh/replicas currently switched off by this process
        self._closed = False

        exists = self._call(lambda: bool(self.es.indices.exists(index=es_index)), "check the index")
        if exists:
            mappings = self._mappings()
            if not is_sqa_mapping(mappings):
                fields = ", ".join(sorted(mappings.get("properties") or {})[:6]) or "none"
                raise SqaError(
                    f"{redact_url(self.url)}: the Elasticsearch index {es_index!r} was not created by sqa "
                    f"(its fields: {fields}), so sqa neither writes to it nor deletes it"
                    + (" (nothing was deleted)" if fresh else "")
                    + "; pick another --es-index"
                )
        if fresh and exists:
            self._call(lambda: self.es.indices.delete(index=es_index), "delete the index")
            exists = False
        if not exists:
            if not create:
                raise SqaError(
                    f"{redact_url(self.url)}: no Elasticsearch index {es_index!r}; build it with "
                    f"`sqa index --backend elasticsearch --es-index {es_index}`"
                )
            if replicas is None:
                nodes = self._call(
                    lambda: self.es.cluster.health().get("number_of_data_nodes", 1), "read cluster health"
                )
                replicas = 0 if nodes <= 1 else 1
            settings = {"number_of_shards": shards, "number_of_replicas": replicas}
            self._call(
                lambda: self.es.indices.create(index=es_index, settings=settings, mappings=mapping()),
                "create the index",
            )
        else:
            # a run killed mid-load left its saved settings in _meta: restore them at the next commit/close
            self._saved_settings = self._meta().get(_SAVED_KEY) or None

    # -- helpers -------------------------------------------------------------------------
    def _call(self, fn, what: str):
        """Run one API call, turning transport / API failures into SqaError naming the URL."""
        from elastic_transport import ConnectionError as TransportConnectionError
        from elastic_transport import ConnectionTimeout

        from elasticsearch import ApiError

        try:
            return fn()
        except (TransportConnectionError, ConnectionTimeout) as e:
            raise SqaError(
                f"lost Elasticsearch at {redact_url(self.url)} while trying to {what} "
                f"({type(e).__name__}); {_HELP}, then re-run to resume"
            ) from None
        except ApiError as e:
            raise SqaError(
                f"Elasticsearch at {redact_url(self.url)} refused to {what} on index {self.es_index!r}: "
                f"HTTP {e.status_code} {e.message}"
            ) from None

    def _mappings(self) -> dict:
        m = self._call(lambda: self.es.indices.get_mapping(index=self.es_index), "read the mapping")
        body = next(iter(m.values()), {}) if m else {}
        return dict(body.get("mappings") or {})

    def _meta(self) -> dict:
        return dict(self._mappings().get("_meta") or {})

    def _enter_load_mode(self) -> None:
        if self._saved_settings is None:
            s = self._call(
                lambda: self.es.indices.get_settings(index=self.es_index, flat_settings=True), "read the index settings"
            )
            flat = next(iter(s.values()), {}).get("settings", {}) if s else {}
            self._saved_settings = {
                "refresh_interval": flat.get("index.refresh_interval"),
                "number_of_replicas": flat.get("index.number_of_replicas", "1"),
            }
            meta = self._meta()
            meta[_SAVED_KEY] = self._saved_settings
            self._call(lambda: self.es.indices.put_mapping(index=self.es_index, meta=meta), "save the settings")
        self._call(
            lambda: self.es.indices.put_settings(
                index=self.es_index, settings={"index": {"refresh_interval": "-1", "number_of_replicas": 0}}
            ),
            "turn refresh off for the load",
        )
        self._loading = True

    def _leave_load_mode(self) -> None:
        saved = self._saved_settings
        if saved is None:
            return
        self._call(
            lambda: self.es.indices.put_settings(
                index=self.es_index,
                settings={
                    "index": {
                        "refresh_interval": saved.get("refresh_interval"),
                        "number_of_replicas": saved.get("number_of_replicas", "1"),
                    }
                },
            ),
            "restore refresh_interval and replicas",
        )
        meta = self._meta()
        meta[_SAVED_KEY] = None
        self._call(lambda: self.es.indices.put_mapping(index=self.es_index, meta=meta), "clear the saved settings")
        self._saved_settings = None
        self._loading = False

    def _record_error(self, item: dict) -> None:
        op, info = next(iter(item.items()))
        err = info.get("error")
        reason = err.get("reason") or err.get("type") if isinstance(err, dict) else str(err)
        with self._lock:
            self.item_errors += 1
            if len(self.first_errors) < 10:
                full_id = str(info.get("_id"))
                doc_id = full_id if len(full_id) <= 80 else full_id[:77] + "..."
                reason = str(reason).replace(full_id, doc_id)
                reason = reason if len(reason) <= 300 else reason[:297] + "..."
                self.first_errors.append(f"{doc_id}: HTTP {info.get('status')} {reason}")

    def _send(self, actions: list[dict]) -> int:
        from elasticsearch import helpers

        ok_n = created = 0
        for ok, item in helpers.streaming_bulk(
            self.es,
            actions,
            chunk_size=self.chunk_size,
            max_retries=self.max_retries,
            initial_backoff=self.initial_backoff,
            max_backoff=self.max_backoff,
            raise_on_error=False,
            yield_ok=True,
        ):
            if ok:
                ok_n += 1
                info = next(iter(item.values()), {}) if isinstance(item, dict) else {}
                created += info.get("result") == "created" or (info.get("result") is None and info.get("status") == 201)
            else:
                self._record_error(item)
        with self._lock:
            self.created += created
        return ok_n

    def _wait(self, keep: int = 0) -> None:
        """Wait until at most ``keep`` bulk batches are in flight; re-raise a failed one as SqaError."""
        while len(self._futures) > keep:
            fut = self._futures.pop(0)
            self._call(fut.result, "bulk-index paragraphs")

    # -- writing -------------------------------------------------------------------------
    def add(self, paragraphs: Iterable[Paragraph]) -> int:
        """Queue paragraphs for bulk indexing (asynchronous; at most ``2 * workers`` batches in
        flight); returns how many were queued. Searchable after ``commit``."""
        actions = [
            {
                "_op_type": "index",
                "_index": self.es_index,
                "_id": p.evidence_id,
                "_source": {
                    "evidence_id": p.evidence_id,
                    "title": p.title,
                    "section": p.section,
                    "text": p.text,
                    "headers": [h for h in p.headers if h],
                    "body": body_text(p),
                },
            }
            for p in paragraphs
        ]
        if not actions:
            return 0
        if not self._loading:
            self._enter_load_mode()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sqa-es-bulk")
        self._wait(keep=2 * self.workers - 1)
        self._futures.append(self._pool.submit(self._send, actions))
        return len(actions)

    def commit(self) -> None:
        """Wait for every queued bulk request, restore refresh/replicas, refresh the index."""
        self._wait(0)
        self._leave_load_mode()
        self._call(lambda: self.es.indices.refresh(index=self.es_index), "refresh the index")

    def manifest_extra(self) -> dict:
        """Fields the build driver adds to ``manifest.json``: how the index ranks (schema version,
        analyser, BM25 parameters: ES's defaults), index name, URL without credentials,
        and the per-item bulk errors of this run (count and the first few)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "analyzer": f"elasticsearch {ANALYZER}",
            "bm25": {"k1": 1.2, "b": 0.75},
            "es_index": self.es_index,
            "es_url": redact_url(self.url),
            "es_item_errors": self.item_errors,
            "es_first_errors": list(self.first_errors),
        }

    # -- reading -------------------------------------------------------------------------
    @staticmethod
    def _to_paragraph(doc_id: str, src: dict) -> Paragraph:
        return Paragraph(
            evidence_id=src.get("evidence_id") or doc_id,
            title=src.get("title") or "",
            text=src.get("text") or "",
            section=src.get("section") or "",
            headers=tuple(src.get("headers") or ()),
        )

    def search(self, query: str, k: int = 10, title_boost: float = 0.0) -> list[Hit]:
        """Top-``k`` hits by BM25 on ``body`` (a ``match`` query, so any text is valid); with
        ``title_boost`` > 0 a ``match`` on ``title`` with that boost is added (bool/should), as in
        the embedded backend. An empty or all-stopword query returns []."""
        check_k(k)
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        text = " ".join(terms)
        q: dict = {"match": {"body": {"query": text}}}
        if title_boost > 0:
            q = {"bool": {"should": [q, {"match": {"title": {"query": text, "boost": title_boost}}}]}}
        res = self._call(
            lambda: self.es.search(
                index=self.es_index, query=q, size=k, track_total_hits=False, source_excludes=_SOURCE_EXCLUDES
            ),
            "search",
        )
        return [
            Hit(paragraph=self._to_paragraph(h["_id"], h.get("_source") or {}), score=float(h["_score"] or 0.0), rank=i)
            for i, h in enumerate(res["hits"]["hits"], start=1)
        ]

    def count(self) -> int:
        """Paragraphs in the index (``_count``; refreshed documents only, so call after ``commit``)."""

        def _count() -> int:
            try:
                return int(self.es.count(index=self.es_index)["count"])
            except self._not_found:
                return 0

        return self._call(_count, "count paragraphs")

    def get(self, ids: Sequence[str]) -> list[Paragraph]:
        """Paragraphs for evidence IDs in the order given (``_mget``); unknown IDs are left out."""
        ids = list(ids)
        if not ids:
            return []
        res = self._call(lambda: self.es.mget(index=self.es_index, ids=ids, source_excludes=_SOURCE_EXCLUDES), "get")
        return [self._to_paragraph(d["_id"], d.get("_source") or {}) for d in res["docs"] if d.get("found")]

    def close(self) -> None:
        """Stop the bulk workers (queued, unstarted batches are dropped: a re-run redoes them),
        restore refresh/replicas if a load was under way, and close the connection."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
            self._futures.clear()
            try:
                self._leave_load_mode()
            except SqaError:
                pass
        finally:
            self.es.close()
