"""How many of the shown facts come from the annotated evidence paragraphs, for every kept feature
set: a second proxy beside experiments/fact_selection.py's new-information recall, measured without the
model from the kept feature dumps. Writes experiments/work/gold_paragraph_share.json, or ``--out``
(the recorded run: bench/results/gold_paragraph_share.json).

    git archive 81a0faf bench/results/features | tar -x      # the dumps, from history (bench/results/features.md)
    python -m experiments.gold_paragraph_share [--limit 1000] [--features DIR]

Feature sets missing from ``--features`` (default bench/results/features/, git-ignored) are skipped
with a note.

Why: the word-coverage proxy has not ordered the head's gains (bench/results/notes.md: the expanded
query, the learned re-ranker and its oracle ceiling all covered more of the annotated facts' words
than the shipped facts and gained little or nothing, while the paragraph oracle covered fewer and
gained most). Per feature set and question (train-2061 in release order, the first ``--limit`` or
as many as the set holds; questions without annotated evidence left out):

- ``gold_fact_share``: the share of the shown facts that are sentences of one of the question's
  annotated evidence paragraphs (any annotator; ``fact_selection.gold_paragraph_ids``);
- ``any_gold_fact``: whether at least one shown fact is;
- ``train_fact_share``: the share that are train-2061 annotated facts of other questions;
- ``facts``: facts shown (the record's ``facts``: for ``generated/`` also the model's own lines);
- ``new_info_recall``: experiments/fact_selection.py's proxy of the same shown facts (questions whose
  annotated facts add no word to the question left out of its mean), so both proxies come from
  one command on the same questions.

Rows are given on each set's own questions and on the first 600, which every set holds, so the
sets compare on the same questions. The head's out-of-fold gain over no retrieval is quoted
beside each row from bench/results/head_cv.json (the entry named), not recomputed.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from pathlib import Path

import numpy as np

from sqa.strategyqa import load_questions

from experiments.fact_selection import gold_paragraph_ids, new_info_recall

ROOT = Path(__file__).resolve().parents[1]
FEATURES = ROOT / "bench" / "results" / "features"
HEAD_CV = ROOT / "bench" / "results" / "head_cv.json"
# feature set -> the head_cv.json entry whose ROW (the plain+f5 head, the comparison every entry
# plans; for generated/ read after the model's own lines) is quoted beside it
HEAD = {
    "top3": "top3-n2055",
    "minilm": "minilm-n600",
    "steps": "steps-n600",
    "generated": "generated-n600",
    "expanded": "expanded-n600",
    "rerank": "rerank-n1000",
    "rerank-ceiling": "rerank-ceiling-n1000",
    "oracle-paragraphs": "oracle-paragraphs-n1000",
    "ceiling-paragraphs": "ceiling-paragraphs-n1000",
    "steps-gold": "steps-gold-n1000",
}
ROW = "plain+f5 lo:plain+f5 +retrieval"


def records(name: str, limit: int, features: Path = FEATURES):
    """The first ``limit`` train-2061 records of a kept feature set, in part order."""
    n = 0
    for part in sorted((features / name).glob("train-2061.part*.jsonl.xz")):
        with lzma.open(part, "rt", encoding="utf-8") as fh:
            for line in fh:
                if n >= limit:
                    return
                n += 1
                yield json.loads(line)


def shares(rec: dict, gold: set[str]) -> tuple[float, bool, float, int]:
    """(gold_fact_share, any_gold_fact, train_fact_share, facts) of one record (see the module doc)
    against ``gold``, the question's annotated evidence IDs."""
    facts = rec["facts"]
    if not facts:
        return 0.0, False, 0.0, 0
    is_gold = [f["source"] in ("wikipedia", "oracle-paragraphs") and f["ref"] in gold for f in facts]
    return (
        float(np.mean(is_gold)),
        any(is_gold),
        float(np.mean([f["source"] == "train-facts" for f in facts])),
        len(facts),
    )


def head_gain(entries: dict, entry: str) -> dict | None:
    """The accuracy and paired gain over no retrieval of ``ROW`` in ``entries[entry]`` (head_cv.json
    read), None when either is missing; at that entry's own number of questions."""
    d = entries.get(entry)
    for r in (d or {}).get("rows", []):
        if r["name"] == ROW:
            return {"entry": entry, "questions": d["n"], "accuracy": r["accuracy"], "minus_plain": r["minus_plain"]}
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument(
        "--features", type=Path, default=FEATURES, help="the feature dumps (default bench/results/features/)"
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "experiments" / "work" / "gold_paragraph_share.json",
        help="results file (default experiments/work/gold_paragraph_share.json)",
    )
    a = ap.parse_args()
    RESULTS = a.out
    questions = {q.qid: q for q in load_questions("train-2061")}
    gold = {qid: gold_paragraph_ids(q) for qid, q in questions.items() if q.evidence}
    entries = json.loads(HEAD_CV.read_text(encoding="utf-8"))
    rows = []
    for name in HEAD:
        if not (a.features / name).is_dir():
            print(f"note: no feature set {name}/ in {a.features}: skipped", file=sys.stderr)
            continue
        per, recall = {}, {}
        for r in records(name, a.limit, a.features):
            q = questions[r["qid"]]
            if gold.get(q.qid):
                per[q.qid] = shares(r, gold[q.qid])
                recall[q.qid] = new_info_recall(q.question, list(q.facts), [f["text"] for f in r["facts"]])
        if not per:
            print(f"error: no records in {a.features / name}", file=sys.stderr)
            return 2
        first600 = list(per)[:600]
        row = {"features": name, "questions": len(per)}
        for label, qids in (("own", list(per)), ("first600", first600)):
            v = np.array([per[q] for q in qids], dtype=float)
            row[label] = {
                "questions": len(qids),
                "gold_fact_share": round(float(v[:, 0].mean()), 3),
                "any_gold_fact": round(float(v[:, 1].mean()), 3),
                "train_fact_share": round(float(v[:, 2].mean()), 3),
                "facts": round(float(v[:, 3].mean()), 2),
                "new_info_recall": round(float(np.mean([recall[q] for q in qids if recall[q] is not None])), 3),
            }
        row["head"] = head_gain(entries, HEAD[name])
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {
        "split": "train-2061",
        "command": f"python -m experiments.gold_paragraph_share --limit {a.limit}",
        "selection": "each kept feature set's records in release order (the 6 demonstration questions left out)",
        "gold": "the union of every annotator's evidence IDs (sqa.eval.metrics.annotator_evidence)",
        "rows": rows,
    }
    if not rows:
        print(
            f"error: no feature set in {a.features}; get them with `git archive 81a0faf bench/results/features | tar -x`",
            file=sys.stderr,
        )
        return 2
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"-> {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
