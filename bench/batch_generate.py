"""Is decoding several questions' sequences in one llama.cpp batch faster on this CPU than one
after another (issue 47 item 6)? Writes bench/work/batch_generate.json or --out (the recorded one:
--out bench/results/batch_generate.json).

    python -m bench.batch_generate [--model qwen2.5-coder-1.5b] [--sizes 1,2,4,8] [--tokens 48]
        [--variant wei] [--repeat 3] [--threads 1] [--out bench/results/batch_generate.json]

Workload: ``sqa.methods.prompts.cot_prompt`` (Wei et al.'s six exemplars: the same 358-token head
for every question on the 1.5B's tokenizer; ``--variant dragin``: DRAGIN's demonstrations) for
the first B dev questions. The head is read once into KV sequence 0 and copied
(``llama_memory_seq_cp``, which shares the cells in the unified cache) into sequence 1..B before
each variant, so both variants read only each question's own tail:

- ``sequential``: per question, read its tail into its sequence, then ``--tokens`` greedy tokens
  one decode each (as ``LlamaCppModel.complete`` does for one prompt);
- ``batched``: every tail in one decode, then per step one decode of B tokens (one per sequence,
  each with its own position and sequence id).

Exactly ``--tokens`` tokens are generated per question (end-of-generation is not a stop here), so
both variants do the same work; tokens/s counts generated tokens over the generation wall time
(``gen_s``), ``wall_s`` includes reading the tails. The variants alternate (sequential, batched,
sequential, ...) per B and repeat ``--repeat`` times; medians are reported. ``/proc/loadavg``
(the 1-minute average) is read before and after every measurement: other jobs on the machine
change the numbers. ``same_tokens``: whether the batched greedy tokens equal the sequential ones
for each question (llama.cpp's batched matrix products may round differently), and
``first_difference``: the first token index where they part (None: never).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import sqa
from sqa.methods.prompts import cot_prompt
from sqa.models.llamacpp import LlamaCppModel
from sqa.models.registry import resolve_gguf

OUT = Path(__file__).resolve().parent / "work" / "batch_generate.json"  # recorded: bench/results/batch_generate.json


def loadavg() -> float:
    """The 1-minute load average (``/proc/loadavg``; NaN where there is none)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


