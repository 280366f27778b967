"""Options shared by the subcommands (one definition each; help texts in ``HELP``) and small helpers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from sqa.methods.registry import METHODS
from sqa.paths import default_index_dir
from sqa.presets import preset_from_flags as choose_preset  # noqa: F401  (the flags' preset)

HELP = {
    "index_dir": "Index folder (default: $SQA_HOME/index, i.e. ~/.cache/sqa/index).",
    "backend": "embedded (default) or elasticsearch. embedded: tantivy, a folder on disk; elasticsearch: at $SQA_ES_URL.",
    "base_url": "The server(s) of --model openai:NAME. An OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, Ollama), e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL, else that); give it more than once to spread requests over several servers. The key comes from $SQA_OPENAI_API_KEY or $OPENAI_API_KEY.",
    "api": "chat, completions or auto (default). The endpoint of --model openai:NAME: chat (/v1/chat/completions, the server's chat template), completions (/v1/completions) or auto (probe the server; docs/served.md).",
    "alias": "Accept answers under another model's name. With --model openai:NAME, answers whose `model` field names another model than asked for are stopped otherwise.",
    "chat_template": "A Jinja chat template file for chat prompts. The file (or a tokenizer_config.json holding one) renders the steps reader's chat prompts instead of the model's own (a .gguf file's tokenizer.chat_template, else ChatML); for a served model, its prompts over /v1/completions.",
    "apply_chat_template": "The facts reader reads in the chat template. The model's own template (one user turn), as a model served over --api chat does; answered by a head fitted on that form, else zero-shot.",
    "prefill": "Steps reader: continue the assistant turn (default) or not. --prefill continues the transcript in the open assistant message, where the model can; --no-prefill reads it in turns, each answer a new message asked for by a user turn, as it reads a chat server that cannot continue a message (llama-cpp-python's); to compare in-process with such a server.",
    "method": "A method instead of a preset (docs/methods.md). One of: "
    + ", ".join(METHODS)
    + ", or module:Class for your own; eval takes several, comma-separated, compared on the same questions.",
    "prompt": "The method's prompt variant. With --method (docs/methods.md; the first listed there is the default).",
    "answer_rule": "answer-is, answer-is-else-no or forced. With --method: answer-is takes the first yes/no after 'the answer is', answer-is-else-no is DRAGIN's, forced reads P(yes) after 'So the answer is'.",
    "samples": "Self-consistency samples (default 5). With --method: the sampled chains of thought.",
    "set": "Another method setting, KEY=VALUE. With --method: temperature, iterations (T), theta, max_steps, max_tokens or seed; repeatable.",
    "preset": "facts (default), no-retrieval, oracle-*, steps. A shipped reader configuration (sqa/presets.py); oracle-* is oracle-facts or oracle-paragraphs. --reader/--no-retrieval/--oracle map onto these.",
}


PANELS = "Reader and method: --preset --method --prompt --answer-rule --samples --set --model -k --head --answering --decomposition; Served models: --base-url --api --allow-model-alias; Advanced: --backend --batch-size --folds --strict --replace-heads --features-cache --chat-template --apply-chat-template --prefill/--no-prefill --dataset"
PANEL_OF = {n: p.split(":")[0].strip() for p in PANELS.split(";") for n in p.split(":")[1].split()}


def opt(*names: str, key: str | None = None, **kw):
    """``typer.Option(*names)`` whose --help shows the first sentence of ``HELP[key]`` (or ``help=``; the
    whole text: ``FULL_HELP``, docs/cli.md), no default shown unless asked,
    in its help panel (``PANELS``, else Basics); the retired --reader/--oracle/--retrieval are hidden, still accepted."""
    kw.setdefault("show_default", False)
    kw.setdefault("rich_help_panel", PANEL_OF.get(names[0], "Basics"))
    kw.setdefault("hidden", names[0] in ("--reader", "--oracle", "--retrieval/--no-retrieval"))
    full = kw.pop("help", None) or HELP[key]
    FULL_HELP[names[0], short := re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=\.)\s", full, maxsplit=1)[0]] = full
    return typer.Option(*names, help=short, **kw)


FULL_HELP: dict[tuple[str, str], str] = {}  # (option, the first sentence --help shows) -> the whole text (docs/cli.md)


IndexDirOpt = Annotated[Optional[Path], opt("--index-dir", key="index_dir")]
BackendOpt = Annotated[str, opt("--backend", key="backend")]
BaseUrlOpt = Annotated[Optional[list[str]], opt("--base-url", key="base_url")]
ApiOpt = Annotated[str, opt("--api", key="api")]
AliasOpt = Annotated[bool, opt("--allow-model-alias", key="alias", show_default=True)]
ChatTemplateOpt = Annotated[Optional[Path], opt("--chat-template", key="chat_template")]
ApplyChatTemplateOpt = Annotated[bool, opt("--apply-chat-template", key="apply_chat_template", show_default=True)]
PrefillOpt = Annotated[bool, opt("--prefill/--no-prefill", key="prefill")]
PresetOpt = Annotated[Optional[str], opt("--preset", key="preset")]
MethodOpt = Annotated[Optional[str], opt("--method", key="method")]
PromptOpt = Annotated[Optional[str], opt("--prompt", key="prompt")]
AnswerRuleOpt = Annotated[Optional[str], opt("--answer-rule", key="answer_rule")]
SamplesOpt = Annotated[Optional[int], opt("--samples", key="samples")]
SetOpt = Annotated[Optional[list[str]], opt("--set", key="set")]
JsonOpt = Annotated[bool, opt("--json", help="Print the result as one JSON object.", show_default=True)]


def print_served_notes(model, err: Console) -> None:
    """Each of ``sqa.render.tables.served_notes(model)`` as one line on ``err``."""
    from sqa.render.tables import served_notes

    for line in served_notes(model):
        err.print(line, markup=False, highlight=False)


def resolve_index_dir(index_dir: Optional[Path]) -> Path:
    """``--index-dir`` with ``~`` expanded, or the default ``$SQA_HOME/index``."""
    return Path(index_dir).expanduser() if index_dir else default_index_dir()
