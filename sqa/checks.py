"""Checks of the Python API's arguments at its public surface (issue 50, items 5b and 7c): a wrong
type raises :class:`sqa.types.BadInput` naming the function and the argument, never a raw
``TypeError``/``AttributeError`` from inside sqa, and never a silently wrong answer (a ``str``
where a list is meant is refused, not iterated as characters)."""

from __future__ import annotations

import os
from pathlib import Path

from sqa.types import BadInput


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text_arg(where: str, name: str, value, allow_question: bool = False) -> None:
    """``value`` must be a ``str`` (or a ``sqa.types.Question`` with ``allow_question``)."""
    from sqa.types import Question

    if isinstance(value, str) or (allow_question and isinstance(value, Question)):
        text = value if isinstance(value, str) else value.question
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:  # bytes that are not UTF-8 on the command line, or a lone surrogate
            raise BadInput(
                f"{where}: the {name} {_shown(text)} is not Unicode text ({text[e.start]!r} at character "
                f"{e.start + 1}: bytes that are not UTF-8?); type it again as UTF-8"
            ) from None
        return
    raise BadInput(
        f"{where}: {name} must be text (a str), not {type(value).__name__} {_shown(value)}"
        + ("; pass the question, e.g. 'Is the sun a star?'" if name == "question" else "")
    )


def list_arg(where: str, name: str, value, example: str, allow_question: bool = False) -> list:
    """``value`` as a list of texts: a ``str`` (one item passed bare) or a non-iterable is refused,
    as is an item that is not text (or a ``Question`` with ``allow_question``)."""
    if isinstance(value, (str, bytes)):
        raise BadInput(f"{where}: {name} must be a list, not one str {_shown(value)}; pass a list, e.g. {example}")
    try:
        items = list(value)
    except TypeError:
        raise BadInput(
            f"{where}: {name} must be a list, not {type(value).__name__} {_shown(value)}; e.g. {example}"
        ) from None
    for item in items:
        text_arg(where, f"each of {name}", item, allow_question)
    return items


def int_arg(where: str, name: str, value, low: int, high: int | None = None, none_ok: bool = False) -> None:
    """``value`` must be a whole number (``int``, not ``bool``) from ``low`` to ``high``."""
    if value is None and none_ok:
        return
    ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok or value < low or (high is not None and value > high):
        span = f"from {low:,} to {high:,}" if high is not None else f"{low:,} or more"
        raise BadInput(f"{where}: {name} must be a whole number {span}, not {_shown(value)}")


def path_arg(where: str, name: str, value, none_ok: bool = True) -> None:
    """``value`` must be a path (``str`` or ``os.PathLike``)."""
    if (value is None and none_ok) or isinstance(value, (str, os.PathLike)):
        return
    raise BadInput(f"{where}: {name} must be a path (str or pathlib.Path), not {type(value).__name__} {_shown(value)}")


def out_folder_arg(where: str, name: str, value) -> None:
    """``value`` (a folder sqa writes into) must be a path that is, or can be made, a folder: the
    nearest existing folder on its path must take a new folder (tried with a temporary one,
    removed at once: nothing is left behind), so an unwritable place is one BadInput naming it."""
    import tempfile

    path_arg(where, name, value)
    if value is None:
        return
    p = Path(value).expanduser()
    if os.path.lexists(p):
        return  # what is there (a run, a file in the way) is the run folder's own check (sqa.eval.rundir)
    parent = p
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:
        if not parent.is_dir():
            raise NotADirectoryError(20, "a part of the path is a file")
        os.rmdir(tempfile.mkdtemp(prefix=".sqa-check-", dir=parent))
    except OSError as e:
        raise BadInput(
            f"{where}: {name}={str(value)!r}: cannot make the folder there ({e.strerror or type(e).__name__} in "
            f"{parent}); give a writable folder"
        ) from None


def template_goes(reader: str, chat_template, apply_chat_template: bool) -> None:
    """A ``--chat-template`` file with the facts reader (``reader`` "facts") only together with
    ``--apply-chat-template``: its plain-text prompts use no template, so the file would be ignored."""
    if chat_template is not None and reader == "facts" and not apply_chat_template:
        raise BadInput(
            f"--chat-template {Path(chat_template).name}: no effect with the facts reader, whose prompts are "
            "plain text; add --apply-chat-template to read them in that template, or use --reader steps"
        )
