"""The counted toolbox a method answers one question with: ``generate``, ``p_yes``, ``search``
and ``decide`` (the run's answer rule), each call counted (calls, continuations, prompt and
generated tokens, retrievals, seconds) and logged, the model's own response cache in between.

One :class:`Tools` serves one question; :class:`sqa.methods.reader.MethodReader` makes one per
question and turns its counts into the question's ``method.cost`` in ``traces.jsonl``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from contextlib import contextmanager
from typing import Iterator, Sequence

from sqa.methods import rules
from sqa.types import Hit, Prompt, SqaError

RECALL_DEPTH = 10  # the first 10 distinct paragraphs retrieved are the question's evidence (Recall@10)


@dataclass
class MethodCost:
    """What one question cost: ``calls`` to the model (a request for n samples is one call),
    ``generations`` (continuations written), ``p_yes_reads`` (next-token yes/no read-outs),
    ``prompt_tokens`` (tokens of every prompt sent, cached prefixes included) and
    ``generated_tokens`` (None when the model does not count them), ``retrievals`` (searches),
    ``seconds`` (wall clock inside the toolbox)."""

    calls: int = 0
    generations: int = 0
    p_yes_reads: int = 0
    prompt_tokens: int | None = 0
    generated_tokens: int | None = 0
    retrievals: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seconds"] = round(d["seconds"], 4)
        return d


@dataclass(frozen=True)
class Decision:
    """A yes/no made from one output by an answer rule: ``answer``, ``p_yes`` (1.0/0.0 for a read
    answer, the model's P(yes) for ``forced``), ``read`` (the rule found an answer in the text;
    False: ``forced`` was read instead, or, for ``answer-is-else-no``, scored no), ``rule``."""

    answer: bool
    p_yes: float
    read: bool
    rule: str


@dataclass
class Tools:
    """The toolbox of one question (see the module doc).

    ``model``: a :class:`sqa.types.LanguageModel`; ``backend``: a :class:`sqa.types.SearchBackend`
    (None for a method that does not retrieve); ``settings``: the run's resolved method settings
    (:meth:`sqa.methods.settings.MethodSettings.resolve`). ``retrieved``: every hit in retrieval
    order; ``log``: one dict per call (kind, inputs' sizes, outputs)."""

    model: object
    backend: object | None
    settings: dict
    cost: MethodCost = field(default_factory=MethodCost)
    retrieved: list[Hit] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)
    unread: int = 0

    # -- counting ---------------------------------------------------------------------------
    def _usage(self) -> dict | None:
        return self.model.usage()

    @contextmanager
    def _counted(self, call: str, **fields) -> Iterator[dict]:
        """Around one model call: the body runs, then the call is counted (one call, its tokens and
        seconds) and the yielded log entry (``call``, ``fields`` and what the body adds) is logged.
        A call that raises is neither counted nor logged."""
        started, before = time.perf_counter(), self._usage()
        entry = {"call": call, **fields}
        yield entry
        self.cost.calls += 1
        self._count(before, started)
        self.log.append(entry)

    def _count(self, before: dict | None, started: float) -> None:
        after = self._usage()
        for key, name in (("prompt_tokens", "prompt_tokens"), ("completion_tokens", "generated_tokens")):
            if before is None or after is None or getattr(self.cost, name) is None:
                setattr(self.cost, name, None)
            else:
                setattr(self.cost, name, getattr(self.cost, name) + int(after[key]) - int(before[key]))
        self.cost.seconds += time.perf_counter() - started

    # -- tools ------------------------------------------------------------------------------
    def generate(
        self,
        prompt: Prompt,
        max_tokens: int | None = None,
        stop: Sequence[str] = (),
        *,
        temperature: float = 0.0,
        n: int = 1,
        seed: int | None = None,
        logprobs: bool = False,
    ) -> list:
        """``n`` continuations of ``prompt`` (``sqa.types.Generation``: text, and tokens with their
        log-probabilities when ``logprobs``), at most ``max_tokens`` (default: the ``max_tokens``
        setting, else 256) tokens each, cut before the first of ``stop``. ``temperature`` 0 is
        greedy; ``seed`` defaults to the ``seed`` setting (else 0). One counted call. Raises
        SqaError when the model cannot sample or give logprobs."""
        limit = max_tokens or self.settings.get("max_tokens") or 256
        seed = (self.settings.get("seed") or 0) if seed is None else seed
        with self._counted("generate", n=n, temperature=temperature) as entry:
            out = self.model.complete(
                [prompt], limit, tuple(stop), temperature=temperature, seed=seed, n=n, logprobs=logprobs
            )[0]
            self.cost.generations += len(out)
            entry["texts"] = [g.text for g in out]
        return out

    def attend(self, prompt: Prompt, max_tokens: int | None = None, stop: Sequence[str] = ()):
        """A greedy continuation of ``prompt`` with per-word attention and entropy
        (``sqa.types.AttendedGeneration``; the model's ``attend``), at most ``max_tokens`` (default:
        the ``max_tokens`` setting, else 256) tokens, cut before the first of ``stop``. One counted
        call. Raises SqaError when the model gives no attention weights."""
        if not hasattr(self.model, "attend"):
            raise SqaError(f"{self.model.name} gives no attention weights (a bug in the method's `needs`)")
        with self._counted("attend") as entry:
            out = self.model.attend(prompt, max_tokens or self.settings.get("max_tokens") or 256, tuple(stop))
            self.cost.generations += 1
            entry["texts"] = [out.text]
        return out

    def word_attention(self, text: str) -> tuple[list[str], list[list[float]]]:
        """The words of ``text`` and, per word, the attention it pays to each word before it (the
        model's ``word_attention``): one forward pass, one counted call."""
        with self._counted("word_attention") as entry:
            words, rows = self.model.word_attention(text)
            entry["words"] = len(words)
        return words, rows

    def p_yes(self, prompt: Prompt) -> float:
        """P(yes) of the next token after ``prompt`` (``LanguageModel.yes_probability``), in [0, 1]. One counted call."""
        with self._counted("p_yes") as entry:
            p = float(self.model.yes_probability([prompt])[0])
            self.cost.p_yes_reads += 1
            entry["p_yes"] = round(p, 6)
        return p

    def search(self, query: str, k: int | None = None) -> list[Hit]:
        """Top-``k`` (default: the ``k`` setting) BM25 paragraphs for ``query``, best first; added
        to :attr:`retrieved`. One counted retrieval. Raises SqaError when the run has no index."""
        if self.backend is None:
            raise SqaError("this method searches, but the run has no index open (a bug in the method's `needs`)")
        k = int(k or self.settings.get("k") or 10)
        started = time.perf_counter()
        hits = self.backend.search(query, k) if query.strip() else []
        self.cost.retrievals += 1
        self.cost.seconds += time.perf_counter() - started
        self.retrieved.extend(hits)
        self.log.append({"call": "search", "query": query, "evidence": [h.evidence_id for h in hits]})
        return hits

    def read(self, generated: str, rule: str | None = None) -> bool | None:
        """Yes/no from ``generated`` by ``rule`` (default: the run's ``answer_rule``) without the
        ``forced`` read-out: None where ``answer-is`` finds no answer (``answer-is-else-no`` scores
        it no); every output the rule cannot read is counted in :attr:`unread`. ``forced`` reads
        nothing from text: None."""
        rule = rule or self.settings.get("answer_rule") or "answer-is"
        if rule == "forced":
            return None
        if rule == "answer-is-else-no":
            yes, found = rules.answer_is_else_no(generated)
        else:
            yes = rules.answer_is(generated)
            found = yes is not None
        self.unread += not found
        return yes

    def decide(self, prompt: str, generated: str, rule: str | None = None) -> Decision:
        """Yes/no from ``generated`` (the continuation of ``prompt``) by ``rule`` (default: the run's
        ``answer_rule`` setting; see :mod:`sqa.methods.rules`). ``answer-is`` falls back to the
        ``forced`` read-out (one more counted call) when the text holds no answer; every such
        output is counted in :attr:`unread`."""
        rule = rule or self.settings.get("answer_rule") or "answer-is"
        unread = self.unread
        yes = self.read(generated, rule)
        if yes is not None:
            return Decision(yes, 1.0 if yes else 0.0, self.unread == unread, rule)
        p = self.p_yes(rules.forced_prompt(prompt, generated))
        return Decision(p >= 0.5, p, rule == "forced", rule)

    # -- what the question's record holds ---------------------------------------------------
    def evidence_ids(self, depth: int = RECALL_DEPTH) -> list[str]:
        """The first ``depth`` distinct evidence IDs retrieved, in retrieval order (the
        leaderboard's ``paragraphs`` and what Recall@10 scores)."""
        seen: list[str] = []
        for h in self.retrieved:
            if h.evidence_id not in seen:
                seen.append(h.evidence_id)
                if len(seen) == depth:
                    break
        return seen
