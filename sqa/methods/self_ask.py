"""``self-ask``: Press et al. 2022 ("Measuring and Narrowing the Compositionality Gap in Language
Models"), self-ask with a search engine, following the original code's loop (``promptf`` in the
repository cited by :data:`sqa.methods.prompts.SELF_ASK_SOURCE`): the model writes "Follow up:"
questions, generation stops at "Intermediate answer:", and the search engine's answer is put
there. Here the search engine is the BM25 index: the intermediate answer is the sentence of the
top paragraph that shares most words with the follow-up question (the original took Google's
answer box or first snippet). At most ``max_steps`` (5) follow-ups, then "So the final answer is:"
is asked for, so a question costs at most ``max_steps + 1`` generations.
"""

from __future__ import annotations

import re

from sqa.methods import prompts as P
from sqa.methods.base import Method, MethodOutput, cite
from sqa.trace import StepTrace

INTERMEDIATE = "\nIntermediate answer:"
FOLLOW_UP = "Follow up:"
FINAL = "\nSo the final answer is:"
_WORDS = re.compile(r"\w+")


def best_sentence(text: str, query: str) -> str:
    """The sentence of ``text`` sharing the most (lowercased) words with ``query``; the first on a tie."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s.strip()]
    if not sentences:
        return ""
    q = set(_WORDS.findall(query.lower()))
    return max(sentences, key=lambda s: (len(q & set(_WORDS.findall(s.lower()))), -sentences.index(s)))


class SelfAsk(Method):
    """Self-ask with search (see the module doc)."""

    name = "self-ask"
    source = "Press et al. 2022, Self-Ask with search, the original prompt and loop; " + cite(P.SELF_ASK_SOURCE)
    needs = ("generate", "p_yes", "search")
    exemplars = "self-ask"
    defaults = {"answer_rule": "answer-is", "k": 1, "max_steps": 5, "max_tokens": 128}

    def answer(self, question, tools):
        prompt = P.self_ask_prompt(question)
        stops = tuple(P.SELF_ASK_STOPS)
        out = tools.generate(prompt, stop=stops)[0].text
        steps: list[StepTrace] = []
        while FOLLOW_UP in _last_line(out) and FINAL.strip() not in out:
            prompt += out
            follow = _last_line(out).split(FOLLOW_UP, 1)[1].strip()
            hits = tools.search(follow)
            said = best_sentence(hits[0].text, follow).rstrip(".") if hits else ""
            steps.append(
                StepTrace(len(steps) + 1, follow, query=follow, answer=said, evidence=[h.evidence_id for h in hits])
            )
            prompt += f"{INTERMEDIATE} {said}." if said else INTERMEDIATE
            if len(steps) >= tools.settings["max_steps"]:
                out = ""
                break
            out = tools.generate(prompt, stop=stops)[0].text
        if FINAL.strip() not in out:
            prompt += out + FINAL
            out = FINAL + tools.generate(prompt, stop=("\n",))[0].text
            prompt = prompt[: -len(FINAL)]
        d = tools.decide(prompt, out)
        return MethodOutput(d.answer, d.p_yes, d.read, (prompt + out)[len(P.self_ask_prompt(question)) :], steps)


def _last_line(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    return lines[-1] if lines else ""