class Bench:
    """The context of one loaded model with the shared head in sequence 0."""

    def __init__(self, model: LlamaCppModel, head: list[int], tails: list[list[int]], threads: int, read: int):
        from cyllama.llama import llama_cpp as L

        self.L, self.m, self.ctx, self.head, self.tails = L, model, model.ctx, head, tails
        self.threads, self.read = threads, read
        sp = L.LlamaSamplerChainParams()
        sp.no_perf = True
        self.greedy = L.LlamaSampler(sp)
        self.greedy.add_greedy()
        self.ctx.memory_seq_rm(-1, 0, -1)
        self.ctx.set_n_threads(model.n_threads, model.n_threads)
        self._decode([(t, i, 0, i == len(head) - 1) for i, t in enumerate(head)])

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """One ``llama_decode`` of (token, position, sequence, wants logits) items."""
        batch = self.L.LlamaBatch(n_tokens=len(items), embd=0, n_seq_max=1)
        for tok, pos, seq, want in items:
            batch.add(tok, pos, [seq], want)
        self.ctx.decode(batch)

    def _fresh(self, b: int) -> None:
        """Sequences 1..b hold the head only (a copy of sequence 0's cells)."""
        for s in range(1, b + 1):
            self.ctx.memory_seq_rm(s, 0, -1)
            self.ctx.memory_seq_cp(0, s, 0, -1)

    def sequential(self, b: int, n_tokens: int) -> dict:
        self._fresh(b)
        out, t0, gen = [], time.perf_counter(), 0.0
        n0 = len(self.head)
        for s in range(1, b + 1):
            tail = self.tails[s - 1]
            self.ctx.set_n_threads(self.read, self.read)
            self._decode([(t, n0 + i, s, i == len(tail) - 1) for i, t in enumerate(tail)])
            self.ctx.set_n_threads(self.threads, self.threads)
            g0 = time.perf_counter()
            pos, toks = n0 + len(tail), []
            for _ in range(n_tokens):
                tok = int(self.greedy.sample(self.ctx, -1))
                toks.append(tok)
                self._decode([(tok, pos, s, True)])
                pos += 1
            gen += time.perf_counter() - g0
            out.append(toks)
        return {"wall_s": time.perf_counter() - t0, "gen_s": gen, "tokens": out}

    def batched(self, b: int, n_tokens: int) -> dict:
        self._fresh(b)
        t0 = time.perf_counter()
        n0 = len(self.head)
        items, rows = [], []
        for s in range(1, b + 1):
            tail = self.tails[s - 1]
            items += [(t, n0 + i, s, i == len(tail) - 1) for i, t in enumerate(tail)]
            rows.append(len(items) - 1)
        self.ctx.set_n_threads(self.read, self.read)
        self._decode(items)
        self.ctx.set_n_threads(self.threads, self.threads)
        g0 = time.perf_counter()
        pos = [n0 + len(self.tails[s]) for s in range(b)]
        out: list[list[int]] = [[] for _ in range(b)]
        for _ in range(n_tokens):
            step = []
            for s in range(b):
                tok = int(self.greedy.sample(self.ctx, rows[s]))
                out[s].append(tok)
                step.append((tok, pos[s], s + 1, True))
                pos[s] += 1
            rows = list(range(b))
            self._decode(step)
        gen = time.perf_counter() - g0
        return {"wall_s": time.perf_counter() - t0, "gen_s": gen, "tokens": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--sizes", default="1,2,4,8", help="batch sizes B, comma-separated")
    ap.add_argument("--tokens", type=int, default=48, help="generated tokens per question")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variant", default="wei", help="cot_prompt variant: wei (358-token head) or dragin")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads of the generation decodes")
    ap.add_argument("--read-threads", type=int, default=0, help="threads of the prompt-tail reads (0: --threads)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    questions = [q.question for q in sqa.load_questions("dev")[: max(sizes)]]
    prompts = [cot_prompt(q, a.variant) for q in questions]
    t = time.perf_counter()
    model = LlamaCppModel(resolve_gguf(a.model), name=a.model, n_ctx=4096, n_slots=max(sizes) + 1)
    load_s = time.perf_counter() - t
    toks = [model.tokenize(p) for p in prompts]
    n_head = min(len(t) for t in toks) - 1  # every tail keeps at least one token
    for t2 in toks[1:]:
        n_head = min(n_head, next((i for i, (x, y) in enumerate(zip(toks[0], t2)) if x != y), n_head))
    head, tails = toks[0][:n_head], [tk[n_head:] for tk in toks]
    bench = Bench(model, head, tails, a.threads, a.read_threads or a.threads)
    rows = []
    for rep in range(a.repeat):
        for b in sizes:
            for variant in ("sequential", "batched") if rep % 2 == 0 else ("batched", "sequential"):
                la0 = loadavg()
                r = getattr(bench, variant)(b, a.tokens)
                la1 = loadavg()
                rows.append(
                    {
                        "repeat": rep,
                        "B": b,
                        "variant": variant,
                        "wall_s": round(r["wall_s"], 3),
                        "gen_s": round(r["gen_s"], 3),
                        "tokens_per_s": round(b * a.tokens / r["gen_s"], 2),
                        "load_before": la0,
                        "load_after": la1,
                        "tokens": r["tokens"],
                    }
                )
                print(
                    f"rep {rep} B={b} {variant:10s} gen {r['gen_s']:6.2f}s wall {r['wall_s']:6.2f}s "
                    f"{b * a.tokens / r['gen_s']:6.2f} tok/s load {la0:.2f}->{la1:.2f}",
                    flush=True,
                )
    summary = []
    for b in sizes:
        s = {"B": b}
        for v in ("sequential", "batched"):
            rs = [r for r in rows if r["B"] == b and r["variant"] == v]
            s[v] = {
                "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rs),
                "gen_s": statistics.median(r["gen_s"] for r in rs),
                "wall_s": statistics.median(r["wall_s"] for r in rs),
                "load": statistics.median(x for r in rs for x in (r["load_before"], r["load_after"])),
            }
        s["speedup"] = round(s["batched"]["tokens_per_s"] / s["sequential"]["tokens_per_s"], 2)
        seq = next(r["tokens"] for r in rows if r["B"] == b and r["variant"] == "sequential")
        bat = next(r["tokens"] for r in rows if r["B"] == b and r["variant"] == "batched")
        s["same_tokens"] = [x == y for x, y in zip(seq, bat)]
        # per question: the index of the first generated token that differs (None: all equal)
        s["first_difference"] = [
            next((i for i, (u, v) in enumerate(zip(x, y)) if u != v), None) for x, y in zip(seq, bat)
        ]
        summary.append(s)
        print(
            f"B={b}: x{s['speedup']} batched/sequential tokens/s; same greedy tokens {s['same_tokens']}, "
            f"first difference at {s['first_difference']}"
        )
    for r in rows:
        r.pop("tokens")
    record = {
        "what": "greedy generation of B CoT questions: one llama.cpp batch per step vs one question after another",
        "model": a.model,
        "prompt": f"cot_prompt(question, {a.variant!r})",
        "head_tokens": len(head),
        "tail_tokens": [len(t) for t in tails],
        "generated_per_question": a.tokens,
        "threads_generate": a.threads,
        "threads_read": a.read_threads or a.threads,
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "load_s": round(load_s, 2),
        "summary": summary,
        "runs": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
