"""``sqa eval``: a preset (``sqa.presets``) over a StrategyQA split into a resumable run folder
(:func:`sqa.evaluate`, drawn by :mod:`sqa.render`); ``sqa eval score`` for any leaderboard
predictions file; ``sqa eval retrieval`` (:mod:`sqa.cli.eval_retrieval`). The same command again
resumes; Ctrl-C saves what is done and exits with code 130."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

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
    PresetOpt,
    choose_preset,
    opt,
)
from sqa.cli.eval_retrieval import eval_retrieval_command
from sqa.render.help import EVAL_HELP as HELP
from sqa.types import SqaError

eval_app = typer.Typer(
    help="Evaluate the pipeline on a StrategyQA split (resumable); `score` a predictions file; `retrieval` metrics.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(eval_app, name="eval")

Str, P = Optional[str], Optional[Path]
# the options sqa.evaluate takes as they are
RUN_OPTIONS = ("out", "limit", "protocol", "batch_size", "folds", "decomposition", "features_cache", "strict")
RUN_OPTIONS += ("replace_heads", "answering")


@eval_app.callback(invoke_without_command=True)
def eval_command(
    ctx: typer.Context,
    split: Annotated[Str, opt("--split", help=HELP["split"])] = None,
    protocol: Annotated[Str, opt("--protocol", help=HELP["protocol"])] = None,
    limit: Annotated[Optional[int], opt("--limit", help=HELP["limit"])] = None,
    out: Annotated[P, opt("--out", help=HELP["out"])] = None,
    decomposition: Annotated[Str, opt("--decomposition", help=HELP["decomposition"])] = None,
    preset: PresetOpt = None,
    reader: Annotated[Str, opt("--reader", help=HELP["reader"])] = None,
    oracle: Annotated[Str, opt("--oracle", help=HELP["oracle"])] = None,
    head: Annotated[P, opt("--head", help=HELP["head"])] = None,
    dataset: Annotated[P, opt("--dataset", help=HELP["dataset"])] = None,
    features_cache: Annotated[P, opt("--features-cache", help=HELP["features_cache"])] = None,
    model: Annotated[Str, opt("--model", help=HELP["model"])] = None,
    k: Annotated[Optional[int], opt("-k", "--k", help=HELP["k"])] = None,
    batch_size: Annotated[int, opt("--batch-size", help=HELP["batch_size"])] = 32,
    folds: Annotated[int, opt("--folds", help=HELP["folds"])] = 5,
    retrieval: Annotated[Optional[bool], opt("--retrieval/--no-retrieval", help=HELP["retrieval"])] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    strict: Annotated[bool, opt("--strict", help=HELP["strict"])] = False,
    base_url: BaseUrlOpt = None,
    api: ApiOpt = "auto",
    allow_model_alias: AliasOpt = False,
    replace_heads: Annotated[bool, opt("--replace-heads", help=HELP["replace_heads"])] = False,
    chat_template: ChatTemplateOpt = None,
    apply_chat_template: ApplyChatTemplateOpt = False,
    prefill: PrefillOpt = True,
    answering: Annotated[str, opt("--answering", help=HELP["answering"])] = "auto",
    method: c.MethodOpt = None,
    prompt: c.PromptOpt = None,
    answer_rule: c.AnswerRuleOpt = None,
    samples: c.SamplesOpt = None,
    set: c.SetOpt = None,
) -> None:
    """Run a preset (default facts: retrieve, select facts, read, trained answer head) over a split into --out;
    several (--preset facts,no-retrieval,steps) run on the same questions into sibling folders and are compared."""
    params = {name: value for name, value in locals().items() if name != "ctx"}  # every option, for eval_one
    if ctx.invoked_subcommand is not None:
        return
    if (preset and "," in preset) or (method and "," in method):
        from sqa.cli.eval_presets import eval_presets

        return eval_presets(params)
    eval_one(params)


def eval_one(params: dict, lm=None) -> None:
    """One preset over one question set (``params``: ``sqa eval``'s options by name):
    :func:`sqa.api.evaluate.evaluate` drawn on the terminal; ``lm``: an already loaded model to
    answer with (``sqa.cli.eval_presets`` shares one between presets)."""
    from sqa.api.evaluate import evaluate
    from sqa.api.reader import Reader
    from sqa.render.progress import EvalProgress
    from sqa.settings import ReaderSettings
    from sqa.render.tables import run_line, run_table

    o = params
    method = bool(o["method"])
    chosen = None if method else choose_preset(o["preset"], o["reader"], o["retrieval"], o["oracle"])
    split, dataset = o["split"], o["dataset"]
    if dataset is not None and split is not None:
        raise SqaError(f"give either --split {split} or --dataset {dataset}, not both")
    r = Reader(model=lm, settings=ReaderSettings.from_options(o, chosen))
    console = Console(stderr=True)
    with EvalProgress(console, split or o["protocol"] or ("custom" if dataset else "dev")) as progress:
        run = evaluate(
            r,
            dataset if dataset is not None else split,
            **{k: o[k] for k in RUN_OPTIONS},
            progress=progress,
            on_note=lambda line: console.print(line, soft_wrap=True),
        )
    oof = bool(run.metrics and "out_of_fold" in run.metrics)
    if run.repaired_bytes and not oof:
        console.print(f"dropped a cut last line ({run.repaired_bytes} bytes) of {run.path}/traces.jsonl")
    table = run_table(run)
    if table is not None:
        Console().print(table)
    typer.echo(run_line(run))
    if run.interrupted and not oof:
        raise KeyboardInterrupt


@eval_app.command("score")
def score_command(
    predictions: Annotated[Path, typer.Argument(help=HELP["predictions"])],
    split: Annotated[Str, opt("--split", help=HELP["score_split"])] = None,
    allow_missing: Annotated[
        bool, opt("--allow-missing", help="Score only the predicted questions of the split.", show_default=True)
    ] = False,
    as_json: Annotated[bool, opt("--json", help="Print the scores as a JSON object.", show_default=True)] = False,
) -> None:
    """Score a leaderboard-format predictions file with the official metrics (Accuracy, SARI, Recall@10)."""
    from sqa.api.questions import score
    from sqa.render.tables import metrics_table

    scores = score(predictions, split, allow_missing=allow_missing)
    if as_json:
        typer.echo(json.dumps(scores, indent=1))
    else:
        Console().print(metrics_table(scores, f"{Path(predictions).name} vs {scores['split']}"))


eval_app.command("retrieval")(eval_retrieval_command)
