"""The shipped reader configurations, by name: experiments as data, not code paths.

Each preset reproduces one row of the README's results table (as the official StrategyQA code
keeps one config file per reported row): ``sqa eval --preset NAME`` runs it, and the recorded run
named in ``run`` is what it reproduced (``bench/results/runs/``). The older flags map onto them
(:func:`preset_for`): ``--no-retrieval`` is ``no-retrieval``, ``--oracle facts`` is
``oracle-facts``, ``--reader steps`` is ``steps``.

Add a preset: a new :class:`Preset` in ``PRESETS`` (and a recorded run + README row for it).
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

from sqa.types import BadInput


@dataclass(frozen=True)
class Preset:
    """One reader configuration.

    - ``reader``: ``facts`` (selected facts + trained answer head) or ``steps`` (decompose, read
      evidence per step; final answer fixed: ``sqa.steps.reader.DECISION``).
    - ``retrieval``: whether the reader sees retrieved evidence (False: the same model and prompts
      without it, and for ``facts`` the no-retrieval head).
    - ``oracle``: ``facts`` / ``paragraphs``: the question's annotations are shown (a diagnostic upper
      bound; refused on the unlabelled test split).
    - ``decomposition``: what the reader's steps are (``question`` for the facts reader).
    - ``run``: the recorded run of its README row; ``summary``: one line for ``--help`` and docs.
    - ``method``: for reader ``method``, the method (``sqa.methods``) it runs (``sqa.methods.registry.method_preset``).
    """

    name: str
    reader: str
    retrieval: bool = True
    oracle: str | None = None
    decomposition: str = "question"
    run: str = ""
    summary: str = ""
    ask: bool = True  # meaningful for `sqa ask` (the oracles need a labelled question)
    method: str = ""  # reader "method": the method's registry name or module:Class (sqa.methods)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "facts",
            "facts",
            run="bench/results/runs/dev229-facts-h2055",
            summary="default: top-10 BM25 paragraphs -> a few facts -> facts reader -> trained answer head",
        ),
        Preset(
            "no-retrieval",
            "facts",
            retrieval=False,
            run="bench/results/runs/dev229-plain-h2055",
            summary="the same model without evidence, its own no-retrieval head (what retrieval adds)",
        ),
        Preset(
            "oracle-facts",
            "facts",
            oracle="facts",
            run="bench/results/runs/dev229-oracle-facts-h2055",
            ask=False,
            summary="ORACLE: the question's annotated facts shown, same head (upper bound, never a default)",
        ),
        Preset(
            "oracle-paragraphs",
            "facts",
            oracle="paragraphs",
            run="bench/results/runs/dev229-oracle-paragraphs-h2055",
            ask=False,
            summary="ORACLE: the best sentences of its annotated evidence paragraphs, same head",
        ),
        Preset(
            "steps",
            "steps",
            decomposition="predicted",
            run="bench/results/runs/dev229",
            summary="the older pipeline: decompose, retrieve and read per step, transcript+direct+plain readings",
        ),
    )
}
DEFAULT_PRESET = "facts"


def presets() -> dict[str, str]:
    """The shipped presets, name -> one-line summary, in the order ``sqa eval --help`` lists them
    (``Reader(preset=name)``, ``sqa eval --preset name``). Raises nothing."""
    return {p.name: p.summary for p in PRESETS.values()}


def get_preset(name: str, for_ask: bool = False) -> Preset:
    """The preset called ``name``. Raises SqaError naming the known ones (and, ``for_ask``, for an
    oracle preset, which needs a question's annotations)."""
    p = PRESETS.get(name)
    if p is None:
        raise BadInput(f"unknown preset {name!r}; use one of {', '.join(PRESETS)}")
    if for_ask and not p.ask:
        raise BadInput(
            f"--preset {name} shows a question's annotations, which `sqa ask` does not have; use it with "
            "`sqa eval` on a labelled split"
        )
    return p


def preset_for(reader: str, retrieval: bool, oracle: str | None) -> str | None:
    """The preset the older flags (``--reader``, ``--retrieval/--no-retrieval``, ``--oracle``)
    describe, or None when no preset matches (e.g. ``--reader steps --no-retrieval``)."""
    for p in PRESETS.values():
        if (p.reader, p.retrieval, p.oracle) == (reader, retrieval, oracle):
            return p.name
    return None


def preset_from_flags(
    preset: str | None, reader: str | None, retrieval: bool | None, oracle: str | None, for_ask: bool = False
) -> Preset:
    """The ``sqa.presets.Preset`` for ``--preset`` or for the older flags (``--reader``,
    ``--retrieval/--no-retrieval``, ``--oracle``; None = not given). A flag combination no named
    preset has (e.g. ``--reader steps --no-retrieval``) gives an unnamed preset of those values.
    Raises BadInput when ``--preset`` and a flag disagree, or for an unknown name."""
    from dataclasses import replace

    if preset is not None:
        p = get_preset(preset, for_ask=for_ask)
        given = {
            "--reader": (reader, p.reader),
            "--retrieval/--no-retrieval": (retrieval, p.retrieval),
            "--oracle": (oracle, p.oracle),
        }
        clash = [f"{flag} {mine!r}" for flag, (mine, its) in given.items() if mine is not None and mine != its]
        if clash:
            raise BadInput(
                f"--preset {preset} and {', '.join(clash)} disagree; give the preset alone, or the flags "
                "without --preset"
            )
        return p
    base = get_preset(DEFAULT_PRESET if (reader or "facts") == "facts" else "steps")
    reader = reader or base.reader
    retrieval = base.retrieval if retrieval is None else retrieval
    name = preset_for(reader, retrieval, oracle)
    if name is not None:
        return get_preset(name, for_ask=for_ask)
    if reader not in ("facts", "steps"):
        raise BadInput(f"--reader {reader!r}: use facts or steps")
    if oracle is not None and reader != "facts":
        raise BadInput("--oracle goes with --reader facts")
    if oracle is not None and retrieval is False:
        raise BadInput(
            f"--oracle {oracle} and --no-retrieval disagree: the oracle's annotations are read by the "
            "facts head, which --no-retrieval replaces by the no-retrieval head; give one of them"
        )
    return replace(base, name="", reader=reader, retrieval=retrieval, oracle=oracle, run="", summary="")


class _CallableModule(types.ModuleType):
    """``sqa.presets`` is both this module and the function :func:`presets`: importing the
    submodule (as the readers do) sets the package attribute ``sqa.presets`` to the module, so the
    module answers a call as the function does."""

    def __call__(self) -> dict[str, str]:
        return presets()


sys.modules[__name__].__class__ = _CallableModule
