"""The user's answer heads, ``$SQA_HOME/heads`` (issue 41 item 1): heads are data the user paid for
(a full train run is hours of reading), so

- a train run writes its heads *beside* the others, each file named by what it was fitted on:
  ``<model>.<kind>.<settings key>.n<questions>-<8 hex of the sha256 of the fitted qids>.json``
  (``head_file_name``); a run never writes over a head fitted on other questions, and with
  ``replace`` (``--replace-heads``) it removes the model's other heads of that kind, prompt
  form and fact settings (the same ``<model>.<kind>.<settings key>.`` prefix, which holds the
  form), naming each one it removes; heads of other settings or forms are kept;
- the head that answers (``choose_head``) is the one fitted on the most questions, among the
  user's heads of the model and kind and the head shipped in the package (``sqa/_data/heads``;
  on a tie the user's newest);
- ``list_heads`` / ``remove_head`` back ``sqa heads list`` and ``sqa heads rm NAME``; a shipped
  head is never removed, and ``rm`` removes only a regular file named as a head whose content is
  a head (or a damaged head: JSON text that ``choose_head`` names); anything else is refused by name.

Files written before issue 41 (``<model>.<kind>.json``) take part like any other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqa.facts.head import HEADS_DIR, AnswerHead
from sqa.types import HeadNotFound, SqaError


def heads_dir() -> Path:
    """``$SQA_HOME/heads``: where train runs write the user's heads."""
    from sqa.paths import sqa_home

    return sqa_home() / "heads"


def fitted_count(head: AnswerHead) -> int:
    """How many questions ``head`` was fitted on: its ``provenance.fitted_qids`` (the out-of-fold
    train run records them), else ``provenance.train_size`` (the shipped heads), else 0."""
    prov = head.provenance or {}
    if isinstance(prov.get("fitted_qids"), list):
        return len(prov["fitted_qids"])
    n = prov.get("train_size")
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else 0


def qids_digest(qids) -> str:
    """8 hex digits of the sha256 of the sorted qids, newline-joined."""
    return hashlib.sha256("\n".join(sorted(qids)).encode()).hexdigest()[:8]


def head_file_name(stem: str, kind: str, settings_key: str, qids) -> str:
    """The file name of a head of model ``stem`` (``model_stem``), ``kind`` ("facts" | "plain"),
    fact settings ``settings_key`` (``sqa.facts.store.settings_key``) fitted on ``qids``, e.g.
    ``qwen2.5-coder-1.5b.facts.facts-v1-k10-top3-w3t2-40w.n2283-1a2b3c4d.json``."""
    qids = list(qids)
    return f"{stem}.{kind}.{settings_key}.n{len(qids)}-{qids_digest(qids)}.json"


@dataclass
class HeadEntry:
    """One head file: its path, whether it ships with the package, the questions it was fitted
    on (0: unknown) and, for a file that cannot be read, the problem (``head`` None then)."""

    path: Path
    shipped: bool
    n: int = 0
    head: AnswerHead | None = None
    problem: str = ""

    @property
    def name(self) -> str:
        return self.path.name

    def shown(self) -> str:
        """How answers name it: ``<file> (fitted on N questions[, shipped])``."""
        return f"{self.path} (fitted on {self.n:,} questions{', shipped' if self.shipped else ''})"


def _entry(path: Path, shipped: bool) -> HeadEntry:
    try:
        h = AnswerHead.load(path)
    except SqaError as e:
        return HeadEntry(path, shipped, problem=str(e))
    return HeadEntry(path, shipped, fitted_count(h), h)


def _matches(path: Path, stem: str | None, kind: str | None) -> bool:
    name = path.name
    if stem is None:
        return name.endswith(".json") and (".facts." in name or ".plain." in name)
    prefix = f"{stem}.{kind}." if kind else f"{stem}."
    return (
        name.startswith(prefix)
        and name.endswith(".json")
        and (kind is not None or name[len(prefix) :].split(".", 1)[0] in ("facts", "plain"))
    )


