"""``sqa ask``'s work as a library call: one question through a :class:`sqa.Reader`, with what a
terminal (:func:`sqa.render.answers.answer_tree`) or ``--json`` (:meth:`Asked.to_json`) shows.

>>> asked = ask_question(sqa.Reader("facts", index=index), "Did Aristotle use a laptop?")
>>> asked.result.answer, asked.to_json()["confidence"]
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

from sqa.types import MAX_K, Question, SqaError


def check_ask(question: str, k: int, reader: str, decomposition, steps: bool, head) -> None:
    """Raise SqaError (one line) for what ``sqa ask`` cannot do: an empty question, top-k outside
    1..MAX_K, an unknown ``decomposition``, or a flag the chosen ``reader`` ("facts" | "steps")
    would ignore (``decomposition`` with the facts reader, which reads none; ``steps`` or ``head``
    with the steps reader, which always decomposes and has no head)."""
    if not question.strip():
        raise SqaError('empty question; pass the question text, e.g. sqa ask "Is the sun a star?"')
    if not 1 <= k <= MAX_K:
        raise SqaError(f"--k must be from 1 to {MAX_K:,} (got {k})")
    if decomposition not in (None, "predicted", "question"):
        raise SqaError(f"--decomposition {decomposition!r}: use predicted or question")
    if reader == "facts" and decomposition is not None:
        raise SqaError(
            "--decomposition goes with the steps reader (--reader steps); the facts reader reads no "
            "decomposition (--steps shows one next to its answer)"
        )
    if reader == "steps" and steps:
        raise SqaError("--steps goes with the facts reader; the steps reader always decomposes")
    if reader == "steps" and head is not None:
        raise SqaError("--head goes with the facts reader; the steps reader has no answer head")


@dataclass
class Asked:
    """One asked question: ``result`` (``sqa.trace.ReasoningResult``), ``model`` (the name given),
    ``served`` (the ``ServedOptions`` given, or None), ``head`` (the facts reader's answer head,
    None when zero-shot or the steps reader), ``step_facts`` (per decomposition step, the facts
    ``--steps`` shows), ``demos_by`` (how the decomposer's demonstrations were picked),
    ``paragraphs`` (evidence ID -> ``sqa.types.Paragraph`` of the evidence the steps reader shows),
    ``server`` (``served_details``: {} for an in-process model), ``settings`` (the reader's
    ``sqa.ReaderSettings.to_dict()``, as it answered)."""

    result: Any
    model: str
    served: Any = None
    head: Any = None
    step_facts: list = field(default_factory=list)
    demos_by: str = ""
    paragraphs: dict = field(default_factory=dict)
    server: dict = field(default_factory=dict)
    lm: Any = None  # the loaded model (its read-out statistics: sqa.render.tables.served_notes)
    facts_reader: bool = True  # the facts reader answered (else the steps reader)
    prompt_form: str = ""  # the facts reader's: "text" | "chat" (sqa.facts.prompt)
    prefill: bool | None = None  # the steps reader's: transcript continued (True) or read in turns
    head_identity_checked: bool | None = None  # a served model's head: checked against its weights (heads.py)
    settings: dict = field(default_factory=dict)  # the reader's ReaderSettings.to_dict()

    def to_json(self) -> dict:
        """The ``sqa ask --json`` object: ``ReasoningResult.to_ask_json()`` ({"question",
        "decomposition": [{"step", "answer", "evidence", "facts"?}], "answer", "confidence",
        "paragraphs", ...}), ``model``, the model's own ``readings`` (P(yes) of the plain and the
        facts prompt) and ``timings`` (seconds by phase and "total"), the served model's details, the facts reader's ``prompt_form`` or the
        steps reader's ``prefill``, when a head answered, ``head_fitted_on`` (and, for a served
        model, ``head_identity_checked``: ``sqa.facts.heads.head_identity_checked``), and the
        reader's ``settings`` (``sqa.ReaderSettings.to_dict()``: no credentials, home as ``~``)."""
        obj = {**self.result.to_ask_json(), "model": self.model, **self.server}
        if self.result.signals:  # the model's own P(yes) behind the answer, as the text shows them
            obj["readings"] = dict(self.result.signals)
        obj["timings"] = dict(self.result.timings)  # seconds, as the text's "(1.9 s, ...)"
        if self.prompt_form:  # how the facts reader's prompts were read: as text, or in the chat template
            obj["prompt_form"] = self.prompt_form
        if self.prefill is not None:  # how the steps reader's transcript was read: continued, or in turns
            obj["prefill"] = self.prefill
        if self.facts_reader and self.result.head:  # which head answered and how many questions it saw
            from sqa.facts.heads import fitted_count

            obj["head_fitted_on"] = fitted_count(self.head)
            if self.head_identity_checked is not None:  # a served model's: False = on the user's word
                obj["head_identity_checked"] = self.head_identity_checked
        for d, facts in zip(obj["decomposition"], self.step_facts):
            d["facts"] = [f.to_dict() for f in facts]
        if self.settings:  # what answered: preset or method with its settings, model, served options, k
            obj["settings"] = self.settings
        return obj

    def json_text(self, indent: int | None = 1) -> str:
        """:meth:`to_json` as JSON text any parser reads (``indent=None``: on one line, a line of
        JSON Lines); a NaN or infinity (which ``json.dumps`` would print as the invalid ``NaN``)
        raises SqaError naming the model instead."""
        try:
            return json.dumps(self.to_json(), ensure_ascii=False, indent=indent, allow_nan=False)
        except ValueError:
            raise SqaError(
                f"model {self.model}: the answer holds a value that is not a number (NaN/inf), so no JSON is printed; "
                "the model file is likely damaged (a built-in model is re-checked and re-assembled on the next "
                "run; delete a .gguf of your own and download it again)"
            ) from None


