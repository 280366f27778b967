"""The ``sqa`` console command: a thin layer that parses options, calls the packages and prints.

Subcommands: ``index``, ``search``, ``ask``, ``eval``, ``compare``, ``heads``, ``features`` (each in
its own module here). ``main`` is the one error boundary: a usage
error, a ``SqaError`` or an OSError / ValueError / EOFError / library error that bad input can cause
becomes one line on stderr (``error: ...``, see :mod:`sqa.cli.errors`) and exit code 2; Ctrl-C exits
with 130 after the command has saved what it finished; ``SqaWarning`` is one ``warning:`` line.
"""

from __future__ import annotations

import os
import shlex
import sys
import traceback
import warnings

import typer

app = typer.Typer(
    name="sqa",
    help="Retrieval-backed multi-step QA for StrategyQA: build a BM25 paragraph index, ask questions, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


_default_showwarning = warnings.showwarning


def _register() -> None:
    from sqa.cli import ask, compare, eval as eval_cmd, features, heads, index, search, train_head  # noqa: F401  (they register)


INVOCATION: str | None = None
INTERRUPTED = "interrupted: finished work was saved; run the same command again to resume"


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:
    from sqa.types import SqaWarning

    if issubclass(category, SqaWarning):
        from sqa.cli.errors import redact

        print(f"warning: {redact(' '.join(str(message).split()))}", file=sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


def _print_traceback() -> None:
    from sqa.redact import redact  # a traceback shows messages too: no credential in any form

    print(redact(traceback.format_exc()), end="", file=sys.stderr)


def click_command():
    """The click group ``sqa`` runs, its --help tidied (``sqa.render.help.tidy_help``)."""
    import typer.main

    from sqa.render.help import tidy_help

    _register()
    return tidy_help(typer.main.get_command(app))


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run the command, raising whatever it raises (no exception translation:
    click's own ``main`` would turn EOFError into Abort and print a blank line)."""
    from sqa.cli.errors import click_classes

    cls = click_classes()
    cmd = click_command()
    args = sys.argv[1:] if argv is None else list(argv)
    global INVOCATION  # what a run records as its command (sqa.eval.rundir.invocation)
    INVOCATION = shlex.join(["sqa", *args])
    try:
        with cmd.make_context("sqa", args) as ctx:
            rc = cmd.invoke(ctx)
    except cls["exit"] as e:  # --help, typer.Exit(n)
        return int(getattr(e, "exit_code", 0) or 0)
    return rc if isinstance(rc, int) and not isinstance(rc, bool) else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sqa`` script; returns the process exit code: 0 on success, 2 with one
    line on stderr for bad input (usage errors included), 130 for Ctrl-C, 1 for a bug (with its
    traceback). Set ``SQA_DEBUG=1`` to get the traceback of every error."""
    import warnings

    from sqa.cli.errors import click_classes, error_line, usage_error_line

    debug = bool(os.environ.get("SQA_DEBUG"))
    old_show = warnings.showwarning
    warnings.showwarning = _print_warning
    try:
        _register()
        return _run(argv)
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130
    except BrokenPipeError:  # `sqa search ... | head`: the reader left; say nothing more
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 1
    except Exception as e:
        if debug:
            _print_traceback()
        cls = click_classes()
        if isinstance(e, cls["abort"]):  # click's Ctrl-C at a prompt
            print(INTERRUPTED, file=sys.stderr)
            return 130
        if isinstance(e, cls["no_args"]):  # bare `sqa`: the help on stdout, the error on stderr
            print(e.format_message())
            print(
                "error: no command given; run one of the commands above, e.g. `sqa index --corpus mini`",
                file=sys.stderr,
            )
            return 2
        if isinstance(e, cls["usage"] + cls["click"]):  # a usage error, or click's own (a bad file argument)
            print(f"error: {usage_error_line(e)}", file=sys.stderr)
            return 2
        line = error_line(e)
        if line is None:  # a bug: keep its traceback
            if not debug:
                _print_traceback()
            print(
                f"error: internal error ({type(e).__name__}); please report it with the traceback above",
                file=sys.stderr,
            )
            return 1
        print(f"error: {line}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = old_show


if __name__ == "__main__":
    sys.exit(main())
