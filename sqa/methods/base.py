"""``Method``: a way of answering a yes/no question over the counted toolbox
(:class:`sqa.methods.toolbox.Tools`), and ``MethodOutput``, what it answers.

A method declares its ``name``, its ``source`` (paper, table, public code at a commit), what it
``needs`` from a model and an index, its settings' ``defaults`` (the keys of
:class:`sqa.methods.settings.MethodSettings` it reads, with its paper's values) and its prompt
variants. It answers one question in :meth:`Method.answer`; :class:`sqa.methods.reader.MethodReader`
runs many questions at once where the model serves requests concurrently. docs/methods.md shows a
method written outside the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sqa.trace import StepTrace

# what a method can need (``Method.needs``): model abilities (sqa.types.ModelCapabilities) and an index
NEEDS = ("generate", "p_yes", "sampling", "token_logprobs", "attention", "search")


@dataclass
class MethodOutput:
    """A method's answer to one question.

    ``answer``: yes (True) or no; ``p_yes``: P(yes) in [0, 1] as the method reads it (1.0/0.0 for
    an answer read from text, the share of yes votes for self-consistency, the next-token P(yes)
    for ``forced``: never calibrated); ``read``: whether the answer rule found the answer in the
    text (False: the ``forced`` read-out or the rule's default answered); ``text``: the final
    generation (the chain of thought); ``steps``: intermediate steps (follow-up questions,
    retrieval queries, sentences) as :class:`sqa.trace.StepTrace`; ``votes``: per sampled path,
    its answer (None: unread), for self-consistency."""

    answer: bool
    p_yes: float
    read: bool = True
    text: str = ""
    steps: list[StepTrace] = field(default_factory=list)
    votes: list[bool | None] = field(default_factory=list)


class Method:
    """Base class of every method (subclass it; see the module doc).

    Class attributes: ``name`` (registry name, or any name for a method of your own); ``source``
    (one line: paper, table, public code path and commit); ``needs`` (a tuple of
    :data:`NEEDS`); ``defaults`` (setting -> default value; only these settings may be given);
    ``prompts`` (the prompt variants ``--prompt`` may name, the first is the default);
    ``answer_rule`` (the rule recorded for a method that reads no ``answer_rule`` setting); ``bounds``
    (setting -> ``(low, high)``: a narrower range than :class:`MethodSettings` allows); ``preset``
    (set only by ``facts`` and ``steps``: the method is that preset's reader, ``sqa.presets``)."""

    name: ClassVar[str] = ""
    source: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ("generate",)
    defaults: ClassVar[dict] = {}
    prompts: ClassVar[tuple[str, ...]] = ()
    preset: ClassVar[str] = ""
    answer_rule: ClassVar[str] = "answer-is"  # what a run records when the method reads no answer_rule setting
    exemplars: ClassVar[str] = (
        ""  # the exemplar set of a method with no ``prompt`` setting (prompts.exemplar_questions)
    )
    bounds: ClassVar[dict] = {}  # setting -> (low, high), exclusive, checked beyond MethodSettings' own ranges

    @property
    def retrieves(self) -> bool:
        """Whether the method searches the index (``"search"`` in :attr:`needs`)."""
        return "search" in self.needs

    def demonstrations(self, settings: dict) -> tuple[str, ...]:
        """The questions shown with their answers in this method's prompts under ``settings`` (the
        resolved settings): a run marks its questions among them as demonstrations (leaked), as it
        does the facts reader's. Default: the exemplars of the ``prompt`` setting, else of
        :attr:`exemplars` (:func:`sqa.methods.prompts.exemplar_questions`). Override it in a
        method of your own whose prompt shows other questions."""
        from sqa.methods.prompts import exemplar_questions

        return exemplar_questions(settings.get("prompt") or self.exemplars)

    def answer(self, question: str, tools) -> MethodOutput:
        """Answer ``question`` with ``tools`` (:class:`sqa.methods.toolbox.Tools`, whose
        ``settings`` hold the resolved settings). Raise :class:`sqa.types.SqaError` for what the
        user can act on."""
        raise NotImplementedError(f"{type(self).__name__}.answer")

    def __repr__(self) -> str:
        return f"<method {self.name or type(self).__name__}>"


def cite(source) -> str:
    """One line naming a prompt's source (``sqa.methods.prompts.Source``): repository, path, commit."""
    return f"{source.repo}/{source.path}@{source.commit[:12]}"
