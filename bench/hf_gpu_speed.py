"""How fast the transformers reader (``sqa.models.hf.HFModel``) reads the answer head's prompts on a
GPU, at the shipped model's size, with no download (the device machines reach nothing outside).

    python -m bench.hf_gpu_speed --out bench/results/hf_gpu_speed.json     # default --out: bench/work/

The model is Qwen2.5-1.5B's shape (28 layers, hidden 1536, its 151,936-token vocabulary:
``tests/tiny_hf.qwen_1_5b_config``) with random bfloat16 weights, saved and loaded through
``from_pretrained`` as a real checkpoint is; the tokenizer is the tiny test one, and each prompt is
" Yes" repeated to the token count of a real reader prompt (``bench/reader_prompt_lengths.json``: the
plain prompt and the facts prompt after 1..5 facts, first 200 train-2061 questions, Qwen2.5
tokenizer). Speed does not depend on the weights' values, so the seconds are those of the real
model's read; the read-outs themselves mean nothing.

Rows (each timed over all questions):
- ``hidden_states`` per question (6 prompts a call: what ``read_question`` and ``sqa train-head``
  send today) and across questions in batches of 16 and 32 prompts;
- the same without ``logits_to_keep`` (every position's logits computed: the code before session 24);
- ``generate`` of 64 tokens (a decomposition's length) at the facts prompt's median length, 8
  prompts one at a time and 32 as one batch.

Every batch shape is run once untimed first; the two logits settings are then timed twice each,
alternated, so that neither gains from the order.

Writes a JSON with the device, versions, and per row: seconds, prompts/s, seconds a question, and peak
GPU memory. Exits 2 with one line when no CUDA device is present (``--device cpu`` with a small
``--questions`` runs it on CPU; ``--smoke`` shrinks the model to check the script).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--out",
        type=Path,
        default=HERE / "work" / "hf_gpu_speed.json",
        help="results file (default bench/work/hf_gpu_speed.json; the recorded one is bench/results/hf_gpu_speed.json)",
    )
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="2 layers x 64 wide (same vocabulary): checks the script, times nothing real",
    )
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import Qwen2ForCausalLM

    from sqa.models.hf import HFModel
    from tests.tiny_hf import build_tiny_checkpoint, qwen_1_5b_config  # the test checkpoint's tokenizer, the 1.5B shape

    if a.device == "cuda" and not torch.cuda.is_available():
        print("hf_gpu_speed: no CUDA device here (pass --device cpu --questions 2 for a smoke test)", file=sys.stderr)
        return 2
    lengths = json.loads((HERE / "reader_prompt_lengths.json").read_text())["lengths"][: a.questions]
    tmp = Path(tempfile.mkdtemp())
    ckpt = build_tiny_checkpoint(tmp / "ckpt")  # tokenizer files (and a tiny model, replaced below)
    torch.manual_seed(0)
    t = time.perf_counter()
    with torch.device(a.device):
        small = (
            dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4) if a.smoke else {}
        )
        cfg = qwen_1_5b_config(vocab_size=151936, **small)
        big = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    big.config.eos_token_id = big.config.bos_token_id = 0
    big.save_pretrained(ckpt)
    del big
    build_s = time.perf_counter() - t
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    def prompts_of(ls):
        return [" Yes" * n for n in ls]

    rows = []

    def timed(name, model, fn, n_prompts):
        if a.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        sync()
        t = time.perf_counter()
        fn()
        sync()
        s = time.perf_counter() - t
        row = {
            "row": name,
            "batch_size": model.batch_size,
            "last_only": bool(model._last_only),
            "seconds": round(s, 3),
            "prompts": n_prompts,
            "prompts_per_s": round(n_prompts / s, 1),
        }
        if name.startswith("hidden_states"):
            row["seconds_per_question"] = round(s / len(lengths), 4)
        if a.device == "cuda":
            row["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)

    t = time.perf_counter()
    hf = HFModel(str(ckpt), device=a.device, batch_size=6)
    load_s = time.perf_counter() - t
    n_tok = len(hf.tokenizer(" Yes" * 100, add_special_tokens=False)["input_ids"])
    assert n_tok == 100, f"' Yes' is not one token in the test tokenizer ({n_tok} for 100)"
    all_prompts = [p for ls in lengths for p in prompts_of(ls)]
    for b in (6, 16, 32):  # warm-up: every batch shape once, untimed (allocator, kernels' first calls)
        hf.batch_size = b
        hf.hidden_states(all_prompts)
    full = hf._last_only
    for rep in (1, 2):  # both settings twice, alternated, so neither is favoured by order
        for last_only in (True, False):
            hf._last_only = full if last_only else {}
            hf.batch_size = 6
            timed(
                f"hidden_states, one question (6 prompts) a call [{rep}]",
                hf,
                lambda: [hf.hidden_states(prompts_of(ls)) for ls in lengths],
                len(all_prompts),
            )
            for b in (16, 32):
                hf.batch_size = b
                timed(
                    f"hidden_states, batches of {b} across questions [{rep}]",
                    hf,
                    lambda: hf.hidden_states(all_prompts),
                    len(all_prompts),
                )
    hf._last_only = full
    median_facts = sorted(ls[-1] for ls in lengths)[len(lengths) // 2]
    gen_prompts = [" Yes" * median_facts] * 32
    hf.batch_size = 1
    hf.generate(gen_prompts[:1], 4)
    timed("generate 64 tokens, one prompt a call (8 prompts)", hf, lambda: hf.generate(gen_prompts[:8], 64), 8)
    hf.batch_size = 32
    hf.generate(gen_prompts, 4)
    timed("generate 64 tokens, one batch of 32", hf, lambda: hf.generate(gen_prompts, 64), 32)

    dev = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    out = {
        "about": " ".join(__doc__.strip().split("\n\n")[0].split()),
        "command": "python -m bench.hf_gpu_speed --out "
        f"{a.out} --questions {a.questions} --device {a.device}" + (" --smoke" if a.smoke else ""),
        "device": dev,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "questions": len(lengths),
        "model": ("SMOKE: 2 layers x 64" if a.smoke else "Qwen2.5-1.5B shape")
        + ", random bfloat16 weights (tests/tiny_hf.qwen_1_5b_config)",
        "build_and_save_seconds": round(build_s, 1),
        "load_seconds": round(load_s, 1),
        "rows": rows,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
