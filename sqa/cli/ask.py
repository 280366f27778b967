"""``sqa ask "QUESTION"``: answer one yes/no question with a preset's reader and show how.

Prints a rich tree: the facts shown (facts reader) or each decomposition step, its answer and its
top evidence (steps reader), then the final Yes/No with its probability and the time taken.
``--json`` prints exactly ``ReasoningResult.to_ask_json()``: {"question", "decomposition":
[{"step", "answer", "evidence": [IDs]}], "answer", "confidence", "paragraphs"}.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.tree import Tree
from rich.markup import escape

from sqa.cli import app
from sqa.cli.common import (
    AliasOpt,
    ApiOpt,
    BackendOpt,
    BaseUrlOpt,
    ApplyChatTemplateOpt,
    ChatTemplateOpt,
    IndexDirOpt,
    PresetOpt,
    choose_preset,
    resolve_index_dir,
    served_options,
    served_warning,
)
from sqa.types import MAX_K, Question, SqaError


def _snippet(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


@app.command("ask")
def ask_command(
    question: Annotated[
        str, typer.Argument(help='A yes/no question, e.g. "Could a llama birth twice during the Vietnam War?"')
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="qwen2.5-coder-1.5b (default), qwen2.5-coder-0.5b, a .gguf file, "
            "openai:NAME (a model behind an OpenAI-compatible server, see "
            "--base-url) or a Hugging Face checkpoint name/directory "
            "(transformers).",
        ),
    ] = "qwen2.5-coder-1.5b",
    k: Annotated[
        int, typer.Option("-k", "--k", help="Evidence paragraphs retrieved per step and for the question (top-k).")
    ] = 10,
    decomposition: Annotated[
        Optional[str],
        typer.Option(
            "--decomposition",
            help="The steps reader only: predicted "
            "(decompose into steps; its default) or "
            "question (no decomposition: retrieve with "
            "the question).",
            show_default=False,
        ),
    ] = None,
    no_retrieval: Annotated[
        bool,
        typer.Option(
            "--no-retrieval",
            help="Answer from the model alone (no evidence), "
            "the baseline that shows what retrieval adds "
            "(preset no-retrieval).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
    preset: PresetOpt = None,
    reader: Annotated[
        Optional[str],
        typer.Option(
            "--reader",
            help="facts (default: selected facts + trained answer head) or steps (preset steps).",
            show_default=False,
        ),
    ] = None,
    steps: Annotated[
        bool,
        typer.Option(
            "--steps/--no-steps",
            help="With --reader facts: also write the decomposition "
            "(shown, not used for the answer) with each step's best sentence; +12-17 s on 2 cores.",
        ),
    ] = False,
    head: Annotated[
        Optional[Path],
        typer.Option("--head", help="Answer head file (default: trained for --model).", show_default=False),
    ] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    base_url: BaseUrlOpt = None,
    api: ApiOpt = "auto",
    allow_model_alias: AliasOpt = False,
    chat_template: ChatTemplateOpt = None,
    apply_chat_template: ApplyChatTemplateOpt = False,
) -> None:
    """Answer a yes/no question with a preset's reader (default facts) and show the evidence."""
    from sqa.api.reader import Reader, served_details

    if not question.strip():
        raise SqaError('empty question; pass the question text, e.g. sqa ask "Is the sun a star?"')
    if not 1 <= k <= MAX_K:
        raise SqaError(f"--k must be from 1 to {MAX_K:,} (got {k})")
    if decomposition not in (None, "predicted", "question"):
        raise SqaError(f"--decomposition {decomposition!r}: use predicted or question")
    chosen = choose_preset(preset, reader, False if no_retrieval else None, None, for_ask=True)
    reject_unused_flags(chosen.reader, decomposition, steps, head)
    decomposition = decomposition or "predicted"
    base_url = served_options(base_url, api, allow_model_alias)
    err = Console(stderr=True)
    if chat_template is not None:
        from sqa.models.chat import check_template_file

        check_template_file(chat_template)  # a missing or broken file is one line before the model loads
    if chosen.reader == "facts":
        return _ask_facts(
            question,
            model,
            k,
            chosen,
            as_json,
            steps,
            head,
            resolve_index_dir(index_dir),
            backend,
            err,
            base_url,
            chat_template,
            apply_chat_template,
        )
    if apply_chat_template:
        raise SqaError(
            "--apply-chat-template goes with the facts reader; the steps reader's prompts are chat "
            "prompts already, rendered in the model's own chat template"
        )
    with err.status(f"loading {model} and the index…", spinner="dots"):
        pipe = Reader(
            chosen,
            model,
            resolve_index_dir(index_dir),
            base_url=base_url,
            k=k,
            chat_template=chat_template,
            backend=backend,
        ).pipeline
    with err.status("reasoning…", spinner="dots"):
        result = pipe.reader.answer_batch([Question(qid="", question=question)], decomposition=decomposition)[0]
    served_warning(pipe.model, err)
    result.qid = None
    if as_json:
        typer.echo(_json_text({**result.to_ask_json(), **served_details(pipe.model)}, model))
        return
    ids = [s.evidence[0] for s in result.steps if s.evidence] + result.paragraphs[:1]
    paras = {}
    if pipe.backend is not None and ids:
        paras = {p.evidence_id: p for p in pipe.backend.get(list(dict.fromkeys(ids)))}
    tree = Tree(f"[bold]{escape(result.question)}[/bold]")
    for s in result.steps:
        node = tree.add(
            f"[cyan]{s.index}.[/cyan] {escape(s.question)} → [bold green]{escape(s.answer or '?')}[/bold green]"
            + (" [dim](computed)[/dim]" if s.computed else "")
        )
        if s.evidence:
            p = paras.get(s.evidence[0])
            title = escape(p.title) if p else ""
            node.add(
                f"[dim]{escape(s.evidence[0])}[/dim]  [bold]{title}[/bold]: " + (escape(_snippet(p.text)) if p else "")
            )
    if not result.steps and result.paragraphs:
        p = paras.get(result.paragraphs[0])
        tree.add(
            f"[dim]{escape(result.paragraphs[0])}[/dim]  "
            + (f"[bold]{escape(p.title)}[/bold]: {escape(_snippet(p.text))}" if p else "")
        )
    verdict = "Yes" if result.answer else "No"
    color = "green" if result.answer else "red"
    # the P(yes) readings averaged in log-odds (sqa.steps.reader.DECISION)
    readings = (
        "  [dim](the model's own, uncalibrated: "
        + ", ".join(f"{name} {p:.2f}" for name, p in result.signals.items())
        + ")[/dim]"
    )
    tree.add(
        f"[bold {color}]{verdict}[/bold {color}]  P(yes)={result.p_yes:.2f}{readings}  confidence={result.confidence:.2f}  "
        f"[dim]({result.timings.get('total', 0.0):.1f} s, {escape(result.model)})[/dim]"
    )
    Console().print(tree)


