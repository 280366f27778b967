"""Guards of the repository around the package (issue 33): the clone stays small, the benchmarks and
experiments use sqa's public API only and write to ignored folders by default, the README stays
short, and the generated results (docs/results.md, the README's table) match bench/results/.

Reads the git checkout (``git ls-files``, ``git check-ignore``); no model, no index.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000
MAX_FILE = 5 * MB  # a tracked file over this, outside sqa/_data/, fails
MAX_TOTAL = 60 * MB  # all tracked files together
README_LINES = 150
SCRIPT_DIRS = ("bench", "experiments")


def _git(*args: str) -> str:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (the repository guards read git ls-files)")
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _tracked() -> list[tuple[str, int]]:
    """(path, bytes) of every tracked file present in the working tree."""
    out = []
    for rel in _git("ls-files", "-z").split("\0"):
        p = ROOT / rel
        if rel and p.is_file() and not p.is_symlink():
            out.append((rel, p.stat().st_size))
    return out


def test_no_big_tracked_file_outside_package_data():
    big = [(rel, size) for rel, size in _tracked() if size > MAX_FILE and not rel.startswith("sqa/_data/")]
    assert not big, f"tracked files over {MAX_FILE // MB} MB outside sqa/_data/ (host them elsewhere): {big}"


def test_tracked_files_total_at_most_60_mb():
    total = sum(size for _, size in _tracked())
    assert total <= MAX_TOTAL, f"git ls-files totals {total / MB:.1f} MB (limit {MAX_TOTAL // MB} MB)"


def _scripts() -> list[Path]:
    return sorted(p for d in SCRIPT_DIRS for p in (ROOT / d).rglob("*.py") if "work" not in p.relative_to(ROOT).parts)


def _violations(path: Path) -> list[str]:
    """Path edits and private sqa names in one script (by its syntax tree, so comments do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append(f"line {node.lineno}: uses sys.path (run as python -m from the repository root instead)")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqa":
            private = [a.name for a in node.names if a.name.startswith("_")]
            parts = [p for p in (node.module or "").split(".") if p.startswith("_")]
            if private or parts:
                found.append(f"line {node.lineno}: imports a private sqa name ({', '.join(private + parts)})")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "sqa" and any(p.startswith("_") for p in a.name.split(".")):
                    found.append(f"line {node.lineno}: imports a private sqa module ({a.name})")
    return found


def test_bench_and_experiments_use_the_public_api_only():
    scripts = _scripts()
    assert scripts, "no scripts found under bench/ or experiments/"
    bad = {str(p.relative_to(ROOT)): v for p in scripts if (v := _violations(p))}
    assert not bad, f"scripts that edit sys.path or import private sqa names: {bad}"


def test_bench_and_experiments_modules_have_docstrings():
    missing = [
        str(p.relative_to(ROOT)) for p in _scripts() if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert not missing, f"modules without a docstring: {missing}"


@pytest.mark.parametrize(
    "path", ["bench/work/out.json", "experiments/work/out.json", "bench/results/features/top3/train-2061.jsonl.xz"]
)
def test_default_outputs_are_ignored(path):
    r = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
    if r.returncode == 128:
        pytest.skip("not a git checkout")
    assert r.returncode == 0, f"{path} is not git-ignored: default outputs must not be committable by accident"


def test_readme_is_short():
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert n <= README_LINES, f"README.md has {n} lines (at most {README_LINES}; the record goes to docs/results.md)"


def test_generated_results_are_current():
    r = subprocess.run(
        [sys.executable, "-m", "experiments.results", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr.strip() or r.stdout.strip()


def _results_module():
    """experiments/results.py, loaded from its file (the tests need not run from the repository root)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("experiments_results", ROOT / "experiments" / "results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_results_table_reads_a_presets_out_of_fold_run_when_one_is_recorded(tmp_path, monkeypatch):
    """The train out-of-fold column comes from runs/train2290-PRESET-oof/metrics.json (issue 35's
    recorded run) and is "—" where there is none; the interval is the Wilson score interval, the
    run's own where its metrics.json records one, else computed from its accuracy and n."""
    res = _results_module()
    rows = {r[0]: r for r in res.preset_rows()}
    oof_missing = not (res.RESULTS / "runs" / "train2290-facts-oof" / "metrics.json").exists()
    assert rows["`--preset facts`"][1] == "0.664 (0.600–0.722)"  # runs/dev229-facts-h2055, 152 of 229
    # issue 41 item 8: the dev row says how dev was answered
    assert rows["`--preset facts`"][2] == "held-out head" and rows["`--preset steps`"][2] == "zero-shot"
    assert (
        res.answering({"reader": "facts", "head": "out-of-fold, 5 term-grouped folds (facts head)", "split": "dev"})
        == "cross-fitted"
    )
    if oof_missing:
        assert rows["`--preset facts`"][3] == "—"
    run = tmp_path / "runs" / "train2290-facts-oof"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text('{"Accuracy": 0.65, "n": 2000}', encoding="utf-8")
    monkeypatch.setattr(res, "RESULTS", tmp_path)
    rows = {r[0]: r for r in res.preset_rows()}
    assert rows["`--preset facts`"][3] == "0.650 (0.629–0.671)"  # Wilson, 1,300 of 2,000
    assert rows["`--preset no-retrieval`"][3] == "—"
