"""``sqa.load_questions`` and ``sqa.score``: StrategyQA's questions and the official metrics."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Union

from sqa.types import BadInput, Question

if TYPE_CHECKING:
    from sqa.eval.results import Run


def load_questions(split: str | Path = "dev", *, limit: int | None = None, strict: bool = False) -> list[Question]:
    """The questions of a split, in release order: ``"dev"`` (229), ``"train"`` (2,290),
    ``"train-2061"`` (the train questions not in dev), ``"test"`` (490, no labels), ``"all"``
    (train + test); or of a question file in StrategyQA's format (``.json`` list, ``.jsonl``, or a
    local ``datasets`` directory; entries that are malformed are skipped with one
    :class:`sqa.types.SqaWarning` each, or raise with ``strict``). ``limit``: the first N only.

    Each ``sqa.types.Question`` has ``qid``, ``question``, ``answer`` (bool, None without a
    label), ``decomposition`` (annotated steps), ``evidence``, ``facts`` and ``term``. Raises
    :class:`sqa.types.BadInput` for an unknown split name or an unreadable file."""
    from sqa.strategyqa import SPLITS, load_dataset_file
    from sqa.strategyqa import load_questions as load_split

    if isinstance(split, str) and split in SPLITS:
        qs = load_split(split)
    elif isinstance(split, Path) or Path(split).exists() or "/" in split or Path(split).suffix:
        skipped: list = []
        qs = load_dataset_file(split, strict=strict, skipped=skipped)
        warn_skipped(Path(split), skipped, len(qs))
    else:
        raise BadInput(f"unknown split {split!r}; use one of {', '.join(SPLITS)}, or a question file's path")
    return qs[:limit] if limit else qs


def warn_skipped(path: Path, skipped: list, kept: int, show: int = 5) -> None:
    """One :class:`sqa.types.SqaWarning` per skipped question-file entry (the first ``show``), then
    one with the count (``skipped``: ``(entry number, qid, problem)`` as ``load_dataset_file`` fills it)."""
    import warnings

    from sqa.types import SqaWarning

    for n, qid, problem in skipped[:show]:
        warnings.warn(f"{path}: entry {n}{f' ({qid})' if qid else ''} skipped: {problem}", SqaWarning, stacklevel=3)
    if skipped:
        more = f" ({len(skipped) - show:,} more not shown)" if len(skipped) > show else ""
        warnings.warn(
            f"{path}: {len(skipped):,} bad entries skipped{more}, {kept:,} questions kept; --strict stops at the first",
            SqaWarning,
            stacklevel=3,
        )


def infer_split(qids: list[str]) -> str:
    """The smallest of dev, train-2061, train, test, all holding every one of ``qids``."""
    from sqa.strategyqa import load_questions as load_split

    for split in ("dev", "train-2061", "train", "test", "all"):
        ids = {q.qid for q in load_split(split)}
        if all(qid in ids for qid in qids):
            return split
    return "all"


def score(
    predictions: Union[Mapping[str, dict], str, Path, "Run"], split: str | None = None, *, allow_missing: bool = False
) -> dict:
    """The official StrategyQA metrics of leaderboard predictions (``{qid: {"answer": bool,
    "decomposition": [str], "paragraphs": [evidence ID]}}``, a ``predictions.json`` path, or a
    :class:`sqa.eval.results.Run`) against ``split`` (default: the smallest of dev, train-2061,
    train holding every predicted qid).

    Returns ``{"split", "Accuracy" (in [0, 1]), "SARI" (decompositions, 0-1), "Recall@10"
    (evidence, 0-1), "n"}`` (``n``: questions scored, as ``Run.metrics["n"]``), each metric only where the predictions and the gold carry it.
    Raises :class:`sqa.types.BadInput` for qids that are not StrategyQA questions, a missing
    prediction (unless ``allow_missing``: score only the predicted questions) or the test split
    (no public labels: only the official leaderboard scores it)."""
    from sqa.eval.leaderboard import load_predictions, score_predictions, validate_predictions
    from sqa.strategyqa import load_questions as load_split
    from sqa.strategyqa import questions_by_id

    from sqa.eval.results import Run

    if not isinstance(predictions, (Run, str, Path, Mapping)):
        raise BadInput(
            f"score: predictions must be a predictions.json path, a dict {{qid: {{'answer': bool}}}} or a "
            f"Run, not {type(predictions).__name__} {predictions!r:.60}"
        )
    if isinstance(predictions, Run):
        source, preds = str(Path(predictions.path) / "predictions.json"), predictions.predictions
    elif isinstance(predictions, (str, Path)):
        source, preds = str(predictions), load_predictions(predictions)
    else:
        source, preds = "<predictions>", validate_predictions(dict(predictions))
    if not preds:  # --allow-missing would score nothing and print a table of zeros
        raise BadInput(f"{source}: no predictions (an empty object); nothing to score")
    known = questions_by_id()
    unknown = [qid for qid in preds if qid not in known]
    if unknown:
        raise BadInput(
            f"{source}: {len(unknown):,} of {len(preds):,} predictions are for qids that are not "
            f"StrategyQA questions, e.g. {unknown[0]!r}; check the file's keys (qids like "
            f"{next(iter(known))!r})"
        )
    split = split or infer_split(list(preds))
    questions = load_split(split)
    if split in ("test", "all"):
        labelled = [q for q in questions if q.answer is not None]
        if split == "test" or any(qid not in {q.qid for q in labelled} for qid in preds):
            raise BadInput(
                f"{source}: the test split has no public labels; only the official leaderboard "
                "(leaderboard.allenai.org/strategyqa) scores it"
            )
        questions = labelled
    return {"split": split, **score_predictions(preds, questions, allow_missing=allow_missing, source=source)}
