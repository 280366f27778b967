"""Seconds per question of the reader (``sqa ask``'s pipeline) on dev questions, plus the raw
llama.cpp speeds behind it; writes bench/work/ask.json or --out (merging into what is there;
the recorded one: --out bench/results/ask.json).

    python -m bench.ask --index-dir INDEX_DIR -n 10                  # preset facts (what `sqa ask` runs)
    python -m bench.ask --index-dir INDEX_DIR -n 10 --side-by-side   # facts, then preset steps, one run
    python -m bench.ask --index-dir INDEX_DIR -n 10 --preset steps
    python -m bench.ask --speed-only            # just the tokens/s microbenchmark
    python -m bench.ask --index-dir INDEX_DIR --one-command 3 [--steps]   # separate `sqa ask` commands
    python -m bench.ask --phases [-n 5]         # phase by phase beside llama.cpp (bench.ask_phases)

Per question: wall seconds of the reader's ``answer_batch([q])`` after the model is loaded (before
session 11 the first question paid for reading the static prompt heads, later ones reused them from
the KV cache; the facts reader now places them when it is built, from ``$SQA_HOME/cache`` when an
earlier process saved them, so ``--one-command`` is the measure of what one ``sqa ask`` costs), its phase timings, and the prompt / cached /
generated token counts. Accuracy on these few questions is reported only as a sanity check (the
full dev evaluation runs through ``sqa eval``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

RESULTS = Path(__file__).resolve().parent / "work" / "ask.json"  # the recorded one: --out bench/results/ask.json


def speed(model, n_read: int = 256, n_gen: int = 64) -> dict:  # noqa: C901
    """tokens/s reading a prompt (cold cache, through ``yes_probability``: one read, one next-token
    distribution) and generating (greedy), with the llama.cpp model's public API."""
    from sqa.strategyqa import load_questions
    from sqa.types import ChatPrompt

    text = "\n".join(q.question + " " + " ".join(q.facts) for q in load_questions("train-2061")[:60])
    text = text[: 4 * n_read]  # about n_read tokens of English
    model.reset_cache()
    p0 = model.stats["prompt_tokens"]
    t = time.perf_counter()
    model.yes_probability([text])
    read_s = time.perf_counter() - t
    n_read = model.stats["prompt_tokens"] - p0
    model.reset_cache()
    g0 = model.stats["generated_tokens"]
    t = time.perf_counter()
    model.generate([ChatPrompt((("user", "Write a long story about a cat."),))], n_gen)
    gen_s = time.perf_counter() - t
    n = model.stats["generated_tokens"] - g0
    model.reset_cache()
    return {
        "read_tokens": n_read,
        "read_tokens_per_s": round(n_read / read_s, 1),
        "generated_tokens": n,
        "generate_tokens_per_s": round(n / gen_s, 1),
        "note": "generate time includes reading the 17-token prompt",
    }


def run(reader, questions, mode: str, label: str) -> dict:
    rows = []
    load0 = [round(x, 2) for x in os.getloadavg()]
    m = reader.model
    with Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=len(questions), rate="")
        for q in questions:
            s0 = dict(getattr(m, "stats", {}))
            t = time.perf_counter()
            r = reader.answer_batch([q], decomposition=mode)[0]
            dt = time.perf_counter() - t
            s1 = getattr(m, "stats", {})
            rows.append(
                {
                    "qid": q.qid,
                    "seconds": round(dt, 2),
                    "correct": r.answer == q.answer,
                    "gold": q.answer,
                    "p_yes": round(r.p_yes, 4),
                    "p_yes_raw": round(getattr(r, "p_yes_raw", r.p_yes), 4),
                    "n_steps": len(r.steps),
                    "timings": r.timings,
                    **{k: s1[k] - s0.get(k, 0) for k in s1},
                }
            )
            bar.update(task, advance=1, rate=f"{statistics.mean(x['seconds'] for x in rows):.1f} s/question")
    secs = [x["seconds"] for x in rows]
    return {
        "loadavg_at_start": load0,
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "mode": mode,
        "n_questions": len(rows),
        "seconds_per_question_mean": round(statistics.mean(secs), 2),
        "seconds_per_question_median": round(statistics.median(secs), 2),
        "seconds_per_question_max": round(max(secs), 2),
        "seconds_per_question_mean_excluding_first": round(statistics.mean(secs[1:]), 2) if len(secs) > 1 else None,
        "accuracy_sanity": round(sum(x["correct"] for x in rows) / len(rows), 3),
        "questions": rows,
    }


