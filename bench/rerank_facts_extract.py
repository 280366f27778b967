"""Answer-head features with the facts a learned sentence re-ranker picks (bench/rerank_proxy.py),
resumable, for a paired comparison with the shipped facts and with no retrieval on the same
questions and folds.

    python bench/rerank_proxy.py --index-dir INDEX_DIR --dump runs/rerank_selection.jsonl
    python bench/rerank_facts_extract.py --selection runs/rerank_selection.jsonl --out runs/head_rerank --limit 1000
    python bench/rerank_proxy.py --index-dir INDEX_DIR --pool-paragraphs 10 --extra-features \
        --out bench/results/rerank_proxy_wide.json --dump runs/rerank_wide_selection.jsonl
    python bench/rerank_facts_extract.py --selection runs/rerank_wide_selection.jsonl \
        --proxy-results bench/results/rerank_proxy_wide.json --out runs/head_rerank_wide --limit 1000
    python bench/rerank_facts_extract.py --variant ceiling --index-dir INDEX_DIR --out runs/head_rerank_ceiling --limit 1000
    python bench/rerank_facts_extract.py --variant ceiling-paragraphs --index-dir INDEX_DIR --out runs/head_ceiling_paragraphs --limit 1000
    python bench/head_cv.py --features runs/head_rerank --limit 1000 \\
        --specs 'plain/plain;plain,f5/plain,f5/r' --versus bench/results/features/top3:plain+f5 --name rerank-n1000

For each record of ``--base`` (bench/results/features/top3: the shipped facts' features, train-2061
in release order without the demonstration questions), in its order:

1. the facts are the re-ranker's out-of-fold choice for the question (``--variant``, default
   ``learned-any``: the 5 candidates with the highest predicted coverage of the annotated facts'
   new words, best first, from the same pool the shipped selection ranks: the sentences of the
   best 3 of the top-10 paragraphs and the 20 best train-2061 annotated facts of other questions by
   BM25; or, for a selection dumped with ``--pool-paragraphs 10``, the wide pool: the sentences of
   all 10). The re-ranker that chose them was trained without the question's StrategyQA term (5
   folds grouped by term). ``--variant ceiling`` (an ORACLE, a diagnostic): the 5 of the same pool
   chosen greedily to cover the question's own annotated facts' new words, what no re-ranker of
   this pool can beat on the proxy. ``--variant ceiling-paragraphs`` (a double ORACLE): the 5
   chosen the same way from every sentence of the question's annotated evidence paragraphs (the
   pool of ``sqa eval --oracle paragraphs``, which shows their 5 best by BM25 against the
   question): what no sentence selection from Wikipedia paragraphs, with perfect retrieval, can
   beat on the proxy;
2. the facts prompt is read after each fact (read-outs ``f1``..``f5``);
3. ``plain`` (state and log-odds) and the evidence (``paragraphs``, ``paragraph_scores``: the
   question's top-10, which the re-ranker does not change) are copied from the base record.
"""
import argparse
import json
import sys
import time
from pathlib import Path

from sqa.facts.prompt import read_question
from sqa.facts.sources import Fact
from sqa.models.registry import load_model
from sqa.strategyqa import load_questions

from base_features import extend, load_base  # bench/ is on sys.path when this runs as a script


