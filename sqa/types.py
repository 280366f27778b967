"""The shared vocabulary of every stage: paragraphs, hits, steps, questions, predictions and the
two Protocols (search backend, language model) that let a backend or a model be swapped.

Data flows one way: corpus -> ``sqa.indexing`` -> ``SearchBackend`` -> ``sqa.retriever`` ->
``sqa.steps`` -> ``sqa.eval``. Each stage imports only this module (and ``sqa.paths``,
``sqa.jsonio``, ``sqa.strategyqa``) and the stages before it; ``sqa.pipeline`` and ``sqa.cli`` wire
them together (see docs/architecture.md). Every attribute one stage relies on in another's object
is declared in the Protocols here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Literal, Protocol, Sequence, Union, runtime_checkable

# Names a caller can complete (checked against sqa.presets.PRESETS and sqa.strategyqa.SPLITS by
# tests/test_api.py; the methods' names: sqa.methods.registry.MethodName)
PresetName = Literal["facts", "no-retrieval", "oracle-facts", "oracle-paragraphs", "steps"]
SplitName = Literal["train", "dev", "train-2061", "all", "test"]


class SqaError(Exception):
    """A user-facing error: the CLI prints its message as one line and exits 2.

    The message must name the file/line/URL concerned and say what to do. Subclasses say what a
    caller can act on (catch the subclass, or ``SqaError`` for all of them):

    - :class:`BadInput`: a file, line, flag, URL or question the caller gave is malformed;
      :class:`RunNotFound`: a path given as a run folder holds no ``run.json``.
    - :class:`IndexNotFound`: no index where one was expected (build it, or pass its directory).
    - :class:`ModelNotFound`: no model file, checkpoint or served model by that name.
    - :class:`HeadNotFound`: the facts reader has no answer head for the model (answers are then
      zero-shot where allowed; ``sqa eval --split train --model M`` fits one).
    - :class:`StoreMismatch`: stored features, cached responses or a run folder were made with
      another model, settings or question text than asked for; nothing is deleted.
    - :class:`ServerError`: a served model's server refused or answered wrongly at load or per
      request (bad key, wrong model, malformed body); :class:`ServerLost`: it stopped answering
      mid-run, and the same command resumes.
    """


class BadInput(SqaError):
    """A file, line, flag, URL or question given by the caller is malformed (the message names which)."""


class RunNotFound(BadInput):
    """A path given as a run folder (``sqa.Run.open``) holds no ``run.json``; the message names it."""


class IndexNotFound(SqaError):
    """No search index where one was expected; the message says how to build one."""


class ModelNotFound(SqaError):
    """No model file, checkpoint or served model by the name given."""


class HeadNotFound(SqaError):
    """The facts reader has no answer head for the model and settings asked for."""


class StoreMismatch(SqaError):
    """Stored features, cached responses or a run folder belong to another model, settings or
    question text; the message names the file and the field, and nothing is deleted."""


class ServerError(SqaError):
    """A served model's server refused or answered wrongly (status, body, model name)."""


class ServerLost(ServerError):
    """The server stopped answering mid-run (after the client's retries): what is done is kept and
    the same command resumes."""


# The most paragraphs one search returns (-k / --k): Elasticsearch's default index.max_result_window,
# used for both backends so that a typo such as -k 99999999999999999999 is an error, not a crash.
MAX_K = 10_000

# The diagnostic oracles of the facts reader (``sqa eval --oracle``): the question's annotated
# facts, or the best sentences of its annotated evidence paragraphs (``sqa.facts.features.FactSelector``).
ORACLES = ("facts", "paragraphs")


class SqaWarning(UserWarning):
    """A user-facing warning (e.g. searching a partial index): the CLI prints it as one
    ``warning:`` line on stderr and goes on."""


