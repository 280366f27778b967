"""docs/notebook.ipynb (issue 48, done-when 1) and progress in Jupyter (item 2), in a real IPython
kernel run headless by nbclient (the dev extra installs nbclient, nbformat and ipykernel).

- fast: the committed notebook's saved outputs (no error, the evaluation's progress bar at 5/5, the
  per-question table, the HTML displays of the run and the comparison, ``run.errors()``; under
  1 MB; no absolute machine path); a small notebook run in a kernel shows the progress of
  ``Index.build``, of the model loading on the first ``Reader.ask`` and of ``sqa.evaluate`` as cell
  outputs, and nothing with ``progress=False``.
- slow: docs/notebook.ipynb executed as committed (the mini index, 5 + 5 dev questions with
  qwen2.5-coder-0.5b: about 4 min on the shared 2-core machine), its outputs checked the same way.

``python tests/test_notebook.py`` executes the notebook and writes its outputs back into
docs/notebook.ipynb (in a temporary folder: the index and the runs are not kept)."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "notebook.ipynb"
TESTS = Path(__file__).resolve().parent
MAX_BYTES = 1_000_000
BAR = "━"  # rich's bar


def _needs_kernel() -> None:
    pytest.importorskip("nbclient", reason="nbclient runs notebooks headless (the dev extra installs it)")
    pytest.importorskip("ipykernel", reason="ipykernel is the notebook's kernel (the dev extra installs it)")


def execute(nb, cwd: Path, timeout: int = 1800):
    """Run every cell of ``nb`` (an ``nbformat`` notebook, changed in place) in a fresh python3
    kernel whose working directory is ``cwd``; raises ``nbclient.exceptions.CellExecutionError`` at
    the first cell that fails."""
    from nbclient import NotebookClient

    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return nb


def outputs(cell) -> list[dict]:
    """A code cell's outputs as ``{"type", "text", "html"}`` (text/plain or a stream's text)."""
    out = []
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        text = o.get("text") if o["output_type"] == "stream" else data.get("text/plain", "")
        out.append(
            {"type": o["output_type"], "name": o.get("name"), "text": text or "", "html": data.get("text/html", "")}
        )
    return out


def cell_with(nb, source: str):
    """The code cell whose source holds ``source`` (exactly one)."""
    found = [c for c in nb.cells if c.cell_type == "code" and source in c.source]
    assert len(found) == 1, source
    return found[0]


def check_notebook(nb) -> None:
    """What done-when 1 asks of the executed notebook's saved outputs."""
    for c in nb.cells:
        if c.cell_type == "code":
            errors = [o for o in c.outputs if o["output_type"] == "error"]
            assert not errors and c.outputs, (c.source, errors)
    index = outputs(cell_with(nb, "sqa.Index.build("))
    assert any(BAR in o["text"] and "paragraphs" in o["text"] for o in index)  # a bar per corpus file
    assert index[-1]["text"] == "159930"
    ask = outputs(cell_with(nb, "reader.ask("))
    assert any(re.fullmatch(r"loaded qwen2\.5-coder-0\.5b in \d+\.\d s", o["text"]) for o in ask), ask
    assert "<table" in ask[-1]["html"] and "Did Aristotle use a laptop?" in ask[-1]["html"]
    ev = outputs(cell_with(nb, "sqa.evaluate(reader"))
    bars = [o["text"] for o in ev if o["text"].startswith("eval dev")]
    assert bars and BAR in bars[-1] and "5/5" in bars[-1], ev  # the visible bar, done
    assert re.search(r" \d+\.\d+ (s/q|q/s) ", bars[-1]), bars[-1]  # its rate: q/s at a question a second or more
    assert BAR in ev[0]["html"] and "<pre" in ev[0]["html"]  # drawn as HTML too
    assert "first 5 of 229 questions" in ev[-1]["text"] and "<table" in ev[-1]["html"]  # the run's displays
    table = outputs(cell_with(nb, "to_pandas().head()"))[-1]
    assert "<table" in table["html"] and "qid" in table["html"] and "p_yes" in table["html"]
    assert table["html"].count("<tr") == 6  # header + 5 questions
    errors = outputs(cell_with(nb, "run.errors()"))[-1]["text"]
    assert errors == "[]" or errors.startswith("[Record(qid=")
    cmp = outputs(cell_with(nb, "sqa.compare("))
    assert "McNemar" in cmp[-1]["text"] and "<table" in cmp[-1]["html"] and "dev5-plain" in cmp[-1]["html"]
    assert any(o["text"].startswith("eval dev") and "5/5" in o["text"] for o in cmp)


