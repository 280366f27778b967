"""Running the ``sqa`` command the way a user does: a real process, with the README's install.

The README installs ``.[models]`` only, where ``click`` is absent (typer >= 0.20 vendors its own
copy as ``typer._click``); ``run_sqa`` hides ``click`` from the process when typer has its vendored
copy, so these tests see what a newcomer sees even where a dev extra pulled ``click`` in.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys

# the real entry point, with `click` made unimportable when typer does not need it
_BOOT = ("import sys\n"
         "if {block}:\n"
         "    sys.modules['click'] = None  # as in the README's install: typer vendors click\n"
         "from sqa.cli import main\n"
         "sys.exit(main())\n")
HIDES_CLICK = importlib.util.find_spec("typer._click") is not None


def sqa_argv(block_click: bool = HIDES_CLICK) -> list[str]:
    """``[python, -c, ...]`` running ``sqa`` (``sqa.cli.main``) with click hidden if asked."""
    return [sys.executable, "-c", _BOOT.format(block=bool(block_click))]


def default_sigint() -> None:
    """``preexec_fn`` for a child that must react to Ctrl-C: a test run as a background job has
    SIGINT ignored, which a child inherits (and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_sqa(args: list[str], env: dict | None = None, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run ``sqa ARGS`` in a fresh process; returns the CompletedProcess (text output)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("SQA_DEBUG", None)
    return subprocess.run(sqa_argv() + [str(a) for a in args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, preexec_fn=default_sigint, **kw)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed run; asserts exit status 2, exactly one line, no traceback."""
    lines = r.stderr.splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("error: ") and "Traceback" not in r.stderr
    return lines[0]


def step_reader(command: str) -> list[str]:
    """``["--reader", "steps"]`` when ``sqa COMMAND`` has a ``--reader`` option (choosing the step
    pipeline, which these tests exercise, over a reader that needs a trained head), else ``[]``."""
    import typer.main

    from sqa.cli import _register, app

    _register()
    sub = typer.main.get_command(app).commands.get(command)
    opts = {o for p in getattr(sub, "params", []) for o in getattr(p, "opts", [])}
    return ["--reader", "steps"] if "--reader" in opts else []
