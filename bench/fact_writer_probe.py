"""Probe (session 14): facts written by the reader model, with and without the retrieved evidence,
against the shipped BM25 facts, by the new-information recall of the annotated facts
(bench/fact_selection.py's proxy; no answer head involved). Resumable; per-question records.

    python bench/fact_writer_probe.py 150 runs/fact_writer.jsonl     # INDEX_DIR: $SQA_HOME/index
    python bench/fact_writer_probe.py --summary runs/fact_writer.jsonl > bench/results/fact_writer_probe.json

"written": the first train-2061 demonstrations (facts_reader's 6) shown as Question / Evidence (their
shipped BM25 facts) / Facts (annotated), then the question with its evidence; greedy, 70 tokens.
"generated": the same without evidence (generated knowledge prompting, Liu et al. 2022).
"""
import json, sys, time
from fact_selection import new_info_recall
from sqa.facts.features import FactSelector, FactSettings
from sqa.pipeline import make_retriever, open_index
from sqa.facts.prompt import fixed_demos, demo_qids
from sqa.models.registry import load_model
from sqa.strategyqa import load_questions, questions_by_id

if sys.argv[1] == "--summary":
    import numpy as np
    R = [json.loads(l) for l in open(sys.argv[2])]
    def dd(x):
        out = []
        for s in x:
            if s.lower() not in {o.lower() for o in out}:
                out.append(s)
        return out
    sets = {"evidence (the shipped 5 BM25 facts)": lambda r: r["evidence"], "written with evidence": lambda r: dd(r["written"]),
            "generated without evidence": lambda r: dd(r["generated"]), "evidence + written": lambda r: r["evidence"] + dd(r["written"]),
            "evidence + generated": lambda r: r["evidence"] + dd(r["generated"])}
    rows = []
    for k, fn in sets.items():
        v = [x for r in R if (x := new_info_recall(r["question"], r["gold"], fn(r))) is not None]
        rows.append({"facts": k, "new_info_recall": round(float(np.mean(v)), 3),
                     "interval95_half": round(float(1.96 * np.std(v) / np.sqrt(len(v))), 3), "questions": len(v),
                     "lines": round(float(np.mean([len(fn(r)) for r in R])), 1)})
    print(json.dumps({"split": "train-2061", "questions": len(R), "selection": "first N in release order without the 6 demonstration questions",
                      "command": "python bench/fact_writer_probe.py 150 runs/fact_writer.jsonl (stopped after 51)",
                      "median_seconds": {"written": float(np.median([r["t_w"] for r in R])), "generated": float(np.median([r["t_g"] for r in R]))},
                      "load": "about 2 (an answer-head job beside it)", "rows": rows, "records": R}, indent=1))
    sys.exit(0)
N = int(sys.argv[1]); OUT = sys.argv[2]
from sqa.paths import sqa_home
sel = FactSelector(make_retriever(open_index(str(sqa_home() / "index"), "embedded"), "ours"), FactSettings(sentence_paragraphs=3))
model = load_model()
qb = questions_by_id()
demos = fixed_demos()
def ev(q):
    facts, _ = sel.select(q)
    return [f.text for f in facts]
W_INS = ("Write the facts needed to answer each yes/no question, one per line, using the evidence where it helps "
         "and your own knowledge where it does not.\n\n")
G_INS = "Write the facts needed to answer each yes/no question, one per line.\n\n"
wh, gh = [W_INS], [G_INS]
for d in demos:
    e = ev(qb[d.qid])
    wh.append(f"Question: {d.question}\nEvidence:\n" + "".join(f"- {x}\n" for x in e) + "Facts:\n" + "".join(f"- {f}\n" for f in d.facts) + "\n")
    gh.append(f"Question: {d.question}\nFacts:\n" + "".join(f"- {f}\n" for f in d.facts) + "\n")
wh, gh = "".join(wh), "".join(gh)
print(len(model.tokenize(wh)), len(model.tokenize(gh)), file=sys.stderr)
def parse(t):
    return [l.strip()[1:].strip() for l in t.split("\n") if l.strip().startswith("-") and len(l.strip()) > 2][:5]
demos_q = demo_qids()
qs = [q for q in load_questions("train-2061") if q.qid not in demos_q][:N]
done = set()
try:
    done = {json.loads(l)["qid"] for l in open(OUT)}
except FileNotFoundError:
    pass
with open(OUT, "a") as f:
    for i, q in enumerate(qs):
        if q.qid in done: continue
        e = ev(q)
        t = time.perf_counter()
        w = model.generate([wh + f"Question: {q.question}\nEvidence:\n" + "".join(f"- {x}\n" for x in e) + "Facts:\n-"], 70, stop=["\n\n", "Question:"])[0]
        tw = time.perf_counter() - t; t = time.perf_counter()
        g = model.generate([gh + f"Question: {q.question}\nFacts:\n-"], 70, stop=["\n\n", "Question:"])[0]
        tg = time.perf_counter() - t
        W, G = parse("-" + w), parse("-" + g)
        rec = {"qid": q.qid, "question": q.question, "gold": list(q.facts), "evidence": e, "written": W, "generated": G,
               "r_ev": new_info_recall(q.question, list(q.facts), e), "r_w": new_info_recall(q.question, list(q.facts), W),
               "r_g": new_info_recall(q.question, list(q.facts), G), "r_ew": new_info_recall(q.question, list(q.facts), e + W),
               "t_w": round(tw, 2), "t_g": round(tg, 2)}
        f.write(json.dumps(rec) + "\n"); f.flush()
        print(i, rec["r_ev"], rec["r_w"], rec["r_g"], tw, tg, flush=True)
