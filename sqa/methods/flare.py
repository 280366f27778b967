"""Active retrieval during generation: FLARE (DRAGIN: :mod:`sqa.methods.dragin`).

- ``flare``: Jiang et al. 2023 ("Active Retrieval Augmented Generation", EMNLP 2023), FLARE-direct:
  the next sentence is generated as a look-ahead (greedy, with per-token probabilities); when any
  of its tokens has probability below ``theta``, the index is searched with the sentence, its
  low-probability tokens masked out (the paper's masked query), and the sentence is generated
  again over the paragraphs found; otherwise it is kept. Until a sentence states the answer, the
  model stops, or ``max_steps`` sentences. Needs per-token logprobs (llama.cpp in-process, and
  servers that return them).
"""

from __future__ import annotations

import math
import re

from sqa.methods import prompts as P
from sqa.methods.base import Method, MethodOutput, cite
from sqa.methods.cot import STOP
from sqa.methods.rag import IRCOT_MAX_PARAGRAPHS, _step, add_paragraphs

_END = re.compile(r"[.!?]\s*$")


def look_ahead(gen) -> tuple[str, list[float]]:
    """The first sentence of a ``sqa.types.Generation`` and its tokens' probabilities: tokens are
    taken up to the first one that ends a sentence (., ! or ?); all of them when none does."""
    text, probs = "", []
    for tok, lp in zip(gen.tokens, gen.logprobs):
        text += tok
        probs.append(math.exp(lp))
        if _END.search(tok.strip() or " ") and text.strip():
            break
    if not gen.tokens:
        return gen.text.strip(), []
    return text.strip(), probs


def masked_query(gen, sentence_tokens: int, theta: float) -> str:
    """The sentence's tokens whose probability is at least ``theta`` (FLARE's masked query)."""
    kept = [t for t, lp in list(zip(gen.tokens, gen.logprobs))[:sentence_tokens] if math.exp(lp) >= theta]
    return " ".join("".join(kept).split())


class Flare(Method):
    """FLARE-direct with a look-ahead sentence and a probability threshold (see the module doc)."""

    name = "flare"
    source = "Jiang et al. 2023, FLARE (EMNLP 2023), as DRAGIN re-implements it with the CoT exemplars; " + cite(
        P.DRAGIN_SOURCE
    )
    needs = ("generate", "p_yes", "search", "token_logprobs")
    prompts = ("dragin",)
    defaults = {"prompt": "dragin", "answer_rule": "answer-is", "k": 3, "theta": 0.4, "max_steps": 8, "max_tokens": 64}
    bounds = {"theta": (0.0, 1.0)}  # a token probability

    def answer(self, question, tools):
        s = tools.settings
        docs: list[str] = []
        text, steps = "", []
        for _ in range(s["max_steps"]):
            prompt = P.continue_prompt(question, docs[-IRCOT_MAX_PARAGRAPHS:], text, s["prompt"])
            gen = tools.generate(prompt, stop=STOP, logprobs=True)[0]
            sentence, probs = look_ahead(gen)
            if not sentence:
                break
            if probs and min(probs) < s["theta"]:
                query = masked_query(gen, len(probs), s["theta"]) or question
                hits = tools.search(query)
                add_paragraphs(docs, hits)
                steps.append(_step(len(steps) + 1, query, hits))
                prompt = P.continue_prompt(question, docs[-IRCOT_MAX_PARAGRAPHS:], text, s["prompt"])
                again = tools.generate(prompt, stop=STOP, logprobs=True)[0]
                sentence = look_ahead(again)[0] or sentence
            text = f"{text} {sentence}".strip()
            if "answer is" in sentence.lower():
                break
        final_prompt = P.continue_prompt(question, docs[-IRCOT_MAX_PARAGRAPHS:], "", s["prompt"])
        d = tools.decide(final_prompt, text)
        return MethodOutput(d.answer, d.p_yes, d.read, text, steps)
