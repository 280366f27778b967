"""Drawing the out-of-fold run of ``sqa eval`` (``--split train | train-2061 | all`` with the facts
reader, and dev / test / ``--dataset`` questions a head was fitted on): the run itself is the
library's :func:`sqa.api.out_of_fold.run_out_of_fold`; this module shows its progress (rate and
ETA) and its summary.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sqa.render.tables import metrics_table
from sqa.eval.oof import OofProgress


class OofDrawer:
    """The ``progress`` callback of an out-of-fold run on a rich Console (stderr): a spinner while
    the model loads, a bar with seconds per question and ETA while features are read (a line every
    25 questions when stderr is no terminal), each cross-fitting line. Use as a context manager."""

    def __init__(self, err: Console):
        self.err, self.status, self.bar, self.task, self.first = err, None, None, None, None

    def __enter__(self) -> "OofDrawer":
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def __call__(self, p: OofProgress) -> None:
        err = self.err
        if p.stage == "loading":
            self.status = err.status(p.message)
            self.status.start()
            return
        self._stop()
        if p.stage != "features":
            if self.bar is not None:
                self.bar.stop()
                self.bar = None
            err.print(p.message, soft_wrap=True)  # a log keeps each path whole
            return
        if self.bar is None:
            cols = (
                TextColumn("[bold]features"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
            )
            self.bar = Progress(*cols, console=err, disable=not err.is_terminal)
            self.bar.start()
            self.task = self.bar.add_task("features", total=p.total, completed=p.done, rate="")
            self.first = p.done
            return
        per = p.seconds_per_question or 0.0
        self.bar.update(self.task, completed=p.done, rate=f"{per:.1f} s/q")
        n, need = p.done - self.first, p.total - self.first
        if not err.is_terminal and (n % 25 == 0 or n == need):  # logs get a line now and then
            err.print(f"features {p.done}/{p.total} ({per:.1f} s/question, ETA {(need - n) * per / 60:.0f} min)")
        if p.done == p.total:
            self.bar.stop()
            self.bar = None


def print_oof_summary(run) -> None:
    """The metrics table and the summary line of an out-of-fold run (``sqa.eval.results.Run``) on stdout."""
    m = run.metrics
    if m:
        table = {
            "n": m["n"],
            "Accuracy": m["Accuracy"],
            "95 % interval": "–".join(f"{v:.4f}" for v in m["Accuracy_interval95"] or []),
            "AUC": m["AUC"],
            "majority (always no)": m["majority_baseline"]["Accuracy"],
            "Recall@10": m["Recall@10"],
            "ECE": m["ECE"],
        }
        for kind_, v in m["out_of_fold"]["without_demonstrations"].items():
            table[f"{kind_} head, without the demonstrations (n={v['n']})"] = v["accuracy"]
        Console().print(
            metrics_table(table, f"sqa eval {run.options['split']} (facts reader, {m['out_of_fold']['scheme']})")
        )
    typer.echo(
        f"complete: {run.done}/{run.total} questions, {m['out_of_fold']['scheme'] if m else 'out-of-fold'} -> "
        f"{run.path} ({', '.join(p.name for p in run.files)})"
    )
