"""The out-of-fold run of the facts reader as one library call (``sqa eval --split train`` and
dev / test / ``--dataset`` questions a head was fitted on, issue 35): features read once into the
store (:class:`sqa.facts.store.FeaturesStore`, resumable), cross-fitted by :mod:`sqa.eval.oof`,
the run folder written and, for train / train-2061 / all, the model's answer heads saved to
``$SQA_HOME/heads``. Progress goes to a callback (:class:`sqa.eval.oof.OofProgress`); nothing
is printed.
"""

from __future__ import annotations

import time
from pathlib import Path

from sqa.eval.oof import OofOptions, OofProgress, ProgressCallback
from sqa.eval.results import Run, default_run_dir
from sqa.types import SqaError, StoreMismatch


def _quiet(event: OofProgress) -> None:
    pass


def oof_run_dir(options: OofOptions) -> Path:
    """The run folder of ``options``: ``options.out``, else ``runs/eval/<stem>-facts-oof-<model>``."""
    tag = "facts-oof" + ("" if options.retrieval else "-noretrieval")
    return Path(options.out or default_run_dir(options.stem or options.split, tag, options.model))


def run_out_of_fold(options: OofOptions, progress: ProgressCallback | None = None) -> Run:
    """Answer ``options.questions`` out-of-fold and return the :class:`sqa.eval.results.Run`
    (``metrics`` adds ``protocol`` and ``out_of_fold``; ``heads``: the head files written, kind ->
    path, for train / train-2061 / all).

    Resumable: features already in the store are not read again; Ctrl-C (KeyboardInterrupt) keeps
    every finished question's features and is re-raised after an "interrupted" event. Raises
    SqaError (one line) for a run folder holding another run, a missing index or model, a model
    file other than the store's (:class:`sqa.types.StoreMismatch`), a head's fitted questions
    missing from the store, or without scikit-learn (the ``models`` extra)."""
    from sqa.eval.oof import run_oof
    from sqa.eval.rundir import check_run_file
    from sqa.facts.features import FactSettings
    from sqa.facts.store import FeaturesStore, question_key, store_meta
    from contextlib import closing, nullcontext

    from sqa.models.registry import is_served, model_file_sha256, model_stem
    from sqa.models.served_probe import served_identity
    from sqa.pipeline import index_info

    from sqa.pipeline import open_index

    progress = progress or _quiet
    settings = FactSettings(k=options.k, **options.settings)
    open_index(options.index_dir, options.backend).close()  # a missing index or a server that is down: named as such
    check_enough(options)  # before any question is read (issue 41 item 12)
    info = index_info(options.index_dir, options.backend)
    out_dir = oof_run_dir(options)
    record: dict = {"settings": options.reader.to_dict()}
    if options.pool:  # the head whose questions the run is cross-fitted with (issue 41 item 8)
        from sqa.facts.heads import fitted_count
        from sqa.facts.reader import head_for

        h = head_for(options.model, options.kind, form=settings.form)
        record["head"] = {"file": h.source, "fitted_on": fitted_count(h)}
    check_run_file(out_dir, options.eval_options(), info, record)
    try:
        import sklearn  # noqa: F401
    except ImportError:
        raise SqaError(
            "an out-of-fold run fits answer heads, which needs scikit-learn: pip install 'sqa[models]'"
        ) from None
    safe = model_stem(options.model)
    sha = model_file_sha256(options.model)
    pool, questions = list(options.pool), list(options.questions)
    # a served model loads first (a recorded load sends no request): its weights' identity keys the store
    fr = _features_reader(options, settings, progress) if is_served(options.model) else None
    served = served_identity(fr.model) if fr is not None else None
    meta = store_meta(safe, sha, settings, info, served)
    with (
        closing(fr) if fr is not None else nullcontext(),
        FeaturesStore(FeaturesStore.default_root(safe, settings), meta) as store,
    ):
        done = store.read()
        missing_pool = [q for q in pool if question_key(q) not in done]
        if missing_pool:
            raise SqaError(
                f"the answer head of {safe} was fitted on {len(pool):,} questions, {len(missing_pool):,} of "
                f"whose features are not in {store.root}; run `sqa eval --split train --model "
                f"{options.model}` first"
            )
        need = [q for q in questions if question_key(q) not in done]  # qid and text (issue 41 item 3)
        if need:
            _read_features(store, need, done, options, settings, progress, total=len(questions), fr=fr)
        n = len({q.qid for q in [*questions, *pool]})
        progress(
            OofProgress("crossfit", message=f"cross-fitting {n:,} questions ({options.folds} term-grouped folds)…")
        )
        prov = {
            "prompt": store.meta["prompt"],
            "facts": settings.to_dict(),
            "fitted_on": options.split if not pool else "the questions of the head it replaces",
            "index": info.get("preset"),
            "index_identity": store.meta["index"],
            "features": str(Path("features") / safe / store.root.name),
            **({"served": store.meta["served"]} if "served" in store.meta else {}),
        }
        records = {q.qid: done[question_key(q)] for q in [*pool, *questions]}  # the run's own text wins
        summary, cf = run_oof(
            options.eval_options(),
            out_dir,
            questions,
            records,
            pool=pool,
            model=safe,
            model_sha256=sha,
            provenance=prov,
            index_info=info,
            kind=options.kind,
            log=lambda line: progress(OofProgress("crossfit", message=line)),
        )
        if fr is not None:
            _record_served(out_dir, fr.model, read=len(need), stored=len(questions) - len(need))
    heads: dict[str, Path] = {}
    if not pool and options.write_heads:
        from sqa.facts.heads import save_heads
        from sqa.facts.store import settings_key

        said = lambda line: progress(OofProgress("heads", message=line))  # noqa: E731
        for path, best in save_heads(cf.heads, safe, settings_key(settings), options.replace_heads, said):
            kind = path.name[len(safe) + 1 :].split(".", 1)[0]
            heads[kind] = path
            n = len(cf.heads[kind].provenance["fitted_qids"])
            note = (
                "it answers from now on"
                if best.path == path
                else (
                    f"{best.name} ({'shipped, ' if best.shipped else ''}fitted on {best.n:,} questions) still answers; "
                    + (f"--head {path} uses this one" if best.shipped else "--replace-heads makes this one answer")
                )
            )
            progress(OofProgress("heads", message=f"answer head fitted on {n:,} questions -> {path}; {note}"))
    return Run.from_summary(summary, heads)


