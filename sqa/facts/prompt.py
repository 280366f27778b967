"""The facts reader: a fixed few-shot prompt whose demonstrations show a question, its annotated
facts and its answer, then the question being answered with the facts selected for it.

Layout (plain text, no chat markers, so the static head is one cacheable prefix)::

    INSTRUCTION
    Question: <demo 1>            <- 6 fixed train-2061 questions, 3 yes and 3 no, alternating,
    Facts:                           with their StrategyQA annotated facts
    - <fact> ...
    Answer: Yes
    ...
    Question: <question>
    Facts:
    - <fact 1>                    <- the reader reads the state after each fact line:
    Answer:                          "Answer:" is appended, the last token's hidden state and the
    - <fact 2>                       yes/no log-odds read, and the two tokens dropped again
    Answer:                          (prefix KV-cache reuse makes each read-out cost ~2 tokens)

The "plain" prompt is the same without any facts (instruction and demonstrations without facts
lines): the no-retrieval reading of the same model.

Prompt form (``PROMPT_FORMS``): "text" (the default) gives the model the text above as it is;
"chat" gives the same text as the one user turn of a :class:`sqa.types.ChatPrompt`, which the model
renders in its own chat template with the assistant turn opened (``add_generation_prompt``), as
lm-evaluation-harness's ``--apply_chat_template`` does. A served model over
``/v1/chat/completions`` reads every prompt in its chat template, so it reads the chat form
whatever it is given; an in-process model reads it with ``--apply-chat-template``. The two forms
are different prompts (the packaged 0.5B: P(yes) 0.66 text vs 0.29 chat on one prompt,
bench/results/server_chat_vs_completions.json), so the form is part of the prompt version
(``prompt_version``: "facts-v1" / "facts-v1-chat"), hence of the features store's settings key and
of an answer head's provenance: a head answers only reads of its own form.

Features of one question (``read_question``): per read-out point, the hidden state (n_embd floats)
and the log-odds. The trained answer head (``sqa.facts.head``) maps them to P(yes).
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Collection, Sequence

import numpy as np

from sqa.facts.head import readout_for, readout_names
from sqa.facts.sources import Fact
from sqa.types import BadInput, ChatPrompt, Prompt, Question

PROMPT_VERSION = "facts-v1"  # the text form's version; the chat form's is PROMPT_VERSION + "-chat"
PROMPT_FORMS = ("text", "chat")
INSTRUCTION = (
    "Answer each yes/no question with Yes or No. Facts that may help are listed under the question; "
    "some of them may be irrelevant.\n\n"
)
PLAIN_INSTRUCTION = "Answer each yes/no question with Yes or No.\n\n"
N_DEMOS = 6


@dataclass(frozen=True)
class FactDemo:
    qid: str
    question: str
    facts: tuple[str, ...]
    answer: bool


@lru_cache(maxsize=1)
def fixed_demos() -> tuple[FactDemo, ...]:
    """The 6 demonstrations: the first train-2061 questions (release order) with 2 or 3 annotated
    facts of at most 20 words each, taken alternately Yes, No, Yes, ... Fixed, so the prompt head
    is the same for every question and read once (KV-cache prefix)."""
    from sqa.strategyqa import load_questions

    want = True
    out: list[FactDemo] = []
    for q in load_questions("train-2061"):
        if q.answer is None or bool(q.answer) != want or not 2 <= len(q.facts) <= 3:
            continue
        if any(len(f.split()) > 20 for f in q.facts):
            continue
        out.append(FactDemo(q.qid, q.question.strip(), tuple(f.strip() for f in q.facts), bool(q.answer)))
        want = not want
        if len(out) == N_DEMOS:
            break
    return tuple(out)


def demo_qids() -> frozenset[str]:
    """qids of the fixed demonstrations (left out of head training and cross-validation)."""
    return frozenset(d.qid for d in fixed_demos())


def facts_prefix() -> str:
    parts = [INSTRUCTION]
    for d in fixed_demos():
        parts.append(
            f"Question: {d.question}\nFacts:\n"
            + "".join(f"- {f}\n" for f in d.facts)
            + f"Answer: {'Yes' if d.answer else 'No'}\n\n"
        )
    return "".join(parts)


def plain_prefix() -> str:
    return PLAIN_INSTRUCTION + "".join(
        f"Question: {d.question}\nAnswer: {'Yes' if d.answer else 'No'}\n\n" for d in fixed_demos()
    )


def facts_prompts(question: str, facts: Sequence[str]) -> list[str]:
    """The read-out prompts after 1..len(facts) fact lines (prefixes of one another up to the
    trailing "Answer:")."""
    base = facts_prefix() + f"Question: {question.strip()}\nFacts:\n"
    out = []
    for i in range(1, len(facts) + 1):
        out.append(base + "".join(f"- {f.strip()}\n" for f in facts[:i]) + "Answer:")
    return out


def plain_prompt(question: str) -> str:
    return plain_prefix() + f"Question: {question.strip()}\nAnswer:"


def check_form(form: str) -> str:
    """``form`` if it is one of ``PROMPT_FORMS``; BadInput otherwise."""
    if form not in PROMPT_FORMS:
        raise BadInput(f"unknown prompt form {form!r}; use {' or '.join(PROMPT_FORMS)}")
    return form


def prompt_version(form: str = "text") -> str:
    """The facts reader's prompt version for a prompt form: "facts-v1" (text) or "facts-v1-chat"."""
    return PROMPT_VERSION if check_form(form) == "text" else f"{PROMPT_VERSION}-chat"


