"""Plain words for the internal tags a report shows: how the final answer was made, and the
decomposition; the tag itself stays in reach (report.html: a tooltip; report.md: in brackets)."""

from __future__ import annotations

import re

READING = {
    "plain": "the question alone",
    "transcript": "the steps' transcript",
    "direct": "the question after the steps",
}
RULES = {
    "answer-is": "the first yes/no after 'the answer is'",
    "answer-is-else-no": "yes if the words after 'the answer is' start with yes, else no",
    "forced": "P(yes) read after 'So the answer is'",
}
DECOMPOSITION = {
    "question": "none: retrieval with the whole question",
    "predicted": "the model's own steps",
    "gold": "the annotated steps",
}


def _readings(names: str) -> str:
    parts = []
    for n in names.split("+"):
        m = re.fullmatch(r"f(\d+)", n)
        parts.append(f"with {m.group(1)} facts shown" if m else READING.get(n, n))
    return " and ".join(parts)


def plain_answer(tag: str | None) -> str:
    """How a run's final answers were made, in words, from its ``final_answer`` tag (e.g.
    ``head:plain+f5 lo:plain+f5 +retrieval`` -> "a trained answer head over the model's readings of
    the question alone and with 5 facts shown, and the retrieval scores"); the tag itself for one
    it does not know, "?" for none."""
    if not tag:
        return "?"
    rest = ""
    m = re.match(r"(.*?)( \(.*\))$", tag)  # "(out-of-fold, ...)" or "(n questions; ...)" kept as it is
    if m:
        tag, rest = m.group(1), m.group(2)
    if m := re.fullmatch(r"(?:(\w+) )?head:(\S+) lo:\S+( \+retrieval)?", tag):  # "facts head:...": the kind
        kind, reads, retrieval = m.groups()
        words = f"{'the ' + kind if kind else 'a trained'} answer head over the model's readings of {_readings(reads)}"
        return words + (", and the retrieval scores" if retrieval else "") + rest
    if m := re.fullmatch(r"zero-shot:(facts|plain)", tag):
        return f"the model's own P(yes), uncalibrated, {'with the facts shown' if m.group(1) == 'facts' else 'from the question alone'}{rest}"
    if m := re.fullmatch(r"method:([\w-]+):([\w-]+)", tag):
        return f"method {m.group(1)}, answer rule: {RULES.get(m.group(2), m.group(2))}{rest}"
    if re.fullmatch(r"[a-z]+(\+[a-z]+)*", tag):
        how = "the mean log-odds of the model's P(yes) after" if "+" in tag else "the model's P(yes) after"
        return f"{how} {_readings(tag)}{rest}"
    return tag + rest


def plain_decomposition(name: str | None) -> str:
    """The decomposition setting in words ("question" -> "none: retrieval with the whole question")."""
    return DECOMPOSITION.get(name or "", name or "?")