def one_command(args, results: dict, out_path: Path) -> int:
    """``--one-command N``: what a user waits for one ``sqa ask`` (each command is a new process,
    so a first question). Records each command's wall seconds and whether the facts reader's prompt
    heads were already saved in ``$SQA_HOME/cache`` (``LlamaCppModel.warm_prefixes``)."""
    import subprocess

    from sqa.paths import default_index_dir, sqa_home

    idx = args.index_dir or str(default_index_dir())
    argv = [
        sys.executable,
        "-c",
        "import sys; from sqa.cli import main; sys.exit(main())",
        "ask",
        args.question,
        "--model",
        args.model,
        "--index-dir",
        idx,
    ] + (["--steps"] if args.steps else [])
    rows = []
    for _ in range(args.one_command):
        cached = len(list((sqa_home() / "cache").glob("prefix-*.kv")))
        load = round(os.getloadavg()[0], 2)
        t = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True)
        rows.append(
            {
                "wall_seconds": round(time.perf_counter() - t, 2),
                "exit": r.returncode,
                "prefix_cache_files_before": cached,
                "loadavg_1min_before": load,
            }
        )
        print(rows[-1], flush=True)
    key = "one command" + (" --steps" if args.steps else "")
    results.setdefault(args.model, {})[key] = {
        "question": args.question,
        "runs": rows,
        "command": "python -m bench.ask " + " ".join(sys.argv[1:]).replace(idx, "INDEX_DIR"),
        "note": "wall clock of separate `sqa ask` processes one after another; 2 cores shared with other jobs",
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--index-dir", default=None, help="index directory (default: $SQA_HOME/index)")
    ap.add_argument(
        "--preset", default=None, help="a preset of sqa/presets.py (facts, no-retrieval, steps); default facts"
    )
    ap.add_argument(
        "--reader",
        choices=["facts", "steps"],
        default=None,
        help="the older spelling: --reader facts is --preset facts, --reader steps is --preset steps",
    )
    ap.add_argument(
        "--side-by-side",
        action="store_true",
        help="also run preset steps on the same questions in the same process, right after",
    )
    ap.add_argument("--split", default="dev")
    ap.add_argument("-n", type=int, default=10, help="first n questions of the split")
    ap.add_argument(
        "--mode",
        default="predicted",
        choices=["predicted", "gold", "question"],
        help="decomposition of the steps reader",
    )
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--phases", action="store_true", help="instead: python -m bench.ask_phases (its doc)")
    ap.add_argument(
        "--one-command",
        type=int,
        default=0,
        metavar="N",
        help="instead: time N separate `sqa ask QUESTION` commands (wall clock: Python start, model "
        "load, reading, printing), each noting whether the prompt heads' KV cache existed",
    )
    ap.add_argument("--question", default="Did Aristotle use a laptop?")
    ap.add_argument("--steps", action="store_true", help="with --one-command: sqa ask --steps")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    args.preset = args.preset or args.reader or "facts"
    if args.phases:
        from bench.ask_phases import main as phases

        return phases(
            ["-n", str(args.n), "--out", args.out] + (["--index-dir", args.index_dir] if args.index_dir else [])
        )

    from sqa.paths import default_index_dir
    from sqa.pipeline import build_reader
    from sqa.settings import ReaderSettings
    from sqa.presets import get_preset
    from sqa.models import load_model
    from sqa.strategyqa import load_questions

    out_path = Path(args.out)
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    if args.one_command:
        return one_command(args, results, out_path)
    t = time.perf_counter()
    model = load_model(args.model)
    load_s = time.perf_counter() - t
    env = {
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)),
        "python": sys.version.split()[0],
        "model": args.model,
        "model_load_seconds": round(load_s, 2),
    }
    entry = results.setdefault(args.model, {})
    entry["env"] = env
    if hasattr(model, "reset_cache"):  # llama.cpp
        entry["llamacpp_speed"] = speed(model)
    if not args.speed_only:
        idx = args.index_dir or str(default_index_dir())
        command = "python -m bench.ask " + " ".join(sys.argv[1:]).replace(idx, "INDEX_DIR")
        qs = load_questions(args.split)[: args.n]
        presets = [args.preset] + (["steps"] if args.side_by_side and args.preset != "steps" else [])
        for name in presets:
            preset = get_preset(name, for_ask=True)
            pipe = build_reader(ReaderSettings(preset=preset, model=args.model, index=idx), model=model)
            mode = args.mode if preset.reader == "steps" else "question"
            res = run(pipe.reader, qs, mode, f"preset {name} ({mode})")
            res.update(split=args.split, index_dir="INDEX_DIR", preset=name, reader=preset.reader, command=command)
            entry[f"preset {name}" + (f" ({mode})" if preset.reader == "steps" else "")] = res
            pipe.close()
    env["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    env["note"] = (
        "2 CPU cores shared with other jobs; a load average above 2 means contention and "
        "slower timings than on an idle machine"
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=1) + "\n")
    summary = {
        k: {kk: vv for kk, vv in v.items() if kk != "questions"} if isinstance(v, dict) else v for k, v in entry.items()
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
