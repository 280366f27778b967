"""``sqa.evaluate``: a reader over a split or question file into a run folder, resumable, as
``sqa eval`` does (the CLI calls this)."""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence, Union

from sqa.eval.results import Run, default_run_dir
from sqa.types import BadInput, Question, SplitName

if TYPE_CHECKING:
    from rich.console import Console

    from sqa.api.reader import Reader
    from sqa.methods.registry import MethodName


ANSWERING = ("auto", "head", "out-of-fold")  # how evaluate() may answer (run.json records the one used)


@dataclass
class Questions:
    """The questions of a run and how ``run.json`` names them: ``split`` (a split name, or
    ``custom`` for a question file or list), ``dataset`` (``"<name>:<12 hex sha256>"`` for custom),
    ``stem`` (the default run folder's first part), ``given`` (all of the file's or list's
    questions before ``limit``; None for a split)."""

    questions: list[Question]
    split: str
    dataset: str = ""
    stem: str = ""
    given: list[Question] | None = None


def run_questions(
    split: Union[str, Path, Sequence[Question]] = "dev", limit: int | None = None, strict: bool = False
) -> Questions:
    """The :class:`Questions` of ``split``: a split name (``sqa.strategyqa.SPLITS``), a question
    file (StrategyQA's format; bad entries skipped with a warning each, or raise with ``strict``)
    or a list of ``sqa.types.Question``. Raises :class:`sqa.types.BadInput`."""
    from sqa.api.questions import load_questions
    from sqa.hashing import content_digest
    from sqa.strategyqa import SPLITS

    if isinstance(split, str) and split in SPLITS:
        return Questions(load_questions(split, limit=limit), split, stem=split)
    if isinstance(split, (str, Path)):
        path = Path(split)
        given = load_questions(path, strict=strict)
        return Questions(
            given[:limit] if limit else given, "custom", f"{path.name}:{content_digest(path)}", path.stem, given
        )
    given = list(split)
    if not given or not all(isinstance(q, Question) for q in given):
        raise BadInput("split: a split name, a question file, or a non-empty list of sqa Question objects")
    ident = hashlib.sha256(json.dumps([[q.qid, q.question] for q in given]).encode()).hexdigest()[:12]
    return Questions(given[:limit] if limit else given, "custom", f"questions:{ident}", "questions", given)


