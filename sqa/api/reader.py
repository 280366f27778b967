"""``sqa.Reader``: a preset's reader over an index and a model, asked from Python; ``sqa.Answer``.

>>> reader = sqa.Reader(preset="facts", index=index)
>>> a = reader.ask("Did Aristotle use a laptop?")
>>> a.answer, a.p_yes, a.facts[0].ref
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, Union

from sqa.facts.sources import Fact
from sqa.types import BadInput, PresetName, Question

if TYPE_CHECKING:
    from rich.console import Console

    from sqa.api.index import Index
    from sqa.methods.base import Method
    from sqa.methods.registry import MethodName
    from sqa.methods.settings import MethodSettings
    from sqa.presets import Preset
    from sqa.settings import ReaderSettings
    from sqa.trace import ReasoningResult, StepTrace
    from sqa.types import LanguageModel


@dataclass
class Answer:
    """A reader's answer to one question.

    ``answer``: yes (True) or no; ``p_yes``: P(yes) in [0, 1] (the answer head's when
    ``calibrated``, else the model's own P(" Yes") / (P(" Yes") + P(" No")), zero-shot);
    ``confidence``: P(the answer is right) = ``p_yes`` or ``1 - p_yes``; ``head``: the answer head
    file that answered ("" when none did); ``facts``: what the facts reader read
    (``sqa.facts.sources.Fact``: ``text``; ``source``, "wikipedia", "train-facts" (an annotated
    fact of another train question) or an oracle's; ``ref``, the Wikipedia evidence ID or the
    train question's qid; ``score``);
    ``steps``: the decomposition steps (``sqa.trace.StepTrace``: question, query, answer,
    evidence IDs), empty for the facts reader; ``paragraphs``: the top-10 evidence IDs for the
    whole question; ``timings``: seconds per phase (``total``, ``read``, ...); ``model``: the
    model's name; ``result``: the full ``sqa.trace.ReasoningResult``."""

    question: str
    answer: bool
    p_yes: float
    calibrated: bool
    facts: list[Fact] = field(default_factory=list)
    steps: list["StepTrace"] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    head: str = ""
    model: str = ""
    result: "ReasoningResult | None" = field(default=None, repr=False)

    @property
    def confidence(self) -> float:
        """P(the answer is right): ``p_yes`` for a yes, ``1 - p_yes`` for a no."""
        return self.p_yes if self.answer else 1.0 - self.p_yes

    @classmethod
    def from_result(cls, r: "ReasoningResult") -> "Answer":
        """The :class:`Answer` of a reader's ``sqa.trace.ReasoningResult``."""
        facts = [Fact(f["text"], f["source"], f.get("ref", ""), f.get("score", 0.0)) for f in r.facts]
        return cls(
            r.question,
            bool(r.answer),
            float(r.p_yes),
            bool(r.calibrated),
            facts,
            list(r.steps),
            list(r.paragraphs),
            dict(r.timings),
            r.head,
            r.model,
            r,
        )

    @property
    def method(self) -> dict:
        """A method's record (name, answer rule, read, votes, text, cost, calls); {} for a preset."""
        return self.result.method if self.result is not None else {}

    def __repr__(self) -> str:
        """One line: answer, P(yes) (calibrated or the model's own), model, the question cut at 60."""
        from sqa.display import answer_repr

        return answer_repr(self)

    def _repr_html_(self) -> str:
        """The answer, P(yes), model, head and the facts read as HTML (Jupyter), escaped."""
        from sqa.display import answer_html

        return answer_html(self)

    def to_dict(self) -> dict:
        """The ``sqa ask --json`` object (question, decomposition, answer, confidence, paragraphs,
        p_yes, calibrated, head, facts)."""
        return (
            self.result.to_ask_json()
            if self.result is not None
            else {"question": self.question, "answer": self.answer, "p_yes": self.p_yes, "calibrated": self.calibrated}
        )


class Reader:
    """A preset's reader (``sqa.presets``: ``facts``, the default; ``no-retrieval``; ``steps``;
    the oracles ``oracle-facts`` / ``oracle-paragraphs``, for evaluation only) or a method's
    (``method``) over an index and a language model, built from one :class:`sqa.ReaderSettings`
    (:attr:`settings`, as resolved: the top-k used and every method setting read).

    Give ``settings`` (a ``sqa.ReaderSettings``; ``model`` may then only be a loaded model) or the
    same as keyword arguments: ``preset``; ``model``: a registry name (default
    ``qwen2.5-coder-1.5b``, GGUF on llama.cpp, CPU), a ``.gguf`` path, a Hugging Face checkpoint,
    ``openai:NAME`` with ``base_url`` (an OpenAI-compatible server; several URLs spread requests
    over several servers; ``api``: "auto", "chat" or "completions"; ``allow_model_alias``: accept
    answers naming another model), or a loaded ``sqa.types.LanguageModel``; ``chat_template``,
    ``apply_chat_template``, ``prefill``, ``k``, ``head``, ``backend``: as ``sqa.ReaderSettings``
    says; ``index``: an :class:`sqa.Index`, an index directory, or None (``$SQA_HOME/index``; not
    opened by presets that read no evidence); ``method``: a method instead of a preset
    (``sqa.methods``: a shipped name, ``"module:Class"``, or a ``sqa.methods.Method``) with
    ``settings`` a ``sqa.methods.MethodSettings`` (defaults: the method's paper's), ``k`` then being
    the method's top-k. The model loads on the first :meth:`ask` (seconds to a minute);
    :meth:`close` releases it and the index. ``progress``: by default (None or True) a spinner
    with the seconds spent while the model loads on the first :meth:`ask` / :meth:`ask_many`, then
    "loaded MODEL in N.N s" (stderr, on a terminal or in Jupyter; nothing in a log:
    ``sqa.render.progress.LoadProgress``); a ``rich.console.Console`` to draw it on; False for none.

    Raises :class:`sqa.types.BadInput` for an unknown preset, settings that do not go together
    (``sqa.ReaderSettings``), or ``settings`` beside the keyword arguments it holds; loading raises
    :class:`sqa.types.IndexNotFound`, :class:`sqa.types.ModelNotFound`,
    :class:`sqa.types.HeadNotFound` or :class:`sqa.types.ServerError` as they apply."""

    def __init__(
        self,
        preset: Union[PresetName, "Preset", None] = None,
        model: Union[str, "LanguageModel", None] = None,
        index: Union["Index", str, Path, None] = None,
        *,
        base_url: str | Sequence[str] | None = None,
        api: str = "auto",
        allow_model_alias: bool = False,
        k: int | None = None,
        head: str | Path | None = None,
        chat_template: str | Path | None = None,
        apply_chat_template: bool = False,
        prefill: bool = True,
        backend: str = "embedded",
        method: Union[MethodName, str, "Method", None] = None,
        settings: "ReaderSettings | MethodSettings | None" = None,
        progress: "bool | Console | None" = None,
    ):
        from sqa.methods.settings import MethodSettings
        from sqa.models.registry import DEFAULT_MODEL
        from sqa.settings import ReaderSettings

        loaded = model is not None and not isinstance(model, (str, Path))
        if loaded and not hasattr(type(model), "hidden_states"):
            raise BadInput(
                f"Reader: model must be a model name (str, e.g. {DEFAULT_MODEL!r}), a model file path or a "
                f"loaded LanguageModel, not {type(model).__name__} {model!r:.60}"
            )
        self._lm = model if loaded else None  # a loaded LanguageModel (the Protocol's methods) is used as it is
        m = None  # the loaded method
        if isinstance(settings, ReaderSettings):
            given = {
                "preset": preset, "model": None if loaded else model, "index": index, "base_url": base_url,
                "k": k, "head": head, "chat_template": chat_template, "method": method,
            }  # fmt: skip
            given = [n for n, v in given.items() if v is not None]
            given += [n for n, v, d in (("api", api, "auto"), ("allow_model_alias", allow_model_alias, False),
                      ("apply_chat_template", apply_chat_template, False), ("prefill", prefill, True),
                      ("backend", backend, "embedded")) if v != d]  # fmt: skip
            if given:
                raise BadInput(f"Reader: give settings= (a sqa.ReaderSettings) or {given[0]}=, not both")
            s = settings if self._lm is None else settings.replace(model=str(self._lm.name))
        else:
            if settings is not None and not isinstance(settings, MethodSettings):
                raise BadInput(
                    f"Reader: settings must be a sqa.ReaderSettings or sqa.methods.MethodSettings, not {type(settings).__name__}"
                )
            from sqa.models.served_url import ServedOptions

            if method is not None and not isinstance(method, str):
                from sqa.methods.registry import load_method, method_spec

                m = load_method(method)
                method = method_spec(m)
            served = base_url if isinstance(base_url, ServedOptions) else replace(
                ServedOptions.of(base_url), api=api, allow_model_alias=allow_model_alias
            )  # fmt: skip
            s = ReaderSettings(  # an sqa.Index gives its folder and backend there
                preset=preset,
                method=settings if settings is not None else method,
                model=str(self._lm.name) if loaded else (model or ""),
                index=index,
                backend=backend,
                served=served,
                k=k,
                head=head,
                chat_template=chat_template,
                apply_chat_template=apply_chat_template,
                prefill=prefill,
            )
        self._given = s  # as given (a protocol's pinned settings are checked against it)
        self.method, self.method_settings = None, {}
        self._resolve(s, m if m is not None else method)  # method settings of another method: BadInput
        self.chat_template_id = ""
        if s.chat_template is not None:
            from sqa.models.chat import check_template_file

            self.chat_template_id = check_template_file(s.chat_template)  # a broken file: one line, before any model
        if not (progress is None or isinstance(progress, bool) or hasattr(progress, "is_terminal")):
            raise BadInput(f"Reader: progress must be True, False or a rich Console, not {type(progress).__name__}")
        self.progress = progress
        from sqa.models.registry import is_served

        api_asked = s.served.api if s.served is not None else "auto"
        # the facts reader's prompt form (sqa.facts.prompt): over chat a served model reads its template;
        # with --api auto that is known once the server is probed (``prompt_form``)
        self._form: str | None = (
            "chat"
            if s.apply_chat_template or (is_served(self.model) and api_asked == "chat")
            else None
            if is_served(self.model) and self._lm is None and self.preset.reader == "facts" and api_asked == "auto"
            else "text"
        )
        self._pipeline = None
        self._head = None  # the answer head preflight() loaded

    def _resolve(self, given, method=None) -> None:
        """Set :attr:`settings`, :attr:`preset`, :attr:`method` and :attr:`method_settings` from
        ``given`` (a ``ReaderSettings``). ``method``: the method asked for beside ``given.method``
        (loaded, or a name or ``module:Class``; ``sqa.methods.registry.reader_method`` refuses
        settings of another method), else None to load ``given.method``'s."""
        from sqa.methods.settings import MethodSettings

        if given.method is None:
            self.preset, self.method, self.method_settings = given.preset, None, {}
            self.settings = given.replace(k=given.k if given.k is not None else 10)
            return
        from sqa.methods.registry import method_spec, reader_method

        preset, k, self.method, _, self.method_settings = reader_method(
            method if method is not None else given.method.method, given.method, given.k
        )
        self.preset = preset
        k = 10 if k is None else k
        if self.method is None:  # the methods facts and steps: their presets' readers
            self.settings = given.replace(method=None, preset=preset, k=k)
        else:
            resolved = MethodSettings.from_dict({**self.method_settings, "method": method_spec(self.method)})
            self.settings = given.replace(method=resolved, k=k)

    # what the settings say, as the reader uses them
    model = property(lambda self: self.settings.model, doc="The model's name (a loaded model's ``name``).")
    k = property(
        lambda self: self.settings.k, doc="Paragraphs retrieved (top-k) as used: 10 unless given or the method's."
    )
    head = property(lambda self: self.settings.head, doc="The answer head file given (facts reader), or None.")
    base_url = property(lambda self: self.settings.served, doc="The served model's ``ServedOptions``, or None.")
    chat_template = property(lambda self: self.settings.chat_template, doc="The chat template file given, or None.")
    prefill = property(lambda self: self.settings.prefill, doc="The steps reader continues the assistant turn.")
    backend = property(lambda self: self.settings.backend, doc="The index backend: embedded or elasticsearch.")
    index_dir = property(lambda self: self.settings.index_dir(), doc="The index folder.")

    def pin_settings(self, pinned: dict, by: str) -> None:
        """Apply a protocol's pinned method settings (``sqa.eval.protocols.Protocol.settings``) to
        this Reader's method (and its loaded reader): each setting the method reads is set; one given
        with another value raises BadInput naming ``by`` (the protocol). A no-op for presets."""
        from sqa.methods.settings import FLAGS

        if self.method is None:
            return
        given = self._given.method.given()
        for key, value in pinned.items():
            if key in given and given[key] != value:
                raise BadInput(f"--protocol {by} pins {FLAGS[key]} {value}; leave {FLAGS[key]} {given[key]} out")
        apply = {k: v for k, v in pinned.items() if k in self.method.defaults}
        self._given = self._given.replace(method=replace(self._given.method, **apply))
        self._resolve(self._given, self.method)
        if self._pipeline is not None:  # loaded already (asked before): its reader reads them too
            self._pipeline.reader.settings = self.method_settings

    def preflight(self):
        """Check, before the model loads, what can be: the index (when the preset retrieves), the
        model's file, the facts reader's answer head and that the model gives what the head reads.
        Returns that head (None: zero-shot, or the steps reader). Raises the SqaError subclass
        that applies (:class:`sqa.types.IndexNotFound`, :class:`sqa.types.ModelNotFound`, ...).
        Once loaded (:attr:`loaded`) nothing is checked again: returns the head that answers."""
        if self._pipeline is not None:  # a session's later questions: checked and loaded once
            return getattr(self._pipeline.reader, "head", None) if self.preset.reader == "facts" else None
        from sqa.models.registry import resolve_gguf
        from sqa.pipeline import check_head_states, load_head, open_index

        if self.preset.retrieval or self.preset.oracle:
            open_index(self.index_dir, self.backend).close()  # a missing index is named before the model loads
        if self._lm is None:
            resolve_gguf(self.model)  # a missing .gguf file is named before the head is looked for
        if self.preset.reader != "facts":
            return None
        self.check_given_head()
        self._head, _ = load_head(
            self.model, self.preset.retrieval, self.preset.oracle, self.head, form=self.prompt_form
        )
        check_head_states(self._head, self.given_model)  # a states head with a served model: named before it loads
        return self._head

    def check_given_head(self) -> None:
        """A ``head`` file given for the facts reader: readable and of what the model gives (hidden
        states or log-odds only), checked before anything loads or a server is asked (even the
        probes that tell a served model's prompt form, :attr:`prompt_form`). Raises SqaError."""
        if self.head is not None and self.preset.reader == "facts":
            from sqa.facts.head import AnswerHead
            from sqa.pipeline import check_head_states

            check_head_states(AnswerHead.load(self.head), self.given_model)

    @property
    def prompt_form(self) -> str:
        """The facts reader's prompt form, "text" or "chat" (``sqa.facts.prompt``): "chat" with
        ``apply_chat_template`` or a model served over ``/v1/chat/completions``. For a served model
        with ``api="auto"`` the endpoint is known only from the server, so the model loads (its
        load-time probes, seconds) the first time this is asked; heads are then chosen by it."""
        if self._form is None:
            from sqa.facts.reader import reader_form
            from sqa.models.registry import load_model

            self._lm = load_model(self.model, base_url=self.base_url)
            self._form = reader_form(self._lm, "text")
        return self._form

    @property
    def given_model(self):
        """The model as given: a loaded ``LanguageModel``, else its name (loaded on first use)."""
        return self._lm or self.model

    @property
    def loaded(self) -> bool:
        """Whether the model (and index) are loaded, i.e. :attr:`pipeline` was built."""
        return self._pipeline is not None

    @property
    def pipeline(self):
        """The built ``sqa.pipeline.Pipeline`` (reader, model, backend, retriever); built on first use."""
        if self._pipeline is None:
            from sqa.pipeline import build_reader, load_head

            head = self._head
            if head is None and self.head is not None:
                head, _ = load_head(
                    self.model, self.preset.retrieval, self.preset.oracle, self.head, form=self.prompt_form
                )
            self._pipeline = build_reader(
                self.settings,
                preset=self.preset,
                model=self._lm,
                head=head,
                prompt_form=self.prompt_form,
                method=self.method,
                method_settings=self.method_settings,
            )
        return self._pipeline

    def ask(self, question: str) -> Answer:
        """Answer one yes/no question (:class:`Answer`). Raises :class:`sqa.types.BadInput` for an
        empty question or one that is not text, and what loading raises (see the class doc) on the
        first call."""
        from sqa.checks import text_arg

        text_arg("Reader.ask", "question", question, allow_question=True)
        return self.ask_many([question])[0]

    def ask_many(self, questions: Sequence[str | Question], batch_size: int = 32) -> list[Answer]:
        """Answers to ``questions`` (texts, or ``sqa.types.Question`` s from :func:`sqa.load_questions`),
        in order, ``batch_size`` at a time (a GPU model reads a batch in lockstep). Raises
        :class:`sqa.types.BadInput` for one ``str`` (pass a list) or an item that is not text."""
        from sqa.checks import int_arg, list_arg

        example = "['Is the sun a star?']"
        questions = list_arg("Reader.ask_many", "questions", questions, example, allow_question=True)
        int_arg("Reader.ask_many", "batch_size", batch_size, 1)
        qs = [q if isinstance(q, Question) else Question(qid="", question=str(q)) for q in questions]
        for q in qs:
            if not q.question.strip():
                raise BadInput("empty question; pass the question text, e.g. 'Is the sun a star?'")
        decomposition = "question" if self.preset.reader == "facts" else self.preset.decomposition
        if decomposition == "gold":
            decomposition = "predicted"  # asked questions carry no annotated steps
        out: list[Answer] = []
        if self._pipeline is None and self.progress is not False:  # the first question: the model loads
            from sqa.render.progress import LoadProgress, default_drawer_console

            with LoadProgress(default_drawer_console(self.progress), self.model):
                self.pipeline  # noqa: B018  (builds the reader: loads the model, opens the index)
        reader = self.pipeline.reader
        for i in range(0, len(qs), batch_size):
            for r in reader.answer_batch(qs[i : i + batch_size], decomposition=decomposition):
                out.append(Answer.from_result(r))
        return out

    def close(self) -> None:
        """Release the index (the model is freed with the reader)."""
        if self._pipeline is not None:
            self._pipeline.close()
            self._pipeline = None

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Reader(preset={self.preset.name or self.preset.reader!r}, model={self.model!r}, index={str(self.index_dir)!r})"
