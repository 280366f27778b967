"""The steps reader (``--reader steps``, preset ``steps``): decompose a question into single-fact
steps, retrieve and answer each step in order (substituting earlier answers for "#k"), then read
the final yes/no from three P(" Yes") readings.

The loop follows StrategyQA's decomposition format (Geva et al., TACL 2021: steps that refer to
earlier answers as "#k") and the interleaved retrieve-then-answer scheme of IRCoT / Self-Ask
(Trivedi et al., ACL 2023; Press et al., Findings of EMNLP 2023), cut down for a 1.5B model on
2 CPU cores: the top evidence paragraph per step only (trimmed to its best-matching sentences),
short step answers (one line), one shared transcript per question so the KV cache of every part is
reused (see ``sqa.steps.prompts``), and no free text parsed for the final answer.

The final answer (fixed, ``DECISION``): the mean log-odds of three readings of P(yes),
``transcript`` (after the steps, their evidence and answers, with the question repeated),
``direct`` (right after the question, same demonstrations, no steps) and ``plain`` (question-only
demonstrations, no steps). Why these three: bench/results/notes.md (chosen on train-2061).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

from sqa.steps import prompts as P
from sqa.steps.operations import compute_step, is_operation_step
from sqa.trace import ReasoningResult, StepTrace
from sqa.retriever.clean import resolve_references
from sqa.types import ChatPrompt, Hit, LanguageModel, Question, Retriever, SqaError, Step

Mode = Literal["predicted", "gold", "question"]
MODES = ("predicted", "gold", "question")
READINGS = ("transcript", "direct", "plain")
DECISION = "+".join(READINGS)


@dataclass(frozen=True)
class StepsSettings:
    """Sizes of the steps reader (the values of the recorded steps runs).

    - ``n_demos``: few-shot demonstrations chosen by BM25 (``prompts.DemoSelector``).
    - ``evidence_per_step`` / ``evidence_words``: how many of a step's top hits the reader sees and
      how many words of each (trimmed around the sentence that best matches the step).
    - ``question_evidence``: paragraphs shown in ``question`` mode (no decomposition).
    - ``max_steps``, ``decompose_tokens``, ``answer_tokens``: generation limits (tokens).
    """

    n_demos: int = 3
    evidence_per_step: int = 1
    evidence_words: int = 60
    question_evidence: int = 2
    max_steps: int = 5
    decompose_tokens: int = 80
    answer_tokens: int = 16


@dataclass
class _State:
    """One question in flight."""

    question: str
    qid: str | None
    mode: Mode
    head: ChatPrompt | None = None  # instruction + demonstrations + the question's user turn
    plain_prefix: ChatPrompt | None = None  # the same with question-only demonstrations ("plain")
    prompt: ChatPrompt | None = None  # head + the transcript so far
    steps: list[str] = field(default_factory=list)
    traces: list[StepTrace] = field(default_factory=list)
    hits: list[list[Hit]] = field(default_factory=list)
    timings: dict[str, float] = field(
        default_factory=lambda: {"decompose": 0.0, "retrieve": 0.0, "read": 0.0, "answer": 0.0}
    )
    paragraphs: list[str] = field(default_factory=list)
    final_from_last_step: bool = False
    fewshot_qids: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.prompt = self.prompt.extend(text)


class StepsReader:
    """Decomposer + per-step retrieval + reader + yes/no over any ``LanguageModel`` and any
    ``Retriever`` (see the module doc).

    - ``k``: hits retrieved per step and for the whole question (``paragraphs`` holds the top ``k``
      of ``retriever.retrieve(question, answered steps, k)``; the leaderboard uses 10).
    - ``retrieval=False``: the same model and prompts without evidence lines and with empty
      ``paragraphs``; ``retriever`` may then be None.
    - ``settings``: :class:`StepsSettings`; ``demo_selector``: where demonstrations come from
      (default: BM25 over train-2061).
    - ``prefill``: the transcript is continued in the open assistant message (True, the default,
      where the model can: ``capabilities.prefill``); otherwise, or with False (``--no-prefill``),
      it is read in turns (``sqa.steps.prompts``: each generation and reading is a new assistant
      message asked for by a user turn), as sqa reads a chat server that cannot continue a
      message, so an in-process model can read what such a server reads.

    Raises SqaError for an empty question, an unknown mode, or retrieval without a retriever.
    """

    def __init__(
        self,
        model: LanguageModel,
        retriever: Retriever | None = None,
        k: int = 10,
        *,
        settings: StepsSettings = StepsSettings(),
        retrieval: bool = True,
        demo_selector: P.DemoSelector | None = None,
        prefill: bool = True,
    ):
        if retrieval and retriever is None:
            raise SqaError(
                "StepsReader: retrieval=True needs a retriever (or pass retrieval=False for the no-retrieval baseline)"
            )
        self.model = model
        self.retriever = retriever
        self.k = k
        self.settings = settings
        self.retrieval = retrieval
        self.prefill = prefill
        self.turns = not prefill or not model.capabilities.prefill  # read in turns (sqa.steps.prompts)
        self._selector = demo_selector

    @property
    def selector(self) -> P.DemoSelector:
        if self._selector is None:
            self._selector = P.default_selector()
        return self._selector

    def with_fewshot_pool(self, questions: Sequence[Question] | None) -> "StepsReader":
        """A copy of this reader (same model, retriever and settings) that draws demonstrations
        from ``questions`` instead of train-2061 (None = train-2061), e.g. for cross-fitting on
        the train split. Building the BM25 index over the pool takes about a second."""
        return StepsReader(
            self.model,
            self.retriever,
            self.k,
            settings=self.settings,
            retrieval=self.retrieval,
            demo_selector=P.DemoSelector(questions) if questions is not None else P.default_selector(),
            prefill=self.prefill,
        )

    # -- public API ---------------------------------------------------------------------------
    def answer(
        self, question: str, qid: str | None = None, decomposition: Sequence[str] | None = None
    ) -> ReasoningResult:
        """Answer one question. ``decomposition`` given = use these steps (e.g. StrategyQA's gold
        ones) instead of the decomposer. Returns a ``ReasoningResult`` (timings in seconds)."""
        if not question or not question.strip():
            raise SqaError('empty question; pass the question text, e.g. sqa ask "Is the sun a star?"')
        st = _State(question=question.strip(), qid=qid, mode="gold" if decomposition is not None else "predicted")
        if decomposition is not None:
            st.steps = [s for s in decomposition if s and s.strip()][: self.settings.max_steps] or [st.question]
        return self._run([st])[0]

    def answer_batch(
        self,
        questions: Sequence[Question],
        decomposition: Mode = "predicted",
        on_result: Callable[[ReasoningResult], None] | None = None,
    ) -> list[ReasoningResult]:
        """Answer many questions. ``decomposition``: "predicted" (the decomposer), "gold" (the
        questions' own StrategyQA steps) or "question" (no decomposition: the question alone is
        retrieved with and read). Models with ``prefers_batches`` (GPU) run up to 32 questions in
        lockstep, one batched call per phase; others one question after another so the prefix
        cache stays warm. ``on_result`` is called with each finished result."""
        if decomposition not in MODES:
            raise SqaError(f"unknown decomposition mode {decomposition!r}; use one of {', '.join(MODES)}")
        states = []
        for q in questions:
            if not q.question or not q.question.strip():
                raise SqaError(f"question {q.qid!r} is empty; fix its text in the input file")
            st = _State(question=q.question.strip(), qid=q.qid, mode=decomposition)
            if decomposition == "gold":
                if not q.decomposition:
                    raise SqaError(
                        f"question {q.qid}: no gold decomposition (test split?); use decomposition='predicted'"
                    )
                st.steps = list(q.decomposition)[: self.settings.max_steps]
            states.append(st)
        results: list[ReasoningResult] = []
        # lockstep batches: 32 on a GPU; a served model's request slots (``capabilities.concurrency``),
        # so each batch is written as soon as it is answered
        slots = int(self.model.capabilities.concurrency or 1)
        size = (32 if slots <= 1 else min(slots, 32)) if self.model.prefers_batches else 1
        for i in range(0, len(states), size):
            for r in self._run(states[i : i + size]):
                results.append(r)
                if on_result:
                    on_result(r)
        return results

    # -- the loop -------------------------------------------------------------------------------
    def _run(self, states: list[_State]) -> list[ReasoningResult]:
        t_start = time.perf_counter()
        self._open(states)
        self._decompose([st for st in states if st.mode == "predicted"])
        for st in states:
            if st.mode != "question":
                st.add("Steps:\n" + P.format_steps(st.steps))
                st.traces = [StepTrace(index=i, question=s) for i, s in enumerate(st.steps, start=1)]
                st.hits = [[] for _ in st.steps]
        for i in range(max((len(st.steps) for st in states if st.mode != "question"), default=0)):
            self._step(i, [st for st in states if st.mode != "question" and i < len(st.steps)])
        for st in states:
            if self.retrieval:
                self._question_evidence(st)
        return self._final(states, t_start)

    def _open(self, states: list[_State]) -> None:
        """Demonstrations and the question's prompts (with and without decompositions)."""
        for st in states:
            demos = self.selector.select(st.question, self.settings.n_demos, exclude_qid=st.qid)
            st.fewshot_qids = [d.qid for d in demos]
            st.head = P.question_prompt(demos, st.question, decompose=st.mode != "question")
            st.prompt = st.head
            st.plain_prefix = P.question_prompt(demos, st.question, decompose=False)

    def _decompose(self, todo: list[_State]) -> None:
        """The decomposer writes the steps of the "predicted" questions (one batched call)."""
        if not todo:
            return
        t = time.perf_counter()
        if self.turns:  # a new message: the model writes "Steps:" and the numbered steps itself
            prompts, lead = [P.decompose_turns(st.prompt) for st in todo], ""
        else:
            prompts, lead = [st.prompt.extend("Steps:\n1.") for st in todo], "1."
        stop = P.DECOMPOSE_TURNS_STOP if self.turns else P.DECOMPOSE_STOP
        outs = self.model.generate(prompts, self.settings.decompose_tokens, stop)
        dt = (time.perf_counter() - t) / len(todo)
        for st, out in zip(todo, outs):
            st.steps = P.parse_steps(lead + out, self.settings.max_steps) or [st.question]
            st.timings["decompose"] += dt

    def _step(self, i: int, states: list[_State]) -> None:
        """Step ``i`` (0-based) of every question in ``states``: retrieve, compute an operation
        step from earlier answers or show the evidence, then one batched read of the answers."""
        gen: list[_State] = []
        for st in states:
            tr = st.traces[i]
            prior = [(x.question, x.answer) for x in st.traces[:i]]
            answers = [x.answer for x in st.traces[:i]]
            resolved = resolve_references(tr.question, prior, unknown="keep")
            tr.query = resolved
            t = time.perf_counter()
            if self.retrieval:
                steps = [Step(question=q, answer=a) for q, a in prior]
                st.hits[i] = self.retriever.retrieve_step(
                    Step(question=tr.question), steps, self.k, question=st.question
                )
                tr.evidence = [h.evidence_id for h in st.hits[i]]
                tr.scores = [float(h.score) for h in st.hits[i]]
                tr.query = self.retriever.step_query(Step(question=tr.question), steps, st.question)
            dt = time.perf_counter() - t
            st.timings["retrieve"] += dt
            tr.seconds += dt
            computed = compute_step(tr.question, answers)
            if computed is not None:  # an operation on earlier answers, computed (sqa.steps.operations)
                tr.answer = computed
                tr.computed = True
                st.add(f"#{i + 1} = {computed}\n")
                continue
            op = is_operation_step(tr.question)
            if op and i == len(st.steps) - 1:
                st.final_from_last_step = True  # its answer is the final yes/no
                continue
            if self.retrieval and not op:
                for h in st.hits[i][: self.settings.evidence_per_step]:
                    text = P.trim_evidence(h.paragraph.text, resolved + " " + st.question, self.settings.evidence_words)
                    st.add(P.evidence_line(i + 1, h.paragraph.title, text))
            st.add(f"#{i + 1} =")
            gen.append(st)
        if not gen:
            return
        t = time.perf_counter()
        prompts = [P.step_turns(st.prompt, i + 1, st.traces[i].question) if self.turns else st.prompt for st in gen]
        outs = self.model.generate(prompts, self.settings.answer_tokens, P.READ_STOP)
        dt = (time.perf_counter() - t) / len(gen)
        for st, out in zip(gen, outs):
            ans = (P.clean_step_answer(out, i + 1) if self.turns else out).strip().rstrip(".").strip() or "unknown"
            st.traces[i].answer = ans
            st.traces[i].seconds += dt
            st.timings["read"] += dt
            st.add(f" {ans}\n")

    def _question_evidence(self, st: _State) -> None:
        """The whole question's top-k (the leaderboard's paragraphs); "question" mode reads them."""
        t = time.perf_counter()
        steps = [Step(question=x.question, answer=x.answer) for x in st.traces]
        hits = self.retriever.retrieve(st.question, steps, self.k)
        st.paragraphs = [h.evidence_id for h in hits]
        st.timings["retrieve"] += time.perf_counter() - t
        if st.mode == "question":
            for j, h in enumerate(hits[: self.settings.question_evidence], start=1):
                text = P.trim_evidence(h.paragraph.text, st.question, self.settings.evidence_words)
                st.add(P.evidence_line(j, h.paragraph.title, text))

    def _final(self, states: list[_State], t_start: float) -> list[ReasoningResult]:
        """The three P(yes) readings of each question (one question after another, in cache order:
        transcript, then direct, which shares its prefix, then plain), combined by ``DECISION``."""
        n = len(states)
        t = time.perf_counter()
        prompts = []
        for st in states:
            transcript = st.prompt.extend(f"Question: {st.question}\nAnswer:")
            direct, plain = st.head.extend("Answer:"), st.plain_prefix.extend("Answer:")
            if self.turns:
                transcript = P.yes_no_turns(transcript, st.question)
                direct, plain = P.yes_no_turns(direct), P.yes_no_turns(plain)
            prompts += [transcript, direct, plain]  # in READINGS order
        probs = self.model.yes_probability(prompts)
        dt = (time.perf_counter() - t) / n
        total = (time.perf_counter() - t_start) / n
        results = []
        m = len(READINGS)
        for j, st in enumerate(states):
            readings = {name: float(p) for name, p in zip(READINGS, probs[j * m : (j + 1) * m])}
            p_yes = combine_log_odds(list(readings.values()))
            if not all(math.isfinite(v) for v in readings.values()) or not math.isfinite(p_yes):
                raise SqaError(
                    f"model {self.model.name}: P(yes) for question {st.qid or st.question!r} is not a number "
                    "(NaN/inf); the model file is likely damaged (a built-in model is re-checked and "
                    "re-assembled on the next run; delete a .gguf of your own and download it again)"
                )
            st.timings["answer"] += dt
            ans = p_yes >= 0.5
            if st.final_from_last_step and st.traces:
                st.traces[-1].answer = "yes" if ans else "no"
            st.timings["total"] = total
            results.append(
                ReasoningResult(
                    question=st.question,
                    steps=st.traces,
                    answer=ans,
                    p_yes=p_yes,
                    paragraphs=st.paragraphs,
                    qid=st.qid,
                    timings={k: round(v, 4) for k, v in st.timings.items()},
                    model=self.model.name,
                    fewshot_qids=st.fewshot_qids,
                    p_yes_raw=float(p_yes),
                    signals={k: round(v, 6) for k, v in readings.items()},
                    decision=DECISION,
                    calibrated=False,
                )
            )  # the model's own P(yes): no answer head reads it
        return results


def combine_log_odds(ps: Sequence[float]) -> float:
    """Mean of the log-odds of probabilities ``ps`` (each clipped to [1e-6, 1 - 1e-6]), mapped
    back to a probability (an unweighted product of experts); one value is returned unchanged."""
    if len(ps) == 1:
        return float(ps[0])
    eps = 1e-6
    z = sum(math.log(min(max(p, eps), 1 - eps) / (1 - min(max(p, eps), 1 - eps))) for p in ps) / len(ps)
    return 1.0 / (1.0 + math.exp(-z))