def list_heads(stem: str | None = None, kind: str | None = None) -> list[HeadEntry]:
    """The user's heads (``heads_dir()``) then the shipped ones, of model ``stem`` and ``kind``
    when given (None: all), each read (a damaged file is listed with its ``problem``)."""
    out = []
    for root, shipped in ((heads_dir(), False), (HEADS_DIR, True)):
        if root.is_dir():
            out += [_entry(p, shipped) for p in sorted(root.glob("*.json")) if _matches(p, stem, kind)]
    return out


def choose_head(stem: str, kind: str, train: str, form: str = "text") -> HeadEntry:
    """The head that answers for model ``stem`` and ``kind``: the one fitted on the most questions
    among the user's and the shipped heads whose features were read in prompt ``form`` ("text" |
    "chat", ``sqa.facts.reader.head_form``; a head of the other form never answers). Raises
    HeadNotFound when there is none (``train``: the command that builds one) and SqaError naming
    a damaged user head (deleting it with ``sqa heads rm`` lets the next head answer; nothing is
    skipped silently)."""
    from sqa.facts.reader import head_form

    entries = [e for e in list_heads(stem, kind) if e.head is None or head_form(e.head) == form]
    bad = next((e for e in entries if e.head is None), None)
    if bad is not None:
        others = [e for e in entries if e.head is not None]
        fallback = (
            f"{others[0].name if len(others) == 1 else 'the head fitted on the most questions'} then answers"
            if others
            else f"then build one with `{train}`"
        )
        where = (
            "a shipped head: reinstall sqa" if bad.shipped else f"remove it with `sqa heads rm {bad.name}` ({fallback})"
        )
        raise SqaError(f"{bad.problem.split('; re-create it')[0]}; {where}")
    if not entries:
        raise HeadNotFound(
            f"no answer head for model {stem}"
            + (" for the chat prompt form" if form == "chat" else "")
            + f"; build its heads with `{train}`"
        )

    def rank(e: HeadEntry):
        return (e.n, not e.shipped, e.path.stat().st_mtime_ns if not e.shipped else 0)

    return max(entries, key=rank)