def reject_unused_flags(reader: str, decomposition: Optional[str], steps: bool, head: Optional[Path]) -> None:
    """Raise SqaError (one line) for a flag the chosen reader would ignore: ``--decomposition`` with
    the facts reader (it reads no decomposition), ``--steps`` or ``--head`` with the steps reader (it
    always decomposes and has no answer head)."""
    if reader == "facts" and decomposition is not None:
        raise SqaError(
            "--decomposition goes with the steps reader (--reader steps); the facts reader reads no "
            "decomposition (--steps shows one next to its answer)"
        )
    if reader == "steps" and steps:
        raise SqaError("--steps goes with the facts reader; the steps reader always decomposes")
    if reader == "steps" and head is not None:
        raise SqaError("--head goes with the facts reader; the steps reader has no answer head")


def _json_text(obj: dict, model: str) -> str:
    """``obj`` as JSON text that any parser reads: a NaN or infinity (which ``json.dumps`` would
    print as the invalid ``NaN``) raises SqaError naming the model instead."""
    try:
        return json.dumps(obj, ensure_ascii=False, indent=1, allow_nan=False)
    except ValueError:
        raise SqaError(
            f"model {model}: the answer holds a value that is not a number (NaN/inf), so no JSON is printed; "
            "the model file is likely damaged (a built-in model is re-checked and re-assembled on the next "
            "run; delete a .gguf of your own and download it again)"
        ) from None