def evaluate(
    reader: "Reader | None" = None,
    split: Union[SplitName, str, Path, Sequence[Question], None] = None,
    *,
    method: Union[MethodName, str, None] = None,
    settings=None,
    out: str | Path | None = None,
    limit: int | None = None,
    protocol: str | None = None,
    batch_size: int = 32,
    folds: int = 5,
    decomposition: str | None = None,
    features_cache: str | Path | None = None,
    strict: bool = False,
    replace_heads: bool = False,
    answering: str = "auto",
    progress: Union[Callable, bool, "Console", None] = None,
    on_note: Callable[[str], None] = lambda s: None,
) -> Run:
    """Answer the questions of ``split`` with ``reader`` (an :class:`sqa.Reader`) into the run
    folder ``out`` (default ``runs/eval/<split or protocol>-<reader>-<model>``) and return the
    :class:`sqa.eval.results.Run` (``metrics``: Accuracy with its 95 % interval, Recall@10, SARI,
    ECE, ...; ``predictions``: the leaderboard file). ``method`` / ``settings``: without a
    ``reader``, a method (``sqa.methods``: a name, ``module:Class`` or a ``Method``) read by the
    default model and index, as ``sqa.Reader(method=method, settings=settings)`` (``settings``: a
    ``sqa.methods.MethodSettings``, or a whole ``sqa.ReaderSettings`` without ``method``); with a
    reader, give them to the Reader instead (BadInput).

    ``split``: ``"dev"`` (229; the default), ``"train"`` (2,290), ``"train-2061"``, ``"test"`` (no
    labels: predictions only), ``"all"``, a question file, or a list of ``sqa.types.Question``;
    ``limit``: the first N; ``protocol``: a named question set instead of ``split`` (``"dev-229"``,
    ``"train-first-500"``, ...: ``sqa.eval.protocols``; recorded in ``run.json``, as is the one a
    split's first N questions match). How the answers are made is recorded as ``answering``: with
    the facts reader, train / train-2061 / all, and questions the model's head was fitted on, are
    answered out-of-fold (:func:`sqa.api.out_of_fold.run_out_of_fold`; the final heads are written
    to ``$SQA_HOME/heads``, ``replace_heads`` removing the model's other heads of that kind), other
    questions by the held-out head, or zero-shot when the model has none; a train cut too small
    to cross-fit (e.g. ``--protocol train-first-500 --limit 5``: 4 of the first 5 train questions
    are the prompt's demonstrations) is answered zero-shot, as every head there would be in-sample
    (:func:`sqa.eval.protocols.zero_shot_cut_note`). ``answering``: "auto"
    (that choice), or "head" / "out-of-fold" to require one (BadInput when the questions cannot be
    answered so: a head on the questions it was fitted on, or out-of-fold without labelled
    questions a head is fitted on). Resumable: the same
    ``out`` continues where a run stopped; Ctrl-C saves what is done and returns the Run with
    ``interrupted`` True.

    ``progress``: by default (None or True) a rich progress bar on stderr, drawn in a terminal and
    in Jupyter (``sqa.render.progress.EvalProgress``: questions done, rate, ETA, running Accuracy;
    nothing in a log; in Jupyter the cell's output: ``sqa.render.progress.NotebookCell``); a
    ``rich.console.Console`` to draw it on; False for none; or a callback that
    gets ``sqa.eval.runner.EvalProgress`` (done, total, correct, scored, cost) at the
    start and after each question, or ``sqa.eval.oof.OofProgress`` events for an out-of-fold run;
    ``on_note(line)``: which answer head answers, or why a cut is answered zero-shot. ``features_cache``: a features file whose
    questions are not read again (facts reader, one head). Raises :class:`sqa.types.BadInput` for
    bad options, SqaError (the subclass that applies) for a folder holding another run, a missing
    index, model or head."""
    from sqa.eval.options import EvalOptions
    from sqa.eval.protocols import get_protocol, protocol_limit, protocol_of
    from sqa.eval.rundir import check_run_file
    from sqa.eval.runner import run_eval
    from sqa.pipeline import check_head_states, index_info, load_head

    from sqa.checks import int_arg, out_folder_arg
    from sqa.api.reader import Reader

    if reader is not None and (method is not None or settings is not None):
        raise BadInput("give the method to the Reader (sqa.Reader(method=...)), or evaluate(method=...) without one")
    if reader is None:
        reader = Reader(method=method, settings=settings)
    if not isinstance(reader, Reader):
        raise BadInput(
            f"evaluate: reader must be an sqa.Reader (e.g. sqa.Reader('facts')), not {type(reader).__name__}"
        )
    int_arg("evaluate", "limit", limit, 1, none_ok=True)
    int_arg("evaluate", "batch_size", batch_size, 1)
    int_arg("evaluate", "folds", folds, 2)
    out_folder_arg("evaluate", "out", out)
    preset, model = reader.preset, reader.model
    if protocol is not None:
        if split is not None:
            flag = "--dataset" if isinstance(split, Path) or not isinstance(split, str) else "--split"
            raise BadInput(f"--protocol {protocol} names its own questions; leave out {flag}")
        proto = get_protocol(protocol)
        split, limit = proto.split, protocol_limit(proto, limit)
        if proto.method and getattr(reader.method, "name", None) != proto.method:
            raise BadInput(f"--protocol {proto.name} is --method {proto.method}: add --method {proto.method}")
        reader.pin_settings(proto.settings, proto.name)
    if features_cache is not None:  # checked line by line before any model loads
        from sqa.facts.reader import check_features_file

        check_features_file(features_cache)
    qs = run_questions(split or "dev", limit, strict)
    if protocol is not None:  # the default run folder is named by it, as sqa eval --preset A,B names it
        qs.stem = protocol
    protocol = protocol if protocol is not None else protocol_of(qs.split, len(qs.questions))
    decomposition = decomposition or preset.decomposition
    if answering not in ANSWERING:
        raise BadInput(f"answering {answering!r}: use one of {', '.join(ANSWERING)}")
    pool = None
    from sqa.eval.oof import TRAIN_SPLITS

    if qs.split not in TRAIN_SPLITS:  # on a train split oof_pool refuses a given head first, as a usage error
        reader.check_given_head()  # before a served model's prompt form is asked of its server
    if preset.reader == "facts" and preset.oracle is None:
        from sqa.eval.oof import oof_pool

        pool = oof_pool(model, preset.retrieval, reader.head, qs.split, qs.questions, reader.prompt_form)
    zero_shot_cut = None  # why a train cut is answered zero-shot: too few questions to cross-fit
    if pool is not None and not pool[0] and answering == "auto":
        from sqa.eval.protocols import zero_shot_cut_note

        zero_shot_cut = zero_shot_cut_note(qs.questions, qs.split, folds, model, preset.retrieval, reader.prompt_form)
        pool = None if zero_shot_cut else pool
    if answering == "head" and pool is not None:
        raise BadInput(
            f"--answering head: the {qs.split} questions are answered out-of-fold (a train split, or "
            "questions the model's head was fitted on), so one head's accuracy there would be in-sample"
        )
    if answering == "out-of-fold" and pool is None:
        raise BadInput(
            f"--answering out-of-fold: the facts reader answers {qs.split} out-of-fold only on a train "
            "split or on questions its head was fitted on; use --answering auto or head"
        )
    if pool is not None:
        from sqa.eval.oof import OofOptions

        if reader.chat_template is not None:
            raise BadInput(
                "--chat-template: an out-of-fold run reads the facts reader's plain-text prompts, which "
                "no chat template renders; leave it out"
            )
        if features_cache is not None:
            raise BadInput(
                "--features-cache goes with a run answered by one head; an out-of-fold run keeps its "
                "features in $SQA_HOME/features (leave --features-cache out)"
            )
        from sqa.api.out_of_fold import run_out_of_fold

        with _drawer(progress, qs.stem) as progress:
            return run_out_of_fold(
                OofOptions(
                    split=qs.split,
                    questions=qs.questions,
                    reader=reader.settings,
                    folds=folds,
                    limit=limit,
                    out=Path(out) if out else None,
                    pool=pool[0],
                    settings=pool[1],
                    dataset=qs.dataset,
                    stem=qs.stem,
                    protocol=protocol,
                    replace_heads=replace_heads,
                ),
                progress,
            )
    head_obj = head_id = None
    if zero_shot_cut:
        from sqa.pipeline import zero_shot_identity

        head_id = zero_shot_identity("facts" if preset.retrieval else "plain")
        on_note(zero_shot_cut)
    elif preset.reader == "facts":
        head_obj, head_id = load_head(
            model, preset.retrieval, preset.oracle, reader.head, qs.split, qs.given, reader.prompt_form
        )
        check_head_states(head_obj, model)
    options = EvalOptions(
        split=qs.split,
        model=model,
        decomposition=decomposition,
        k=reader.k,
        backend=reader.backend,
        folds=folds,
        limit=limit,
        batch_size=batch_size,
        retrieval=preset.retrieval,
        reader=preset.reader,
        oracle=preset.oracle,
        head=head_id or "",
        dataset=qs.dataset,
        preset=preset.name,
        protocol=protocol,
        chat_template=reader.chat_template_id,
        prompt_form=reader.prompt_form if preset.reader == "facts" else "text",
        prefill=reader.prefill,
        method=preset.method,
        method_settings=reader.method_settings,
    )
    tag = decomposition if preset.retrieval else f"{decomposition}-noretrieval"
    if preset.reader == "method":
        tag = f"method-{reader.method.name}"
        reader.pipeline  # noqa: B018  (loads the model and checks what the method needs: nothing written before)
    if preset.reader == "facts":
        tag = f"facts{'-oracle-' + preset.oracle if preset.oracle else ''}{'' if preset.retrieval else '-noretrieval'}"
    out_dir = Path(out) if out else default_run_dir(qs.stem, tag, model)
    info = index_info(reader.index_dir, reader.backend) if (preset.retrieval or preset.oracle) else None
    record: dict = {"settings": reader.settings.to_dict()}
    if zero_shot_cut:  # run.json says why a train cut is answered zero-shot (issue 40)
        from sqa.eval.protocols import ZERO_SHOT_CUT

        record["answering_note"] = ZERO_SHOT_CUT
    if head_obj is not None:  # which head answers, and how many questions it saw (issue 41 items 1 and 8)
        from sqa.facts.heads import fitted_count, head_identity_checked

        record["head"] = {"file": head_obj.source, "fitted_on": fitted_count(head_obj)}
        checked = head_identity_checked(head_obj, model)  # a served model's head: checked against its weights?
        if checked is not None:
            record["head"]["identity_checked"] = checked
    check_run_file(out_dir, options, info, record)  # refuse a mismatched folder before the model loads
    if head_obj is not None:  # a served model's unchecked head is warned as the reader is built
        on_note(f"answer head {head_obj.source} (fitted on {record['head']['fitted_on']:,} questions)")
    with _drawer(progress, qs.stem) as progress:
        summary = run_eval(
            options,
            out_dir,
            _reader_for(reader, head_obj, features_cache, zero_shot=bool(zero_shot_cut)),
            questions=qs.questions,
            index_info=info,
            on_progress=progress,
        )
    return Run.from_summary(summary)


