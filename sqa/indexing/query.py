"""What both backends share about a query: its word tokens and the top-k bounds.

Kept apart from the backends so that the Elasticsearch backend does not import the embedded
(tantivy) one, and the other way round.
"""

from __future__ import annotations

import re

from sqa.types import MAX_K, SqaError

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def check_k(k: int) -> None:
    """Raise SqaError unless ``k`` (top-k) is an integer from 0 to ``MAX_K`` (10,000)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
        raise SqaError(f"top-k must be from 1 to {MAX_K:,} (got {k}); use e.g. -k 10")


def query_terms(query: str) -> list[str]:
    """Word tokens of free text (runs of letters/digits): what the backend searches for. Query
    syntax such as quotes, ``-``, ``:`` or ``#`` is never interpreted, so any text is a valid query."""
    return _WORD.findall(query)
