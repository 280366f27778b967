"""A model behind an OpenAI-compatible server against the same model in-process (issue 36).

    # llama.cpp's server (llama-cpp-python[server]==0.3.36), the packaged 0.5B GGUF, 1-2 threads
    python -m llama_cpp.server --model GGUF --model_alias qwen2.5-coder-0.5b --host 127.0.0.1 --port P \\
        --n_ctx 4096 --n_threads 1 --n_threads_batch 2
    python -m bench.server agreement --base-url http://127.0.0.1:P/v1 --limit 20 \\
        --runs INPROC_RUN_DIR SERVED_RUN_DIR          # -> bench/results/server_agreement.json
    python -m bench.server concurrency --base-url http://127.0.0.1:P/v1 --index-dir INDEX --limit 20
                                                      # -> bench/results/server_concurrency.json

``agreement``: P(yes) of the facts reader's plain prompt (raw text) for the first ``--limit`` dev
questions, read four ways: cyllama in-process (what ``sqa`` runs; cold: cache dropped before each
prompt, and warm: the shared prefix reused from the KV cache), llama-cpp-python in-process (the
server's own llama.cpp build, no HTTP), and through the server (``sqa.models.openai``); plus the
token IDs each side reads (BOS or not) and, from two ``sqa eval`` run directories of the same
options (one in-process, one ``--model openai:...``), per-question answers and P(yes).

``concurrency``: ``sqa eval --preset steps`` over the same questions through the server with
``SQA_OPENAI_CONCURRENCY`` 1 and 8, side by side (questions/s, wall seconds).

``overlap``: the same (or ``--method M``: a method, e.g. ``cot``; level 0 = the concurrency sqa
measures at load), against a stand-in server (stdlib, in a thread) that answers every request
after a fixed ``--latency`` in parallel, as a batching server (vLLM, SGLang) does up to its batch
size; it counts the requests in flight, so it shows whether sqa's requests overlap, apart from
what one server does with them. Its answers are fixed (" Yes", fixed logprobs): a load test, not
an accuracy run.

    python -m bench.server overlap --index-dir INDEX --limit 20 --latency 0.2
    python -m bench.server overlap --method cot --limit 40 --levels 1 0 --out bench/results/methods_throughput.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MODEL = "qwen2.5-coder-0.5b"


def _p(lo: float) -> float:
    return 1.0 / (1.0 + math.exp(-lo))


def _tokens_server(base_url: str, text: str) -> list[int] | None:
    """llama-cpp-python's /extras/tokenize (an extra of that server, not of the OpenAI API)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    req = urllib.request.Request(
        root + "/extras/tokenize",
        data=json.dumps({"input": text}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["tokens"]
    except OSError:
        return None


def _stats(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {
        "n": len(xs),
        "max": round(xs[-1], 5),
        "mean": round(sum(xs) / len(xs), 5),
        "median": round(xs[len(xs) // 2], 5),
        "p90": round(xs[int(0.9 * (len(xs) - 1))], 5),
    }


def agreement(args) -> dict:
    from llama_cpp import Llama

    from sqa.eval.options import select_questions
    from sqa.facts.prompt import plain_prompt
    from sqa.models.llamacpp import LlamaCppModel
    from sqa.models.openai import NO_WORDS, YES_WORDS, OpenAIModel
    from sqa.models.registry import MODELS, assemble_gguf

    gguf = assemble_gguf(MODELS[MODEL])
    qs = select_questions("dev", args.limit)
    prompts = [plain_prompt(q.question) for q in qs]
    served = OpenAIModel(MODEL, base_url=args.base_url, concurrency=1)
    t = time.perf_counter()
    p_served = served.yes_probability(prompts)
    s_served = time.perf_counter() - t

    cy = LlamaCppModel(gguf, name=MODEL, n_threads=2)
    cold, warm = [], []
    for p in prompts:
        cy.reset_cache()
        cold.append(cy.yes_probability([p])[0])
    for p in prompts:
        warm.append(cy.yes_probability([p])[0])
    tok_cy = [cy.tokenize(p) for p in prompts]
    del cy

    lcp = Llama(str(gguf), n_ctx=4096, n_threads=2, logits_all=True, verbose=False)
    p_lcp = []
    tok_lcp = []
    for p in prompts:
        lcp.reset()
        r = lcp.create_completion(p, max_tokens=1, temperature=0.0, logprobs=20, repeat_penalty=1.0)
        top = r["choices"][0]["logprobs"]["top_logprobs"][0]
        py = sum(math.exp(top[w]) for w in YES_WORDS if w in top)
        pn = sum(math.exp(top[w]) for w in NO_WORDS if w in top)
        p_lcp.append(py / (py + pn))
        tok_lcp.append(lcp.tokenize(p.encode(), add_bos=True, special=True))
    tok_srv = [_tokens_server(args.base_url, p) for p in prompts]
    bos = lcp.token_bos()

    def diff(a, b):
        return _stats([abs(x - y) for x, y in zip(a, b)])

    def flips(a, b):
        return sum((x >= 0.5) != (y >= 0.5) for x, y in zip(a, b))

    out = {
        "what": "P(yes) = P(Yes)/(P(Yes)+P(No)) of the next token after the facts reader's plain prompt (raw text, "
        "sqa.facts.prompt.plain_prompt) for the first N dev questions, read four ways",
        "command": " ".join(["python", "-m", "bench.server"] + sys.argv[1:]),
        "model": MODEL,
        "gguf_sha256": MODELS[MODEL].sha256,
        "server": {
            **served.server_info,
            "package": "llama-cpp-python[server]==0.3.36",
            "command": "python -m llama_cpp.server --model GGUF --model_alias qwen2.5-coder-0.5b --host 127.0.0.1 "
            "--port P --n_ctx 4096 --n_threads 1 --n_threads_batch 2",
        },
        "in_process": {
            "cyllama": "0.2.18 (its own llama.cpp build)",
            "llama_cpp_python": "0.3.36 (the server's build)",
        },
        "n_prompts": len(prompts),
        "tokens": {
            "cyllama_equals_server": sum(a == b for a, b in zip(tok_cy, tok_srv)),
            "cyllama_equals_llama_cpp_python": sum(a == b for a, b in zip(tok_cy, tok_lcp)),
            "bos_token_id": bos,
            "bos_first_cyllama": sum(bool(t) and t[0] == bos for t in tok_cy),
            "bos_first_server": sum(bool(t) and t[0] == bos for t in tok_srv if t),
            "mean_prompt_tokens": round(sum(map(len, tok_cy)) / len(tok_cy), 1),
        },
        "abs_diff_p_yes": {
            "cyllama_cold_vs_warm (KV-cache reuse only, same build)": diff(cold, warm),
            "server_vs_llama_cpp_python_in_process (HTTP + server, same build)": diff(p_served, p_lcp),
            "cyllama_cold_vs_llama_cpp_python (build only)": diff(cold, p_lcp),
            "server_vs_cyllama_warm (what sqa compares)": diff(p_served, warm),
        },
        "answer_flips": {
            "server_vs_cyllama_warm": flips(p_served, warm),
            "cyllama_cold_vs_llama_cpp_python": flips(cold, p_lcp),
        },
        "per_prompt": [
            {
                "qid": q.qid,
                "cyllama_cold": round(a, 5),
                "cyllama_warm": round(b, 5),
                "llama_cpp_python": round(c, 5),
                "server": round(d, 5),
            }
            for q, a, b, c, d in zip(qs, cold, warm, p_lcp, p_served)
        ],
        "server_seconds": round(s_served, 2),
        "readout_stats": served.readout_stats,
    }
    if args.runs:
        out["eval"] = compare_runs(*args.runs)
    out["machine"] = {
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }
    return out


def compare_runs(inproc: str, served: str) -> dict:
    """Per-question answers and P(yes) of two ``sqa eval`` run directories over the same questions."""

    def load(d):
        return {json.loads(line)["qid"]: json.loads(line) for line in open(Path(d) / "traces.jsonl", encoding="utf-8")}

    a, b = load(inproc), load(served)
    qids = [q for q in a if q in b]
    signals = sorted({k for q in qids for k in a[q].get("signals", {})})
    same_steps = sum([s["question"] for s in a[q]["steps"]] == [s["question"] for s in b[q]["steps"]] for q in qids)
    ma = json.loads((Path(inproc) / "metrics.json").read_text())
    mb = json.loads((Path(served) / "metrics.json").read_text())
    return {
        "runs": {"in_process": ma["options"], "served": mb["options"]},
        "server": json.loads((Path(served) / "run.json").read_text()).get("server"),
        "n": len(qids),
        "same_answer": sum(a[q]["answer"] == b[q]["answer"] for q in qids),
        "same_decomposition": same_steps,
        "abs_diff_p_yes": _stats([abs(a[q]["p_yes"] - b[q]["p_yes"]) for q in qids]),
        "abs_diff_by_signal": {
            s: _stats(
                [
                    abs(a[q]["signals"][s] - b[q]["signals"][s])
                    for q in qids
                    if s in a[q]["signals"] and s in b[q]["signals"]
                ]
            )
            for s in signals
        },
        "accuracy": {"in_process": ma["Accuracy"], "served": mb["Accuracy"]},
        "seconds_per_question": {
            "in_process": round(ma["seconds_per_question"], 2),
            "served": round(mb["seconds_per_question"], 2),
        },
        "yes_no_unread": mb.get("yes_no_unread"),
        "per_question": [
            {
                "qid": q,
                "answer": [a[q]["answer"], b[q]["answer"]],
                "p_yes": [round(a[q]["p_yes"], 4), round(b[q]["p_yes"], 4)],
            }
            for q in qids
        ],
    }


def concurrency(args) -> dict:
    rows = []
    for c in args.levels:
        rows.append(_eval_row(args, c))
        print(rows[-1], flush=True)
    return {
        "what": "sqa eval --preset steps through the server, questions/s with SQA_OPENAI_CONCURRENCY 1 vs 8 "
        "(8: the steps reader sends its questions in lockstep, each phase's prompts concurrently)",
        "command": " ".join(["python", "-m", "bench.server"] + sys.argv[1:]),
        "server": "llama-cpp-python[server]==0.3.36, one model instance, --n_threads 1 --n_threads_batch 2, n_ctx 4096",
        "rows": rows,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "note": "2 cores shared with 3 other developers' jobs: load averages above show the contention",
        },
    }


def stand_in(latency: float, model: str, serial: bool = False):
    """A stand-in OpenAI-compatible server (stdlib, in a thread on 127.0.0.1) serving ``model``: each
    ``/v1/completions`` request is answered " Yes" with fixed logprobs and usage after ``latency`` s,
    all in parallel (a batching server's behaviour) or, with ``serial``, one at a time (llama.cpp's
    server with one slot). Returns ``(server, counters)``; counters: requests, in_flight,
    max_in_flight (reset them by ``update``); ``server.shutdown()`` stops it."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    state = {"in_flight": 0, "max_in_flight": 0, "requests": 0}
    lock = threading.Lock()
    one_at_a_time = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, obj: dict) -> None:
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "stand-in"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            with lock:
                state["in_flight"] += 1
                state["requests"] += 1
                state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
            if serial:
                with one_at_a_time:
                    time.sleep(latency)
            else:
                time.sleep(latency)
            with lock:
                state["in_flight"] -= 1
            top = {" Yes": -0.6, " No": -0.9}
            lp = (
                {"tokens": [" Yes"], "token_logprobs": [-0.6], "top_logprobs": [top], "text_offset": [0]}
                if req.get("logprobs")
                else None
            )
            self._send(
                {
                    "id": "x",
                    "object": "text_completion",
                    "created": 0,
                    "model": model,
                    "choices": [{"text": " Yes", "index": 0, "logprobs": lp, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
                }
            )

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, state


def overlap(args) -> dict:
    latency = args.latency
    httpd, state = stand_in(latency, MODEL)
    args.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    rows = []
    for c in args.levels:
        state.update(in_flight=0, max_in_flight=0, requests=0)
        row = _eval_row(args, c)
        row.update(requests=state["requests"], max_requests_in_flight=state["max_in_flight"])
        rows.append(row)
        print(row, flush=True)
    httpd.shutdown()
    what = f"--method {args.method}" if args.method else "--preset steps"
    return {
        "what": f"sqa eval {what} against a stand-in OpenAI-compatible server that answers each request "
        f"after {latency} s, all in parallel (a batching server's behaviour): SQA_OPENAI_CONCURRENCY "
        + " vs ".join(str(c) if c else "measured (0)" for c in args.levels),
        "command": " ".join(["python", "-m", "bench.server"] + sys.argv[1:]),
        "rows": rows,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }


def _eval_row(args, c: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        # a fresh $SQA_HOME per row: an empty response cache, so every level sends its requests
        env = {**os.environ, "SQA_OPENAI_CONCURRENCY": str(c), "SQA_HOME": str(Path(tmp) / "home")}
        cmd = [
            sys.executable,
            "-c",
            "import sys; from sqa.cli import main; sys.exit(main())",
            "eval",
            *(["--method", args.method] if getattr(args, "method", None) else ["--preset", "steps"]),
            "--split",
            "dev",
            "--limit",
            str(args.limit),
            "--model",
            f"openai:{MODEL}",
            "--base-url",
            args.base_url,
            *(["--index-dir", args.index_dir] if args.index_dir else []),
            "--out",
            str(Path(tmp) / "run"),
        ]
        load0 = os.getloadavg()[0]
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if r.returncode:
            raise SystemExit(f"concurrency {c}: sqa eval failed: {r.stderr[-500:]}")
        m = json.loads((Path(tmp) / "run" / "metrics.json").read_text())
        return {
            "concurrency": c,
            "wall_seconds": round(wall, 1),
            "questions": m["n"],
            "questions_per_second": round(m["n"] / wall, 4),
            "seconds_per_question_inside_answer_batch": round(m["seconds_per_question"], 2),
            "Accuracy": m["Accuracy"],
            "load_avg_1m_before": round(load0, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("agreement")
    a.add_argument("--base-url", required=True)
    a.add_argument("--limit", type=int, default=20)
    a.add_argument("--runs", nargs=2, metavar=("IN_PROCESS_RUN", "SERVED_RUN"))
    a.add_argument("--out", default="bench/results/server_agreement.json")
    c = sub.add_parser("concurrency")
    c.add_argument("--base-url", required=True)
    c.add_argument("--index-dir", required=True)
    c.add_argument("--limit", type=int, default=20)
    c.add_argument("--levels", type=int, nargs="+", default=[1, 8])
    c.add_argument("--out", default="bench/results/server_concurrency.json")
    o = sub.add_parser("overlap")
    o.add_argument("--index-dir", help="the index (needed by --preset steps and retrieving methods)")
    o.add_argument("--method", help="a method (sqa.methods) instead of --preset steps; concurrency 0: measured")
    o.add_argument("--limit", type=int, default=20)
    o.add_argument("--latency", type=float, default=0.2)
    o.add_argument("--levels", type=int, nargs="+", default=[1, 8])
    o.add_argument("--out", default="bench/results/server_overlap.json")
    args = ap.parse_args()
    res = {"agreement": agreement, "concurrency": concurrency, "overlap": overlap}[args.cmd](args)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in res.items() if k not in ("per_prompt", "eval", "rows")}, indent=1))
    if "eval" in res:
        print(json.dumps({k: v for k, v in res["eval"].items() if k != "per_question"}, indent=1))


if __name__ == "__main__":
    main()
