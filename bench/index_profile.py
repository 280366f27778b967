"""Where `sqa index` spends its CPU: writes bench/work/index_profile.json or --out
(the recorded one: bench/results/index_profile.json).

    python -m bench.index_profile --baseline-src bench/work/old     # (git archive OLD sqa | tar -x -C bench/work/old)

CPU shares stay meaningful on a machine shared with other jobs, where wall clocks do not, so this
measures CPU seconds (load averages recorded beside them):

- ``builds``: ``sqa index`` (``sqa.cli.main``, in a child process) on ``--n`` resampled paragraphs
  (bench/index.py's corpus), for this tree and, with ``--baseline-src``, another one, alternating,
  ``--repeats`` times; each with its CPU seconds split by thread (``/proc/self/task/*/stat``,
  sampled every 0.2 s: the main Python thread, tantivy's indexing threads, its docstore
  compressor, the gzip thread, merges), wall seconds and the resulting segment count; also with
  each ``--commit-every`` value given.
- ``tantivy``: tantivy's own cost per paragraph, documents built beforehand (so no parsing), on
  the first 100,000 paragraphs with 2 indexing threads: sqa's analyser, the same without the
  stemmer, without stored text, without the title field.
- ``main_thread``: what the main thread does per paragraph, one step at a time (gzip inflate and
  line split with zlib and ISA-L, ``json.loads`` / ``orjson.loads``, building a ``tantivy.Document``).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work"
RESULTS = WORK / "index_profile.json"  # the recorded one: --out bench/results/index_profile.json

_BUILD = r"""
import json, os, sys, threading, time
from sqa.cli import main  # the tree's sqa: the child runs in it (cwd) with PYTHONSAFEPATH unset
samples = {}
def sample():
    tck = os.sysconf("SC_CLK_TCK")
    while True:
        for t in os.listdir("/proc/self/task"):
            try:
                s = open(f"/proc/self/task/{t}/stat").read()
            except OSError:
                continue
            name = s[s.index("(") + 1:s.rindex(")")]
            f = s[s.rindex(")") + 2:].split()
            samples[t] = (name, (int(f[11]) + int(f[12])) / tck)
        time.sleep(0.2)
threading.Thread(target=sample, daemon=True).start()
if sys.argv[5] != "default":  # the writer's memory budget (TantivyBackend's heap_mb) for this build
    import inspect
    from sqa.indexing import embedded
    init = embedded.TantivyBackend.__init__
    d = list(init.__defaults__)
    names = list(inspect.signature(init).parameters)[-len(d):]
    d[names.index("heap_mb")] = int(sys.argv[5])
    init.__defaults__ = tuple(d)
t0, c0 = time.perf_counter(), time.process_time()
args = ["index", "--corpus", sys.argv[2], "--index-dir", sys.argv[3]]
if sys.argv[4] != "default":
    args += ["--commit-every", sys.argv[4]]
assert main(args) == 0
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
main_tid = str(threading.main_thread().native_id)
groups = {}
for tid, (name, secs) in samples.items():
    key = "main" if tid == main_tid else ("tantivy indexing" if name.startswith("thrd-tantivy-in") else
          "docstore compressor" if name.startswith("docstore") else "merges" if "merge" in name else
          "gzip (isal) / other python" if name == "python" else name.rstrip("0123456789-_"))
    groups[key] = round(groups.get(key, 0) + secs, 2)
groups["threads that ended before a sample (merges)"] = round(cpu - sum(groups.values()), 2)
segments = json.load(open(os.path.join(sys.argv[3], "meta.json")))["segments"]
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2), "cpu_by_thread": groups,
                  "segments": len(segments), "segment_docs": sorted((s["max_doc"] for s in segments), reverse=True),
                  "peak_rss_mb": round(int(hwm) / 1024)}))
