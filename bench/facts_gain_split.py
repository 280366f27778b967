"""Where the facts head gains over the no-retrieval head: out-of-fold correctness of ``plain`` and
``plain+f3`` (bench/head_cv.py's sets) split by what the first 3 facts shown were, plus how often
other train-fact choices would show a fact of a question on the same StrategyQA term (an
annotation the system never reads; it only explains the split). Writes
bench/results/facts_gain_split.json.

    python bench/facts_gain_split.py --features bench/results/features/top3 --limit 1000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", type=Path, default=ROOT / "bench" / "results" / "features" / "top3")
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "facts_gain_split.json")
    a = ap.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    import bm25s
    import Stemmer

    from fact_selection import gold_paragraph_ids
    from head_cv import load_records, spec
    from sqa.facts.sources import AnnotatedFacts
    from sqa.facts.prompt import demo_qids
    from sqa.strategyqa import load_questions, questions_by_id
    from sqa.facts.training import Dataset, cross_validate

    qs = load_questions("train-2061")
    byid, term = questions_by_id(), {q.qid: q.term for q in qs}
    order = [q.qid for q in qs if q.qid not in demo_qids()][: a.limit]
    recs = {r["qid"]: r for r in load_records(a.features)}
    ds = Dataset.build([recs[q] for q in order if q in recs], byid)
    rows = cross_validate(ds, [spec("plain"), spec("plain+f3")], log=lambda m: None)
    y = ds.y.astype(bool)
    plain, facts = ((np.asarray(r["oof"]) >= 0.5) == y for r in rows)
    gold_wiki, same_term = [], []
    for r in ds.records:
        q = byid[r["qid"]]
        gold = gold_paragraph_ids(q)
        first3 = r["facts"][:3]  # what the f3 read-out has seen: train 1, Wikipedia 1, train 2
        gold_wiki.append(any(f["source"] == "wikipedia" and f["ref"] in gold for f in first3))
        same_term.append(any(f["source"] == "train-facts" and term.get(f["ref"]) == q.term for f in first3))
    split = []
    for name, m in (("a Wikipedia fact from an annotated evidence paragraph", np.array(gold_wiki)),
                    ("no such Wikipedia fact", ~np.array(gold_wiki)),
                    ("a train fact of a question on the same term", np.array(same_term)),
                    ("no such train fact", ~np.array(same_term))):
        split.append({"first_3_facts_hold": name, "n": int(m.sum()), "plain": round(float(plain[m].mean()), 4),
                      "plain+f3": round(float(facts[m].mean()), 4),
                      "difference": round(float(facts[m].mean() - plain[m].mean()), 4)})
        print(f"{name:56s} n={m.sum():4d} plain {plain[m].mean():.3f} facts {facts[m].mean():.3f} "
              f"{facts[m].mean() - plain[m].mean():+.3f}")

    # how often other train-fact choices would show a same-term fact (no model needed)
    af, st = AnnotatedFacts(qs), Stemmer.Stemmer("english")
    withf = [q for q in qs if q.facts]
    bm = bm25s.BM25()
    bm.index(bm25s.tokenize([q.question for q in withf], stopwords="en", stemmer=st, show_progress=False),
             show_progress=False)
    counts = {"a same-term train question exists": 0, "shipped: the 2 best facts by BM25 over all train facts": 0,
              "the nearest train question (BM25 over questions) is on the same term": 0,
              "the 2 best facts among the 3 nearest questions' facts": 0}
    keys = list(counts)
    for qid in ds.qids:
        q = byid[qid]
        counts[keys[0]] += any(o.term == q.term and o.qid != q.qid for o in qs)
        counts[keys[1]] += any(term[f.ref] == q.term for f in af.select(q.question, 2, exclude_qids=[q.qid]))
        idx, _ = bm.retrieve(bm25s.tokenize([q.question], stopwords="en", stemmer=st, show_progress=False), k=5,
                             show_progress=False)
        norm = q.question.strip().lower()
        near = [withf[int(i)] for i in idx[0] if withf[int(i)].qid != q.qid and withf[int(i)].question.strip().lower() != norm]
        counts[keys[2]] += bool(near) and near[0].term == q.term
        nearest = {o.qid for o in near[:3]}
        fc = [f for f in af.select(q.question, 40, exclude_qids=[q.qid]) if f.ref in nearest][:2]
        counts[keys[3]] += any(term[f.ref] == q.term for f in fc)
    for k, v in counts.items():
        print(f"{k:70s} {v}/{len(ds.qids)}")
    out = {"command": " ".join(["python", "bench/facts_gain_split.py", *(argv if argv is not None else sys.argv[1:])]),
           "n": len(ds.qids), "features_meta": json.loads((a.features / "meta.json").read_text()),
           "oof": {r["name"]: r["accuracy"] for r in rows}, "split": split,
           "same_term_train_fact_shown": counts}
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {a.out.resolve().relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