@contextmanager
def _drawer(progress, label: str):
    """The ``progress`` callback :func:`evaluate` passes on, as a context (see its doc): a rich
    bar (``sqa.render.progress.EvalProgress``, started and stopped around the run) for None, True
    or a Console; None for False; a callback as given."""
    from rich.console import Console

    if progress is False:
        yield None
    elif progress is None or progress is True or isinstance(progress, Console):
        from sqa.render import progress as drawers

        console = progress if isinstance(progress, Console) else drawers.default_console()
        with drawers.EvalProgress(console, label) as bar:
            yield bar
    else:
        yield progress


def _reader_for(reader: "Reader", head, features_cache, zero_shot: bool = False) -> Callable:
    """``pool -> reader`` for ``sqa.eval.runner.run_eval``: the Reader's own pipeline when it is
    loaded already (no second model load), else one built on the first question that needs
    answering (``sqa.pipeline.reader_factory``, with ``head`` and ``features_cache``; ``zero_shot``:
    the facts reader without its head, over the Reader's model when loaded)."""
    from sqa.pipeline import reader_factory

    if not reader.loaded or features_cache is not None or zero_shot:
        return reader_factory(
            reader.settings,
            preset=reader.preset,
            model=reader.pipeline.model if reader.loaded else reader._lm,
            head=head,
            features_cache=features_cache,
            prompt_form=reader.prompt_form,
            zero_shot=zero_shot,
        )

    def reader_for(pool):
        r = reader.pipeline.reader
        return r.with_fewshot_pool(pool.questions) if reader.preset.reader == "steps" and pool is not None else r

    return reader_for


def compare(runs: Sequence[Union[Run, str, Path]], *, seed: int | None = None, resamples: int | None = None):
    """Paired statistics of two or more runs (:class:`sqa.eval.results.Run` or run folders) on the
    labelled questions they all answered: each run's Accuracy with its 95 % interval, every pair's
    difference with a paired-bootstrap 95 % interval and McNemar's exact test
    (:func:`sqa.eval.compare.compare_runs`, which documents the sources). Returns its
    ``Comparison``; raises SqaError (one line) for fewer than two runs or runs sharing no
    labelled question."""
    from sqa.eval.compare import RESAMPLES, SEED, compare_runs

    paths = [r.path if isinstance(r, Run) else Path(r) for r in runs]
    return compare_runs(
        paths, seed=SEED if seed is None else seed, resamples=RESAMPLES if resamples is None else resamples
    )
