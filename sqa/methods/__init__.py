"""Methods: ways of answering a StrategyQA question over a counted toolbox (generate, P(yes),
search), the literature's (chain of thought, self-consistency, Self-Ask, single-shot RAG,
Iter-RetGen, IRCoT, FLARE, DRAGIN) beside sqa's own readers (``facts``, ``steps``).

- :class:`Method` / :class:`MethodOutput` (``sqa.methods.base``): subclass to write your own.
- :class:`MethodSettings` (``sqa.methods.settings``): the one settings object of a method run.
- :class:`Tools` (``sqa.methods.toolbox``): what a method calls; every call counted.
- ``sqa.methods.registry``: the shipped methods by name; ``load_method("module:Class")``.
"""

from sqa.methods.base import Method, MethodOutput
from sqa.methods.settings import MethodSettings
from sqa.methods.toolbox import Decision, MethodCost, Tools

__all__ = ["Method", "MethodOutput", "MethodSettings", "Tools", "Decision", "MethodCost"]
