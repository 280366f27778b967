"""The out-of-fold run of the facts reader (``sqa eval --split train | train-2061 | all``, and dev /
test / ``--dataset`` questions a head was fitted on): every labelled question answered by a head
fitted on the other folds (:func:`sqa.facts.crossfit.crossfit`), written as a usual run folder.

The per-question features (:class:`sqa.facts.features.FeaturesStore`) are the resume state; the
cross-fitting is deterministic, so ``traces.jsonl`` is rewritten whole from them at the end of
every complete session (under the run folder's lock) and ``predictions.json``, ``metrics.json``,
``report.md``/``report.png`` regenerated from it (:func:`sqa.eval.run_metrics.finalize_run`).
``metrics.json`` adds ``out_of_fold``: its ``scheme`` ("out-of-fold, 5 term-grouped folds") and
``note``, both heads' accuracy with its interval and AUC with and without the demonstration
questions, the feature set and C chosen in each fold, the seconds the cross-fitting took.
(``protocol`` there, as in ``run.json``, is the named question set, ``sqa.eval.protocols``.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from sqa.eval.options import EvalOptions
from sqa.eval.rundir import TRACES_FILE, TraceLog, now
from sqa.eval.run_metrics import EvalSummary, finalize_run
from sqa.facts.crossfit import CrossFit, crossfit
from sqa.facts.prompt import QuestionFeatures, demo_qids

if TYPE_CHECKING:
    from sqa.settings import ReaderSettings
from sqa.facts.reader import features_result
from sqa.types import Question, SqaError

TRAIN_SPLITS = ("train", "train-2061", "all")  # answered out-of-fold by the facts reader
OOF_SETTINGS = {"sentence_paragraphs": 3}  # the fact settings of an out-of-fold run (as the shipped heads)


@dataclass
class OofOptions:
    """What defines an out-of-fold run of the facts reader (:func:`sqa.api.out_of_fold.run_out_of_fold`).

    ``questions``: the questions answered and written to the run (``split`` names them: train,
    train-2061, all, or dev / test / ``custom`` when a head was fitted on some of them); ``pool``:
    further labelled questions the heads are fitted on, not written (empty for the train splits);
    ``settings``: the fact settings (``sqa.facts.features.FactSettings`` fields but ``k``), from
    :func:`oof_pool`. ``reader``: the reader's ``sqa.settings.ReaderSettings`` (its preset, model,
    index, served options and top-k; run.json's ``settings``), read through :attr:`model`,
    :attr:`index_dir`, :attr:`backend`, :attr:`k`, :attr:`base_url`, :attr:`retrieval` and
    :attr:`preset`; a served model (``openai:NAME``) reads log-odds features and heads only.
    ``folds``: term-grouped folds (5). ``out``: the run folder (default
    ``runs/eval/<stem>-facts-oof[-noretrieval]-<model>``). ``write_heads``: save the final heads
    to ``$SQA_HOME/heads`` (only when ``pool`` is empty: heads fitted on the questions themselves),
    beside the others (``sqa.facts.heads.save_heads``); ``replace_heads``: remove the model's other
    heads of yours of that kind first."""

    split: str
    questions: Sequence[Question]
    reader: ReaderSettings
    folds: int = 5
    limit: Optional[int] = None
    out: Optional[Path] = None
    pool: Sequence[Question] = ()
    settings: dict = field(default_factory=lambda: dict(OOF_SETTINGS))
    dataset: str = ""  # "<file name>:<12 hex sha256>" of a --dataset file
    stem: str = ""  # the default run folder's first part (split or dataset file stem; default split)
    write_heads: bool = True
    protocol: str = ""  # the named question set (sqa.eval.protocols), recorded in run.json
    replace_heads: bool = False  # remove the model's other user heads of this kind (sqa.facts.heads.save_heads)

    model = property(lambda self: self.reader.model, doc="The model's name, as for ``sqa eval --model``.")
    index_dir = property(lambda self: self.reader.index_dir(), doc="The index folder.")
    backend = property(lambda self: self.reader.backend, doc="The index backend.")
    k = property(lambda self: self.reader.k if self.reader.k is not None else 10, doc="Paragraphs retrieved (top-k).")
    base_url = property(lambda self: self.reader.served, doc="The served model's ServedOptions, or None.")
    retrieval = property(lambda self: self.reader.preset.retrieval, doc="Whether the reader sees evidence.")
    preset = property(lambda self: self.reader.preset.name, doc="The preset's name: facts or no-retrieval.")

    @property
    def kind(self) -> str:
        """Which head answers: "facts", or "plain" without retrieval."""
        return "facts" if self.retrieval else "plain"

    def eval_options(self) -> EvalOptions:
        """The run's identity as ``run.json`` records it (the ``head`` option names the cross-fitting scheme)."""
        return EvalOptions(
            split=self.split,
            model=self.model,
            decomposition="question",
            k=self.k,
            backend=self.backend,
            folds=self.folds,
            limit=self.limit,
            batch_size=1,
            retrieval=self.retrieval,
            reader="facts",
            oracle=None,
            head=oof_head_identity(self.folds, self.kind),
            dataset=self.dataset,
            preset=self.preset,
            protocol=self.protocol,
            prompt_form=self.settings.get("form", "text"),
        )


