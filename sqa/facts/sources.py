"""Evidence as facts: a few short sentences the reader can read, instead of whole paragraphs.

Two knowledge sources, each ranked by Okapi BM25 (``bm25s``; Robertson & Zaragoza 2009):

- ``WikipediaFacts``: the sentences of the top-k paragraphs our retriever returns for a query,
  each prefixed by its paragraph's title ("Aristotle: He died in 322 BC."), ranked by BM25 of the
  query against those candidate sentences.
- ``AnnotatedFacts``: the facts StrategyQA's annotators wrote for the train-2061 questions (5,526
  sentences), never their answers and never the facts of the question being answered (same qid or
  same text); a dev or test question therefore sees train facts only.

StrategyQA's annotated facts are one sentence each, about 11 words; the reader's demonstrations
show such facts (``sqa.facts.prompt``), so selected sentences are cut to ``max_words``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from sqa.text import clip_words, split_sentences
from sqa.types import Hit, Question


@dataclass(frozen=True)
class Fact:
    """One fact shown to the reader: ``text`` (one sentence), its ``source`` ("wikipedia" or
    "train-facts"), ``ref`` (the evidence ID of its paragraph, or the qid of the train question it
    annotates) and its BM25 ``score`` (engine units, comparable within one source and query only)."""

    text: str
    source: str
    ref: str
    score: float

    def to_dict(self) -> dict:
        return {"text": self.text, "source": self.source, "ref": self.ref, "score": round(self.score, 4)}

    @classmethod
    def from_dict(cls, d: dict) -> "Fact":
        """The inverse of ``to_dict`` (a features record's ``facts`` entries). KeyError if a key is missing."""
        return cls(d["text"], d["source"], d["ref"], d["score"])


class _BM25:
    """A small bm25s index over ``texts`` (English stemming and stop words)."""

    def __init__(self, texts: Sequence[str]):
        from sqa.text import bm25s_module

        bm25s = bm25s_module()
        import Stemmer

        self._stemmer = Stemmer.Stemmer("english")
        self.n = len(texts)
        self._bm25 = bm25s.BM25()
        self._bm25.index(
            bm25s.tokenize(list(texts), stopwords="en", stemmer=self._stemmer, show_progress=False), show_progress=False
        )

    def rank(self, query: str, k: int) -> list[tuple[int, float]]:
        """Up to ``k`` (index, score) pairs with score > 0, best first."""
        from sqa.text import bm25s_module

        bm25s = bm25s_module()

        if self.n == 0:
            return []
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        idx, scores = self._bm25.retrieve(tokens, k=min(k, self.n), show_progress=False)
        return [(int(i), float(s)) for i, s in zip(idx[0], scores[0]) if s > 0]


def rank_sentences(query: str, hits: Sequence[Hit], n: int, max_words: int = 40, encode=None) -> list[Fact]:
    """The ``n`` sentences of ``hits``' paragraphs with the highest BM25 score for ``query`` (the
    candidate sentences form the BM25 collection), as "Title: sentence" facts; duplicates dropped.
    With ``encode`` (``texts -> (n, d)`` L2-normalised, e.g. ``sqa.retriever.minilm.default_encoder()``)
    they are ranked by the cosine with ``query`` instead (``Fact.score`` = the cosine)."""
    cands = _sentence_candidates(hits, max_words)
    if not cands or n <= 0:
        return []
    texts = [c.text for c in cands]
    ranked = _BM25(texts).rank(query, n) if encode is None else _cosine_rank(encode, query, texts, n)
    return [Fact(cands[i].text, "wikipedia", cands[i].ref, s) for i, s in ranked]


def _sentence_candidates(hits: Sequence[Hit], max_words: int) -> list[Fact]:
    """The sentences of ``hits``' paragraphs as "Title: sentence" facts (score 0), cut to
    ``max_words``, at least 4 words, case-insensitive duplicates dropped, in hit order."""
    cands: list[Fact] = []
    seen = set()
    for h in hits:
        for s in split_sentences(h.paragraph.text):
            text = f"{h.paragraph.title.strip()}: {clip_words(s, max_words)}"
            if text.lower() not in seen and len(s.split()) >= 4:
                seen.add(text.lower())
                cands.append(Fact(text, "wikipedia", h.evidence_id, 0.0))
    return cands


def _cosine_rank(encode, query: str, texts: Sequence[str], n: int) -> list[tuple[int, float]]:
    """Up to ``n`` (index, cosine) pairs of ``texts`` by the cosine of ``encode``'s embeddings with
    ``query``'s, best first (ties in input order)."""
    import numpy as np

    if not texts or n <= 0:
        return []
    emb = np.asarray(encode([query] + list(texts)), dtype=np.float32)
    cos = emb[1:] @ emb[0]
    return [(int(i), float(cos[i])) for i in np.argsort(-cos, kind="stable")[:n]]


class WikipediaFacts:
    """Facts from the paragraph index: ``select(question, n)`` retrieves the top ``k`` paragraphs
    for ``question`` with ``retriever`` (a ``sqa.retriever`` Retriever) and returns
    ``(facts, hits)``: the ``n`` best sentences (``rank_sentences``) of the best
    ``sentence_paragraphs`` of them (None: all k) and all k paragraphs' hits (the leaderboard's
    evidence)."""

    def __init__(
        self, retriever, k: int = 10, max_words: int = 40, sentence_paragraphs: int | None = None, encode=None
    ):
        self.retriever = retriever
        self.k = k
        self.max_words = max_words
        self.sentence_paragraphs = k if sentence_paragraphs is None else sentence_paragraphs
        self.encode = encode  # None: BM25 over the candidate sentences; else cosine (rank_sentences)

    def select(self, question: str, n: int, steps: Sequence = ()) -> tuple[list[Fact], list[Hit]]:
        hits = self.retriever.retrieve(question, list(steps), self.k)
        return rank_sentences(question, hits[: self.sentence_paragraphs], n, self.max_words, self.encode), hits


class AnnotatedFacts:
    """StrategyQA's annotated facts of ``questions`` (default train-2061) as a BM25 collection.

    ``select(question, n, exclude_qids)`` -> the ``n`` best facts for ``question``, leaving out the
    facts of every question in ``exclude_qids`` and of any question with the same text (so a
    question never sees its own facts). Labels are never used.
    """

    def __init__(self, questions: Sequence[Question] | None = None):
        if questions is None:
            from sqa.strategyqa import load_questions

            questions = load_questions("train-2061")
        self.facts: list[tuple[str, str, str]] = []  # (fact, qid, normalised question text)
        for q in questions:
            for f in q.facts:
                if f and f.strip():
                    self.facts.append((f.strip(), q.qid, _norm(q.question)))
        self._index = _BM25([f for f, _, _ in self.facts])

    def select(
        self,
        question: str,
        n: int,
        exclude_qids: Sequence[str] = (),
        exclude_text: str = "",
        encode=None,
        pool: int = 20,
    ) -> list[Fact]:
        """``exclude_text``: also leave out the facts of a question with this text (the question a
        decomposition step belongs to, when ``question`` is the step). ``encode``: re-rank the
        ``pool`` best by BM25 by their cosine with ``question`` (``Fact.score`` = the cosine)."""
        if n <= 0:
            return []
        if encode is not None:
            cands = self.select(question, pool, exclude_qids, exclude_text)
            return [
                Fact(cands[i].text, cands[i].source, cands[i].ref, c)
                for i, c in _cosine_rank(encode, question, [f.text for f in cands], n)
            ]
        excl = set(exclude_qids)
        norms = {_norm(question)} | ({_norm(exclude_text)} if exclude_text else set())
        out: list[Fact] = []
        seen = set()
        for i, s in self._index.rank(question, 4 * n + 20):
            text, qid, qn = self.facts[i]
            if qid in excl or qn in norms or text.lower() in seen:
                continue
            seen.add(text.lower())
            out.append(Fact(text, "train-facts", qid, s))
            if len(out) == n:
                break
        return out


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


@lru_cache(maxsize=1)
def default_annotated_facts() -> AnnotatedFacts:
    """The process-wide ``AnnotatedFacts`` over train-2061 (built once, about a second)."""
    return AnnotatedFacts()


def step_evidence(
    step: str,
    retriever,
    annotated: AnnotatedFacts | None = None,
    *,
    question: str = "",
    k: int = 10,
    n: int = 1,
    encode=None,
    max_words: int = 40,
) -> list[Fact]:
    """The ``n`` sentences that best state the answer of one decomposition ``step``, for display
    (``sqa ask --steps``): candidates are the sentences of the step's top-``k`` paragraphs
    (``retriever.retrieve(step, [], k)``, as "Title: sentence") and the 10 best train-2061
    annotated facts for it (BM25; never those of ``question``, the question the step belongs to);
    they are ranked together by the cosine of ``encode``'s embeddings with the step
    (all-MiniLM-L6-v2: ``sqa.retriever.steps.load_minilm``). When ``encode`` is None, BM25 ranks
    each source apart and the ``n`` best of each are returned, train fact first: one BM25 over
    both pools would rank the step's subject near zero (it is in nearly every sentence of its own
    paragraphs, so its IDF there is tiny) and put "When Gauss died in 1855, ..." above
    "Aristotle died in 322 BC." for "When did Aristotle die?" (seen in the tests).

    A step that refers to an earlier answer (``#k``) has no evidence of its own: returns [].
    ``Fact.score`` is the cosine (or BM25, engine units, within one source). Never raises for an
    empty result."""
    if "#" in step or n <= 0:
        return []
    hits = retriever.retrieve(step, [], k)
    train = annotated.select(step, 10 if encode is not None else n, exclude_text=question) if annotated else []
    if encode is None:
        return train + rank_sentences(step, hits, n, max_words)
    cands = _sentence_candidates(hits, max_words)
    seen = {c.text.lower() for c in cands}
    cands += [f for f in train if f.text.lower() not in seen]
    if not cands:
        return []
    return [
        Fact(cands[i].text, cands[i].source, cands[i].ref, sc)
        for i, sc in _cosine_rank(encode, step, [c.text for c in cands], n)
    ]
