"""Every shipped method through ``sqa ask`` and ``sqa eval`` with the packaged Qwen2.5-Coder-1.5B,
in-process (llama.cpp) and served by llama.cpp's server (llama-cpp-python[server], as CI installs
it): does each command answer, and what did it answer with, at what cost (issue 47's first
done-when item).

    python -m bench.methods_matrix                 # -> bench/results/methods_matrix.json

Per method and backend: ``sqa eval --method M --split dev --limit 1`` (the first dev question) into
a fresh folder, then ``sqa ask --method M`` with that question (``--json``). Served, the ask is
answered from sqa's response cache where the eval already sent the same requests. The default
settings of each method, the mini index (``$SQA_HOME/index``). ``dragin`` is refused by both
(it needs attention weights): the one-line refusal is recorded. Each command's exit status,
answer, method cost and wall seconds are recorded with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

METHODS = ["direct", "cot", "sc", "self-ask", "rag", "iter-retgen", "ircot", "flare", "steps", "facts", "dragin"]
MODEL = "qwen2.5-coder-1.5b"


def _sqa(args: list[str], timeout: float) -> tuple[int, str, str, float]:
    started = time.perf_counter()
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; sys.argv[0] = 'sqa'; from sqa.cli import main; sys.exit(main())",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return r.returncode, r.stdout, r.stderr, time.perf_counter() - started
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:.0f} s", time.perf_counter() - started


def _server(gguf: Path, port: int, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL]
    argv += [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "8192",
        "--n_threads",
        "1",
        "--n_threads_batch",
        "2",
    ]
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"llama.cpp's server did not start: {log.read_text()[-2000:]}")
        time.sleep(1)


def row(method: str, model_args: list[str], work: Path, timeout: float) -> dict:
    out = work / method
    rc, so, se, secs = _sqa(
        ["eval", "--method", method, *model_args, "--split", "dev", "--limit", "1", "--out", str(out)], timeout
    )
    r: dict = {"method": method, "eval": {"exit": rc, "seconds": round(secs, 1)}}
    if rc != 0:
        r["eval"]["error"] = (se.strip().splitlines() or [""])[-1][:300]
        return r
    if not (out / "traces.jsonl").exists():
        r["eval"]["error"] = "exit 0 but no traces.jsonl written"
        return r
    rec = json.loads((out / "traces.jsonl").read_text().splitlines()[0])
    r["eval"].update(answer=rec.get("answer"), correct=rec.get("answer") == rec.get("gold"))
    r["eval"]["cost"] = (rec.get("method") or {}).get("cost")
    rc, so, se, secs = _sqa(["ask", "--method", method, *model_args, rec["question"], "--json"], timeout)
    r["ask"] = {"exit": rc, "seconds": round(secs, 1)}
    if rc == 0:
        got = json.loads(so)
        r["ask"].update(answer=got.get("answer"), same_as_eval=got.get("answer") == rec.get("answer"))
    else:
        r["ask"]["error"] = (se.strip().splitlines() or [""])[-1][:300]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--backends", default="in-process,served")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", default="bench/results/methods_matrix.json")
    ap.add_argument("--keep", action="store_true", help="keep the rows --out holds already; run only the others")
    args = ap.parse_args()
    from sqa.models.registry import MODELS, assemble_gguf

    gguf = assemble_gguf(MODELS[MODEL])
    result = {
        "command": " ".join(["python", "-m", "bench.methods_matrix"] + sys.argv[1:]),
        "model": MODEL,
        "index": "mini ($SQA_HOME/index)",
        "SQA_OPENAI_TIMEOUT": os.environ.get("SQA_OPENAI_TIMEOUT"),
        "load_before": os.getloadavg(),
        "rows": {},
    }
    if args.keep and Path(args.out).exists():
        result["rows"] = json.loads(Path(args.out).read_text())["rows"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for backend in args.backends.split(","):
            proc = None
            if backend == "served":
                port = 8765
                proc = _server(gguf, port, work / "server.log")
                model_args = ["--model", f"openai:{MODEL}", "--base-url", f"http://127.0.0.1:{port}/v1"]
            else:
                model_args = ["--model", MODEL]
            try:
                rows = result["rows"].setdefault(backend, [])
                for m in args.methods.split(","):
                    if any(r["method"] == m for r in rows):
                        continue
                    rows.append(row(m, model_args, work / backend, args.timeout))
                    print(json.dumps(rows[-1]), flush=True)
                    result["load_after"] = os.getloadavg()
                    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")  # each row as it comes
            finally:
                if proc is not None:
                    proc.terminate()
                    proc.wait(30)
    result["load_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
