"""``sqa ask - < questions.txt`` (one process, the model loaded once) against the same questions
asked by separate ``sqa ask "QUESTION" --json`` processes, with the real default model: wall seconds
of each, the seconds until each answer of the session arrives, and whether the answers and P(yes)
are identical; writes bench/work/ask_session.json or --out (the recorded one:
bench/results/ask_session.json).

    python -m bench.ask_session -n 5 [--index-dir DIR] [--model NAME] [--out FILE]

The questions are the first ``n`` of dev. The load average (``/proc/loadavg``: 1, 5 and 15 minutes)
is recorded before and after each part: on a shared machine it says how much the timings are slowed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "work" / "ask_session.json"
SQA = [sys.executable, "-c", "import sys; from sqa.cli import main; sys.exit(main())"]


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages of ``/proc/loadavg``."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def separate(questions: list[str], common: list[str]) -> dict:
    """Each question by its own ``sqa ask QUESTION --json COMMON`` process: wall seconds and answer."""
    rows, load0 = [], loadavg()
    for q in questions:
        t = time.perf_counter()
        r = subprocess.run([*SQA, "ask", q, "--json", *common], capture_output=True, text=True, timeout=900)
        s = time.perf_counter() - t
        if r.returncode != 0:
            raise SystemExit(f"sqa ask failed ({r.returncode}): {r.stderr[-2000:]}")
        rows.append({"seconds": round(s, 2), "answer": json.loads(r.stdout)})
    return {"loadavg_before": load0, "loadavg_after": loadavg(), "rows": rows}


def session(questions: list[str], common: list[str]) -> dict:
    """All questions through one ``sqa ask - --json COMMON < file`` process: the wall seconds until
    each JSON line arrives (from the process start) and in all."""
    load0 = loadavg()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(questions) + "\n")
    try:
        t = time.perf_counter()
        with open(f.name) as stdin:
            p = subprocess.Popen(
                [*SQA, "ask", "-", "--json", *common],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            arrivals, answers = [], []
            for line in p.stdout:
                arrivals.append(round(time.perf_counter() - t, 2))
                answers.append(json.loads(line))
            err = p.stderr.read()
            rc = p.wait(timeout=900)
        total = time.perf_counter() - t
    finally:
        os.unlink(f.name)
    if rc != 0:
        raise SystemExit(f"sqa ask - failed ({rc}): {err[-2000:]}")
    gaps = [round(b - a, 2) for a, b in zip(arrivals, arrivals[1:])]
    return {
        "loadavg_before": load0,
        "loadavg_after": loadavg(),
        "seconds_total": round(total, 2),
        "answer_arrives_at_seconds": arrivals,
        "seconds_between_answers": gaps,
        "answers": answers,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="dev questions (the first n)")
    ap.add_argument("--model", default=None, help="the --model of sqa ask (default: its default)")
    ap.add_argument("--index-dir", default=None, help="the --index-dir of sqa ask (default: its default)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    from sqa.strategyqa import load_questions

    questions = [q.question for q in load_questions("dev")[: a.n]]
    common = [*(["--model", a.model] if a.model else []), *(["--index-dir", a.index_dir] if a.index_dir else [])]
    apart = separate(questions, common)
    together = session(questions, common)
    pairs = [  # the JSON objects without their timings, which differ from run to run
        tuple({k: v for k, v in d.items() if k != "timings"} for d in pair)
        for pair in zip([r["answer"] for r in apart["rows"]], together["answers"])
    ]
    sep_total = sum(r["seconds"] for r in apart["rows"])
    out = {
        "command": f"python -m bench.ask_session -n {a.n}" + "".join(f" {x}" for x in common),
        "model": a.model or "qwen2.5-coder-1.5b (default)",
        "cpus": os.cpu_count(),
        "questions": questions,
        "separate": {
            "seconds_each": [r["seconds"] for r in apart["rows"]],
            "seconds_total": round(sep_total, 2),
            "loadavg_before": apart["loadavg_before"],
            "loadavg_after": apart["loadavg_after"],
        },
        "session": {k: v for k, v in together.items() if k != "answers"},
        "session_over_separate": round(together["seconds_total"] / sep_total, 3),
        "identical_answers": all(x["answer"] == y["answer"] for x, y in pairs),
        "identical_p_yes": all(x["p_yes"] == y["p_yes"] for x, y in pairs),
        "identical_json_objects": all(x == y for x, y in pairs),
        "max_abs_p_yes_difference": max(abs(x["p_yes"] - y["p_yes"]) for x, y in pairs),
        "answers": [
            {
                "answer": y["answer"],
                "p_yes": y["p_yes"],
                "p_yes_separate": x["p_yes"],
                "fields_that_differ": sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k)),
            }
            for x, y in pairs
        ],
        "note": "2 CPU cores shared with other agents' jobs (a background `sqa eval` among them): a load "
        "average above 2 means the processes wait for a core, so every time here is slower than on an idle machine",
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(
        json.dumps({k: out[k] for k in ("separate", "session", "session_over_separate", "identical_p_yes")}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
