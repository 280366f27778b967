"""Answer-head features with facts the reader writes itself before it reads the retrieved ones
(generated knowledge prompting, Liu et al., ACL 2022, "Generated Knowledge Prompting for
Commonsense Reasoning"), resumable, for a paired comparison with the shipped retrieved facts and
with no retrieval, on the same questions and folds.

    python bench/generated_facts_extract.py --base bench/results/features/top3 --out runs/head_gen --limit 600

For each question of ``--base``'s file, in its order (so the first N are the same questions):

1. the reader model continues the facts prompt itself (``facts_prefix()`` + "Question: Q\\nFacts:\\n-",
   the 6 demonstrations with their annotated facts; greedy, at most 80 tokens, stopped at
   "Answer:" or a blank line); its first ``--max-generated`` distinct "- " lines are the generated
   facts. No retrieval and no annotated fact of the question is involved;
2. the facts prompt is read after each generated fact and then after each of the base record's
   retrieved facts (the shipped BM25 selection, 5): read-outs ``g1``..``g3`` (after the generated
   facts only; padded with the last one present, or ``plain`` when none was written) and
   ``f1``..``f5`` (after the generated facts and 1..5 retrieved ones);
3. ``plain`` (state and log-odds) is copied from the base record (same model, same prompt version:
   checked).

So ``bench/head_cv.py --features OUT --specs 'plain/plain;plain,g3/plain,g3;plain,f5/plain,f5/r'
--versus BASE:plain+f5`` gives the ladder on the same questions: no retrieval, generated facts
only (still no retrieval), generated + retrieved, and retrieved only (``--versus``).
"""
import argparse
import sys
import time
from pathlib import Path

from sqa.facts.prompt import facts_prefix, read_question
from sqa.facts.sources import Fact
from sqa.models.registry import load_model
from sqa.strategyqa import load_questions

from base_features import extend, load_base  # bench/ is on sys.path when this runs as a script

N_GENERATED = 3


def generated_lines(text: str, n: int) -> list[str]:
    """The first ``n`` distinct (case-insensitive) non-empty "- " lines of a continuation that
    started after "Facts:\\n-" (so its first line has lost its dash)."""
    out: list[str] = []
    for i, line in enumerate(("-" + text).split("\n")):
        line = line.strip()
        if not line.startswith("-"):
            break
        line = line[1:].strip()
        if len(line) > 3 and line.lower() not in {o.lower() for o in out}:
            out.append(line)
        if len(out) == n:
            break
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, default=Path("bench/results/features/top3"))
    ap.add_argument("--out", type=Path, default=Path("runs/head_gen"))
    ap.add_argument("--split", default="train-2061")
    ap.add_argument("--limit", type=int, default=600)
    ap.add_argument("--max-generated", type=int, default=N_GENERATED)
    ap.add_argument("--max-tokens", type=int, default=80)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    a = ap.parse_args()

    meta, recs = load_base(a.base, a.split, 0, a.limit)
    questions = {q.qid: q for q in load_questions(a.split)}
    model = load_model(a.model)
    head = facts_prefix()

    def one(base: dict) -> dict:
        q = questions[base["qid"]]
        t = time.perf_counter()
        text = model.generate([head + f"Question: {q.question.strip()}\nFacts:\n-"], a.max_tokens,
                              stop=["Answer:", "\n\n", "Question:"])[0]
        t_gen = time.perf_counter() - t
        gen = [Fact(s, "generated", q.qid, 0.0) for s in generated_lines(text, a.max_generated)]
        retrieved = [Fact.from_dict(d) for d in base["facts"]]
        qf = read_question(model, q, gen + retrieved, paragraphs=base["paragraphs"],
                           paragraph_scores=base["paragraph_scores"], plain=False)
        rec = qf.to_dict()
        k = len(gen)
        states = {"plain": base["states"]["plain"]}
        log_odds = {"plain": base["log_odds"]["plain"]}
        for i in range(1, a.max_generated + 1):  # g_i: after min(i, k) generated facts
            src = f"f{min(i, k)}" if k else None
            states[f"g{i}"] = rec["states"][src] if src else states["plain"]
            log_odds[f"g{i}"] = rec["log_odds"][src] if src else log_odds["plain"]
        for j in range(1, len(retrieved) + 1):
            states[f"f{j}"] = rec["states"][f"f{k + j}"]
            log_odds[f"f{j}"] = rec["log_odds"][f"f{k + j}"]
        rec.update(states=states, log_odds=log_odds, n_generated=k, generated_text=text,
                   seconds={**rec["seconds"], "generate": round(t_gen, 3)})
        return rec

    extend(a.out, a.split, recs, {**meta, "made_by": {
        "script": "bench/generated_facts_extract.py", "base": str(a.base),
        "generated": f"greedy continuation of the facts prompt, at most {a.max_tokens} tokens, first "
                     f"{a.max_generated} distinct lines; read-outs g1..g{a.max_generated} after them, "
                     "f1..f5 after them plus the base record's retrieved facts",
        "plain": "state and log-odds copied from the base record (same model and prompt)"}}, one)
    return 0


if __name__ == "__main__":
    sys.exit(main())
