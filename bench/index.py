"""Indexing and search benchmark of the embedded engine (tantivy, via sqa's own build path) and the
runner-up (bm25s), side by side, on the mini corpus (159,930 paragraphs) and on a 2M-paragraph
corpus resampled from real paragraphs. Writes bench/work/index.json or --out
(the recorded one: bench/results/index.json).

    python -m bench.index                         # both engines, mini + 2M (about 10-15 min on 2 cores)
    python -m bench.index --corpora mini          # quick run
    python -m bench.index --bm25s-cap 1000000     # index at most 1M paragraphs with bm25s

Measured per engine and corpus, each phase in its own subprocess so that its peak RSS (the
child's ``VmHWM``) and CPU time (``os.wait4``) are its own:
- build: paragraphs/s (wall clock, reading + parsing the corpus file included), CPU seconds,
  index size on disk, peak RSS. tantivy = ``sqa.indexing.build_index`` into a ``TantivyBackend``
  (every core). bm25s = the same reader, ``bm25s.tokenize`` (English stopwords + PyStemmer's
  Snowball English stemmer, like tantivy's analyser) and ``BM25(k1=1.2, b=0.75, method="lucene")``
  (Lucene's BM25, as tantivy's), saved with the paragraph texts so both indexes can return them.
- search: the process pinned to one core (``sched_setaffinity``), the index opened from disk
  (bm25s: ``mmap=True``), 20 warm-up queries, then latency of each 10-word query (top-10):
  tantivy = ``TantivyBackend.search`` (analysis, BM25 top-k, stored paragraphs fetched);
  bm25s = tokenisation + ``retrieve`` (numba backend) + the paragraph texts fetched.
Queries: the first 10 words of StrategyQA train questions, topped up from the question's first
decomposition step when the question is shorter (sqa/_data; seeded sample).

The 2M corpus (``make_resampled_corpus``): copy 0 is the 159,930 real mini paragraphs unchanged
(so gold paragraphs keep their evidence IDs); every further copy takes each real paragraph's
title, section and first sentence and fills the rest of its sentence count with sentences drawn
at random from all real paragraphs, under a new evidence ID ``{title}-{para_id}r{copy}``. So it
is not 12 exact copies (document lengths and term statistics vary), but its vocabulary is that
of the 160k real paragraphs: smaller term dictionary and longer posting lists than 2M distinct
Wikipedia paragraphs would have (search timings are pessimistic, dictionary size optimistic).

The extrapolation to the full corpus (36.6M paragraphs) fits ``y = a * n**b`` through the mini and
2M points of each quantity (indexing time, index size, peak RSS, search p50) and evaluates it at
36.6M. The CPU is shared with other jobs on the benchmark machine: ``uptime`` load averages are
recorded before and after each phase, and CPU seconds are given beside wall-clock times.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work"
RESULTS = WORK / "index.json"  # the recorded one: --out bench/results/index.json
FULL_CORPUS = 36_600_000
_SENT = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W_]+")


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- corpora ---------------------------------------------------------------------------------


def mini_files() -> list[str]:
    from sqa.indexing import corpus_files

    return [str(p) for p in corpus_files("mini")]


def make_resampled_corpus(path: Path, n: int, seed: int = 13) -> Path:
    """Write ``n`` paragraphs (full-corpus JSONL, gzip) resampled from the mini corpus as described
    in the module doc; reuses ``path`` if it was made with the same ``n`` and ``seed``."""
    meta = path.with_suffix(".meta.json")
    want = {
        "n": n,
        "seed": seed,
        "method": "copy0 real; copies>=1: title/section/first sentence + random real sentences",
    }
    if path.exists() and meta.exists() and json.loads(meta.read_text()) == want:
        return path
    from sqa.indexing.corpus import read_corpus

    paras = [p for f in mini_files() for p in read_corpus(f)]
    sents = [s for p in paras for s in _SENT.split(p.text) if s]
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    written = 0
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as out:
        copy = 0
        while written < n:
            order = list(range(len(paras)))
            if copy:
                rng.shuffle(order)
            for i in order:
                if written >= n:
                    break
                p = paras[i]
                pid = p.evidence_id[len(p.title) + 1 :] if p.evidence_id.startswith(p.title + "-") else str(i)
                if copy == 0:
                    text = p.text
                else:
                    own = _SENT.split(p.text)
                    text = " ".join([own[0]] + [sents[rng.randrange(len(sents))] for _ in range(len(own) - 1)])
                    pid = f"{pid}r{copy}"
                out.write(
                    json.dumps(
                        {
                            "title": p.title,
                            "para_id": pid,
                            "para": text,
                            "section": p.section,
                            "headers": list(p.headers),
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
                written += 1
            copy += 1
    os.replace(tmp, path)
    meta.write_text(json.dumps(want))
    return path


def make_queries(n: int, seed: int = 7) -> list[str]:
    """``n`` 10-word queries from StrategyQA train questions (+ their first decomposition step)."""
    from sqa.strategyqa import load_questions

    out = []
    for q in load_questions("train"):
        words = _WORD.findall(q.question)
        if len(words) < 10 and q.decomposition:
            words += _WORD.findall(q.decomposition[0])
        if len(words) >= 10:
            out.append(" ".join(words[:10]))
    random.Random(seed).shuffle(out)
    return out[:n]


# --- children --------------------------------------------------------------------------------


def dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())


def child_build(engine: str, files: list[str], index_dir: Path, cap: int | None) -> dict:
    t0 = time.perf_counter()
    if engine == "tantivy":
        from sqa.indexing import build_index
        from sqa.indexing.embedded import TantivyBackend

        be = TantivyBackend(index_dir)
        report = build_index(files, index_dir, be)
        be.close()
        n = report.count
    else:
        import bm25s
        import Stemmer

        from sqa.indexing.embedded import TantivyBackend  # noqa: F401  (same import cost as tantivy)
        from sqa.indexing.corpus import read_corpus

        ids, texts = [], []
        for f in files:
            for p in read_corpus(f):
                if cap and len(ids) >= cap:
                    break
                ids.append(p.evidence_id)
                texts.append(f"{p.title}\n{p.section}\n{p.text}" if p.section else f"{p.title}\n{p.text}")
        stemmer = Stemmer.Stemmer("english")
        tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene", backend="numba")
        retriever.index(tokens, show_progress=False)
        del tokens
        retriever.save(str(index_dir), corpus=[{"id": i, "text": t} for i, t in zip(ids, texts)], show_progress=False)
        n = len(ids)
    secs = time.perf_counter() - t0
    return {
        "paragraphs": n,
        "index_seconds": round(secs, 2),
        "paragraphs_per_s": round(n / secs),
        "index_bytes": dir_bytes(index_dir),
    }


def child_search(engine: str, index_dir: Path, queries: list[str]) -> dict:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core: single-thread latency
    if engine == "tantivy":
        from sqa.indexing.embedded import TantivyBackend

        be = TantivyBackend(index_dir, create=False)

        def run(q):
            return [h.evidence_id for h in be.search(q, 10)]
    else:
        import bm25s
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
        retriever = bm25s.BM25.load(str(index_dir), load_corpus=True, mmap=True, show_progress=False)
        retriever.backend = "numba"

        def run(q):
            toks = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
            docs, _scores = retriever.retrieve(toks, k=10, n_threads=1, show_progress=False)
            return [retriever.corpus[int(i)]["id"] if not isinstance(i, dict) else i["id"] for i in docs[0]]

    first = run("maximum depth of the Black Sea")
    for q in queries[:20]:
        run(q)
    lat = []
    for q in queries[20:]:
        t = time.perf_counter()
        run(q)
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    return {
        "queries": len(lat),
        "search_p50_ms": round(statistics.median(lat), 2),
        "search_p95_ms": round(lat[int(0.95 * (len(lat) - 1))], 2),
        "search_mean_ms": round(statistics.fmean(lat), 2),
        "black_sea_top10": "Black Sea-2" in first,
        "black_sea_rank": (first.index("Black Sea-2") + 1) if "Black Sea-2" in first else None,
    }


def run_child(args: list[str], timeout: float) -> dict:
    """Run ``bench/index.py --child ...``; returns its JSON plus peak RSS and CPU seconds."""
    p = subprocess.Popen(
        [sys.executable, "-m", "bench.index", "--child", *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    t0 = time.monotonic()
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            return {"error": f"timed out after {timeout:.0f} s"}
        time.sleep(0.1)
    out = p.stdout.read()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}", "stdout_tail": out[-500:]}
    res = json.loads(out.strip().splitlines()[-1])
    # peak RSS comes from the child's own VmHWM: ru_maxrss is preserved across execve on Linux,
    # so it would report the parent's RSS at fork time when that is larger
    res["cpu_seconds"] = round(ru.ru_utime + ru.ru_stime, 2)
    return res


# --- driver ----------------------------------------------------------------------------------


def power_fit(n1: float, y1: float, n2: float, y2: float, n: float) -> tuple[float, float]:
    """(value at ``n``, exponent b) of ``y = a * n**b`` through (n1, y1), (n2, y2)."""
    b = math.log(y2 / y1) / math.log(n2 / n1)
    return y2 * (n / n2) ** b, b


def extrapolate(rows: list[dict], engines: list[str], n: int = FULL_CORPUS) -> dict:
    """Per engine, each measured quantity at ``n`` paragraphs from ``y = a * x**b`` through its
    mini and 2M (or capped) points, with the exponent b. ``index_hours`` is wall clock under the
    load of the run; ``index_cpu_hours`` is CPU time, and ``index_hours_2_free_cores`` its half:
    the wall clock on 2 dedicated cores if the reader thread and the indexing threads overlap
    fully (a lower bound)."""
    out = {}
    for engine in engines:
        r1 = next((r for r in rows if r["engine"] == engine and r["corpus"] == "mini" and "error" not in r), None)
        r2 = next((r for r in rows if r["engine"] == engine and r["corpus"] == "2m" and "error" not in r), None)
        if not (r1 and r2 and "search_p50_ms" in r2):
            continue
        n1, n2 = r1["paragraphs"], r2["paragraphs"]
        e: dict = {"paragraphs": n, "from_points": [n1, n2], "method": "y = a * n**b through the two measured points"}
        for key, name, scale in (
            ("index_seconds", "index_hours", 1 / 3600),
            ("build_cpu_seconds", "index_cpu_hours", 1 / 3600),
            ("index_bytes", "index_gib", 1 / 2**30),
            ("build_peak_rss_mb", "build_peak_rss_gib", 1 / 1024),
            ("search_peak_rss_mb", "search_peak_rss_gib", 1 / 1024),
            ("search_p50_ms", "search_p50_ms", 1.0),
            ("search_p95_ms", "search_p95_ms", 1.0),
        ):
            v, b = power_fit(n1, r1[key], n2, r2[key], n)
            e[name] = round(v * scale, 2)
            e[f"{name}_exponent"] = round(b, 3)
        e["index_hours_2_free_cores"] = round(e["index_cpu_hours"] / 2, 2)
        out[engine] = e
    return out


def assess(rows: list[dict], bm25s_cap: int | None) -> dict:
    """The targets (>= 10k paragraphs/s on 2 cores; search p50 <= 20 ms at 2M) against the rows,
    and the caveats a reader needs to weigh them."""
    get = lambda e, c: next((r for r in rows if r["engine"] == e and r["corpus"] == c and "error" not in r), {})  # noqa: E731
    tm, t2 = get("tantivy", "mini"), get("tantivy", "2m")
    out = {
        "indexing_10k_paragraphs_per_s": {
            "tantivy_mini_per_s": tm.get("paragraphs_per_s"),
            "tantivy_2m_per_s": t2.get("paragraphs_per_s"),
            "tantivy_2m_per_cpu_s": t2.get("paragraphs_per_cpu_s"),
            "met_wall_clock_mini": (tm.get("paragraphs_per_s") or 0) >= 10_000,
            "met_wall_clock_2m": (t2.get("paragraphs_per_s") or 0) >= 10_000,
            "note": "wall-clock rates were taken on 2 cores shared with other jobs (load average 6-8, "
            "so this run got about one core: see build_cpu_seconds vs index_seconds); on 2 free "
            "cores the reader thread (about 1/3 of the CPU time) and tantivy's 2 indexing threads "
            "overlap, see extrapolation index_hours_2_free_cores",
        },
        "search_p50_20ms_at_2m": {
            "tantivy_p50_ms": t2.get("search_p50_ms"),
            "tantivy_p95_ms": t2.get("search_p95_ms"),
            "met": (t2.get("search_p50_ms") or 1e9) <= 20,
        },
        "caveats": [
            "the 2M corpus reuses the vocabulary of the 160k real paragraphs: posting lists are longer "
            "than in 2M distinct paragraphs, so the search-latency growth (and its 36.6M extrapolation) "
            "is pessimistic and the index-size growth slightly optimistic",
            "tantivy's build memory is bounded by its writer heap (1 GB) plus memory-mapped segment "
            "files (page cache, reclaimable); a power-law fit of peak RSS overstates it at 36.6M",
            "bm25s keeps every token list and the sparse matrix in RAM while building: its peak RSS "
            "grows with the corpus (measured 3.1 GB at 1M paragraphs), the reason it is not the default",
        ],
    }
    if bm25s_cap:
        out["bm25s_capped_at"] = bm25s_cap
        out["caveats"].append(
            f"bm25s was capped at {bm25s_cap:,} paragraphs in the '2m' run to keep the "
            "benchmark under ~15 min (it indexes at about 3k paragraphs/s on this machine); "
            "its extrapolation uses the mini and capped points"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", default="mini,2m", help="comma list of mini, 2m")
    ap.add_argument("--engines", default="tantivy,bm25s")
    ap.add_argument("--size-2m", type=int, default=2_000_000)
    ap.add_argument("--queries", type=int, default=220, help="queries per run (the first 20 warm up)")
    ap.add_argument("--bm25s-cap", type=int, default=None, help="index at most this many paragraphs with bm25s")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per phase")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--keep", action="store_true", help="keep the indexes in bench/work")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.child:
        kind, engine, index_dir, spec = a.child[0], a.child[1], Path(a.child[2]), json.loads(a.child[3])
        if kind == "build":
            res = child_build(engine, spec["files"], index_dir, spec.get("cap"))
        else:
            res = child_search(engine, index_dir, spec["queries"])
        res["peak_rss_mb"] = _vm_hwm_mb()
        print(json.dumps(res))
        return 0

    started = time.time()
    queries = make_queries(a.queries)
    corpora = {}
    if "mini" in a.corpora.split(","):
        corpora["mini"] = mini_files()
    if "2m" in a.corpora.split(","):
        t = time.perf_counter()
        path = make_resampled_corpus(WORK / f"resampled-{a.size_2m}.jsonl.gz", a.size_2m)
        print(f"2M corpus ready: {path} ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
        corpora["2m"] = [str(path)]
    rows = []
    for cname, files in corpora.items():
        for engine in a.engines.split(","):
            d = WORK / f"idx-{engine}-{cname}"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            cap = a.bm25s_cap if engine == "bm25s" else None
            row = {"engine": engine, "corpus": cname, "load_before": load_avg()}
            print(
                f"[{time.strftime('%H:%M:%S')}] build {engine} on {cname} (load {row['load_before']})", file=sys.stderr
            )
            b = run_child(["build", engine, str(d), json.dumps({"files": files, "cap": cap})], a.timeout)
            row.update({f"build_{k}" if k in ("peak_rss_mb", "cpu_seconds") else k: v for k, v in b.items()})
            if "error" not in b:
                row["paragraphs_per_cpu_s"] = round(b["paragraphs"] / b["cpu_seconds"]) if b["cpu_seconds"] else None
                row["index_mb"] = round(b["index_bytes"] / 2**20, 1)
                print(f"[{time.strftime('%H:%M:%S')}] search {engine} on {cname}", file=sys.stderr)
                s = run_child(["search", engine, str(d), json.dumps({"queries": queries})], a.timeout)
                row.update({f"search_{k}" if k in ("peak_rss_mb", "cpu_seconds") else k: v for k, v in s.items()})
            row["load_after"] = load_avg()
            print(json.dumps(row), file=sys.stderr)
            rows.append(row)
            if not a.keep:
                shutil.rmtree(d, ignore_errors=True)

    extrapolation = extrapolate(rows, a.engines.split(","))

    result = {
        "benchmark": "bench/index.py",
        "command": " ".join(["python", "-m", "bench.index", *(argv if argv is not None else sys.argv[1:])]),
        "machine": {
            "cores": os.cpu_count(),
            "cpu": _cpu_model(),
            "ram_gib": _ram_gib(),
            "python": platform.python_version(),
            "shared_cpu": "yes: other jobs ran at the same time; see load_before/after",
            "uptime_load_before": None,
            "uptime_load_after": load_avg(),
        },
        "versions": _versions(),
        "corpora": {
            "mini": "sqa index --corpus mini: 9,251 StrategyQA gold + 150,679 distractor paragraphs",
            "2m": f"{a.size_2m:,} paragraphs resampled from the mini corpus (see module doc of bench/index.py)",
        },
        "queries": f"{len(queries) - 20} timed + 20 warm-up 10-word queries from StrategyQA train questions, top-10, one core",
        "targets": {"paragraphs_per_s": 10_000, "search_p50_ms_at_2m": 20},
        "results": rows,
        "extrapolation_36_6M": extrapolation,
        "assessment": assess(rows, a.bm25s_cap if "bm25s" in a.engines.split(",") else None),
        "wall_seconds": round(time.time() - started),
    }
    result["machine"]["uptime_load_before"] = rows[0]["load_before"] if rows else None
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


def _vm_hwm_mb() -> int | None:
    """This process's peak resident set size (``VmHWM`` of /proc/self/status), in MiB."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _ram_gib() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        return 0.0


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("tantivy", "bm25s", "numba", "PyStemmer"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


if __name__ == "__main__":
    sys.exit(main())