@dataclass
class OofProgress:
    """One progress event of an out-of-fold run, given to its ``progress`` callback.

    ``stage``: "loading" (the model is loading; ``message`` names it), "features" (``done`` of
    ``total`` questions' features read, ``seconds_per_question`` over this session; one event
    before the first question and one after each), "interrupted" (Ctrl-C: what is read is saved;
    the run re-raises KeyboardInterrupt), "crossfit" (a line of the cross-fitting), "heads" (the
    final heads were written). ``message``: a line worth showing (empty for features ticks)."""

    stage: str
    done: int = 0
    total: int = 0
    seconds_per_question: Optional[float] = None
    message: str = ""


def oof_pool(
    model: str,
    retrieval: bool,
    head: str | Path | None,
    split: str,
    questions: Sequence[Question],
    form: str = "text",
) -> tuple[list[Question], dict] | None:
    """None when ``questions`` are answered by one head; else ``(pool, fact settings)`` for an
    out-of-fold run: ``pool`` = further questions the heads are fitted on (empty for train /
    train-2061 / all, whose own questions are; a head's ``fitted_qids`` when it was fitted on some
    of ``questions``). ``form``: the facts reader's prompt form (``sqa.facts.prompt``), kept in the
    settings. Raises SqaError for ``head`` (a file) given where its answers would be in-sample."""
    from sqa.facts.reader import head_for

    if split in TRAIN_SPLITS:
        if head is not None:
            raise SqaError(
                f"--head with --split {split}: these questions are answered out-of-fold by heads fitted on the "
                "other folds; leave --head out (or evaluate that head on dev or test)"
            )
        return [], {**OOF_SETTINGS, **({"form": form} if form != "text" else {})}
    try:
        h = head_for(model, "facts" if retrieval else "plain", head, form)
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
        raise SqaError(
            f"--head {head}: it was fitted on {len(overlap)} of these questions (e.g. {overlap[0]}), so its "
            "accuracy there would be in-sample; leave --head out to answer them out-of-fold"
        )
    from sqa.strategyqa import questions_by_id

    known = questions_by_id()
    facts = h.provenance.get("facts") or {}
    return [known[q] for q in fitted if q in known], {
        "sentence_paragraphs": facts.get("sentence_paragraphs"),
        "wiki": facts.get("wiki", 3),
        "train": facts.get("train", 2),
        "max_words": facts.get("max_words", 40),
        "scorer": facts.get("scorer", "bm25"),
        "step_facts": facts.get("step_facts", 0),
        **({"form": form} if form != "text" else {}),
    }


ProgressCallback = Callable[[OofProgress], None]


def oof_head_identity(folds: int, kind: str = "facts") -> str:
    """The ``head`` option of an out-of-fold run (part of its identity in ``run.json``)."""
    return f"out-of-fold, {folds} term-grouped folds ({kind} head)"


