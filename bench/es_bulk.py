"""The Elasticsearch bulk path (``sqa index --backend elasticsearch``) at a small scale, for the
figures and the bulk settings of docs/elasticsearch.md: writes bench/work/es_bulk.json or --out
(the recorded one: bench/results/es_bulk.json).

    python -m bench.es_bulk                                   # noida-db started here, 200,000 paragraphs
    SQA_ES_URL=http://localhost:9200 SQA_ES_USER=elastic SQA_ES_PASSWORD=... python -m bench.es_bulk --n 2000000

Server: ``$SQA_ES_URL`` if set (a real cluster), else noida-db (the Elasticsearch-API server the
tests use, ``pip install noida-db``) started on a free port. noida-db is not Elasticsearch: its
rates say how sqa's client side and a small single-process server behave, not what a cluster
does. Corpus: the first ``--n`` paragraphs of bench/index.py's resampled corpus. For every
(``--workers``, ``--chunk-sizes``) pair, in an order that alternates between repeats: a fresh
index, ``build_index`` into ``ElasticsearchBackend(workers=W, chunk_size=C)`` in a child
process (checkpoints every ``--commit-every``), then ``_count``. Recorded: wall seconds,
paragraphs/s, the client's CPU seconds, the server's CPU seconds (``/proc/PID/stat`` of noida-db;
None for an external server), load average before and after.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "work"
RESULTS = WORK / "es_bulk.json"  # the recorded one: --out bench/results/es_bulk.json


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_cpu(sid: int | None) -> float | None:
    """CPU seconds (user + system) of the live processes of session ``sid`` (noida-db runs its server
    in a child of the process started here, in a session of its own)."""
    if sid is None:
        return None
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[3]) == sid:
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def start_noida() -> tuple[str, subprocess.Popen]:
    exe = shutil.which("noida-db") or str(Path(sys.executable).with_name("noida-db"))
    port = _free_port()
    data = WORK / "es-bulk-noida"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    proc = subprocess.Popen(
        [exe, "start", "--only", "elasticsearch", "--data-dir", str(data / "db"), "--elasticsearch-port", str(port)],
        stdout=open(data / "log", "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() - t0 > 60:
                raise SystemExit(f"noida-db did not start: {(data / 'log').read_text()[-300:]}") from None
            time.sleep(0.2)
    return url, proc


def child(spec: dict) -> dict:
    from sqa.indexing import build_index
    from sqa.indexing.elastic import ElasticsearchBackend

    d = Path(spec["index_dir"])
    be = ElasticsearchBackend(
        create=True, fresh=True, es_index=spec["es_index"], workers=spec["workers"], chunk_size=spec["chunk_size"]
    )
    t0 = time.perf_counter()
    try:
        report = build_index([spec["corpus"]], d, be, commit_every=spec["commit_every"])
        secs = time.perf_counter() - t0
        count = be.count()
        be.es.indices.delete(index=spec["es_index"])
    finally:
        be.close()
    return {
        "paragraphs": report.read,
        "count": count,
        "seconds": round(secs, 2),
        "paragraphs_per_s": round(report.read / secs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200_000, help="paragraphs")
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--chunk-sizes", default="500,2000")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--commit-every", type=int, default=200_000)
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(json.loads(a.child))))
        return 0

    from bench.index import make_resampled_corpus

    src = make_resampled_corpus(WORK / "resampled-300000.jsonl.gz", 300_000)
    corpus = WORK / f"es-bulk-{a.n}.jsonl.gz"
    with gzip.open(src, "rb") as f, gzip.open(corpus, "wb", compresslevel=1) as out:
        out.writelines(itertools.islice(f, a.n))
    proc = None
    if os.environ.get("SQA_ES_URL"):
        server = "external (SQA_ES_URL)"
    else:
        url, proc = start_noida()
        os.environ["SQA_ES_URL"] = url
        from importlib.metadata import version

        server = f"noida-db {version('noida-db')} (started by this script; one process on this machine)"
    configs = [(int(w), int(c)) for w in a.workers.split(",") for c in a.chunk_sizes.split(",")]
    rows = []
    try:
        for rep in range(a.repeats):
            for w, c in configs if rep % 2 == 0 else configs[::-1]:
                d = WORK / f"es-bulk-idx-{w}-{c}"
                shutil.rmtree(d, ignore_errors=True)
                spec = {
                    "index_dir": str(d),
                    "es_index": f"sqa-bench-{w}-{c}",
                    "workers": w,
                    "chunk_size": c,
                    "corpus": str(corpus),
                    "commit_every": a.commit_every,
                }
                row = {
                    "workers": w,
                    "chunk_size": c,
                    "repeat": rep,
                    "load_before": [round(x, 2) for x in os.getloadavg()],
                }
                s0 = _proc_cpu(proc.pid if proc else None)
                p = subprocess.Popen(
                    [sys.executable, "-m", "bench.es_bulk", "--child", json.dumps(spec)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                _, status, ru = os.wait4(p.pid, 0)
                out = p.stdout.read()
                if os.waitstatus_to_exitcode(status) != 0:
                    row["error"] = f"exit {os.waitstatus_to_exitcode(status)}"
                else:
                    row.update(json.loads(out.strip().splitlines()[-1]))
                    row["client_cpu_seconds"] = round(ru.ru_utime + ru.ru_stime, 2)
                    s1 = _proc_cpu(proc.pid if proc else None)
                    row["server_cpu_seconds"] = round(s1 - s0, 2) if s0 is not None else None
                row["load_after"] = [round(x, 2) for x in os.getloadavg()]
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    summary = {}
    for w, c in configs:
        ok = [r for r in rows if r["workers"] == w and r["chunk_size"] == c and "error" not in r]
        if ok:
            summary[f"workers={w} chunk_size={c}"] = {
                "paragraphs_per_s": sorted(r["paragraphs_per_s"] for r in ok),
                "client_cpu_us_per_paragraph": round(
                    sum(r["client_cpu_seconds"] for r in ok) / sum(r["paragraphs"] for r in ok) * 1e6, 1
                ),
                "count_equals_read": all(r["count"] == r["paragraphs"] for r in ok),
            }
    result = {
        "benchmark": "bench/es_bulk.py",
        "command": " ".join(["python", "-m", "bench.es_bulk", *(argv if argv is not None else sys.argv[1:])]),
        "server": server,
        "paragraphs": a.n,
        "cores": os.cpu_count(),
        "note": "the machine's 2 cores were shared with other jobs (see load_before/after); client, server "
        "and those jobs competed for them",
        "results": rows,
        "summary": summary,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {Path(a.out).resolve().relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
