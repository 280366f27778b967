"""The facts reader (default ``--reader facts``): select a few facts for the question, read them
with the facts reader, and answer with the trained answer head.

    question ─► retriever top-k paragraphs ─► BM25 best sentences ┐
             └► train-2061 annotated facts (never the question's own) ┴► facts reader ─► answer head ─► P(yes)

Each read-out (plain prompt, after each fact line) gives the model's last-token hidden state and
its yes/no log-odds (``sqa.facts.prompt``); the head (``sqa.facts.head``) maps the
features it was trained on to P(yes). Without retrieval the same reader reads the plain prompt only
and the no-retrieval head answers. The model's own verbalised readings are kept in
``ReasoningResult.signals`` ("plain", "facts") for comparison.

Zero-shot (no answer head for the model yet, issue 42): the answer is the model's own P(yes) of
the last read-out, after all facts (``signals["facts"]``), or of the plain prompt without
retrieval, thresholded at 0.5 (P(yes) = P(" Yes") / (P(" Yes") + P(" No")) at "Answer:", so 0.5
is where the model puts equal weight on both answers; no bias correction, nothing fitted). It is
marked ``calibrated=False``; ``sqa eval --split train --model M`` fits a head, used from then on.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from sqa.facts.features import FactSelector, FactSettings, complete_lines, question_features, read_done
from sqa.facts.prompt import PROMPT_VERSION, QuestionFeatures, form_of_version
from sqa.facts.head import AnswerHead, feature_vector, readout_for, readout_names, scalar_features
from sqa.trace import ReasoningResult
from sqa.types import BadInput, LanguageModel, ORACLES, Question, SqaError

# The fact settings of a reader without a head (zero-shot): those of an out-of-fold run and the
# shipped heads (the best sentences of the top 3 paragraphs; FactSettings' doc), so the features a
# zero-shot answer reads are the ones a head later fitted by `sqa eval --split train` reads.
ZERO_SHOT_SETTINGS = {"sentence_paragraphs": 3}


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(z, 60.0), -60.0)))


class FactsReader:
    """Answers questions with the facts reader and a trained ``AnswerHead``, or zero-shot.

    - ``head``: the answer head; None answers zero-shot with the model's own P(yes) (the module
      doc), each result marked ``calibrated=False``, facts read when ``retriever`` (or an oracle)
      is given.
    - ``retriever``: a ``sqa.retriever`` Retriever (None: no retrieval; the head must then read
      the plain prompt only).
    - ``oracle``: "facts" (the question's annotated facts are shown) or "paragraphs" (the best
      sentences of its annotated evidence paragraphs): diagnostics, never defaults; they need
      labelled questions.
    - ``features_cache``: a features file (``sqa.facts.features``: ``extract`` or a ``FeaturesStore`` part)
      with the same model, prompt and fact settings; questions found there are not read again.
    - ``prefix_cache``: a directory where the model (if it has ``warm_prefixes``: llama.cpp) keeps
      the KV cache of the two fixed prompt heads between processes (``sqa ask``, ``sqa eval``).
    - ``prompt_form``: "text" or "chat" (``sqa.facts.prompt``; default: the head's, else "text");
      a model served over ``/v1/chat/completions`` reads the chat form whatever is asked
      (:func:`reader_form`).
    Raises SqaError when the head needs facts but retrieval is off, for an unknown oracle
    (``FactSelector`` checks it), and when the head was fitted on reads of another prompt form
    than the model reads (its answers would be silently wrong).
    """

    prefers_batches = False

    def __init__(
        self,
        model: LanguageModel,
        head: AnswerHead | None,
        retriever=None,
        *,
        k: int = 10,
        settings: FactSettings | None = None,
        oracle: str | None = None,
        backend=None,
        features_cache: str | Path | None = None,
        prefix_cache: str | Path | None = None,
        prompt_form: str | None = None,
    ):
        form = reader_form(model, prompt_form or (head_form(head) if head is not None else "text"))
        if head is not None:
            check_head_form(head, form, f"{model.name} reads its prompts in")
        if head is not None and head.spec.uses_facts and retriever is None and oracle is None:
            raise SqaError(
                "this answer head reads facts, so it needs retrieval; use the no-retrieval head "
                "(--no-retrieval picks it) or pass --head"
            )
        if head is not None:
            head.check_size(model.hidden_size, model.name or "this model")
        self.model = model
        self.head = head
        self.retriever = retriever
        self.k = k
        self.oracle = oracle
        # facts are shown (and read out after) when the head reads them, or zero-shot when retrieving
        self.reads_facts = bool(oracle) or (head.spec.uses_facts if head is not None else retriever is not None)
        if settings is None:
            settings = (
                FactSettings.from_dict(head.provenance.get("facts", {}), k=k)
                if head is not None
                else FactSettings(k=k, **ZERO_SHOT_SETTINGS)
            )
        if settings.form != form:
            settings = replace(settings, form=form)
        self.settings = settings
        self.prompt_form = form
        self.selector = FactSelector(
            retriever if self.reads_facts else None, self.settings, oracle=oracle, backend=backend
        )
        self.decomposer = None
        if self.selector.needs_steps:  # a head trained on step facts: the model writes the steps first
            from sqa.steps.decomposer import Decomposer

            self.decomposer = Decomposer(
                model, encode=self.selector.step_encode, require_minilm=True, cache_dir=prefix_cache
            )
        if features_cache:
            check_features_file(features_cache)  # one line naming file, line and field, not a KeyError later
        self._cache = read_done(Path(features_cache)) if features_cache else {}
        if prefix_cache is not None and model.capabilities.prefix_cache and form == "text":
            # the chat form's prompts start with the template's own head: its prefix is cached
            # from the first question on (longest-common-prefix reuse), not warmed from disk
            from sqa.facts.prompt import facts_prefix, plain_prefix

            model.warm_prefixes([plain_prefix()] + ([facts_prefix()] if self.reads_facts else []), prefix_cache)

    def _select(self, q: Question, steps: Sequence[str] = ()):
        """(facts, hits) for one question: the oracle's, the selector's when the head reads facts,
        else none, with the question's top-k hits kept as the run's evidence when retrieving."""
        if self.reads_facts:
            return self.selector.select(q, steps)
        return [], (self.retriever.retrieve(q.question, [], self.k) if self.retriever is not None else [])

    def features(self, q: Question) -> QuestionFeatures:
        """The reader's features for one question (from the cache when there)."""
        rec = self._cache.get(q.qid) if q.qid and self.oracle is None else None
        if rec is not None and rec.get("question") == q.question:
            qf = QuestionFeatures.from_dict(rec)
            qf.seconds = {"cached": 1.0, **qf.seconds}
            return qf
        return question_features(self.model, q, self._select, self.decomposer, self.prompt_form, readouts=self.readouts)

    @property
    def readouts(self) -> set[str]:
        """The read-outs an answer uses: the head's states and log-odds, or zero-shot the last
        fact line's (with facts) and "plain"; the other prompts are not read."""
        if self.head is not None:
            return set(self.head.spec.states) | set(self.head.spec.log_odds) | {"plain"}
        return {"plain", "last"} if self.reads_facts else {"plain"}

    def answer_features(self, q: Question, qf: QuestionFeatures) -> ReasoningResult:
        """The answer of one question from its features: the head's P(yes), or zero-shot the
        model's own (:meth:`zero_shot`). Raises SqaError for features the head cannot read or
        read-outs that are not numbers."""
        if self.head is None:
            return self.zero_shot(q, qf)
        x = feature_vector(self.head.spec, qf.states, qf.log_odds, scalar_features(qf))
        if x.shape != self.head.coef.shape:
            raise SqaError(
                f"{self.head.shown}: has {len(self.head.coef):,} coefficients but question {q.qid or q.question!r} "
                f"gave {x.size:,} features; the head was trained for another model or features file"
            )
        if not np.all(np.isfinite(x)):
            raise SqaError(
                f"model {self.model.name}: its read-outs for question {q.qid or q.question!r} "
                "are not numbers (NaN/inf); the model or its files are damaged: download it again"
            )
        p = float(self.head.p_yes(x))
        if not math.isfinite(p):
            raise SqaError(
                f"{self.head.shown}: P(yes) is not a number for question {q.qid or q.question!r}; "
                "re-create the head with `sqa eval --split train`"
            )
        r = features_result(
            q,
            qf,
            p,
            f"head:{self.head.spec.name}",
            k=self.k,
            model_name=self.model.name,
            shows_facts=self.reads_facts,
            retrieval=self.retriever is not None,
        )
        r.head = self.head.source or ""  # the file that answered (issue 41 item 1)
        return r

    def zero_shot(self, q: Question, qf: QuestionFeatures) -> ReasoningResult:
        """The model's own P(yes) (the module doc): the sigmoid of the log-odds after the last
        fact line (``facts``), or of the plain prompt (``plain``) when no facts were shown;
        ``calibrated=False``, ``decision`` "zero-shot:facts" / "zero-shot:plain". Raises SqaError
        when that read-out is missing or not a number."""
        name = readout_for("last" if self.reads_facts else "plain", readout_names(len(qf.facts)))
        lo = qf.log_odds.get(name)
        if not _num(lo):
            raise SqaError(
                f"model {self.model.name}: its {name} read-out for question "
                f"{q.qid or q.question!r} is {'missing' if lo is None else 'not a number (NaN/inf)'}; "
                "its file may be damaged, or the features cache lacks that read-out"
            )
        r = features_result(
            q,
            qf,
            _sigmoid(lo),
            f"zero-shot:{'plain' if name == 'plain' else 'facts'}",
            k=self.k,
            model_name=self.model.name,
            shows_facts=self.reads_facts,
            retrieval=self.retriever is not None,
        )
        r.calibrated = False
        return r

    def answer_batch(
        self,
        questions: Sequence[Question],
        decomposition: str = "question",
        on_result: Callable[[ReasoningResult], None] | None = None,
    ) -> list[ReasoningResult]:
        """Answer ``questions`` one after another (the prefix cache stays warm). ``decomposition``
        must be "question": this reader retrieves for the question as a whole."""
        if decomposition != "question":
            raise BadInput(
                f"--decomposition {decomposition}: the facts reader retrieves for the whole question; "
                "use --decomposition question, or --reader steps for decomposition-based reading"
            )
        out = []
        for q in questions:
            if not q.question or not q.question.strip():
                raise BadInput(f"question {q.qid!r} is empty; fix its text in the input file")
            r = self.answer_features(q, self.features(q))
            out.append(r)
            if on_result:
                on_result(r)
        return out

    def answer(self, question: str, qid: str | None = None) -> ReasoningResult:
        return self.answer_batch([Question(qid=qid or "", question=question)])[0]


FORM_WHY = {
    "chat": "in its own chat template: served over /v1/chat/completions, or --apply-chat-template",
    "text": "as plain text",
}
FORM_FIX = {
    "chat": "leave --head out to answer zero-shot, or fit a head for the chat form with `sqa eval --split "
    "train` and the same --api chat / --apply-chat-template",
    "text": "pass --apply-chat-template (in-process) or --api chat (served) to read as that head was fitted",
}


def head_form(head: AnswerHead) -> str:
    """The prompt form a head's features were read in: that of its provenance's prompt version
    (``sqa.facts.prompt.form_of_version``; heads from before the chat form: "text")."""
    prov = head.provenance or {}
    return form_of_version(prov.get("prompt") or (prov.get("facts") or {}).get("prompt"))


def check_head_form(head: AnswerHead, form: str, reader: str) -> None:
    """Raise SqaError (one line, saying how to read as the head was fitted) when ``head`` was fitted
    on reads of another prompt form than ``form``, the one ``reader`` (e.g. "this run reads") reads
    in: its answers would be silently wrong."""
    if head_form(head) != form:
        raise SqaError(
            f"{head.shown}: fitted on the facts reader's {head_form(head)}-form reads, but {reader} the "
            f"{form} form ({FORM_WHY[form]}), so its answers would be wrong; {FORM_FIX[form]}"
        )


def reader_form(model, asked: str = "text") -> str:
    """The prompt form ``model`` reads the facts reader's prompts in: "chat" when it is served over
    ``/v1/chat/completions`` (the server renders every prompt in its template), else ``asked``.
    Raises BadInput for the chat form over a server's ``/v1/completions``: sqa would render ChatML
    there, not the model's own template (use ``--api chat``)."""
    from sqa.facts.prompt import check_form

    endpoint = model.capabilities.endpoint
    if endpoint == "chat":
        return "chat"
    if check_form(asked) == "chat" and endpoint == "completions":
        raise BadInput(
            f"{model.name}: the chat prompt form over /v1/completions would be rendered as ChatML by sqa, "
            "not in the model's own chat template; use --api chat (the server applies its template)"
        )
    return asked


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def features_record_problem(rec) -> str | None:
    """What is wrong with one parsed features record (``QuestionFeatures.to_dict``), naming the
    field, or None: ``qid``/``question`` strings, ``states`` base64 float16 vectors of finite
    values, ``log_odds``/``seconds`` finite numbers by name, ``facts`` objects with text, source and
    a numeric score, ``paragraphs`` strings, ``paragraph_scores`` numbers, ``label`` true/false/null,
    ``steps`` strings."""
    import base64
    import binascii

    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not a features record (object)"
    for key in ("qid", "question"):
        if not isinstance(rec.get(key), str):
            return f"field '{key}' must be a string"
    states = rec.get("states", {})
    if not isinstance(states, dict):
        return "field 'states' must be an object of encoded vectors"
    for name, v in states.items():
        try:
            raw = base64.b64decode(v, validate=True) if isinstance(v, str) else None
        except (binascii.Error, ValueError):
            raw = None
        if raw is None or not raw or len(raw) % 2:
            return f"field 'states.{name}' is not a base64 float16 vector"
        if not np.all(np.isfinite(np.frombuffer(raw, dtype="<f2"))):
            return f"field 'states.{name}' holds values that are not numbers (NaN/inf)"
    for key in ("log_odds", "seconds"):
        d = rec.get(key, {})
        if not isinstance(d, dict) or not all(_num(x) for x in d.values()):
            return f"field '{key}' must be an object of finite numbers"
    facts = rec.get("facts", [])
    if not isinstance(facts, list):
        return "field 'facts' must be a list"
    for i, f in enumerate(facts):
        if not (
            isinstance(f, dict)
            and isinstance(f.get("text"), str)
            and isinstance(f.get("source"), str)
            and "ref" in f
            and _num(f.get("score"))
        ):
            return f"field 'facts' entry {i} must be an object with text, source, ref and a numeric score"
    for key, ok in (
        ("paragraphs", lambda x: isinstance(x, str)),
        ("paragraph_scores", _num),
        ("steps", lambda x: isinstance(x, str)),
    ):
        v = rec.get(key, [])
        if not isinstance(v, list) or not all(ok(x) for x in v):
            return f"field '{key}' must be a list of {'numbers' if key == 'paragraph_scores' else 'strings'}"
    if rec.get("label") is not None and not isinstance(rec["label"], bool):
        return "field 'label' must be true, false or null"
    return None


def check_features_file(path: str | Path) -> int:
    """Validate a ``--features-cache`` file before any model loads; returns its record count.
    A torn last line (no newline: a killed writer) is ignored, as the readers do. Raises SqaError
    naming the file, line and field for a missing or unreadable file, a complete line that is not
    JSON, or a record of the wrong shape (``features_record_problem``)."""
    import json

    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(
            f"{path}: --features-cache file not found; give a features file (JSON lines of the facts reader's records), "
            "or leave the option out"
        ) from None
    except IsADirectoryError:
        raise BadInput(
            f"{path}: --features-cache is a directory; give one features file (e.g. DIR/train-2061.jsonl)"
        ) from None
    n = 0
    for lineno, line in complete_lines(data):  # a torn last line is left out, as the readers do
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise BadInput(
                f"{path}:{lineno}: not a JSON line ({type(e).__name__}); this is not a features file, or the line is damaged"
            ) from None
        problem = features_record_problem(rec)
        if problem:
            raise BadInput(
                f"{path}:{lineno}: not a features record: {problem}; give a features file, or leave out --features-cache"
            )
        n += 1
    return n


def features_result(
    q: Question,
    qf: QuestionFeatures,
    p: float,
    decision: str,
    *,
    k: int = 10,
    model_name: str = "",
    shows_facts: bool = True,
    retrieval: bool = True,
) -> ReasoningResult:
    """The answer of one question from its features and the head's P(yes) ``p``: the trace of the
    facts reader (facts shown when ``shows_facts``, the top-``k`` paragraphs as evidence when
    ``retrieval``, the model's own verbalised readings in ``signals``, ``decision`` naming the head
    that answered). Used by ``FactsReader`` and by the out-of-fold train run (``sqa.eval.oof``)."""
    from sqa.trace import StepTrace

    last = f"f{len(qf.facts)}" if qf.facts else None
    signals = {"plain": _sigmoid(qf.log_odds["plain"])} if "plain" in qf.log_odds else {}
    if last and last in qf.log_odds and shows_facts:
        signals["facts"] = _sigmoid(qf.log_odds[last])
    timings = {"retrieve": round(qf.seconds.get("select", 0.0), 4), "read": round(qf.seconds.get("read", 0.0), 4)}
    if "decompose" in qf.seconds:
        timings["decompose"] = round(qf.seconds["decompose"], 4)
    timings["total"] = round(sum(timings.values()), 4)
    if "cached" in qf.seconds:
        timings["cached"] = 1.0
    steps = [StepTrace(index=i, question=st) for i, st in enumerate(qf.steps, start=1)]
    return ReasoningResult(
        question=q.question,
        steps=steps,
        answer=p >= 0.5,
        p_yes=p,
        paragraphs=list(qf.paragraphs[:k]) if retrieval else [],
        qid=q.qid or None,
        timings=timings,
        model=model_name,
        p_yes_raw=signals.get("facts", signals.get("plain")),
        signals={k_: round(v, 6) for k_, v in signals.items()},
        decision=decision,
        facts=[f.to_dict() for f in qf.facts] if shows_facts else [],
    )


def train_command(model_name: str, form: str = "text") -> str:
    """The one command that builds a model's answer heads (issue 35), for prompt ``form``."""
    from sqa.models.registry import is_served

    flag = "" if form == "text" else " --api chat" if is_served(model_name) else " --apply-chat-template"
    return f"sqa eval --split train --model {model_name}{flag}"


def head_for(model_name: str, kind: str, path: str | Path | None = None, form: str = "text") -> AnswerHead:
    """The answer head to use: ``path`` if given, else the one fitted on the most questions among
    the user's heads in ``$SQA_HOME/heads`` (written by ``sqa eval --split train``) and the one
    shipped in the package whose reads were made in prompt ``form`` (``sqa.facts.heads.choose_head``).
    ``source`` names its file and ``provenance`` the questions it saw. Raises HeadNotFound if there
    is none, SqaError for a damaged head file, one of another model size, or a ``path`` fitted on
    the other prompt form (the caller may answer zero-shot on HeadNotFound)."""
    from sqa.facts.heads import choose_head
    from sqa.models.registry import MODELS, model_stem

    size = MODELS[model_name].hidden_size if model_name in MODELS else None
    if path:
        head = AnswerHead.load(path)
        head.check_size(size, model_name)  # before any model loads
        check_head_form(head, form, "this run reads")
        return head
    head = choose_head(model_stem(model_name), kind, train_command(model_name, form), form).head
    head.check_size(size, model_name)
    return head


__all__ = ["FactsReader", "ORACLES", "PROMPT_VERSION", "ZERO_SHOT_SETTINGS", "head_for"]
