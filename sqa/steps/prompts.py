"""Prompts of the decomposer and the reader, and the few-shot demonstrations they use.

One question is one growing transcript, a :class:`sqa.types.ChatPrompt` whose open assistant turn
grows step by step, so the llama.cpp prefix cache reads each part once (``sqa.models.llamacpp``;
each model renders the messages in its own chat template, ChatML for the shipped Qwen2.5)::

    system: INSTRUCTION                                  <- static: cached across questions
    user: Question: <demo 1>   assistant: Steps: 1. .. 2. ..  Answer: Yes
    ...                                                  <- BM25-chosen train-2061 demonstrations
    user: Question: <question>
    assistant: Steps:
    1. <step 1>                                          <- decomposer (generated, or gold)
    2. <step 2 with #1>
    Evidence 1 (<title>): <top paragraph, trimmed>       <- retrieved for the resolved step 1
    #1 = <answer>                                        <- reader (generated, one line)
    Evidence 2 (...): ...
    #2 = <answer>
    Answer:                                              <- P(" Yes") vs P(" No")

A model that cannot continue an assistant message (a chat server without assistant prefill, such
as llama-cpp-python's or OpenAI's; or any model with ``--no-prefill``) reads the same transcript in
turns (:func:`decompose_turns`, :func:`step_turns`, :func:`yes_no_turns`): each generation or
reading starts a new assistant message, asked for by a user turn. Asking a 1.5B model to continue
its last message (``ChatPrompt.as_turns``) made it answer instead ("Answer: No") at every step.

Demonstrations (question, gold decomposition, answer) come only from the ``train-2061`` split and
are chosen per question by BM25 similarity of the question texts (Okapi BM25, k1=1.5, b=0.75, via
``bm25s``); a question never serves as its own demonstration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from sqa.models.chat import IM_END
from sqa.text import split_sentences
from sqa.types import ChatPrompt, Question

SYSTEM = (
    "You answer yes/no questions that need several facts. First break the question into short "
    "steps, one fact each; #k stands for the answer of step k. Then, for each step, read the "
    "evidence and write its answer after '#k =' in a few words. Finish with 'Answer: Yes' or 'Answer: No'."
)


@dataclass(frozen=True)
class Demo:
    """One few-shot demonstration: a train-2061 question, its gold steps and its answer."""

    qid: str
    question: str
    steps: tuple[str, ...]
    answer: bool


class DemoSelector:
    """Picks few-shot demonstrations for a question from the ``train-2061`` split by BM25 over the
    question texts (``bm25s``, English stemming + stopwords; Robertson & Zaragoza 2009).

    ``select(question, n, exclude_qid)`` -> up to ``n`` ``Demo`` s, most similar first, never the
    question itself (same qid or same text), at most ``max_steps`` steps each, and balanced so that
    both answers appear when ``n`` >= 2 (unless ``balance`` is False: the ``n`` most similar, as
    ``sqa ask --steps`` uses, where no answer is read from the prompt).
    """

    def __init__(self, questions: Sequence[Question] | None = None, max_steps: int = 4):
        from sqa.text import bm25s_module

        bm25s = bm25s_module()
        import Stemmer

        if questions is None:
            from sqa.strategyqa import load_questions

            questions = load_questions("train-2061")
        self.demos = [
            Demo(q.qid, q.question, tuple(q.decomposition), bool(q.answer))
            for q in questions
            if q.decomposition and q.answer is not None and len(q.decomposition) <= max_steps
        ]
        self._stemmer = Stemmer.Stemmer("english")
        self._bm25 = bm25s.BM25()
        self._bm25.index(
            bm25s.tokenize(
                [d.question for d in self.demos], stopwords="en", stemmer=self._stemmer, show_progress=False
            ),
            show_progress=False,
        )

    def _ranked(self, question: str, k: int) -> list[int]:
        """Indices into ``demos`` of the ``k`` most similar questions, best first (BM25)."""
        from sqa.text import bm25s_module

        bm25s = bm25s_module()

        tokens = bm25s.tokenize([question], stopwords="en", stemmer=self._stemmer, show_progress=False)
        idx, _ = self._bm25.retrieve(tokens, k=k, show_progress=False)
        return [int(i) for i in idx[0]]

    def select(self, question: str, n: int = 3, exclude_qid: str | None = None, balance: bool = True) -> list[Demo]:
        if n <= 0:
            return []
        k = min(len(self.demos), 4 * n + 4)
        norm = question.strip().lower()
        picked: list[Demo] = []
        for i in self._ranked(question, k):
            d = self.demos[int(i)]
            if d.qid == exclude_qid or d.question.strip().lower() == norm:
                continue
            picked.append(d)
        picked = picked[: max(n, 0) * 3]
        out = picked[:n]
        # keep both labels in view so the demonstrations do not prime one answer
        if balance and n >= 2 and len({d.answer for d in out}) == 1:
            other = next((d for d in picked[n:] if d.answer != out[0].answer), None)
            if other is None:
                other = next((d for d in self.demos if d.answer != out[0].answer and d.qid != exclude_qid), None)
            if other is not None:
                out[-1] = other
        return out


@lru_cache(maxsize=1)
def default_selector() -> DemoSelector:
    """The process-wide selector over train-2061 (built once, ~1 s)."""
    return DemoSelector()


class MiniLMDemoSelector(DemoSelector):
    """``DemoSelector`` ranking the train questions by the cosine of their all-MiniLM-L6-v2
    sentence embeddings with the question's (Reimers & Gurevych 2019; ``sqa.retriever.minilm``,
    numpy, no torch), instead of BM25.

    Why: BM25 ranks by shared words, so "Did Aristotle use a laptop?" gets "Can you buy a fair
    trade laptop?" and the decomposer copies its "What type of product is a laptop?". MiniLM ranks
    by meaning and brings questions of the same strategy ("Did Al Capone carry a smartphone?":
    when did he die, when was it invented, compare). Measured on dev questions' gold decompositions
    (SARI): see ``bench/results/decomposition_demos.json``.

    ``encode``: ``texts -> (n, d)`` L2-normalised array (default ``sqa.retriever.minilm.default_encoder()``).
    ``cache_dir``: where the train questions' embeddings are kept (``demo-embeddings-<sha>.npy``,
    keyed by the questions' text; about 3 MB), so they are computed once (about 10-20 s on 2
    cores); an entry that cannot be read or has the wrong shape is deleted with one warning line
    and rebuilt. Raises SqaError when the MiniLM weights are not installed."""

    def __init__(self, questions: Sequence[Question] | None = None, max_steps: int = 4, encode=None, cache_dir=None):
        super().__init__(questions, max_steps)
        if encode is None:
            from sqa.retriever.minilm import default_encoder

            encode = default_encoder()
        self._encode = encode
        self._emb = self._embeddings(cache_dir)

    def _embeddings(self, cache_dir):
        import hashlib

        import numpy as np

        texts = [d.question for d in self.demos]
        key = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
        path = None
        if cache_dir is not None:
            from pathlib import Path

            path = Path(cache_dir) / f"demo-embeddings-minilm-{key}.npy"
            if path.exists():
                try:
                    emb = np.load(path, allow_pickle=False)
                    if emb.ndim != 2 or emb.shape[0] != len(texts) or emb.dtype != np.float32:
                        raise ValueError(f"shape {emb.shape} {emb.dtype}, expected ({len(texts)}, d) float32")
                    if not np.all(np.isfinite(emb)):
                        raise ValueError("values that are not numbers")
                    return emb
                except Exception as e:  # noqa: BLE001  any unreadable entry is dropped, noted and rebuilt
                    import warnings

                    from sqa.types import SqaWarning

                    try:
                        path.unlink(missing_ok=True)
                    except OSError:  # a directory of that name, a read-only cache: computed each time
                        pass
                    warnings.warn(
                        f"{path}: unreadable embedding-cache entry ({type(e).__name__}) dropped; it is rebuilt",
                        SqaWarning,
                        stacklevel=2,
                    )
        emb = np.asarray(self._encode(texts), dtype=np.float32)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp.npy")
                np.save(tmp, emb)
                tmp.replace(path)
            except OSError:
                pass  # no cache: computed again next time
        return emb

    def _ranked(self, question: str, k: int) -> list[int]:
        import numpy as np

        q = np.asarray(self._encode([question]), dtype=np.float32)[0]
        return [int(i) for i in np.argsort(-(self._emb @ q), kind="stable")[:k]]


def yes_no(b: bool) -> str:
    return "Yes" if b else "No"


def format_steps(steps: Sequence[str]) -> str:
    return "".join(f"{i}. {s.strip()}\n" for i, s in enumerate(steps, start=1))


def prefix(demos: Sequence[Demo], decompose: bool = True) -> tuple[tuple[str, str], ...]:
    """The system message plus the demonstrations as closed chat turns (without decompositions
    when ``decompose`` is False, for the question-only mode and the ``plain`` reading)."""
    turns = [("system", SYSTEM)]
    for d in demos:
        body = f"Steps:\n{format_steps(d.steps)}" if decompose else ""
        turns += [("user", f"Question: {d.question}"), ("assistant", f"{body}Answer: {yes_no(d.answer)}")]
    return tuple(turns)


def question_prompt(demos: Sequence[Demo], question: str, decompose: bool = True) -> ChatPrompt:
    """The prompt of the question being answered: ``prefix(demos, decompose)``, the question's user
    turn, and an empty assistant turn that the decomposer and reader continue."""
    return ChatPrompt(prefix(demos, decompose) + (("user", f"Question: {question.strip()}"),))


DECOMPOSE_STOP = ("\nAnswer", "\nEvidence", "\n#", IM_END, "\n\n")
READ_STOP = ("\n", IM_END)


STEP_ASK = "Answer step {k} ({step}) in a few words."
YES_NO_ASK = "Answer with Yes or No."
DECOMPOSE_TURNS_STOP = tuple(s for s in DECOMPOSE_STOP if s != "\n\n")  # "Steps:" may open with a blank line


def _without(prompt: ChatPrompt, tail: str) -> ChatPrompt:
    """``prompt`` with ``tail`` cut from the end of its reply (when it ends so)."""
    reply = prompt.reply
    return ChatPrompt(prompt.messages, reply[: -len(tail)] if tail and reply.endswith(tail) else reply)


def decompose_turns(prompt: ChatPrompt) -> ChatPrompt:
    """The decomposer's prompt in turns: the question's prompt as it is (its assistant turn is
    still empty), so the model writes "Steps:" and the numbered steps itself, as its demonstrations
    do; :func:`parse_steps` reads them. Raises ValueError for a prompt whose reply is not empty."""
    if prompt.reply:
        raise ValueError("decompose_turns: the question's prompt already holds a reply")
    return prompt


def step_turns(prompt: ChatPrompt, k: int, step: str) -> ChatPrompt:
    """The reader's prompt for step ``k`` in turns: the transcript so far (``prompt.reply`` without
    its trailing "#k =") as a closed assistant turn, then the user turn ``STEP_ASK`` naming the
    step; the model's new message is the answer (:func:`clean_step_answer`)."""
    return _without(prompt, f"#{k} =").as_turns(STEP_ASK.format(k=k, step=step))


