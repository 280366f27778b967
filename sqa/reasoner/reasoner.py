"""The reasoner: decompose a question into single-fact steps, retrieve and answer each step in
order (substituting earlier answers for "#k"), then read the final yes/no as P(" Yes") against
P(" No") at the end of the transcript.

The loop follows StrategyQA's decomposition format (Geva et al., TACL 2021: steps that refer to
earlier answers as "#k") and the interleaved retrieve-then-answer scheme of IRCoT / Self-Ask
(Trivedi et al., ACL 2023; Press et al., Findings of EMNLP 2023), cut down for a 1.5B model on
2 CPU cores: the top evidence paragraph per step only (trimmed to its best-matching sentences),
short step answers (one line), one shared transcript per question so the KV cache of every part is
reused (see ``sqa.reasoner.prompts``), and no free text parsed for the final answer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

from sqa.reasoner import prompts as P
from sqa.reasoner.operations import compute_step
from sqa.reasoner.trace import ReasoningResult, StepTrace
from sqa.types import Hit, LanguageModel, Question, SqaError, Step

Mode = Literal["predicted", "gold", "question"]
MODES = ("predicted", "gold", "question")


@dataclass
class _State:
    """One question in flight."""

    question: str
    qid: str | None
    mode: Mode
    prompt: str = ""
    steps: list[str] = field(default_factory=list)
    traces: list[StepTrace] = field(default_factory=list)
    hits: list[list[Hit]] = field(default_factory=list)
    question_hits: list[Hit] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=lambda: {"decompose": 0.0, "retrieve": 0.0, "read": 0.0,
                                                               "answer": 0.0})
    p_yes: float = 0.5
    paragraphs: list[str] = field(default_factory=list)
    final_from_last_step: bool = False
    fewshot_qids: list[str] = field(default_factory=list)
    head: str = ""  # instruction + demonstrations + the question's user turn (shared by every signal)
    plain_head: str = ""  # the same with question-only demonstrations (the "plain" signal)
    signals: dict[str, float] = field(default_factory=dict)


class Reasoner:
    """Decomposer + per-step retrieval + reader + yes/no scorer over any ``LanguageModel`` and any
    ``sqa.retriever.Retriever``.

    - ``k``: hits retrieved per step and for the whole question (``paragraphs`` holds the top ``k``
      of ``retriever.retrieve(question, answered steps, k)``; the leaderboard uses 10).
    - ``n_demos``: few-shot demonstrations from train-2061 chosen by BM25 (``prompts.DemoSelector``).
    - ``evidence_per_step`` / ``evidence_words``: how many of a step's top hits the reader sees and
      how many words of each (trimmed around the sentence that best matches the step).
    - ``retrieval=False``: the no-retrieval baseline (same model and prompts, no evidence lines,
      empty ``paragraphs``); ``retriever`` may then be None.
    - ``max_steps``, ``decompose_tokens``, ``answer_tokens``: generation limits.
    - ``demo_selector``: where demonstrations come from (default: BM25 over train-2061).
    - ``reask``: repeat the question right before the final "Answer:" (after the steps). On 30
      train-2061 questions (bench/ask_variants.py) it raised accuracy from 0.40 to 0.53 and the
      AUC of P(yes) from 0.30 to 0.40 with retrieval, so it is on by default.
    - ``decision``: which P(yes) readings ("signals", see ``SIGNALS``) make the final answer,
      "+"-joined; several are averaged in log-odds (an unweighted product-of-experts). Signals:
      ``transcript`` (after the steps, their evidence and answers), ``compact`` (after the steps and
      their answers only, evidence lines dropped), ``direct`` (right after the question, same
      demonstrations, no steps) and ``plain`` (question-only demonstrations, no steps; the
      no-retrieval baseline's prompt). ``extra_signals`` are read too and kept in
      ``ReasoningResult.signals`` for analysis. ``compact`` and ``direct`` share the transcript's
      cached prefix, so they cost a few dozen prompt tokens each; ``plain`` reads its own prefix.
      Default: ``DEFAULT_DECISION`` (transcript+direct+plain, chosen on train-2061).
    - ``yes_threshold``: the raw P(yes) that counts as 50/50. The model's P(yes) is shifted in
      log-odds, ``logit(p) - logit(yes_threshold)``, so the answer is Yes iff the raw P(yes) >=
      ``yes_threshold`` and the confidence stays >= 0.5. Default: ``YES_THRESHOLD``, measured on
      train-2061 only (``bench/ask.py --calibrate``).

    Raises SqaError for an empty question or an unknown mode.
    """

    def __init__(self, model: LanguageModel, retriever=None, k: int = 10, *, n_demos: int = 3,
                 evidence_per_step: int = 1, evidence_words: int = 60, question_evidence: int = 2,
                 retrieval: bool = True, max_steps: int = 5, decompose_tokens: int = 80, answer_tokens: int = 16,
                 demo_selector: P.DemoSelector | None = None, yes_threshold: float | None = None,
                 reask: bool = True, decision: str | None = None, extra_signals: Sequence[str] = ()):
        self.decision = parse_decision(decision or DEFAULT_DECISION)
        bad = [x for x in extra_signals if x not in SIGNALS]
        if bad:
            raise SqaError(f"unknown signal(s) {', '.join(bad)}; use {', '.join(SIGNALS)}")
        self.signals = tuple(dict.fromkeys([*self.decision, *extra_signals]))
        if retrieval and retriever is None:
            raise SqaError("Reasoner: retrieval=True needs a retriever (or pass retrieval=False for the no-retrieval baseline)")
        self.model = model
        self.retriever = retriever
        self.k = k
        self.n_demos = n_demos
        self.evidence_per_step = evidence_per_step
        self.evidence_words = evidence_words
        self.question_evidence = question_evidence
        self.retrieval = retrieval
        self.max_steps = max_steps
        self.decompose_tokens = decompose_tokens
        self.answer_tokens = answer_tokens
        self._selector = demo_selector
        if yes_threshold is None:
            yes_threshold = YES_THRESHOLD["retrieval" if retrieval else "no_retrieval"]
        if not 0.0 < yes_threshold < 1.0:
            raise SqaError(f"yes_threshold must be in (0, 1), got {yes_threshold}")
        self.yes_threshold = yes_threshold
        self.reask = reask
        self.backend = None  # the SearchBackend behind the retriever, when known (build_reasoner sets it)

    @property
    def selector(self) -> P.DemoSelector:
        if self._selector is None:
            self._selector = P.default_selector()
        return self._selector

    def with_fewshot_pool(self, questions: Sequence[Question] | None) -> "Reasoner":
        """A copy of this reasoner (same model, retriever and settings) that draws demonstrations
        from ``questions`` instead of train-2061 (None = train-2061), e.g. for cross-fitting on
        the train split. Building the BM25 index over the pool takes about a second."""
        import copy

        other = copy.copy(self)
        other._selector = P.DemoSelector(questions) if questions is not None else P.default_selector()
        return other

    # -- public API ---------------------------------------------------------------------------
    def answer(self, question: str, qid: str | None = None, decomposition: Sequence[str] | None = None) -> ReasoningResult:
        """Answer one question. ``decomposition`` given = use these steps (e.g. StrategyQA's gold
        ones) instead of the decomposer. Returns a ``ReasoningResult`` (timings in seconds)."""
        if not question or not question.strip():
            raise SqaError("empty question; pass the question text, e.g. sqa ask \"Is the sun a star?\"")
        st = _State(question=question.strip(), qid=qid, mode="gold" if decomposition is not None else "predicted")
        if decomposition is not None:
            st.steps = [s for s in decomposition if s and s.strip()][: self.max_steps] or [st.question]
        return self._run([st])[0]

    def answer_batch(self, questions: Sequence[Question], decomposition: Mode = "predicted",
                     on_result: Callable[[ReasoningResult], None] | None = None) -> list[ReasoningResult]:
        """Answer many questions. ``decomposition``: "predicted" (the decomposer), "gold" (the
        questions' own StrategyQA steps) or "question" (no decomposition: the question alone is
        retrieved with and read). Models with ``prefers_batches`` (GPU) run all questions in
        lockstep, one batched call per phase; others one question after another so the prefix
        cache stays warm. ``on_result`` is called with each finished result (progress bars)."""
        if decomposition not in MODES:
            raise SqaError(f"unknown decomposition mode {decomposition!r}; use one of {', '.join(MODES)}")
        states = []
        for q in questions:
            if not q.question or not q.question.strip():
                raise SqaError(f"question {q.qid!r} is empty; fix its text in the input file")
            st = _State(question=q.question.strip(), qid=q.qid, mode=decomposition)
            if decomposition == "gold":
                if not q.decomposition:
                    raise SqaError(f"question {q.qid}: no gold decomposition (test split?); use decomposition='predicted'")
                st.steps = list(q.decomposition)[: self.max_steps]
            states.append(st)
        results: list[ReasoningResult] = []
        size = 32 if getattr(self.model, "prefers_batches", False) else 1
        for i in range(0, len(states), size):
            for r in self._run(states[i:i + size]):
                results.append(r)
                if on_result:
                    on_result(r)
        return results

    # -- the loop -------------------------------------------------------------------------------
    def _run(self, states: list[_State]) -> list[ReasoningResult]:
        t_start = time.perf_counter()
        n = len(states)
        for st in states:
            demos = self.selector.select(st.question, self.n_demos, exclude_qid=st.qid)
            st.fewshot_qids = [d.qid for d in demos]
            st.head = P.prefix(demos, decompose=st.mode != "question") + P.question_turn(st.question)
            st.prompt = st.head
            if "plain" in self.signals:
                st.plain_head = P.prefix(demos, decompose=False) + P.question_turn(st.question)

        # 1. decomposition
        todo = [st for st in states if st.mode == "predicted"]
        if todo:
            t = time.perf_counter()
            outs = self.model.generate([st.prompt + "Steps:\n1." for st in todo], self.decompose_tokens, P.DECOMPOSE_STOP)
            dt = (time.perf_counter() - t) / len(todo)
            for st, out in zip(todo, outs):
                st.steps = P.parse_steps("1." + out, self.max_steps) or [st.question]
                st.timings["decompose"] += dt
        for st in states:
            if st.mode != "question":
                st.prompt += "Steps:\n" + P.format_steps(st.steps)
                st.traces = [StepTrace(index=i, question=s) for i, s in enumerate(st.steps, start=1)]
                st.hits = [[] for _ in st.steps]

        # 2. steps, in order: retrieve, then read
        for i in range(max((len(st.steps) for st in states if st.mode != "question"), default=0)):
            gen: list[_State] = []
            for st in states:
                if st.mode == "question" or i >= len(st.steps):
                    continue
                tr = st.traces[i]
                answers = [x.answer for x in st.traces[:i]]
                tr.query = P.substitute(tr.question, answers)
                t = time.perf_counter()
                if self.retrieval:
                    prior = [Step(question=x.question, answer=x.answer) for x in st.traces[:i]]
                    step = Step(question=tr.question)
                    hits = self.retriever.retrieve_step(step, prior, self.k, question=st.question)
                    st.hits[i] = hits
                    tr.evidence = [h.evidence_id for h in hits]
                    tr.scores = [float(h.score) for h in hits]
                    query_of = getattr(self.retriever, "step_query", None)
                    if callable(query_of):
                        try:
                            tr.query = query_of(Step(question=tr.question), prior, st.question)
                        except TypeError:
                            pass
                dt = time.perf_counter() - t
                st.timings["retrieve"] += dt
                tr.seconds += dt
                computed = compute_step(tr.question, answers)
                if computed is not None:  # an operation on earlier answers, computed (sqa.reasoner.operations)
                    tr.answer = computed
                    tr.computed = True
                    st.prompt += f"#{i + 1} = {computed}\n"
                    continue
                op = P.is_operation_step(tr.question)
                if op and i == len(st.steps) - 1:
                    st.final_from_last_step = True  # its answer is the final yes/no
                    continue
                if self.retrieval and not op:
                    resolved = P.substitute(tr.question, answers)
                    for h in st.hits[i][: self.evidence_per_step]:
                        text = P.trim_evidence(h.paragraph.text, resolved + " " + st.question, self.evidence_words)
                        st.prompt += P.evidence_line(i + 1, h.paragraph.title, text)
                st.prompt += f"#{i + 1} ="
                gen.append(st)
            if gen:
                t = time.perf_counter()
                outs = self.model.generate([st.prompt for st in gen], self.answer_tokens, P.READ_STOP)
                dt = (time.perf_counter() - t) / len(gen)
                for st, out in zip(gen, outs):
                    ans = out.strip().rstrip(".").strip() or "unknown"
                    st.traces[i].answer = ans
                    st.traces[i].seconds += dt
                    st.timings["read"] += dt
                    st.prompt += f" {ans}\n"

        # 3. whole-question evidence (the leaderboard's paragraphs); question mode reads it
        for st in states:
            if not self.retrieval:
                continue
            t = time.perf_counter()
            steps = [Step(question=x.question, answer=x.answer) for x in st.traces]
            st.question_hits = self.retriever.retrieve(st.question, steps, self.k)
            st.paragraphs = [h.evidence_id for h in st.question_hits]
            st.timings["retrieve"] += time.perf_counter() - t
            if st.mode == "question":
                for j, h in enumerate(st.question_hits[: self.question_evidence], start=1):
                    text = P.trim_evidence(h.paragraph.text, st.question, self.evidence_words)
                    st.prompt += P.evidence_line(j, h.paragraph.title, text)

        # 4. final yes/no: read each signal's P(yes), one question after another (cache order:
        # transcript, then compact and direct, which share its prefix)
        t = time.perf_counter()
        prompts = [self._signal_prompt(st, name) for st in states for name in self.signals]
        probs = self.model.yes_probability(prompts)
        dt = (time.perf_counter() - t) / n
        total = (time.perf_counter() - t_start) / n
        results = []
        m = len(self.signals)
        for j, st in enumerate(states):
            st.signals = {name: float(p) for name, p in zip(self.signals, probs[j * m:(j + 1) * m])}
            p = combine_log_odds([st.signals[name] for name in self.decision])
            st.p_yes = shift_probability(p, self.yes_threshold)
            st.timings["answer"] += dt
            ans = st.p_yes >= 0.5
            if st.final_from_last_step and st.traces:
                st.traces[-1].answer = "yes" if ans else "no"
            st.timings["total"] = total
            results.append(ReasoningResult(
                question=st.question, steps=st.traces, answer=ans, p_yes=st.p_yes, paragraphs=st.paragraphs,
                qid=st.qid, timings={k: round(v, 4) for k, v in st.timings.items()},
                model=getattr(self.model, "name", ""), fewshot_qids=st.fewshot_qids, p_yes_raw=float(p),
                signals={k: round(v, 6) for k, v in st.signals.items()}, decision="+".join(self.decision)))
        return results


    def _signal_prompt(self, st: _State, name: str) -> str:
        """The prompt whose next-token P(yes) is signal ``name`` for question state ``st``."""
        tail = f"Question: {st.question}\nAnswer:" if self.reask else "Answer:"
        if name == "transcript":
            return st.prompt + tail
        if name == "direct":
            return st.head + "Answer:"
        if name == "plain":
            return st.plain_head + "Answer:"
        # compact: steps and their answers, no evidence lines
        if st.mode == "question" or not st.traces:
            return st.head + tail
        lines = "".join(f"#{tr.index} = {tr.answer}\n" for tr in st.traces if tr.answer and not
                        (st.final_from_last_step and tr is st.traces[-1]))
        return st.head + "Steps:\n" + P.format_steps(st.steps) + lines + tail


SIGNALS = ("transcript", "compact", "direct", "plain")
# The final answer's signals by default (see Reasoner: ``decision``). Chosen on train-2061 only:
# ``python bench/decision.py --choose RUN`` over the first 42 train-2061 questions of
# ``sqa eval --split train-2061 --limit 100 --signals transcript,compact,direct,plain`` ranked all 15
# signal sets by accuracy; transcript+direct+plain came first (0.667, 95 % CI 0.52-0.81; transcript
# alone 0.524, plain alone 0.619, majority 0.476). bench/results/decision.json has the table. The
# intervals overlap: re-choose with more questions or another model.
DEFAULT_DECISION = "transcript+direct+plain"


def parse_decision(decision: str) -> tuple[str, ...]:
    """"compact+direct" -> ("compact", "direct"); raises SqaError for an unknown or empty name."""
    names = tuple(dict.fromkeys(x.strip() for x in decision.split("+") if x.strip()))
    bad = [x for x in names if x not in SIGNALS]
    if not names or bad:
        raise SqaError(f"unknown decision {decision!r}; use one or more of {', '.join(SIGNALS)} joined by '+'")
    return names


def combine_log_odds(ps: Sequence[float]) -> float:
    """Mean of the log-odds of probabilities ``ps`` (each clipped to [1e-6, 1 - 1e-6]), mapped
    back to a probability; one value is returned unchanged."""
    if len(ps) == 1:
        return float(ps[0])
    eps = 1e-6
    z = sum(math.log(min(max(p, eps), 1 - eps) / (1 - min(max(p, eps), 1 - eps))) for p in ps) / len(ps)
    return 1.0 / (1.0 + math.exp(-z))


# Raw P(yes) that counts as 50/50, per setting. Measured with bench/ask.py --calibrate 30 on 30
# train-2061 questions (bench/results/ask.json "calibration"): prior-matching thresholds 0.673 (with
# retrieval) and 0.485 (without) lowered accuracy there (0.40 -> 0.33 and 0.53 -> 0.47) because the
# 1.5B model's P(yes) barely ranks the answers (AUC 0.30 with retrieval, 0.53 without), so no
# correction is applied (0.5). Re-measure for another model.
YES_THRESHOLD = {"retrieval": 0.5, "no_retrieval": 0.5}


def shift_probability(p: float, threshold: float) -> float:
    """``sigmoid(logit(p) - logit(threshold))``: maps ``threshold`` to 0.5, keeps the order of
    probabilities (a label-bias correction in log-odds; cf. Zhao et al., ICML 2021)."""
    if threshold == 0.5:
        return p
    eps = 1e-9
    p = min(max(p, eps), 1 - eps)
    z = math.log(p / (1 - p)) - math.log(threshold / (1 - threshold))
    return 1.0 / (1.0 + math.exp(-z))


class BackendRetriever:
    """A minimal ``Retriever`` straight on a ``SearchBackend``: each step's query is its text with
    "#k" replaced by known answers; ``retrieve`` pools the step lists by raw score (as StrategyQA's
    IR-D does) or searches the question alone when there are no steps. Used when
    ``sqa.retriever.steps.StepRetriever`` is not available."""

    name = "backend"

    def __init__(self, backend):
        self.backend = backend

    def retrieve_step(self, step: Step, prior_steps: Sequence[Step] = (), k: int = 10,
                      question: str | None = None) -> list[Hit]:
        query = P.substitute(step.question, [s.answer for s in prior_steps]).replace("#", " ")
        return self.backend.search(query, k)

    def retrieve(self, question: str, steps: Sequence[Step] = (), k: int = 10) -> list[Hit]:
        if not steps:
            return self.backend.search(question, k)
        pooled = sorted((h for i, s in enumerate(steps) for h in self.retrieve_step(s, steps[:i], k)),
                        key=lambda h: -h.score)
        out, seen = [], set()
        for h in pooled:
            if h.evidence_id not in seen:
                seen.add(h.evidence_id)
                out.append(Hit(paragraph=h.paragraph, score=h.score, rank=len(out) + 1))
        return out[:k]
