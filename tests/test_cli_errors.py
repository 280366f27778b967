"""Bad input as a new user types it, through the real ``sqa`` process with the README's install
(click hidden when typer vendors it): one ``error:`` line on stderr, exit status 2, no traceback,
nothing lost. Ctrl-C: 130."""

from __future__ import annotations

import pytest

from cli_helpers import one_error_line, run_sqa

# --- usage errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args, expect", [
    (["search"], "missing argument"),
    (["search", "black sea", "-k", "abc"], "invalid value for '-k'"),
    (["search", "black sea", "--bogus"], "no such option: --bogus"),
    (["bogus"], "no such command 'bogus'"),
    (["index", "--commit-every", "many"], "invalid value for '--commit-every'"),
    (["eval", "score"], "missing argument"),
    (["ask"], "missing argument"),
])
def test_usage_errors_are_one_line_and_exit_2(args, expect):
    line = one_error_line(run_sqa(args))
    assert expect in line.lower()
    assert f"sqa {args[0]}" in line or args[0] == "bogus"
    assert "--help" in line


def test_bare_sqa_lists_the_commands_and_exits_2():
    r = run_sqa([])
    line = one_error_line(r)
    assert "no command given" in line
    for cmd in ("index", "search", "ask", "eval"):
        assert cmd in r.stdout  # the help goes to stdout


def test_help_still_exits_0():
    r = run_sqa(["search", "--help"])
    assert r.returncode == 0 and "QUERY" in r.stdout.upper() and r.stderr == ""
