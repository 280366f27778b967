"""sqa: retrieval-backed question answering for StrategyQA's yes/no questions, from Python or the
``sqa`` command.

The public API (docs/python.md shows each with its output):

- :class:`Index`: a BM25 paragraph index; ``Index.build(corpus="mini", path=...)``, ``Index(path)``,
  ``index.search(query, k=10)``, ``index.get(evidence_ids)``.
- :class:`Reader`: a preset's reader over an index and a model; ``reader.ask(question)`` ->
  :class:`Answer`, ``reader.ask_many(questions)``; :class:`ReaderSettings`: everything a reader
  is built from, in one typed, validated object (``sqa.Reader(settings=...)``, ``reader.settings``).
- :func:`evaluate`: a reader over a split or question file into a resumable run folder -> :class:`Run`;
  :func:`compare`: paired statistics of runs (a :class:`Comparison`); :func:`load_questions`; :func:`score` (the official metrics);
  :func:`presets`: the reader presets by name with one line each.
- Errors: every error meant for the user is an :class:`SqaError`; catch a subclass to act on one
  kind (:class:`BadInput`, :class:`RunNotFound`, :class:`IndexNotFound`, :class:`ModelNotFound`, :class:`HeadNotFound`,
  :class:`StoreMismatch`, :class:`ServerError`, :class:`ServerLost`); :class:`SqaWarning` for
  what is skipped and counted.

Stages (each its own package): ``sqa.indexing`` -> ``sqa.retriever`` -> ``sqa.models``,
``sqa.steps``, ``sqa.facts`` -> ``sqa.eval``; ``sqa.pipeline`` and ``sqa.api`` wire them. Names are
imported on first use, so ``import sqa`` loads neither the index engine nor a model runtime.
"""

from __future__ import annotations

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "Index": "sqa.api.index",
    "Reader": "sqa.api.reader",
    "Answer": "sqa.api.reader",
    "ReaderSettings": "sqa.settings",
    "Fact": "sqa.facts.sources",
    "Hit": "sqa.types",
    "Paragraph": "sqa.types",
    "Question": "sqa.types",
    "evaluate": "sqa.api.evaluate",
    "compare": "sqa.api.evaluate",
    "Comparison": "sqa.eval.compare",
    "Run": "sqa.eval.results",
    "load_questions": "sqa.api.questions",
    "presets": "sqa.presets",
    "score": "sqa.api.questions",
    "SqaError": "sqa.types",
    "BadInput": "sqa.types",
    "RunNotFound": "sqa.types",
    "IndexNotFound": "sqa.types",
    "ModelNotFound": "sqa.types",
    "HeadNotFound": "sqa.types",
    "StoreMismatch": "sqa.types",
    "ServerError": "sqa.types",
    "ServerLost": "sqa.types",
    "SqaWarning": "sqa.types",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sqa' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
