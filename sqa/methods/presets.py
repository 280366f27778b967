"""``facts`` and ``steps`` as methods: each is its preset's reader (``sqa.presets``), built by
``sqa.pipeline.build_reader`` exactly as ``--preset facts`` / ``--preset steps`` build it, so
their behaviour and recorded runs are unchanged."""

from __future__ import annotations

from sqa.methods.base import Method


class Facts(Method):
    """The facts reader: top-10 BM25 paragraphs -> a few facts -> facts reader -> trained answer head."""

    name = "facts"
    source = "sqa's own reader (docs/architecture.md)"
    needs = ("p_yes", "search")
    preset = "facts"


class Steps(Method):
    """The steps reader: decompose, retrieve and read per step, then the final yes/no."""

    name = "steps"
    source = "the design card's pipeline (docs/architecture.md)"
    needs = ("generate", "p_yes", "search")
    preset = "steps"
