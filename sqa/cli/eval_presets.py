"""``sqa eval --preset facts,no-retrieval,steps ...``: a baseline matrix in one command
(:mod:`sqa.api.matrix`): each preset on the same questions into ``OUT/PRESET`` with one shared
model (the facts reader's plain prompt, read by ``facts`` and ``no-retrieval`` alike, is read once
a question), then the runs compared into ``OUT/compare.json`` and ``OUT/compare.html``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console


def method_list(text: str, options: dict) -> list[str]:
    """The method names of ``text`` (comma-separated), each loadable and named once; BadInput
    otherwise, or with ``--preset`` given too."""
    from sqa.methods.registry import load_method
    from sqa.types import BadInput

    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(set(names)) != len(names) or options.get("preset"):
        raise BadInput(f"--method {text}: name each method once, without --preset")
    for n in names:
        load_method(n)
    return names


def eval_presets(params: dict) -> None:
    """Run each preset of ``params["preset"]`` or method of ``params["method"]`` (comma-separated) with the other ``sqa eval``
    options, then print the comparison. Raises SqaError (``sqa.api.matrix.preset_names``)."""
    from sqa.api.matrix import COMPARE_HTML, COMPARE_JSON, compare_matrix, matrix_out, preset_names
    from sqa.cli.eval import eval_one
    from sqa.pipeline import shared_model
    from sqa.render.tables import print_comparison

    p = params
    key = "method" if p.get("method") and "," in p["method"] else "preset"
    names = preset_names(p[key], p) if key == "preset" else method_list(p["method"], p)
    out = Path(p["out"]) if p["out"] else matrix_out(names, p["split"], p["protocol"], p["dataset"], p["model"])
    err = Console(stderr=True)
    lm = shared_model(p["model"], p.get("chat_template"), loading=lambda m: err.status(f"loading {m}…"))
    for i, name in enumerate(names):
        err.print(f"[bold]{key} {name}[/bold] ({i + 1} of {len(names)}) -> {out / name}")
        eval_one({**p, key: name, "out": out / name}, lm=lm)
    if lm is not None and lm.read:
        err.print(f"readings: {lm.read:,} read by the model, {lm.shared:,} shared between presets")
    print_comparison(compare_matrix(out, names))
    typer.echo(f"comparison -> {out / COMPARE_JSON}, {out / COMPARE_HTML}")
