"""Seconds per question of the reasoner (``sqa ask``'s pipeline) on dev questions, plus the raw
llama.cpp speeds behind it; writes bench/results/ask.json (merging into what is there).

    python bench/ask.py --model qwen2.5-coder-1.5b --index-dir INDEX_DIR -n 10
    python bench/ask.py --index-dir INDEX_DIR -n 10 --reader facts --side-by-side   # facts reader vs steps, one run
    python bench/ask.py --speed-only            # just the tokens/s microbenchmark

Per question: wall seconds of ``Reasoner.answer_batch([q])`` after the model is loaded (the first
question pays for reading the static system prompt; later ones reuse it from the KV cache, as an
interactive session or the batch runner does), its phase timings, and the prompt / cached /
generated token counts. Accuracy on these few questions is reported only as a sanity check (the
full dev evaluation runs through ``sqa eval``). ``--no-retrieval-too`` also runs the same questions
without evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

RESULTS = Path(__file__).resolve().parent / "results" / "ask.json"


def speed(model, n_read: int = 256, n_gen: int = 64) -> dict:
    """tokens/s reading a prompt (one llama_decode batch, cold cache) and generating (greedy)."""
    from sqa.strategyqa import load_questions

    text = "\n".join(q.question + " " + " ".join(q.facts) for q in load_questions("train-2061")[:60])
    toks = model.tokenize(text)[:n_read]
    model.reset_cache()
    t = time.perf_counter()
    model._prepare(toks)
    read_s = time.perf_counter() - t
    model.reset_cache()
    prompt = "<|im_start|>user\nWrite a long story about a cat.<|im_end|>\n<|im_start|>assistant\n"
    g0 = model.stats["generated_tokens"]
    t = time.perf_counter()
    model.generate([prompt], n_gen)
    gen_s = time.perf_counter() - t
    n = model.stats["generated_tokens"] - g0
    model.reset_cache()
    return {"read_tokens": len(toks), "read_tokens_per_s": round(len(toks) / read_s, 1),
            "generated_tokens": n, "generate_tokens_per_s": round(n / gen_s, 1),
            "note": "generate time includes reading the 17-token prompt"}


def run(reasoner, questions, mode: str, label: str) -> dict:
    rows = []
    load0 = [round(x, 2) for x in os.getloadavg()]
    m = reasoner.model
    with Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                  TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task(label, total=len(questions), rate="")
        for q in questions:
            s0 = dict(getattr(m, "stats", {}))
            t = time.perf_counter()
            r = reasoner.answer_batch([q], decomposition=mode)[0]
            dt = time.perf_counter() - t
            s1 = getattr(m, "stats", {})
            rows.append({"qid": q.qid, "seconds": round(dt, 2), "correct": r.answer == q.answer, "gold": q.answer,
                         "p_yes": round(r.p_yes, 4), "p_yes_raw": round(getattr(r, "p_yes_raw", r.p_yes), 4),
                         "n_steps": len(r.steps), "timings": r.timings,
                         **{k: s1[k] - s0.get(k, 0) for k in s1}})
            bar.update(task, advance=1, rate=f"{statistics.mean(x['seconds'] for x in rows):.1f} s/question")
    secs = [x["seconds"] for x in rows]
    return {
        "loadavg_at_start": load0, "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "mode": mode, "n_questions": len(rows),
        "seconds_per_question_mean": round(statistics.mean(secs), 2),
        "seconds_per_question_median": round(statistics.median(secs), 2),
        "seconds_per_question_max": round(max(secs), 2),
        "seconds_per_question_mean_excluding_first": round(statistics.mean(secs[1:]), 2) if len(secs) > 1 else None,
        "accuracy_sanity": round(sum(x["correct"] for x in rows) / len(rows), 3),
        "questions": rows,
    }


def calibrate(model, index_dir: str, n: int, mode: str) -> dict:
    """Raw P(yes) on ``n`` train-2061 questions (every len/n-th; demonstrations from the rest of
    train-2061, never the question itself), with and without retrieval, and for each the threshold
    at which the share of "yes" answers equals the share of yes labels in train-2061 (prior
    matching, a label-bias correction in the spirit of Zhao et al., ICML 2021)."""
    from sqa.reasoner import build_reasoner
    from sqa.strategyqa import load_questions

    train = load_questions("train-2061")
    prior = sum(q.answer for q in train) / len(train)
    step = max(1, len(train) // n)
    qs = train[::step][:n]
    out = {"split": "train-2061", "n_questions": len(qs), "every": step, "train_yes_rate": round(prior, 4),
           "command": "python " + " ".join(sys.argv)}
    for retrieval in (True, False):
        r = build_reasoner(model, index_dir if retrieval else None, k=10, retrieval=retrieval, yes_threshold=0.5)
        res = run(r, qs, mode, f"calibration, retrieval={retrieval}")
        ps = sorted((x["p_yes_raw"] for x in res["questions"]), reverse=True)
        n_yes = round(prior * len(ps))
        thr = (ps[n_yes - 1] + ps[n_yes]) / 2 if 0 < n_yes < len(ps) else 0.5
        key = "retrieval" if retrieval else "no_retrieval"
        out[key] = {"threshold": round(thr, 4), "accuracy_at_0.5": res["accuracy_sanity"],
                    "accuracy_at_threshold": round(sum((x["p_yes_raw"] >= thr) == x["gold"] for x in res["questions"]) / len(ps), 4),
                    "mean_p_yes": round(sum(ps) / len(ps), 4), "loadavg": [res["loadavg_at_start"], res["loadavg_at_end"]],
                    "questions": [{k: x[k] for k in ("qid", "gold", "p_yes_raw")} for x in res["questions"]]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--index-dir", default=None, help="index directory (default: $SQA_HOME/index)")
    ap.add_argument("--reader", default="steps", choices=["steps", "facts"],
                    help="facts: the facts reader with the shipped answer head (what `sqa ask` runs by default)")
    ap.add_argument("--side-by-side", action="store_true",
                    help="with --reader facts: also run the steps pipeline (default decision) on the same questions "
                         "in the same process, right after")
    ap.add_argument("--split", default="dev")
    ap.add_argument("-n", type=int, default=10, help="first n questions of the split")
    ap.add_argument("--mode", default="predicted", choices=["predicted", "gold", "question"])
    ap.add_argument("--decision", default=None,
                    help="P(yes) readings of the final answer (default: the reasoner's DEFAULT_DECISION); "
                         "the result is stored under MODE, or MODE|DECISION for a non-default one")
    ap.add_argument("--no-retrieval-too", action="store_true")
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--calibrate", type=int, default=0, metavar="N",
                    help="instead: run N train-2061 questions (every len/N-th) with and without retrieval and "
                         "record the raw P(yes) values and the prior-matching yes threshold of each")
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)

    from sqa.reasoner import build_reasoner, load_model
    from sqa.reasoner.reasoner import DEFAULT_DECISION
    from sqa.strategyqa import load_questions

    decision = args.decision or DEFAULT_DECISION

    out_path = Path(args.out)
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    t = time.perf_counter()
    model = load_model(args.model)
    load_s = time.perf_counter() - t
    env = {"loadavg_at_start": [round(x, 2) for x in os.getloadavg()], "machine": platform.machine(), "cpus": len(os.sched_getaffinity(0)), "python": sys.version.split()[0],
           "model": args.model, "model_load_seconds": round(load_s, 2)}
    key = args.model
    entry = results.setdefault(key, {})
    entry["env"] = env
    if hasattr(model, "_prepare"):
        entry["llamacpp_speed"] = speed(model)
    if args.calibrate:
        entry["calibration"] = calibrate(model, args.index_dir, args.calibrate, args.mode)
    elif not args.speed_only and args.reader == "facts":
        from sqa.indexing import open_backend
        from sqa.paths import default_index_dir
        from sqa.reasoner.facts_reasoner import FactsReasoner, head_for
        from sqa.retriever.steps import StepRetriever

        idx = args.index_dir or str(default_index_dir())
        qs = load_questions(args.split)[: args.n]
        head = head_for(args.model, "facts")
        fr = FactsReasoner(model, head, StepRetriever(open_backend(idx, "embedded")))
        res = run(fr, qs, "question", "facts reader")
        res.update(split=args.split, index_dir="INDEX_DIR", reader="facts", head=head.spec.name,
                   command="python " + " ".join(sys.argv).replace(idx, "INDEX_DIR"))
        entry["facts_reader"] = res
        if args.side_by_side:
            r = build_reasoner(model, idx, k=10, decision=decision)
            res = run(r, qs, args.mode, f"steps ({args.mode}) + retrieval")
            res.update(split=args.split, index_dir="INDEX_DIR", decision=decision, reader="steps",
                       command="python " + " ".join(sys.argv).replace(idx, "INDEX_DIR"))
            entry["steps_reader_same_run"] = res
    elif not args.speed_only:
        qs = load_questions(args.split)[: args.n]
        r = build_reasoner(model, args.index_dir, k=10, decision=decision)
        res = run(r, qs, args.mode, f"{args.mode} + retrieval")
        res.update(split=args.split, index_dir=args.index_dir, decision=decision,
                   command="python " + " ".join(sys.argv))
        entry[args.mode if decision == DEFAULT_DECISION else f"{args.mode}|{decision}"] = res
        if args.no_retrieval_too:
            r0 = build_reasoner(model, None, retrieval=False)
            res0 = run(r0, qs, args.mode if args.mode != "gold" else "gold", f"{args.mode}, no retrieval")
            res0.update(split=args.split, command="python " + " ".join(sys.argv))
            entry[f"{args.mode}_no_retrieval"] = res0
    env["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    env["note"] = ("2 CPU cores shared with other jobs; a load average above 2 means contention and "
                   "slower timings than on an idle machine")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(results, indent=1) + "\n")
    summary = {k: {kk: vv for kk, vv in v.items() if kk != "questions"} if isinstance(v, dict) else v
               for k, v in entry.items()}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
