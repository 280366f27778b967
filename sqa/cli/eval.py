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
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn
from rich.text import Text

from sqa.cli import app
from sqa.cli.common import (AliasOpt, ApiOpt, BackendOpt, BaseUrlOpt, ChatTemplateOpt, IndexDirOpt, PresetOpt,
                            choose_preset, metrics_table, resolve_index_dir, served_options)
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

SPLIT_HELP = ("train (2,290) | dev (229) | train-2061 | all (train + test) | test (490, predictions only). With the "
              "facts reader, train / train-2061 / all are answered out-of-fold (5 term-grouped folds) and the run "
              "also writes the model's answer heads to $SQA_HOME/heads.")


class _RateColumn(ProgressColumn):
    """Questions per second over the whole session (rich's own speed window is too short when one
    batch takes minutes on CPU)."""

    def render(self, task) -> Text:
        speed = task.speed
        return Text(f"{speed:.3f} q/s" if speed else "– q/s", style="progress.data.speed")


@eval_app.callback(invoke_without_command=True)
def eval_command(
    ctx: typer.Context,
    split: Annotated[Optional[str], typer.Option("--split", help=SPLIT_HELP + " Default: dev.", show_default=False)] = None,
    protocol: Annotated[Optional[str], typer.Option("--protocol", help="A named question set instead of --split: "
                                                    "dev-229 | train-first-500 | train-first-1000 | train-2290 (the "
                                                    "release's order; train ones answered out-of-fold by the facts "
                                                    "reader; see docs/protocols.md). Recorded in run.json.",
                                                    show_default=False)] = None,
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the first N questions of the split.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run directory (default: ./runs/eval/SPLIT-DECOMPOSITION-MODEL). "
                                                "The same directory resumes the run.", show_default=False)] = None,
    decomposition: Annotated[Optional[str], typer.Option("--decomposition",
                                               help="predicted (decomposer) | gold (annotated steps) | question (one step). "
                                                    "Default: question for --reader facts, predicted for --reader steps.",
                                               show_default=False)] = None,
    preset: PresetOpt = None,
    reader: Annotated[Optional[str], typer.Option("--reader", help="facts (default: a few selected facts, trained answer "
                                                  "head) | steps (preset steps).", show_default=False)] = None,
    oracle: Annotated[Optional[str], typer.Option("--oracle", help="Diagnostic upper bound, never a default: facts (the "
                                                  "question's annotated facts) | paragraphs (its annotated evidence "
                                                  "paragraphs). Refused on test.", show_default=False)] = None,
    head: Annotated[Optional[Path], typer.Option("--head", help="Answer head file (default: the one `sqa eval --split train "
                                                 "--model M` wrote for --model, else the shipped one). Not with "
                                                 "train / train-2061 / all, which are answered out-of-fold.", show_default=False)] = None,
    dataset: Annotated[Optional[Path], typer.Option("--dataset", help="Evaluate any question file in StrategyQA's format "
                                                    "(.json list, .jsonl, or a local `datasets` directory) instead of "
                                                    "--split; Recall@10/SARI only where annotated.",
                                                    show_default=False)] = None,
    features_cache: Annotated[Optional[Path], typer.Option("--features-cache", help="A features file (JSON lines of the "
                                                           "facts reader's records) made with the same model and settings: questions in it are "
                                                           "not read again.", show_default=False)] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Model name, .gguf path, openai:NAME (served, see "
                                                 "--base-url) or Hugging Face checkpoint (default: qwen2.5-coder-1.5b).",
                                                 show_default=False)] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Paragraphs retrieved per step (top-k).")] = 10,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Questions per reader.answer_batch call (GPU: run in lockstep). Each answered question is fsync'd to traces.jsonl at once.")] = 32,
    folds: Annotated[int, typer.Option("--folds", help="Cross-fitting folds for few-shot examples on train / train-2061 / all.")] = 5,
    retrieval: Annotated[Optional[bool], typer.Option("--retrieval/--no-retrieval", help="--no-retrieval: the same model and "
                                                      "prompts without evidence (preset no-retrieval).",
                                                      show_default=False)] = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first bad --dataset entry instead of skipping "
                                         "and counting it.")] = False,
    base_url: BaseUrlOpt = None,
    api: ApiOpt = "auto",
    allow_model_alias: AliasOpt = False,
    replace_heads: Annotated[bool, typer.Option("--replace-heads", help="With --split train / train-2061 / all: remove "
                                                "the model's other heads of yours, so the new one answers (by "
                                                "default it is written beside them and the head fitted on the most "
                                                "questions answers).")] = False,
    chat_template: ChatTemplateOpt = None,
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


