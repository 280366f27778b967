"""What a finished (or interrupted) evaluation session gives back: :class:`Run`, a run folder and
its numbers, and :func:`default_run_dir`, where a run goes when no folder is named."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sqa.eval.run_metrics import METRICS_FILE, PREDICTIONS_FILE, EvalSummary
from sqa.eval.rundir import RUN_FILE


def default_run_dir(stem: str, tag: str, model: str) -> Path:
    """``runs/eval/<stem>-<tag>-<model>`` (relative to the working directory): ``stem`` the split,
    the named protocol given (``--protocol``) or the dataset file's stem, ``tag`` the reader and
    how it answers (``facts``, ``facts-oof``,
    ``predicted-noretrieval``, ...), ``model`` the last path part of a local model (a ``.gguf``
    file or a checkpoint directory), else the whole name, with characters outside
    ``[A-Za-z0-9._-]`` replaced by ``_`` (``openai:Org/Name`` -> ``openai_Org_Name``)."""
    local = ("/" in model or model.endswith(".gguf")) and not model.startswith("openai:")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).name if local else model)
    return Path("runs") / "eval" / f"{stem}-{tag}-{name}"


@dataclass
class Run:
    """A run folder and what its latest session produced.

    ``path``: the folder (``run.json``, ``traces.jsonl``, ``predictions.json``, ``metrics.json``,
    ``report.md``; run the same evaluation with the same folder to resume); ``metrics``: the
    contents of ``metrics.json`` (``Accuracy`` in [0, 1], ``Recall@10``, ``SARI``, ``ECE``, ``n``,
    ...; None for the test split, which has no public labels, or before any answer); ``total`` /
    ``done`` / ``new``: questions in the run / answered so far / answered in this session;
    ``interrupted``: Ctrl-C stopped the session (what was done is saved); ``files``: the outputs
    written; ``heads``: answer-head files an out-of-fold train run wrote (kind -> path)."""

    path: Path
    metrics: dict | None
    total: int = 0
    done: int = 0
    new: int = 0
    interrupted: bool = False
    repaired_bytes: int = 0
    files: list[Path] = field(default_factory=list)
    heads: dict[str, Path] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every question of the run is answered."""
        return self.done == self.total

    @property
    def predictions(self) -> dict[str, dict]:
        """``predictions.json``: qid -> the leaderboard entry ``{"answer", "decomposition",
        "paragraphs"}`` ({} before any answer)."""
        path = self.path / PREDICTIONS_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    @property
    def options(self) -> dict:
        """The options recorded in ``run.json`` (model, split, preset, k, ...)."""
        return json.loads((self.path / RUN_FILE).read_text(encoding="utf-8")).get("options", {})

    @classmethod
    def from_summary(cls, summary: EvalSummary, heads: dict[str, Path] | None = None) -> "Run":
        """The :class:`Run` of a session summary (``sqa.eval.run_metrics.EvalSummary``)."""
        return cls(
            Path(summary.out_dir),
            summary.metrics,
            summary.total,
            summary.done,
            summary.new,
            summary.interrupted,
            summary.repaired_bytes,
            list(summary.files),
            dict(heads or {}),
        )

    @classmethod
    def open(cls, path: str | Path) -> "Run":
        """A run folder written before, read back (``metrics`` from ``metrics.json``; ``done`` and
        ``total``: the questions in ``predictions.json``). Raises FileNotFoundError when ``path``
        holds no ``run.json``."""
        path = Path(path)
        if not (path / RUN_FILE).exists():
            raise FileNotFoundError(f"{path}: no {RUN_FILE}, not a run folder")
        mpath = path / METRICS_FILE
        metrics = json.loads(mpath.read_text(encoding="utf-8")) if mpath.exists() else None
        run = cls(path, metrics)
        run.done = run.total = len(run.predictions)
        return run