"""


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def builds(
    corpus: Path, trees: dict[str, str], commit_every: list[str], repeats: int, heap_mb: list[str] = ("default",)
) -> list[dict]:
    rows = []
    configs = [(t, c, h) for t in trees for c in commit_every for h in heap_mb]
    for rep in range(repeats):
        for tree, ce, heap in configs if rep % 2 == 0 else configs[::-1]:
            d = WORK / "profile-idx"
            shutil.rmtree(d, ignore_errors=True)
            row = {"tree": tree, "commit_every": ce, "heap_mb": heap, "repeat": rep, "load_before": load()}
            r = subprocess.run(
                [sys.executable, "-c", _BUILD, trees[tree], str(corpus), str(d), ce, heap],
                capture_output=True,
                text=True,
                cwd=trees[tree],
            )
            if r.returncode:
                row["error"] = r.stderr[-500:].replace(str(ROOT), ".")
            else:
                row.update(json.loads(r.stdout.strip().splitlines()[-1]))
            row["load_after"] = load()
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
            shutil.rmtree(d, ignore_errors=True)
    return rows


def _records(corpus: Path, n: int) -> list[dict]:
    import orjson

    out = []
    with gzip.open(corpus, "rb") as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            out.append(orjson.loads(line))
    return out


def tantivy_costs(corpus: Path, n: int = 100_000) -> list[dict]:
    import tantivy

    from sqa.indexing.embedded import analyzer

    recs = _records(corpus, n)
    TB, T, F = tantivy.TextAnalyzerBuilder, tantivy.Tokenizer, tantivy.Filter
    variants = {
        "sqa's analyser (simple, remove_long 40, lowercase, English stopwords, Snowball English stemmer)": (
            analyzer,
            True,
            True,
        ),
        "the same without the stemmer": (
            lambda: (
                TB(T.simple()).filter(F.remove_long(40)).filter(F.lowercase()).filter(F.stopword("english")).build()
            ),
            True,
            True,
        ),
        "sqa's analyser, no stored text": (analyzer, False, True),
        "sqa's analyser, no title field": (analyzer, True, False),
    }
    rows = []
    for rep in range(2):
        for label, (make_analyzer, stored, title) in variants.items():
            d = WORK / "profile-tantivy"
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            b = tantivy.SchemaBuilder()
            b.add_text_field("evidence_id", stored=True, tokenizer_name="raw", index_option="basic")
            if title:
                b.add_text_field("title", stored=True, tokenizer_name="en", index_option="freq")
            if stored:
                b.add_bytes_field("text", stored=True, indexed=False)
            b.add_text_field("body", stored=False, tokenizer_name="en", index_option="freq")
            idx = tantivy.Index(b.build(), path=str(d))
            idx.register_tokenizer("en", make_analyzer())
            docs = []
            for r in recs:
                doc = tantivy.Document()
                doc.add_text("evidence_id", f"{r['title']}-{r['para_id']}")
                if title:
                    doc.add_text("title", r["title"])
                if stored:
                    doc.add_bytes("text", r["para"].encode())
                doc.add_text("body", f"{r['title']}\n{r['section']}\n{r['para']}")
                docs.append(doc)
            l0, c0, t0 = load(), time.process_time(), time.perf_counter()
            w = idx.writer(1_000_000_000, 2)
            for doc in docs:
                w.add_document(doc)
            w.commit()
            w.wait_merging_threads()
            cpu = time.process_time() - c0
            rows.append(
                {
                    "variant": label,
                    "repeat": rep,
                    "paragraphs": n,
                    "cpu_seconds": round(cpu, 2),
                    "cpu_us_per_paragraph": round(cpu / n * 1e6, 1),
                    "wall_seconds": round(time.perf_counter() - t0, 2),
                    "load_before": l0,
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            shutil.rmtree(d, ignore_errors=True)
    return rows


def main_thread_costs(corpus: Path, n: int = 300_000) -> list[dict]:
    import json as stdjson

    import orjson
    import tantivy
    from isal import igzip

    def timed(label, fn):
        c = time.process_time()
        k = fn()
        c = time.process_time() - c
        return {"step": label, "cpu_us_per_paragraph": round(c / k * 1e6, 2)}

    def lines_zlib():
        with open(corpus, "rb") as raw:
            return sum(1 for _ in io.BufferedReader(gzip.GzipFile(fileobj=raw), 1 << 20))

    def lines_isal():
        with open(corpus, "rb") as raw:
            return sum(1 for _ in io.BufferedReader(igzip.IGzipFile(fileobj=raw), 1 << 20))

    with gzip.open(corpus, "rb") as f:
        lines = [line for _, line in zip(range(n), f)]
    recs = [orjson.loads(x) for x in lines]

    def parse(loads):
        def run():
            for x in lines:
                loads(x)
            return len(lines)

        return run

    def documents():
        for r in recs:
            doc = tantivy.Document()
            doc.add_text("evidence_id", f"{r['title']}-{r['para_id']}")
            doc.add_text("title", r["title"])
            doc.add_bytes("section", (r["section"] or "").encode())
            doc.add_bytes("text", r["para"].encode())
            doc.add_bytes("headers", " > ".join(r["headers"] or ()).encode())
            doc.add_text("body", f"{r['title']}\n{r['section']}\n{r['para']}")
        return len(recs)

    out = []
    for _ in range(2):
        out += [
            timed("gzip inflate + line split, zlib (stdlib gzip, the old reader)", lines_zlib),
            timed("gzip inflate + line split, ISA-L (isal)", lines_isal),
            timed("json.loads", parse(stdjson.loads)),
            timed("orjson.loads", parse(orjson.loads)),
            timed("tantivy.Document with sqa's 6 fields", documents),
        ]
    for row in out:
        row["paragraphs"] = len(lines)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300_000)
    ap.add_argument("--baseline-src", default=None, help="another sqa source tree to build beside this one")
    ap.add_argument("--commit-every", default="default", help="comma list (default: the CLI's default)")
    ap.add_argument(
        "--heap-mb",
        default="default",
        help="comma list of tantivy writer memory budgets in MB (default: TantivyBackend's)",
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--parts", default="builds,tantivy,main_thread")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args(argv)
    from bench.index import make_resampled_corpus

    corpus = make_resampled_corpus(WORK / f"resampled-{a.n}.jsonl.gz", a.n)
    out = Path(a.out)
    result = json.loads(out.read_text()) if out.exists() else {}
    result.update(
        {
            "benchmark": "bench/index_profile.py",
            "cores": os.cpu_count(),
            "note": "CPU seconds on a 2-core machine shared with other jobs (load averages beside them); "
            "wall clocks here measure the contention, not the code",
        }
    )
    parts = a.parts.split(",")
    cmd = " ".join(["python", "-m", "bench.index_profile", *(argv if argv is not None else sys.argv[1:])])
    if "builds" in parts:
        trees = {"this tree": str(ROOT)}
        if a.baseline_src:
            trees["baseline"] = str(Path(a.baseline_src).resolve())
        result["builds"] = {
            "command": cmd,
            "paragraphs": a.n,
            "rows": builds(corpus, trees, a.commit_every.split(","), a.repeats, a.heap_mb.split(",")),
        }
    if "tantivy" in parts:
        result["tantivy"] = {"command": cmd, "rows": tantivy_costs(corpus)}
    if "main_thread" in parts:
        result["main_thread"] = {"command": cmd, "rows": main_thread_costs(corpus, a.n)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.resolve().relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
