"""Several presets on the same questions (``sqa eval --preset facts,no-retrieval,steps``): each
runs into a sibling folder ``OUT/PRESET`` (:func:`sqa.evaluate`, one model shared between them:
``sqa.pipeline.shared_model``), then the runs are compared (:mod:`sqa.eval.compare`) into
``OUT/compare.json`` and ``OUT/compare.html``. Runs resume as single runs do."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sqa.types import SqaError
from sqa.outfile import write_text_atomic

COMPARE_JSON = "compare.json"
COMPARE_HTML = "compare.html"
# options that pick one reader's setting (flag, option name): refused with several presets
ONE_READER = (
    ("--reader", "reader"),
    ("--retrieval/--no-retrieval", "retrieval"),
    ("--oracle", "oracle"),
    ("--head", "head"),
    ("--decomposition", "decomposition"),
)


def preset_names(text: str, options: dict | None = None) -> list[str]:
    """The preset names of ``text`` ("facts,no-retrieval,steps"). Raises SqaError (one line) for an
    unknown or repeated preset, and when ``options`` (``sqa eval``'s, by name) set one of
    :data:`ONE_READER`: each preset uses its own."""
    from sqa.presets import get_preset

    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(set(names)) != len(names):
        raise SqaError(f"--preset {text}: a preset is named twice")
    for n in names:
        get_preset(n)  # one line naming the known presets for an unknown one
    for flag, key in ONE_READER:
        if (options or {}).get(key) is not None:
            raise SqaError(
                f"{flag} picks one reader's setting; with several presets ({text}) each uses "
                "its own; run that preset alone to change it"
            )
    return names


def matrix_out(names: list[str], split: str | None, protocol: str | None, dataset, model: str | None) -> Path:
    """The default folder of a preset matrix: ``runs/eval/<questions>-<preset+preset>-<model>``."""
    stem = Path(dataset).stem if dataset else (protocol or split or "dev")
    model_name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model or "").name or "default")
    return Path("runs") / "eval" / f"{stem}-{'+'.join(names)}-{model_name}"


def compare_matrix(out: Path, names: list[str]):
    """Compare the runs ``out/NAME`` of ``names`` and write ``out/compare.json`` and
    ``out/compare.html``; returns the ``sqa.eval.compare.Comparison``. Raises SqaError (one line)
    for runs that share no labelled question."""
    from sqa.eval.compare import compare_runs
    from sqa.eval.html import write_comparison_html

    comparison = compare_runs([out / n for n in names])
    write_text_atomic(out / COMPARE_JSON, json.dumps(comparison.to_dict(), indent=1) + "\n")  # sqa.outfile
    write_comparison_html(out / COMPARE_HTML, comparison)
    return comparison
