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
    from sqa.facts.features import FactSettings
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
    settings = FactSettings.from_dict(m["facts"])
    with FeaturesStore(
        FeaturesStore.default_root(safe, settings), store_meta(safe, model_file_sha256(model), settings, info)
    ) as store:
        done = store.read()
        added, skipped = store.import_files(files, m, done, questions_by_id())
    return ImportResult(added, skipped, store.root)
