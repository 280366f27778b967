"""Text helpers shared by the readers: sentence splitting and word clipping of paragraphs, and
``printable`` for names from disk printed to a terminal."""

from __future__ import annotations

import re

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph: split after '.', '!' or '?' followed by whitespace and an upper-case
    letter, digit, quote or parenthesis. Empty pieces dropped."""
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def clip_words(text: str, max_words: int) -> str:
    """``text`` cut to ``max_words`` words, "..." marking a cut."""
    w = text.split()
    return text.strip() if len(w) <= max_words else " ".join(w[:max_words]) + " ..."


_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI sequences (clear screen, colours, cursor moves)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (window title, hyperlinks), to BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS / SOS / PM / APC strings
    r"|\x1b.?"  # any other escape
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # C0/C1, bidi controls
)


def printable(name: str) -> str:
    """``name`` (a file or folder name from disk) safe to print to a terminal: terminal control
    sequences (ECMA-48 CSI/OSC/DCS escapes), other C0/C1 control characters and bidirectional
    overrides removed, tabs and newlines shown as one space (issue 50, item 7a)."""
    text = _CONTROL.sub("", str(name))
    return text.replace("\t", " ").replace("\n", " ")


def bm25s_module():
    """The ``bm25s`` module (the sentence and demonstration BM25 of the readers), imported without
    its progress bars: bm25s reads ``$DISABLE_TQDM`` once, as it is imported, and otherwise imports
    ``tqdm.auto`` and with it ``asyncio`` (51 modules; 0.11 s under ``python -X importtime``, about
    0.03 s of wall time on 2 busy cores). sqa asks bm25s for no progress bar anywhere
    (``show_progress=False``), so nothing shown changes; the variable is restored after the import."""
    import os
    import sys

    if "bm25s" in sys.modules:
        return sys.modules["bm25s"]
    before = os.environ.get("DISABLE_TQDM")
    os.environ["DISABLE_TQDM"] = "1"
    try:
        import bm25s
    finally:
        if before is None:
            os.environ.pop("DISABLE_TQDM", None)
        else:
            os.environ["DISABLE_TQDM"] = before
    return bm25s