class CeilingChoice:
    """The ORACLE choice of ``--variant ceiling``: per question, the pool bench/rerank_proxy.py
    ranks (the sentences of the best 3 of the top-10 paragraphs and the 20 best train facts of
    other questions, ``rerank_proxy.candidates``), and the 5 of it chosen greedily to cover the
    question's annotated facts' new words (``rerank_proxy.greedy_ceiling``), in choice order;
    each fact's score is its BM25 score within its source, as in the shipped selection.

    ``gold_paragraphs=True`` (``--variant ceiling-paragraphs``): the pool is every sentence
    (``_sentence_candidates``, as "Title: sentence") of the question's annotated evidence
    paragraphs, all annotators, read from the index; no train facts; each fact's score is 0.0.
    Raises SqaError (from ``pick``) for a question without annotated evidence."""

    def __init__(self, index_dir: str, gold_paragraphs: bool = False):
        from rerank_proxy import candidates, greedy_ceiling

        from sqa.facts.features import FactSettings
        from sqa.pipeline import make_retriever, open_index
        from sqa.facts.sources import default_annotated_facts

        self.settings = FactSettings(sentence_paragraphs=3)
        self.ann = default_annotated_facts()
        self.backend = open_index(index_dir)
        self.retriever = make_retriever(self.backend, "ours")
        self.gold_paragraphs = gold_paragraphs
        self._candidates, self._greedy = candidates, greedy_ceiling

    def pick(self, q) -> list[Fact]:
        if self.gold_paragraphs:
            from fact_selection import gold_paragraph_ids

            from sqa.facts.sources import _sentence_candidates
            from sqa.types import Hit, SqaError

            ids = sorted(gold_paragraph_ids(q))
            if not ids:
                raise SqaError(f"question {q.qid}: no annotated evidence for --variant ceiling-paragraphs")
            hits = [Hit(paragraph=p, score=0.0, rank=i) for i, p in enumerate(self.backend.get(ids), start=1)]
            cands = _sentence_candidates(hits, self.settings.max_words)
            # greedy_ceiling reads only each pool entry's text (entry[0])
            return [Fact(cands[i].text, "oracle-paragraphs", cands[i].ref, 0.0)
                    for i in self._greedy(q, [(c.text,) for c in cands])]
        # the question's top-k, as the shipped selection retrieves it (WikipediaFacts.select)
        hits = self.retriever.retrieve(q.question, [], self.settings.k)
        pool = self._candidates(q, hits, self.ann, self.settings)
        return [Fact(pool[i][0], pool[i][1], pool[i][2]["ref"], float(pool[i][2]["bm25"]))
                for i in self._greedy(q, pool)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, default=Path("bench/results/features/top3"))
    ap.add_argument("--selection", type=Path, help="bench/rerank_proxy.py --dump's file (the learned variants)")
    ap.add_argument("--proxy-results", type=Path, help="the results file of the bench/rerank_proxy.py run that wrote "
                    "--selection: its command, pool and re-ranker features are recorded in meta.json")
    ap.add_argument("--index-dir", help="the mini index (--variant ceiling: the pool is rebuilt per question)")
    ap.add_argument("--variant", default="learned-any", choices=("learned-any", "learned-quota", "ceiling", "ceiling-paragraphs"),
                    help="ceiling: the best 5 of the same pool chosen with the question's annotated facts "
                         "(an oracle, for the head's ceiling of any re-ranker); ceiling-paragraphs: the best 5 "
                         "sentences of the annotated evidence paragraphs chosen the same way (a double oracle)")
    ap.add_argument("--out", type=Path, default=Path("runs/head_rerank"))
    ap.add_argument("--split", default="train-2061")
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    a = ap.parse_args()

    ceiling = a.variant.startswith("ceiling")
    if ceiling != (a.index_dir is not None) or ceiling == (a.selection is not None):
        print(f"error: --variant {a.variant} takes " + ("--index-dir INDEX_DIR and no --selection" if ceiling else
              "--selection FILE and no --index-dir"), file=sys.stderr)
        return 2
    meta, recs = load_base(a.base, a.split, 0, a.limit)
    questions = {q.qid: q for q in load_questions(a.split)}
    if ceiling:
        choose = CeilingChoice(a.index_dir, gold_paragraphs=a.variant == "ceiling-paragraphs").pick
    else:
        chosen = {}
        for line in a.selection.read_text(encoding="utf-8").splitlines():
            d = json.loads(line)
            chosen[d["qid"]] = [Fact.from_dict(f) for f in d[a.variant]]
        missing = [r["qid"] for r in recs if r["qid"] not in chosen]
        if missing:
            print(f"error: {a.selection}: no selection for {len(missing)} of the {len(recs)} questions "
                  f"(first {missing[0]}); run bench/rerank_proxy.py with a larger --limit", file=sys.stderr)
            return 2

        def choose(q) -> list[Fact]:
            return chosen[q.qid]
    proxy = json.loads(a.proxy_results.read_text(encoding="utf-8")) if a.proxy_results else None
    model = load_model(a.model)

    def one(base: dict) -> dict:
        q = questions[base["qid"]]
        qf = read_question(model, q, choose(q), paragraphs=base["paragraphs"],
                           paragraph_scores=base["paragraph_scores"], plain=False)
        rec = qf.to_dict()
        rec["states"]["plain"] = base["states"]["plain"]
        rec["log_odds"]["plain"] = base["log_odds"]["plain"]
        return rec

    extend(a.out, a.split, recs, {**meta, "made_by": {
        "script": "bench/rerank_facts_extract.py", "base": str(a.base), "selection": a.variant,
        "facts": ("DOUBLE ORACLE: the best 5 sentences of the question's annotated evidence paragraphs for its "
                  "annotated facts (greedy on the proxy, bench/rerank_proxy.py), in choice order"
                  if a.variant == "ceiling-paragraphs" else
                  "ORACLE: the best 5 of the pool for the question's annotated facts (greedy on the proxy, "
                  "bench/rerank_proxy.py), in choice order" if ceiling else
                  "the learned re-ranker's out-of-fold choice (bench/rerank_proxy.py), best first") + "; read-outs f1..f5",
        "plain": "state and log-odds copied from the base record (same model and prompt)",
        **({"selection_made_by": {k: proxy[k] for k in ("command", "pool", "features", "model")}} if proxy else {}),
        "started": time.strftime("%Y-%m-%d")}}, one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