def clean_step_answer(text: str, k: int) -> str:
    """A step answer written in a new message: without an echoed "#k =" or "Answer:" label."""
    return re.sub(rf"^\s*(?:#?{k}\s*=|answer\s*:)\s*", "", text, flags=re.I)


def yes_no_turns(prompt: ChatPrompt, question: str | None = None) -> ChatPrompt:
    """A yes/no reading in turns, read from the first token of a new assistant message. With a
    transcript (``prompt.reply`` ends with "Answer:", after "Question: ..." when ``question`` is
    given), it becomes a closed assistant turn without that tail, then the user turn
    "Question: <question>" (when given) and ``YES_NO_ASK``; without one (an empty reply but for
    "Answer:"), ``YES_NO_ASK`` joins the question's own user turn, since some chat templates
    (Mistral's) refuse two user turns in a row."""
    closed = _without(prompt, f"Question: {question}\nAnswer:" if question is not None else "Answer:")
    if closed.reply:
        return closed.as_turns(f"Question: {question}\n{YES_NO_ASK}" if question is not None else YES_NO_ASK)
    role, content = prompt.messages[-1]
    return ChatPrompt(prompt.messages[:-1] + ((role, f"{content}\n{YES_NO_ASK}"),))


def parse_steps(text: str, max_steps: int = 5) -> list[str]:
    """Numbered lines "k. sub-question" of the decomposer's output -> the sub-questions (at most
    ``max_steps``; unnumbered lines are taken as steps too; empty ones and a "Steps:" heading
    dropped; an "Answer:" or "Evidence" line, numbered or not, ends them)."""
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.lower() == "steps:":  # a heading written in a new message (decompose_turns)
            continue
        if line.lower().startswith(("answer", "evidence")):
            break
        line = re.sub(r"^(?:step\s*)?\d+\s*[.):]\s*", "", line, flags=re.I).strip()
        if line.lower().startswith(("answer:", "evidence ")):  # "1. Answer: No": an answer, not a step
            break
        if line and line not in steps:
            steps.append(line)
        if len(steps) >= max_steps:
            break
    return steps


