"""``sqa eval --preset facts,no-retrieval,steps ...``: a baseline matrix in one command. Each preset
runs on the same questions into a sibling folder (``OUT/PRESET``), then the runs are compared
(:mod:`sqa.eval.compare`) and the comparison written to ``OUT/compare.json`` and ``OUT/compare.html``.

Readings are shared where they can be: one model is loaded for all presets, wrapped in
:class:`sqa.models.memo.SharedReadings`, so the facts reader's plain prompt (read by ``facts`` and
``no-retrieval`` alike) is read once a question; an out-of-fold run (train questions) shares its
features store between the presets that read it. Runs resume as single runs do.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer
from rich.console import Console

from sqa.types import SqaError

COMPARE_JSON = "compare.json"
COMPARE_HTML = "compare.html"


def _names(text: str) -> list[str]:
    from sqa.presets import get_preset

    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(set(names)) != len(names):
        raise SqaError(f"--preset {text}: a preset is named twice")
    for n in names:
        get_preset(n)  # one line naming the known presets for an unknown one
    return names


def _default_out(params: dict, names: list[str]) -> Path:
    stem = Path(params["dataset"]).stem if params["dataset"] else (params["protocol"] or params["split"] or "dev")
    model = params["model"] or ""
    return (
        Path("runs")
        / "eval"
        / f"{stem}-{'+'.join(names)}-{re.sub(r'[^A-Za-z0-9._-]+', '_', Path(model).name or 'default')}"
    )


def eval_presets(params: dict) -> None:
    """Run each preset of ``params["preset"]`` (comma-separated) with the other ``sqa eval``
    options on the same questions, then print the comparison. Raises SqaError (one line) for an
    unknown or repeated preset, and for options that pick one reader (--reader, --retrieval,
    --oracle, --head, --decomposition)."""
    from sqa.render.tables import print_comparison
    from sqa.cli.eval import eval_one
    from sqa.eval.compare import compare_runs

    names = _names(params["preset"])
    for flag, key in (
        ("--reader", "reader"),
        ("--retrieval/--no-retrieval", "retrieval"),
        ("--oracle", "oracle"),
        ("--head", "head"),
        ("--decomposition", "decomposition"),
    ):
        if params[key] is not None:
            raise SqaError(
                f"{flag} picks one reader's setting; with several presets ({params['preset']}) each uses "
                "its own; run that preset alone to change it"
            )
    out = Path(params["out"]) if params["out"] else _default_out(params, names)
    from sqa.pipeline import shared_model

    lm = shared_model(
        params["model"], params.get("chat_template"), loading=lambda m: Console(stderr=True).status(f"loading {m}…")
    )
    err = Console(stderr=True)
    for i, name in enumerate(names):
        err.print(f"[bold]preset {name}[/bold] ({i + 1} of {len(names)}) -> {out / name}")
        eval_one(**{**params, "preset": name, "out": out / name}, lm=lm)
    if lm is not None and lm.read:
        err.print(f"readings: {lm.read:,} read by the model, {lm.shared:,} shared between presets")
    comparison = compare_runs([out / n for n in names])
    (out / COMPARE_JSON).write_text(json.dumps(comparison.to_dict(), indent=1) + "\n", encoding="utf-8")
    from sqa.eval.html import write_comparison_html

    write_comparison_html(out / COMPARE_HTML, comparison)
    print_comparison(comparison)
    typer.echo(f"comparison -> {out / COMPARE_JSON}, {out / COMPARE_HTML}")