def save_heads(
    heads: dict[str, AnswerHead],
    stem: str,
    settings_key: str,
    replace: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[tuple[Path, HeadEntry]]:
    """Write each head of a train run (kind -> head, ``provenance.fitted_qids`` set) to
    ``heads_dir()/head_file_name(...)`` beside the others; the same file name is the same fit, so
    only then is a file written over. ``replace``: the model's other user heads of that kind, fact
    settings and prompt form (readable heads named ``<stem>.<kind>.<settings_key>.n...``) are
    removed first, each named through ``log`` (shipped heads never; heads of other settings or
    forms, damaged files and older names are kept). Returns, per kind, (the path written, the
    head that now answers: ``choose_head``)."""
    from sqa.facts.reader import head_form

    out = []
    root = heads_dir()
    for kind, h in heads.items():
        qids = h.provenance.get("fitted_qids") or []
        path = root / head_file_name(stem, kind, settings_key, qids)
        if replace:
            same = f"{stem}.{kind}.{settings_key}.n"
            for e in list_heads(stem, kind):
                if (
                    not e.shipped
                    and e.path != path
                    and e.name.startswith(same)
                    and e.head is not None
                    and head_form(e.head) == head_form(h)
                    and e.path.is_file()
                    and not e.path.is_symlink()
                ):
                    e.path.unlink(missing_ok=True)
                    if log is not None:
                        log(f"--replace-heads: removed {e.path} (fitted on {e.n:,} questions)")
        h.save(path)

        out.append((path, choose_head(stem, kind, "", head_form(h))))
    return out


def remove_head(name: str) -> Path:
    """Delete the user head file ``name`` (a file name in ``heads_dir()``); returns its path.
    Raises SqaError for a shipped head (never removed), a name with a folder in it, no such file, or
    a file that is not a head: named otherwise than ``sqa heads list`` lists, a link or not a
    regular file, or content that is neither a head nor JSON text (a damaged head)."""
    if not name or "/" in name or name in (".", ".."):
        raise SqaError(f"{name!r}: give a head's file name as `sqa heads list` shows it")
    path = heads_dir() / name
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise SqaError(f"{path}: not a head file (a link or not a regular file); nothing was removed")
    if not path.is_file():
        if (HEADS_DIR / name).is_file():
            raise SqaError(
                f"{name}: a shipped head (in the package) is never removed; the head fitted on the most "
                "questions answers, so a larger head of your own takes over by itself"
            )
        raise SqaError(f"{path}: no such head; `sqa heads list` shows the heads")
    if not _matches(path, None, None):
        raise SqaError(f"{path}: not a head (`sqa heads list` lists none by that name); nothing was removed")
    if _entry(path, False).head is None:
        try:
            start = path.read_bytes()[:64].lstrip()
        except OSError:
            start = b""
        if not start.startswith(b"{"):
            raise SqaError(f"{path}: its content is not an answer head; nothing was removed")
    path.unlink()
    return path


def answering_paths(entries: list[HeadEntry]) -> set[Path]:
    """The paths among ``entries`` (``list_heads``) of the heads that answer: per model, kind and
    prompt form, the one :func:`choose_head` picks (none where it raises, e.g. a damaged user head)."""
    from sqa.facts.reader import head_form
    from sqa.models.registry import model_stem

    out = set()
    for e in entries:
        if e.head is not None:
            stem = model_stem(e.head.model)
            kind = e.head.provenance.get("kind") or e.name[len(stem) + 1 :].split(".")[0]
            try:
                out.add(choose_head(stem, kind, "", head_form(e.head)).path)
            except SqaError:
                pass
    return out


def head_identity_checked(head: AnswerHead | None, model: str) -> bool | None:
    """For a served ``model`` (``openai:NAME``; known before it loads): whether ``head`` is checked
    against the weights served (``check_served_head``): True when it records the identity of the
    weights its features were read from (``provenance.served``) or lies in ``heads_dir()`` (where a
    head without that record is refused); False for a head file from elsewhere (``--head``) without
    it, which nothing can check: it answers on the user's word, with :func:`unchecked_head_note`
    warned (``SqaWarning``, by ``sqa.pipeline.build_reader``) and ``identity_checked: false`` recorded (run.json ``head``, ``sqa ask --json``
    ``head_identity_checked``). None: no head, or an in-process model (its file's sha256 is checked
    by ``AnswerHead.check_model``)."""
    from sqa.models.registry import is_served

    if head is None or not is_served(model):
        return None
    if (head.provenance or {}).get("served") is not None:
        return True
    return bool(head.source and Path(head.source).resolve().parent == heads_dir().resolve())


def unchecked_head_note(head: AnswerHead, model: str) -> str:
    """The one warning line for a head that :func:`head_identity_checked` says is not checked."""
    return (
        f"{head.shown} records no identity of the weights it was fitted on, so it could not be "
        f"checked against the weights served as {model}; it answers on your word (identity_checked: "
        "false); heads from `sqa eval --split train` record it"
    )


def check_served_head(head: AnswerHead, model) -> None:
    """Raise HeadNotFound (one line, naming the command that builds a head) unless ``head`` may
    read a served ``model``'s read-outs: the identity of the weights its features were read from
    (``provenance.served``, recorded by the train run) names the weights served now
    (``sqa.models.served_probe.same_weights``, which allows for serving noise). A head in
    ``heads_dir()`` without that record (fitted before sqa recorded it) is refused too, since
    whose weights it was fitted on is unknown; a head file given from elsewhere (``--head``)
    without it cannot be checked and answers on the user's word (:func:`head_identity_checked`
    False: ``sqa.pipeline.build_reader`` warns :func:`unchecked_head_note` and the callers record it). In-process models:
    nothing to check (their file's sha256 is, by ``check_model``)."""
    from sqa.facts.store import served_problem
    from sqa.models.served_probe import served_identity

    now = served_identity(model)
    if now is None:
        return
    stored = (head.provenance or {}).get("served")
    if head_identity_checked(head, model.name) is False:
        return
    why = served_problem(stored, now, model.name)
    if why:
        train = f"sqa eval --split train --model {model.name}" + "".join(
            f" --base-url {u}" for u in now.get("base_urls") or []
        )
        raise HeadNotFound(
            f"{head.shown}: its features were {why}; build the heads of the weights "
            f"served now with `{train}` (or serve the weights it was fitted on)"
        )
