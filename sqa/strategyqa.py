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

from sqa.types import BadInput, Question

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
        with open(path, encoding="utf-8-sig") as f:  # a byte-order mark (Windows editors) is read past
            return json.load(f)
    except FileNotFoundError:
        raise BadInput(f"{path}: file not found; check the path (the package ships its data in {DATA_DIR})") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}:{e.lineno}: not valid JSON ({e.msg}); fix or re-download the file") from None
    except RecursionError:  # thousands of nested brackets (issue 41 item 10)
        raise BadInput(
            f"{path}: JSON nested too deeply (arrays/objects inside each other thousands of times); "
            "fix or re-download the file"
        ) from None
    except UnicodeDecodeError as e:
        raise BadInput(
            f"{path}: not UTF-8 text ({e.reason}: byte 0x{e.object[e.start]:02x}); save the file as UTF-8"
        ) from None
    except (lzma.LZMAError, EOFError) as e:  # a damaged or cut .xz / .gz file
        raise BadInput(f"{path}: not a readable compressed file ({e or type(e).__name__}); re-download it") from None


def _question(d: dict) -> Question:
    return Question(
        qid=d["qid"],
        question=d["question"],
        answer=d.get("answer"),
        decomposition=tuple(d.get("decomposition", ())),
        facts=tuple(d.get("facts", ())),
        evidence=tuple(d.get("evidence", ())),
        term=d.get("term", ""),
        description=d.get("description", ""),
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
    raise BadInput(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")


# the longest StrategyQA question (train + test) has 135 characters; a question past this cannot
# be a StrategyQA-style question and would overflow the reader's prompt (4,096 tokens, 6 demos)
MAX_QUESTION_CHARS = 1_000


def _strings(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _unicode(t) -> bool:
    """Whether ``t`` is not a str, or a str that is Unicode text (no lone surrogate)."""
    try:
        t.encode("utf-8") if isinstance(t, str) else None
    except UnicodeEncodeError:
        return False
    return True


def _evidence_ok(v) -> bool:
    """StrategyQA's evidence annotation: annotators -> steps -> items, each item a list of evidence
    IDs or a tag ("operation", "no_evidence")."""
    return isinstance(v, list) and all(
        isinstance(ann, list)
        and all(isinstance(step, list) and all(isinstance(x, str) or _strings(x) for x in step) for step in ann)
        for ann in v
    )


def entry_problem(d) -> str | None:
    """What is wrong with one dataset entry (the field and what it must be), or None. Checked:
    ``qid`` and ``question`` non-empty strings (the question at most ``MAX_QUESTION_CHARS``),
    ``answer`` true/false/null, ``facts`` and ``decomposition`` lists of strings, ``evidence`` in
    StrategyQA's nested form, ``term`` and ``description`` strings (a string where a list is
    expected would be split into characters, so it is refused too)."""
    if not isinstance(d, dict):
        return f"is a JSON {type(d).__name__}, not an object with qid and question"
    if not isinstance(d.get("qid"), str) or not d["qid"].strip():
        return "field 'qid' must be a non-empty string"
    if not isinstance(d.get("question"), str) or not d["question"].strip():
        return "field 'question' must be a non-empty string"
    if len(d["question"]) > MAX_QUESTION_CHARS:
        return (
            f"field 'question' has {len(d['question']):,} characters, more than the {MAX_QUESTION_CHARS:,} "
            "a reader prompt takes"
        )
    if d.get("answer") is not None and not isinstance(d["answer"], bool):
        return f"field 'answer' must be true, false or absent, got {d['answer']!r:.40}"
    for key in ("facts", "decomposition"):
        if d.get(key) is not None and not _strings(d[key]):
            return f"field '{key}' must be a list of strings, got {json.dumps(d[key])[:60]}"
    if d.get("evidence") is not None and not _evidence_ok(d["evidence"]):
        return (
            "field 'evidence' must be StrategyQA's annotation (a list per annotator of a list per step of "
            f"evidence-ID lists or tags), got {json.dumps(d['evidence'])[:60]}"
        )
    for key in ("term", "description"):
        if d.get(key) is not None and not isinstance(d[key], str):
            return f"field '{key}' must be a string, got {json.dumps(d[key])[:40]}"
    for key in ("qid", "question", "term", "description", "facts", "decomposition"):
        if any(not _unicode(t) for t in ([d[key]] if isinstance(d.get(key), str) else d.get(key) or [])):
            return f"field {key!r} holds a lone surrogate (JSON \\ud800-\\udfff), not Unicode text"
    return None


def load_dataset_file(path: str | Path, strict: bool = False, skipped: list | None = None) -> list[Question]:
    """Questions from any file in StrategyQA's format: a JSON list of objects (or ``.json.xz`` /
    ``.json.gz``), a JSON-lines file (``.jsonl``), or a local dataset directory read with
    ``datasets.load_dataset`` (its first split). Each object needs ``qid`` and ``question``;
    ``answer`` (bool), ``facts``, ``decomposition``, ``evidence`` and ``term`` are optional, so
    unlabelled files give predictions only and Recall@10 / SARI are scored only where evidence /
    steps are annotated (each field is type-checked: ``entry_problem``).

    A bad entry (wrong type, missing field, a question over ``MAX_QUESTION_CHARS``, a repeated
    qid) is skipped and ``(entry number, qid or None, problem)`` appended to ``skipped``; with
    ``strict`` it raises SqaError naming the file, entry and field instead. Raises SqaError for a
    file that cannot be read or holds no usable question."""
    path = Path(path)
    if path.is_dir():
        try:
            import datasets
        except ImportError:
            raise BadInput(
                f"{path}: a dataset directory is read with the `datasets` package (pip install 'sqa[hf]'); "
                "or pass a .json / .jsonl file"
            ) from None
        try:
            dd = datasets.load_dataset(str(path))
        except Exception as e:  # datasets raises many kinds for an unreadable directory
            raise BadInput(
                f"{path}: datasets.load_dataset could not read this directory ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''})"
            ) from None
        split = next(iter(dd))
        rows = [dict(r) for r in dd[split]]
    elif path.suffix == ".jsonl":
        rows = []
        try:
            with open(path, encoding="utf-8-sig") as f:  # a byte-order mark (Windows editors) is read past
                for n, line in enumerate(f, start=1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except json.JSONDecodeError as e:
                            raise BadInput(f"{path}:{n}: not valid JSON ({e.msg}); fix the line") from None
                        except RecursionError:
                            raise BadInput(f"{path}:{n}: JSON nested too deeply; fix the line") from None
        except FileNotFoundError:
            raise BadInput(f"{path}: file not found") from None
        except UnicodeDecodeError as e:
            raise BadInput(
                f"{path}: not UTF-8 text ({e.reason}: byte 0x{e.object[e.start]:02x}); save the file as UTF-8"
            ) from None
        except OSError as e:
            raise BadInput(f"{path}: cannot read ({e})") from None
    else:
        rows = load_json(path)
        if isinstance(rows, dict) and isinstance(rows.get("data"), list):
            rows = rows["data"]
    if not isinstance(rows, list) or not rows:
        raise BadInput(f"{path}: expected a non-empty list of questions (objects with qid and question)")
    out, seen = [], set()
    skipped = skipped if skipped is not None else []
    for i, d in enumerate(rows):
        problem = entry_problem(d)
        if problem is None and d["qid"] in seen:
            problem = f"qid {d['qid']!r} appears twice (the first is kept)"
        if problem is not None:
            qid = d.get("qid") if isinstance(d, dict) and isinstance(d.get("qid"), str) else None
            if strict:
                raise BadInput(f"{path}: entry {i + 1}{f' ({qid})' if qid else ''}: {problem} (--strict)")
            skipped.append((i + 1, qid, problem))
            continue
        seen.add(d["qid"])
        out.append(_question(d))
    if not out:
        first = skipped[0] if skipped else None
        raise BadInput(
            f"{path}: none of its {len(rows):,} entries is a usable question"
            + (f" (entry {first[0]}: {first[2]})" if first else "")
        )
    return out


def questions_by_id() -> dict[str, Question]:
    """All 2,780 questions (train + test) by qid."""
    return {q.qid: q for q in (*_train(), *_test())}
