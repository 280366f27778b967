"""Facts retrieved with a query the reader model expanded (the question + its generated lines),
measured without the model: new-information recall of the annotated facts (as in
``bench/fact_selection.py``), paired with the shipped facts on the same questions. Writes
bench/results/expanded_query_proxy.json (about 20 s on 2 cores).

    python bench/expanded_query_proxy.py --index-dir INDEX_DIR [--limit 600]

Questions: the first ``--limit`` records of bench/results/features/generated (train-2061, the
order of the shipped top3 features; the generated lines are the model's greedy continuation of the
facts prompt, made by ``bench/generated_facts_extract.py`` without retrieval or annotated facts).
Variants, 5 facts each unless said:

- ``shipped``: the top3 features' facts (the question as the query);
- ``generated``: the model's generated lines alone (about 3; not retrieved);
- ``shipped+generated``: both (about 8 lines);
- ``expanded``: the shipped selection (``WikipediaFacts`` + ``AnnotatedFacts``, interleaved) with
  the expanded query for the paragraphs, the sentences and the train facts — what
  ``bench/expanded_facts_extract.py`` reads;
- ``expanded-sentences``: the question's own top-3 paragraphs, sentences and train facts ranked by
  the expanded query;
- ``per-line``: for each generated line, the best sentence of the top-3 paragraphs for the question
  + that line, then the shipped facts to fill 5.

The interval is a 95 % normal interval of the paired per-question difference with ``shipped``.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

from sqa.facts.features import FactSelector, FactSettings
from sqa.pipeline import index_info, make_retriever, open_index
from sqa.facts.prompt import interleave
from sqa.facts.sources import default_annotated_facts, rank_sentences
from sqa.strategyqa import load_questions

from expanded_facts_extract import expanded_facts  # bench/ is on sys.path when this runs as a script
from fact_selection import new_info_recall
from head_cv import load_records

BENCH = Path(__file__).parent
RESULTS = BENCH / "results" / "expanded_query_proxy.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--limit", type=int, default=600)
    a = ap.parse_args()
    gen_dir = BENCH / "results" / "features" / "generated"
    s = FactSettings.from_dict(json.loads((gen_dir / "meta.json").read_text())["facts"])
    recs = load_records(gen_dir, "train-2061")[: a.limit]
    base = {r["qid"]: r for r in load_records(BENCH / "results" / "features" / "top3", "train-2061")}
    questions = {q.qid: q for q in load_questions("train-2061")}
    retriever = make_retriever(open_index(a.index_dir), "ours")
    annotated = default_annotated_facts()
    selector = FactSelector(retriever, s, annotated)
    names = ["shipped", "generated", "shipped+generated", "expanded", "expanded-sentences", "per-line"]
    scores: dict[str, list] = {n: [] for n in names}
    counts: dict[str, list] = {n: [] for n in names}
    for r in recs:
        q = questions[r["qid"]]
        lines = [f["text"] for f in r["facts"] if f["source"] == "generated"]
        shipped = [f["text"] for f in base[q.qid]["facts"]]
        expanded, _, query = expanded_facts(selector, q, r)
        own = retriever.retrieve(q.question, [], s.k)[: s.sentence_paragraphs]
        per_line: list[str] = []
        for line in lines:
            hits = retriever.retrieve(f"{q.question} {line}", [], s.sentence_paragraphs)
            best = [f.text for f in rank_sentences(f"{line} {q.question}", hits, 3, s.max_words) if f.text not in per_line]
            per_line += best[:1]
        shown = {
            "shipped": shipped,
            "generated": lines,
            "shipped+generated": shipped + lines,
            "expanded": [f.text for f in expanded],
            "expanded-sentences": [f.text for f in interleave(annotated.select(query, s.train, exclude_qids=[q.qid],
                                                                              exclude_text=q.question),
                                                           rank_sentences(query, own, s.wiki, s.max_words))],
            "per-line": (per_line + [t for t in shipped if t not in per_line])[:5],
        }
        for n in names:
            scores[n].append(new_info_recall(q.question, list(q.facts), shown[n]))
            counts[n].append(len(shown[n]))
    keep = [i for i, x in enumerate(scores["shipped"]) if x is not None]
    ref = np.array([scores["shipped"][i] for i in keep])
    rows = []
    for n in names:
        x = np.array([scores[n][i] for i in keep])
        d = x - ref
        half = 1.96 * d.std(ddof=1) / np.sqrt(len(d)) if n != "shipped" else 0.0
        rows.append({"facts": n, "new_info_recall": round(float(x.mean()), 4),
                     "se": round(float(x.std(ddof=1) / np.sqrt(len(x))), 4),
                     "minus_shipped": round(float(d.mean()), 4),
                     "minus_shipped_95": [round(float(d.mean() - half), 4), round(float(d.mean() + half), 4)],
                     "mean_lines": round(float(np.mean([counts[n][i] for i in keep])), 2)})
        print(rows[-1], flush=True)
    out = {"split": "train-2061", "questions": len(keep), "selection": f"first {a.limit} records of "
           "bench/results/features/generated (questions whose facts add no word left out)",
           "index": index_info(a.index_dir), "settings": s.to_dict(),
           "command": f"python bench/expanded_query_proxy.py --index-dir INDEX_DIR --limit {a.limit}",
           "metric": "new-information recall of the annotated facts (bench/fact_selection.py)", "rows": rows}
    RESULTS.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"-> {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
