"""docs/python.md runs: each ```python block is executed in order in one namespace and must print
the ```text block that follows it (numbers from a model within 0.03), so the page cannot drift.
The blocks before the ``<!-- slow`` marker need no model (fast lane, on the gold index of
``conftest.gold_index``, which is what ``Index.build(corpus="strategyqa")`` builds); the rest load
the default reader (slow lane). A block calling ``sqa.compare`` is left out where scipy (the models
extra) is not installed."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def _blocks() -> tuple[list[tuple[str, str]], int]:
    """``([(code, expected output)], index of the first slow block)``."""
    text = DOC.read_text(encoding="utf-8")
    slow_at = text.find("<!-- slow")
    pairs, first_slow = [], None
    for m in re.finditer(r"```python\n(.*?)```\s*```text\n(.*?)```", text, re.S):
        if first_slow is None and slow_at != -1 and m.start() > slow_at:
            first_slow = len(pairs)
        pairs.append((m.group(1), m.group(2)))
    return pairs, len(pairs) if first_slow is None else first_slow


def _same(got: str, want: str, tolerance: float) -> bool:
    g, w = got.strip().splitlines(), want.strip().splitlines()
    if len(g) != len(w):
        return False
    for gl, wl in zip(g, w):
        gt, wt = gl.split(), wl.split()
        if len(gt) != len(wt):
            return False
        for a, b in zip(gt, wt):
            if a != b and not (
                tolerance and NUMBER.match(a) and NUMBER.match(b) and abs(float(a) - float(b)) <= tolerance
            ):
                return False
    return True


def _run(tmp_path: Path, gold_dir: Path, upto: int | None, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gold-index").symlink_to(gold_dir, target_is_directory=True)
    (tmp_path / "bench").symlink_to(DOC.parents[1] / "bench", target_is_directory=True)  # the recorded runs
    pairs, first_slow = _blocks()
    ns: dict = {}
    for i, (code, want) in enumerate(pairs[:upto]):
        if "sqa.compare(" in code and importlib.util.find_spec("scipy") is None:
            continue  # McNemar's test is scipy's (the models extra); the README's bare install lacks it
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{DOC.name} block {i + 1}", "exec"), ns)
        tolerance = 0.03 if i >= first_slow else 0.0
        assert _same(out.getvalue(), want, tolerance), f"block {i + 1} printed:\n{out.getvalue()}\ndocumented:\n{want}"


def test_the_page_has_examples_with_outputs_on_both_sides_of_the_slow_marker():
    pairs, first_slow = _blocks()
    assert 3 <= first_slow < len(pairs)
    assert all(want.strip() for _, want in pairs)


def test_python_docs_without_a_model(tmp_path, gold_index, monkeypatch):
    _, first_slow = _blocks()
    _run(tmp_path, Path(gold_index.index_dir), first_slow, monkeypatch)


@pytest.mark.slow
def test_python_docs_with_the_default_reader(tmp_path, gold_index, monkeypatch):
    pytest.importorskip("llama_cpp", reason="the reader's model runs on llama.cpp (the models extra)")
    _run(tmp_path, Path(gold_index.index_dir), None, monkeypatch)
