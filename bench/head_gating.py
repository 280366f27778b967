"""Does the answer head gain when it can weigh the facts by how good the retrieval looked?
Out-of-fold accuracy of low-capacity and gated feature sets on stored head features, no model.

    python bench/head_gating.py --features bench/results/features/top3 --limit 2055

The shipped facts head is one logistic regression over the no-evidence state, the state after the
5th fact, both yes/no log-odds and the three retrieval scores (``sqa.facts.head.SCALARS``), so
the facts' read-outs count the same whether retrieval found the topic or not. The sets here:

- ``plain``: the no-retrieval head (state + log-odds under the no-evidence prompt), the baseline;
- ``plain+f5``: the shipped facts head's features;
- ``lo:plain`` and ``lo:plain,f1..f5 +r``: log-odds only (1 and 9 features), no states;
- ``plain + lo:f1..f5 +r``: the no-evidence state, the log-odds after each fact, the scores;
- ``plain + (f5-plain) + lo +r``: the change the facts make to the state, instead of the state;
- ``plain + lo +r + (lo:fi - lo:plain) x r``: the same plus each fact's change of the yes/no
  log-odds multiplied by each retrieval score (a gate: a change counts more when retrieval scored
  high; 15 interaction features).

Folds, the C grid and its choice are ``sqa.train_head.cross_validate``'s (5 folds grouped by
StrategyQA term; C chosen once per set by grouped CV, then out-of-fold predictions with it); every
set is paired with ``plain`` on the same questions (``sqa.steps.head.paired_difference``).
Writes ``--out`` (default bench/results/head_gating.json), one entry per ``--name``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def feature_sets(records: list[dict]) -> dict[str, np.ndarray]:
    """name -> feature matrix (n questions x d) of decoded feature records (see the module doc)."""
    from sqa.facts.head import SCALARS, scalar_features

    def state(k):
        return np.stack([np.asarray(r["states"].get(k, r["states"]["plain"]), dtype=np.float32) for r in records])

    def lo(k):  # a question with fewer than 5 facts keeps its last read-out's log-odds
        out = []
        for r in records:
            d = r["log_odds"]
            last = max((int(x[1:]) for x in d if x[:1] == "f" and x[1:].isdigit() and int(x[1:]) <= int(k[1:])),
                       default=None) if k != "plain" else None
            out.append(float(d[k] if k in d else d[f"f{last}"] if last else d["plain"]))
        return np.array(out)

    plain = state("plain")
    f5 = state("f5")
    los = np.stack([lo(k) for k in ("plain", "f1", "f2", "f3", "f4", "f5")], axis=1)
    scores = np.array([[scalar_features(r)[k] for k in SCALARS] for r in records])
    deltas = los[:, 1:] - los[:, :1]
    gates = np.hstack([deltas * scores[:, j:j + 1] for j in range(scores.shape[1])])
    return {
        "plain": np.hstack([plain, los[:, :1]]),
        "plain+f5": np.hstack([plain, f5, los[:, [0, 5]], scores]),
        "lo:plain": los[:, :1],
        "lo:plain,f1..f5 +r": np.hstack([los, scores]),
        "plain + lo:f1..f5 +r": np.hstack([plain, los, scores]),
        "plain + (f5-plain) + lo +r": np.hstack([plain, f5 - plain, los, scores]),
        "plain + lo +r + (lo:fi - lo:plain) x r": np.hstack([plain, los, scores, gates]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", type=Path, default=ROOT / "bench" / "results" / "features" / "top3")
    ap.add_argument("--limit", type=int, default=2055)
    ap.add_argument("--name", default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "head_gating.json")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from head_cv import first_questions, load_records  # bench/ is on sys.path when this runs as a script

    from sqa.facts.head import accuracy_interval, choose_c, out_of_fold, paired_difference
    from sqa.strategyqa import questions_by_id
    from sqa.facts.training import Dataset

    recs = {r["qid"]: r for r in load_records(a.features)}
    qids = first_questions(a.limit, [recs])
    ds = Dataset.build([recs[q] for q in qids], questions_by_id())
    y = ds.y.astype(bool)
    t0 = time.perf_counter()
    rows, base = [], None
    for name, X in feature_sets(ds.records).items():
        C = choose_c(X, ds.y, ds.groups)
        p, _ = out_of_fold(X, ds.y, ds.groups, fixed_c=C)
        correct = (p >= 0.5) == y
        base = correct if base is None else base
        acc, lo, hi = accuracy_interval(correct)
        d, dlo, dhi = paired_difference(correct, base)
        rows.append({"name": name, "n_features": int(X.shape[1]), "C": C, "accuracy": round(acc, 4),
                     "interval95": [round(lo, 4), round(hi, 4)], "yes_rate": round(float(np.mean(p >= 0.5)), 4),
                     "minus_plain": {"difference": round(d, 4), "interval95": [round(dlo, 4), round(dhi, 4)]}})
        print(f"{name:42s} d={X.shape[1]:5d} C={C:.3g} {acc:.3f} [{lo:.3f}, {hi:.3f}]  minus plain {d:+.3f} "
              f"[{dlo:+.3f}, {dhi:+.3f}]", flush=True)
    entry = {"command": " ".join(["python", "bench/head_gating.py", *(argv if argv is not None else sys.argv[1:])]),
             "features": str(a.features.resolve().relative_to(ROOT)) if a.features.resolve().is_relative_to(ROOT)
             else a.features.name, "n": len(qids), "terms": len(set(ds.groups.tolist())),
             "seconds": round(time.perf_counter() - t0, 1), "rows": rows}
    out = json.loads(a.out.read_text()) if a.out.exists() else {}
    out[a.name or f"{a.features.name}-n{len(qids)}"] = entry
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {a.out.name} ({len(qids)} questions)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
