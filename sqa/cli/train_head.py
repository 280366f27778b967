"""``sqa train-head`` (retired, hidden from ``--help``): ``sqa eval --split train --model M`` reads
the features once, answers every train question out-of-fold and writes M's answer heads to
``$SQA_HOME/heads`` as a by-product. The old command name answers with that one line and exit
code 2."""

from __future__ import annotations

import typer

from sqa.cli import app
from sqa.types import SqaError

RETIRED = (
    "`sqa train-head` is retired: `sqa eval --split train --model M` answers the train questions out-of-fold "
    "and writes M's answer heads to $SQA_HOME/heads"
)


@app.command(
    "train-head",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    add_help_option=False,
    hidden=True,
)
def train_head_command(ctx: typer.Context) -> None:
    """Retired: use `sqa eval --split train --model M` (it writes the answer heads)."""
    raise SqaError(RETIRED)
