"""Answer-head features with facts found per decomposition step (the issue-14 rung "facts that state
what each step needs"), resumable, for a paired comparison with the shipped question-level facts.

    python bench/step_facts_extract.py --index-dir INDEX_DIR --base bench/results/features/top3 \
        --out runs/head_steps --split train-2061 --limit 600

For each question of ``--base``'s file, in its order (so the first N are the same questions):

1. the decomposer writes the steps (``sqa.steps.decomposer.Decomposer``: the 1.5B model, 3
   MiniLM-nearest train-2061 demonstrations, never the question itself, nearest last, as
   ``sqa ask --steps``);
2. each step without ``#k`` gets its best sentence (``FactSelector.step_sentences``:
   ``step_evidence``, MiniLM cosine over the step's top-10 paragraphs' sentences and the 10 best
   train-2061 annotated facts, never those of the question itself);
3. the facts shown are those step sentences (in step order, duplicates dropped, at most 4), then the
   base record's facts (the shipped BM25 selection) until there are 5 (``steps_first``): the
   selection ``FactSettings(sentence_paragraphs=3, step_facts=4)`` makes in the pipeline;
4. the facts prompt is read after each fact (``read_question``, f1..f5). The plain prompt does not
   depend on the facts, so its state and log-odds are copied from the base record (same model, same
   prompt version: checked).

``--gold-steps`` (a diagnostic, the decomposition ORACLE: never a system input) skips step 1 and uses
the question's own annotated StrategyQA decomposition instead, the paper's ORA-D idea: what per-step
retrieval would give this reader if the decomposer were perfect. Everything else is unchanged.

Each output line is a features record (``QuestionFeatures.to_dict``) plus ``steps`` (the
decomposition) and ``n_step_facts``; ``bench/head_cv.py --features OUT --versus BASE:plain+f5``
compares the two on the same questions and folds.
"""
import argparse
import sys
import time
from pathlib import Path

from sqa.facts.features import FactSelector, FactSettings, steps_first
from sqa.paths import sqa_home
from sqa.pipeline import make_retriever, open_index
from sqa.steps.decomposer import Decomposer
from sqa.facts.prompt import read_question
from sqa.facts.sources import Fact
from sqa.models.registry import load_model
from sqa.strategyqa import load_questions

from base_features import extend, load_base  # bench/ is on sys.path when this runs as a script

MAX_STEP_FACTS = 4
N_FACTS = 5


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--base", type=Path, default=Path("bench/results/features/top3"))
    ap.add_argument("--out", type=Path, default=Path("runs/head_steps"))
    ap.add_argument("--split", default="train-2061")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--gold-steps", action="store_true",
                    help="ORACLE: the question's annotated decomposition instead of the decomposer's (diagnostic)")
    a = ap.parse_args()

    meta, recs = load_base(a.base, a.split, a.start, a.limit)
    questions = {q.qid: q for q in load_questions(a.split)}
    retriever = make_retriever(open_index(a.index_dir, "embedded"), "ours")
    selector = FactSelector(retriever, FactSettings(sentence_paragraphs=meta["facts"]["sentence_paragraphs"],
                                                    step_facts=MAX_STEP_FACTS))
    model = load_model(a.model)
    if a.gold_steps:  # ORACLE: the question's own annotated decomposition (qid -> its steps)
        def decompose(question: str, qid: str) -> list[str]:
            return list(questions[qid].decomposition)
    else:
        decompose = Decomposer(model, encode=selector.step_encode, require_minilm=True, cache_dir=sqa_home() / "cache")

    def one(base: dict) -> dict:
        q = questions[base["qid"]]
        t = time.perf_counter()
        steps = decompose(q.question, q.qid)
        t_dec = time.perf_counter() - t
        t = time.perf_counter()
        step = selector.step_sentences(q, steps)
        facts = steps_first(step, [Fact.from_dict(d) for d in base["facts"]], N_FACTS)
        t_sel = time.perf_counter() - t
        qf = read_question(model, q, facts, paragraphs=base["paragraphs"],
                           paragraph_scores=base["paragraph_scores"], plain=False)
        rec = qf.to_dict()
        rec["states"] = {"plain": base["states"]["plain"], **rec["states"]}
        rec["log_odds"] = {"plain": base["log_odds"]["plain"], **rec["log_odds"]}
        rec["seconds"] = {**rec["seconds"], "decompose": round(t_dec, 3), "select": round(t_sel, 3)}
        rec["steps"] = steps
        rec["n_step_facts"] = len(step)
        return rec

    extend(a.out, a.split, recs, {**meta, "facts": selector.settings.to_dict(), "made_by": {
        "script": "bench/step_facts_extract.py", "base": str(a.base),
        "plain": "state and log-odds copied from the base record (same model and prompt)",
        "decomposer": ("ORACLE: the question's own annotated StrategyQA decomposition (--gold-steps)" if a.gold_steps else
                       "sqa.steps.decomposer.Decomposer: MiniLM-nearest 3 train-2061 demonstrations, nearest last")}},
        one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
