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
    served_options,
)
from sqa.cli.eval_retrieval import eval_retrieval_command
from sqa.types import SqaError

eval_app = typer.Typer(
    help="Evaluate the pipeline on a StrategyQA split (resumable); `score` a predictions file; `retrieval` metrics.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(eval_app, name="eval")

HELP = {
    "split": "train (2,290) | dev (229) | train-2061 | all (train + test) | test (490, predictions only). With the facts reader, train / train-2061 / all are answered out-of-fold (5 term-grouped folds) and the run also writes the model's answer heads to $SQA_HOME/heads. Default: dev.",
    "protocol": "A named question set instead of --split: dev-229 | train-first-500 | train-first-1000 | train-2290 (the release's order; train ones answered out-of-fold by the facts reader; see docs/protocols.md). Recorded in run.json.",
    "limit": "Only the first N questions of the split.",
    "out": "Run directory (default: ./runs/eval/SPLIT-DECOMPOSITION-MODEL). The same directory resumes the run.",
    "decomposition": "predicted (decomposer) | gold (annotated steps) | question (one step). Default: question for --reader facts, predicted for --reader steps.",
    "reader": "facts (default: a few selected facts, trained answer head) | steps (preset steps).",
    "oracle": "Diagnostic upper bound, never a default: facts (the question's annotated facts) | paragraphs (its annotated evidence paragraphs). Refused on test.",
    "head": "Answer head file (default: the one `sqa eval --split train --model M` wrote for --model, else the shipped one). Not with train / train-2061 / all, which are answered out-of-fold.",
    "dataset": "Evaluate any question file in StrategyQA's format (.json list, .jsonl, or a local `datasets` directory) instead of --split; Recall@10/SARI only where annotated.",
    "features_cache": "A features file (JSON lines of the facts reader's records) made with the same model and settings: questions in it are not read again.",
    "model": "Model name, .gguf path, openai:NAME (served, see --base-url) or Hugging Face checkpoint (default: qwen2.5-coder-1.5b).",
    "k": "Paragraphs retrieved per step (top-k; default 10, a --method's own default otherwise).",
    "batch_size": "Questions per reader.answer_batch call (GPU: run in lockstep). Each answered question is fsync'd to traces.jsonl at once.",
    "folds": "Cross-fitting folds for few-shot examples on train / train-2061 / all.",
    "retrieval": "--no-retrieval: the same model and prompts without evidence (preset no-retrieval).",
    "strict": "Stop at the first bad --dataset entry instead of skipping and counting it.",
    "replace_heads": "With --split train / train-2061 / all: remove the model's other heads of yours, so the new one answers (by default it is written beside them and the head fitted on the most questions answers).",
    "predictions": "Leaderboard predictions JSON {qid: {answer, decomposition, paragraphs}}.",
    "score_split": "Gold split to score against (default: the smallest of dev, train-2061, train holding every predicted qid).",
    "answering": "auto (train splits and questions a head was fitted on out-of-fold, others by the held-out head, zero-shot without one), or head / out-of-fold to require that; recorded in run.json.",
}
Str, P = Optional[str], Optional[Path]
# the options sqa.evaluate takes as they are
RUN_OPTIONS = ("out", "limit", "protocol", "batch_size", "folds", "decomposition", "features_cache", "strict")
RUN_OPTIONS += ("replace_heads", "answering")


@eval_app.callback(invoke_without_command=True)
def eval_command(
    ctx: typer.Context,
    split: Annotated[Str, opt("--split", help=HELP["split"])] = None,
    protocol: Annotated[Str, opt("--protocol", help=HELP["protocol"])] = None,
    limit: Annotated[Optional[int], opt("--limit", help=HELP["limit"], show_default=True)] = None,
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
    batch_size: Annotated[int, opt("--batch-size", help=HELP["batch_size"], show_default=True)] = 32,
    folds: Annotated[int, opt("--folds", help=HELP["folds"], show_default=True)] = 5,
    retrieval: Annotated[Optional[bool], opt("--retrieval/--no-retrieval", help=HELP["retrieval"])] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    strict: Annotated[bool, opt("--strict", help=HELP["strict"], show_default=True)] = False,
    base_url: BaseUrlOpt = None,
    api: ApiOpt = "auto",
    allow_model_alias: AliasOpt = False,
    replace_heads: Annotated[bool, opt("--replace-heads", help=HELP["replace_heads"], show_default=True)] = False,
    chat_template: ChatTemplateOpt = None,
    apply_chat_template: ApplyChatTemplateOpt = False,
    prefill: PrefillOpt = True,
    answering: Annotated[str, opt("--answering", help=HELP["answering"], show_default=True)] = "auto",
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
    from sqa.render.tables import run_line, run_table

    o = params
    by_method = c.method_kwargs(o)
    chosen = None if by_method else choose_preset(o["preset"], o["reader"], o["retrieval"], o["oracle"])
    split, dataset = o["split"], o["dataset"]
    if dataset is not None and split is not None:
        raise SqaError(f"give either --split {split} or --dataset {dataset}, not both")
    r = Reader(
        chosen,
        lm if lm is not None else o["model"],
        o["index_dir"],
        base_url=served_options(o["base_url"], o["api"], o["allow_model_alias"]),
        k=o["k"],
        head=o["head"],
        chat_template=o["chat_template"],
        apply_chat_template=o["apply_chat_template"],
        prefill=o["prefill"],
        backend=o["backend"],
        **by_method,
    )
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
        Console().print(metrics_table(scores, f"{predictions} vs {scores['split']}"))


eval_app.command("retrieval")(eval_retrieval_command)
