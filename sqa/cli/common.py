"""Options shared by every subcommand (``--index-dir``, ``--backend``) and small CLI helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sqa.paths import default_index_dir

IndexDirOpt = Annotated[
    Optional[Path],
    typer.Option("--index-dir", help="Index directory (default: $SQA_HOME/index, i.e. ~/.cache/sqa/index).",
                 show_default=False),
]
BackendOpt = Annotated[
    str,
    typer.Option("--backend", help="embedded (tantivy, a directory on disk) or elasticsearch (SQA_ES_URL)."),
]


def resolve_index_dir(index_dir: Optional[Path]) -> Path:
    return Path(index_dir).expanduser() if index_dir else default_index_dir()


DecisionOpt = Annotated[
    str,
    typer.Option("--decision", help="Which P(yes) readings make the final answer, '+'-joined and averaged in "
                                    "log-odds: transcript (after steps, evidence and step answers), compact (steps "
                                    "and answers, no evidence), direct (right after the question), plain (question-only "
                                    "demonstrations)."),
]
SignalsOpt = Annotated[
    Optional[str],
    typer.Option("--signals", help="Extra P(yes) readings to record in the traces (comma-separated signal names), "
                                   "for analysis; they do not change the answer.", show_default=False),
]


def split_signals(text: Optional[str]) -> list[str]:
    """"compact, direct" -> ["compact", "direct"]; None or "" -> []."""
    return [x.strip() for x in (text or "").replace("+", ",").split(",") if x.strip()]
