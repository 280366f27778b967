"""Answer rules: how a method's generated text becomes yes or no.

- ``answer-is``: the first "yes" or "no" word after the first "answer is" (case-insensitive, a
  colon or quotes allowed between), as in Wei et al. 2022's exemplars ("So the answer is yes.")
  and Self-Ask's "So the final answer is: Yes". Text without one is unread (None): the method then
  reads the ``forced`` answer for that output, and the run counts it as unread.
- ``answer-is-else-no``: DRAGIN's rule, as its ``src/data.py`` (``sqa.methods.prompts.DRAGIN_SOURCE``)
  writes it: find "the answer is" (case-sensitive), skip it and one character, yes when the next
  three characters are "yes" (any case), else no. Where the phrase is missing DRAGIN generates 20
  more tokens after " So the answer is " (``src/eval.py``); here the output is scored no, as the
  rule alone does, and counted as unread.
- ``forced``: "So the answer is" is appended to the prompt and the generation, and P(yes) is read
  from the next token's distribution (``LanguageModel.yes_probability``).
"""

from __future__ import annotations

import re

ANSWER_IS = re.compile(r"answer\s+is\s*[:\-]?\s*[\"'*(\[]*\s*(yes|no)\b", re.IGNORECASE)
PHRASE = re.compile(r"the\s+answer\s+is", re.IGNORECASE)
FORCED_SUFFIX = " So the answer is"
DRAGIN_PHRASE = "the answer is"  # DRAGIN src/data.py answer_prompts


def answer_is(text: str) -> bool | None:
    """Yes (True) / no (False) from the first "answer is ... yes|no" in ``text``; None when there is none."""
    m = ANSWER_IS.search(text or "")
    return None if m is None else m.group(1).lower() == "yes"


def answer_is_else_no(text: str) -> tuple[bool, bool]:
    """``(answer, read)`` by DRAGIN's rule: after "the answer is", yes if the next word starts with
    "yes", else no; no phrase: ``(False, False)`` (scored no, counted unread)."""
    text = text or ""
    at = text.find(DRAGIN_PHRASE)
    if at < 0:
        return False, False
    rest = text[at + len(DRAGIN_PHRASE) + 1 :]
    return rest[0:3].lower() == "yes", True


def forced_prompt(prompt: str, generated: str) -> str:
    """The prompt whose next token's P(yes) the ``forced`` rule reads: the prompt, the generation
    with any final answer sentence cut at "answer is" (so the answer is not read twice), and
    :data:`FORCED_SUFFIX`."""
    text = generated or ""
    m = PHRASE.search(text)
    if m is not None:
        text = text[: m.start()].rstrip()
        text = re.sub(r"\s*So\s*$", "", text)
    return prompt + text.rstrip() + FORCED_SUFFIX
