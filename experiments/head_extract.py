"""Extract answer-head features (facts reader, ``sqa.facts.features``) for a list of questions, resumable.

    python -m experiments.head_extract --index-dir INDEX_DIR --out experiments/work/head \
        --plan train-2061:0:600 dev train-2061:600:1000

Each plan item ``SPLIT[:START:END]`` appends to ``OUT/SPLIT.jsonl``; the 6 fixed demonstration
questions are skipped. Run it again after an interruption: finished questions are kept.

``--oracle facts``: the reader is shown each question's own annotated StrategyQA facts instead of
retrieved ones (``FactSelector(oracle="facts")``, as ``sqa eval --oracle facts``), read out after
each; a diagnostic upper bound for ``experiments/head_cv.py`` (what a head gains from the right facts),
never a system input. ``--oracle paragraphs``: the 5 best sentences (BM25 against the question) of
its annotated evidence paragraphs instead (as ``sqa eval --oracle paragraphs``): what a head gains
from perfect paragraph retrieval with the shipped sentence picking. ``OUT/meta.json`` records the settings (``sqa train-head``'s ``features_meta``
plus ``oracle``); a directory made with other settings is refused.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sqa.facts.features import FactSelector, FactSettings, extract, read_done
from sqa.facts.prompt import PROMPT_VERSION, demo_qids
from sqa.facts.training import model_sha256
from sqa.models.registry import load_model
from sqa.pipeline import index_info, make_retriever, open_index
from sqa.strategyqa import load_questions
from sqa.types import SqaError


def features_meta(model_name: str, sha: str | None, settings: FactSettings, index: dict) -> dict:
    """What a features directory was made with (the keys `sqa train-head` writes in its meta.json):
    model name and sha256, prompt version, fact settings, index paragraph count and preset."""
    return {
        "model": model_name,
        "model_sha256": sha,
        "prompt": PROMPT_VERSION,
        "facts": settings.to_dict(),
        "index_paragraphs": index.get("paragraph_count"),
        "index_preset": index.get("preset"),
    }


def check_meta(dir_: Path, meta: dict) -> None:
    """Write ``dir_/meta.json``, or raise SqaError when the directory was made with other settings
    (a resumed run must not mix features)."""
    path = dir_ / "meta.json"
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise SqaError(f"{path}: not valid JSON; use another --out directory") from None
        diff = [k for k in meta if old.get(k) != meta[k]]
        if diff:
            raise SqaError(
                f"{dir_}: features made with other settings ({', '.join(diff)}); use another --out directory"
            )
        return
    dir_.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index-dir", required=True)
    ap.add_argument(
        "--out", default="experiments/work/head", help="features directory (default experiments/work/head, git-ignored)"
    )
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument(
        "--sentence-paragraphs",
        type=int,
        default=3,
        help="Wikipedia sentences from the best N of the k paragraphs (FactSettings; default 3, "
        "as the shipped heads and sqa train-head)",
    )
    ap.add_argument(
        "--scorer",
        default="bm25",
        choices=["bm25", "minilm"],
        help="how facts are ranked (FactSettings.scorer): BM25, or MiniLM cosine (the minilm extra)",
    )
    ap.add_argument(
        "--step-facts",
        type=int,
        default=0,
        help="at most N step sentences first (FactSettings.step_facts; 0: none, as the shipped heads)",
    )
    ap.add_argument(
        "--oracle",
        choices=["facts", "paragraphs"],
        default=None,
        help="show each question's annotated facts, or the best sentences of its annotated "
        "evidence paragraphs (diagnostic upper bounds, never a system input)",
    )
    ap.add_argument("--plan", nargs="+", default=["train-2061:0:600", "dev", "train-2061:600:1000"])
    a = ap.parse_args()
    sel = FactSelector(
        make_retriever(open_index(a.index_dir, "embedded"), "step"),
        FactSettings(sentence_paragraphs=a.sentence_paragraphs, scorer=a.scorer, step_facts=a.step_facts),
        oracle=a.oracle,
    )
    model = load_model(a.model)
    # the same meta.json as `sqa train-head` (model, prompt, fact settings, index), plus the oracle:
    # a resumed run into a directory made with other settings is refused instead of mixed
    meta = {**features_meta(a.model, model_sha256(model), sel.settings, index_info(a.index_dir)), "oracle": a.oracle}
    try:
        check_meta(Path(a.out), meta)
    except SqaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    decompose = None
    if sel.needs_steps:
        from sqa.paths import sqa_home
        from sqa.steps.decomposer import Decomposer

        decompose = Decomposer(model, encode=sel.step_encode, require_minilm=True, cache_dir=sqa_home() / "cache")
    demos = demo_qids()
    for item in a.plan:
        split, *rng = item.split(":")
        qs = [q for q in load_questions(split) if q.qid not in demos]
        if rng:
            qs = qs[int(rng[0]) : int(rng[1])]
        path = Path(a.out) / f"{split}.jsonl"
        done = read_done(path)
        todo = len([q for q in qs if q.qid not in done])
        cols = (
            TextColumn(f"{item}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*cols) as prog:
            task = prog.add_task(item, total=todo, rate="")
            t0 = time.perf_counter()
            n = [0]

            def tick(qf, n=n, t0=t0, task=task):
                n[0] += 1
                prog.update(task, advance=1, rate=f"{(time.perf_counter() - t0) / n[0]:.1f} s/q")

            extract(model, sel, qs, path, on_question=tick, decompose=decompose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
