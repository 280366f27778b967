"""``sqa heads list`` and ``sqa heads rm NAME``: the answer heads of ``$SQA_HOME/heads`` and the
package (:mod:`sqa.facts.heads`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from sqa.cli import app
from sqa.cli.common import opt

heads_app = typer.Typer(
    help="The answer heads: list them, remove one of yours ($SQA_HOME/heads).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(heads_app, name="heads")


@heads_app.command("list")
def heads_list_command(model: Annotated[str | None, opt("--model", help="Only this model's heads.")] = None) -> None:
    """List the answer heads (yours, then the shipped ones): questions fitted on, and which one answers."""
    from sqa.facts.heads import list_heads
    from sqa.models.registry import model_stem
    from sqa.render.tables import heads_table

    entries = list_heads(model_stem(model) if model else None)
    if not entries:
        typer.echo(f"no answer heads{f' for {model}' if model else ''}")
    else:
        Console(width=200).print(heads_table(entries))


@heads_app.command("rm")
def heads_rm_command(name: Annotated[str, typer.Argument(help="The head's file name, as `sqa heads list` shows it.")]):
    """Remove one of your answer heads (a shipped head is never removed)."""
    from sqa.facts.heads import remove_head

    typer.echo(f"removed {remove_head(name)}")
