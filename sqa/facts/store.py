"""The features store of out-of-fold runs (``sqa eval --split train``, ``sqa features import``):
``$SQA_HOME/features/<model>/<settings key>/`` with ``meta.json`` and one JSON-lines file of
``QuestionFeatures`` records per StrategyQA file, written and read through the one parser/writer of
:mod:`sqa.facts.features` (``parse_features``, ``read_done``, ``append_record``), one writer at a
time (an ``fcntl.flock`` lock). Issue 34 item 1, issue 35.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Sequence

from sqa.facts.features import (
    FactSelector,
    FactSettings,
    append_record,
    lock_exclusive,
    parse_features,
    question_features,
    read_done,
)
from sqa.facts.prompt import QuestionFeatures, prompt_version
from sqa.models.registry import model_stem
from sqa.types import Question, SqaError, StoreMismatch
from sqa.outfile import check_target

STORE_FORMAT = "sqa-features/1"
META_KEYS = ("model", "model_sha256", "prompt", "facts", "index")


def made_with(meta: dict) -> str:
    """The identity stamp every record of a store carries (``made_with``): 16 hex digits of the
    sha256 of the store's ``META_KEYS`` (model, model file sha256, prompt, fact settings, index), so a
    record copied in from another model's or other settings' store is recognised (issue 41 item 4)."""
    return hashlib.sha256(json.dumps({k: meta.get(k) for k in META_KEYS}, sort_keys=True).encode()).hexdigest()[:16]


def record_key(qid: str, question: str) -> str:
    """The key of a stored record: its qid and the sha256 of its question text, so a ``--dataset``
    question that reuses a StrategyQA qid with other text is read anew, never answered from the
    original's features (issue 41 item 3)."""
    return f"{qid}#{hashlib.sha256(question.encode('utf-8')).hexdigest()[:16]}"


def question_key(q: Question) -> str:
    """``record_key`` of a question."""
    return record_key(q.qid, q.question)


def _rec_key(rec: dict) -> str:
    return record_key(rec["qid"], rec["question"])


def state_width(rec: dict) -> int | None:
    """Floats per hidden state of a record (its first state), None when it has none."""
    import base64

    for v in (rec.get("states") or {}).values():
        if isinstance(v, str):
            try:
                return len(base64.b64decode(v)) // 2  # float16
            except ValueError:
                return None
        return int(getattr(v, "size", len(v)))
    return None


def settings_key(settings: FactSettings) -> str:
    """The folder name of a features directory for ``settings``, e.g. ``facts-v1-k10-top3-w3t2-40w``
    (``-minilm`` / ``-steps2`` appended when those are on; ``facts-v1-chat-...`` for the chat prompt
    form, so reads of the two forms never share a store)."""
    s = settings
    key = f"{prompt_version(s.form)}-k{s.k}-top{s.sentence_paragraphs}-w{s.wiki}t{s.train}-{s.max_words}w"
    return key + (f"-{s.scorer}" if s.scorer != "bm25" else "") + (f"-steps{s.step_facts}" if s.step_facts else "")


def store_meta(
    model_name: str, sha: str | None, settings: FactSettings, index: dict | None, served: dict | None = None
) -> dict:
    """What a features directory is made with (its ``meta.json``): the model name and file sha256,
    the prompt version, the fact settings and the index identity (``sqa.pipeline.index_info``
    without ``built_at``), and for a served model ``served``, the identity of the weights behind
    its name (``sqa.models.served_probe.served_identity``: fingerprint, its reads, endpoint). A
    directory is reused only when all of these match (``served``: ``same_weights``, which allows
    for serving noise)."""
    meta = {
        "format": STORE_FORMAT,
        "model": model_name,
        "model_sha256": sha,
        "prompt": prompt_version(settings.form),
        "facts": settings.to_dict(),
        "index": {k: v for k, v in (index or {}).items() if k != "built_at"},
    }
    if served is not None:
        meta["served"] = served
    return meta