def form_of_version(version: str | None) -> str:
    """The prompt form a recorded prompt version was read in ("chat" for ``...-chat``, else "text";
    heads and stores from before the chat form record "facts-v1")."""
    return "chat" if isinstance(version, str) and version.endswith("-chat") else "text"


def in_form(text: str, form: str = "text") -> Prompt:
    """One of the reader's prompts in ``form``: the text itself, or a ``ChatPrompt`` whose one user
    turn is the text (the model opens the assistant turn; see the module doc)."""
    return text if check_form(form) == "text" else ChatPrompt((("user", text),))


def interleave(first: Sequence[Fact], second: Sequence[Fact]) -> list[Fact]:
    """first[0], second[0], first[1], second[1], ... (the rest of the longer list at the end)."""
    out: list[Fact] = []
    for i in range(max(len(first), len(second))):
        if i < len(first):
            out.append(first[i])
        if i < len(second):
            out.append(second[i])
    return out


@dataclass
class QuestionFeatures:
    """What the reader read for one question: ``states[name]`` the hidden state (float32,
    ``(n_embd,)``) and ``log_odds[name]`` the yes/no log-odds at read-out ``name`` ("plain", or
    "f1".."fN" after N fact lines), the ``facts`` shown, the question's top-k ``paragraphs``
    (evidence IDs) with their retrieval ``scores``, and seconds spent."""

    qid: str
    question: str
    facts: list[Fact]
    paragraphs: list[str]
    paragraph_scores: list[float]
    states: dict[str, np.ndarray] = field(default_factory=dict)
    log_odds: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    label: bool | None = None
    steps: list[str] = field(default_factory=list)  # the decomposition the step facts came from (if any)

    def to_dict(self) -> dict:
        return {
            "qid": self.qid,
            "question": self.question,
            "label": self.label,
            "facts": [f.to_dict() for f in self.facts],
            "paragraphs": self.paragraphs,
            "paragraph_scores": [round(s, 4) for s in self.paragraph_scores],
            "log_odds": {k: round(v, 5) for k, v in self.log_odds.items()},
            "states": {k: encode_state(v) for k, v in self.states.items()},
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            **({"steps": list(self.steps)} if self.steps else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "QuestionFeatures":
        return cls(
            qid=d["qid"],
            question=d["question"],
            label=d.get("label"),
            facts=[Fact.from_dict(f) for f in d.get("facts", [])],
            paragraphs=list(d.get("paragraphs", [])),
            paragraph_scores=list(d.get("paragraph_scores", [])),
            states={k: decode_state(v) for k, v in d.get("states", {}).items()},
            log_odds=dict(d.get("log_odds", {})),
            seconds=dict(d.get("seconds", {})),
            steps=list(d.get("steps", [])),
        )


def encode_state(v: np.ndarray) -> str:
    """float16 little-endian bytes, base64 (a 1,536-float state is 4 kB of text)."""
    return base64.b64encode(np.asarray(v, dtype="<f2").tobytes()).decode("ascii")


def decode_state(s: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype="<f2").astype(np.float32)


def read_question(
    model,
    question: Question | str,
    facts: Sequence[Fact],
    *,
    qid: str | None = None,
    paragraphs: Sequence[str] = (),
    paragraph_scores: Sequence[float] = (),
    plain: bool = True,
    form: str = "text",
    readouts: Collection[str] | None = None,
) -> QuestionFeatures:
    """Run the reader over one question: the plain prompt (if ``plain``) and the facts prompt,
    reading out after each fact line, each prompt in ``form`` (``in_form``). ``readouts`` names
    the only read-outs to take ("plain", "f1", ..., "last"; None: all of them): each name's stand-in
    among the prompts (``sqa.facts.head.readout_for``, as ``feature_vector`` reads them: an ``fN``
    beyond the facts shown takes the last fact line's, and with no facts "plain"), so a head gets the same numbers from two prompts as from all six. ``model`` must have ``hidden_states(prompts)`` (llama.cpp and
    transformers models give states; a served model gives None, and the record then holds log-odds only). Raises whatever the model raises (SqaError for a prompt over the
    context)."""
    text = question.question if isinstance(question, Question) else question
    label = question.answer if isinstance(question, Question) else None
    qf = QuestionFeatures(
        qid=qid or (question.qid if isinstance(question, Question) else ""),
        question=text,
        facts=list(facts),
        paragraphs=list(paragraphs),
        paragraph_scores=list(paragraph_scores),
        label=label,
    )
    texts = ([plain_prompt(text)] if plain else []) + facts_prompts(text, [f.text for f in facts])
    prompts = list(zip(readout_names(len(facts), plain), texts))
    if readouts is not None:
        wanted = {readout_for(r, [name for name, _ in prompts]) for r in readouts}
        prompts = [(name, p) for name, p in prompts if name in wanted]
    t = time.perf_counter()
    for (name, _), (h, lo) in zip(prompts, model.hidden_states([in_form(p, form) for _, p in prompts])):
        if h is not None:  # a served model (sqa.models.openai) gives log-odds only
            qf.states[name] = h
        qf.log_odds[name] = lo
    qf.seconds["read"] = time.perf_counter() - t
    return qf
