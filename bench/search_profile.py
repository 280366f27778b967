"""Where sqa's top-10 BM25 search spends its time, native frames included: writes
bench/work/search_profile.json or --out (the recorded one: bench/results/search_profile.json).

    pip install py-spy        # bench-only, like pyserini
    python -m bench.index_vs_lucene --sizes 10000000 --repeats 1 --keep --out bench/work/keep.json
    python -m bench.search_profile --index-dir bench/work/vs-sqa-10000000

Runs ``TantivyBackend.search(q, 10)`` (the shipped search: an OR of one term query per analysed
token, ``Searcher.search(query, 10, count=False)``, the 10 stored paragraphs fetched) over the
same StrategyQA train questions as bench/search_vs_lucene.py, twice, in a child pinned to one core,
under ``py-spy record --native`` (sampling, 200 Hz). Reports the share of samples in each part of
tantivy that the native stacks name: whether the top-k used block-max WAND (tantivy's
``block_wand``, its pruning for unions of term queries under a plain top-score collector) or the
exhaustive union (``BufferedUnionScorer::refill``) that every ``MultiCollector`` search takes.

tantivy-py 0.27's ``Searcher.search`` always wraps the top-docs collector in a ``MultiCollector``
(even with ``count=False``, see its src/searcher.rs), and tantivy's ``MultiCollector`` collects every
matching document: so no pruning happens, and a query's cost grows with the postings of all its
terms. The shares here are what measures it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.index_vs_lucene import machine, queries, rel, segment_count

RESULTS = (
    Path(__file__).parent / "work" / "search_profile.json"
)  # the recorded one: --out bench/results/search_profile.json
# native frame name fragments -> the part of the search they are
PARTS = {
    "block_wand (pruned top-k)": "block_wand",
    "exhaustive union (BufferedUnionScorer::refill)": "buffered_union6refill",
    "BooleanWeight::for_each (every match scored)": "6Weight8for_each",
    "MultiCollector per-document collect": "multi_collector",
    "top-k collector": "top_collector",
    "postings decoding (bitpacking)": "bitpacking",
    "doc store (stored paragraph fetch)": "store6reader",
    "Python: building Paragraphs": "_to_paragraph",
}


def loop(index_dir: str, n: int, warmup: int, passes: int) -> None:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from sqa.indexing.embedded import TantivyBackend

    be = TantivyBackend(index_dir, create=False)
    qs = queries(n, warmup)
    for _ in range(passes):
        for q in qs:
            be.search(q, 10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.loop:
        loop(a.index_dir, a.queries, a.warmup, a.passes)
        return 0
    spy = shutil.which("py-spy")
    if not spy:
        print("error: py-spy not found; `pip install py-spy` (bench-only)", file=sys.stderr)
        return 2
    if not (Path(a.index_dir) / "meta.json").exists():
        print(f"error: {a.index_dir}: no tantivy index (meta.json) here", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.txt"
        cmd = [
            spy,
            "record",
            "--native",
            "-r",
            "200",
            "-f",
            "raw",
            "-o",
            str(raw),
            "--",
            sys.executable,
            "-m",
            "bench.search_profile",
            "--loop",
            "--index-dir",
            a.index_dir,
            "--queries",
            str(a.queries),
            "--warmup",
            str(a.warmup),
            "--passes",
            str(a.passes),
        ]
        t0 = time.time()
        subprocess.run(cmd, check=True, capture_output=True, cwd=Path(__file__).resolve().parents[1])
        secs = time.time() - t0
        total, hits, in_search = 0, collections.Counter(), 0
        for line in raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            n = int(n)
            total += n
            frames = stack.split(";")
            if any("TantivyBackend.search" in f for f in frames):
                in_search += n
            for part, frag in PARTS.items():
                if any(frag in f for f in frames):
                    hits[part] += n
    out = {
        "benchmark": "bench/search_profile.py",
        "command": " ".join(["python", "-m", "bench.search_profile", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(),
        "index_dir": rel(a.index_dir),
        "segments": segment_count("sqa", Path(a.index_dir)),
        "method": f"py-spy record --native -r 200 over {a.passes} passes of {a.warmup + a.queries} StrategyQA train "
        "questions through TantivyBackend.search(q, 10), one core; share = samples whose stack has a "
        "frame of that part (parts nest, so shares overlap)",
        "samples": total,
        "seconds": round(secs, 1),
        "share_in_TantivyBackend_search": round(in_search / total, 3),
        "share_by_part": {p: round(hits[p] / total, 3) for p in PARTS},
        "reading": "no block_wand samples and most time in the exhaustive union under MultiCollector: tantivy-py "
        "0.27's Searcher.search always wraps TopDocs in a MultiCollector, which disables tantivy's "
        "block-max WAND pruning; the fix is upstream (search with the TopDocs collector alone when "
        "count is False and no order/weight field is given)",
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["share_by_part"], indent=1))
    print(f"wrote {rel(a.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
