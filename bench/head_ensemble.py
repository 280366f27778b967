"""Out-of-fold accuracy of answer heads averaged over several fact views of the same questions
(an ensemble of log-odds), without the model. Each view is one ``bench/head_cv.py`` feature set on
one features directory; every view's head is cross-fitted on the same term-grouped folds
(``sqa.train_head.cross_validate``), then the views' out-of-fold log-odds are averaged for each
combination and compared, paired, with the first view (no retrieval). Writes one entry, keyed by
``--name``, into bench/results/head_ensemble.json.

    python bench/head_ensemble.py --limit 600 --name views-n600 \\
        --view P=bench/results/features/top3:plain/plain \\
        --view S=bench/results/features/top3:plain,f5/plain,f5/r \\
        --view GR=bench/results/features/generated:plain,g3,f5/plain,g3,f5/r \\
        --combo S --combo GR --combo S+GR

``--from N``: also report every combination on questions N.. only (out-of-fold over all of them;
a check on questions that took no part in choosing a combination). Questions: the first
``--limit`` train-2061 questions in release order without the 6 demonstration questions, up to
the first one a view lacks. The ensemble is a plain mean of the views' log-odds (no weights
fitted), so it adds no parameter to the cross-fitting.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from head_cv import ROOT, add_derived, first_questions, load_records, spec  # bench/ is on sys.path when this runs as a script

RESULTS = ROOT / "bench" / "results" / "head_ensemble.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--view", action="append", required=True, metavar="NAME=DIR:SPEC")
    ap.add_argument("--combo", action="append", required=True, metavar="NAME+NAME...")
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--from", dest="start", type=int, default=None)
    ap.add_argument("--name", required=True)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from sqa.facts.head import accuracy_interval, paired_difference
    from sqa.strategyqa import questions_by_id
    from sqa.facts.training import Dataset, cross_validate

    views = {}
    for v in a.view:
        name, rest = v.split("=", 1)
        d, s = rest.rsplit(":", 1)
        views[name] = (Path(d), s)
    recs = {k: {r["qid"]: r for r in load_records(d)} for k, (d, _) in views.items()}
    qids = first_questions(a.limit, list(recs.values()))
    by_id = questions_by_id()
    log_odds, rows, y = {}, {}, None
    for k, (d, s) in views.items():
        ds = Dataset.build([recs[k][q] for q in qids], by_id)
        if "/" in s:
            add_derived(ds.records)
        row = cross_validate(ds, [spec(s)], log=lambda m: None)[0]
        p = np.clip(np.asarray(row["oof"]), 1e-6, 1 - 1e-6)
        log_odds[k] = np.log(p / (1 - p))
        y = ds.y.astype(bool)
        print(f"view {k}: {d} {s}: {row['accuracy']:.3f}", file=sys.stderr)
    def compare(ok, base):
        """(rounded {accuracy, interval95, minus}, the accuracy triple, the paired-difference triple)."""
        acc, lo, hi = accuracy_interval(ok)
        d, dlo, dhi = paired_difference(ok, base)
        return ({"accuracy": round(acc, 4), "interval95": [round(lo, 4), round(hi, 4)],
                 "minus": {"difference": round(d, 4), "interval95": [round(dlo, 4), round(dhi, 4)]}},
                (acc, lo, hi), (d, dlo, dhi))

    first = next(iter(views))
    base = (log_odds[first] >= 0) == y
    sl = slice(a.start, None) if a.start is not None else None
    for combo in a.combo:
        z = np.mean([log_odds[k] for k in combo.split("+")], axis=0)
        ok = (z >= 0) == y
        row, (acc, lo, hi), (d, dlo, dhi) = compare(ok, base)
        rows[combo] = {"accuracy": row["accuracy"], "interval95": row["interval95"],
                       "yes_rate": round(float(np.mean(z >= 0)), 4), f"minus_{first}": row["minus"]}
        line = f"{combo:14s} {acc:.3f} [{lo:.3f}, {hi:.3f}]  minus {first} {d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
        if sl is not None:
            row, (acc, _, _), (d, dlo, dhi) = compare(ok[sl], base[sl])
            rows[combo][f"from_{a.start}"] = {"n": int(len(ok[sl])), "accuracy": row["accuracy"],
                                             "interval95": row["interval95"], f"minus_{first}": row["minus"]}
            line += f"  | from {a.start} (n={len(ok[sl])}): {acc:.3f}, minus {first} {d:+.3f} [{dlo:+.3f}, {dhi:+.3f}]"
        print(line)
    entry = {"command": " ".join(["python", "bench/head_ensemble.py", *(argv if argv is not None else sys.argv[1:])]),
             "n": len(qids), "views": {k: f"{d}:{s}" for k, (d, s) in views.items()},
             "ensemble": "mean of the views' out-of-fold log-odds", "rows": rows}
    out = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    out[a.name] = entry
    RESULTS.write_text(json.dumps(out, indent=1).replace(str(ROOT) + "/", "") + "\n")
    print(f"wrote bench/results/head_ensemble.json ({len(qids)} questions)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