def run_oof(
    options: EvalOptions,
    out_dir: str | Path,
    questions: Sequence[Question],
    records: dict[str, dict],
    *,
    pool: Sequence[Question] = (),
    model: str,
    model_sha256: str | None,
    provenance: dict,
    index_info: dict | None = None,
    kind: str = "facts",
    log=lambda s: None,
) -> tuple[EvalSummary, CrossFit]:
    """Cross-fit ``questions`` (+ ``pool``: further labelled questions the heads are fitted on,
    e.g. a head's ``fitted_qids`` when dev is evaluated; not written to the run) from their features
    ``records`` (qid -> ``QuestionFeatures.to_dict()``, every one present), write the run folder
    (``metrics.json``'s ``out_of_fold``: the scheme, both heads' figures, the folds) and
    return (summary, the cross-fit with the final heads). ``kind``: which head answers ("facts",
    or "plain" for ``--no-retrieval``). Raises SqaError (from ``crossfit`` or the run lock)."""
    out_dir = Path(out_dir)
    demos = demo_qids()
    rows = list(dict.fromkeys([q.qid for q in questions] + [q.qid for q in pool]))
    by_id = {q.qid: q for q in [*pool, *questions]}
    recs = [records[qid] for qid in rows]
    y = [by_id[qid].answer for qid in rows]
    groups = [by_id[qid].term or qid for qid in rows]
    trainable = [qid not in demos for qid in rows]
    cf = crossfit(
        recs,
        y,
        groups,
        trainable,
        model=model,
        model_sha256=model_sha256,
        provenance=provenance,
        folds=options.folds,
        log=log,
    )
    p = cf.p_facts if kind == "facts" and cf.p_facts is not None else cf.p_plain
    kind = "facts" if p is cf.p_facts else "plain"
    pos = {qid: i for i, qid in enumerate(rows)}
    spec_by_fold = {f["fold"]: f[kind]["spec"] for f in cf.folds}
    final_spec = cf.heads[kind].spec.name
    specs = sorted(set(spec_by_fold.values()))
    done: dict[str, dict] = {}
    out_lines = []
    for q in questions:
        i = pos[q.qid]
        fold = int(cf.fold[i])
        # one read-out name for the run (report.md's "final answer"); the fold is in rec["eval"]["fold"]
        decision = (
            f"{kind} head:{' | '.join(specs)} ({cf.protocol})"
            if fold >= 0
            else f"{kind} head:{final_spec} (final head, fitted on the labelled questions only)"
        )
        qf = QuestionFeatures.from_dict({**records[q.qid], "states": {}})
        r = features_result(
            q,
            qf,
            float(p[i]),
            decision,
            k=options.k,
            model_name=model,
            shows_facts=kind == "facts",
            retrieval=options.retrieval,
        )
        rec = r.to_dict()
        rec["qid"] = q.qid
        secs = qf.seconds
        rec["eval"] = {
            "gold": q.answer,
            "correct": None if q.answer is None else bool(r.answer) == q.answer,
            "fewshot_pool": "fixed demonstrations",
            "fold": fold,
            "demonstration": q.qid in demos,
            "seconds": round(sum(v for k, v in secs.items() if k in ("read", "select", "decompose")), 4),
            "batch_size": 1,
            "written_at": now(),
        }
        done[q.qid] = rec
        out_lines.append(rec)
    with TraceLog(out_dir / TRACES_FILE) as tl:  # derived from the features: rewritten whole
        tl._f.flush()
        os.ftruncate(tl._f.fileno(), 0)
        tl.append(out_lines)
    labelled_q = [q for q in questions if q.answer is not None]
    yq = [by_id[q.qid].answer for q in labelled_q]
    sub = CrossFit(
        [q.qid for q in labelled_q],
        None if cf.p_facts is None else cf.p_facts[[pos[q.qid] for q in labelled_q]],
        cf.p_plain[[pos[q.qid] for q in labelled_q]],
        cf.fold[[pos[q.qid] for q in labelled_q]],
    )
    extra = {
        "out_of_fold": {
            "scheme": cf.protocol,
            "note": (
                f"each labelled question answered by a head fitted on the other {options.folds - 1} folds "
                "(scikit-learn GroupKFold by StrategyQA term); feature set and C chosen inside each fold's "
                "training questions only (nested); the demonstration questions of the prompt are answered "
                "but never fitted on"
            ),
            "answered_by": f"{kind} head",
            "all": sub.summary(yq),
            "without_demonstrations": sub.summary(yq, exclude=set(demos)),
            "demonstration_qids": sorted(q.qid for q in questions if q.qid in demos),
            "fitted_on_pool": len([1 for t, qid in zip(trainable, rows) if t and by_id[qid].answer is not None]),
            "folds": cf.folds,
            "final_heads": {k: h.spec.name for k, h in cf.heads.items()},
            "crossfit_seconds": round(cf.seconds, 1),
        },
    }
    summary = finalize_run(out_dir, options, questions, done, index_info=index_info, new=0, extra=extra)
    return summary, cf
