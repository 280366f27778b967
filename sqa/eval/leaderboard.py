"""The StrategyQA leaderboard predictions file: load, validate, write, and score against gold.

Format (allenai/strategyqa-evaluator, ``predictions_dummy.json``): one JSON object
``{qid: {"answer": bool, "decomposition": [str], "paragraphs": [evidence IDs]}}``. Each entry
holds only the keys for what was predicted, and every entry must hold the same keys. Scores use
the official metric names: ``Accuracy`` (key ``answer``), ``SARI`` (``decomposition``),
``Recall@10`` (``paragraphs``); only the metrics whose keys are present are returned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

from sqa.eval.metrics import RETRIEVAL_LIMIT, accuracy, mean_recall_at_k, mean_sari
from sqa.types import BadInput, Prediction, Question
from sqa.outfile import write_text_atomic

KEYS = ("answer", "decomposition", "paragraphs")
METRIC_FOR_KEY = {"answer": "Accuracy", "decomposition": "SARI", "paragraphs": f"Recall@{RETRIEVAL_LIMIT}"}


def validate_predictions(data, source: str = "<predictions>") -> dict[str, dict]:
    """Check a parsed predictions object and return it. ``source`` names the file in errors.

    Raises SqaError (naming the file and the qid) when it is not an object of objects, an entry has
    an unknown key, a value of the wrong type (answer bool, decomposition list of str, paragraphs
    list of str), or entries disagree on which keys they hold.
    """
    if not isinstance(data, dict):
        raise BadInput(f"{source}: expected a JSON object {{qid: {{answer, decomposition, paragraphs}}}}")
    keys: set[str] | None = None
    for qid, entry in data.items():
        if not isinstance(entry, dict):
            raise BadInput(f'{source}: entry {qid!r} is not an object; write {{"answer": true, ...}}')
        unknown = set(entry) - set(KEYS)
        if unknown:
            raise BadInput(f"{source}: entry {qid!r} has unknown key(s) {sorted(unknown)}; allowed: {', '.join(KEYS)}")
        if "answer" in entry and not isinstance(entry["answer"], bool):
            raise BadInput(f"{source}: entry {qid!r}: 'answer' must be true or false, got {entry['answer']!r}")
        for key in ("decomposition", "paragraphs"):
            if key in entry and (not isinstance(entry[key], list) or not all(isinstance(s, str) for s in entry[key])):
                raise BadInput(f"{source}: entry {qid!r}: {key!r} must be a list of strings")
        if keys is None:
            keys = set(entry)
        elif set(entry) != keys:
            raise BadInput(
                f"{source}: entry {qid!r} has keys {sorted(entry)} but earlier entries have {sorted(keys)}; "
                "every entry must predict the same things"
            )
    return data


def load_predictions(path: str | Path) -> dict[str, dict]:
    """Read and validate a leaderboard predictions file. Raises SqaError naming the file when it is
    missing, a directory, unreadable, not UTF-8, not JSON or not in the leaderboard format."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f, object_pairs_hook=_once_each)
    except FileNotFoundError:
        raise BadInput(f"{path}: predictions file not found; check the path") from None
    except IsADirectoryError:
        raise BadInput(
            f"{path}: is a directory; give the predictions JSON file (e.g. {path}/predictions.json)"
        ) from None
    except PermissionError:
        raise BadInput(f"{path}: permission denied reading the predictions file; check its permissions") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start:,}); a predictions file is UTF-8 JSON") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except _Repeated as e:  # JSON would keep only the last of them: which one was meant is not known
        what = f"key {e.key!r} appears twice in one entry" if e.key in KEYS else f"qid {e.key!r} is predicted twice"
        raise BadInput(f"{path}: {what}; keep one (nothing was scored)") from None
    except RecursionError:  # issue 41 item 10: thousands of nested brackets
        raise BadInput(
            f"{path}: nested too deeply to be a predictions file (JSON arrays/objects inside each other "
            "thousands of times); a predictions file is {qid: {answer, decomposition, paragraphs}}"
        ) from None
    return validate_predictions(data, str(path))


class _Repeated(ValueError):
    """A key twice in one JSON object of a predictions file (``key``)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _once_each(pairs: list) -> dict:
    """``object_pairs_hook`` of :func:`load_predictions`: the object, or _Repeated for a key given twice."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _Repeated(k)
        out[k] = v
    return out


def predictions_to_leaderboard(predictions: Iterable[Prediction], keys: Sequence[str] = KEYS) -> dict[str, dict]:
    """``{qid: entry}`` from Predictions, keeping only ``keys`` (a subset of answer, decomposition,
    paragraphs)."""
    return {p.qid: {k: v for k, v in p.to_leaderboard().items() if k in keys} for p in predictions}


def write_predictions(predictions: dict[str, dict] | Iterable[Prediction], path: str | Path) -> Path:
    """Write a predictions object (or Predictions) to ``path`` as JSON; returns the path."""
    if not isinstance(predictions, dict):
        predictions = predictions_to_leaderboard(predictions)
    validate_predictions(predictions, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(predictions, indent=1, ensure_ascii=False) + "\n")  # sqa.outfile
    return path


def score_predictions(
    predictions: dict[str, dict],
    questions: Sequence[Question],
    allow_missing: bool = False,
    source: str = "<predictions>",
) -> dict[str, float]:
    """Score leaderboard predictions against gold ``questions`` (e.g.
    ``sqa.strategyqa.load_questions("dev")``) as the official evaluator does.

    Returns ``{"Accuracy"?, "SARI"?, "Recall@10"?, "n"}`` with a metric only for the keys the
    entries hold; ``n`` is the number of questions scored. Raises SqaError when a prediction's
    qid is not among ``questions``, when a question has no prediction (unless ``allow_missing``,
    which scores only the predicted questions), or when a gold question has no labels.
    """
    predictions = validate_predictions(predictions, source)
    gold = {q.qid: q for q in questions}
    extra = [qid for qid in predictions if qid not in gold]
    if extra:
        raise BadInput(
            f"{source}: {len(extra)} prediction(s) for questions not in the gold set, e.g. {extra[0]!r}; "
            "score against the split they were made for"
        )
    missing = [qid for qid in gold if qid not in predictions]
    if missing and not allow_missing:
        raise BadInput(
            f"{source}: no prediction for {len(missing)} of {len(gold)} questions, e.g. {missing[0]!r}; "
            "finish the run, or score what is there: `sqa eval score --allow-missing` (Python: allow_missing=True)"
        )
    scored = [gold[qid] for qid in gold if qid in predictions]
    if any(q.answer is None for q in scored):
        raise BadInput(
            f"{source}: the gold questions have no labels (test split?); only the official leaderboard scores them"
        )
    keys = set(next(iter(predictions.values()))) if predictions else set()
    out: dict[str, float] = {}
    if "answer" in keys:
        out["Accuracy"] = accuracy((predictions[q.qid]["answer"], q.answer) for q in scored)
    # SARI and Recall@10 only over questions that carry the annotation (every StrategyQA train
    # question does; a --dataset file may not): none annotated -> the metric is left out
    with_steps = [q for q in scored if q.decomposition]
    with_evidence = [q for q in scored if q.evidence]
    if "decomposition" in keys and with_steps:
        out["SARI"] = mean_sari(with_steps, {q.qid: predictions[q.qid]["decomposition"] for q in with_steps})
    if "paragraphs" in keys and with_evidence:
        out[METRIC_FOR_KEY["paragraphs"]] = mean_recall_at_k(
            with_evidence, {q.qid: predictions[q.qid]["paragraphs"] for q in with_evidence}
        )
    out["n"] = len(scored)
    return out
