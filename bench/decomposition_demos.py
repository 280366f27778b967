"""Which train questions to show the decomposer of ``sqa ask --steps``: BM25-nearest (as before) or
MiniLM-nearest (``sqa.steps.prompts.MiniLMDemoSelector``), scored by SARI against the gold
decompositions of dev questions. Writes bench/results/decomposition_demos.json.

    python bench/decomposition_demos.py --limit 50      # about 25 s a question for 3 settings on 2 cores

Per question and setting: the 3 nearest train-2061 questions (whatever their answers) as
demonstrations, greedy decomposition by the default model (``Steps:\\n1.``, at most 80 tokens),
SARI against the question's gold steps (``sqa.eval.sari.decomposition_sari``). Resumable: the
records go to ``runs/decomposition_demos.jsonl`` and finished (question, setting) pairs are kept.
The card's example "Did Aristotle use a laptop?" (not in the StrategyQA release) is run first and
shown, not averaged.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "decomposition_demos.json"
RECORDS = ROOT / "runs" / "decomposition_demos.jsonl"
SETTINGS = ("bm25-n3", "minilm-n3", "minilm-n3-last")
ARISTOTLE = ("Did Aristotle use a laptop?", ("When did Aristotle live?", "When was the laptop invented?", "Is #2 before #1?"))


def summarize(recs: list[dict], limit: int) -> dict:
    by: dict[str, dict] = {}
    for r in recs:
        if r["qid"] != "aristotle":
            by.setdefault(r["qid"], {})[r["setting"]] = r
    full = [v for v in by.values() if all(s in v for s in SETTINGS)]
    rows = []
    for s in SETTINGS:
        rows.append({"setting": s, "questions": len(full), "sari": round(statistics.mean(v[s]["sari"] for v in full), 4),
                     "seconds": round(statistics.mean(v[s]["seconds"] for v in full), 2)})
    diffs = []
    for a, b in (("minilm-n3", "bm25-n3"), ("minilm-n3-last", "bm25-n3"), ("minilm-n3-last", "minilm-n3")):
        d = [v[a]["sari"] - v[b]["sari"] for v in full]
        m, se = statistics.mean(d), statistics.stdev(d) / math.sqrt(len(d))
        diffs.append({"pair": f"{a} - {b}", "mean": round(m, 4), "ci95": [round(m - 1.96 * se, 4), round(m + 1.96 * se, 4)]})
    card = {r["setting"]: {"steps": r["steps"], "demos": r["demos"], "sari": round(r["sari"], 4)}
            for r in recs if r["qid"] == "aristotle"}
    return {"split": "dev", "questions": len(full), "planned": limit, "model": "qwen2.5-coder-1.5b",
            "command": f"python bench/decomposition_demos.py --limit {limit}",
            "metric": "SARI of the predicted steps against the gold decomposition (sqa.eval.sari)",
            "rows": rows, "paired": diffs, "did_aristotle_use_a_laptop": card}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--summarize-only", action="store_true", help="write the summary of the records so far")
    a = ap.parse_args()
    done = [json.loads(line) for line in RECORDS.read_text().splitlines() if line.strip()] if RECORDS.exists() else []
    if not a.summarize_only:
        from sqa.eval.sari import decomposition_sari
        from sqa.steps import prompts as P
        from sqa.models.registry import load_model
        from sqa.strategyqa import load_questions
        from sqa.types import Question

        bm25, minilm = P.default_selector(), P.MiniLMDemoSelector()
        pick = {"bm25-n3": lambda q: bm25.select(q, 3, balance=False),
                "minilm-n3": lambda q: minilm.select(q, 3, balance=False),
                "minilm-n3-last": lambda q: minilm.select(q, 3, balance=False)[::-1]}
        model = load_model("qwen2.5-coder-1.5b")
        qs = [Question(qid="aristotle", question=ARISTOTLE[0], decomposition=ARISTOTLE[1])]
        qs += [q for q in load_questions("dev") if q.decomposition][: a.limit]
        have = {(r["qid"], r["setting"]) for r in done}
        RECORDS.parent.mkdir(parents=True, exist_ok=True)
        with open(RECORDS, "a", encoding="utf-8") as f:
            for q in qs:
                for s in SETTINGS:
                    if (q.qid, s) in have:
                        continue
                    demos = pick[s](q.question)
                    t = time.perf_counter()
                    out = model.generate([P.question_prompt(demos, q.question).extend("Steps:\n1.")], 80, P.DECOMPOSE_STOP)[0]
                    steps = P.parse_steps("1." + out)
                    rec = {"qid": q.qid, "setting": s, "steps": steps, "demos": [d.question for d in demos],
                           "sari": decomposition_sari(q.question, steps, q.decomposition),
                           "seconds": round(time.perf_counter() - t, 2)}
                    f.write(json.dumps(rec) + "\n")
                    f.flush()
                    done.append(rec)
                    print(q.qid, s, round(rec["sari"], 3), steps, flush=True)
    RESULTS.write_text(json.dumps(summarize(done, a.limit), indent=1) + "\n", encoding="utf-8")
    print(f"-> {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
