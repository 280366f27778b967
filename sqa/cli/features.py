"""``sqa features import FILE... [--meta META] [--model M] [--index-dir DIR]``: seed the features
store of ``sqa eval --split train`` with features read before (``.jsonl`` or ``.jsonl.xz``, e.g.
the dumps listed in bench/results/features.md), checked against their ``meta.json``
(:func:`sqa.api.features.import_features`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt

features_app = typer.Typer(
    help="The facts reader's features store ($SQA_HOME/features): import features read before.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(features_app, name="features")


@features_app.command("import")
def features_import_command(
    files: Annotated[
        List[Path], typer.Argument(help="Features files (.jsonl or .jsonl.xz), one QuestionFeatures record a line.")
    ],
    meta: Annotated[
        Optional[Path],
        typer.Option("--meta", help="Their meta.json (default: meta.json beside the first file).", show_default=False),
    ] = None,
    model: Annotated[
        str, typer.Option("--model", help="The reader model they were read with (its name, as for `sqa eval --model`).")
    ] = "qwen2.5-coder-1.5b",
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Seed the features store of `sqa eval --split train` with features read before (checked against their meta.json)."""
    from sqa.api.features import import_features

    r = import_features(files, meta, model, index_dir, backend)
    typer.echo(f"imported {r.added:,} questions' features ({r.skipped:,} already there) -> {r.store}")
