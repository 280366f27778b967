"""``sqa eval``: batch evaluation over a StrategyQA split (resumable), ``sqa eval score`` for any
leaderboard predictions file, and ``sqa eval retrieval`` (registered from
:mod:`sqa.cli.eval_retrieval` when that module is present).

``sqa eval --split dev --out DIR`` writes ``DIR/traces.jsonl`` (one line per question, fsync'd
per batch), ``predictions.json`` (leaderboard format), ``metrics.json``, ``report.md`` and
``report.png`` (see :mod:`sqa.eval.runner`). Running the same command again resumes; Ctrl-C saves
what is done and exits with code 130.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from sqa.cli import app
from sqa.cli.common import BackendOpt, DecisionOpt, IndexDirOpt, SignalsOpt, resolve_index_dir, split_signals
from sqa.reasoner.reasoner import DEFAULT_DECISION
from sqa.types import SqaError

eval_app = typer.Typer(
    help="Evaluate the pipeline on a StrategyQA split (resumable); `score` a predictions file; `retrieval` metrics.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(eval_app, name="eval")

SPLIT_HELP = "train (2,290) | dev (229) | train-2061 | all (train + test) | test (490, predictions only)."


class _RateColumn(ProgressColumn):
    """Questions per second over the whole session (rich's own speed window is too short when one
    batch takes minutes on CPU)."""

    def render(self, task) -> Text:
        speed = task.speed
        return Text(f"{speed:.3f} q/s" if speed else "– q/s", style="progress.data.speed")


def _default_out(split: str, decomposition: str, model: str) -> Path:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).name if ("/" in model or model.endswith(".gguf")) else model)
    return Path("runs") / "eval" / f"{split}-{decomposition}-{stem}"


def _reasoner_factory(model: str, index_dir: Path, backend: str, k: int, retrieval: bool = True, **options):
    """``pool -> reasoner``: builds the reasoner once (model loaded once) and switches its
    few-shot pool per cross-fitting fold."""
    state: dict = {}

    def reasoner_for(pool):
        from sqa.reasoner import build_reasoner

        r = state.get("reasoner")
        if r is None:
            r = build_reasoner(model, index_dir, backend, k, retrieval=retrieval, fewshot_pool=pool.questions,
                               **options)
            state["reasoner"] = r
            return r
        if hasattr(r, "with_fewshot_pool"):
            return r.with_fewshot_pool(pool.questions)
        if hasattr(r, "fewshot_pool"):
            r.fewshot_pool = pool.questions
            return r
        r = build_reasoner(model, index_dir, backend, k, retrieval=retrieval, fewshot_pool=pool.questions,
                               **options)
        state["reasoner"] = r
        return r

    return reasoner_for


def _index_info(index_dir: Path, backend: str) -> dict:
    from sqa.indexing.build import read_manifest

    manifest = read_manifest(index_dir) or {}
    return {"index_dir": str(index_dir), "backend": backend, "paragraph_count": manifest.get("paragraph_count"),
            "preset": manifest.get("preset"), "built_at": manifest.get("built_at")}


def metrics_table(metrics: dict, title: str) -> Table:
    """A rich table of the headline numbers of a ``metrics.json`` / score result."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        table.add_row(name, f"{value:.4f}" if isinstance(value, float) else str(value))
    return table


