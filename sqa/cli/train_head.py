"""``sqa train-head`` (retired) and ``sqa features import``.

``sqa train-head`` is retired (issue 35): ``sqa eval --split train --model M`` reads the features
once, answers every train question out-of-fold and writes M's answer heads to ``$SQA_HOME/heads``
as a by-product. The old command name answers with that one line and exit code 2.

``sqa features import FILE... [--meta META] [--model M] [--index-dir DIR]`` seeds the features
store of ``sqa eval`` (``$SQA_HOME/features/<model>/<settings>/``, :class:`sqa.facts.store.FeaturesStore`)
with features files read before (``.jsonl`` or ``.jsonl.xz``, e.g. the dumps listed in
bench/results/features.md), after checking their ``meta.json`` (model, model sha256, prompt
version, fact settings, index paragraph count) against the store's, so those questions are not
read again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from sqa.cli import app
from sqa.cli.common import BackendOpt, IndexDirOpt, resolve_index_dir
from sqa.types import SqaError

RETIRED = ("`sqa train-head` is retired: `sqa eval --split train --model M` answers the train questions out-of-fold "
           "and writes M's answer heads to $SQA_HOME/heads")


@app.command("train-head", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def train_head_command(ctx: typer.Context) -> None:
    """Retired: use `sqa eval --split train --model M` (it writes the answer heads)."""
    raise SqaError(RETIRED)


features_app = typer.Typer(help="The facts reader's features store ($SQA_HOME/features): import features read before.",
                           no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
app.add_typer(features_app, name="features")


@features_app.command("import")
def features_import_command(
    files: Annotated[List[Path], typer.Argument(help="Features files (.jsonl or .jsonl.xz), one QuestionFeatures "
                                                     "record a line.")],
    meta: Annotated[Optional[Path], typer.Option("--meta", help="Their meta.json (default: meta.json beside the first "
                                                 "file).", show_default=False)] = None,
    model: Annotated[str, typer.Option("--model", help="The reader model they were read with (its name, as for "
                                                       "`sqa eval --model`).")] = "qwen2.5-coder-1.5b",
    index_dir: IndexDirOpt = None,
    backend: BackendOpt = "embedded",
) -> None:
    """Seed the features store of `sqa eval --split train` with features read before (checked against their meta.json)."""
    from sqa.cli.eval_oof import _model_sha
    from sqa.facts.features import FactSettings
    from sqa.facts.store import FeaturesStore, store_meta
    from sqa.pipeline import index_info, open_index
    from sqa.strategyqa import questions_by_id

    for f in files:
        if not f.is_file():
            raise SqaError(f"{f}: no such features file")
    meta_path = meta or files[0].parent / "meta.json"
    try:
        m = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(m, dict) or not isinstance(m.get("facts"), dict):
            raise ValueError("no 'facts' settings object")
    except FileNotFoundError:
        raise SqaError(f"{meta_path}: no meta.json; pass the features' meta file with --meta") from None
    except ValueError as e:
        raise SqaError(f"{meta_path}: not a features meta file ({e})") from None
    idx = resolve_index_dir(index_dir)
    open_index(idx, backend).close()  # a missing index is named before anything is written
    info = index_info(idx, backend)
    safe = Path(model).name
    settings = FactSettings.from_dict(m["facts"])
    store_m = store_meta(safe, _model_sha(model), settings, info)
    with FeaturesStore(FeaturesStore.default_root(safe, settings), store_m) as store:
        done = store.read()
        added, skipped = store.import_files(files, m, done, questions_by_id())
    typer.echo(f"imported {added:,} questions' features ({skipped:,} already there) -> {store.root}")
