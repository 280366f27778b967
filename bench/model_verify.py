"""Cost of checking an assembled model file by content (``sqa.models.registry.verify_gguf``):
the full sha256 against the sampled hash (``sampled_sha256``), on the registry's GGUF files in
``$SQA_HOME/models``; writes bench/work/model_verify.json or --out (the recorded one:
--out bench/results/model_verify.json).

    python -m bench.model_verify [--repeat 3] [--out bench/results/model_verify.json]

Each measurement is wall seconds on this machine, the file read through the page cache (a first,
untimed pass warms it, so the numbers are the hashing cost, not the disk's); a cold read adds the
disk time of the bytes read (4 MiB for the sample, the whole file for the full hash). Also
timed: ``verify_gguf`` as a run sees it (a record present, file unchanged).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from sqa.models.registry import MODELS, VERIFY_BLOCK, VERIFY_SAMPLES, file_sha256, sampled_sha256, verify_gguf
from sqa.paths import model_cache_dir

OUT = (
    Path(__file__).resolve().parent / "work" / "model_verify.json"
)  # the recorded one: --out bench/results/model_verify.json


def _time(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    results = {}
    for name, spec in MODELS.items():
        path = model_cache_dir() / spec.filename
        if not path.is_file():
            continue
        file_sha256(path)  # warm the page cache (untimed)
        full = _time(lambda: file_sha256(path), args.repeat)
        sample = _time(lambda: sampled_sha256(path), args.repeat)
        assert verify_gguf(spec, path)  # writes the record if missing
        verify = _time(lambda: verify_gguf(spec, path), args.repeat)
        results[name] = {
            "file_bytes": spec.size,
            "full_sha256_s": [round(x, 4) for x in full],
            "sampled_s": [round(x, 5) for x in sample],
            "verify_unchanged_s": [round(x, 5) for x in verify],
            "full_median_s": round(statistics.median(full), 3),
            "sampled_median_s": round(statistics.median(sample), 5),
            "ratio_full_to_sampled": round(statistics.median(full) / statistics.median(sample), 1),
        }
        print(name, results[name])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "what": __doc__.splitlines()[0],
                "command": f"python -m bench.model_verify --repeat {args.repeat} --out {args.out}",
                "samples": VERIFY_SAMPLES,
                "block_bytes": VERIFY_BLOCK,
                "machine": {"cpu_count": __import__("os").cpu_count(), "python": platform.python_version()},
                "page_cache": "warm (a first untimed full read)",
                "results": results,
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
