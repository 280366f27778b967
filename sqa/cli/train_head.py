"""``sqa train-head``: extract the facts reader's features over train-2061 (resumable), choose the
feature set by term-grouped cross-validation, fit the answer heads and write them with their
report.

    sqa train-head [--model M] [--limit 2055] [--sentence-paragraphs 3] [--features DIR] [--out-dir DIR]
                   [--index-dir INDEX_DIR]

The defaults rebuild the shipped heads: all 2,055 questions (about 3 h 15 min of feature
extraction on 2 cores, 5.7 s a question; the features for them are also kept in
bench/results/features/top3/, which ``--features`` reads once decompressed).

Writes ``OUT_DIR/<model>.facts.json`` and ``OUT_DIR/<model>.plain.json`` (default OUT_DIR:
``$SQA_HOME/heads``, where ``sqa ask``/``sqa eval`` look first) and ``OUT_DIR/<model>.cv.json``
(every feature set's out-of-fold accuracy, the paired facts-vs-plain difference). Features go to
``FEATURES/train-2061.jsonl`` (default ``$SQA_HOME/features/<model>``); run the command again after an
interruption to continue.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt, resolve_index_dir
from sqa.types import SqaError


def features_meta(model_name: str, sha: str | None, settings, index_info: dict) -> dict:
    """What a features file was made with; a cache is reused only when this matches."""
    from sqa.facts.prompt import PROMPT_VERSION

    return {"model": model_name, "model_sha256": sha, "prompt": PROMPT_VERSION, "facts": settings.to_dict(),
            "index_paragraphs": index_info.get("paragraph_count"), "index_preset": index_info.get("preset")}


def check_meta(dir_: Path, meta: dict) -> None:
    """Write ``dir_/meta.json`` or refuse a features directory made with other settings."""
    path = dir_ / "meta.json"
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise SqaError(f"{path}: not valid JSON; use another --features directory") from None
        diff = [k for k in meta if old.get(k) != meta[k]]
        if diff:
            raise SqaError(f"{dir_}: features made with other settings ({', '.join(diff)}); use another --features "
                           "directory")
        return
    dir_.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


@app.command("train-head")
def train_head_command(
    model: Annotated[str, typer.Option("--model", help="Reader model: qwen2.5-coder-1.5b (default), a .gguf file or a "
                                                       "Hugging Face checkpoint.")] = "qwen2.5-coder-1.5b",
    limit: Annotated[int, typer.Option("--limit", help="Train on the first N train-2061 questions (release order; the 6 "
                                                       "demonstration questions left out). 2,055 = all, as "
                                                       "the shipped heads; 600+ to decide anything.")] = 2055,
    features: Annotated[Optional[Path], typer.Option("--features", help="Features directory (resumable cache; default "
                                                     "$SQA_HOME/features/MODEL).", show_default=False)] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out-dir", help="Where the heads and the CV report go (default "
                                                    "$SQA_HOME/heads).", show_default=False)] = None,
    folds: Annotated[int, typer.Option("--folds", help="Cross-fitting folds, grouped by StrategyQA term.")] = 5,
    sentence_paragraphs: Annotated[int, typer.Option(
        "--sentence-paragraphs", help="Pick the Wikipedia facts from the best N of the 10 retrieved paragraphs "
                                      "(3, as the shipped heads; 10 = all). Recorded in the head, which then "
                                      "reads the same way.")] = 3,
    scorer: Annotated[str, typer.Option("--scorer", help="How the facts are ranked: bm25 (as the shipped heads) or "
                                                          "minilm (cosine of all-MiniLM-L6-v2 embeddings). Recorded "
                                                          "in the head.")] = "bm25",
    step_facts: Annotated[int, typer.Option("--step-facts", help="Show first the best sentence of each step of the "
                                                                  "model's own decomposition, at most N of them (0: none, "
                                                                  "as the shipped heads; needs the MiniLM weights; about "
                                                                  "+10 s a question on 2 cores). Recorded in the head.")] = 0,
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Train the answer heads (facts and no-retrieval) for a reader model on train-2061."""
    from sqa.facts.features import FactSelector, FactSettings, extract
    from sqa.indexing import open_backend
    from sqa.paths import sqa_home
    from sqa.facts.prompt import demo_qids
    from sqa.models.registry import load_model
    from sqa.retriever.steps import StepRetriever
    from sqa.strategyqa import load_questions, questions_by_id
    from sqa.facts.training import Dataset, candidate_specs, cross_validate, fit_heads, model_sha256, report

    if limit < 20:
        raise SqaError(f"--limit {limit}: too few questions to cross-validate; use at least 20 (600+ to decide)")
    if folds < 2:
        raise SqaError(f"--folds must be at least 2 (got {folds})")
    if not 1 <= sentence_paragraphs <= 10:
        raise SqaError(f"--sentence-paragraphs must be between 1 and 10 (got {sentence_paragraphs})")
    FactSettings(scorer=scorer, step_facts=step_facts)  # bad --scorer / --step-facts named before the model loads
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SqaError("sqa train-head needs scikit-learn: pip install 'sqa[models]'") from None
    safe = Path(model).name
    idx = resolve_index_dir(index_dir)
    err = Console(stderr=True)
    with err.status(f"loading {model} and the index…"):
        be = open_backend(idx, backend)
        from sqa.pipeline import index_info as _index_info

        info = _index_info(idx, backend)
        lm = load_model(model)
        sha = model_sha256(lm)
    settings = FactSettings(sentence_paragraphs=sentence_paragraphs, scorer=scorer, step_facts=step_facts)
    feat_dir = features or sqa_home() / "features" / safe
    check_meta(feat_dir, features_meta(safe, sha, settings, info))
    demos = demo_qids()
    questions = [q for q in load_questions("train-2061") if q.qid not in demos][:limit]
    path = feat_dir / "train-2061.jsonl"
    sel = FactSelector(StepRetriever(be), settings)
    decompose = None
    if sel.needs_steps:
        from sqa.steps.decomposer import Decomposer

        decompose = Decomposer(lm, encode=sel.step_encode, require_minilm=True, cache_dir=sqa_home() / "cache")
    cols = (TextColumn("[bold]features"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*cols, console=err) as prog:
        from sqa.facts.features import read_done

        done = read_done(path)  # once, not once per question
        have = sum(1 for q in questions if q.qid in done)
        task = prog.add_task("features", total=len(questions), completed=have, rate="")
        t0, n = time.perf_counter(), [0]

        def tick(qf) -> None:
            n[0] += 1
            prog.update(task, advance=1, rate=f"{(time.perf_counter() - t0) / n[0]:.1f} s/q")

        records = extract(lm, sel, questions, path, on_question=tick, decompose=decompose)
    ds = Dataset.build(list(records.values()), questions_by_id())
    err.print(f"cross-validating {len(ds.y)} questions ({len(set(ds.groups.tolist()))} terms, {folds} folds)…")
    rows = cross_validate(ds, candidate_specs(settings.wiki + settings.train), folds, log=err.print)
    rep = report(ds, rows)
    prov = {"prompt": features_meta(safe, sha, settings, info)["prompt"], "facts": settings.to_dict(),
            "train_split": "train-2061", "train_qids": "first N of train-2061 in release order without the 6 "
            "demonstration questions", "folds": folds, "grouped_by": "term", "index": info.get("preset")}
    heads = fit_heads(ds, rows, safe, sha, prov, folds)
    out = out_dir or sqa_home() / "heads"
    out.mkdir(parents=True, exist_ok=True)
    for kind, head in heads.items():
        head.save(out / f"{safe}.{kind}.json")
    cv_path = out / f"{safe}.cv.json"
    cv_path.write_text(json.dumps({"report": rep, "provenance": prov,
                                   "rows": [{k: v for k, v in r.items() if k != "oof"} for r in rows],
                                   "oof": {"qids": ds.qids, "plain": next(r["oof"] for r in rows if r["name"] == rep["plain_name"]),
                                           "facts": next(r["oof"] for r in rows if r["name"] == rep["chosen_facts"])}},
                                  indent=1) + "\n", encoding="utf-8")
    table = Table(title=f"answer heads for {safe}: out-of-fold on {rep['n']} train-2061 questions")
    for c in ("head", "features", "accuracy", "95 % interval", "AUC"):
        table.add_column(c)
    for kind, key in (("plain (no retrieval)", "plain_head"), ("facts", "facts_prefix")):
        r = rep[key]
        name = rep["plain_name"] if key == "plain_head" else rep["chosen_facts"]
        table.add_row(kind, name, f"{r['accuracy']:.3f}", f"{r['interval95'][0]:.3f}-{r['interval95'][1]:.3f}", f"{r['auc']:.3f}")
    Console().print(table)
    d = rep["facts_minus_plain"]
    typer.echo(f"facts - plain: {d['difference']:+.3f} (95 % {d['interval95'][0]:+.3f} to {d['interval95'][1]:+.3f}), "
               f"paired on {d['paired_on']}; heads -> {out}")
