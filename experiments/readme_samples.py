"""The README's sample outputs, produced by the commands they show: each ```text block whose first
line is ``$ sqa ...`` is the output of that command (run at 100 columns, trailing spaces dropped).

    python -m experiments.readme_samples [--index-dir DIR]            # rewrite README.md's samples
    python -m experiments.readme_samples --check [--index-dir DIR]    # exit 1, naming what differs

The commands run with a fresh ``$SQA_HOME`` (the real one's ``models`` linked in, so no head of the
user's answers in place of the shipped one) and the index of ``--index-dir`` (default: the real
``$SQA_HOME/index``). ``--check`` compares with :func:`differences`: the seconds a command took
are left out, and a number written with decimals may move by ``TOLERANCE`` (the last digit of a
P(yes) on another machine's llama.cpp build); everything else must be equal.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
TOLERANCE = 0.02
BLOCK = re.compile(r"```text\n(\$ (sqa [^\n]*))\n(.*?)```", re.S)
SECONDS = re.compile(r"\(\d+(?:\.\d+)? s, ")
NUMBER = re.compile(r"\d+\.\d+|\d+")


def samples(text: str) -> list[re.Match]:
    """The README's sample blocks: group 2 the command, group 3 the output shown."""
    return list(BLOCK.finditer(text))


def run_sample(command: str, index_dir: str | Path | None = None) -> str:
    """The stdout of ``command`` (``sqa ...``) at 100 columns, with a fresh ``$SQA_HOME`` (see the
    module doc), each line's trailing spaces dropped. Raises RuntimeError when it fails."""
    from sqa.paths import sqa_home

    real = sqa_home()
    index = Path(index_dir) if index_dir else real / "index"
    with tempfile.TemporaryDirectory() as home:
        (real / "models").mkdir(parents=True, exist_ok=True)
        (Path(home) / "models").symlink_to(real / "models", target_is_directory=True)
        env = {**os.environ, "SQA_HOME": home, "COLUMNS": "100", "TERM": "dumb"}
        env.pop("SQA_DEBUG", None)
        args = shlex.split(command)[1:] + ["--index-dir", str(index)]
        code = "import sys; from sqa.cli import main; sys.exit(main())"
        r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{command}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return "\n".join(line.rstrip() for line in r.stdout.rstrip("\n").splitlines()) + "\n"


def differences(shown: str, now: str) -> list[str]:
    """What differs between a sample as shown and as printed now: one line per difference (empty:
    the same), with the seconds taken left out and numbers with decimals equal within ``TOLERANCE``."""
    a, b = SECONDS.sub("(s, ", shown), SECONDS.sub("(s, ", now)
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return [f"the text differs:\n--- shown\n{shown}--- printed now\n{now}"]
    out = []
    for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)):
        close = "." in x and "." in y and abs(float(x) - float(y)) <= TOLERANCE
        if x != y and not close:
            out.append(f"{x} shown, {y} printed now")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a sample differs")
    ap.add_argument("--index-dir", default=None)
    a = ap.parse_args(argv)
    text = README.read_text()
    bad = 0
    for m in reversed(samples(text)):
        now = run_sample(m.group(2), a.index_dir)
        if a.check:
            diff = differences(m.group(3), now)
            bad += bool(diff)
            for line in diff:
                print(f"README.md `{m.group(2)}`: {line}", file=sys.stderr)
        else:
            text = text[: m.start(3)] + now + text[m.end(3) :]
    if not a.check:
        README.write_text(text)
        print(f"wrote {README}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
