"""``sqa eval``: batch evaluation of a preset (``sqa.presets``) over a StrategyQA split (resumable),
``sqa eval score`` for any leaderboard predictions file, and ``sqa eval retrieval``
(:mod:`sqa.cli.eval_retrieval`).

``sqa eval --split dev --out DIR`` writes ``DIR/traces.jsonl`` (one line per question, fsync'd
per batch), ``predictions.json`` (leaderboard format), ``metrics.json``, ``report.md`` and
``report.png`` (see :mod:`sqa.eval.runner`). Running the same command again resumes; Ctrl-C saves
what is done and exits with code 130.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

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
    served_options,
)
from sqa.cli.eval_retrieval import eval_retrieval_command
from sqa.render.tables import metrics_table
from sqa.types import SqaError

eval_app = typer.Typer(
    help="Evaluate the pipeline on a StrategyQA split (resumable); `score` a predictions file; `retrieval` metrics.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(eval_app, name="eval")

SPLIT_HELP = (
    "train (2,290) | dev (229) | train-2061 | all (train + test) | test (490, predictions only). With the "
    "facts reader, train / train-2061 / all are answered out-of-fold (5 term-grouped folds) and the run "
    "also writes the model's answer heads to $SQA_HOME/heads."
)


class _RateColumn(ProgressColumn):
    """Questions per second over the whole session (rich's own speed window is too short when one
    batch takes minutes on CPU)."""

    def render(self, task) -> Text:
        speed = task.speed
        return Text(f"{speed:.3f} q/s" if speed else "– q/s", style="progress.data.speed")


@eval_app.callback(invoke_without_command=True)
def eval_command(
    ctx: typer.Context,
    split: Annotated[
        Optional[str], typer.Option("--split", help=SPLIT_HELP + " Default: dev.", show_default=False)
    ] = None,
    protocol: Annotated[
        Optional[str],
        typer.Option(
            "--protocol",
            help="A named question set instead of --split: "
            "dev-229 | train-first-500 | train-first-1000 | train-2290 (the "
            "release's order; train ones answered out-of-fold by the facts "
            "reader; see docs/protocols.md). Recorded in run.json.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the first N questions of the split.")] = None,
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out",
            help="Run directory (default: ./runs/eval/SPLIT-DECOMPOSITION-MODEL). The same directory resumes the run.",
            show_default=False,
        ),
    ] = None,
    decomposition: Annotated[
        Optional[str],
        typer.Option(
            "--decomposition",
            help="predicted (decomposer) | gold (annotated steps) | question (one step). "
            "Default: question for --reader facts, predicted for --reader steps.",
            show_default=False,
        ),
    ] = None,
    preset: PresetOpt = None,
    reader: Annotated[
        Optional[str],
        typer.Option(
            "--reader",
            help="facts (default: a few selected facts, trained answer head) | steps (preset steps).",
            show_default=False,
        ),
    ] = None,
    oracle: Annotated[
        Optional[str],
        typer.Option(
            "--oracle",
            help="Diagnostic upper bound, never a default: facts (the "
            "question's annotated facts) | paragraphs (its annotated evidence "
            "paragraphs). Refused on test.",
            show_default=False,
        ),
    ] = None,
    head: Annotated[
        Optional[Path],
        typer.Option(
            "--head",
            help="Answer head file (default: the one `sqa eval --split train "
            "--model M` wrote for --model, else the shipped one). Not with "
            "train / train-2061 / all, which are answered out-of-fold.",
            show_default=False,
        ),
    ] = None,
    dataset: Annotated[
        Optional[Path],
        typer.Option(
            "--dataset",
            help="Evaluate any question file in StrategyQA's format "
            "(.json list, .jsonl, or a local `datasets` directory) instead of "
            "--split; Recall@10/SARI only where annotated.",
            show_default=False,
        ),
    ] = None,
    features_cache: Annotated[
        Optional[Path],
        typer.Option(
            "--features-cache",
            help="A features file (JSON lines of the "
            "facts reader's records) made with the same model and settings: questions in it are "
            "not read again.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option(
            "--model",
            help="Model name, .gguf path, openai:NAME (served, see "
            "--base-url) or Hugging Face checkpoint (default: qwen2.5-coder-1.5b).",
            show_default=False,
        ),
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Paragraphs retrieved per step (top-k).")] = 10,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            help="Questions per reader.answer_batch call (GPU: run in lockstep). Each answered question is fsync'd to traces.jsonl at once.",
        ),
    ] = 32,
    folds: Annotated[
        int, typer.Option("--folds", help="Cross-fitting folds for few-shot examples on train / train-2061 / all.")
    ] = 5,
    retrieval: Annotated[
        Optional[bool],
        typer.Option(
            "--retrieval/--no-retrieval",
            help="--no-retrieval: the same model and prompts without evidence (preset no-retrieval).",
            show_default=False,
        ),
    ] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Stop at the first bad --dataset entry instead of skipping and counting it."),
    ] = False,
    base_url: BaseUrlOpt = None,
    api: ApiOpt = "auto",
    allow_model_alias: AliasOpt = False,
    replace_heads: Annotated[
        bool,
        typer.Option(
            "--replace-heads",
            help="With --split train / train-2061 / all: remove "
            "the model's other heads of yours, so the new one answers (by "
            "default it is written beside them and the head fitted on the most "
            "questions answers).",
        ),
    ] = False,
    chat_template: ChatTemplateOpt = None,
    apply_chat_template: ApplyChatTemplateOpt = False,
    answering: Annotated[
        str,
        typer.Option(
            "--answering",
            help="auto (train splits and questions a head was fitted on "
            "out-of-fold, others by the held-out head, zero-shot without one), or head "
            "/ out-of-fold to require that; recorded in run.json.",
        ),
    ] = "auto",
) -> None:
    """Run a preset (default facts: retrieve, select facts, read, trained answer head) over a split into --out;
    several (--preset facts,no-retrieval,steps) run on the same questions into sibling folders and are compared."""
    params = {name: value for name, value in locals().items() if name != "ctx"}  # every option, for eval_one
    if ctx.invoked_subcommand is not None:
        return
    if preset and "," in preset:
        from sqa.cli.eval_presets import eval_presets

        eval_presets(params)
        return
    eval_one(**params)


def eval_one(
    *,
    split,
    protocol,
    limit,
    out,
    decomposition,
    preset,
    reader,
    oracle,
    head,
    dataset,
    features_cache,
    model,
    k,
    batch_size,
    folds,
    retrieval,
    index_dir,
    backend,
    strict,
    base_url,
    api,
    allow_model_alias,
    replace_heads,
    chat_template,
    apply_chat_template=False,
    answering="auto",
    lm=None,
) -> None:
    """One preset over one question set (the body of ``sqa eval``: :func:`sqa.api.evaluate.evaluate`
    drawn on the terminal); ``lm``: an already loaded model to answer with (``sqa.cli.eval_presets``
    shares one between presets)."""
    from sqa.api.evaluate import evaluate
    from sqa.api.reader import Reader
    from sqa.cli.eval_oof import OofDrawer, print_oof_summary
    from sqa.eval.oof import OofProgress

    chosen = choose_preset(preset, reader, retrieval, oracle)
    if dataset is not None and split is not None:
        raise SqaError(f"give either --split {split} or --dataset {dataset}, not both")
    r = Reader(
        chosen,
        lm if lm is not None else model,
        index_dir,
        base_url=served_options(base_url, api, allow_model_alias),
        k=k,
        head=head,
        chat_template=chat_template,
        apply_chat_template=apply_chat_template,
        backend=backend,
    )
    console = Console(stderr=True)
    columns = [
        TextColumn("[bold]eval {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[acc]}"),
    ]
    with (
        Progress(
            *columns, console=console, speed_estimate_period=24 * 3600.0, disable=not console.is_terminal
        ) as progress,
        OofDrawer(console) as oof,
    ):  # no bar frame in logs
        tasks: list = []

        def on_progress(p) -> None:
            if isinstance(p, OofProgress):  # an out-of-fold run's event
                return oof(p)
            acc = f"acc {p.accuracy:.3f} ({p.correct}/{p.scored})" if p.accuracy is not None else ""
            if p.cost:  # a served model: calls sent / from the response cache, tokens (sqa.models.served_cache)
                c = p.cost
                acc += (
                    f"  calls {c['calls_sent']:,} (+{c['calls_cached']:,} cached), "
                    f"{(c['prompt_tokens'] + c['completion_tokens']) / 1000:.1f}k tok"
                )
            if not tasks:  # start at what earlier sessions did, so the rate counts this session only
                tasks.append(
                    progress.add_task(
                        split or protocol or ("custom" if dataset else "dev"), total=p.total, completed=p.done, acc=acc
                    )
                )
            progress.update(tasks[0], completed=p.done, acc=acc)

        run = evaluate(
            r,
            dataset if dataset is not None else split,
            out=out,
            limit=limit,
            protocol=protocol,
            batch_size=batch_size,
            folds=folds,
            decomposition=decomposition,
            features_cache=features_cache,
            strict=strict,
            replace_heads=replace_heads,
            answering=answering,
            progress=on_progress,
            on_note=lambda line: console.print(line, soft_wrap=True),
        )
    if run.metrics and "out_of_fold" in run.metrics:
        return print_oof_summary(run)
    if run.repaired_bytes:
        console.print(f"dropped a cut last line ({run.repaired_bytes} bytes) of {run.path}/traces.jsonl")
    m, o = run.metrics, run.options
    if m:
        from sqa.eval.report import has_recall, has_steps

        Console().print(
            metrics_table(
                {
                    "n": m["n"],
                    "Accuracy": m["Accuracy"],
                    **(
                        {
                            f"without the {d['n']} demonstrations (n={d['without_demonstrations']['n']})": d[
                                "without_demonstrations"
                            ]["Accuracy"]
                        }
                        if (d := m.get("demonstrations"))
                        else {}
                    ),
                    "majority (always no)": m["majority_baseline"]["Accuracy"],
                    **{
                        f"Accuracy at {a['coverage']:.0%} coverage": a["Accuracy"]
                        for a in (m.get("accuracy_at_coverage") or {}).get("at", [])[:2]
                    },
                    **({"Recall@10": m["Recall@10"]} if has_recall(m) else {}),
                    **({"SARI": m["SARI"]} if has_steps(m) and m["SARI"] is not None else {}),
                    "ECE": m["ECE"],
                    "seconds/question": m["seconds_per_question"],
                },
                f"sqa eval {m.get('protocol') or o['split']} ({o['reader']}{', ORACLE ' + o['oracle'] if o['oracle'] else ''}, {o['decomposition']}"
                + (", zero-shot: the model's own P(yes), uncalibrated" if m.get("answering") == "zero-shot" else "")
                + ")",
            )
        )
    state = "interrupted" if run.interrupted else ("complete" if run.complete else "incomplete")
    typer.echo(
        f"{state}: {run.done}/{run.total} questions ({run.new} new) -> {run.path} "
        f"({', '.join(p.name for p in run.files)})"
    )
    if run.interrupted:
        raise KeyboardInterrupt


@eval_app.command("score")
def score_command(
    predictions: Annotated[
        Path, typer.Argument(help="Leaderboard predictions JSON {qid: {answer, decomposition, paragraphs}}.")
    ],
    split: Annotated[
        Optional[str],
        typer.Option(
            "--split",
            help="Gold split to score against (default: the smallest "
            "of dev, train-2061, train holding every predicted qid).",
            show_default=False,
        ),
    ] = None,
    allow_missing: Annotated[
        bool, typer.Option("--allow-missing", help="Score only the predicted questions of the split.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as a JSON object.")] = False,
) -> None:
    """Score a leaderboard-format predictions file with the official metrics (Accuracy, SARI, Recall@10)."""
    from sqa.api.questions import score

    scores = score(predictions, split, allow_missing=allow_missing)
    if as_json:
        typer.echo(json.dumps(scores, indent=1))
        return
    Console().print(metrics_table(scores, f"{predictions} vs {scores['split']}"))


eval_app.command("retrieval")(eval_retrieval_command)
