"""Reading yes/no answers out of a served model's JSON responses (``sqa.models.openai``).

Both endpoints are read as plain JSON dicts, so a ``null``, a string or a missing field in any
place is a missing read-out, never a TypeError:

- ``/v1/completions``: ``choices[0].logprobs`` = ``{"tokens": [...], "top_logprobs": [{token:
  logprob}, ...]}`` (OpenAI's legacy completions format, which vLLM, SGLang and llama.cpp follow);
- ``/v1/chat/completions`` (and ``/v1/completions`` of llama.cpp's llama-server, build 0c1e570
  vendored by llama-cpp-python 0.3.36): ``choices[0].logprobs.content`` = ``[{"token", "logprob",
  "top_logprobs": [{"token", "logprob"}, ...]}, ...]`` (OpenAI's chat format; the request asks
  ``logprobs: true, top_logprobs: N``, N at most 20 on OpenAI's API).

A logprob counts only when it is a finite number in [-1000, 0] (a log-probability; small positive
rounding up to 1e-4 is read as 0): ``NaN``, ``inf``, ``1e308`` or ``-1e308`` from a server are
dropped, and a read-out left with neither side is *missing* (issue 41, items 9, 10, 14). A position
where any Yes/No spelling (``YES_WORDS``/``NO_WORDS``) carries such a value has *all* its Yes/No
spellings dropped, so the read-out is missing: a garbled " Yes" is never replaced by what a
minor spelling ("Yes" at -4) says (issue 50, item 3).

Thinking models: where the answer's first token opens a thinking block (``<think>``), the yes/no
read-out is taken at the first non-blank token after the block closes (``</think>``) — the
request then generates up to ``THINK_TOKENS`` tokens (``read_after_thinking``). A read by
generation (no logprobs at all) parses the text after any thinking block as Yes/No
(``parse_yes_no``).

``READ_VERSION`` names how this module reads a response; load-time findings recorded by another
version (``sqa.models.served_load``) are probed again, never taken as recorded: a reader that
misread a server (before version 2, llama-server's ``/v1/completions`` logprobs were taken for
none, so its read-out was ``generation``) must not pass its findings on. Raise it whenever
``token_positions`` or ``generated_text`` read a response otherwise.
"""

from __future__ import annotations

import math
import re

YES_WORDS = (" Yes", "Yes", " yes", "yes", " YES")  # as sqa.models.llamacpp
NO_WORDS = (" No", "No", " no", "no", " NO")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
THINK_TOKENS = 512  # tokens a thinking model may spend before its answer (a read-out after thinking)
LOWEST = -1000.0  # logprobs below this are taken as absurd (a float32 underflow is about -103)
READ_VERSION = 2  # 2: logprobs in the chat format read on /v1/completions too (llama-server)


def _logprob(v) -> float | None:
    """``v`` as a usable log-probability, else None (see the module doc)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    if not math.isfinite(v) or v < LOWEST or v > 1e-4:
        return None
    return min(v, 0.0)


_ANSWER_WORDS = frozenset(YES_WORDS + NO_WORDS)


def _clean(pairs) -> dict[str, float]:
    """``{token: logprob}`` from ``(token, raw value)`` pairs: the first usable value per token;
    with no Yes/No spelling at all when one of them has an unusable value (see the module doc)."""
    top: dict[str, float] = {}
    garbled = False
    for k, raw in pairs:
        v = _logprob(raw)
        if v is None:
            garbled = garbled or k in _ANSWER_WORDS
        elif k not in top:
            top[k] = v
    if garbled:
        top = {k: v for k, v in top.items() if k not in _ANSWER_WORDS}
    return top


def _choice(resp) -> dict:
    try:
        c = resp["choices"][0]
        return c if isinstance(c, dict) else {}
    except (KeyError, IndexError, TypeError):
        return {}


def token_positions(resp, endpoint: str) -> list[tuple[str, dict[str, float]]]:
    """``[(token text, {alternative: logprob})]`` for each generated token with its top logprobs
    (bad entries dropped, see the module doc); [] when the response holds none."""
    lp = _choice(resp).get("logprobs")
    if not isinstance(lp, dict):
        return []
    out: list[tuple[str, dict[str, float]]] = []
    if endpoint == "chat" or isinstance(lp.get("content"), list):  # llama-server answers completions so too
        content = lp.get("content")
        for item in content if isinstance(content, list) else []:
            if not isinstance(item, dict):
                out.append(("", {}))
                continue
            alts = item.get("top_logprobs")
            top = _clean(
                (a["token"], a.get("logprob"))
                for a in (alts if isinstance(alts, list) else [])
                if isinstance(a, dict) and isinstance(a.get("token"), str)
            )
            out.append((item.get("token") if isinstance(item.get("token"), str) else "", top))
        return out
    tokens, tops = lp.get("tokens"), lp.get("top_logprobs")
    tops = tops if isinstance(tops, list) else []
    tokens = tokens if isinstance(tokens, list) else [None] * len(tops)
    for i, t in enumerate(tops):
        top = {}
        if isinstance(t, dict):
            top = _clean((k, v) for k, v in t.items() if isinstance(k, str))
        tok = tokens[i] if i < len(tokens) and isinstance(tokens[i], str) else (max(top, key=top.get) if top else "")
        out.append((tok, top))
    return out


def logprobs_unread(resp, endpoint: str) -> list[str]:
    """The fields of a response's non-empty ``choices[0].logprobs`` object when ``token_positions``
    reads no top logprob from it (a form this module does not know); [] when it reads some, or
    when the response holds no logprobs (``null``, absent, or every field empty)."""
    lp = _choice(resp).get("logprobs")
    if not isinstance(lp, dict) or not any(lp.values()):
        return []
    if any(top for _, top in token_positions(resp, endpoint)):
        return []
    return sorted(str(k) for k in lp)


def generated_text(resp, endpoint: str) -> str:
    """The generated text (``choices[0].text`` or ``.message.content``); "" when absent."""
    return choice_text(_choice(resp), endpoint)


def choices(resp) -> list[dict]:
    """Every choice of a response (``n`` > 1 asks for several), in the order of their ``index``
    (their order in the list where an index is missing); [] when there are none."""
    cs = resp.get("choices") if isinstance(resp, dict) else None
    cs = [c for c in cs if isinstance(c, dict)] if isinstance(cs, list) else []
    return sorted(cs, key=lambda c: c.get("index") if isinstance(c.get("index"), int) else 1 << 30)


def choice_text(c: dict, endpoint: str) -> str:
    """One choice's generated text (``text``, or ``message.content`` over chat); "" when absent."""
    if endpoint == "chat":
        msg = c.get("message")
        text = msg.get("content") if isinstance(msg, dict) else None
    else:
        text = c.get("text")
    return text if isinstance(text, str) else ""


