"""Progress drawers (rich, on a Console: a bar with rate and ETA on a terminal, plain lines in a
log, an HTML cell output in Jupyter) for the library's long jobs, each passed as the job's
``progress`` callback and used as a context manager: :class:`EvalProgress` for :func:`sqa.evaluate`
(its out-of-fold events included), :class:`IndexProgress` for ``Index.build`` /
``sqa.api.index.build_index_dir``, :class:`LoadProgress` for a Reader's model loading,
:class:`RetrievalProgress` for ``sqa.api.retrieval.run_retrieval_eval``."""

from __future__ import annotations

import io
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


def default_console() -> Console:
    """The console :func:`sqa.evaluate` draws its progress on when given no ``progress``: stderr."""
    return Console(stderr=True)


def drawn(console: Console) -> bool:
    """Whether a bar is drawn on ``console``: a terminal or a Jupyter notebook (rich renders in
    both); a log (stderr redirected to a file) gets none."""
    return bool(console.is_terminal or console.is_jupyter)


def rate_text(speed: float | None) -> str:
    """Questions per second as read by a person: ``"2.50 q/s"`` at one question a second or more,
    ``"89.0 s/q"`` (seconds per question) below, ``"– s/q"`` before the first question."""
    if not speed:
        return "– s/q"
    return f"{speed:.2f} q/s" if speed >= 1 else f"{1 / speed:.1f} s/q"


class _RateColumn(ProgressColumn):
    """The rate over the whole session (:func:`rate_text`; rich's own speed window is too short
    when one batch takes minutes on CPU)."""

    def render(self, task) -> Text:
        return Text(rate_text(task.speed), style="progress.data.speed")


def default_drawer_console(progress) -> Console | None:
    """The console a job's ``progress`` argument asks for: stderr (:func:`default_console`) for
    None or True, the ``rich.console.Console`` given, None for False or a callback."""
    if progress is None or progress is True:
        return default_console()
    return progress if isinstance(progress, Console) else None


_PRE = (
    '<pre style="white-space:pre;overflow-x:auto;line-height:normal;'
    "font-family:Menlo,'DejaVu Sans Mono',consolas,'Courier New',monospace\">{code}</pre>"
)


class NotebookCell:
    """A rich renderable shown in a Jupyter cell's output and replaced in place (IPython's
    ``display(..., display_id=True)`` and ``update``): text/plain and text/html (rich's terminal
    colours as inline styles). Rich's own live display needs ipywidgets there, and a widget's output
    is not saved in the notebook; this one is, as its last state. Updates come at most every
    ``every`` seconds, and always when ``final``."""

    def __init__(self, width: int = 100, every: float = 0.25):
        self.width, self.every, self.handle, self.last = width, every, None, 0.0

    def show(self, renderable, final: bool = False) -> None:
        """Draw ``renderable`` (the first call adds the output, later ones replace it)."""
        now = time.monotonic()
        if self.handle is not None and not final and now - self.last < self.every:
            return
        self.last = now
        from IPython.display import display

        rec = Console(file=io.StringIO(), record=True, width=self.width, force_terminal=True, force_jupyter=False)
        rec.print(renderable)
        text = rec.export_text(clear=False).rstrip("\n")
        bundle = {"text/plain": text, "text/html": rec.export_html(inline_styles=True, code_format=_PRE)}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)


class _Drawer:
    """A rich ``Progress`` drawn on a terminal, as a :class:`NotebookCell` in Jupyter, not at all
    in a log (``disable``)."""

    progress: Progress
    cell: NotebookCell | None = None

    def _progress(self, *cols, console: Console, disable: bool = False, **kw) -> Progress:
        jupyter = console.is_jupyter and not disable
        self.cell = NotebookCell(min(console.width, 115)) if jupyter else None
        return Progress(*cols, console=console, disable=disable or jupyter, **kw)

    def _show(self, final: bool = False) -> None:
        if self.cell is not None:
            self.cell.show(self.progress.get_renderable(), final)

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()
        self._show(final=True)


