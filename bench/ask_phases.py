"""Where the time of ``sqa ask`` goes, phase by phase, beside llama.cpp reading exactly the same
tokens (the limit); merges its record into bench/work/ask.json or --out under
``["qwen2.5-coder-1.5b"]["phases"]`` (the recorded one: bench/results/ask.json; also
``python -m bench.ask --phases``).

    python -m bench.ask_phases [-n 5] [--runs 3] [--index-dir DIR] [--reread RUN [--limit 20]] [--out FILE]

Two parts, each a fresh process running the real command (``sqa.cli.main``) with timers wrapped
around sqa's own functions (nothing of sqa is changed):
- ``one``: ``sqa ask QUESTION`` for each of the first ``n`` dev questions, ``--runs`` times: python
  start, imports, argument parsing, index open, model load, retrieval, fact selection, each prompt
  read (new tokens, seconds), head, drawing, exit.
- ``session``: ``sqa ask -`` with the same ``n`` questions on stdin: seconds from one answer to the
  next (the first includes the model load).
After each answer the same process resets the model to the state the answer started from and reads
each prompt's new tokens once more as one llama.cpp batch (logits of the last token only, the same
thread count): ``limit_s``. ``ratio`` is sqa's reading time over it. A third number per question,
``embeddings_batch_s``, reads the facts prompt's new tokens in embeddings mode, the way sqa read
before (every token of the batch an output). The load average (``/proc/loadavg``) is recorded
before and after each part: above 2 the two cores were shared and every timing is slower.
``--reread RUN``: ``sqa eval --split dev --limit N --preset facts`` now, its P(yes) compared
question by question with the recorded run ``RUN`` (largest and mean difference, answers flipped).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "work" / "ask.json"
MODEL = "qwen2.5-coder-1.5b"


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def child(mode: str, questions: list[str], index_dir: str | None, spawned: float) -> dict:  # noqa: C901
    """Run ``sqa ask`` in this process with timers; the phase record (see the module doc)."""
    t_start = time.time()
    marks: dict = {"python_start_s": t_start - spawned}
    t = time.perf_counter()
    import sqa.cli  # noqa: F401  (what `sqa ask` imports before parsing)
    from sqa.cli import main

    marks["imports_s"] = time.perf_counter() - t
    import sqa.api.reader as api_reader
    import sqa.facts.reader as facts_reader
    import sqa.models.llamacpp as llamacpp
    import sqa.pipeline as pipeline
    import sqa.render.answers as answers

    phases: dict[str, float] = {}
    per_q: list[dict] = []
    cur: dict = {}
    models: list = []
    t_main = [0.0]

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                phases[name] = phases.get(name, 0.0) + time.perf_counter() - t0

        return wrapper

    orig_init = llamacpp.LlamaCppModel.__init__

    def model_init(self, *a, **kw):
        t0 = time.perf_counter()
        orig_init(self, *a, **kw)
        phases["model_load_s"] = phases.get("model_load_s", 0.0) + time.perf_counter() - t0
        models.append(self)

    llamacpp.LlamaCppModel.__init__ = model_init
    pipeline.open_index = timed("index_open_s", pipeline.open_index)
    orig_prepare = llamacpp.LlamaCppModel._prepare

    def prepare(self, tokens):
        before = [list(s) for s in self._slots]
        t0 = time.perf_counter()
        out = orig_prepare(self, tokens)
        if "reads" in cur:
            cur["reads"].append({"tokens": tokens, "before": before, "s": time.perf_counter() - t0})
        return out

    llamacpp.LlamaCppModel._prepare = prepare
    orig_hidden = llamacpp.LlamaCppModel.hidden_states

    def hidden(self, prompts):
        t0 = time.perf_counter()
        out = orig_hidden(self, prompts)
        cur["read_s"] = cur.get("read_s", 0.0) + time.perf_counter() - t0
        return out

    llamacpp.LlamaCppModel.hidden_states = hidden
    orig_select = facts_reader.FactsReader._select

    def select(self, q, steps=()):
        ret = self.retriever
        t0 = time.perf_counter()
        if ret is not None and not hasattr(ret, "_timed"):
            ret.retrieve = timed("retrieve", ret.retrieve)
            ret._timed = True
        before = phases.get("retrieve", 0.0)
        out = orig_select(self, q, steps)
        total = time.perf_counter() - t0
        cur["retrieval_s"] = phases.get("retrieve", 0.0) - before
        cur["fact_selection_s"] = total - cur["retrieval_s"]
        return out

    facts_reader.FactsReader._select = select
    orig_answer = facts_reader.FactsReader.answer_features

    def answer_features(self, q, qf):
        t0 = time.perf_counter()
        r = orig_answer(self, q, qf)
        cur["head_s"] = time.perf_counter() - t0
        cur["n_facts"] = len(qf.facts)
        cur["readouts"] = sorted(qf.log_odds)
        return r

    facts_reader.FactsReader.answer_features = answer_features
    orig_features = facts_reader.FactsReader.features

    def features(self, q):
        cur.clear()
        cur["reads"] = []
        cur["t0"] = time.perf_counter()
        return orig_features(self, q)

    facts_reader.FactsReader.features = features
    orig_printer = answers.asked_printer

    def printer(*a, **kw):
        show = orig_printer(*a, **kw)

        def timed_show(asked):
            t0 = time.perf_counter()
            show(asked)
            rec = {k: v for k, v in cur.items() if k not in ("reads", "t0")}
            rec["drawing_s"] = time.perf_counter() - t0
            rec["answered_at_s"] = time.perf_counter() - t_main[0]
            rec["p_yes"] = asked.result.p_yes
            rec["prompt_reads"] = limit_reads(models[0], cur["reads"]) if models and cur.get("reads") else []
            rec["limit_s"] = sum(r["limit_s"] for r in rec["prompt_reads"])
            rec["ratio"] = rec["read_s"] / rec["limit_s"] if rec.get("limit_s") else None
            rec["bench_s"] = time.perf_counter() - t_main[0] - rec["answered_at_s"]  # not sqa's time
            per_q.append(rec)

        return timed_show

    answers.asked_printer = printer
    build = timed("pipeline_build_s", api_reader.Reader.pipeline.fget)

    def pipeline_first(self):
        marks.setdefault("until_load_s", time.perf_counter() - t_main[0])  # parsing, imports, head check
        return build(self)

    api_reader.Reader.pipeline = property(pipeline_first)

    argv = ["ask", questions[0] if mode == "one" else "-"]
    if index_dir:
        argv += ["--index-dir", index_dir]
    if mode == "session":
        sys.stdin = io.StringIO("".join(q + "\n" for q in questions))
    sys.stdout = io.StringIO()  # the drawing is timed, not shown
    t_main[0] = time.perf_counter()
    rc = main(argv)
    marks["main_s"] = time.perf_counter() - t_main[0]
    sys.stdout = sys.__stdout__
    # the embeddings-mode read of the facts prompt's new tokens, as sqa read it before
    if models and per_q:
        m = models[0]
        last = per_q[-1]["prompt_reads"][-1] if per_q[-1]["prompt_reads"] else None
        if last:
            toks = last["_tokens"]
            m.back_to_prefixes()
            m.ctx.set_embeddings_mode(True)
            t0 = time.perf_counter()
            orig_prepare(m, toks)
            per_q[-1]["embeddings_batch_s"] = time.perf_counter() - t0
            m.ctx.set_embeddings_mode(False)
    for rec in per_q:
        for r in rec["prompt_reads"]:
            r.pop("_tokens", None)
    return {"rc": rc, **marks, "phases": phases, "questions": per_q, "t_end": time.time()}


def limit_reads(m, reads: list[dict]) -> list[dict]:
    """Each distinct prompt read of one answer (the long reads, not the one-token re-reads) read
    again from the same KV cache state as one llama.cpp batch: its new tokens and seconds."""
    out = []
    seen = set()
    for r in reads:
        key = tuple(r["tokens"])
        if key in seen:
            continue
        seen.add(key)
        # the slots as they were before this read
        for s, toks in enumerate(r["before"]):
            lcp = _lcp(m._slots[s], toks)
            m.ctx.memory_seq_rm(s, lcp, -1)
            del m._slots[s][lcp:]
            if len(m._slots[s]) < len(toks):
                m._decode_batches(toks[len(m._slots[s]) :], len(m._slots[s]), s)
                m._slots[s].extend(toks[len(m._slots[s]) :])
        best = max(range(len(r["before"])), key=lambda s: _lcp(r["before"][s], r["tokens"]))
        lcp = min(_lcp(r["before"][best], r["tokens"]), len(r["tokens"]) - 1)
        m.ctx.memory_seq_rm(best, lcp, -1)
        del m._slots[best][lcp:]
        new = r["tokens"][lcp:]
        t0 = time.perf_counter()
        m._decode_batches(new, lcp, best)
        m._last_logits()
        s = time.perf_counter() - t0
        m._slots[best].extend(new)
        out.append({"new_tokens": len(new), "limit_s": s, "_tokens": r["tokens"]})
    return out


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def run_child(mode: str, questions: list[str], index_dir: str | None) -> dict:
    """One fresh process of :func:`child`; its record plus ``exit_s`` and ``wall_s``."""
    spawned = time.time()
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "bench.ask_phases", "--child", mode, "--spawned", repr(spawned)]
    if index_dir:
        cmd += ["--index-dir", index_dir]
    r = subprocess.run(cmd, input=json.dumps(questions), capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"child {mode} failed:\n{r.stderr[-3000:]}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    rec["exit_s"] = time.time() - rec.pop("t_end")
    rec["wall_s"] = wall
    return rec


def med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def sqa_wall(r: dict) -> float:
    """Wall seconds of one command less what the bench itself read after the answer."""
    q = r["questions"][0]
    return r["wall_s"] - q.get("bench_s", 0.0) - q.get("embeddings_batch_s", 0.0)


def summarise_one(recs: list[dict]) -> dict:
    """Median seconds of each phase over the one-question commands (``other``: what no phase
    covers, e.g. building the answer object and the process's own bookkeeping)."""
    q = [r["questions"][0] for r in recs]
    rows = {
        "python_start": [r["python_start_s"] for r in recs],
        "imports": [r["imports_s"] for r in recs],
        "argument parsing, imports of the command, head check": [r.get("until_load_s") for r in recs],
        "index_open": [r["phases"].get("index_open_s") for r in recs],
        "model_load": [r["phases"].get("model_load_s") for r in recs],
        "reader_build_other": [
            r["phases"].get("pipeline_build_s", 0)
            - r["phases"].get("model_load_s", 0)
            - r["phases"].get("index_open_s", 0)
            for r in recs
        ],
        "retrieval": [x.get("retrieval_s") for x in q],
        "fact_selection": [x.get("fact_selection_s") for x in q],
        "prompt_reads": [x.get("read_s") for x in q],
        "llama_cpp_same_tokens (limit)": [x.get("limit_s") for x in q],
        "head": [x.get("head_s") for x in q],
        "drawing": [x.get("drawing_s") for x in q],
        "exit": [r["exit_s"] for r in recs],
        "wall (sqa's)": [sqa_wall(r) for r in recs],
    }
    phase_keys = ("retrieval_s", "fact_selection_s", "read_s", "head_s", "drawing_s")
    other = [
        sqa_wall(r)
        - r["python_start_s"]
        - r["imports_s"]
        - r.get("until_load_s", 0)
        - r["phases"].get("pipeline_build_s", 0)
        - sum(x.get(k, 0) for k in phase_keys)
        - r["exit_s"]
        for r, x in zip(recs, q)
    ]
    out = {k: med(v) for k, v in rows.items()}
    out["other"] = med(other)
    return out


def traces(run: Path) -> dict[str, dict]:
    """qid -> trace record of a run folder (traces.jsonl or traces.jsonl.xz)."""
    import lzma

    f = run / "traces.jsonl.xz"
    opener = lzma.open if f.exists() else open
    f = f if f.exists() else run / "traces.jsonl"
    with opener(f, "rt") as fh:
        return {r["qid"]: r for r in map(json.loads, fh) if r.get("qid")}


def reread(run: Path, limit: int, index_dir: str | None) -> dict:
    """``sqa eval --split dev --limit LIMIT --preset facts`` now against the recorded ``run``."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-c", "import sys; from sqa.cli import main; sys.exit(main())", "eval", "--split", "dev"]
        cmd += ["--limit", str(limit), "--preset", "facts", "--out", f"{tmp}/run"]
        cmd += ["--index-dir", index_dir] if index_dir else []
        load0, t = loadavg(), time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise SystemExit(f"sqa eval failed:\n{r.stderr[-3000:]}")
        wall = time.perf_counter() - t
        now, then = traces(Path(tmp) / "run"), traces(run)
    d = [abs(now[q]["p_yes"] - then[q]["p_yes"]) for q in now]
    return {
        "command": f"sqa eval --split dev --limit {limit} --preset facts",
        "recorded_run": run.name,
        "questions": len(d),
        "p_yes_max_abs_diff": round(max(d), 4),
        "p_yes_mean_abs_diff": round(sum(d) / len(d), 4),
        "within_0.05": sum(x <= 0.05 for x in d),
        "answers_flipped": sum(now[q]["answer"] != then[q]["answer"] for q in now),
        "wall_s": round(wall, 1),
        "loadavg": [load0, loadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="dev questions (the first n)")
    ap.add_argument("--runs", type=int, default=3, help="one-question commands per question")
    ap.add_argument("--index-dir", default=None)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--reread", type=Path, help="a recorded dev run of the facts preset to compare P(yes) with")
    ap.add_argument("--limit", type=int, default=20, help="with --reread: dev questions re-read")
    ap.add_argument("--child", choices=["one", "session"], help=argparse.SUPPRESS)
    ap.add_argument("--spawned", type=float, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        rec = child(a.child, json.loads(sys.stdin.read()), a.index_dir, a.spawned)
        print(json.dumps(rec))
        return 0
    from sqa.strategyqa import load_questions

    questions = [q.question for q in load_questions("dev")[: a.n]]
    env = {"cpus": len(os.sched_getaffinity(0)), "machine": platform.machine(), "python": platform.python_version()}
    load0 = loadavg()
    ones = [run_child("one", [q], a.index_dir) for _ in range(a.runs) for q in questions[:1]]
    ones += [run_child("one", [q], a.index_dir) for q in questions[1:]]
    load1 = loadavg()
    session = run_child("session", questions, a.index_dir)
    load2 = loadavg()
    at = [q["answered_at_s"] for q in session["questions"]]
    spent = [q["bench_s"] for q in session["questions"]]
    gaps = [at[0]] + [b - x - s for x, b, s in zip(at, at[1:], spent)]
    later = gaps[1:]
    result = {
        "command": f"python -m bench.ask_phases -n {a.n} --runs {a.runs}",
        "env": env,
        "one_question": {
            "loadavg_before": load0,
            "loadavg_after": load1,
            "phases_median_s": summarise_one(ones[: a.runs]),
            "ratio_reads_to_limit": [round(r["questions"][0]["ratio"], 3) for r in ones if r["questions"][0]["ratio"]],
            "embeddings_batch_s_vs_limit_s": [
                (
                    round(r["questions"][0].get("embeddings_batch_s", 0), 3),
                    round(r["questions"][0]["prompt_reads"][-1]["limit_s"], 3),
                )
                for r in ones
                if r["questions"][0]["prompt_reads"]
            ],
            "wall_s": [round(sqa_wall(r), 2) for r in ones],
            "runs": ones,
        },
        "session": {
            "loadavg_before": load1,
            "loadavg_after": load2,
            "seconds_to_each_answer": [round(g, 2) for g in gaps],
            "later_questions_max_s": round(max(later), 2) if later else None,
            "later_questions_median_s": med(later),
            "ratio_reads_to_limit": [round(q["ratio"], 3) for q in session["questions"] if q["ratio"]],
            "p_yes_equal_to_one_question": [
                abs(q["p_yes"] - o["questions"][0]["p_yes"]) < 1e-9
                for q, o in zip(session["questions"][1:], ones[a.runs :])
            ],
            "run": session,
        },
    }
    if a.reread:
        result["reread"] = reread(a.reread, a.limit, a.index_dir)
        result["command"] += f" --reread {a.reread} --limit {a.limit}"
    a.out.parent.mkdir(parents=True, exist_ok=True)
    recorded = json.loads(a.out.read_text()) if a.out.exists() else {}
    recorded.setdefault(MODEL, {})["phases"] = result
    a.out.write_text(json.dumps(recorded, indent=1) + "\n")
    shown = {k: v for k, v in result["session"].items() if k != "run"}
    print(
        json.dumps(
            {
                "one_question": result["one_question"]["phases_median_s"],
                "session": shown,
                "reread": result.get("reread"),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
