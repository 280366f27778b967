"""Named question sets (``sqa eval --protocol NAME``): the sets StrategyQA results are reported on,
so a run can be named by the protocol a paper used. Questions are taken in the release's order
(``sqa.strategyqa.load_questions``: the train file's order; the dev split's order in
``split_qids.json``); ``--limit`` still cuts a protocol to its first N questions.

The facts reader answers train questions out-of-fold (``sqa eval --split train``), so a train
protocol is never answered by a head fitted on its own questions. Sources: docs/protocols.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqa.types import SqaError


@dataclass(frozen=True)
class Protocol:
    """One named question set: the first ``n`` questions of ``split`` (all when None)."""

    name: str
    split: str
    n: int | None
    summary: str

    def to_dict(self) -> dict:
        return {"protocol": self.name, "split": self.split, "questions": self.n, "summary": self.summary}


PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol(
            "dev-229",
            "dev",
            None,
            "this project's dev split: the 229 questions of the original baselines' "
            "2,061 / 229 split of the train file (Geva et al., 2021)",
        ),
        Protocol("train-first-500", "train", 500, "the first 500 questions of the train file"),
        Protocol("train-first-1000", "train", 1000, "the first 1,000 questions of the train file"),
        Protocol("train-2290", "train", None, "all 2,290 questions of the train file"),
    )
}


def get_protocol(name: str) -> Protocol:
    """The protocol called ``name``; SqaError naming the known ones otherwise."""
    p = PROTOCOLS.get(name)
    if p is None:
        raise SqaError(f"unknown protocol {name!r}; use one of {', '.join(PROTOCOLS)}")
    return p


def protocol_limit(protocol: Protocol, limit: int | None) -> int | None:
    """How many of the split's first questions a run of ``protocol`` cut by ``--limit`` answers."""
    if protocol.n is None:
        return limit
    return protocol.n if limit is None else min(limit, protocol.n)


def protocol_of(split: str, n_questions: int) -> str:
    """The protocol a run without ``--protocol`` matches (``split``'s first ``n_questions``), or ""."""
    from sqa.strategyqa import SPLITS, load_questions

    if split not in SPLITS:
        return ""
    for p in PROTOCOLS.values():
        if p.split == split and n_questions == (p.n or len(load_questions(split))):
            return p.name
    return ""


def question_set(protocol: str, n_questions: int) -> dict | None:
    """The ``metrics.json`` entry ``question_set`` of a run of ``protocol`` that answers its first
    ``n_questions`` (fewer than the protocol's when ``--limit`` cut it); None without a protocol."""
    if not protocol:
        return None
    p = get_protocol(protocol)
    d = p.to_dict()
    from sqa.strategyqa import load_questions

    if n_questions < (p.n or len(load_questions(p.split))):
        d["cut_to"] = n_questions
    return d
