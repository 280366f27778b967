"""Chain of thought (Wei et al. 2022) and self-consistency (Wang et al. 2023).

- ``cot``: the six StrategyQA exemplars of Wei et al. 2022, Table 25 (``--prompt wei``, the
  default) or DRAGIN's wording of them (``--prompt dragin``), one greedy generation, then the
  answer rule (default ``answer-is``: "So the answer is yes."). Source texts and commits:
  :mod:`sqa.methods.prompts`.
- ``sc``: the same prompt, ``samples`` paths sampled at ``temperature`` (Wang et al. 2023,
  "Self-Consistency Improves Chain of Thought Reasoning in Language Models", ICLR 2023: 40 paths at
  T = 0.7 in the paper; 5 here by default), asked as one call of n continuations; the majority of
  the answers the rule reads wins, P(yes) is the share of yes among them. A tie goes to the first
  read path's answer; no read path: the ``forced`` read-out of the first path.
"""

from __future__ import annotations

from sqa.methods import prompts as P
from sqa.methods.base import Method, MethodOutput, cite

STOP = ("\nQ:", "\nQuestion:", "\n\n")


class CoT(Method):
    """Few-shot chain of thought, one greedy generation (see the module doc)."""

    name = "cot"
    source = "Wei et al. 2022, Chain-of-Thought Prompting, Table 25 (StrategyQA exemplars); " + cite(P.COT_SOURCE)
    needs = ("generate", "p_yes")
    prompts = ("wei", "dragin")
    defaults = {"prompt": "wei", "answer_rule": "answer-is", "max_tokens": 256}

    def answer(self, question, tools):
        prompt = P.cot_prompt(question, tools.settings["prompt"])
        text = tools.generate(prompt, stop=STOP)[0].text
        d = tools.decide(prompt, text)
        return MethodOutput(d.answer, d.p_yes, d.read, text)


class SelfConsistency(Method):
    """Self-consistency over sampled chains of thought (see the module doc)."""

    name = "sc"
    source = (
        "Wang et al. 2023, Self-Consistency Improves Chain of Thought Reasoning, ICLR 2023 (majority vote "
        "over sampled CoT paths); prompt: " + cite(P.COT_SOURCE)
    )
    needs = ("generate", "p_yes", "sampling")
    prompts = ("wei", "dragin")
    defaults = {
        "prompt": "wei",
        "answer_rule": "answer-is",
        "samples": 5,
        "temperature": 0.7,
        "seed": 0,
        "max_tokens": 256,
    }

    def answer(self, question, tools):
        s = tools.settings
        prompt = P.cot_prompt(question, s["prompt"])
        paths = tools.generate(prompt, stop=STOP, temperature=s["temperature"], n=s["samples"], seed=s["seed"])
        text_rule = "answer-is-else-no" if s["answer_rule"] == "answer-is-else-no" else "answer-is"
        votes = [tools.read(p.text, text_rule) for p in paths]  # an unread path does not vote
        read = [v for v in votes if v is not None]
        if not read:
            d = tools.decide(prompt, paths[0].text, rule="forced")
            return MethodOutput(d.answer, d.p_yes, False, paths[0].text, votes=votes)
        yes = sum(read)
        answer = yes * 2 > len(read) or (yes * 2 == len(read) and read[0])
        first = next(p.text for p, v in zip(paths, votes) if v is not None)
        return MethodOutput(bool(answer), yes / len(read), True, first, votes=votes)
