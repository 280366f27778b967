"""The out-of-fold run of ``sqa eval`` (``--split train | train-2061 | all`` with the facts reader,
and dev / test / ``--dataset`` questions a head was fitted on): features read once into the store
(:class:`sqa.facts.store.FeaturesStore`, resumable, progress with rate and ETA), cross-fitted by
:mod:`sqa.eval.oof`, and the model's heads written to ``$SQA_HOME/heads`` (issue 35).
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sqa.models.registry import model_stem
from sqa.types import SqaError

TRAIN_SPLITS = ("train", "train-2061", "all")
OOF_SETTINGS = {"sentence_paragraphs": 3}  # the fact settings of an out-of-fold run (as the shipped heads)


def _model_sha(model: str) -> str | None:
    """sha256 of the reader's model file without loading it: the registry's (checked when the GGUF
    was assembled) for a built-in model, the file's for a ``.gguf`` path, None otherwise (a Hugging
    Face checkpoint or a served model)."""
    import hashlib

    from sqa.models.registry import MODELS

    if model in MODELS:
        return MODELS[model].sha256
    p = Path(model).expanduser()
    if p.suffix == ".gguf" and p.is_file():
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        return h.hexdigest()
    return None


def _oof_pool(model: str, retrieval: bool, head: Path | None, split: str, questions) -> tuple[list, dict] | None:
    """None when the run is answered by one head; else ``(pool, fact settings)`` for an out-of-fold
    run: ``pool`` = further questions the heads are fitted on (empty for train / train-2061 / all,
    whose own questions are; a head's ``fitted_qids`` when it was fitted on some of ``questions``)."""
    from sqa.facts.reader import head_for

    if split in TRAIN_SPLITS:
        if head is not None:
            raise SqaError(f"--head with --split {split}: these questions are answered out-of-fold by heads fitted on the "
                           "other folds; leave --head out (or evaluate that head on dev or test)")
        return [], dict(OOF_SETTINGS)
    try:
        h = head_for(model, "facts" if retrieval else "plain", head)
    except SqaError:
        return None  # load_head names the missing head in one line
    fitted = h.provenance.get("fitted_qids")
    if not isinstance(fitted, list):
        return None
    seen = set(fitted)
    overlap = [q.qid for q in questions if q.qid in seen]
    if not overlap:
        return None
    if head is not None:
        raise SqaError(f"--head {head}: it was fitted on {len(overlap)} of these questions (e.g. {overlap[0]}), so its "
                       "accuracy there would be in-sample; leave --head out to answer them out-of-fold")
    from sqa.strategyqa import questions_by_id

    known = questions_by_id()
    facts = h.provenance.get("facts") or {}
    return [known[q] for q in fitted if q in known], {"sentence_paragraphs": facts.get("sentence_paragraphs"),
                                                     "wiki": facts.get("wiki", 3), "train": facts.get("train", 2),
                                                     "max_words": facts.get("max_words", 40),
                                                     "scorer": facts.get("scorer", "bm25"),
                                                     "step_facts": facts.get("step_facts", 0)}


def _eval_oof(*, split, limit, out, model, k, folds, retrieval, idx, backend, questions, pool, dataset_id, preset,
              stem, base_url=None) -> None:
    """The out-of-fold run (``sqa.eval.oof``): read the missing features into the store (resumable,
    progress with rate and ETA), cross-fit, write the run folder and, for train / train-2061 / all,
    the model's heads to ``$SQA_HOME/heads``. ``base_url``: the server of a served model
    (``openai:NAME``, whose features are log-odds only, so its heads are too)."""
    from sqa.cli.eval import _default_out, metrics_table
    from sqa.eval.oof import oof_head_identity, run_oof
    from sqa.eval.options import EvalOptions
    from sqa.eval.rundir import check_run_file
    from sqa.facts.features import FactSettings
    from sqa.facts.store import FeaturesStore, store_meta
    from sqa.paths import sqa_home
    from sqa.pipeline import index_info

    pool, settings_dict = pool
    settings = FactSettings(k=k, **settings_dict)
    kind = "facts" if retrieval else "plain"
    options = EvalOptions(split=split, model=model, decomposition="question", k=k, backend=backend, folds=folds,
                          limit=limit, batch_size=1, retrieval=retrieval, reader="facts", oracle=None,
                          head=oof_head_identity(folds, kind), dataset=dataset_id, preset=preset)
    info = index_info(idx, backend)
    out_dir = Path(out or _default_out(stem, "facts-oof" + ("" if retrieval else "-noretrieval"), model))
    check_run_file(out_dir, options, info)
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SqaError("an out-of-fold run fits answer heads, which needs scikit-learn: pip install 'sqa[models]'") \
            from None
    safe = model_stem(model)
    sha = _model_sha(model)
    err = Console(stderr=True)
    with FeaturesStore(FeaturesStore.default_root(safe, settings), store_meta(safe, sha, settings, info)) as store:
        done = store.read()
        missing_pool = [q for q in pool if q.qid not in done]
        if missing_pool:
            raise SqaError(f"the answer head of {safe} was fitted on {len(pool):,} questions, {len(missing_pool):,} of whose "
                           f"features are not in {store.root}; run `sqa eval --split train --model {model}` first")
        need = [q for q in questions if q.qid not in done]
        if need:
            _read_features(store, need, done, model, settings, idx, backend, err, total=len(questions),
                           base_url=base_url)
        err.print(f"cross-fitting {len({q.qid for q in [*questions, *pool]}):,} questions ({folds} term-grouped folds)…")
        prov = {"prompt": store.meta["prompt"], "facts": settings.to_dict(), "fitted_on": split if not pool else
                "the questions of the head it replaces", "index": info.get("preset"),
                "index_identity": store.meta["index"], "features": str(Path("features") / safe / store.root.name)}
        summary, cf = run_oof(options, out_dir, questions, done, pool=pool, model=safe, model_sha256=sha,
                              provenance=prov, index_info=info, kind=kind, log=err.print)
    if not pool:
        heads = sqa_home() / "heads"
        for name, h in cf.heads.items():
            h.save(heads / f"{safe}.{name}.json")
        err.print(f"answer heads of {safe} ({', '.join(cf.heads)}; fitted on {len(cf.heads['plain'].provenance['fitted_qids']):,} "
                  f"questions) -> {heads}")
    m = summary.metrics
    if m:
        oof = m["out_of_fold"]
        table = {"n": m["n"], "Accuracy": m["Accuracy"],
                 "95 % interval": "–".join(f"{v:.4f}" for v in m["Accuracy_interval95"] or []),
                 "AUC": m["AUC"], "majority (always no)": m["majority_baseline"]["Accuracy"],
                 "Recall@10": m["Recall@10"], "ECE": m["ECE"]}
        for kind_, v in oof["without_demonstrations"].items():
            table[f"{kind_} head, without the demonstrations (n={v['n']})"] = v["accuracy"]
        Console().print(metrics_table(table, f"sqa eval {split} (facts reader, {m['protocol']})"))
    typer.echo(f"complete: {summary.done}/{summary.total} questions, {m['protocol'] if m else 'out-of-fold'} -> "
               f"{out_dir} ({', '.join(p.name for p in summary.files)})")


def _read_features(store, need, done, model, settings, idx, backend, err, total, base_url=None) -> None:
    """Read the features of ``need`` into ``store`` (one fsync'd line per question); Ctrl-C keeps
    what is finished and re-raises."""
    import time

    from sqa.facts.features import FactSelector
    from sqa.facts.training import model_sha256
    from sqa.models.registry import load_model
    from sqa.paths import sqa_home
    from sqa.pipeline import open_index
    from sqa.retriever.steps import StepRetriever

    be = open_index(idx, backend)
    try:
        with err.status(f"loading {model}…"):
            lm = load_model(model, base_url=base_url) if base_url else load_model(model)
        sha = model_sha256(lm)
        if store.meta["model_sha256"] not in (None, sha):
            raise SqaError(f"{model}: its file's sha256 ({(sha or '?')[:12]}…) is not the one this run expects; "
                           "re-assemble the model (delete it from $SQA_HOME/models)")
        sel = FactSelector(StepRetriever(be), settings)
        decompose = None
        if sel.needs_steps:
            from sqa.steps.decomposer import Decomposer

            decompose = Decomposer(lm, encode=sel.step_encode, require_minilm=True, cache_dir=sqa_home() / "cache")
        warm = getattr(lm, "warm_prefixes", None)
        if warm is not None:
            from sqa.facts.prompt import facts_prefix, plain_prefix

            warm([plain_prefix(), facts_prefix()], sqa_home() / "cache")
        cols = (TextColumn("[bold]features"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        t0, n = time.perf_counter(), [0]
        have = total - len(need)
        with Progress(*cols, console=err, disable=not err.is_terminal) as prog:
            task = prog.add_task("features", total=total, completed=have, rate="")

            def tick(qf) -> None:
                n[0] += 1
                per = (time.perf_counter() - t0) / n[0]
                prog.update(task, advance=1, rate=f"{per:.1f} s/q")
                if not err.is_terminal and (n[0] % 25 == 0 or n[0] == len(need)):  # logs get a line now and then
                    left = (len(need) - n[0]) * per
                    err.print(f"features {have + n[0]}/{total} ({per:.1f} s/question, ETA {left / 60:.0f} min)")

            try:
                store.extract(lm, sel, need, done, on_question=tick, decompose=decompose)
            except KeyboardInterrupt:
                err.print(f"interrupted: the features of {have + n[0]:,} of {total:,} questions are saved in "
                          f"{store.root}; run the same command to continue")
                raise
    finally:
        be.close()