def check_portable(text: str) -> None:
    """No absolute machine path (a home, the checkout, a temporary folder) in the saved notebook."""
    for where in (str(Path.home()), str(TESTS.parent), tempfile.gettempdir() + "/", "/root/", "/home/"):
        assert where not in text, where


def test_the_committed_notebook_shows_what_a_run_gives_back():
    nbformat = pytest.importorskip("nbformat", reason="nbformat reads notebooks (the dev extra installs it)")
    text = NOTEBOOK.read_text(encoding="utf-8")
    assert len(text.encode()) < MAX_BYTES
    check_portable(text)
    check_notebook(nbformat.reads(text, as_version=4))


def test_progress_is_drawn_as_cell_outputs_in_jupyter(tmp_path):
    """Index.build, the first Reader.ask and sqa.evaluate each draw into the cell's output (saved
    with the notebook) in a real kernel; progress=False draws nothing."""
    _needs_kernel()
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    setup = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
        "import sqa\nfrom helpers import ScriptedModel\n"
        "script = ['Who founded #0 Apple?', 'When was #1 born?', 'Is #2 before 1960?'] * 9\n"
    )
    cells = [
        setup + 'index = sqa.Index.build(corpus="strategyqa", path="gold")',
        'reader = sqa.Reader(preset="steps", model=ScriptedModel(script), index=index)\n'
        'reader.ask("Was Steve Jobs born before 1960?").answer',
        'run = sqa.evaluate(reader, split="dev", limit=2, out="runs/a")',
        'quiet = sqa.Reader(preset="steps", model=ScriptedModel(script), index=index, progress=False)\n'
        'quiet.ask("Was Steve Jobs born before 1960?")\n'
        'sqa.evaluate(quiet, split="dev", limit=2, out="runs/b", progress=False).done',
        # an out-of-fold run's events (sqa.evaluate on a train split), as its drawer gets them
        "from sqa.eval.oof import OofProgress\nfrom sqa.render.progress import OofDrawer, default_console\n"
        "with OofDrawer(default_console()) as d:\n"
        "    d(OofProgress('loading', message='loading the model'))\n"
        "    for i in range(31):\n"
        "        d(OofProgress('features', done=i, total=30, seconds_per_question=2.0))\n"
        "    d(OofProgress('crossfit', message='fold 1 of 5'))",
    ]
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    execute(nb, tmp_path, timeout=300)
    index, ask, ev, quiet, oof = (outputs(c) for c in nb.cells)
    assert any("strategyqa_train_paragraphs" in o["text"] and "9,251 paragraphs" in o["text"] for o in index), index
    assert [o["text"] for o in ask][-1] in ("True", "False")
    assert re.fullmatch(r"loaded scripted\S* in \d+\.\d s", ask[0]["text"]), ask
    assert ev and ev[0]["text"].startswith("eval dev") and "2/2" in ev[0]["text"] and BAR in ev[0]["text"], ev
    assert [o["text"] for o in quiet] == ["2"]  # only the cell's value: no bar, no loading line
    assert len(oof) == 3 and oof[0]["text"] == "loading the model" and "fold" in oof[2]["text"], oof
    bar = oof[1]["text"]  # the bar, done; no log lines beside it
    assert bar.startswith("features") and BAR in bar and "30/30" in bar and "2.0 s/q" in bar, oof
    assert not any(o["type"] == "error" for c in (index, ask, ev, quiet, oof) for o in c)
    nbformat.validate(nb)


@pytest.mark.slow
def test_the_notebook_runs_headless(tmp_path):
    """docs/notebook.ipynb, executed as committed: the mini index, one question, 5 + 5 dev questions."""
    _needs_kernel()
    import nbformat

    nb = execute(nbformat.read(NOTEBOOK, as_version=4), tmp_path)
    check_notebook(nb)


def main() -> int:
    """Execute docs/notebook.ipynb in a temporary folder and write it back with its outputs."""
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    with tempfile.TemporaryDirectory() as d:
        execute(nb, Path(d))
    check_notebook(nb)
    text = nbformat.writes(nb) + "\n"
    check_portable(text)
    assert len(text.encode()) < MAX_BYTES, len(text.encode())
    NOTEBOOK.write_text(text, encoding="utf-8")
    print(f"wrote {NOTEBOOK} ({len(text.encode()):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
