"""Retrieval-augmented chains of thought: single-shot RAG, Iter-RetGen and IRCoT.

- ``rag``: one BM25 search with the question (top-k, DRAGIN's 3 by default), the paragraphs and
  the CoT exemplars in DRAGIN's SingleRAG prompt form, one generation, the answer rule.
- ``iter-retgen``: Shao et al. 2023 ("Enhancing Retrieval-Augmented Large Language Models with
  Iterative Retrieval-Generation Synergy", Findings of EMNLP 2023): T iterations (default 2);
  iteration 1 searches with the question, iteration t > 1 with the question followed by
  iteration t-1's generation; k = 5 paragraphs each; the last generation is answered.
- ``ircot``: Trivedi et al. 2023 ("Interleaving Retrieval with Chain-of-Thought Reasoning",
  ACL 2023): search with the question, then repeatedly write the next CoT sentence over every
  paragraph found so far and search with that sentence, until a sentence states the answer or
  ``max_steps`` sentences; the paragraphs read are capped at the most recent 15 (IRCoT's cap).
Prompt texts and their sources: :mod:`sqa.methods.prompts`.
"""

from __future__ import annotations

import re

from sqa.methods import prompts as P
from sqa.methods.base import Method, MethodOutput, cite
from sqa.methods.cot import STOP
from sqa.trace import StepTrace

SENTENCE_END = re.compile(r"(?<=[.!?])\s")
IRCOT_MAX_PARAGRAPHS = 15


def paragraph_text(hit) -> str:
    """How a retrieved paragraph is shown in a prompt: ``title: text`` on one line."""
    return f"{hit.title}: {' '.join(hit.text.split())}"


def add_paragraphs(docs: list[str], hits) -> None:
    """Append to ``docs`` the prompt text of each of ``hits`` not there yet, in order."""
    docs += [d for d in (paragraph_text(h) for h in hits) if d not in docs]


def _step(i: int, query: str, hits, answer: str | None = None) -> StepTrace:
    return StepTrace(
        i, query, query=query, answer=answer, evidence=[h.evidence_id for h in hits], scores=[h.score for h in hits]
    )


class SingleRAG(Method):
    """Retrieve once with the question, then CoT over the paragraphs (see the module doc)."""

    name = "rag"
    source = "DRAGIN (Su et al. 2024) SingleRAG baseline, prompt form of src/generate.py; " + cite(P.DRAGIN_SOURCE)
    needs = ("generate", "p_yes", "search")
    prompts = ("dragin",)
    defaults = {"prompt": "dragin", "answer_rule": "answer-is", "k": 3, "max_tokens": 256}

    def answer(self, question, tools):
        hits = tools.search(question)
        prompt = P.rag_prompt(question, [paragraph_text(h) for h in hits], tools.settings["prompt"])
        text = tools.generate(prompt, stop=STOP)[0].text
        d = tools.decide(prompt, text)
        return MethodOutput(d.answer, d.p_yes, d.read, text, [_step(1, question, hits)])


class IterRetGen(Method):
    """Iterative retrieval-generation synergy (see the module doc)."""

    name = "iter-retgen"
    source = "Shao et al. 2023, Iter-RetGen (Findings of EMNLP 2023), T iterations, k = 5; " + cite(
        P.ITER_RETGEN_SOURCE
    )
    needs = ("generate", "p_yes", "search")
    exemplars = "dragin"  # ITER_RETGEN_SOURCE: DRAGIN's exemplars (FALLBACK)
    defaults = {"answer_rule": "answer-is", "k": 5, "iterations": 2, "max_tokens": 256}

    def answer(self, question, tools):
        text, steps, prompt = "", [], ""
        for t in range(tools.settings["iterations"]):
            query = question if t == 0 else f"{question} {text}".strip()
            hits = tools.search(query)
            prompt = P.iter_retgen_prompt(question, [paragraph_text(h) for h in hits])
            text = tools.generate(prompt, stop=STOP)[0].text
            steps.append(_step(t + 1, query, hits, text))
        d = tools.decide(prompt, text)
        return MethodOutput(d.answer, d.p_yes, d.read, text, steps)


class IRCoT(Method):
    """Interleaved retrieval and chain of thought, one sentence at a time (see the module doc)."""

    name = "ircot"
    source = "Trivedi et al. 2023, IRCoT (ACL 2023), as DRAGIN re-implements it with the CoT exemplars; " + cite(
        P.DRAGIN_SOURCE
    )
    needs = ("generate", "p_yes", "search")
    prompts = ("dragin",)
    defaults = {"prompt": "dragin", "answer_rule": "answer-is", "k": 3, "max_steps": 6, "max_tokens": 64}

    def answer(self, question, tools):
        s = tools.settings
        hits = tools.search(question)
        docs = [paragraph_text(h) for h in hits]
        steps, text = [_step(1, question, hits)], ""
        for i in range(s["max_steps"]):
            prompt = P.continue_prompt(question, docs[-IRCOT_MAX_PARAGRAPHS:], text, s["prompt"])
            out = tools.generate(prompt, stop=STOP)[0].text
            sentence = first_sentence(out)
            if not sentence:
                break
            text = f"{text} {sentence}".strip()
            if "answer is" in sentence.lower():  # an earlier sentence stating it ended the loop
                break
            hits = tools.search(sentence)
            add_paragraphs(docs, hits)
            steps.append(_step(i + 2, sentence, hits))
        final_prompt = P.continue_prompt(question, docs[-IRCOT_MAX_PARAGRAPHS:], "", s["prompt"])
        d = tools.decide(final_prompt, text)
        return MethodOutput(d.answer, d.p_yes, d.read, text, steps)


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (up to and including its ., ! or ?), stripped; the whole
    text when it has no sentence end."""
    text = text.strip()
    parts = SENTENCE_END.split(text, maxsplit=1)
    return parts[0].strip() if parts else ""
