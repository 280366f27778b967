"""Options shared by every subcommand (``--index-dir``, ``--backend``) and small CLI helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sqa.paths import default_index_dir
from sqa.presets import preset_from_flags as choose_preset  # noqa: F401  (the flags' preset)

IndexDirOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--index-dir", help="Index directory (default: $SQA_HOME/index, i.e. ~/.cache/sqa/index).", show_default=False
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option("--backend", help="embedded (tantivy, a directory on disk) or elasticsearch (SQA_ES_URL)."),
]


BaseUrlOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--base-url",
        help="With --model openai:NAME: the OpenAI-compatible server (vLLM, SGLang, llama.cpp's "
        "server, Ollama), e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL, else "
        "that); give it more than once to spread requests over several servers. The key "
        "comes from $SQA_OPENAI_API_KEY or $OPENAI_API_KEY.",
        show_default=False,
    ),
]
ApiOpt = Annotated[
    str,
    typer.Option(
        "--api",
        help="With --model openai:NAME: the endpoint: chat (/v1/chat/completions, the server's "
        "chat template), completions (/v1/completions) or auto (probe the server; "
        "docs/served.md).",
        show_default=True,
    ),
]
AliasOpt = Annotated[
    bool,
    typer.Option(
        "--allow-model-alias",
        help="With --model openai:NAME: accept answers whose `model` field names "
        "another model than asked for (stopped otherwise).",
    ),
]


def served_options(base_url, api: str = "auto", allow_model_alias: bool = False):
    """``--base-url`` (repeatable), ``--api`` and ``--allow-model-alias`` as what ``load_model``'s
    ``base_url`` takes: None when none of them was given (``$OPENAI_BASE_URL`` / the default apply),
    else a ``sqa.models.served_url.ServedOptions``. Raises SqaError for an unknown ``--api``."""
    from sqa.models.served_url import ServedOptions

    opts = ServedOptions(tuple(base_url or ()), api, allow_model_alias)
    return opts if opts else None


ChatTemplateOpt = Annotated[
    Path | None,
    typer.Option(
        "--chat-template",
        help="A Jinja chat template file (or a tokenizer_config.json holding one) that "
        "renders the steps reader's chat prompts instead of the model's own (a .gguf "
        "file's tokenizer.chat_template, else ChatML); in-process models only.",
        show_default=False,
    ),
]


ApplyChatTemplateOpt = Annotated[
    bool,
    typer.Option(
        "--apply-chat-template",
        help="The facts reader reads its prompts in the model's own chat template (one user turn), as a "
        "model served over --api chat does; answered by a head fitted on that form, else zero-shot.",
    ),
]


def served_warning(model, err) -> None:
    """Print one ``warning:`` line on ``err`` (a rich Console) when a served model's yes/no
    read-outs found neither Yes nor No among the server's top logprobs (``sqa.models.openai``)."""
    stats = model.readout_stats
    if stats and stats.get("missing"):
        err.print(
            f"warning: {stats['missing']} of {stats['readouts']} yes/no read-outs had neither Yes nor No among "
            f"the server's top {model.capabilities.top_logprobs} logprobs (or no usable value) and were "
            "read as 0.5",
            markup=False,
            highlight=False,
        )
    if stats and stats.get("generation"):
        err.print(
            f"note: {stats['generation']} of {stats['readouts']} yes/no read-outs were read by generation (the "
            "server gives no logprobs): P(yes) is 1 or 0 there; docs/served.md",
            markup=False,
            highlight=False,
        )


def metrics_table(metrics: dict, title: str):
    """A rich table of the headline numbers of a ``metrics.json`` / score result."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        table.add_row(name, f"{value:.4f}" if isinstance(value, float) else str(value))
    return table


def resolve_index_dir(index_dir: Optional[Path]) -> Path:
    """``--index-dir`` with ``~`` expanded, or the default ``$SQA_HOME/index``."""
    return Path(index_dir).expanduser() if index_dir else default_index_dir()


PresetOpt = Annotated[
    Optional[str],
    typer.Option(
        "--preset",
        help="A shipped reader configuration (sqa/presets.py): facts (default), no-retrieval, "
        "oracle-facts, oracle-paragraphs, steps. --reader/--no-retrieval/--oracle map onto "
        "these.",
        show_default=False,
    ),
]