@dataclass(frozen=True)
class Paragraph:
    """One corpus unit (a Wikipedia paragraph).

    ``evidence_id`` is ``"{title}-{para_id}"`` exactly as in StrategyQA's evidence annotations and the
    leaderboard's ``paragraphs`` field. ``headers`` is the list of section headers leading to it.
    """

    evidence_id: str
    title: str
    text: str
    section: str = ""
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hit:
    """One search result: a paragraph, the score its list is ranked by, and its 1-based rank.

    ``score`` is the backend's BM25 (engine units; comparable only within one backend and query)
    for a backend search and for the official pooling (``sqa.retriever.fusion.pool_by_score``); a
    list fused by round-robin (``sqa.retriever.fusion.round_robin``, what ``StepRetriever.retrieve``
    returns) carries minus its fused rank (-1, -2, ...), since no BM25 value is comparable across
    the lists it interleaves."""

    paragraph: Paragraph
    score: float
    rank: int

    @property
    def evidence_id(self) -> str:
        """The paragraph's evidence ID (``"Title-N"``)."""
        return self.paragraph.evidence_id

    @property
    def title(self) -> str:
        """The paragraph's article title."""
        return self.paragraph.title

    @property
    def text(self) -> str:
        """The paragraph's text."""
        return self.paragraph.text

    def __repr__(self) -> str:
        """One line: rank, evidence ID, score, title."""
        from sqa.display import hit_repr

        return hit_repr(self)

    def _repr_html_(self) -> str:
        """Rank, evidence ID, score, title and the start of the text as HTML (Jupyter), escaped."""
        from sqa.display import hit_html

        return hit_html(self)

    def to_dict(self) -> dict:
        """``{evidence_id, score, title, section, text}`` (what ``sqa search --json`` prints a hit as)."""
        p = self.paragraph
        return {
            "evidence_id": p.evidence_id,
            "score": self.score,
            "title": p.title,
            "section": p.section,
            "text": p.text,
        }


@runtime_checkable
class SearchBackend(Protocol):
    """A BM25 paragraph index. Implementations: ``sqa.indexing.embedded.TantivyBackend`` (default,
    a directory on disk) and ``sqa.indexing.elastic.ElasticsearchBackend``.

    Writes are idempotent by evidence ID: adding a paragraph whose ID is already indexed replaces
    it, so re-running an interrupted build never duplicates.
    """

    name: str
    item_errors: int  # paragraphs the backend refused so far (Elasticsearch per-item errors; 0 for tantivy)
    created: int | None  # paragraphs this process added that were new to the index (None: the backend does not say)

    def add(self, paragraphs: Iterable[Paragraph]) -> int:
        """Queue paragraphs for indexing; returns how many were accepted."""
        ...

    def commit(self) -> None:
        """Make everything added so far durable and searchable."""
        ...

    def search(self, query: str, k: int = 10, title_boost: float = 0.0) -> list[Hit]:
        """Top-``k`` paragraphs for free text ``query`` by BM25 over title, section and text,
        best first; ``title_boost`` > 0 adds the title field's BM25 times that weight. Never raises
        on query syntax: any text is a valid query."""
        ...

    def manifest_extra(self) -> dict:
        """What ``manifest.json`` records about how this backend ranks (``schema_version``,
        ``analyzer``, ``bm25`` parameters; see ``sqa.indexing.manifest``) and where it lives."""
        ...

    def count(self) -> int:
        """Number of (unique) paragraphs in the index."""
        ...

    def get(self, ids: Sequence[str]) -> list[Paragraph]:
        """Paragraphs for evidence IDs, in the order given; unknown IDs are left out."""
        ...

    def close(self) -> None: ...


@dataclass
class Step:
    """One decomposition step. ``question`` may refer to earlier answers as ``#k`` (1-based, as in
    StrategyQA); ``answer`` is filled once the reader has answered it; ``evidence`` holds the hits
    retrieved for it."""

    question: str
    answer: str | None = None
    evidence: list[Hit] = field(default_factory=list)


