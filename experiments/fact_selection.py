"""Which facts to show the reader, measured without the model: how much of the annotated facts'
new information the selected facts carry, on train-2061 (the tuning split). Writes
experiments/work/fact_selection.json, or ``--out`` (the recorded run: bench/results/fact_selection.json).

    python -m experiments.fact_selection --index-dir INDEX_DIR [--limit 1000]     # about a minute on 2 cores

Measures, per question, over its annotated StrategyQA facts (the oracle; never a system input):

- **new-information recall**: for each annotated fact, the content words (lower-cased, English
  stop words dropped, Snowball-stemmed with PyStemmer) that are *not* in the question; the share of
  them found in the best-matching selected fact; averaged over the question's facts, then over
  questions (questions whose facts add no word are left out). Words already in the question are
  excluded because every retrieved sentence shares them.
- **gold-paragraph share** (Wikipedia facts only): the share of selected sentences whose paragraph
  is one of the question's annotated evidence paragraphs.

Compared: the Wikipedia sentences (``sqa.facts.sources.WikipediaFacts``) picked by BM25 from the
best ``sentence_paragraphs`` of the top-10 paragraphs, for several values; and the annotated facts
of other train-2061 questions (``AnnotatedFacts``) for several counts; the 5 facts the shipped
heads are shown (``FactSelector``: 3 Wikipedia sentences from the best 3 paragraphs and 2 train
facts, interleaved) and the paragraph oracle's 5 (``FactSelector(oracle="paragraphs")``: the best
sentences of the question's annotated evidence paragraphs, as ``sqa eval --oracle paragraphs``). The 6 demonstration
questions are left out. A proxy: the choice it makes is checked by the answer head's
cross-validated accuracy (``sqa train-head``), not by this alone.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np
import Stemmer

from sqa.eval.metrics import annotator_evidence
from sqa.facts.features import FactSelector, FactSettings
from sqa.pipeline import index_info, make_retriever, open_index
from sqa.facts.prompt import demo_qids
from sqa.facts.sources import WikipediaFacts, default_annotated_facts
from sqa.strategyqa import load_questions

WORK = Path(__file__).resolve().parent / "work"
_STOP = frozenset(
    "a an the of to in on and or is are was were be been do does did would could can will for with by at "
    "from as that this it its his her their they he she what which who whom how when where why not no "
    "yes than then there have has had into about over more most any all some".split()
)
_STEM = Stemmer.Stemmer("english")


def content_words(text: str) -> set[str]:
    """Stemmed lower-case words of ``text`` without stop words."""
    return {_STEM.stemWord(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP}


def gold_new_words(question: str, gold: list[str]) -> list[set[str]]:
    """Per annotated fact, its content words that are not in ``question``; facts adding none left out."""
    qw = content_words(question)
    return [g for g in (content_words(f) - qw for f in gold) if g]


def new_info_recall(question: str, gold: list[str], shown: list[str]) -> float | None:
    """Mean over annotated facts of the share of their new content words found in the best shown
    fact; None when no annotated fact adds a word to the question."""
    golds = gold_new_words(question, gold)
    if not golds:
        return None
    sw = [content_words(s) for s in shown]
    return float(np.mean([max((len(g & s) / len(g) for s in sw), default=0.0) for g in golds]))


def gold_paragraph_ids(q) -> set[str]:
    """Every annotator's evidence IDs of ``q`` together."""
    return set().union(*annotator_evidence(q.evidence))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument(
        "--out",
        type=Path,
        default=WORK / "fact_selection.json",
        help="results file (default experiments/work/fact_selection.json)",
    )
    a = ap.parse_args()
    RESULTS = a.out
    demos = demo_qids()
    qs = [q for q in load_questions("train-2061") if q.qid not in demos][: a.limit]
    retriever = make_retriever(open_index(a.index_dir), "step")
    hits = {q.qid: retriever.retrieve(q.question, [], 10) for q in qs}

    class Cached:  # the same top-10 for every variant
        def retrieve(self, question, steps, k, _by_text={q.question: hits[q.qid] for q in qs}):  # noqa: B006
            return _by_text[question][:k]

    rows = []
    for n_wiki in (1, 3):
        for m in (1, 2, 3, 5, 10):
            wf = WikipediaFacts(Cached(), 10, FactSettings.max_words, m)
            t = time.perf_counter()
            rec, share = [], []
            for q in qs:
                facts, _ = wf.select(q.question, n_wiki)
                r = new_info_recall(q.question, list(q.facts), [f.text for f in facts])
                if r is not None:
                    rec.append(r)
                gold = gold_paragraph_ids(q)
                share += [f.ref in gold for f in facts]
            rows.append(
                {
                    "source": "wikipedia",
                    "facts": n_wiki,
                    "sentence_paragraphs": m,
                    "new_info_recall": round(float(np.mean(rec)), 4),
                    "questions": len(rec),
                    "gold_paragraph_share": round(float(np.mean(share)), 4),
                    "ms_per_question": round(1000 * (time.perf_counter() - t) / len(qs), 2),
                }
            )
            print(rows[-1], flush=True)
    ann = default_annotated_facts()
    for n in (1, 2, 3, 5):
        rec = [
            r
            for q in qs
            if (r := new_info_recall(q.question, list(q.facts), [f.text for f in ann.select(q.question, n, [q.qid])]))
            is not None
        ]
        rows.append(
            {
                "source": "train-facts",
                "facts": n,
                "new_info_recall": round(float(np.mean(rec)), 4),
                "questions": len(rec),
            }
        )
        print(rows[-1], flush=True)
    # the 5 facts the reader is shown: shipped (3 Wikipedia + 2 train, interleaved) and the
    # paragraph oracle (the 5 best sentences of the question's annotated evidence paragraphs)
    backend = retriever.backend
    for name, oracle in (("shipped", None), ("oracle-paragraphs", "paragraphs")):
        sel = FactSelector(Cached(), FactSettings(sentence_paragraphs=3), annotated=ann, oracle=oracle, backend=backend)
        rec = [
            r
            for q in qs
            if (r := new_info_recall(q.question, list(q.facts), [f.text for f in sel.select(q)[0]])) is not None
        ]
        rows.append(
            {"source": name, "facts": 5, "new_info_recall": round(float(np.mean(rec)), 4), "questions": len(rec)}
        )
        print(rows[-1], flush=True)
    out = {
        "split": "train-2061",
        "questions": len(qs),
        "selection": "first N in release order without the 6 demonstration questions",
        "index": index_info(a.index_dir),
        "command": f"python -m experiments.fact_selection --index-dir INDEX_DIR --limit {a.limit}",
        "metric": "new-information recall of the annotated facts (see the script's docstring)",
        "rows": rows,
    }
    if RESULTS.exists():  # the written-up outcome of an earlier run stays
        out = {**out, **{k: v for k, v in json.loads(RESULTS.read_text(encoding="utf-8")).items() if k == "outcome"}}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"-> {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
