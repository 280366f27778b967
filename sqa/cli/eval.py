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


def _digest(path: Path) -> str:
    """sha256 (12 hex) of a file's bytes, or of a directory's files (names and bytes, sorted)."""
    import hashlib

    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        h.update(str(p.relative_to(path) if path.is_dir() else p.name).encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:12]


def _load_head(model: str, retrieval: bool, oracle: Optional[str], head: Optional[Path], split: str,
               questions=None):
    """(the answer head for this run, its identity "<kind>:<12 hex of the sha256 of its model, spec,
    intercept and first 64 coefficients>"). Refuses a
    split the head was trained on (its accuracy there would be in-sample)."""
    import hashlib

    from sqa.reasoner.facts_reasoner import head_for

    kind = "facts" if (retrieval or oracle) else "plain"
    h = head_for(model, kind, head)
    trained_on = h.provenance.get("train_split")
    if trained_on == "train-2061" and questions is not None:
        from sqa.strategyqa import load_questions

        seen = {q.qid for q in load_questions("train-2061")}
        inside = [q.qid for q in questions if q.qid in seen]
        if inside:
            raise SqaError(f"{len(inside)} question(s) of the dataset (e.g. {inside[0]}) are train-2061 questions the "
                           "answer head was trained on; their accuracy would be in-sample: leave them out")
    if trained_on == "train-2061" and split in ("train", "train-2061", "all"):
        raise SqaError(f"the answer head was trained on train-2061, so its accuracy on {split} would be in-sample; "
                       "its cross-validated (out-of-fold) accuracy is in the report of `sqa train-head` "
                       "(bench/results/head.json for the shipped head); evaluate on dev or test, or use --reader steps")
    digest = hashlib.sha256(json.dumps({"spec": h.spec.to_dict(), "coef": h.coef.tolist()[:64], "b": h.intercept,
                                        "model": h.model}, sort_keys=True).encode()).hexdigest()[:12]
    return h, f"{kind}:{digest}"


def _facts_factory(model: str, index_dir: Path, backend: str, k: int, retrieval: bool, head, oracle, features_cache):
    """``pool -> FactsReasoner`` (built once; the facts reader's demonstrations are fixed, so the
    few-shot pool does not change it)."""
    state: dict = {}

    def reasoner_for(pool):
        if "r" not in state:
            from sqa.indexing import open_backend
            from sqa.reasoner.facts_reasoner import FactsReasoner
            from sqa.reasoner.models import load_model
            from sqa.retriever.steps import StepRetriever
            from sqa.train_head import model_sha256

            be = ret = None
            if retrieval or oracle:
                if backend == "embedded" and not (index_dir / "meta.json").exists():
                    raise SqaError(f"{index_dir}: no index here; build one with `sqa index --preset mini --index-dir "
                                   f"{index_dir}` or pass --index-dir")
                be = open_backend(index_dir, backend)
                ret = StepRetriever(be)
            lm = load_model(model)
            head.check_model(Path(model).name, model_sha256(lm))
            state["r"] = FactsReasoner(lm, head, ret, k=k, oracle=oracle, backend=be,
                                       features_cache=features_cache)
        return state["r"]

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
    decomposition: Annotated[Optional[str], typer.Option("--decomposition",
                                               help="predicted (decomposer) | gold (annotated steps) | question (one step). "
                                                    "Default: question for --reader facts, predicted for --reader steps.",
                                               show_default=False)] = None,
    reader: Annotated[str, typer.Option("--reader", help="facts (default: a few selected facts, trained answer head) | "
                                        "steps (decompose, read evidence per step, verbalised answer).")] = "facts",
    oracle: Annotated[Optional[str], typer.Option("--oracle", help="Diagnostic upper bound, never a default: facts (the "
                                                  "question's annotated facts) | paragraphs (its annotated evidence "
                                                  "paragraphs). Refused on test.", show_default=False)] = None,
    head: Annotated[Optional[Path], typer.Option("--head", help="Answer head file (default: the one trained for --model "
                                                 "by `sqa train-head`, else the shipped one).", show_default=False)] = None,
    dataset: Annotated[Optional[Path], typer.Option("--dataset", help="Evaluate any question file in StrategyQA's format "
                                                    "(.json list, .jsonl, or a local `datasets` directory) instead of "
                                                    "--split; Recall@10/SARI only where annotated.",
                                                    show_default=False)] = None,
    features_cache: Annotated[Optional[Path], typer.Option("--features-cache", help="A features file from `sqa train-head` "
                                                           "made with the same model and settings: questions in it are "
                                                           "not read again.", show_default=False)] = None,
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
    decomposition = decomposition or ("question" if reader == "facts" else "predicted")
    dataset_id, dataset_questions = "", None
    if dataset is not None:
        from sqa.strategyqa import load_dataset_file

        dataset_questions = load_dataset_file(dataset)
        split = "custom"
        dataset_id = f"{dataset.name}:{_digest(dataset)}"
    idx = resolve_index_dir(index_dir).resolve()
    head_obj = head_id = None
    if reader == "facts":
        head_obj, head_id = _load_head(model, retrieval, oracle, head, split, dataset_questions)
    options = EvalOptions(split=split, model=model, decomposition=decomposition, k=k, index_dir=str(idx),
                          backend=backend, folds=folds, limit=limit, batch_size=batch_size, retrieval=retrieval,
                          decision=decision, signals=tuple(split_signals(signals)), reader=reader, oracle=oracle,
                          head=head_id or "", dataset=dataset_id)
    tag = decomposition if retrieval else f"{decomposition}-noretrieval"
    if reader == "facts":
        tag = f"facts{'-oracle-' + oracle if oracle else ''}{'' if retrieval else '-noretrieval'}"
    out_dir = out or _default_out(dataset.stem if dataset is not None else split, tag, model)
    questions = select_questions(split, limit) if dataset_questions is None else dataset_questions[:limit] \
        if limit else dataset_questions
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

        factory = (_facts_factory(model, idx, backend, k, retrieval, head_obj, oracle, features_cache)
                   if reader == "facts" else
                   _reasoner_factory(model, idx, backend, k, retrieval, decision=options.decision,
                                     extra_signals=options.signals))
        summary = run_eval(options, out_dir, factory, questions=questions, index_info=info, on_progress=on_progress)
    if summary.repaired_bytes:
        console.print(f"dropped a cut last line ({summary.repaired_bytes} bytes) of {out_dir}/traces.jsonl")
    out = Console()
    m = summary.metrics
    if m:
        out.print(metrics_table({"n": m["n"], "Accuracy": m["Accuracy"], "majority (always no)": m["majority_baseline"]["Accuracy"],
                                 "Recall@10": m["Recall@10"], "SARI": m["SARI"], "ECE": m["ECE"],
                                 "seconds/question": m["seconds_per_question"]},
                                f"sqa eval {split} ({reader}{', ORACLE ' + oracle if oracle else ''}, {decomposition})"))
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
