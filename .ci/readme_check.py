"""CI guard of the README's set-up: run with the Python of a fresh venv that holds exactly what the
README's first command installs (``pip install -e '.[models]'``; no dev extras, so no ``click``).

Probes every case of issue 11 that a newcomer meets first, through the real ``sqa`` script of that
venv: usage errors, bad input, a damaged corpus, leaked passwords; each must exit with status 2 and
print exactly one line on stderr, without a traceback (or, where noted, succeed). Then
``sqa index --corpus strategyqa`` and ``sqa search`` must work, and ``pip list`` must hold no torch
and no ``nvidia-*`` package (a first install without CUDA). Prints a table of every probe
(command, exit status, stderr line) and exits 1 if any probe fails.

Usage: ``VENV/bin/python .ci/readme_check.py`` (from the repository root).
"""

from __future__ import annotations

import fcntl
import gzip
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SQA = str(Path(sys.executable).with_name("sqa"))
PASSWORD = "Pa55-w0rd-x"
failures: list[str] = []
rows: list[tuple[str, int, str, str]] = []


def run(
    label: str,
    args: list,
    *,
    want: int = 2,
    expect: str = "",
    env: dict | None = None,
    cwd=None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess:
    """Run ``sqa ARGS``; check the exit status, and for status 2 exactly one ``error:`` line."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("SQA_DEBUG", None)
    r = subprocess.run(
        [SQA, *map(str, args)], capture_output=True, text=True, env=full_env, cwd=cwd, input=stdin, timeout=600
    )
    lines = r.stderr.splitlines()
    shown = lines[-1] if lines else ""
    problems = []
    if r.returncode != want:
        problems.append(f"exit {r.returncode}, want {want}")
    if "Traceback" in r.stderr:
        problems.append("traceback on stderr")
    if want == 2 and (len(lines) != 1 or not shown.startswith("error: ")):
        problems.append(f"{len(lines)} stderr lines, want one 'error:' line")
    if expect and expect not in r.stderr + r.stdout:
        problems.append(f"missing {expect!r}")
    if PASSWORD in r.stderr + r.stdout:
        problems.append("the password is shown")
    status = "ok" if not problems else "FAIL: " + "; ".join(problems)
    if problems:
        failures.append(f"{label}: {status}\n{r.stderr[-2000:]}")
    rows.append((label, r.returncode, shown, status))
    return r


def main() -> int:
    from sqa.strategyqa import DISTRACTORS_FILE

    import importlib.util

    print(f"sqa: {SQA}; click importable: {importlib.util.find_spec('click') is not None}")
    tmp = Path(tempfile.mkdtemp(prefix="sqa-readme-check-"))
    try:
        with gzip.open(DISTRACTORS_FILE, "rt", encoding="utf-8") as f:
            lines = [x.rstrip("\n") for x in itertools.islice(f, 60)]
        idx = tmp / "idx"

        # usage errors
        run("sqa", [], expect="no command given")
        run("sqa search", ["search"], expect="Missing argument")
        run("sqa search QUERY -k abc", ["search", "black sea", "-k", "abc"], expect="'-k'")
        run("sqa search QUERY --bogus", ["search", "black sea", "--bogus"], expect="--bogus")
        run("sqa bogus", ["bogus"], expect="No such command")

        # the README's index + search
        r = run(
            "sqa index --corpus strategyqa",
            ["index", "--corpus", "strategyqa", "--index-dir", idx],
            want=0,
            expect="in index 9,251",
        )
        r = run(
            "sqa search --json",
            ["search", "maximum depth of the Black Sea", "--json", "-k", "3", "--index-dir", idx],
            want=0,
        )
        if r.returncode == 0 and json.loads(r.stdout)[0]["evidence_id"] != "Black Sea-2":
            failures.append("sqa search: the top hit for the Black Sea query is not Black Sea-2")
        run(
            "sqa search -k 99999999999999999999",
            ["search", "black sea", "-k", "99999999999999999999", "--index-dir", idx],
            expect="10,000",
        )

        # --fresh on a directory that is not an index: refused, nothing deleted
        home = tmp / "home"
        home.mkdir()
        (home / "thesis.tex").write_text("years of work", encoding="utf-8")
        run(
            "sqa index --fresh --index-dir DIR (not an index)",
            ["index", "--corpus", "strategyqa", "--fresh", "--index-dir", home],
            expect="not an sqa index",
        )
        run(
            "sqa index --fresh --index-dir . (not an index)",
            ["index", "--corpus", "strategyqa", "--fresh", "--index-dir", "."],
            cwd=home,
            expect="nothing was deleted",
        )
        if sorted(p.name for p in home.iterdir()) != ["thesis.tex"]:
            failures.append(f"--fresh changed {home}: {sorted(p.name for p in home.iterdir())}")

        # malformed corpus lines: skipped and counted, the build completes
        rows_ = [json.loads(x) for x in lines[:10]]
        bad = [
            {"headers": 5},
            {"section": 7},
            {"section": ["a"]},
            {"headers": "abc"},
            {"para_id": {"a": 1}},
            {"para_id": 1.5},
            {"para_id": True},
        ]
        types = tmp / "types.jsonl"
        types.write_text(
            "\n".join(lines[:10] + [json.dumps({**rows_[i], **b}) for i, b in enumerate(bad)]) + "\n", encoding="utf-8"
        )
        run(
            "sqa index --corpus (wrong field types)",
            ["index", "--corpus", types, "--index-dir", tmp / "types"],
            want=0,
            expect="skipped (malformed) 7, in index 10",
        )

        # damaged / unusable corpus files
        data = gzip.compress(("\n".join(lines) + "\n").encode())
        (tmp / "cut.jsonl.gz").write_bytes(data[: len(data) // 2])
        (tmp / "garbage.jsonl.gz").write_bytes(data + b"garbage!!")
        run(
            "sqa index --corpus truncated.gz",
            ["index", "--corpus", tmp / "cut.jsonl.gz", "--index-dir", tmp / "i1"],
            expect="truncated or corrupt",
        )
        run(
            "sqa index --corpus trailing-garbage.gz",
            ["index", "--corpus", tmp / "garbage.jsonl.gz", "--index-dir", tmp / "i2"],
            expect="truncated or corrupt",
        )
        (tmp / "empty.jsonl").write_text("", encoding="utf-8")
        run(
            "sqa index --corpus empty.jsonl",
            ["index", "--corpus", tmp / "empty.jsonl", "--index-dir", tmp / "i3"],
            expect="no paragraph indexed",
        )

        # a second build of the same index
        with open(idx / ".sqa-build.lock", "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            run(
                "sqa index (a second, concurrent build)",
                ["index", "--corpus", "strategyqa", "--fresh", "--index-dir", idx],
                expect="another `sqa index`",
            )

        # Elasticsearch URLs: never the password, one line
        for label, url, expect in [
            ("SQA_ES_URL=elastic:PW@host:9200 (no scheme)", f"elastic:{PASSWORD}@127.0.0.1:9200", "has no scheme"),
            ("SQA_ES_URL=http://elastic:PW@host:9abc", f"http://elastic:{PASSWORD}@127.0.0.1:9abc", "not a number"),
        ]:
            run(
                f"sqa search --backend elasticsearch, {label}",
                ["search", "black sea", "--backend", "elasticsearch"],
                env={"SQA_ES_URL": url},
                expect=expect,
            )

        # eval input (the step pipeline where a --reader option offers one that needs a trained head)
        help_text = subprocess.run([SQA, "eval", "--help"], capture_output=True, text=True).stdout
        reader = ["--reader", "steps"] if "--reader" in help_text else []
        (tmp / "afile").write_text("mine", encoding="utf-8")
        run(
            "sqa eval --out FILE",
            ["eval", "--split", "dev", "--limit", "1", "--out", tmp / "afile", *reader, "--index-dir", idx],
            expect="is a file",
        )
        (tmp / "latin1.json").write_bytes('{"x": {"answer": true, "decomposition": ["caf\u00e9"]}}'.encode("latin-1"))
        run("sqa eval score NON-UTF8.json", ["eval", "score", tmp / "latin1.json"], expect="not UTF-8")
        run("sqa eval score DIRECTORY", ["eval", "score", tmp], expect="is a directory")
        (tmp / "unknown.json").write_text('{"not-a-qid": {"answer": true}}', encoding="utf-8")
        run("sqa eval score (unknown qids)", ["eval", "score", tmp / "unknown.json"], expect="not StrategyQA questions")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # no CUDA on a first install (issue 33): the README's set-up resolves no torch and no nvidia-* package
    listed = subprocess.run([sys.executable, "-m", "pip", "list", "--format=json"], capture_output=True, text=True)
    names = sorted(p["name"].lower() for p in json.loads(listed.stdout or "[]"))
    heavy = [n for n in names if n == "torch" or n.startswith("nvidia-")]
    rows.append(
        (
            "pip list: no torch, no nvidia-*",
            listed.returncode,
            ", ".join(heavy) or f"{len(names)} packages",
            "ok" if listed.returncode == 0 and not heavy else "FAIL: torch/CUDA installed",
        )
    )
    if listed.returncode != 0 or heavy:
        failures.append(f"the README's set-up installed {heavy or 'nothing readable (pip list failed)'}")

    width = max(len(r[0]) for r in rows)
    print(f"\n{'probe':<{width}}  exit  stderr (last line)")
    for label, code, line, status in rows:
        print(f"{label:<{width}}  {code:>4}  {line[:150]}" + ("" if status == "ok" else f"   <-- {status}"))
    if failures:
        print(f"\n{len(failures)} README-setup probe(s) failed:", file=sys.stderr)
        for f in failures:
            print(f"- {f}", file=sys.stderr)
        return 1
    print(f"\nall {len(rows)} README-setup probes passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
