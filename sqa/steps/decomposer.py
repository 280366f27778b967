"""The decomposer of the facts reader: the reader model writes a question's decomposition (single-step
sub-questions, the last one usually combining earlier answers "#k"), shown three train-2061
questions with their gold decompositions.

Demonstrations: the 3 train-2061 questions nearest in meaning (cosine of all-MiniLM-L6-v2 sentence
embeddings, ``sqa.retriever.minilm``, numpy, no torch), whatever their answers, the nearest last
(next to the question); never the question itself (same qid or text). Without the MiniLM weights,
the 3 nearest by BM25 (``prompts.DemoSelector``), unless MiniLM is required (a head trained on
MiniLM-picked step facts). SARI of both against dev's gold decompositions:
``bench/results/decomposition_demos.json`` (a tie on 56 questions).

Used by ``sqa ask --steps`` (shown only) and by the facts selection with step facts
(``FactSettings.step_facts``), where each step's best sentence becomes a fact.
"""

from __future__ import annotations

from pathlib import Path
from sqa.steps import prompts as P
from sqa.types import SqaError

N_DEMOS = 3
MAX_NEW_TOKENS = 80


class Decomposer:
    """``decomposer(question, exclude_qid=None) -> list[str]``: the steps the reader ``model`` (a
    ``LanguageModel`` with ``generate``) writes for ``question`` (at most 5, ``prompts.parse_steps``;
    greedy, at most 80 new tokens). ``demos_by`` says how the demonstrations were picked ("MiniLM"
    or "BM25"), ``note`` why BM25 when it is, and ``encode`` is the MiniLM encoder (None with BM25).

    ``encode``: the MiniLM encoder to reuse (default ``sqa.retriever.minilm.default_encoder()``);
    ``cache_dir``: where the train questions' embeddings are kept (``MiniLMDemoSelector``).
    Raises SqaError when ``require_minilm`` and the MiniLM weights are not installed. About 7-11 s
    a question for the 1.5B model on 2 cores (the step-facts study's records, bench/results/notes.md)."""

    def __init__(self, model, *, encode=None, cache_dir: str | Path | None = None, require_minilm: bool = False):
        self.model = model
        self.note = ""
        try:
            if encode is None:
                from sqa.retriever.minilm import default_encoder

                encode = default_encoder()
            self.selector: P.DemoSelector = P.MiniLMDemoSelector(encode=encode, cache_dir=cache_dir)
            self.encode = encode
            self.demos_by = "MiniLM"
        except SqaError as e:
            if require_minilm:
                raise
            self.selector = P.default_selector()
            self.encode = None
            self.demos_by = "BM25"
            self.note = str(e)

    def demos(self, question: str, exclude_qid: str | None = None) -> list[P.Demo]:
        """The demonstrations for ``question`` in prompt order (MiniLM: the nearest last)."""
        demos = self.selector.select(question, N_DEMOS, exclude_qid=exclude_qid, balance=False)
        return demos[::-1] if self.demos_by == "MiniLM" else demos

    def __call__(self, question: str, exclude_qid: str | None = None) -> list[str]:
        prompt = P.question_prompt(self.demos(question, exclude_qid), question).extend("Steps:\n1.")
        out = self.model.generate([prompt], MAX_NEW_TOKENS, P.DECOMPOSE_STOP)[0]
        return P.parse_steps("1." + out)
