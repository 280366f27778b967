"""What the bench scripts that re-read a base features file with other facts share
(bench/step_facts_extract.py, bench/generated_facts_extract.py): loading the base records (their
``plain`` read-out is copied, so the prompt version must match) and the resumable, fsync'd,
progress-reporting loop that writes one new record per base record."""
import json
import time
from pathlib import Path
from typing import Callable, Sequence

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sqa.facts.features import append_record, read_done
from sqa.facts.prompt import PROMPT_VERSION

from head_cv import load_records  # bench/ is on sys.path when a bench script runs


def load_base(base: Path, split: str, start: int = 0, limit: int | None = None) -> tuple[dict, list[dict]]:
    """(``base``'s meta.json, its ``split`` records ``start``..``limit`` in file order). Exits with
    a message when the base was made with another prompt version (its plain states could not be
    copied)."""
    meta = json.loads((base / "meta.json").read_text())
    if meta.get("prompt") != PROMPT_VERSION:
        raise SystemExit(f"{base}: prompt {meta.get('prompt')} is not {PROMPT_VERSION}; plain states cannot be copied")
    return meta, load_records(base, split)[start:limit]


def extend(out: Path, split: str, recs: Sequence[dict], meta: dict, one: Callable[[dict], dict]) -> None:
    """Write ``meta`` to ``OUT/meta.json``, then ``one(base_record) -> new record`` for every record
    of ``recs`` not yet in ``OUT/SPLIT.jsonl`` (a torn last line is repaired), appended and fsync'd
    one at a time, with a rich progress bar (seconds per question, ETA)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    path = out / f"{split}.jsonl"
    done = read_done(path, repair=True)
    todo = [r for r in recs if r["qid"] not in done]
    cols = (TextColumn(split), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*cols) as prog, open(path, "a", encoding="utf-8") as f:
        task = prog.add_task(split, total=len(todo), rate="")
        t0 = time.perf_counter()
        for n, base in enumerate(todo, start=1):
            append_record(f, one(base))
            prog.update(task, advance=1, rate=f"{(time.perf_counter() - t0) / n:.1f} s/q")