def _ask_facts(
    question: str,
    model: str,
    k: int,
    preset,
    as_json: bool,
    steps: bool,
    head,
    index_dir,
    backend: str,
    err: Console,
    base_url: str | None = None,
    chat_template: Path | None = None,
    apply_chat_template: bool = False,
) -> None:
    """``sqa ask`` with the facts reader: facts (with their sources) and the head's answer (or,
    for a model without a head, its own uncalibrated P(yes), said so); with ``--steps`` the decomposer's steps too (for the reader of the output; the answer does not use them)."""
    import time

    from sqa.api.reader import Reader, served_details, steps_for_display

    no_retrieval = not preset.retrieval
    r = Reader(
        preset,
        model,
        index_dir,
        base_url=base_url,
        k=k,
        head=head,
        chat_template=chat_template,
        apply_chat_template=apply_chat_template,
        backend=backend,
    )
    h = r.preflight()
    with err.status(f"loading {model} and the index…", spinner="dots"):
        reader = r.pipeline.reader
    t = time.perf_counter()
    with err.status("reading…", spinner="dots"):
        result = reader.answer_batch([Question(qid="", question=question)], decomposition="question")[0]
    step_facts: list[list] = []
    demos_by = ""
    if steps and not result.steps:  # a head that reads step facts has written them already
        t_steps = time.perf_counter()
        step_facts, demos_by = steps_for_display(
            reader,
            question,
            result,
            k,
            status=lambda m: err.status(m, spinner="dots"),
            note=lambda line: err.print(f"[dim]{escape(line)}[/dim]"),
        )
        result.timings["steps"] = round(time.perf_counter() - t_steps, 3)
    served_warning(reader.model, err)
    result.timings["total"] = round(time.perf_counter() - t, 3)
    result.qid = None
    if as_json:
        obj = {**result.to_ask_json(), **served_details(reader.model)}
        if result.head:  # which head answered and how many questions it saw (issue 41 item 1)
            from sqa.facts.heads import fitted_count

            obj["head_fitted_on"] = fitted_count(h)
        for d, facts in zip(obj["decomposition"], step_facts):
            d["facts"] = [f.to_dict() for f in facts]
        typer.echo(_json_text(obj, model))
        return
    tree = Tree(f"[bold]{escape(result.question)}[/bold]")
    if result.steps:
        why = (
            (
                f"decomposition and each step's best sentence, shown only: the answer reads the facts below; "
                f"demonstrations picked by {demos_by}"
            )
            if demos_by
            else "decomposition; each step's best sentence is among the facts below, which the answer reads"
        )
        node = tree.add(f"[cyan]steps[/cyan] [dim]({why})[/dim]")
        for s, facts in zip(result.steps, step_facts or [[]] * len(result.steps)):
            sn = node.add(f"[cyan]{s.index}.[/cyan] {escape(s.question)}")
            for f in facts:
                sn.add(f"{escape(f.text)}  [dim]({escape(f.source)} {escape(f.ref)})[/dim]")
    if result.facts:
        node = tree.add("[cyan]facts[/cyan]")
        for f in result.facts:
            src = f"{f['source']} {f['ref']}"
            node.add(f"{escape(f['text'])}  [dim]({escape(src)})[/dim]")
    elif not no_retrieval:
        tree.add("[dim]no facts found[/dim]")
    verdict = "Yes" if result.answer else "No"
    color = "green" if result.answer else "red"
    own = ", ".join(f"{n} {p:.2f}" for n, p in result.signals.items())
    from sqa.facts.heads import fitted_count

    by = (
        f"answer head {Path(result.head).name}, fitted on {fitted_count(h):,} questions"
        if result.head
        else "answer head"
    )
    how = (
        f"{by}; the model's own P(yes): {own}"
        if result.calibrated
        else f"the model's own, uncalibrated: no answer head for {model}; `{fit_command(model, base_url)}` fits one"
    )
    tree.add(
        f"[bold {color}]{verdict}[/bold {color}]  P(yes)={result.p_yes:.2f} [dim]({escape(how)})[/dim]  "
        f"confidence={result.confidence:.2f}  "
        f"[dim]({result.timings.get('total', 0.0):.1f} s, {escape(result.model)})[/dim]"
    )
    Console().print(tree)


def fit_command(model: str, served=None) -> str:
    """The command that fits ``model``'s answer heads, with a served model's ``--base-url`` (each,
    without credentials) and ``--api`` when given (``served``: ``sqa.cli.common.served_options``'
    ``ServedOptions``, a URL, or None)."""
    from sqa.facts.reader import train_command
    from sqa.models.served_url import ServedOptions
    from sqa.redact import redact_url

    urls, api = (
        (served.base_urls, served.api) if isinstance(served, ServedOptions) else ((served,) if served else (), "auto")
    )
    return (
        train_command(model)
        + "".join(f" --base-url {redact_url(u)}" for u in urls)
        + (f" --api {api}" if api != "auto" else "")
    )