def eval_one(*, split, protocol, limit, out, decomposition, preset, reader, oracle, head, dataset, features_cache, model,
             k, batch_size, folds, retrieval, index_dir, backend, strict, base_url, api, allow_model_alias, replace_heads,
             chat_template, lm=None) -> None:
    """One preset over one question set (the body of ``sqa eval``); ``lm``: an already loaded model to
    answer with (``sqa.cli.eval_presets`` shares one between presets)."""
    from sqa.eval.results import default_run_dir
    from sqa.eval.runner import EvalOptions, check_run_file, run_eval, select_questions
    from sqa.pipeline import index_info, load_head, reader_factory
    from sqa.models.registry import DEFAULT_MODEL

    chosen = choose_preset(preset, reader, retrieval, oracle)
    base_url = served_options(base_url, api, allow_model_alias)
    reader, retrieval, oracle = chosen.reader, chosen.retrieval, chosen.oracle
    model = model or DEFAULT_MODEL
    decomposition = decomposition or chosen.decomposition
    dataset_id, dataset_questions = "", None
    if dataset is not None and split is not None:
        raise SqaError(f"give either --split {split} or --dataset {dataset}, not both")
    if protocol is not None:
        from sqa.eval.protocols import get_protocol, protocol_limit

        if split is not None or dataset is not None:
            raise SqaError(f"--protocol {protocol} names its own questions; leave out "
                           f"{'--split' if split is not None else '--dataset'}")
        proto = get_protocol(protocol)
        split, limit = proto.split, protocol_limit(proto, limit)
    split = split or "dev"
    if features_cache is not None:  # checked line by line before any model loads
        from sqa.facts.reader import check_features_file

        check_features_file(features_cache)
    if dataset is not None:
        from sqa.strategyqa import load_dataset_file

        skipped: list = []
        dataset_questions = load_dataset_file(dataset, strict=strict, skipped=skipped)
        _warn_skipped(dataset, skipped, len(dataset_questions))
        split = "custom"
        from sqa.hashing import content_digest

        dataset_id = f"{dataset.name}:{content_digest(dataset)}"
    idx = resolve_index_dir(index_dir)
    head_obj = head_id = None
    template_id = ""
    if chat_template is not None:
        from sqa.models.chat import check_template_file

        template_id = check_template_file(chat_template)  # a missing or broken file: one line, before any model
    if base_url and not model.startswith("openai:"):
        from sqa.models.served_url import served_flags

        raise SqaError(f"{served_flags(base_url)} goes with a served model (--model openai:NAME), not {model!r}")
    questions = select_questions(split, limit) if dataset_questions is None else dataset_questions[:limit] \
        if limit else dataset_questions
    if protocol is None:
        from sqa.eval.protocols import protocol_of

        protocol = protocol_of(split if dataset is None else "custom", len(questions))
    if reader == "facts" and oracle is None:
        from sqa.eval.oof import OofOptions, oof_pool

        pool = oof_pool(model, retrieval, head, split, questions)
        if pool is not None:
            if chat_template is not None:
                raise SqaError("--chat-template: an out-of-fold run reads the facts reader's plain-text prompts, which "
                               "no chat template renders; leave it out")
            if features_cache is not None:
                raise SqaError("--features-cache goes with a run answered by one head; an out-of-fold run keeps its "
                               "features in $SQA_HOME/features (leave --features-cache out)")
            from sqa.cli.eval_oof import eval_oof_command

            eval_oof_command(OofOptions(split=split, questions=questions, model=model, index_dir=idx, backend=backend,
                                        k=k, folds=folds, retrieval=retrieval, limit=limit, out=out, pool=pool[0],
                                        settings=pool[1], dataset=dataset_id, preset=chosen.name,
                                        stem=dataset.stem if dataset is not None else split, base_url=base_url, protocol=protocol,
                                        replace_heads=replace_heads))
            return
    if reader == "facts":
        from sqa.pipeline import check_head_states

        head_obj, head_id = load_head(model, retrieval, oracle, head, split, dataset_questions)
        check_head_states(head_obj, model)
    options = EvalOptions(split=split, model=model, decomposition=decomposition, k=k, backend=backend, folds=folds,
                          limit=limit, batch_size=batch_size, retrieval=retrieval, reader=reader, oracle=oracle,
                          head=head_id or "", dataset=dataset_id, preset=chosen.name, protocol=protocol,
                          chat_template=template_id)
    tag = decomposition if retrieval else f"{decomposition}-noretrieval"
    if reader == "facts":
        tag = f"facts{'-oracle-' + oracle if oracle else ''}{'' if retrieval else '-noretrieval'}"
    out_dir = out or default_run_dir(dataset.stem if dataset is not None else split, tag, model)
    info = index_info(idx, backend) if (retrieval or oracle) else None
    console = Console(stderr=True)
    record = {}
    if head_obj is not None:  # which head answers, and how many questions it saw (issue 41 items 1 and 8)
        from sqa.facts.heads import fitted_count

        record["head"] = {"file": head_obj.source, "fitted_on": fitted_count(head_obj)}
    check_run_file(Path(out_dir), options, info, record)  # refuse a mismatched --out before showing progress
    if head_obj is not None:
        console.print(f"answer head {head_obj.source} (fitted on {record['head']['fitted_on']:,} questions)", soft_wrap=True)
    columns = [TextColumn("[bold]eval {task.description}"), BarColumn(), MofNCompleteColumn(), _RateColumn(),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[acc]}")]
    with Progress(*columns, console=console, speed_estimate_period=24 * 3600.0,
                  disable=not console.is_terminal) as progress:  # no bar frame in logs: an error stays one line
        tasks: list = []

        def on_progress(p) -> None:
            acc = f"acc {p.accuracy:.3f} ({p.correct}/{p.scored})" if p.accuracy is not None else ""
            if p.cost:  # a served model: calls sent / from the response cache, tokens (sqa.models.served_cache)
                c = p.cost
                acc += (f"  calls {c['calls_sent']:,} (+{c['calls_cached']:,} cached), "
                        f"{(c['prompt_tokens'] + c['completion_tokens']) / 1000:.1f}k tok")
            if not tasks:  # start at what earlier sessions did, so the rate counts this session only
                tasks.append(progress.add_task(split, total=p.total, completed=p.done, acc=acc))
            progress.update(tasks[0], completed=p.done, acc=acc)

        factory = reader_factory(chosen, lm if lm is not None else model, idx, backend, k, head=head_obj,
                                 features_cache=features_cache, base_url=base_url, chat_template=chat_template)
        summary = run_eval(options, out_dir, factory, questions=questions, index_info=info, on_progress=on_progress)
    if summary.repaired_bytes:
        console.print(f"dropped a cut last line ({summary.repaired_bytes} bytes) of {out_dir}/traces.jsonl")
    out = Console()
    m = summary.metrics
    if m:
        from sqa.eval.report import has_recall, has_steps

        out.print(metrics_table({"n": m["n"], "Accuracy": m["Accuracy"], "majority (always no)": m["majority_baseline"]["Accuracy"],
                                 **{f"Accuracy at {a['coverage']:.0%} coverage": a["Accuracy"]
                                    for a in (m.get("accuracy_at_coverage") or {}).get("at", [])[:2]},
                                 **({"Recall@10": m["Recall@10"]} if has_recall(m) else {}),
                                 **({"SARI": m["SARI"]} if has_steps(m) and m["SARI"] is not None else {}),
                                 "ECE": m["ECE"],
                                 "seconds/question": m["seconds_per_question"]},
                                f"sqa eval {split} ({reader}{', ORACLE ' + oracle if oracle else ''}, {decomposition}"
                                + (", zero-shot: the model's own P(yes), uncalibrated"
                                   if m.get("answering") == "zero-shot" else "") + ")"))
    state = "interrupted" if summary.interrupted else ("complete" if summary.complete else "incomplete")
    typer.echo(f"{state}: {summary.done}/{summary.total} questions ({summary.new} new) -> {out_dir} "
               f"({', '.join(p.name for p in summary.files)})")
    if summary.interrupted:
        raise KeyboardInterrupt


