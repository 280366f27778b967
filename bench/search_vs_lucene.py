"""Search latency of sqa against Lucene on the same kept indexes, in alternating rounds: writes
bench/work/search_vs_lucene.json or --out (the recorded one: bench/results/search_vs_lucene.json).

    python -m bench.index_vs_lucene --sizes 10000000 --repeats 1 --keep --out bench/work/keep.json   # the indexes
    python -m bench.search_vs_lucene --sizes 10000000 --rounds 6 --queries 1000

Why apart from bench/index_vs_lucene.py: that one searches each index once, right after its
build, with 200 queries, so its search p50 moves with the machine's load at that moment (Lucene 10M
indexes of the same paragraphs read 10.8 ms in one run and 13.6 ms in another: bench/results/index_vs_lucene.json,
index_vs_lucene_keep_10m.json). Here every round starts one
child per engine (alternating which goes first), pinned to one core, that runs ``--warmup``
queries and then the same ``--queries`` StrategyQA train questions (a seeded sample, disjoint
from the warm-up), top-10 with the stored paragraph fetched, exactly as index_vs_lucene.py's
search children do (``child_search``: sqa ``TantivyBackend.search``; Lucene Anserini's
``SimpleSearcher.search`` with BM25 k1=1.2 b=0.75). Reported per engine: p50 and p95 of each
round and their medians over rounds; and, paired by query, the median over queries of
``sqa ms / Lucene ms`` (each query's latency being its median over rounds), with a bootstrap 95 %
interval over queries.

The indexes are bench/work/vs-sqa-SIZE and bench/work/vs-lucene-SIZE, as ``index_vs_lucene.py
--keep`` leaves them; ``--also LABEL=DIR`` adds another sqa index of the same size (e.g. built with
another segment geometry) to the same rounds, the indexes taking turns to go first. Segment counts
are recorded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench.index_vs_lucene import (
    LUCENE_PYTHON,
    WORK,
    load_avg,
    machine,
    queries,
    rel,
    run_child,
    segment_count,
    versions,
)

RESULTS = (
    Path(__file__).parent / "work" / "search_vs_lucene.json"
)  # the recorded one: --out bench/results/search_vs_lucene.json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000000", help="comma list of sizes whose kept indexes are searched")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--lucene-python", default=str(LUCENE_PYTHON))
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="another sqa index of the same size searched in the same rounds (e.g. another segment geometry)",
    )
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    qs = queries(a.queries, a.warmup)
    out_rows, summary = [], {}
    started = time.time()
    for size in [int(x) for x in a.sizes.split(",") if x]:
        # label -> (engine, index dir); --also adds more sqa indexes of the same size
        targets = {"sqa": ("sqa", WORK / f"vs-sqa-{size}"), "lucene": ("lucene", WORK / f"vs-lucene-{size}")}
        for spec in a.also:
            label, _, d = spec.partition("=")
            targets[label] = ("sqa", Path(d))
        for label, (e, d) in targets.items():
            if not d.is_dir():
                print(
                    f"error: {rel(d)}: no kept {e} index for {label}; build it with `python -m bench.index_vs_lucene "
                    f"--sizes {size} --repeats 1 --keep --out bench/work/keep.json`",
                    file=sys.stderr,
                )
                return 2
        labels = list(targets)
        lat: dict[str, list[list[float]]] = {t: [] for t in labels}
        for r in range(a.rounds):
            for label in labels[r % len(labels) :] + labels[: r % len(labels)]:  # rotate who goes first
                engine, d = targets[label]
                python = a.lucene_python if engine == "lucene" else sys.executable
                row = {"index": label, "engine": engine, "size": size, "round": r, "load_before": load_avg()}
                res = run_child(
                    python,
                    "search",
                    engine,
                    {"index_dir": str(d), "queries": qs, "warmup": a.warmup, "latencies": True},
                    3600,
                )
                if "error" in res:
                    print(f"error: {label} search failed: {res}", file=sys.stderr)
                    return 1
                lat[label].append(res.pop("latencies_ms"))
                row.update(res)
                out_rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        per_q = {t: np.median(np.array(v), axis=0) for t, v in lat.items()}  # each query's median over rounds
        s: dict = {}
        for label, (e, d) in targets.items():
            rows = [x for x in out_rows if x["index"] == label and x["size"] == size]
            s[label] = {
                "index_dir": rel(d),
                "segments": segment_count(e, d),
                "search_p50_ms_per_round": [x["search_p50_ms"] for x in rows],
                "search_p50_ms": round(statistics.median(x["search_p50_ms"] for x in rows), 2),
                "search_p95_ms": round(statistics.median(x["search_p95_ms"] for x in rows), 2),
                "p50_of_per_query_medians_ms": round(float(np.median(per_q[label])), 2),
            }
        rng = np.random.default_rng(0)
        for label in labels:
            if label == "lucene":
                continue
            ratio = per_q[label] / per_q["lucene"]
            boots = [float(np.median(ratio[rng.integers(0, len(ratio), len(ratio))])) for _ in range(2000)]
            s[f"ratio_{label}_over_lucene"] = {
                "search_p50_ms": round(s[label]["search_p50_ms"] / s["lucene"]["search_p50_ms"], 3),
                "search_p95_ms": round(s[label]["search_p95_ms"] / s["lucene"]["search_p95_ms"], 3),
                "per_query_median": round(float(np.median(ratio)), 3),
                "per_query_median_95": [
                    round(float(np.percentile(boots, 2.5)), 3),
                    round(float(np.percentile(boots, 97.5)), 3),
                ],
                "queries_where_faster": round(float(np.mean(ratio < 1)), 3),
            }
        s["sqa_search_p50_at_most_lucene"] = s["sqa"]["search_p50_ms"] <= s["lucene"]["search_p50_ms"]
        summary[str(size)] = s
        print(json.dumps(s), file=sys.stderr, flush=True)
    result = {
        "benchmark": "bench/search_vs_lucene.py",
        "command": " ".join(["python", "-m", "bench.search_vs_lucene", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(),
        "versions": versions(a.lucene_python),
        "method": f"{a.rounds} rounds, the indexes taking turns to go first; per round one child per engine pinned to one "
        f"core: {a.warmup} warm-up then {a.queries} timed StrategyQA train questions, top-10, stored "
        "paragraph fetched, BM25 k1=1.2 b=0.75 in both",
        "results": out_rows,
        "summary": summary,
        "wall_seconds": round(time.time() - started),
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {rel(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
