"""What the reader returns for one question: every step with its query, answer and evidence,
the final answer with its confidence, and timings. ``sqa.eval`` serialises these to
``traces.jsonl`` and ``predictions.json``; ``sqa ask --json`` prints ``to_ask_json()``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sqa.types import Prediction


@dataclass
class StepTrace:
    """One decomposition step as executed: ``question`` as written by the decomposer (may hold
    ``#k``), ``query`` the text actually searched (after ``#k`` substitution and cleaning),
    ``answer`` the reader's answer, ``evidence`` the evidence IDs retrieved (best first) with
    their ``scores``, and the seconds spent."""

    index: int
    question: str
    query: str = ""
    answer: str | None = None
    evidence: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    seconds: float = 0.0
    computed: bool = False  # the answer was computed from earlier answers (sqa.steps.operations), not generated


@dataclass
class ReasoningResult:
    """The reader's full output for one question.

    ``confidence`` is P(answer is right) as read from the model: P(yes) for a yes answer,
    1 - P(yes) for a no. ``p_yes`` is P(" Yes") / (P(" Yes") + P(" No")). ``paragraphs`` are the
    top-10 evidence IDs for the whole question (the leaderboard's ``paragraphs``). ``timings``
    maps a phase name (decompose, retrieve, read, answer, total) to seconds. ``fewshot_qids``
    are the qids of the few-shot demonstrations in the prompt (never ``qid`` itself). When the
    reader corrects the model's label bias, ``p_yes`` is the corrected value and ``p_yes_raw``
    the model's own.
    """

    question: str
    steps: list[StepTrace]
    answer: bool
    p_yes: float
    paragraphs: list[str]
    qid: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    model: str = ""
    fewshot_qids: list[str] = field(default_factory=list)  # the train questions shown as demonstrations
    p_yes_raw: float | None = None  # the model's P(yes) before the reader's label-bias correction
    signals: dict[str, float] = field(default_factory=dict)  # raw P(yes) per prompt read (see StepsReader)
    decision: str = ""  # the signals combined into p_yes ("+"-joined), or "head:<features>" for the answer head
    facts: list[dict] = field(default_factory=list)  # facts shown to the reader: {text, source, ref, score}
    # whether p_yes comes from a fitted answer head (True) or is the model's own, uncalibrated (False)
    calibrated: bool = True
    head: str = ""  # the answer head that answered (its file name), "" when none did
    # a method's record (sqa.methods.reader): name, answer rule, read, votes, text, cost, calls; {} for the readers
    method: dict = field(default_factory=dict)

    @property
    def confidence(self) -> float:
        return self.p_yes if self.answer else 1.0 - self.p_yes

    @property
    def decomposition(self) -> list[str]:
        """The step texts; a run without steps (decomposition mode "question") counts as the
        one-step decomposition [question], which is what the leaderboard file and SARI get."""
        return [s.question for s in self.steps] or [self.question]

    def to_prediction(self) -> Prediction:
        return Prediction(
            qid=self.qid or "",
            answer=self.answer,
            confidence=self.confidence,
            decomposition=self.decomposition,
            paragraphs=list(self.paragraphs),
        )

    def to_ask_json(self) -> dict:
        """The ``sqa ask --json`` object: question, decomposition [{step, answer, evidence}],
        answer, confidence, paragraphs."""
        return {
            "question": self.question,
            "decomposition": [
                {"step": s.question, "answer": s.answer, "evidence": list(s.evidence)} for s in self.steps
            ],
            "answer": self.answer,
            "confidence": self.confidence,
            "paragraphs": list(self.paragraphs),
            "p_yes": self.p_yes,
            "calibrated": self.calibrated,
            **({"head": self.head} if self.head else {}),
            **({"facts": [dict(f) for f in self.facts]} if self.facts else {}),
            **({"method": {k: v for k, v in self.method.items() if k != "calls"}} if self.method else {}),
        }

    def to_dict(self) -> dict:
        """Everything, JSON-serialisable (one line of ``traces.jsonl``; ``method`` only for a method's answer)."""
        d = asdict(self)
        d["confidence"] = self.confidence
        if not d["method"]:
            del d["method"]
        return d