class EvalProgress(_Drawer):
    """:func:`sqa.evaluate`'s ``progress`` callback on ``console`` (stderr): a bar of questions with
    the rate over this session, elapsed time, ETA, running Accuracy and a served model's calls and
    tokens; an out-of-fold run's events (``sqa.eval.oof.OofProgress``) go to :class:`OofDrawer`.
    ``label``: the question set's name shown on the bar."""

    def __init__(self, console: Console, label: str):
        cols = (TextColumn("[bold]eval {task.description}"), BarColumn(), MofNCompleteColumn(), _RateColumn())
        cols += (TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[acc]}"))
        # speed over the whole session; no bar frame in logs
        self.progress = self._progress(
            *cols, console=console, speed_estimate_period=24 * 3600.0, disable=not drawn(console)
        )
        self.oof, self.label, self.task = OofDrawer(console), label, None

    def __exit__(self, *exc) -> None:
        self.oof.__exit__(*exc)
        super().__exit__(*exc)

    def __call__(self, p) -> None:
        from sqa.eval.oof import OofProgress

        if isinstance(p, OofProgress):  # an out-of-fold run's event
            return self.oof(p)
        acc = f"acc {p.accuracy:.3f} ({p.correct}/{p.scored})" if p.accuracy is not None else ""
        if p.cost:  # a served model: calls sent / from the response cache, tokens (sqa.models.served_cache)
            c = p.cost
            tokens = (c["prompt_tokens"] + c["completion_tokens"]) / 1000
            acc += f"  calls {c['calls_sent']:,} (+{c['calls_cached']:,} cached), {tokens:.1f}k tok"
        if self.task is None:  # start at what earlier sessions did, so the rate counts this session only
            self.task = self.progress.add_task(self.label, total=p.total, completed=p.done, acc=acc)
        self.progress.update(self.task, completed=p.done, acc=acc)
        self._show()


