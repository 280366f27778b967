"""Which P(yes) readings should make the steps reader's final yes/no? Compares the four readings
the recorded steps runs hold (``transcript``, ``compact``, ``direct``, ``plain``; recorded by the
reader before its decision was fixed to transcript+direct+plain) and their log-odds means.
The analysis behind ``sqa.steps.reader.DECISION``; it reads recorded runs only.

Usage (RUN_DIR: a run folder with its traces decompressed to traces.jsonl)::

    python -m experiments.decision --choose RUNS_DIR/t2061-signals [RUNS_DIR/train ...] [--report RUNS_DIR/dev229 ...]

The decision is chosen on the ``--choose`` runs only (train-2061 or train runs), by accuracy at
P(yes) = 0.5, ties broken by AUC. Dev questions never take part in the choice: a ``train`` run
covers the 229 dev questions too, so they are dropped from it, and a question answered in several
``--choose`` runs counts once (the first run given wins). ``--report`` runs get the same table for
reference.
Writes ``experiments/work/decision.json`` or ``--out`` (the recorded run: ``bench/results/decision.json``): per run, per signal set, n, accuracy (with a 95 % bootstrap
interval, 2,000 resamples over questions), AUC of P(yes) against the gold answer, mean P(yes), and
the majority ("always no") accuracy of the same questions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sqa.steps.reader import combine_log_odds
from sqa.strategyqa import load_questions, split_qids

ROOT = Path(__file__).resolve().parents[1]
SIGNALS = ("transcript", "compact", "direct", "plain")  # the readings the recorded runs hold

OUT = ROOT / "experiments" / "work" / "decision.json"  # the recorded run: --out bench/results/decision.json


def load_run(run_dir: Path) -> tuple[dict, list[dict]]:
    """(run.json, traces with all signals and a gold answer)."""
    run = json.loads((run_dir / "run.json").read_text())
    gold = {q.qid: q.answer for q in load_questions("all") if q.answer is not None}
    rows = []
    for line in (run_dir / "traces.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        if d.get("signals") and d["qid"] in gold:
            d["gold"] = gold[d["qid"]]
            rows.append(d)
    return run, rows


def auc(ps: list[float], ys: list[bool]) -> float | None:
    """Area under the ROC curve (Mann-Whitney U / (n_pos * n_neg)); ties count one half."""
    pos = [p for p, y in zip(ps, ys) if y]
    neg = [p for p, y in zip(ps, ys) if not y]
    if not pos or not neg:
        return None
    return sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(pos) * len(neg))


def bootstrap_ci(correct: list[bool], n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    n = len(correct)
    accs = sorted(sum(correct[rng.randrange(n)] for _ in range(n)) / n for _ in range(n_boot))
    return accs[int(0.025 * n_boot)], accs[int(0.975 * n_boot) - 1]


def evaluate(rows: list[dict], names: tuple[str, ...]) -> dict:
    ps = [combine_log_odds([r["signals"][s] for s in names]) for r in rows]
    ys = [bool(r["gold"]) for r in rows]
    correct = [(p >= 0.5) == y for p, y in zip(ps, ys)]
    lo, hi = bootstrap_ci(correct)
    a = auc(ps, ys)
    return {
        "decision": "+".join(names),
        "n": len(rows),
        "accuracy": round(sum(correct) / len(rows), 4),
        "accuracy_95ci": [round(lo, 4), round(hi, 4)],
        "auc": None if a is None else round(a, 4),
        "mean_p_yes": round(sum(ps) / len(ps), 4),
    }


def analyse_rows(label: str, split: str, identity: dict | list, rows: list[dict]) -> dict:
    """The decision table of ``rows`` (traces with ``signals`` and ``gold``)."""
    if not rows:
        raise SystemExit(f"{label}: no traces with recorded signals; run sqa eval with --signals")
    have = [s for s in SIGNALS if all(s in r["signals"] for r in rows)]
    combos = [c for n in range(1, len(have) + 1) for c in itertools.combinations(have, n)]
    results = [evaluate(rows, c) for c in combos]
    ys = [bool(r["gold"]) for r in rows]
    secs = [r["timings"].get("total", 0.0) for r in rows]
    return {
        "run_dir": label,
        "split": split,
        "identity": identity,
        "n": len(rows),
        "majority_accuracy": round(sum(not y for y in ys) / len(ys), 4),
        "seconds_per_question": round(sum(secs) / len(secs), 2),
        "decisions": results,
    }


def analyse(run_dir: Path) -> dict:
    """The decision table of one run directory (all its questions)."""
    run, rows = load_run(run_dir)
    return analyse_rows(f"RUNS_DIR/{run_dir.name}", run["identity"]["split"], run["identity"], rows)


def analyse_choice(run_dirs: list[Path]) -> dict:
    """The decision table over the union of ``run_dirs`` without dev questions, each qid once.

    Raises SystemExit if a run is a dev run or nothing is left."""
    dev = set(split_qids()["dev"])
    seen: set[str] = set()
    rows: list[dict] = []
    identities, splits, dropped = [], [], 0
    for run_dir in run_dirs:
        run, run_rows = load_run(run_dir)
        if run["identity"]["split"] == "dev":
            raise SystemExit(
                f"{run_dir}: --choose must not be a dev run; the decision is chosen on train questions only"
            )
        identities.append(run["identity"])
        splits.append(run["identity"]["split"])
        for r in run_rows:
            if r["qid"] in dev or r["qid"] in seen:
                dropped += 1
                continue
            seen.add(r["qid"])
            rows.append(r)
    res = analyse_rows(
        " + ".join(f"RUNS_DIR/{p.name}" for p in run_dirs),
        "+".join(dict.fromkeys(splits)) + " (no dev questions)",
        identities,
        rows,
    )
    res["dropped_dev_or_repeated"] = dropped
    return res


def table(res: dict, chosen: str | None) -> Table:
    t = Table(
        title=f"{res['split']} ({res['n']} questions, majority {res['majority_accuracy']:.3f}) - {res['run_dir']}"
    )
    for c in ("decision", "accuracy", "95% CI", "AUC", "mean P(yes)"):
        t.add_column(c, justify="left" if c == "decision" else "right")
    for d in sorted(res["decisions"], key=lambda d: (-d["accuracy"], -(d["auc"] or 0))):
        mark = " *" if d["decision"] == chosen else ""
        t.add_row(
            d["decision"] + mark,
            f"{d['accuracy']:.3f}",
            f"{d['accuracy_95ci'][0]:.3f}-{d['accuracy_95ci'][1]:.3f}",
            "-" if d["auc"] is None else f"{d['auc']:.3f}",
            f"{d['mean_p_yes']:.3f}",
        )
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--choose",
        type=Path,
        nargs="+",
        required=True,
        help="run directories (train-2061 or train) the decision is chosen on; dev questions are dropped",
    )
    ap.add_argument("--report", type=Path, nargs="*", default=[], help="further run directories, reported only")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    choose = analyse_choice(args.choose)
    best = max(choose["decisions"], key=lambda d: (d["accuracy"], d["auc"] or 0))
    reports = [analyse(p) for p in args.report]
    con = Console()
    for r in [choose, *reports]:
        con.print(table(r, best["decision"]))
    # run folders by name only (RUNS_DIR: wherever they were decompressed): no machine path in results
    command = (
        "python -m experiments.decision --choose "
        + " ".join(f"RUNS_DIR/{p.name}" for p in args.choose)
        + (" --report " + " ".join(f"RUNS_DIR/{p.name}" for p in args.report) if args.report else "")
    )
    out = {
        "command": command,
        "chosen_on": [f"RUNS_DIR/{p.name}" for p in args.choose],
        "chosen": best["decision"],
        "runs": [choose, *reports],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    con.print(
        f"chosen on {choose['split']}: [bold]{best['decision']}[/bold] (accuracy {best['accuracy']:.3f}, "
        f"AUC {best['auc']}) -> {args.out}"
    )


if __name__ == "__main__":
    main()
