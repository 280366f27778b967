"""The features store of out-of-fold runs (``sqa eval --split train``, ``sqa features import``):
``$SQA_HOME/features/<model>/<settings key>/`` with ``meta.json`` and one JSON-lines file of
``QuestionFeatures`` records per StrategyQA file, written and read through the one parser/writer of
:mod:`sqa.facts.features` (``parse_features``, ``read_done``, ``append_record``), one writer at a
time (an ``fcntl.flock`` lock). Issue 34 item 1, issue 35.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

from sqa.facts.features import (FactSelector, FactSettings, append_record, lock_exclusive, parse_features,
                                question_features, read_done)
from sqa.facts.prompt import PROMPT_VERSION, QuestionFeatures
from sqa.models.registry import model_stem
from sqa.types import Question, SqaError

STORE_FORMAT = "sqa-features/1"
META_KEYS = ("model", "model_sha256", "prompt", "facts", "index")


def settings_key(settings: FactSettings) -> str:
    """The folder name of a features directory for ``settings``, e.g. ``facts-v1-k10-top3-w3t2-40w``
    (``-minilm`` / ``-steps2`` appended when those are on)."""
    s = settings
    key = f"{PROMPT_VERSION}-k{s.k}-top{s.sentence_paragraphs}-w{s.wiki}t{s.train}-{s.max_words}w"
    return key + (f"-{s.scorer}" if s.scorer != "bm25" else "") + (f"-steps{s.step_facts}" if s.step_facts else "")


def store_meta(model_name: str, sha: str | None, settings: FactSettings, index: dict | None) -> dict:
    """What a features directory is made with (its ``meta.json``): the model name and file sha256,
    the prompt version, the fact settings and the index identity (``sqa.pipeline.index_info``
    without ``built_at``). A directory is reused only when all of these match."""
    return {"format": STORE_FORMAT, "model": model_name, "model_sha256": sha, "prompt": PROMPT_VERSION,
            "facts": settings.to_dict(), "index": {k: v for k, v in (index or {}).items() if k != "built_at"}}


_PARTS: dict[str, str] | None = None


def part_of(qid: str) -> str:
    """Which features file of a store holds question ``qid``: ``train-2061``, ``dev`` or ``test``
    (the StrategyQA files, disjoint), else ``other`` (a ``--dataset`` question)."""
    global _PARTS
    if _PARTS is None:
        from sqa.strategyqa import load_questions

        _PARTS = {q.qid: split for split in ("train-2061", "dev", "test") for q in load_questions(split)}
    return _PARTS.get(qid, "other")


class FeaturesStore:
    """A features directory, ``$SQA_HOME/features/<model>/<settings key>/`` (``settings_key``):
    ``meta.json`` (``store_meta``) and one JSON-lines file of ``QuestionFeatures`` records per part
    (``part_of``: ``train-2061.jsonl``, ``dev.jsonl``, ...), appended and fsync'd one question at a
    time, so a kill loses at most the question being read.

    Use as a context manager: entering takes an exclusive ``fcntl.flock`` on ``<dir>/lock`` (one
    writer per features directory; a second process gets SqaError at once) and writes
    ``meta.json``, or checks it (SqaError naming the differing keys). Files are parsed by
    ``parse_features``: a torn last line is cut off (under the lock), a damaged complete line
    raises SqaError naming file:line and nothing is truncated."""

    def __init__(self, root: str | Path, meta: dict):
        self.root = Path(root)
        self.meta = meta
        self._lock = None
        self._files: dict[str, object] = {}

    @staticmethod
    def default_root(model_name: str, settings: FactSettings) -> Path:
        """``$SQA_HOME/features/<model file name>/<settings_key(settings)>``."""
        from sqa.paths import sqa_home

        return sqa_home() / "features" / model_stem(model_name) / settings_key(settings)

    def __enter__(self) -> "FeaturesStore":
        if self.root.exists() and not self.root.is_dir():
            raise SqaError(f"{self.root}: is a file, not a features directory")
        self.root.mkdir(parents=True, exist_ok=True)
        f = open(self.root / "lock", "a+b")
        try:
            lock_exclusive(f, self.root)
        except BaseException:
            f.close()
            raise
        self._lock = f
        try:
            self._check_meta()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for fh in self._files.values():
            fh.close()
        self._files.clear()
        if self._lock is not None:
            self._lock.close()  # closing releases the lock
            self._lock = None

    def _check_meta(self) -> None:
        path = self.root / "meta.json"
        if path.exists():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(old, dict):
                    raise ValueError("not an object")
            except ValueError:
                raise SqaError(f"{path}: not a valid features meta file; delete the directory (the features are "
                               "read again) or move it away") from None
            diff = [k for k in META_KEYS if old.get(k) != self.meta.get(k)]
            if diff:
                raise SqaError(f"{self.root}: features made with other settings ({', '.join(diff)}); move the "
                               "directory away to read them again")
            return
        tmp = path.with_name("meta.json.tmp")
        tmp.write_text(json.dumps(self.meta, indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)

    def path(self, part: str) -> Path:
        """The JSON-lines file of one part (``part_of``)."""
        return self.root / f"{part}.jsonl"

    def read(self) -> dict[str, dict]:
        """qid -> record of every part (torn last lines cut off: the caller holds the lock)."""
        if self._lock is None:
            raise RuntimeError("FeaturesStore.read outside `with`")
        done: dict[str, dict] = {}
        for p in sorted(self.root.glob("*.jsonl")):
            for qid, rec in read_done(p, repair=True).items():
                done.setdefault(qid, rec)
        return done

    def append(self, rec: dict) -> None:
        """Append one record to its part's file (fsync'd)."""
        part = part_of(rec["qid"])
        fh = self._files.get(part)
        if fh is None:
            fh = self._files[part] = open(self.path(part), "a", encoding="utf-8")
        append_record(fh, rec)

    def extract(self, model, selector: FactSelector, questions: Sequence[Question], done: dict[str, dict],
                on_question: Callable[[QuestionFeatures], None] | None = None,
                decompose: Callable[[str, str | None], list[str]] | None = None) -> dict[str, dict]:
        """Read every question of ``questions`` not in ``done`` (``read()``'s result, updated in
        place) and append its record. Returns qid -> record for ``questions``. SqaError when a
        stored record's question text differs from the question's (another file with the same qid)."""
        if selector.needs_steps and decompose is None:
            raise SqaError("these fact settings read step facts: pass a decomposer (sqa.steps.decomposer.Decomposer)")
        for q in questions:
            rec = done.get(q.qid)
            if rec is not None:
                if rec.get("question") != q.question:
                    raise SqaError(f"question {q.qid}: the features in {self.root} were read for another text "
                                   f"({rec.get('question', '')[:60]!r}); use another qid")
                continue
            qf = question_features(model, q, selector.select, decompose if selector.needs_steps else None)
            rec = qf.to_dict()
            self.append(rec)
            done[q.qid] = rec
            if on_question:
                on_question(qf)
        return {q.qid: done[q.qid] for q in questions if q.qid in done}

    def import_files(self, files: Sequence[str | Path], meta: dict, done: dict[str, dict],
                     known: dict[str, Question] | None = None) -> tuple[int, int]:
        """Append the records of features files (``.jsonl`` or ``.jsonl.xz``, e.g. the dumps of
        ``bench/results/features.md``) made with ``meta`` (their ``meta.json``: the old form with
        ``index_paragraphs``/``index_preset`` is read too). Refused with SqaError unless the model,
        its sha256, the prompt, the fact settings and the index's paragraph count match this
        store's. Records already here are skipped; a record whose question text differs from
        ``known[qid]`` (StrategyQA's) is refused naming file:line. Returns (added, skipped)."""
        mine = self.meta
        theirs_index = meta.get("index") or {"paragraph_count": meta.get("index_paragraphs"),
                                             "preset": meta.get("index_preset")}
        diff = [k for k in ("model", "model_sha256", "prompt", "facts") if meta.get(k) != mine.get(k)]
        if theirs_index.get("paragraph_count") != (mine.get("index") or {}).get("paragraph_count"):
            diff.append("index paragraph count")
        if diff:
            raise SqaError(f"the imported features were made with other settings ({', '.join(diff)}) than "
                           f"{self.root}; import them with the matching --model / fact settings / --index-dir")
        added = skipped = 0
        for file in files:
            file = Path(file)
            try:
                if file.name.endswith(".xz"):
                    import lzma

                    data = lzma.open(file).read()
                else:
                    data = file.read_bytes()
            except FileNotFoundError:
                raise SqaError(f"{file}: no such file") from None
            except (OSError, EOFError) as e:  # lzma.LZMAError is an OSError... and a bad xz stream one too
                raise SqaError(f"{file}: cannot read it ({e})") from None
            recs, end = parse_features(data, file)
            if end != len(data):
                raise SqaError(f"{file}: its last line is cut off; import a complete file")
            for i, (qid, rec) in enumerate(recs.items(), start=1):
                q = (known or {}).get(qid)
                if q is not None and q.question != rec["question"]:
                    raise SqaError(f"{file}: record {i} (qid {qid}) has another question text than StrategyQA's")
                if qid in done:
                    skipped += 1
                    continue
                self.append(rec)
                done[qid] = rec
                added += 1
        return added, skipped