class OofDrawer(_Drawer):
    """The ``progress`` callback of an out-of-fold run on a rich Console (stderr): a spinner while
    the model loads, a bar with seconds per question and ETA while features are read (a line every
    25 questions when stderr is no terminal), each cross-fitting line; in Jupyter the loading line
    and the bar are cell outputs (:class:`NotebookCell`). Use as a context manager."""

    def __init__(self, err: Console):
        self.err, self.status, self.progress, self.task, self.first = err, None, None, None, None

    def _show(self, final: bool = False) -> None:
        if self.progress is not None:  # the features bar, drawn as _Drawer draws (a cell in Jupyter)
            super()._show(final)

    def __enter__(self) -> "OofDrawer":
        return self

    def __exit__(self, *exc) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def __call__(self, p) -> None:
        err = self.err
        if p.stage == "loading":
            if err.is_jupyter:  # rich's spinner needs ipywidgets there: the line as the cell's output
                NotebookCell(min(err.width, 115)).show(Text(p.message), final=True)
                return
            self.status = err.status(p.message)
            self.status.start()
            return
        self._stop()
        if p.stage != "features":
            if self.progress is not None:
                self._show(final=True)
                self.progress.stop()
                self.progress = None
            err.print(p.message, soft_wrap=True)  # a log keeps each path whole
            return
        if self.progress is None:
            cols = (TextColumn("[bold]features"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"))
            cols += (TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
            self.progress = self._progress(*cols, console=err, disable=not drawn(err))
            self.progress.start()
            self.task = self.progress.add_task("features", total=p.total, completed=p.done, rate="")
            self.first = p.done
            self._show()
            return
        per = p.seconds_per_question or 0.0
        self.progress.update(self.task, completed=p.done, rate=f"{per:.1f} s/q")
        self._show(final=p.done == p.total)
        n, need = p.done - self.first, p.total - self.first
        if not (err.is_terminal or err.is_jupyter) and (n % 25 == 0 or n == need):  # logs get a line now and then
            err.print(f"features {p.done}/{p.total} ({per:.1f} s/question, ETA {(need - n) * per / 60:.0f} min)")
        if p.done == p.total:
            self.progress.stop()
            self.progress = None


class IndexProgress(_Drawer):
    """An index build's ``progress`` callback on ``console``: a bar per corpus file (bytes read,
    paragraphs indexed and their rate) and for the full corpus's download and gzip check
    (``sqa.api.index.BuildProgress`` / ``FetchProgress``); :meth:`skip` is its ``on_skip``: a
    line for each of the first 20 malformed lines skipped, then one saying more were."""

    def __init__(self, console: Console, disable: bool = False):
        cols = (
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[info]}"),
        )
        cols += (TimeElapsedColumn(), TimeRemainingColumn())
        self.progress = self._progress(*cols, console=console, disable=disable)
        self.console, self.tasks, self.skipped = console, {}, 0

    def skip(self, path: str, line: int, reason: str) -> None:
        """One malformed line skipped at ``path:line`` for ``reason``."""
        self.skipped += 1
        if self.skipped <= 20:
            self.console.print(f"[yellow]skipped[/] {path}:{line}: {reason}", markup=True, highlight=False)
        elif self.skipped == 21:
            self.console.print("[yellow]more malformed lines skipped; the count is in the summary[/]")

    def __call__(self, p) -> None:
        from pathlib import Path

        from sqa.api.index import BuildProgress

        build = isinstance(p, BuildProgress)  # else the full corpus's download (FetchProgress)
        key = ("build", p.file_index) if build else p.phase
        if key not in self.tasks:
            desc = Path(p.file).name if build else "download" if p.phase == "download" else "check gzip"
            self.tasks[key] = self.progress.add_task(desc, total=p.file_bytes if build else p.total, info="")
        if build:
            rate = p.indexed / p.seconds if p.seconds else 0.0
            info = f"{p.indexed:>12,} paragraphs  {rate:>8,.0f}/s"
            self.progress.update(self.tasks[key], completed=p.bytes_read, info=info)
        else:
            self.progress.update(self.tasks[key], completed=p.done, total=p.total)
        self._show()


class LoadProgress(_Drawer):
    """A spinner with the seconds spent while ``what`` loads (a Reader's model on its first
    question), then one line ``loaded WHAT in N.N s``; on a terminal or in Jupyter, nothing in a
    log. Use as a context manager around the load."""

    def __init__(self, console: Console, what: str):
        cols = (SpinnerColumn(), TextColumn("loading {task.description}"), TimeElapsedColumn())
        self.progress = self._progress(*cols, console=console, disable=not drawn(console), transient=True)
        self.console, self.what, self.start = console, what, time.perf_counter()
        self.progress.add_task(what, total=None)

    def __enter__(self) -> "LoadProgress":
        super().__enter__()
        self._show()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()
        if not drawn(self.console) or exc[0] is not None:
            if self.cell is not None and self.cell.handle is not None:
                self.cell.handle.update({"text/plain": f"loading {self.what} failed"}, raw=True)
            return
        line = f"loaded {self.what} in {time.perf_counter() - self.start:.1f} s"
        if self.cell is not None:
            self.cell.show(Text(line), final=True)
        else:
            self.console.print(line, highlight=False)


class RetrievalProgress(_Drawer):
    """``run_retrieval_eval``'s ``(done, total)`` callback: a transient bar with questions per second."""

    def __init__(self, console: Console):
        cols = (TextColumn("retrieving"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"))
        self.progress = Progress(*cols, TimeRemainingColumn(), console=console, transient=True)
        self.task = self.progress.add_task("retrieval", total=None, rate="")
        self.start = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        rate = f"{done / max(time.perf_counter() - self.start, 1e-9):.1f} q/s"
        self.progress.update(self.task, completed=done, total=total, rate=rate)