def ask_question(
    reader,
    question: str,
    *,
    decomposition: str | None = None,
    steps: bool = False,
    status: Callable[[str], Any] | None = None,
    note: Callable[[str], None] = lambda line: None,
) -> Asked:
    """Answer ``question`` with ``reader`` (an :class:`sqa.Reader`) -> :class:`Asked`. The facts
    reader checks its head before the model loads (:meth:`sqa.Reader.preflight`) and, with
    ``steps``, also writes the decomposition and each step's best sentence (shown only,
    ``steps_for_display``); the steps reader decomposes (``decomposition``:
    "predicted", its default, or "question"). ``status(message)``: a context manager shown while a
    phase runs (a spinner); ``note(line)``: what is worth a line. Raises what loading raises."""

    status = status or (lambda message: nullcontext())
    facts = reader.preset.reader == "facts"
    head = reader.preflight() if facts else None
    from sqa.facts.heads import head_identity_checked

    checked = head_identity_checked(head, reader.model)  # False: warned once, as the reader is built
    with status(f"loading {reader.model} and the index…") if not reader.loaded else nullcontext():
        pipe = reader.pipeline
    t = time.perf_counter()
    q = Question(qid="", question=question)
    with status("reading…" if facts else "reasoning…"):
        result = pipe.reader.answer_batch([q], decomposition="question" if facts else decomposition or "predicted")[0]
    asked = Asked(result, reader.model, reader.base_url, head, facts_reader=facts)
    asked.prompt_form = reader.prompt_form if facts else ""
    asked.head_identity_checked = checked
    asked.prefill = None if facts else reader.prefill
    asked.settings = reader.settings.to_dict()
    if facts and steps and not result.steps:  # a head that reads step facts has written them already
        t_steps = time.perf_counter()
        asked.step_facts, asked.demos_by = steps_for_display(pipe.reader, question, result, reader.k, status, note)
        result.timings["steps"] = round(time.perf_counter() - t_steps, 3)
    if facts:
        result.timings["total"] = round(time.perf_counter() - t, 3)
    result.qid = None
    asked.server = served_details(pipe.model)
    asked.lm = pipe.model
    ids = [s.evidence[0] for s in result.steps if s.evidence] + result.paragraphs[:1]
    if not facts and pipe.backend is not None and ids:
        asked.paragraphs = {p.evidence_id: p for p in pipe.backend.get(list(dict.fromkeys(ids)))}
    return asked


def steps_for_display(reader, question: str, result, k: int, status=None, note=lambda line: None):
    """``sqa ask --steps`` with the facts reader (``reader``: a loaded ``sqa.facts.reader.FactsReader``):
    write the decomposition into ``result.steps`` (``sqa.trace.ReasoningResult``) and find each
    step's best sentence (``sqa.facts.sources.step_evidence``); returns ``(facts per step, how the
    demonstrations were picked)``. Shown only: the answer does not read them.

    The decomposer (``sqa.steps.decomposer.Decomposer``) sees the 3 train-2061 questions nearest
    in meaning (all-MiniLM-L6-v2), whatever their answers, the nearest last; without the MiniLM
    weights, the 3 nearest by BM25 (``bench/results/decomposition_demos.json``: SARI against dev's
    gold decompositions for both). ``status(message)``: a context manager shown while a phase
    runs; ``note(line)``: what is worth a line (the BM25 fallback)."""
    from contextlib import nullcontext

    from sqa.facts.sources import default_annotated_facts, step_evidence
    from sqa.pipeline import make_decomposer
    from sqa.trace import StepTrace

    status = status or (lambda message: nullcontext())
    with status("loading MiniLM (demonstrations and step evidence)…"):
        dec = make_decomposer(reader.model)
    if dec.note:
        note(f"note: demonstrations and step evidence by BM25 ({dec.note})")
    with status("decomposing…"):
        result.steps = [StepTrace(index=i, question=s) for i, s in enumerate(dec(question), start=1)]
        facts: list[list] = []
        for s in result.steps:
            fs = (
                step_evidence(
                    s.question, reader.retriever, default_annotated_facts(), question=question, k=k, encode=dec.encode
                )
                if reader.retriever is not None
                else []
            )
            s.evidence = [f.ref for f in fs if f.source == "wikipedia"]
            facts.append(fs)
    return facts, dec.demos_by


def served_details(model) -> dict:
    """``{"server": {base_url, base_urls, model, endpoint, readout, top_logprobs, thinking, prefill,
    chat_template, fingerprint, contacted, identity, readout_stats, cost}}`` for a served model (no
    credentials; ``sqa ask --json`` adds it), {} for an in-process one."""
    info = model.server_info
    if not info:
        return {}
    keep = (
        "base_url",
        "base_urls",
        "model",
        "endpoint",
        "readout",
        "top_logprobs",
        "thinking",
        "prefill",
        "chat_template",
        "fingerprint",
        "contacted",
        "identity",
    )
    return {
        "server": {
            **{k: info[k] for k in keep if k in info},
            "readout_stats": dict(model.readout_stats or {}),
            "cost": model.cost.to_dict() if model.cost is not None else None,
        }
    }