def _warn_skipped(path: Path, skipped: list, kept: int, show: int = 5) -> None:
    """One warning line per skipped dataset entry (the first ``show``), then one with the count."""
    import warnings

    from sqa.types import SqaWarning

    for n, qid, problem in skipped[:show]:
        warnings.warn(f"{path}: entry {n}{f' ({qid})' if qid else ''} skipped: {problem}", SqaWarning, stacklevel=2)
    if skipped:
        more = f" ({len(skipped) - show:,} more not shown)" if len(skipped) > show else ""
        warnings.warn(f"{path}: {len(skipped):,} bad entries skipped{more}, {kept:,} questions kept; --strict stops "
                      "at the first", SqaWarning, stacklevel=2)


def _infer_split(qids: list[str]) -> str:
    from sqa.strategyqa import load_questions

    for split in ("dev", "train-2061", "train", "test", "all"):
        ids = {q.qid for q in load_questions(split)}
        if all(qid in ids for qid in qids):
            return split
    return "all"


@eval_app.command("score")
def score_command(
    predictions: Annotated[Path, typer.Argument(help="Leaderboard predictions JSON {qid: {answer, decomposition, paragraphs}}.")],
    split: Annotated[Optional[str], typer.Option("--split", help="Gold split to score against (default: the smallest "
                                                 "of dev, train-2061, train holding every predicted qid).",
                                                 show_default=False)] = None,
    allow_missing: Annotated[bool, typer.Option("--allow-missing", help="Score only the predicted questions of the split.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as a JSON object.")] = False,
) -> None:
    """Score a leaderboard-format predictions file with the official metrics (Accuracy, SARI, Recall@10)."""
    from sqa.eval.leaderboard import load_predictions, score_predictions
    from sqa.strategyqa import load_questions

    preds = load_predictions(predictions)
    from sqa.strategyqa import questions_by_id

    known = questions_by_id()
    unknown = [qid for qid in preds if qid not in known]
    if unknown:
        raise SqaError(f"{predictions}: {len(unknown):,} of {len(preds):,} predictions are for qids that are not "
                       f"StrategyQA questions, e.g. {unknown[0]!r}; check the file's keys (qids like "
                       f"{next(iter(known))!r})")
    split = split or _infer_split(list(preds))
    questions = load_questions(split)
    if split in ("test", "all"):
        labelled = [q for q in questions if q.answer is not None]
        if split == "test" or any(qid not in {q.qid for q in labelled} for qid in preds):
            raise SqaError(f"{predictions}: the test split has no public labels; only the official leaderboard "
                           "(leaderboard.allenai.org/strategyqa) scores it")
        questions = labelled
    scores = score_predictions(preds, questions, allow_missing=allow_missing, source=str(predictions))
    scores = {"split": split, **scores}
    if as_json:
        typer.echo(json.dumps(scores, indent=1))
        return
    Console().print(metrics_table(scores, f"{predictions} vs {split}"))


eval_app.command("retrieval")(eval_retrieval_command)
