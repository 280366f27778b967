"""``sqa heads list`` and ``sqa heads rm NAME``: the answer heads of ``$SQA_HOME/heads`` and the
package (:mod:`sqa.facts.heads`; issue 41 item 1)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sqa.cli import app

heads_app = typer.Typer(
    help="The answer heads: list them, remove one of yours ($SQA_HOME/heads).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(heads_app, name="heads")


@heads_app.command("list")
def heads_list_command(
    model: Annotated[str | None, typer.Option("--model", help="Only this model's heads.", show_default=False)] = None,
) -> None:
    """List the answer heads (yours, then the shipped ones): questions fitted on, and which one answers."""
    from sqa.facts.heads import choose_head, list_heads
    from sqa.facts.reader import head_form
    from sqa.models.registry import model_stem
    from sqa.types import SqaError

    stem = model_stem(model) if model else None
    entries = list_heads(stem)
    if not entries:
        typer.echo(f"no answer heads{f' for {model}' if model else ''}")
        return
    answering = set()
    for e in entries:
        if e.head is not None:
            try:
                answering.add(
                    choose_head(
                        model_stem(e.head.model),
                        e.head.provenance.get("kind") or e.name[len(model_stem(e.head.model)) + 1 :].split(".")[0],
                        "",
                        head_form(e.head),  # the head of each prompt form that answers
                    ).path
                )
            except SqaError:
                pass
    t = Table("name", "where", "model", "questions", "answers", title="answer heads")
    for e in entries:
        if e.head is None:
            t.add_row(e.name, "package" if e.shipped else "yours", "?", "?", f"damaged: {e.problem[:60]}")
            continue
        t.add_row(
            e.name, "package" if e.shipped else "yours", e.head.model, f"{e.n:,}", "yes" if e.path in answering else ""
        )
    Console(width=200).print(t)


@heads_app.command("rm")
def heads_rm_command(
    name: Annotated[str, typer.Argument(help="The head's file name, as `sqa heads list` shows it.")],
) -> None:
    """Remove one of your answer heads (a shipped head is never removed)."""
    from sqa.facts.heads import remove_head

    typer.echo(f"removed {remove_head(name)}")
