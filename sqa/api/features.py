"""Seeding the facts reader's features store with features read before (``sqa features import``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sqa.types import BadInput


@dataclass
class ImportResult:
    """What :func:`import_features` did: ``added`` questions' features written, ``skipped`` ones
    already in the store, ``store``: the store's folder."""

    added: int
    skipped: int
    store: Path


def import_features(
    files: Sequence[str | Path],
    meta: str | Path | None = None,
    model: str = "qwen2.5-coder-1.5b",
    index_dir: str | Path | None = None,
    backend: str = "embedded",
) -> ImportResult:
    """Import features files (``.jsonl`` or ``.jsonl.xz``, one ``QuestionFeatures`` record a line)
    into ``$SQA_HOME/features/<model_stem(model)>/<settings>/`` (:class:`sqa.facts.store.FeaturesStore`)
    after checking their ``meta.json`` (``meta``; default: beside the first file: model, model
    sha256, prompt version, fact settings, index paragraph count) against the store's, so those
    questions are not read again by ``sqa eval --split train``. ``index_dir``: the index the
    features were selected from (default ``$SQA_HOME/index``).

    Raises :class:`sqa.types.BadInput` for a missing file or meta file, :class:`sqa.types.IndexNotFound`
    for a missing index, :class:`sqa.types.StoreMismatch` (or SqaError) when the files do not
    belong to the store."""
    from sqa.facts.store import FeaturesStore, store_meta
    from sqa.models.registry import model_file_sha256, model_stem
    from sqa.paths import default_index_dir
    from sqa.pipeline import index_info, open_index
    from sqa.strategyqa import questions_by_id

    files = [Path(f) for f in files]
    for f in files:
        if not f.is_file():
            raise BadInput(f"{f}: no such features file")
    meta_path = Path(meta) if meta is not None else files[0].parent / "meta.json"
    try:
        m = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(m, dict) or not isinstance(m.get("facts"), dict):
            raise ValueError("no 'facts' settings object")
    except FileNotFoundError:
        raise BadInput(f"{meta_path}: no meta.json; pass the features' meta file with --meta") from None
    except ValueError as e:
        raise BadInput(f"{meta_path}: not a features meta file ({e})") from None
    idx = Path(index_dir).expanduser() if index_dir else default_index_dir()
    open_index(idx, backend).close()  # a missing index is named before anything is written
    info = index_info(idx, backend)
    safe = model_stem(model)
    settings = meta_settings(m["facts"], meta_path)
    root = FeaturesStore.default_root(safe, settings)
    new = [d for d in (root, root.parent, root.parent.parent) if not d.exists()]  # the folders this import makes
    try:
        with FeaturesStore(root, store_meta(safe, model_file_sha256(model), settings, info)) as store:
            done = store.read()
            added, skipped = store.import_files(files, m, done, questions_by_id())
    except BaseException:
        if new and not any(root.glob("*.jsonl")):  # refused before a record was written: nothing is left behind
            for name in ("meta.json", "lock"):
                (root / name).unlink(missing_ok=True)
            for d in new:
                if d.is_dir() and not any(d.iterdir()):
                    d.rmdir()
        raise
    return ImportResult(added, skipped, store.root)


# the whole-number settings of a features meta's ``facts`` and their least values
_WHOLE = {"wiki": 0, "train": 0, "k": 1, "max_words": 1, "sentence_paragraphs": 1, "step_facts": 0}


def meta_settings(facts: dict, meta_path: Path):
    """The ``sqa.facts.features.FactSettings`` of a features meta file's ``facts`` object. Raises
    BadInput naming ``meta_path`` and the setting (``facts.k``, ...) when one is of the wrong type or
    out of range, before anything is written."""
    from sqa.facts.features import FactSettings
    from sqa.types import MAX_K, SqaError

    def bad(key: str, what: str) -> BadInput:
        return BadInput(
            f"{meta_path}: setting 'facts.{key}' is {json.dumps(facts[key])[:40]}, not {what}; fix it to the "
            "settings the features were read with (nothing was written)"
        )

    for key, low in _WHOLE.items():
        v = facts.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not low <= v <= MAX_K):
            raise bad(key, f"a whole number from {low} to {MAX_K:,}")
    for key in ("scorer", "prompt"):
        if facts.get(key) is not None and not isinstance(facts[key], str):
            raise bad(key, "a string")
    try:
        return FactSettings.from_dict(facts)
    except (SqaError, ValueError) as e:
        raise BadInput(
            f"{meta_path}: its 'facts' settings are not valid ({e}); fix them (nothing was written)"
        ) from None
