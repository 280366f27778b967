"""Text helpers shared by the readers: sentence splitting and word clipping of paragraphs."""

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