def choice_token_logprobs(c: dict) -> list[tuple[str, float | None]] | None:
    """``[(token, logprob)]`` of one choice's generated tokens, None when it holds no per-token
    logprobs. Read from ``logprobs.content[j].token/logprob`` (chat, and llama-server's completions)
    or ``logprobs.tokens/token_logprobs`` (completions), where a missing ``token_logprobs`` entry is
    taken from that position's ``top_logprobs`` when it lists the token; a logprob that is not a
    usable log-probability (see the module doc) is None."""
    lp = c.get("logprobs")
    if not isinstance(lp, dict):
        return None
    content = lp.get("content")
    if isinstance(content, list):
        return [
            (str(it.get("token")) if isinstance(it.get("token"), str) else "", _logprob(it.get("logprob")))
            if isinstance(it, dict)
            else ("", None)
            for it in content
        ]
    tokens = lp.get("tokens")
    if not isinstance(tokens, list):
        return None
    values = lp.get("token_logprobs")
    values = values if isinstance(values, list) else []
    tops = lp.get("top_logprobs")
    tops = tops if isinstance(tops, list) else []
    out = []
    for i, t in enumerate(tokens):
        t = t if isinstance(t, str) else ""
        v = _logprob(values[i]) if i < len(values) else None
        if v is None and i < len(tops) and isinstance(tops[i], dict):
            v = _logprob(tops[i].get(t))
        out.append((t, v))
    return out


def strip_prefill(text: str, reply: str) -> str:
    """The continuation alone of a final assistant message ``reply`` continued over chat: llama.cpp's
    ``llama-server`` (the build vendored by llama-cpp-python 0.3.36) returns the whole message, the
    prefilled ``reply`` included, where vLLM returns only what was generated (its logprobs cover the
    generated tokens only, either way); ``text`` without that leading ``reply``."""
    return text[len(reply) :] if reply and text.startswith(reply) else text


def opens_thinking(positions: list[tuple[str, dict]], text: str = "", resp=None) -> bool:
    """Whether the answer starts with a thinking block (first token ``<think>``, or a
    ``reasoning_content`` field from a server that splits the thinking off)."""
    msg = _choice(resp).get("message") if resp is not None else None
    if isinstance(msg, dict) and (msg.get("reasoning_content") or msg.get("reasoning")):
        return True
    first = positions[0][0] if positions else text
    return first.strip().startswith(THINK_OPEN) or (not positions and text.lstrip().startswith(THINK_OPEN))


def answer_position(positions: list[tuple[str, dict]]) -> dict[str, float] | None:
    """The top logprobs of the answer's first token: the first position, or, when the answer opens
    a thinking block, the first non-blank token after ``</think>`` (None when it never closes)."""
    if not positions:
        return None
    if not positions[0][0].strip().startswith(THINK_OPEN):
        return positions[0][1]
    seen = ""
    for i, (tok, _) in enumerate(positions):
        seen += tok
        if THINK_CLOSE in seen:
            for tok2, top2 in positions[i + 1 :]:
                if tok2.strip():
                    return top2
            return None
    return None


def log_odds(top: dict[str, float] | None) -> tuple[float, str]:
    """``(log P(Yes) - log P(No), kind)`` from one next-token top-logprobs dict. ``kind``: "both",
    "one_sided" (the absent side taken at the last listed token's probability, an upper bound) or
    "missing" (neither listed, or no usable logprobs: log-odds 0, P(yes) 0.5)."""
    if not top:
        return 0.0, "missing"
    py = sum(math.exp(top[w]) for w in YES_WORDS if w in top)
    pn = sum(math.exp(top[w]) for w in NO_WORDS if w in top)
    if py == 0.0 and pn == 0.0:
        return 0.0, "missing"
    floor = max(math.exp(min(top.values())), 1e-300)
    lo = math.log(py or floor) - math.log(pn or floor)
    if not math.isfinite(lo):
        return 0.0, "missing"
    return lo, ("one_sided" if py == 0.0 or pn == 0.0 else "both")


_THINK_BLOCK = re.compile(re.escape(THINK_OPEN) + r".*?" + re.escape(THINK_CLOSE), re.S)
_WORD = re.compile(r"[A-Za-z]+")


def parse_yes_no(text: str) -> bool | None:
    """Yes (True) / No (False) from a short generated answer: its first word after any thinking
    block (``Yes.``, ``**No**``, ``yes, because``); None when it is neither (or the block never closes)."""
    if THINK_OPEN in text:
        if THINK_CLOSE not in text:
            return None
        text = _THINK_BLOCK.sub(" ", text)
    m = _WORD.search(text)
    if not m:
        return None
    w = m.group(0).lower()
    return True if w == "yes" else False if w == "no" else None