@dataclass(frozen=True)
class Question:
    """A StrategyQA question. ``answer`` is None for the hidden-label test split; ``decomposition``
    and ``evidence`` are empty there too. ``evidence`` is the raw annotation: one list per annotator,
    one entry per step, each a list of ID lists and/or the tags "operation" / "no_evidence"."""

    qid: str
    question: str
    answer: bool | None = None
    decomposition: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    evidence: tuple = ()
    term: str = ""
    description: str = ""


@dataclass
class Prediction:
    """A system's output for one question; ``to_leaderboard`` gives the official entry
    ``{"answer", "decomposition", "paragraphs"}`` (paragraphs = evidence IDs, best first)."""

    qid: str
    answer: bool
    confidence: float
    decomposition: list[str] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)

    def to_leaderboard(self) -> dict:
        return {"answer": self.answer, "decomposition": list(self.decomposition), "paragraphs": list(self.paragraphs)}


# the user turn that follows a reply carried as a closed turn (ChatPrompt.as_turns)
CONTINUE = "Continue your last message exactly where it stopped, without repeating any of it."


@dataclass(frozen=True)
class ChatPrompt:
    """A prompt as chat messages, rendered by each model in its own chat template.

    ``messages``: closed turns ``(role, content)``, role ``system`` / ``user`` / ``assistant``;
    ``reply``: the text the open assistant turn already holds (the model continues it; "" opens an
    empty assistant turn). ``extend(text)`` gives the same prompt with ``text`` appended to the reply,
    so a growing transcript shares its rendered prefix with what came before (KV-cache reuse)."""

    messages: tuple[tuple[str, str], ...]
    reply: str = ""

    def extend(self, text: str) -> "ChatPrompt":
        return ChatPrompt(self.messages, self.reply + text)

    def as_turns(self, ask: str = CONTINUE) -> "ChatPrompt":
        """The same prompt with its reply carried as closed turns: the reply as a closed assistant
        turn, then the user turn ``ask`` (default :data:`CONTINUE`, asking to continue it), and an
        empty open assistant turn. With the default, this is what sqa sends a chat server that
        cannot continue an assistant message (``sqa.models.openai``) for a prompt with a reply; the
        steps reader never sends it one there, asking for each answer itself (``sqa.steps.prompts``),
        since a 1.5B model asked to continue answered instead. A prompt with an empty reply is
        returned as it is."""
        if not self.reply:
            return self
        return ChatPrompt(self.messages + (("assistant", self.reply), ("user", ask)))


@dataclass(frozen=True)
class Generation:
    """One generated continuation (``LanguageModel.complete``): ``text`` (cut before the first stop
    string), the generated token pieces and the natural-log probability of each under the model's
    own (untempered) next-token distribution (empty unless logprobs were asked). ``tokens`` cover
    the tokens that ``text`` is made of: a token holding the start of a stop string is kept when
    some of its text precedes the stop string, and end-of-generation tokens are left out."""

    text: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] = ()


@dataclass(frozen=True)
class AttendedGeneration:
    """A greedy continuation with what DRAGIN's RIND reads (``LanguageModel.attend``): ``text`` (cut
    before the first stop string), ``words`` (the generated tokens merged into words: a word starts
    at a token whose piece begins with whitespace), per word its ``attention`` (the last layer's
    attention the word receives from any later generated token: max over those tokens, mean over
    heads, summed over the word's tokens) and its ``entropy`` (mean over its tokens of the entropy,
    in nats, of the model's next-token distribution). The three tuples have one entry per word."""

    text: str
    words: tuple[str, ...] = ()
    attention: tuple[float, ...] = ()
    entropy: tuple[float, ...] = ()


