"""``sqa ask "QUESTION"``: answer one yes/no question with a preset's reader and show how
(:func:`sqa.api.ask.ask_question`, drawn by :func:`sqa.render.answers.answer_tree`); ``--json``
prints :meth:`sqa.api.ask.Asked.to_json`."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from sqa.cli import app
from sqa.cli import common as c
from sqa.cli.common import (
    AliasOpt,
    ApiOpt,
    ApplyChatTemplateOpt,
    BackendOpt,
    BaseUrlOpt,
    ChatTemplateOpt,
    PrefillOpt,
    IndexDirOpt,
    JsonOpt,
    PresetOpt,
    choose_preset,
    opt,
    print_served_notes,
)

HELP = {
    "question": 'A yes/no question, e.g. "Could a llama birth twice during the Vietnam War?"; - reads them one a line from stdin (--json: JSON Lines), loading the model once.',
    "interactive": "A prompt that loads the model once and answers question after question (Ctrl-C cancels one, Ctrl-D leaves); also `sqa ask` with no question in a terminal.",
    "model": "qwen2.5-coder-1.5b (default), qwen2.5-coder-0.5b, a .gguf file, openai:NAME (a model behind an OpenAI-compatible server, see --base-url) or a Hugging Face checkpoint name/directory (transformers).",
    "k": "Evidence paragraphs retrieved per step and for the question (top-k; default 10, a --method's own otherwise).",
    "decomposition": "The steps reader only: predicted (decompose into steps; its default) or question (no decomposition: retrieve with the question).",
    "no_retrieval": "Answer from the model alone (no evidence), the baseline that shows what retrieval adds (preset no-retrieval).",
    "reader": "facts (default: selected facts + trained answer head) or steps (preset steps).",
    "steps": "With --reader facts: also write the decomposition (shown, not used for the answer) with each step's best sentence; +12-17 s on 2 cores.",
    "head": "Answer head file (default: trained for --model).",
}


@app.command("ask")
def ask_command(
    question: Annotated[Optional[str], typer.Argument(help=HELP["question"], show_default=False)] = None,
    interactive: Annotated[bool, opt("-i", "--interactive", help=HELP["interactive"])] = False,
    model: Annotated[str, opt("--model", help=HELP["model"], show_default=True)] = "qwen2.5-coder-1.5b",
    k: Annotated[Optional[int], opt("-k", "--k", help=HELP["k"])] = None,
    decomposition: Annotated[Optional[str], opt("--decomposition", help=HELP["decomposition"])] = None,
    no_retrieval: Annotated[bool, opt("--no-retrieval", help=HELP["no_retrieval"], show_default=True)] = False,
    as_json: JsonOpt = False,
    preset: PresetOpt = None,
    reader: Annotated[Optional[str], opt("--reader", help=HELP["reader"])] = None,
    steps: Annotated[bool, opt("--steps/--no-steps", help=HELP["steps"], show_default=True)] = False,
    head: Annotated[Optional[Path], opt("--head", help=HELP["head"])] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    base_url: BaseUrlOpt = None,
    api: ApiOpt = "auto",
    allow_model_alias: AliasOpt = False,
    chat_template: ChatTemplateOpt = None,
    apply_chat_template: ApplyChatTemplateOpt = False,
    prefill: PrefillOpt = True,
    method: c.MethodOpt = None,
    prompt: c.PromptOpt = None,
    answer_rule: c.AnswerRuleOpt = None,
    samples: c.SamplesOpt = None,
    set: c.SetOpt = None,
) -> None:
    """Answer a yes/no question with a preset's reader (default facts) or a --method, and show the evidence."""
    from sqa.api.ask import check_ask
    from sqa.api.reader import Reader
    from sqa.settings import ReaderSettings
    from sqa.api.session import AskSession, session_mode
    from sqa.render.answers import asked_printer

    mode = session_mode(question, interactive, sys.stdin.isatty())
    o = dict(locals())
    chosen = None if method else choose_preset(preset, reader, False if no_retrieval else None, None, for_ask=True)
    check_ask(
        question if mode == "one" else "-", k or 10, chosen.reader if chosen else "method", decomposition, steps, head
    )
    r = Reader(settings=ReaderSettings.from_options(o, chosen))
    err = Console(stderr=True)
    session = AskSession(
        r,
        decomposition=decomposition,
        steps=steps,
        status=lambda m: err.status(m, spinner="dots"),
        note=lambda line: err.print(f"[dim]{escape(line)}[/dim]", soft_wrap=True),  # one note, one line
    )
    show = asked_printer(as_json, json_lines=mode != "one", retrieval=r.preset.retrieval)
    if mode == "prompt":
        with contextlib.suppress(ImportError):  # input() gets line editing and history where readline is
            import readline  # noqa: F401

        from sqa.cli.errors import error_line

        session.prompt(show, say=lambda line: err.print(line, markup=False, highlight=False), on_error=error_line)
    else:
        for asked in session.answer_lines(sys.stdin) if mode == "lines" else [session.ask(question)]:
            show(asked)
    if session.model is not None:
        print_served_notes(session.model, err)
