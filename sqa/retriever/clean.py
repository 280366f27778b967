"""Query cleaning: the official StrategyQA way, and ours.

- :func:`official_clean` is StrategyQA's ``clean_query`` (eladsegal/strategyqa,
  ``elasticsearch_utils.py``): split on whitespace, drop a token only if its lowercase form is in
  NLTK's English stopword list; punctuation stays attached (so "it?" is kept while "it" is
  dropped) and "#1" stays literal.
- :func:`content_words` is ours: punctuation-aware word tokens (so "it?" and "What's" are
  recognised as stopwords), minus NLTK's stopwords and a few question words that carry no topic
  (:data:`QUESTION_WORDS`), minus "#k" references.
- :func:`resolve_references` is the one "#k" resolver of the project: "#k" in a step becomes step
  k's answer when it is known, else step k's content words (recursively, since step k may itself
  refer back), or stays "#k" (``unknown="keep"``, for text shown to the reader).
"""

from __future__ import annotations

import re
from typing import Sequence

from sqa.retriever.stopwords import STOPWORDS

REF = re.compile(r"#(\d+)")
_WORD = re.compile(r"#\d+|\w+(?:[-'’.]\w+|(?<=\d),\d+)*", re.UNICODE)

# Words frequent in StrategyQA decomposition steps that name no topic (tuned on train-2061 only).
QUESTION_WORDS = frozenset(
    """
many much also would could might may likely usually typically generally often commonly
one ones something someone anything thing things kind type types
""".split()
)


def official_clean(text: str) -> str:
    """StrategyQA's official query cleaning: whitespace tokens whose lowercase form is not an NLTK
    English stopword, joined by single spaces (punctuation attached, "#k" literal)."""
    return " ".join(w for w in text.split() if w.lower() not in STOPWORDS)


def content_words(text: str, extra_stopwords: frozenset[str] = QUESTION_WORDS) -> list[str]:
    """Word tokens of ``text`` (letters/digits, keeping inner hyphens, apostrophes and dots as in
    "U.S." or "Jay-Z"), without NLTK English stopwords, ``extra_stopwords``, possessive "'s" and
    "#k" references. Case is kept."""
    out = []
    for tok in _WORD.findall(text):
        if tok.startswith("#"):
            continue
        low = tok.lower()
        if low.endswith(("'s", "’s")):
            tok, low = tok[:-2], low[:-2]
        if not low or low in STOPWORDS or low in extra_stopwords:
            continue
        out.append(tok)
    return out


def resolve_references(
    text: str, prior: Sequence[tuple[str, str | None]], unknown: str | None = None, _depth: int = 0
) -> str:
    """Replace each "#k" (1-based, as in StrategyQA's decompositions) in ``text`` by step k's answer
    when it is known (non-blank), else by step k's content words (with its own references
    resolved the same way). ``prior`` = ``[(step question, answer or None), ...]`` for steps
    1..i-1; a reference to a step not in ``prior`` is removed. ``unknown`` given: an unanswered
    step's reference becomes that text instead, and ``unknown="keep"`` leaves it as "#k" (for the
    reader's prompt). The answer replaces the reference in place ("#1's" -> "Aristotle's"); runs of
    whitespace are collapsed."""

    def sub(m: re.Match) -> str:
        k = int(m.group(1))
        if not 1 <= k <= len(prior) or _depth > 8:
            return m.group(0) if unknown == "keep" else " "
        question, answer = prior[k - 1]
        if answer and answer.strip():
            return answer.strip()
        if unknown == "keep":
            return m.group(0)
        if unknown is not None:
            return f" {unknown} "
        inner = resolve_references(question, prior[: k - 1], None, _depth + 1)
        return " " + " ".join(content_words(inner)) + " "

    return re.sub(r"\s+", " ", REF.sub(sub, text)).strip()