@dataclass(frozen=True)
class ModelCapabilities:
    """What a :class:`LanguageModel` can do, declared by the model (never probed): readers ask for
    what they need and record what they got in every answer and run (``run.json``'s ``model``).

    - ``hidden_states``: ``hidden_states()`` returns real states (False: ``(None, log_odds)``, as a
      served model gives); ``hidden_size``: floats per state (None when unknown or none).
    - ``endpoint``: ``"in-process"``, or the server endpoint prompts go to: ``"completions"``
      (``/v1/completions``) or ``"chat"`` (``/v1/chat/completions``).
    - ``readout``: how yes/no read-outs are made: ``"logits"`` (the whole next-token distribution,
      in-process), ``"top_logprobs"`` (the server's top logprobs of the first answer token) or
      ``"generation"`` (a short greedy answer parsed as Yes/No: P(yes) is 1 or 0).
    - ``top_logprobs``: how many top logprobs a served model gives per token (0: none or in-process).
    - ``chat_template``: where a :class:`ChatPrompt`'s rendering comes from: ``"gguf"`` (the file's
      ``tokenizer.chat_template``), ``"tokenizer"`` (a Hugging Face tokenizer's), ``"server"`` (the
      server applies its own over chat), ``"file"`` (``--chat-template FILE``), ``"chatml"``
      (ChatML, used when the model carries no template), or for a served model over completions
      ``"props"`` (the server's ``GET /props``) or ``"none"`` (unknown: a ChatPrompt is refused).
    - ``prefill``: a ``ChatPrompt``'s non-empty ``reply`` is continued as an open assistant message
      (False: it is carried as a closed turn; ``sqa.steps`` copes with either).
    - ``prefix_cache``: ``warm_prefixes(texts, cache_dir)`` keeps prompt heads' KV cache on disk.
    - ``concurrency``: how many requests the model serves at once (a served model's slots over all
      its servers; 1 in-process): the steps reader then answers that many questions at once.
    - ``sampling``: ``complete`` samples (``temperature`` > 0 with a ``seed``, ``n`` continuations
      per prompt); False: greedy only, one continuation.
    - ``token_logprobs``: ``complete(..., logprobs=True)`` gives per-token logprobs of the generated
      text (a served model declares it and fails at the first use where its server gives none).
    - ``attention``: it gives attention weights: ``attend`` and ``word_attention`` (what DRAGIN
      reads; the transformers reader does, llama.cpp and servers do not).
    """

    hidden_states: bool = False
    hidden_size: int | None = None
    endpoint: str = "in-process"
    readout: str = "logits"
    top_logprobs: int = 0
    chat_template: str = "chatml"
    prefill: bool = True
    prefix_cache: bool = False
    concurrency: int = 1
    sampling: bool = False
    token_logprobs: bool = False
    attention: bool = False

    def to_dict(self) -> dict:
        """A JSON-serialisable dict of every field (recorded in ``run.json`` and ``sqa ask --json``)."""
        from dataclasses import asdict

        return asdict(self)


# A plain string is raw text (a completion prompt, fed to the model as is, no template); a
# ChatPrompt is rendered in the model's chat template.
Prompt = Union[str, ChatPrompt]


