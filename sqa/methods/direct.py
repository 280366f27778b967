"""``direct``: standard few-shot prompting (Wei et al. 2022's "standard prompting" baseline: the
same six StrategyQA exemplars with their answers and no chain of thought), the answer read as
P(yes) from the next token after "A:" (no generation, no answer head)."""

from __future__ import annotations

from sqa.methods import prompts as P
from sqa.methods.base import Method, MethodOutput, cite


class Direct(Method):
    """Few-shot question -> answer, read from the first answer token (see the module doc)."""

    name = "direct"
    source = "Wei et al. 2022, standard prompting baseline with the Table 25 exemplars; " + cite(P.COT_SOURCE)
    needs = ("p_yes",)
    defaults = {}
    exemplars = "wei"
    answer_rule = "forced"  # P(yes) of the first answer token after "So the answer is"
    prompt = staticmethod(P.direct_prompt)  # question -> the text whose next token is read

    def answer(self, question, tools):
        p = tools.p_yes(self.prompt(question))
        return MethodOutput(p >= 0.5, p, True)


class BigBench(Direct):
    """``Direct`` zero-shot: P(yes) of the answer after BIG-bench's "Q: {question}\\nA:", as
    lm-evaluation-harness's ``bigbench_strategyqa_multiple_choice`` task scores Yes against No
    (``sqa.methods.prompts.BIGBENCH_SOURCE``, with its FALLBACK note). No exemplars, no head."""

    name = "bigbench"
    source = "BIG-bench strategyqa, zero-shot, as lm-evaluation-harness scores it; " + cite(P.BIGBENCH_SOURCE)
    exemplars = ""
    answer_rule = "forced"  # the argmax of P(Yes) and P(No) of the first answer token
    prompt = staticmethod(P.bigbench_prompt)
