"""Served throughput over one server vs several (issue 42): ``--base-url`` given more than once.

    python -m bench.server_scale --limit 16 --latency 0.5     # -> bench/results/server_scale.json

Stand-in OpenAI-compatible servers (stdlib, in threads on 127.0.0.1) that run one request at a time
and answer each after a fixed ``--latency`` seconds, as llama.cpp's server does (one slot): what
sqa gains from a second server is then the overlap of its requests, not any server's batching.
``sqa eval --reader steps --no-retrieval`` (the steps reader without an index: decomposition, one
generation per step, the final read-outs) runs over the first ``--limit`` dev questions through 1,
then 2 servers, each row in a fresh ``$SQA_HOME`` (an empty response cache, so every request is
sent). sqa measures each server at load (one at a time here: 1 slot each), so the steps reader runs
as many questions in lockstep as there are servers. Answers are fixed (" Yes", fixed logprobs): a
load test, not an accuracy run. Recorded: wall seconds, questions/s, requests per server, the
speed-up of 2 servers over 1 (questions per second of answering, from traces.jsonl, and per wall second,
which also counts process start and the load-time checks), and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.server import stand_in

MODEL = "stand-in-reader"


def row(urls: list[str], states: list[dict], limit: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SQA_HOME": str(Path(tmp) / "home")}
        env.pop("SQA_OPENAI_CONCURRENCY", None)
        cmd = [
            sys.executable,
            "-c",
            "import sys; from sqa.cli import main; sys.exit(main())",
            "eval",
            "--reader",
            "steps",
            "--no-retrieval",
            "--split",
            "dev",
            "--limit",
            str(limit),
            "--model",
            f"openai:{MODEL}",
            *[a for u in urls for a in ("--base-url", u)],
            "--out",
            str(Path(tmp) / "run"),
        ]
        before = [s["requests"] for s in states]
        load0 = os.getloadavg()[0]
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if r.returncode:
            raise SystemExit(f"{len(urls)} server(s): sqa eval failed: {r.stderr[-800:]}")
        run = json.loads((Path(tmp) / "run" / "run.json").read_text())
        answering = sum(
            json.loads(x)["eval"]["seconds"] for x in (Path(tmp) / "run" / "traces.jsonl").read_text().splitlines()
        )
        return {
            "servers": len(urls),
            "wall_seconds": round(wall, 2),
            "questions": limit,
            "answering_seconds": round(answering, 2),
            "questions_per_second": round(limit / answering, 4),
            "questions_per_wall_second": round(limit / wall, 4),
            "requests_per_server": [s["requests"] - b for s, b in zip(states, before)],
            "slots_per_server": run["server"]["concurrency"],
            "cost": run.get("cost"),
            "load_avg_1m_before": round(load0, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--out", default="bench/results/server_scale.json")
    args = ap.parse_args()
    servers = [stand_in(args.latency, MODEL, serial=True) for _ in range(2)]
    urls = [f"http://127.0.0.1:{h.server_address[1]}/v1" for h, _ in servers]
    states = [s for _, s in servers]
    rows = [row(urls[:1], states, args.limit), row(urls, states, args.limit)]
    for h, _ in servers:
        h.shutdown()
    speedup = rows[1]["questions_per_second"] / rows[0]["questions_per_second"]
    wall_speedup = rows[1]["questions_per_wall_second"] / rows[0]["questions_per_wall_second"]
    res = {
        "what": "sqa eval --reader steps --no-retrieval through 1 vs 2 stand-in servers that each run one request "
        f"at a time and answer after {args.latency} s (llama.cpp's server's one slot)",
        "command": " ".join(["python", "-m", "bench.server_scale"] + sys.argv[1:]),
        "rows": rows,
        "speedup_2_vs_1": round(speedup, 3),
        "wall_speedup_2_vs_1": round(wall_speedup, 3),
        "note": "questions_per_second: questions over the seconds spent answering them (traces.jsonl eval.seconds: "
        "the steps reader's lockstep batches); questions_per_wall_second also counts process start and the "
        "load-time checks (model list, probes, fingerprint, concurrency measurement)",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