@runtime_checkable
class LanguageModel(Protocol):
    """A text model behind the decomposer and the readers. Implementations: GGUF on llama.cpp (CPU
    default, ``sqa.models.llamacpp``) and Hugging Face transformers (``sqa.models.hf``; any
    checkpoint by name or path, CUDA + bfloat16 when a GPU is present).

    A prompt is a :data:`Prompt`: raw text (the facts reader's prompts) or a :class:`ChatPrompt`
    (the steps reader's), which each model renders in its own chat template (llama.cpp: ChatML,
    Qwen2.5's template; transformers: ``tokenizer.apply_chat_template``).

    Every attribute below is declared, so callers read it directly and never probe with
    ``getattr``; ``sqa.models.base.ModelBase`` gives the defaults (what a model without the
    optional abilities has), which runtimes and test stand-ins inherit."""

    name: str
    prefers_batches: bool  # True on a GPU: callers send whole batches in lockstep
    capabilities: ModelCapabilities  # what it can do (hidden states, endpoint, read-out, template, ...)
    path: object  # the weights file (pathlib.Path) when there is one, else None
    hidden_size: int | None  # floats per hidden state (None: none)
    readout_stats: dict | None  # a served model's yes/no read-out counts (None in-process)
    server_info: dict | None  # a served model's server details, no credentials (None in-process)
    cost: object  # a served model's calls/tokens/seconds (sqa.models.served_cache.Cost), else None

    def generate(self, prompts: Sequence[Prompt], max_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Greedy continuation of each prompt, cut at the first stop string (not included)."""
        ...

    def yes_probability(self, prompts: Sequence[Prompt]) -> list[float]:
        """P(" Yes") / (P(" Yes") + P(" No")) for the next token after each prompt, in [0, 1]."""
        ...

    def hidden_states(self, prompts: Sequence[Prompt]) -> list:
        """For each prompt ``(state, log_odds)``: the final-layer hidden state of its last token
        (float32 numpy array, ``(hidden_size,)``) and ``log P(Yes) - log P(No)`` of the next token."""
        ...

    def warm_prefixes(self, texts: Sequence[str], cache_dir) -> list[str]:
        """Keep the KV cache of fixed prompt heads in ``cache_dir`` when ``capabilities.prefix_cache``."""
        ...

    def complete(
        self,
        prompts: Sequence[Prompt],
        max_tokens: int,
        stop: Sequence[str] = (),
        *,
        temperature: float = 0.0,
        seed: int = 0,
        n: int = 1,
        logprobs: bool = False,
    ) -> list[list[Generation]]:
        """``n`` continuations (:class:`Generation`) per prompt, at most ``max_tokens`` tokens each,
        cut before the first stop string: greedy at ``temperature`` 0, else sampled with ``seed``
        (``capabilities.sampling``); per-token logprobs when ``logprobs``
        (``capabilities.token_logprobs``). SqaError (one line) for what the model cannot do."""
        ...

    def usage(self) -> dict | None:
        """Cumulative ``{"prompt_tokens", "completion_tokens"}`` of this model object, None when unknown."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """Evidence for a question and its decomposition steps (``sqa.retriever``: ``StepRetriever``,
    ``OfficialRetriever``, ``BackendRetriever``).

    Steps may or may not carry answers: a ``#k`` in a step is replaced by step k's answer when it
    is known, so the reader can call ``retrieve_step`` step by step as answers arrive.
    """

    name: str
    last_queries: list[str]  # the query texts of the latest ``retrieve`` call

    def step_query(self, step: Step, prior_steps: Sequence[Step] = (), question: str | None = None) -> str:
        """The query text ``retrieve_step`` searches for this step."""
        ...

    def retrieve_step(
        self, step: Step, prior_steps: Sequence[Step] = (), k: int = 10, question: str | None = None
    ) -> list[Hit]:
        """Top-``k`` hits for one step; ``prior_steps`` are steps 1..i-1 (for ``#k``), ``question``
        the original question (optional context)."""
        ...

    def retrieve(self, question: str, steps: Sequence[Step] = (), k: int = 10) -> list[Hit]:
        """Top-``k`` evidence paragraphs for the whole question (ranks 1..k, unique evidence IDs);
        with no steps, the question alone is the query."""
        ...


@runtime_checkable
class BatchReader(Protocol):
    """What the evaluation runner needs from a reader (``sqa.steps``): answers for a batch of
    questions, in order, each reported through ``on_result`` as soon as it is done (the runner
    writes it to disk at once).

    ``decomposition``: ``predicted`` (the decomposer writes the steps), ``gold`` (StrategyQA's
    annotated steps) or ``question`` (one step: the question itself). ``model``: the
    :class:`LanguageModel` it reads with (None for a stand-in without one)."""

    model: object  # LanguageModel | None

    def answer_batch(
        self, questions: Sequence[Question], decomposition: str = "predicted", on_result: Callable | None = None
    ) -> list:
        """``list[sqa.trace.ReasoningResult]``, one per question, in order."""
        ...
