"""Named question sets (``sqa eval --protocol NAME``): the sets StrategyQA results are reported on,
so a run can be named by the protocol a paper used. Questions are taken in the release's order
(``sqa.strategyqa.load_questions``: the train file's order; the dev split's order in
``split_qids.json``); ``--limit`` still cuts a protocol to its first N questions.

The facts reader answers train questions out-of-fold (``sqa eval --split train``), so a train
protocol is never answered by a head fitted on its own questions. Sources: docs/protocols.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqa.types import SqaError


@dataclass(frozen=True)
class Protocol:
    """One named question set: the first ``n`` questions of ``split`` (all when None), and for a
    paper's protocol the method ``settings`` it pins (``sqa.methods.MethodSettings`` fields: each
    applies to a method that reads it; a different value given by the user is refused) and the
    ``method`` it is (a run of another method or a preset is refused)."""

    name: str
    split: str
    n: int | None
    summary: str
    settings: dict = field(default_factory=dict)
    method: str = ""

    def to_dict(self) -> dict:
        d = {"protocol": self.name, "split": self.split, "questions": self.n, "summary": self.summary}
        d = {**d, "settings": dict(self.settings)} if self.settings else d
        return {**d, "method": self.method} if self.method else d


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
        Protocol(
            "dragin-1000",
            "train",
            1000,
            "DRAGIN (Su et al. 2024): the first 1,000 train questions, DRAGIN's CoT wording, its answer rule "
            "(yes if the words after 'the answer is' start with yes, else no), top-3 paragraphs",
            {"prompt": "dragin", "answer_rule": "answer-is-else-no", "k": 3},
        ),
        Protocol(
            "shao-500",
            "train",
            500,
            "Iter-RetGen (Shao et al. 2023): the first 500 train questions, k = 5 paragraphs, T = 2 iterations",
            {"k": 5, "iterations": 2},
        ),
        Protocol(
            "bigbench-2290",
            "train",
            None,
            "BIG-bench's zero-shot StrategyQA task as lm-evaluation-harness scores it: all 2,290 train "
            "questions, 'Q: {question}\\nA:', Yes against No by the first answer token's probability",
            method="bigbench",
        ),
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
        if p.settings or p.method:  # a paper's whole setting is named only when asked for
            continue
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


# How a train cut too small to cross-fit is answered (run.json's and metrics.json's ``answering_note``).
ZERO_SHOT_CUT = (
    "too few questions to cross-fit the facts reader's answer heads out-of-fold (that needs labelled "
    "questions of both answers on as many terms as folds, besides the prompt's demonstrations), and an "
    "answer head fitted on train questions would answer some of them in-sample: answered zero-shot, "
    "with the model's own P(yes), uncalibrated"
)
# What the demonstration questions of a facts-reader run are (metrics.json's ``demonstrations``).
DEMONSTRATION_NOTE = (
    "the prompt's fixed demonstrations (the facts reader's, sqa.facts.prompt, or a method's exemplars, "
    "Method.demonstrations): each is in the prompt with its answer, "
    "so its answer is leaked; counted in Accuracy, left out of without_demonstrations, marked in "
    "traces.jsonl (eval.demonstration) and report.html"
)


def first_enough(split: str, folds: int) -> int | None:
    """The fewest of ``split``'s first questions the facts reader can cross-fit into ``folds`` folds
    (``sqa.facts.crossfit.crossfit_shortfall``, the demonstrations left out); None if none do."""
    from sqa.facts.crossfit import crossfit_shortfall
    from sqa.facts.prompt import demo_qids
    from sqa.strategyqa import load_questions

    everything, demos = load_questions(split), demo_qids()
    return next(
        (n for n in range(folds, len(everything) + 1) if crossfit_shortfall(everything[:n], folds, demos) is None),
        None,
    )


def zero_shot_cut_note(
    questions, split: str, folds: int, model: str, retrieval: bool, form: str = "text"
) -> str | None:
    """None when the facts reader can cross-fit ``questions`` (the first of ``split``, a train split;
    ``sqa.types.Question``) into ``folds`` folds; else the line saying they are answered zero-shot and why: too few to
    cross-fit, ``model``'s answer head (facts, or plain without ``retrieval``; prompt ``form``)
    fitted on some of them or missing, and how many are the prompt's demonstrations (leaked)."""
    from sqa.facts.crossfit import crossfit_shortfall
    from sqa.facts.prompt import demo_qids
    from sqa.facts.reader import head_for
    from sqa.strategyqa import load_questions
    from sqa.types import HeadNotFound

    demos = demo_qids()
    why = crossfit_shortfall(questions, folds, demos)
    if why is None:
        return None
    qids = {q.qid for q in questions}
    try:
        h = head_for(model, "facts" if retrieval else "plain", None, form)
        fitted = h.provenance.get("fitted_qids")
        if not isinstance(fitted, list) and h.provenance.get("train_split") == "train-2061":
            fitted = [q.qid for q in load_questions("train-2061")]
        seen = len((qids - demos) & set(fitted or ()))  # a head is never fitted on the demonstrations
        head = (
            f"its answer head {h.source} was fitted on {seen} of them"
            if seen
            else f"its answer head {h.source} is not used on a train split"
        )
    except HeadNotFound:
        head = "it has no answer head"
    need = first_enough(split, folds)
    n_demos = len(qids & demos)
    return (
        f"{len(qids)} question(s) are too few to cross-fit the answer heads out-of-fold ({why}, the "
        f"demonstrations left out{f'; the first {need} of {split} are enough' if need else ''}) and {head}: "
        "answered zero-shot, with the model's own P(yes), uncalibrated"
        + (
            f"; {n_demos} of them are the prompt's demonstrations, whose answers are in the prompt "
            "(leaked): marked in traces.jsonl, metrics.json and report.html"
            if n_demos
            else ""
        )
    )
