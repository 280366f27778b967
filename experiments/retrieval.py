"""Retrieval benchmark: Recall@10 (official StrategyQA definition, ``sqa.eval.retrieval``) of the
official baselines and of the step retriever (``step``), on train-2061 (the tuning split) and dev (reported once), with the
question alone and with the gold decompositions. Writes experiments/work/retrieval.json, or ``--out``
(the recorded run: bench/results/retrieval.json).

    python -m experiments.retrieval --index-dir INDEX_DIR                      # about 1-2 min on 2 cores
    python -m experiments.retrieval --index-dir INDEX_DIR --rerank-sample 40   # + MiniLM reranking (torch; slow)

Methods:
- official IR-Q / IR-ORA-D: ``sqa.retriever.official.OfficialRetriever`` (Geva et al., TACL 2021).
- step: ``sqa.retriever.steps.StepRetriever`` with its defaults. The ablations that chose them
  (title boost, question list, fusion method, "#k" resolution, step weights) were measured on
  train-2061 with the knobs they needed; those knobs are gone from the code, their numbers stay in
  bench/results/retrieval.json ("ablations_train2061_recorded") and bench/results/notes.md.
- step + MiniLM rerank (optional): on a seeded sample of ``--rerank-sample`` questions of each
  split, since encoding candidates with all-MiniLM-L6-v2 on CPU is slow.

Also records milliseconds per question (wall clock on a shared machine: indicative only).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
from pathlib import Path

from sqa.eval.retrieval import evaluate_retrievers
from sqa.indexing.manifest import read_manifest
from sqa.paths import default_index_dir
from sqa.pipeline import index_info, open_index
from sqa.retriever.official import OfficialRetriever
from sqa.retriever.steps import StepRetriever
from sqa.strategyqa import load_questions

RESULTS = (
    Path(__file__).resolve().parent / "work" / "retrieval.json"
)  # the recorded run: --out bench/results/retrieval.json
# Lucene BM25 Recall@10 on the mini corpus's dev split that came with the task's data notes (a
# document outside this repository; the runs behind them are not reproducible from it):
# IR-Q / IR-ORA-D with k1=0.9,b=0.4 and with k1=1.2,b=0.75.
REFERENCE_LUCENE_MINI_DEV = {
    "IR-Q": [0.647, 0.643],
    "IR-ORA-D": [0.681, 0.715],
    "note": "BM25 k1=0.9,b=0.4 / k1=1.2,b=0.75; from the data notes given with the mini "
    "corpus (not in this repository)",
}


def _row(m: dict) -> dict:
    return {
        "Recall@10": round(m["Recall@10"], 4),
        "ms_per_question": round(1000 * m["seconds"] / m["n"], 2),
        "count": m["n"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", type=Path, default=None, help="index directory (default: $SQA_HOME/index)")
    ap.add_argument("--backend", default="embedded")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--rerank-sample", type=int, default=0, help="questions per split for MiniLM reranking (0 = skip)")
    args = ap.parse_args(argv)
    index_dir = args.index_dir or default_index_dir()

    be = open_index(index_dir, args.backend)
    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    results: dict = {}
    for split in ("train-2061", "dev"):
        qs = load_questions(split)
        r = results[split] = {}
        for mode, steps_of, official in (
            ("question", lambda q: [], "official IR-Q"),
            ("gold decomposition", lambda q: list(q.decomposition), "official IR-ORA-D"),
        ):
            got = evaluate_retrievers({official: OfficialRetriever(be), "step": StepRetriever(be)}, qs, steps_of)
            m = r[mode] = {name: _row(v) for name, v in got.items()}
            m["step - official"] = round(m["step"]["Recall@10"] - m[official]["Recall@10"], 4)
            if args.rerank_sample:
                sample = random.Random(0).sample(qs, min(args.rerank_sample, len(qs)))
                got = evaluate_retrievers(
                    {"rerank": StepRetriever(be, rerank=True), "plain": StepRetriever(be)}, sample, steps_of
                )
                m[f"step + MiniLM rerank (sample of {len(sample)})"] = _row(got["rerank"])
                m[f"step on the same sample of {len(sample)}"] = _row(got["plain"])
    be.close()

    manifest = read_manifest(index_dir) or {}
    shown = [a if a != str(index_dir) else "INDEX_DIR" for a in (argv if argv is not None else sys.argv[1:])]
    out = {
        "command": "python -m experiments.retrieval " + " ".join(shown),
        "index": index_info(index_dir, args.backend),
        "backend": args.backend,
        "corpus": manifest.get("preset") or manifest.get("corpus"),
        "paragraphs": manifest.get("paragraph_count"),
        "metric": "Recall@10, official StrategyQA evaluator definition (max over annotators, mean over questions)",
        "tuned_on": "train-2061 only; dev reported once",
        "reference_lucene_mini_dev": REFERENCE_LUCENE_MINI_DEV,
        "machine": platform.platform(),
        "results": results,
    }
    if "ablations_train2061_recorded" in old:
        out["ablations_train2061_recorded"] = old["ablations_train2061_recorded"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for split, r in results.items():
        for mode, m in r.items():
            print(
                f"{split:10s} {mode:18s} "
                + "  ".join(
                    f"{k}={v['Recall@10']:.4f}" if isinstance(v, dict) else f"{k}={v:+.4f}" for k, v in m.items()
                )
            )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