def check_enough(options: OofOptions) -> None:
    """SqaError before any question is read when the run's labelled questions cannot be cross-fitted
    (``sqa.facts.crossfit.crossfit_shortfall``), saying how many of the split's first questions would do."""
    from sqa.eval.oof import TRAIN_SPLITS
    from sqa.facts.crossfit import crossfit_shortfall
    from sqa.facts.prompt import demo_qids

    demos = demo_qids()
    why = crossfit_shortfall([*options.questions, *options.pool], options.folds, demos)
    if why is None:
        return
    hint, split, folds = "use more questions", options.split, options.folds
    if split in TRAIN_SPLITS:
        from sqa.eval.protocols import first_enough

        need = first_enough(split, folds)
        if need is not None:
            hint = f"--limit {need} or more (the first {need} questions of {split} do)"
    limit = f" --limit {options.limit}" if options.limit else ""
    raise SqaError(
        f"--split {split}{limit}: cross-fitting needs labelled questions of both answers on at least {folds} "
        f"terms ({why}, the demonstration questions left out); {hint}; nothing was read"
    )


def _record_served(out_dir: Path, model, read: int, stored: int) -> None:
    """A served run's ``run.json``: ``server`` (its ``server_info``: endpoint, fingerprint, whether
    the server was contacted or its identity taken as recorded) and ``cost``, this session's calls
    sent and answered from the response cache, tokens, and how many questions' features were read
    (``features_read``) or taken from the store (``features_stored``)."""
    import json

    from sqa.eval.runner import RUN_FILE, _record_server
    from sqa.jsonio import write_json_atomic

    _record_server(out_dir, dict(model.server_info))
    path = out_dir / RUN_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    recorded["cost"] = {**model.cost.to_dict(), "features_read": read, "features_stored": stored}
    write_json_atomic(path, recorded)


def _features_reader(options: OofOptions, settings, progress: ProgressCallback):
    """``sqa.pipeline.features_reader`` for the run's model, reporting that it loads."""
    from sqa.pipeline import features_reader

    return features_reader(
        options.model,
        settings,
        options.index_dir,
        options.backend,
        base_url=options.base_url,
        on_loading=lambda m: progress(OofProgress("loading", message=f"loading {m}…")),
    )


def _read_features(
    store, need, done, options: OofOptions, settings, progress: ProgressCallback, total: int, fr=None
) -> None:
    """Read the features of ``need`` into ``store`` (one fsync'd line per question), reporting each,
    with ``fr`` (a features reader the caller closes; None: one loaded and closed here); Ctrl-C
    keeps what is finished and re-raises."""
    from sqa.facts.training import model_sha256

    own = fr is None
    fr = _features_reader(options, settings, progress) if own else fr
    try:
        sha = model_sha256(fr.model)
        if store.meta["model_sha256"] not in (None, sha):
            raise StoreMismatch(
                f"{options.model}: its file's sha256 ({(sha or '?')[:12]}…) is not the one this run "
                "expects; re-assemble the model (delete it from $SQA_HOME/models)"
            )
        have = total - len(need)
        t0, n = time.perf_counter(), [0]
        progress(OofProgress("features", done=have, total=total))

        def tick(qf) -> None:
            n[0] += 1
            progress(
                OofProgress(
                    "features", done=have + n[0], total=total, seconds_per_question=(time.perf_counter() - t0) / n[0]
                )
            )

        try:
            store.extract(fr.model, fr.selector, need, done, on_question=tick, decompose=fr.decompose)
        except KeyboardInterrupt:
            progress(
                OofProgress(
                    "interrupted",
                    done=have + n[0],
                    total=total,
                    message=f"interrupted: the features of {have + n[0]:,} of {total:,} questions are saved "
                    f"in {store.root}; run the same command to continue",
                )
            )
            raise
    finally:
        if own:
            fr.close()