@eval_app.callback(invoke_without_command=True)
def eval_command(
    ctx: typer.Context,
    split: Annotated[str, typer.Option("--split", help=SPLIT_HELP)] = "dev",
    limit: Annotated[Optional[int], typer.Option("--limit", help="Only the first N questions of the split.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Run directory (default: ./runs/eval/SPLIT-DECOMPOSITION-MODEL). "
                                                "The same directory resumes the run.", show_default=False)] = None,
    decomposition: Annotated[str, typer.Option("--decomposition",
                                               help="predicted (decomposer) | gold (annotated steps) | question (one step).")] = "predicted",
    model: Annotated[Optional[str], typer.Option("--model", help="Model name, .gguf path or Hugging Face checkpoint "
                                                 "(default: qwen2.5-coder-1.5b).", show_default=False)] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Paragraphs retrieved per step (top-k).")] = 10,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Questions per reasoner.answer_batch call (GPU: run in lockstep). Each answered question is fsync'd to traces.jsonl at once.")] = 32,
    folds: Annotated[int, typer.Option("--folds", help="Cross-fitting folds for few-shot examples on train / train-2061 / all.")] = 5,
    retrieval: Annotated[bool, typer.Option("--retrieval/--no-retrieval", help="--no-retrieval: the same model and prompts without evidence (the baseline that shows what retrieval adds).")] = True,
    decision: DecisionOpt = DEFAULT_DECISION,
    signals: SignalsOpt = None,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Run the full pipeline (decompose, retrieve per step, read, answer) over a split into --out."""
    if ctx.invoked_subcommand is not None:
        return
    from sqa.eval.runner import EvalOptions, check_run_file, run_eval, select_questions
    from sqa.reasoner.models import DEFAULT_MODEL

    model = model or DEFAULT_MODEL
    idx = resolve_index_dir(index_dir).resolve()
    options = EvalOptions(split=split, model=model, decomposition=decomposition, k=k, index_dir=str(idx),
                          backend=backend, folds=folds, limit=limit, batch_size=batch_size, retrieval=retrieval,
                          decision=decision, signals=tuple(split_signals(signals)))
    out_dir = out or _default_out(split, decomposition if retrieval else f"{decomposition}-noretrieval", model)
    questions = select_questions(split, limit)
    info = _index_info(idx, backend)
    check_run_file(Path(out_dir), options, info)  # refuse a mismatched --out before showing progress
    console = Console(stderr=True)
    columns = [TextColumn("[bold]eval {task.description}"), BarColumn(), MofNCompleteColumn(), _RateColumn(),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[acc]}")]
    with Progress(*columns, console=console, speed_estimate_period=24 * 3600.0,
                  disable=not console.is_terminal) as progress:  # no bar frame in logs: an error stays one line
        tasks: list = []

        def on_progress(p) -> None:
            acc = f"acc {p.accuracy:.3f} ({p.correct}/{p.scored})" if p.accuracy is not None else ""
            if not tasks:  # start at what earlier sessions did, so the rate counts this session only
                tasks.append(progress.add_task(split, total=p.total, completed=p.done, acc=acc))
            progress.update(tasks[0], completed=p.done, acc=acc)

        summary = run_eval(options, out_dir, _reasoner_factory(model, idx, backend, k, retrieval,
                                                                          decision=options.decision,
                                                                          extra_signals=options.signals), questions=questions,
                           index_info=info, on_progress=on_progress)
    if summary.repaired_bytes:
        console.print(f"dropped a cut last line ({summary.repaired_bytes} bytes) of {out_dir}/traces.jsonl")
    out = Console()
    m = summary.metrics
    if m:
        out.print(metrics_table({"n": m["n"], "Accuracy": m["Accuracy"], "majority (always no)": m["majority_baseline"]["Accuracy"],
                                 "Recall@10": m["Recall@10"], "SARI": m["SARI"], "ECE": m["ECE"],
                                 "seconds/question": m["seconds_per_question"]}, f"sqa eval {split} ({decomposition})"))
    state = "interrupted" if summary.interrupted else ("complete" if summary.complete else "incomplete")
    typer.echo(f"{state}: {summary.done}/{summary.total} questions ({summary.new} new) -> {out_dir} "
               f"({', '.join(p.name for p in summary.files)})")
    if summary.interrupted:
        raise KeyboardInterrupt


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


def _register_retrieval() -> None:
    """Register ``sqa eval retrieval`` from sqa.cli.eval_retrieval if that module exists."""
    import importlib.util

    if importlib.util.find_spec("sqa.cli.eval_retrieval") is None:
        return
    from sqa.cli import eval_retrieval

    if any(c.name == "retrieval" for c in eval_app.registered_commands):
        return  # the module registered itself on import
    register = getattr(eval_retrieval, "register", None)
    if callable(register):
        register(eval_app)
        return
    for name in ("eval_retrieval_command", "retrieval_command", "eval_retrieval", "retrieval"):
        fn = getattr(eval_retrieval, name, None)
        if callable(fn):
            eval_app.command("retrieval")(fn)
            return


_register_retrieval()
