"""The ``sqa`` console command: a thin layer that parses options, calls the packages and prints.

Subcommands: ``index``, ``search``, ``ask``, ``eval`` (each in its own module here). Every
subcommand takes ``--index-dir`` and ``--backend``. A ``SqaError`` becomes one line on stderr and
exit code 2; Ctrl-C exits with 130 after the command has saved what it finished.
"""

from __future__ import annotations

import sys

import typer

from sqa.types import SqaError

app = typer.Typer(
    name="sqa",
    help="Retrieval-backed multi-step QA for StrategyQA: build a BM25 paragraph index, ask questions, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from sqa.cli import ask, eval as eval_cmd, index, search, train_head  # noqa: F401  (modules register commands on `app`)


def _click_exception_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(ClickException classes, Abort classes) of click and of the copy typer >= 0.20 vendors as
    ``typer._click`` (its usage errors are not ``click`` exceptions)."""
    import click

    exc, abort = [click.exceptions.ClickException], [click.exceptions.Abort]
    try:
        from typer._click import exceptions as vendored
    except ImportError:
        pass
    else:
        exc.append(vendored.ClickException)
        if hasattr(vendored, "Abort"):
            abort.append(vendored.Abort)
    if isinstance(getattr(typer, "Abort", None), type):
        abort.append(typer.Abort)
    return tuple(exc), tuple(abort)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sqa`` script; returns the process exit code."""
    _register()
    try:
        rc = app(args=argv, standalone_mode=False)
    except SqaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished work was saved; run the same command again to resume", file=sys.stderr)
        return 130
    except typer.Exit as e:
        return e.exit_code
    except SystemExit as e:  # click usage errors
        return int(e.code or 0)
    except Exception as e:  # click.exceptions.UsageError and friends
        click_exc, abort_exc = _click_exception_types()
        if isinstance(e, click_exc):
            e.show()
            return e.exit_code
        if isinstance(e, abort_exc):
            print("aborted", file=sys.stderr)
            return 130
        raise
    # not standalone, typer returns (not raises) the code of Exit(n), and of Ctrl-C as 130
    if isinstance(rc, int) and not isinstance(rc, bool) and rc:
        if rc == 130:
            print("interrupted: finished work was saved; run the same command again to resume", file=sys.stderr)
        return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
