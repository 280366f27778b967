"""Out-of-fold accuracy of a few answer-head feature sets on a features file, without the model:
the quick check of "does retrieval pay" as the features grow (``sqa train-head`` runs all 11
candidate sets and loads the model, which takes 10+ minutes at 1,000+ questions on 2 cores).

    python -m experiments.head_cv --features runs/head2 --limit 1177
    python -m experiments.head_cv --features bench/results/features/top3      # the xz parts of commit 81a0faf

Writes experiments/work/head_cv.json unless ``--out`` names a file (the recorded entries:
``--out bench/results/head_cv.json``). The feature dumps the recorded entries read left the tree;
bench/results/features.md says how to get them back from history.

``--features``: a directory with ``train-2061.jsonl`` (a torn last line is ignored) or with
``train-2061.part*.jsonl.xz`` files. The first ``--limit`` train-2061 questions in release order
without the 6 demonstration questions (the order ``sqa train-head`` and experiments/head_extract.py use);
fewer if the file holds fewer. Folds, C grid and the choice rule are ``sqa.facts.training``'s: 5 folds
grouped by StrategyQA term, C by grouped CV; every set is compared with ``plain`` (no retrieval)
on the same questions, paired (``sqa.steps.head.paired_difference``). Writes one JSON entry
per run, keyed by ``--name``, into ``--out`` (other entries kept).

``--train-also DIR``: an augmentation experiment. Each outer fold's head is also trained on DIR's
records of the same training-fold questions (e.g. the oracle-facts features: does a head that has
seen the right facts read retrieved ones better?); it still predicts from ``--features`` only, so
the rows stay comparable with ``plain`` and ``--versus``. C is chosen per outer fold on the
augmented training rows (grouped by term, so a question's two rows share a fold).
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def load_records(features: Path, split: str = "train-2061") -> list[dict]:
    """Feature records of ``split`` in file order: the xz parts (``SPLIT.partSSSS-EEEE.jsonl.xz``)
    in name order, else ``SPLIT.jsonl.xz``, else ``SPLIT.jsonl``, each up to its first torn or
    invalid line."""
    from sqa.facts.features import read_done

    parts = sorted(features.glob(f"{split}.part*.jsonl.xz")) or sorted(features.glob(f"{split}.jsonl.xz"))
    if not parts:
        return list(read_done(features / f"{split}.jsonl").values())
    lines = []
    for p in parts:
        with lzma.open(p, "rt", encoding="utf-8") as f:
            lines.extend(f)
    out = []
    for line in lines:
        if not line.endswith("\n"):
            break
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


def first_questions(limit: int, records: list[dict]) -> list[str]:
    """The qids of the first ``limit`` train-2061 questions in release order without the 6
    demonstration questions, stopping at the first one missing from any of ``records`` (qid ->
    record maps, e.g. two feature sets to be paired on the same questions)."""
    from sqa.facts.prompt import demo_qids
    from sqa.strategyqa import load_questions

    demos = demo_qids()
    qids = []
    for q in [q.qid for q in load_questions("train-2061") if q.qid not in demos][:limit]:
        if not all(q in r for r in records):
            break
        qids.append(q)
    return qids


# read-outs derived from the stored ones (experiments; a shipped head reads only stored read-outs)
DERIVED = {
    "fmean": "the mean of the states after 1..5 facts (fewer where fewer facts were found)",
}


def add_derived(records: list[dict]) -> None:
    """Add the ``DERIVED`` states to decoded records, in place."""
    for r in records:
        st = r["states"]
        after = [np.asarray(st[k], dtype=np.float32) for k in ("f1", "f2", "f3", "f4", "f5") if k in st]
        plain = np.asarray(st["plain"], dtype=np.float32)
        st["fmean"] = np.mean(after, axis=0) if after else plain


def spec(name: str):
    """The feature set ``name``: a ``sqa train-head`` candidate (``plain``, ``fN`` or ``plain+fN``;
    the facts sets with the retrieval scores), or ``STATES/LOG_ODDS[/r]`` with comma lists of
    read-outs (stored or ``DERIVED``) and ``/r`` for the retrieval scores, e.g.
    ``plain,fmean/plain,f1,f2,f3,f4,f5/r``."""
    from sqa.facts.head import SCALARS, FeatureSpec
    from sqa.facts.training import candidate_specs

    if "/" in name:
        states, lo, *rest = name.split("/")
        return FeatureSpec(
            tuple(states.split(",")), tuple(x for x in lo.split(",") if x), SCALARS if rest == ["r"] else ()
        )

    states = tuple(name.split("+"))
    n = max([int(s[1:]) for s in states if s[:1] == "f" and s[1:].isdigit()], default=1)
    found = [s for s in candidate_specs(n) if s.states == states]
    if not found:
        raise SystemExit(f"--specs: no candidate feature set reads {name!r}; use plain, fN or plain+fN")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, type=Path)
    ap.add_argument("--limit", type=int, default=2055)
    ap.add_argument(
        "--specs",
        default="plain,plain+f3,plain+f5",
        help="comma list of candidate names, or (when any has a '/') a ';' list of "
        "STATES/LOG_ODDS[/r] sets; see spec()",
    )
    ap.add_argument(
        "--versus",
        default=None,
        metavar="DIR:SPEC",
        help="also compare every set, paired on the same questions and folds, with SPEC on the "
        "features in DIR (e.g. bench/results/features/top3:plain+f5: another fact selection)",
    )
    ap.add_argument(
        "--train-also",
        default=None,
        type=Path,
        metavar="DIR",
        help="also train every fold's head on DIR's features of the same training questions "
        "(scored on --features only); see the module doc",
    )
    ap.add_argument("--name", default=None, help="entry name in --out (default: features dir name + n)")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "work" / "head_cv.json")
    a = ap.parse_args(argv)
    from sqa.facts.head import paired_difference
    from sqa.strategyqa import questions_by_id
    from sqa.facts.training import Dataset, cross_validate

    recs = {r["qid"]: r for r in load_records(a.features)}
    other = None
    if a.versus:
        vdir, vspec = a.versus.rsplit(":", 1)
        other = {r["qid"]: r for r in load_records(Path(vdir))}
    extra = {r["qid"]: r for r in load_records(a.train_also)} if a.train_also else None
    qids = first_questions(a.limit, [m for m in (recs, other, extra) if m is not None])
    t0 = time.perf_counter()
    ds = Dataset.build([recs[q] for q in qids], questions_by_id())
    custom = "/" in a.specs
    if custom:
        add_derived(ds.records)
    rows = cross_validate(
        ds, [spec(s) for s in a.specs.split(";" if custom else ",")], log=lambda m: print(m, file=sys.stderr)
    )
    if extra is not None:
        from sklearn.metrics import roc_auc_score

        from sqa.facts.head import FeatureSpec, accuracy_interval, out_of_fold

        eds = Dataset.build([extra[q] for q in qids], questions_by_id())
        if custom:
            add_derived(eds.records)
        for r in rows:
            if r["spec"]["states"] == ["plain"]:
                continue  # the no-retrieval baseline stays as it is
            sp = FeatureSpec.from_dict(r["spec"])
            p, _ = out_of_fold(ds.matrix(sp), ds.y, ds.groups, extra=eds.matrix(sp))
            acc, lo, hi = accuracy_interval((p >= 0.5) == ds.y.astype(bool))
            r.update(
                {
                    "name": r["name"] + f" (trained also on {a.train_also.name})",
                    "C": "per fold",
                    "accuracy": round(acc, 4),
                    "interval95": [round(lo, 4), round(hi, 4)],
                    "auc": round(float(roc_auc_score(ds.y, p)), 4),
                    "yes_rate": round(float(np.mean(p >= 0.5)), 4),
                    "oof": p.tolist(),
                    "train_also": str(a.train_also),
                }
            )
            r.pop("log_loss", None)
    y = ds.y.astype(bool)
    plain = next(r for r in rows if r["spec"]["states"] == ["plain"])
    base = (np.asarray(plain["oof"]) >= 0.5) == y
    versus = None
    if other is not None:
        ods = Dataset.build([other[q] for q in qids], questions_by_id())
        if "/" in vspec:
            add_derived(ods.records)
        assert (ods.y == ds.y).all() and (ods.groups == ds.groups).all()  # same questions, same folds
        vrow = cross_validate(ods, [spec(vspec)], log=lambda m: print(m, file=sys.stderr))[0]
        versus = (np.asarray(vrow["oof"]) >= 0.5) == y
        print(f"versus {vdir} {vrow['name']}: {vrow['accuracy']:.3f} {vrow['interval95']}")
    for r in rows:
        d, lo, hi = paired_difference((np.asarray(r["oof"]) >= 0.5) == y, base)
        r["minus_plain"] = {"difference": round(d, 4), "interval95": [round(lo, 4), round(hi, 4)]}
        line = f"{r['name']:36s} {r['accuracy']:.3f} {r['interval95']}  minus plain {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        if versus is not None:
            d, lo, hi = paired_difference((np.asarray(r["oof"]) >= 0.5) == y, versus)
            r["minus_versus"] = {
                "versus": a.versus,
                "versus_accuracy": vrow["accuracy"],
                "difference": round(d, 4),
                "interval95": [round(lo, 4), round(hi, 4)],
            }
            line += f"  minus versus {d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        del r["oof"]
        print(line)
    meta_path = a.features / "meta.json"
    entry = {
        "command": " ".join(["python", "-m", "experiments.head_cv", *(argv if argv is not None else sys.argv[1:])]),
        "n": len(qids),
        "terms": len(set(ds.groups.tolist())),
        "features_meta": json.loads(meta_path.read_text()) if meta_path.exists() else None,
        "seconds": round(time.perf_counter() - t0, 1),
        "rows": rows,
    }
    out = json.loads(a.out.read_text()) if a.out.exists() else {}
    out[a.name or f"{a.features.name}-n{len(qids)}"] = entry
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1).replace(str(ROOT) + "/", "") + "\n")
    shown = a.out.resolve()
    print(
        f"wrote {shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown} ({len(qids)} questions)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
