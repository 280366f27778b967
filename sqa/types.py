"""The shared vocabulary of every stage: paragraphs, hits, steps, questions, predictions and the
two Protocols (search backend, language model) that let a backend or a model be swapped.

Data flows one way: corpus -> ``sqa.indexing`` -> ``SearchBackend`` -> ``sqa.retriever`` ->
``sqa.reasoner`` -> ``sqa.eval``. Each stage imports only this module and the stage before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol, Sequence, runtime_checkable


class SqaError(Exception):
    """A user-facing error: the CLI prints its message as one line and exits non-zero.

    The message must name the file/line/URL concerned and say what to do.
    """


# The most paragraphs one search returns (-k / --k): Elasticsearch's default index.max_result_window,
# used for both backends so that a typo such as -k 99999999999999999999 is an error, not a crash.
MAX_K = 10_000


class SqaWarning(UserWarning):
    """A user-facing warning (e.g. searching a partial index): the CLI prints it as one
    ``warning:`` line on stderr and goes on."""


@dataclass(frozen=True)
class Paragraph:
    """One corpus unit (a Wikipedia paragraph).

    ``evidence_id`` is ``"{title}-{para_id}"`` exactly as in StrategyQA's evidence annotations and the
    leaderboard's ``paragraphs`` field. ``headers`` is the list of section headers leading to it.
    """

    evidence_id: str
    title: str
    text: str
    section: str = ""
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hit:
    """One search result: a paragraph, its backend score (BM25, engine units; only comparable
    within one backend) and its 1-based rank in the result list."""

    paragraph: Paragraph
    score: float
    rank: int

    @property
    def evidence_id(self) -> str:
        return self.paragraph.evidence_id


@runtime_checkable
class SearchBackend(Protocol):
    """A BM25 paragraph index. Implementations: ``sqa.indexing.embedded.TantivyBackend`` (default,
    a directory on disk) and ``sqa.indexing.elastic.ElasticsearchBackend``.

    Writes are idempotent by evidence ID: adding a paragraph whose ID is already indexed replaces
    it, so re-running an interrupted build never duplicates.
    """

    name: str

    def add(self, paragraphs: Iterable[Paragraph]) -> int:
        """Queue paragraphs for indexing; returns how many were accepted."""
        ...

    def commit(self) -> None:
        """Make everything added so far durable and searchable."""
        ...

    def search(self, query: str, k: int = 10) -> list[Hit]:
        """Top-``k`` paragraphs for free text ``query`` by BM25 over title, section and text,
        best first. Never raises on query syntax: any text is a valid query."""
        ...

    def count(self) -> int:
        """Number of (unique) paragraphs in the index."""
        ...

    def get(self, ids: Sequence[str]) -> list[Paragraph]:
        """Paragraphs for evidence IDs, in the order given; unknown IDs are left out."""
        ...

    def close(self) -> None:
        ...


@dataclass
class Step:
    """One decomposition step. ``question`` may refer to earlier answers as ``#k`` (1-based, as in
    StrategyQA); ``answer`` is filled once the reader has answered it; ``evidence`` holds the hits
    retrieved for it."""

    question: str
    answer: str | None = None
    evidence: list[Hit] = field(default_factory=list)


@dataclass(frozen=True)
class Question:
    """A StrategyQA question. ``answer`` is None for the hidden-label test split; ``decomposition``
    and ``evidence`` are empty there too. ``evidence`` is the raw annotation: one list per annotator,
    one entry per step, each a list of ID lists and/or the tags "operation" / "no_evidence"."""

    qid: str
    question: str
    answer: bool | None = None
    decomposition: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    evidence: tuple = ()
    term: str = ""
    description: str = ""


@dataclass
class Prediction:
    """A system's output for one question; ``to_leaderboard`` gives the official entry
    ``{"answer", "decomposition", "paragraphs"}`` (paragraphs = evidence IDs, best first)."""

    qid: str
    answer: bool
    confidence: float
    decomposition: list[str] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)

    def to_leaderboard(self) -> dict:
        return {"answer": self.answer, "decomposition": list(self.decomposition),
                "paragraphs": list(self.paragraphs)}


@runtime_checkable
class LanguageModel(Protocol):
    """A text model behind the decomposer and the reader. Implementations: GGUF on llama.cpp (CPU
    default) and Hugging Face transformers (any checkpoint by name or path; CUDA + bfloat16 when a
    GPU is present). Prompts are chat messages already rendered to the model's template."""

    name: str

    def generate(self, prompts: Sequence[str], max_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Greedy continuation of each prompt, cut at the first stop string (not included)."""
        ...

    def yes_probability(self, prompts: Sequence[str]) -> list[float]:
        """P(" Yes") / (P(" Yes") + P(" No")) for the next token after each prompt, in [0, 1]."""
        ...
