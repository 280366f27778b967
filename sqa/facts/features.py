"""Feature extraction for the trained answer head: for each question, select facts (Wikipedia
sentences + train-2061 annotated facts), run the facts reader and append one JSON line to a
features file. Resumable: questions already in the file are skipped, a torn last line is dropped,
a damaged complete line is refused naming file:line (``parse_features``, the one parser).

``sqa.facts.store.FeaturesStore``: the features directory of ``sqa eval --split train``
(out-of-fold runs, ``sqa.eval.oof``), one writer at a time, through these functions.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Iterable, Iterator, Sequence

from sqa.facts.sources import AnnotatedFacts, Fact, WikipediaFacts, default_annotated_facts
from sqa.facts.prompt import QuestionFeatures, check_form, form_of_version, interleave, prompt_version, read_question
from sqa.types import ORACLES, Question, SqaError


SCORERS = ("bm25", "minilm")


@dataclass(frozen=True)
class FactSettings:
    """How many facts of each source the reader is shown (read out after each), how many
    paragraphs are retrieved (``k``: the run's evidence) and from how many of the best of them the
    Wikipedia sentences are picked (``sentence_paragraphs``). Order shown: train fact 1,
    Wikipedia 1, train 2, Wikipedia 2, ... (``interleave``).

    ``sentence_paragraphs`` None (the default) means all ``k`` and is stored as ``k``. Only the top 3 was tried on the first 1,000
    train-2061 questions (bench/results/fact_selection.json). Measured without the model, the
    best BM25 sentences of the top 3 paragraphs cover more of the annotated facts' new content words
    than those of all 10 (0.189 vs 0.163), and more of them come from an annotated evidence
    paragraph (55 % vs 41 %). The answer head's out-of-fold accuracy did not follow: 0.658 vs
    0.666, paired -0.008 (-0.024 to +0.008), a tie. Only the top-3 features were then extended to
    all 2,055 questions, so the shipped heads (and out-of-fold runs, ``sqa eval --split train``) read the top 3.
    Heads record the value they were trained with, and ``from_dict`` restores it.

    ``step_facts`` > 0: the reader model first writes the question's decomposition
    (``sqa.steps.decomposer.Decomposer``), each step without ``#k`` contributes its best
    sentence (``sqa.facts.sources.step_evidence``: all-MiniLM-L6-v2 cosine over the step's top-k
    paragraphs' sentences and the 10 best train-2061 facts, never the question's own), at most
    ``step_facts`` of them, shown first; the question-level facts above fill the rest, ``wiki +
    train`` facts in all. Needs the MiniLM weights. Off by default: with the 1.5B model, on the first
    600 train-2061 questions, the head read them no better than the question-level facts (0.657 vs
    0.670, paired -0.013, -0.040 to +0.013; bench/step_facts_extract.py, bench/results/head_cv.json
    entry ``steps-n600``) for 7-11 s more a question."""

    wiki: int = 3
    train: int = 2
    k: int = 10
    max_words: int = 40
    sentence_paragraphs: int | None = None  # None: all k, stored as k (so "all" has one spelling)
    scorer: str = "bm25"  # how facts are ranked: "bm25", or "minilm" (cosine of all-MiniLM-L6-v2 embeddings)
    step_facts: int = 0  # at most this many step sentences first (0: none); see the class doc's last paragraph
    form: str = "text"  # the prompt form ("text" | "chat", sqa.facts.prompt): recorded as the prompt version

    def __post_init__(self) -> None:
        if self.sentence_paragraphs is None:
            object.__setattr__(self, "sentence_paragraphs", self.k)
        check_form(self.form)
        if self.scorer not in SCORERS:
            raise SqaError(f"unknown fact scorer {self.scorer!r}; use {' or '.join(SCORERS)}")
        if not 0 <= self.step_facts <= self.wiki + self.train:
            raise SqaError(f"step facts must be from 0 to {self.wiki + self.train} (got {self.step_facts})")

    def to_dict(self) -> dict:
        return {
            "wiki": self.wiki,
            "train": self.train,
            "k": self.k,
            "max_words": self.max_words,
            "sentence_paragraphs": self.sentence_paragraphs,
            **({"scorer": self.scorer} if self.scorer != "bm25" else {}),
            **({"step_facts": self.step_facts} if self.step_facts else {}),
            "order": ("step sentences, then " if self.step_facts else "") + "train/wikipedia interleaved",
            "prompt": prompt_version(self.form),
        }

    @classmethod
    def from_dict(cls, d: dict, k: int | None = None) -> "FactSettings":
        """The settings a head was trained with (its provenance ``facts``); ``k`` overrides the
        number of retrieved paragraphs. A head from before ``sentence_paragraphs`` read all k, as
        does one that recorded None."""
        k = d.get("k", 10) if k is None else k
        return cls(
            wiki=d.get("wiki", 3),
            train=d.get("train", 2),
            k=k,
            max_words=d.get("max_words", 40),
            sentence_paragraphs=d.get("sentence_paragraphs"),
            scorer=d.get("scorer", "bm25"),
            step_facts=d.get("step_facts", 0),
            form=form_of_version(d.get("prompt")),
        )


class FactSelector:
    """Selects the facts of one question from the two sources. ``retriever`` None = no Wikipedia
    facts (the no-retrieval setting: then no train facts either). ``oracle`` (diagnostic upper
    bounds, never defaults; they need labelled questions): "facts" shows the question's own
    annotated facts instead; "paragraphs" the ``wiki + train`` best sentences (BM25 against the
    question, ``rank_sentences``) of its annotated evidence paragraphs, read from ``backend``
    (default: the retriever's). Raises SqaError for an unknown oracle."""

    def __init__(
        self,
        retriever=None,
        settings: FactSettings = FactSettings(),
        annotated: AnnotatedFacts | None = None,
        oracle: str | None = None,
        backend=None,
    ):
        if oracle is not None and oracle not in ORACLES:
            raise SqaError(f"unknown oracle {oracle!r}; use {' or '.join(ORACLES)}")
        self.backend = backend if backend is not None else getattr(retriever, "backend", None)
        self.settings = settings
        self.retrieval = retriever is not None
        self.encode = None
        self.step_encode = None  # the MiniLM encoder of the step sentences (settings.step_facts)
        if (settings.scorer == "minilm" or settings.step_facts) and retriever is not None and oracle is None:
            from sqa.retriever.minilm import default_encoder

            enc = default_encoder()
            self.encode = enc if settings.scorer == "minilm" else None
            self.step_encode = enc if settings.step_facts else None
        self.wiki = (
            WikipediaFacts(retriever, settings.k, settings.max_words, settings.sentence_paragraphs, self.encode)
            if retriever is not None
            else None
        )
        self._annotated = annotated
        self.oracle = oracle

    @property
    def annotated(self) -> AnnotatedFacts:
        if self._annotated is None:
            self._annotated = default_annotated_facts()
        return self._annotated

    @property
    def needs_steps(self) -> bool:
        """True when ``select`` reads a decomposition (step facts on, retrieval on, no oracle)."""
        return bool(self.settings.step_facts) and self.wiki is not None and self.oracle is None

    def select(self, q: Question, steps: Sequence[str] = (), query: str | None = None) -> tuple[list[Fact], list]:
        """(facts in reading order, the question's top-k hits). ``steps``: the question's
        decomposition, read when ``settings.step_facts`` > 0 (see ``FactSettings``). ``query``:
        retrieve both sources with this text instead of the question's (e.g. the question expanded
        with the reader's own generated lines, bench/expanded_facts_extract.py); the train facts
        of a question with ``q``'s text are then left out as well."""
        s = self.settings
        if self.oracle == "paragraphs":
            return self._paragraph_oracle(q)
        if self.oracle == "facts":
            if not q.facts:
                raise SqaError(f"question {q.qid}: no annotated facts for --oracle facts (test split?)")
            hits = self.wiki.retriever.retrieve(q.question, [], s.k) if self.wiki else []
            return [Fact(f, "oracle-facts", q.qid, 0.0) for f in q.facts], hits
        if self.wiki is None:
            return [], []
        text = q.question if query is None else query
        wiki, hits = self.wiki.select(text, s.wiki)
        train = self.annotated.select(
            text,
            s.train,
            exclude_qids=[q.qid],
            encode=self.encode,
            exclude_text=q.question if query is not None else "",
        )
        facts = interleave(train, wiki)
        if self.needs_steps:
            facts = steps_first(self.step_sentences(q, steps), facts, s.wiki + s.train)
        return facts, hits

    def _paragraph_oracle(self, q: Question) -> tuple[list[Fact], list]:
        from sqa.facts.sources import rank_sentences
        from sqa.types import Hit

        if not q.evidence:
            raise SqaError(f"question {q.qid}: no annotated evidence for --oracle paragraphs (test split?)")
        if self.backend is None:
            raise SqaError("--oracle paragraphs needs the index (to read the annotated paragraphs)")
        ids = list(
            dict.fromkeys(i for ann in q.evidence for step in ann for x in step if isinstance(x, list) for i in x)
        )
        hits = [Hit(paragraph=p, score=0.0, rank=i) for i, p in enumerate(self.backend.get(ids), start=1)]
        s = self.settings
        facts = rank_sentences(q.question, hits, s.wiki + s.train, s.max_words)
        return [Fact(f.text, "oracle-paragraphs", f.ref, f.score) for f in facts], (
            self.wiki.retriever.retrieve(q.question, [], s.k) if self.wiki is not None else []
        )

    def step_sentences(self, q: Question, steps: Sequence[str]) -> list[Fact]:
        """The best sentence of each step in ``steps`` (``step_evidence``), in step order,
        duplicates and the question's own annotated facts left out, at most ``settings.step_facts``."""
        from sqa.facts.sources import step_evidence

        out: list[Fact] = []
        seen = set()
        for st in steps:
            if len(out) >= self.settings.step_facts:
                break  # full: the later steps are not retrieved or encoded
            for f in step_evidence(
                st,
                self.wiki.retriever,
                self.annotated,
                question=q.question,
                k=self.settings.k,
                encode=self.step_encode,
                max_words=self.settings.max_words,
            ):
                if f.ref != q.qid and f.text.lower() not in seen and len(out) < self.settings.step_facts:
                    seen.add(f.text.lower())
                    out.append(f)
        return out


def steps_first(step_facts: Sequence[Fact], facts: Sequence[Fact], n: int) -> list[Fact]:
    """``step_facts``, then ``facts`` not already there (case-insensitive text), ``n`` in all."""
    out = list(step_facts)[:n]
    seen = {f.text.lower() for f in out}
    for f in facts:
        if len(out) >= n:
            break
        if f.text.lower() not in seen:
            seen.add(f.text.lower())
            out.append(f)
    return out


def complete_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(line number from 1, line without its newline)`` for each complete, non-blank line of a
    JSON-lines file's bytes; a torn last line (bytes after the last newline: a writer killed
    mid-line) is left out. The one rule every features-file reader follows."""
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line
    for lineno, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if line.strip():
            yield lineno, line


def parse_features(
    data: bytes,
    path: Path | str,
    key: Callable[[dict], str] | None = None,
    check: Callable[[dict, int], None] | None = None,
) -> tuple[dict[str, dict], int]:
    """The one parser of features files (JSON lines, one ``QuestionFeatures.to_dict()`` object a
    line): ``({qid: record}, end)`` where ``end`` is the byte offset after the last complete line.
    Only a torn last line (bytes after the last newline: a kill during the write) is left out; a
    complete line that is not a features record raises SqaError naming ``path:line`` (never
    dropped silently: the lines after it are finished work). Blank lines are skipped; a qid seen
    twice keeps its first record. ``key(record)`` replaces the qid as the key (the features store
    keys by qid and question text); ``check(record, line number)`` may raise for a record."""
    done: dict[str, dict] = {}
    for lineno, line in complete_lines(data):
        try:
            rec = json.loads(line)
            if (
                not isinstance(rec, dict)
                or not isinstance(rec.get("qid"), str)
                or not isinstance(rec.get("question"), str)
                or not isinstance(rec.get("log_odds"), dict)
                or not isinstance(rec.get("states", {}), dict)
            ):
                raise ValueError("not a features record (qid, question, log_odds, states)")
        except ValueError as e:
            raise SqaError(
                f"{path}:{lineno}: damaged features line ({str(e)[:80]}); delete that line (the question "
                "is read again) or use another features directory"
            ) from None
        if check is not None:
            check(rec, lineno)
        done.setdefault(key(rec) if key else rec["qid"], rec)
    return done, data.rfind(b"\n") + 1


def read_done(
    path: Path,
    repair: bool = False,
    key: Callable[[dict], str] | None = None,
    check: Callable[[dict, int], None] | None = None,
) -> dict[str, dict]:
    """qid -> record of a features file (``parse_features``). A torn last line is left out;
    ``repair`` also cuts it off the file (the writer does this, under its lock, before appending;
    readers leave the file alone). A damaged complete line raises SqaError naming file:line and the
    file is left untouched (issue 34: the old repair truncated at the first bad line, deleting the
    finished records after it)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    done, end = parse_features(data, path, key, check)
    if repair and end != len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
            os.fsync(f.fileno())
    return done


def lock_exclusive(f, path: Path | str) -> None:
    """Take an exclusive ``fcntl.flock`` on the open file ``f`` (released when it is closed);
    SqaError at once when another process holds it."""
    import errno
    import fcntl

    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise SqaError(
                f"{path}: another sqa run is writing these features (one writer per features "
                "directory); wait for it to finish"
            ) from None
        raise


def append_record(f, rec: dict) -> None:
    """Append one features record to the open JSON-lines file ``f`` and fsync it, so a kill loses
    at most the question being read (``read_done(repair=True)`` drops a torn line)."""
    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    f.flush()
    os.fsync(f.fileno())


def question_features(
    model,
    q: Question,
    select: Callable[[Question, Sequence[str]], tuple[list[Fact], list]],
    decompose: Callable[[str, str | None], list[str]] | None = None,
    form: str = "text",
    readouts: Collection[str] | None = None,
) -> QuestionFeatures:
    """Decompose (when ``decompose`` is given) -> select facts -> read one question (its prompts in
    prompt ``form``, ``sqa.facts.prompt.in_form``; only ``readouts`` when given, as
    ``sqa.facts.prompt.read_question`` takes them).

    ``select(q, steps) -> (facts, hits)`` (e.g. ``FactSelector.select``); ``decompose(question,
    exclude_qid) -> steps`` (``sqa.steps.decomposer.Decomposer``). The record's ``seconds`` gets
    "select" and, with a decomposer, "decompose" (wall seconds); ``steps`` is kept when decomposed.
    Used by ``extract`` (features files) and ``FactsReader.features`` (answers), so a head
    reads at answer time exactly what it was trained on."""
    t = time.perf_counter()
    steps = decompose(q.question, q.qid or None) if decompose is not None else []
    t_dec = time.perf_counter() - t
    t = time.perf_counter()
    facts, hits = select(q, steps)
    t_sel = time.perf_counter() - t
    qf = read_question(
        model,
        q,
        facts,
        paragraphs=[h.evidence_id for h in hits],
        paragraph_scores=[float(h.score) for h in hits],
        form=form,
        readouts=readouts,
    )
    qf.seconds["select"] = t_sel
    if decompose is not None:
        qf.steps = list(steps)
        qf.seconds["decompose"] = t_dec
    return qf


def extract(
    model,
    selector: FactSelector,
    questions: Sequence[Question],
    path: str | Path,
    on_question: Callable[[QuestionFeatures], None] | None = None,
    decompose: Callable[[str, str | None], list[str]] | None = None,
) -> dict[str, dict]:
    """Extract the features of every question not yet in ``path`` (JSON lines, appended and
    fsync'd one question at a time). Returns qid -> record for all of ``questions``.
    ``decompose(question, qid) -> steps`` (e.g. ``sqa.steps.decomposer.Decomposer(model)``) is
    required when the selector reads step facts (``FactSelector.needs_steps``); SqaError if missing."""
    if selector.needs_steps and decompose is None:
        raise SqaError("these fact settings read step facts: pass a decomposer (sqa.steps.decomposer.Decomposer)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        lock_exclusive(f, path)  # one writer per file: a second one would read the same questions again
        done = read_done(path, repair=True)
        for q in questions:
            if q.qid in done:
                continue
            qf = question_features(
                model, q, selector.select, decompose if selector.needs_steps else None, selector.settings.form
            )
            rec = qf.to_dict()
            append_record(f, rec)
            done[q.qid] = rec
            if on_question:
                on_question(qf)
    return {q.qid: done[q.qid] for q in questions if q.qid in done}


def iter_records(path: str | Path) -> Iterable[QuestionFeatures]:
    for rec in read_done(Path(path)).values():
        yield QuestionFeatures.from_dict(rec)
