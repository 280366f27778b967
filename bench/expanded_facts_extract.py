"""Answer-head features with facts retrieved by a query the reader model expanded itself
(generation-augmented retrieval: Mao et al., ACL 2021, "Generation-Augmented Retrieval for
Open-domain Question Answering"; the generated lines as query expansion), resumable, for a paired
comparison with the shipped facts (retrieved by the question alone) and with no retrieval, on the
same questions and folds.

    python bench/expanded_facts_extract.py --base bench/results/features/generated \\
        --index-dir INDEX_DIR --out runs/head_expanded --limit 600

``--base`` is the output of ``bench/generated_facts_extract.py``: for each of its records, in its
order (so the first N are the same questions):

1. the expanded query is the question followed by the base record's generated lines (the model's
   greedy continuation of the facts prompt, at most 3 lines; no retrieval and no annotated fact of
   the question went into them);
2. the facts are chosen exactly as the shipped ones (``sqa.facts.features.FactSelector`` with the base's
   settings: 3 Wikipedia sentences by BM25 from the best 3 of the top-10 paragraphs, 2 annotated
   train-2061 facts of other questions, interleaved), but with the expanded query in place of the
   question for the paragraphs, the sentences and the train facts;
3. the facts prompt is read after each fact: read-outs ``f1``..``f5``, and the run's evidence is
   the expanded query's top-10 paragraphs (``paragraphs``, ``paragraph_scores``);
4. ``plain`` (state and log-odds) is copied from the base record (same model, same prompt version:
   checked). The generated lines are not shown to the reader.

Measured without the model first (new-information recall of the annotated facts, as in
``bench/fact_selection.py``, first 600 train-2061 questions of the generated features): the
shipped facts 0.217, the same selection with the expanded query 0.260 (paired +0.043, +0.028 to
+0.058; bench/expanded_query_proxy.py -> bench/results/expanded_query_proxy.json).

Then ``bench/head_cv.py --features OUT --specs 'plain/plain;plain,f5/plain,f5/r' --versus
bench/results/features/top3:plain+f5`` compares them with the shipped facts on the same questions.
"""
import argparse
import sys
import time
from pathlib import Path

from sqa.facts.features import FactSelector, FactSettings
from sqa.pipeline import index_info, make_retriever, open_index
from sqa.facts.prompt import read_question
from sqa.facts.sources import default_annotated_facts
from sqa.models.registry import load_model
from sqa.strategyqa import load_questions

from base_features import extend, load_base  # bench/ is on sys.path when this runs as a script


def expanded_query(question: str, base: dict) -> str:
    """The question followed by the base record's generated lines (facts with source "generated")."""
    return " ".join([question.strip()] + [f["text"] for f in base["facts"] if f["source"] == "generated"])


def expanded_facts(selector: FactSelector, q, base: dict) -> tuple[list, list, str]:
    """(facts in reading order, the expanded query's top-k hits, the query): the shipped selection
    (``FactSelector.select``: Wikipedia sentences and annotated facts of other questions,
    interleaved) with ``expanded_query`` in place of question ``q``'s text."""
    query = expanded_query(q.question, base)
    facts, hits = selector.select(q, query=query)
    return facts, hits, query


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, default=Path("bench/results/features/generated"))
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--out", type=Path, default=Path("runs/head_expanded"))
    ap.add_argument("--split", default="train-2061")
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    a = ap.parse_args()

    meta, recs = load_base(a.base, a.split, 0, a.limit)
    s = FactSettings.from_dict(meta["facts"])
    questions = {q.qid: q for q in load_questions(a.split)}
    selector = FactSelector(make_retriever(open_index(a.index_dir), "ours"), s, default_annotated_facts())
    model = load_model(a.model)

    def one(base: dict) -> dict:
        q = questions[base["qid"]]
        t = time.perf_counter()
        facts, hits, query = expanded_facts(selector, q, base)
        t_sel = time.perf_counter() - t
        qf = read_question(model, q, facts, paragraphs=[h.evidence_id for h in hits],
                           paragraph_scores=[h.score for h in hits], plain=False)
        rec = qf.to_dict()
        rec["states"]["plain"] = base["states"]["plain"]
        rec["log_odds"]["plain"] = base["log_odds"]["plain"]
        rec.update(expanded_query=query, seconds={**rec["seconds"], "select": round(t_sel, 3)})
        return rec

    extend(a.out, a.split, recs, {**meta, "index": index_info(a.index_dir), "made_by": {
        "script": "bench/expanded_facts_extract.py", "base": str(a.base),
        "query": "the question followed by the base record's generated lines (generation-augmented retrieval)",
        "facts": "the shipped selection (train/wikipedia interleaved) with the expanded query; read-outs f1..f5",
        "plain": "state and log-odds copied from the base record (same model and prompt)"}}, one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
