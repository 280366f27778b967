"""Seconds per question of ``sqa eval`` (the whole pipeline through the batch runner, traces fsync'd
per question) on this machine; writes bench/work/eval.json or --out (recorded: bench/results/eval.json; merging: one entry per
split/model/decomposition/index).

    # run a preset on the first N dev questions now (resumes bench/work/eval-... if it is there)
    python -m bench.eval --split dev --limit 10 --preset facts --index-dir INDEX_DIR
    # or record a finished (or partial) real run's metrics.json
    python -m bench.eval --from-run RUN_DIR

seconds/question is the runner's own measure (``metrics.json`` ``seconds_per_question``:
wall-clock seconds inside ``answer_batch`` between one finished question and the next, model
loading excluded). The load average is recorded because the machine is shared: timings taken
under load are slower than on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "work" / "eval.json"  # the recorded one: --out bench/results/eval.json


def machine(with_load: bool = True) -> dict:
    """Platform, Python, CPU counts and (``with_load``) the current 1/5/15-minute load average."""
    m = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
    }
    if with_load:
        m["loadavg_1_5_15"] = list(os.getloadavg())
    return m


def entry_from_metrics(m: dict, run_dir: Path, command: str, extra: dict | None = None, with_load: bool = True) -> dict:
    """One eval.json entry from a run's metrics.json. ``with_load=False`` for a run recorded after
    the fact (``--from-run``): the load average now says nothing about the load while it ran."""
    idx = m.get("index") or {}
    return {
        "command": command,
        "run_dir": run_dir.name,  # the folder's name only: no machine path in results
        "split": m["split"],
        "n": m["n"],
        "n_predicted": m["n_predicted"],
        "n_questions": m["n_questions"],
        "model": m["model"],
        "decomposition": m["options"]["decomposition"],
        "k": m["options"]["k"],
        "batch_size": m["options"]["batch_size"],
        "decision": m.get("decision") or m["options"].get("decision") or m.get("reader", "steps"),
        "signals_accuracy": {k: v["Accuracy"] for k, v in (m.get("signals") or {}).items()},
        "complete": m.get("complete"),
        "index": {
            "backend": idx.get("backend"),
            "paragraph_count": idx.get("paragraph_count"),
            "preset": idx.get("preset"),
        },
        "seconds_per_question": m["seconds_per_question"],
        "phase_seconds_mean": m.get("phase_seconds_mean"),
        "Accuracy": m["Accuracy"],
        "Recall@10": m["Recall@10"],
        "SARI": m["SARI"],
        "majority_baseline_accuracy": m["majority_baseline"]["Accuracy"],
        "machine": machine(with_load),
        "measured_at": m.get("written_at"),
        **(extra or {}),
    }


def save(entry: dict, out: Path = RESULTS) -> None:
    """Merge ``entry`` into the results file ``out`` (one entry per split/model/decomposition/decision/index)."""
    data = json.loads(out.read_text()) if out.exists() else {}
    key = (
        f"{entry['split']}|{entry['model']}|{entry['decomposition']}|{entry['decision']}|"
        f"{entry['index'].get('preset') or entry['index'].get('paragraph_count')}"
    )
    data.setdefault("runs", {})[key] = entry
    data["description"] = (
        "sqa eval seconds per question on this machine (metrics.json seconds_per_question); see bench/eval.py"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from-run", type=Path, help="record this run directory's metrics.json instead of running")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--model", default=None)
    ap.add_argument("--preset", default="facts", help="a preset of sqa/presets.py")
    ap.add_argument("--index-dir", default=None, help="index directory (default: $SQA_HOME/index)")
    ap.add_argument("--backend", default="embedded")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument(
        "--out",
        type=Path,
        default=RESULTS,
        help="results file (default bench/work/eval.json; the recorded one is bench/results/eval.json)",
    )
    args = ap.parse_args()
    from sqa.paths import default_index_dir

    index_dir = args.index_dir or str(default_index_dir())
    command = "python -m bench.eval " + " ".join(sys.argv[1:]).replace(index_dir, "INDEX_DIR")

    if args.from_run:
        m = json.loads((args.from_run / "metrics.json").read_text())
        entry = entry_from_metrics(
            m,
            args.from_run,
            command,
            {"source": "recorded from a sqa eval run (the machine's load while it ran was not recorded)"},
            with_load=False,
        )
    else:
        from sqa.cli import main as sqa_main
        from sqa.models.registry import DEFAULT_MODEL

        model = args.model or DEFAULT_MODEL
        out = HERE / "work" / f"eval-{args.split}-{args.preset}-{Path(model).name}-{args.limit}"
        load_at_start = list(os.getloadavg())
        t0 = time.perf_counter()
        rc = sqa_main(
            [
                "eval",
                "--split",
                args.split,
                "--limit",
                str(args.limit),
                "--out",
                str(out),
                "--model",
                model,
                "--preset",
                args.preset,
                "--index-dir",
                index_dir,
                "--backend",
                args.backend,
                "--k",
                str(args.k),
            ]
        )
        if rc != 0:
            return rc
        m = json.loads((out / "metrics.json").read_text())
        entry = entry_from_metrics(
            m,
            out,
            command,
            {
                "source": "run by bench/eval.py",
                "wall_seconds_incl_model_load": round(time.perf_counter() - t0, 1),
                "loadavg_at_start": load_at_start,
            },
        )
    save(entry, args.out)
    print(json.dumps({k: entry[k] for k in ("split", "n", "model", "seconds_per_question", "Accuracy")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