def served_problem(stored: dict | None, now: dict | None, model: str) -> str | None:
    """Why features (or a head's) recorded with served identity ``stored`` must not be used with the
    weights of identity ``now`` (``sqa.models.served_probe.served_identity``): "read from other
    weights behind MODEL (...) than those served now (...)", or None when they may (the same
    weights, or an in-process model)."""
    from sqa.models.served_probe import identity_line, same_weights

    if now is None:
        return None
    if not isinstance(stored, dict):
        return (
            f"read from {model} before sqa recorded a served model's identity, so whether "
            f"the weights now behind that name ({identity_line(now)}) made them is unknown"
        )
    if same_weights(stored, now):
        return None
    return (
        f"read from other weights behind {model} ({identity_line(stored)}) than those served now ({identity_line(now)})"
    )


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
        self._width: int | None = None  # floats per hidden state of the records read so far

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
            try:
                fh.close()
            except OSError:  # a write that failed (full disk) left bytes in the buffer: the torn line is cut next time
                pass
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
                n = len(list(self.root.glob("*.jsonl")))
                raise StoreMismatch(
                    f"{path}: not a valid features meta file; the {n} features file(s) beside it are "
                    "intact: rename meta.json (e.g. meta.json.bad) and run with the settings they were "
                    "read with, and a new meta.json is written (each record carries its own identity)"
                ) from None
            diff = [k for k in META_KEYS if old.get(k) != self.meta.get(k)]
            if diff:
                k = diff[0]
                shown = "; ".join(f"{k}: stored {_short(old.get(k))} vs now {_short(self.meta.get(k))}" for k in diff)
                hint = {
                    "index": "use the index they were read with (--index-dir, --backend)",
                    "model": "use the model they were read with (--model)",
                    "model_sha256": "the model file differs from the one they were read with",
                }.get(k, "use the fact settings they were read with")
                raise StoreMismatch(
                    f"{path}: the stored features were made with other settings ({shown}); {hint}, or "
                    "set SQA_HOME to another folder for a new store; nothing was deleted"
                )
            why = served_problem(old.get("served"), self.meta.get("served"), str(self.meta.get("model")))
            if why:
                raise StoreMismatch(
                    f"{path}: the stored features were {why}; serve the weights they were read with, or move {self.root} aside (or set "
                    "SQA_HOME to another folder) to read them anew; nothing was deleted"
                )
            if "served" in old:  # the same weights: the identity they were recorded with stays
                self.meta["served"] = old["served"]
            return
        tmp = path.with_name("meta.json.tmp")
        check_target(path, tmp)  # sqa.outfile
        try:
            tmp.write_text(json.dumps(self.meta, indent=1) + "\n", encoding="utf-8")
            tmp.replace(path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise SqaError(_write_failed(path, e)) from None

    def path(self, part: str) -> Path:
        """The JSON-lines file of one part (``part_of``)."""
        return self.root / f"{part}.jsonl"

    def read(self) -> dict[str, dict]:
        """``record_key`` -> record of every part (torn last lines cut off: the caller holds the
        lock). Raises StoreMismatch naming file:line and the field for a record made with another
        model or settings (its ``made_with``) or whose hidden states have another width than the
        model's (or the other records'); nothing is deleted."""
        if self._lock is None:
            raise RuntimeError("FeaturesStore.read outside `with`")
        done: dict[str, dict] = {}
        for p in sorted(self.root.glob("*.jsonl")):
            for k, rec in read_done(p, repair=True, key=_rec_key, check=self._checker(p)).items():
                done.setdefault(k, rec)
        return done

    def _checker(self, path: Path, meta: dict | None = None):
        """``check(record, line)`` for ``parse_features``: the record's ``made_with`` (when it has
        one: records written before issue 41 have none) must be this store's (or ``meta``'s), and
        its state width the model's hidden size (a registry model) or the first record's."""
        from sqa.models.registry import MODELS

        stamp = made_with(self.meta)
        ok = {None, stamp} | ({made_with(meta)} if meta is not None else set())
        spec = MODELS.get(self.meta.get("model") or "")

        def check(rec: dict, lineno: int) -> None:
            if rec.get("made_with") not in ok:
                raise StoreMismatch(
                    f"{path}:{lineno}: field 'made_with' is {rec['made_with']!r}, not this store's "
                    f"{stamp!r}: the record was read with another model or settings ({self.root}); move "
                    "that file out of the store (nothing was deleted)"
                )
            w = state_width(rec)
            if w is None:
                return
            want = spec.hidden_size if spec is not None and spec.hidden_size else self._width
            if want is None:
                self._width = w
            elif w != want:
                raise StoreMismatch(
                    f"{path}:{lineno}: field 'states' holds {w:,} floats a state, but "
                    f"{self.meta.get('model')}'s features have {want:,}: the record was read with another "
                    "model; move that file out of the store (nothing was deleted)"
                )

        return check

    def append(self, rec: dict) -> None:
        """Append one record, stamped with this store's ``made_with``, to its part's file (fsync'd).
        Raises SqaError naming the file when the write fails (a full disk): the records written
        before are kept."""
        rec["made_with"] = made_with(self.meta)
        part = part_of(rec["qid"])
        path = self.path(part)
        try:
            fh = self._files.get(part)
            if fh is None:
                fh = self._files[part] = open(path, "a", encoding="utf-8")
            append_record(fh, rec)
        except OSError as e:
            fh = self._files.pop(part, None)
            if fh is not None:
                try:
                    fh.close()
                except OSError:
                    pass
            raise SqaError(_write_failed(path, e)) from None

    def extract(
        self,
        model,
        selector: FactSelector,
        questions: Sequence[Question],
        done: dict[str, dict],
        on_question: Callable[[QuestionFeatures], None] | None = None,
        decompose: Callable[[str, str | None], list[str]] | None = None,
    ) -> dict[str, dict]:
        """Read every question of ``questions`` not in ``done`` (``read()``'s result, updated in
        place, keyed by ``question_key``) and append its record. Returns qid -> record for
        ``questions``; a stored record of the same qid with another question text is not used (the
        question is read anew)."""
        if selector.needs_steps and decompose is None:
            raise SqaError("these fact settings read step facts: pass a decomposer (sqa.steps.decomposer.Decomposer)")
        for q in questions:
            if question_key(q) in done:
                continue
            qf = question_features(
                model, q, selector.select, decompose if selector.needs_steps else None, selector.settings.form
            )
            rec = qf.to_dict()
            self.append(rec)
            done[question_key(q)] = rec
            if on_question:
                on_question(qf)
        return {q.qid: done[question_key(q)] for q in questions if question_key(q) in done}

    def import_files(
        self, files: Sequence[str | Path], meta: dict, done: dict[str, dict], known: dict[str, Question] | None = None
    ) -> tuple[int, int]:
        """Append the records of features files (``.jsonl`` or ``.jsonl.xz``, e.g. the dumps of
        ``bench/results/features.md``) made with ``meta`` (their ``meta.json``: the old form with
        ``index_paragraphs``/``index_preset`` is read too). Refused with SqaError unless the model,
        its sha256, the prompt, the fact settings and the index's paragraph count match this
        store's. Records already here are skipped; a record whose question text differs from
        ``known[qid]`` (StrategyQA's) is refused naming file:line. Returns (added, skipped)."""
        mine = self.meta
        theirs_index = meta.get("index") or {
            "paragraph_count": meta.get("index_paragraphs"),
            "preset": meta.get("index_preset"),
        }
        diff = [k for k in ("model", "model_sha256", "prompt", "facts") if meta.get(k) != mine.get(k)]
        if theirs_index.get("paragraph_count") != (mine.get("index") or {}).get("paragraph_count"):
            diff.append("index paragraph count")
        if served_problem(meta.get("served"), mine.get("served"), str(mine.get("model"))):
            diff.append("the served weights (fingerprint)")
        if diff:
            raise SqaError(
                f"the imported features were made with other settings ({', '.join(diff)}) than "
                f"{self.root}; import them with the matching --model / fact settings / --index-dir"
            )
        added = skipped = 0
        for file in files:
            file = Path(file)
            try:
                if file.name.endswith(".xz"):
                    import lzma

                    try:
                        with lzma.open(file) as f:
                            data = f.read()
                    except lzma.LZMAError as e:  # not an OSError: a damaged .xz stream
                        raise SqaError(f"{file}: not a readable .xz file ({e}); download or copy it again") from None
                else:
                    data = file.read_bytes()
            except FileNotFoundError:
                raise SqaError(f"{file}: no such file") from None
            except (OSError, EOFError) as e:
                raise SqaError(f"{file}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
            recs, end = parse_features(data, file, key=_rec_key, check=self._checker(file, meta))
            if end != len(data):
                raise SqaError(f"{file}: its last line is cut off; import a complete file")
            for i, (k, rec) in enumerate(recs.items(), start=1):
                q = (known or {}).get(rec["qid"])
                if q is not None and q.question != rec["question"]:
                    raise SqaError(f"{file}: record {i} (qid {rec['qid']}) has another question text than StrategyQA's")
                if k in done:
                    skipped += 1
                    continue
                self.append(dict(rec))
                done[k] = rec
                added += 1
        return added, skipped


def _short(v) -> str:
    """A stored / current meta value for a message (at most 80 characters)."""
    t = json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
    return t if len(t) <= 80 else t[:77] + "..."


def _write_failed(path: Path, e: OSError) -> str:
    """The one line for a features write that failed (a full disk, permissions), naming the file."""
    import errno

    why = "the disk is full" if e.errno in (errno.ENOSPC, errno.EDQUOT) else (e.strerror or str(e))
    return (
        f"{path}: cannot write features ({why}); the features read so far are kept in {path.parent}: free space "
        "there (or set SQA_HOME to a folder on another disk and move $SQA_HOME/features there), then run the same "
        "command to continue"
    )