_TOK = re.compile(r"\w+")


def trim_evidence(text: str, query: str, max_words: int = 60) -> str:
    """At most ``max_words`` words of paragraph ``text``: the sentence sharing most (lower-cased)
    words of length >= 3 with ``query``, then its neighbours, in their original order; "..." marks
    a cut inside a sentence."""
    words = text.split()
    if len(words) <= max_words:
        return text.strip()
    sents = split_sentences(text)
    q = {w for w in _TOK.findall(query.lower()) if len(w) >= 3}
    scores = [len(q & {w for w in _TOK.findall(s.lower())}) for s in sents]
    best = max(range(len(sents)), key=lambda i: (scores[i], -i))
    chosen = {best}
    n = len(sents[best].split())
    lo, hi = best - 1, best + 1
    while n < max_words and (lo >= 0 or hi < len(sents)):
        for j in (hi, lo):
            if 0 <= j < len(sents) and j not in chosen and n + len(sents[j].split()) <= max_words:
                chosen.add(j)
                n += len(sents[j].split())
        lo, hi = lo - 1, hi + 1
        if lo < 0 and hi >= len(sents):
            break
        if all(n + len(sents[j].split()) > max_words for j in (lo, hi) if 0 <= j < len(sents)):
            break
    out = " ".join(sents[i] for i in sorted(chosen))
    w = out.split()
    if len(w) > max_words:
        out = " ".join(w[:max_words]) + " ..."
    return out


def evidence_line(k: int, title: str, text: str) -> str:
    return f"Evidence {k} ({title.strip()}): {text.strip()}\n"
