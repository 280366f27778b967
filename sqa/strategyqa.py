"""The StrategyQA release shipped with the package (``sqa/_data``, xz-compressed, MIT licence) and
its splits.

Splits (names used by every command):
- ``train``: the official 2,290-question train file (labels public).
- ``dev`` / ``train-2061``: the 229 / 2,061 split of it used by the original baselines
  (``split_qids.json``). Few-shot examples and tuning use ``train-2061`` only.
- ``test``: the 490 hidden-label questions (predictions only).
- ``all``: ``train`` followed by ``test`` (2,780 questions; metrics count labelled ones only).
"""

from __future__ import annotations

import json
import lzma
from functools import lru_cache
from pathlib import Path

from sqa.types import Question, SqaError

DATA_DIR = Path(__file__).resolve().parent / "_data"
STRATEGYQA_DIR = DATA_DIR / "strategyqa"
TRAIN_FILE = STRATEGYQA_DIR / "strategyqa_train.json.xz"
TEST_FILE = STRATEGYQA_DIR / "strategyqa_test.json.xz"
PARAGRAPHS_FILE = STRATEGYQA_DIR / "strategyqa_train_paragraphs.json.xz"
SPLIT_FILE = STRATEGYQA_DIR / "split_qids.json.xz"
DISTRACTORS_FILE = DATA_DIR / "wiki_mini" / "distractors.jsonl.gz"

SPLITS = ("train", "dev", "train-2061", "all", "test")


def load_json(path: str | Path):
    """Load a ``.json`` or ``.json.xz`` / ``.json.gz`` file.

    Raises SqaError naming the file when it is missing or not valid JSON.
    """
    path = Path(path)
    try:
        if path.suffix == ".xz":
            with lzma.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        if path.suffix == ".gz":
            import gzip

            with gzip.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise SqaError(f"{path}: file not found; check the path (the package ships its data in {DATA_DIR})") from None
    except json.JSONDecodeError as e:
        raise SqaError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); fix or re-download the file") from None


def _question(d: dict) -> Question:
    return Question(
        qid=d["qid"], question=d["question"], answer=d.get("answer"),
        decomposition=tuple(d.get("decomposition", ())), facts=tuple(d.get("facts", ())),
        evidence=tuple(d.get("evidence", ())), term=d.get("term", ""), description=d.get("description", ""),
    )


@lru_cache(maxsize=None)
def _train() -> tuple[Question, ...]:
    return tuple(_question(d) for d in load_json(TRAIN_FILE))


@lru_cache(maxsize=None)
def _test() -> tuple[Question, ...]:
    return tuple(_question(d) for d in load_json(TEST_FILE))


@lru_cache(maxsize=None)
def split_qids() -> dict[str, tuple[str, ...]]:
    """``{"train": 2,061 qids, "dev": 229 qids}`` in file order (the baselines' split)."""
    d = load_json(SPLIT_FILE)
    return {"train": tuple(d["train"]), "dev": tuple(d["dev"])}


def load_questions(split: str = "dev") -> list[Question]:
    """Questions of a split (see module doc), in the order of the release / split file.

    Raises SqaError for an unknown split name.
    """
    if split == "train":
        return list(_train())
    if split == "test":
        return list(_test())
    if split == "all":
        return list(_train()) + list(_test())
    if split in ("dev", "train-2061"):
        by_id = {q.qid: q for q in _train()}
        return [by_id[qid] for qid in split_qids()["dev" if split == "dev" else "train"]]
    raise SqaError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")


def load_dataset_file(path: str | Path) -> list[Question]:
    """Questions from any file in StrategyQA's format: a JSON list of objects (or ``.json.xz`` /
    ``.json.gz``), a JSON-lines file (``.jsonl``), or a local dataset directory read with
    ``datasets.load_dataset`` (its first split). Each object needs ``qid`` and ``question``;
    ``answer`` (bool), ``facts``, ``decomposition``, ``evidence`` and ``term`` are optional, so
    unlabelled files give predictions only and Recall@10 / SARI are scored only where evidence /
    steps are annotated. Raises SqaError naming the file and the entry for anything else."""
    path = Path(path)
    if path.is_dir():
        try:
            import datasets
        except ImportError:
            raise SqaError(f"{path}: a dataset directory is read with the `datasets` package (pip install 'sqa[hf]'); "
                           "or pass a .json / .jsonl file") from None
        try:
            dd = datasets.load_dataset(str(path))
        except Exception as e:  # datasets raises many kinds for an unreadable directory
            raise SqaError(f"{path}: datasets.load_dataset could not read this directory ({type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''})") from None
        split = next(iter(dd))
        rows = [dict(r) for r in dd[split]]
    elif path.suffix == ".jsonl":
        rows = []
        try:
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, start=1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except json.JSONDecodeError as e:
                            raise SqaError(f"{path}:{n}: not valid JSON ({e.msg}); fix the line") from None
        except FileNotFoundError:
            raise SqaError(f"{path}: file not found") from None
        except (OSError, UnicodeDecodeError) as e:
            raise SqaError(f"{path}: cannot read ({e})") from None
    else:
        rows = load_json(path)
        if isinstance(rows, dict) and isinstance(rows.get("data"), list):
            rows = rows["data"]
    if not isinstance(rows, list) or not rows:
        raise SqaError(f"{path}: expected a non-empty list of questions (objects with qid and question)")
    out, seen = [], set()
    for i, d in enumerate(rows):
        where = f"{path}: entry {i + 1}"
        if not isinstance(d, dict) or not isinstance(d.get("qid"), str) or not isinstance(d.get("question"), str) \
                or not d["question"].strip() or not d["qid"].strip():
            raise SqaError(f"{where}: needs a string qid and a non-empty string question")
        if d.get("answer") is not None and not isinstance(d["answer"], bool):
            raise SqaError(f"{where} ({d['qid']}): answer must be true, false or absent, got {d['answer']!r}")
        if d["qid"] in seen:
            raise SqaError(f"{where}: qid {d['qid']!r} appears twice")
        seen.add(d["qid"])
        try:
            out.append(_question(d))
        except (TypeError, ValueError) as e:
            raise SqaError(f"{where} ({d['qid']}): malformed field ({e})") from None
    return out


def questions_by_id() -> dict[str, Question]:
    """All 2,780 questions (train + test) by qid."""
    return {q.qid: q for q in (*_train(), *_test())}
