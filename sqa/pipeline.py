"""The composition root: builds backend -> retriever -> reader for the CLI, the evaluation runner
and the benchmarks. The stages never wire each other (the reader does not open an index); this
module is the one place that does.

- :func:`open_index` / :func:`index_info`: the search backend of an index directory and the
  index's identity (``sqa.indexing.manifest``).
- :func:`make_retriever`: a ``Retriever`` by name over a backend.
- :func:`load_head`: the answer head of the facts reader and its identity (None: zero-shot).
- :func:`build_reader`: a :class:`Pipeline` for a preset (``sqa.presets``).
- :func:`reader_factory`: ``pool -> reader`` for ``sqa.eval.runner.run_eval``.
- :func:`features_reader`: model, fact selector and decomposer that read the facts reader's
  features into a store (the out-of-fold run, ``sqa.api.out_of_fold``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from sqa.presets import Preset
from sqa.types import IndexNotFound, LanguageModel, Question, Retriever, SearchBackend, SqaError

if TYPE_CHECKING:
    from sqa.settings import ReaderSettings

RETRIEVERS = ("step", "official", "backend")
OLD_RETRIEVER_NAMES = {"ours": "step"}  # the step retriever was called "ours" before issue 33


def open_index(index_dir: str | Path, backend: str = "embedded", create: bool = False, **options) -> SearchBackend:
    """The search backend of ``index_dir`` (``sqa.indexing.open_backend``; ``create``: a new or
    resumed one to build into, ``options`` its settings). Raises :class:`sqa.types.IndexNotFound`
    when there is no embedded index there to search (saying how to build one), or what
    ``open_backend`` raises."""
    from sqa.indexing import open_backend

    idx = Path(index_dir)
    if backend == "embedded" and not create and not (idx / "meta.json").exists():
        raise IndexNotFound(
            f"{idx}: no index here; build one with `sqa index --corpus mini --index-dir {idx}` or pass --index-dir"
        )
    return open_backend(idx, backend, create=create, **options)


def index_info(index_dir: str | Path, backend: str = "embedded") -> dict:
    """The identity of the index in ``index_dir`` (``sqa.indexing.manifest.index_identity``) plus
    ``preset`` and ``built_at``, as recorded in ``run.json``/``metrics.json``; never the path."""
    from sqa.indexing.manifest import index_identity, read_manifest

    manifest = read_manifest(index_dir) or {}
    return {**index_identity(manifest, backend), "preset": manifest.get("preset"), "built_at": manifest.get("built_at")}


def make_retriever(backend: SearchBackend, name: str = "step", rerank: bool = False) -> Retriever:
    """A ``Retriever`` over ``backend``: ``step`` (``StepRetriever``; its old name ``ours`` is still
    read; ``rerank``: re-order its candidates with MiniLM), ``official`` (``OfficialRetriever``: IR-Q / IR-ORA-D) or ``backend`` (``BackendRetriever``).
    Raises SqaError for another name."""
    name = OLD_RETRIEVER_NAMES.get(name, name)
    if name == "step":
        from sqa.retriever.steps import StepRetriever

        return StepRetriever(backend, rerank=rerank)
    if name == "official":
        from sqa.retriever.official import OfficialRetriever

        return OfficialRetriever(backend)
    if name == "backend":
        from sqa.retriever.backend import BackendRetriever

        return BackendRetriever(backend)
    raise SqaError(f"unknown retriever {name!r}; use {', '.join(RETRIEVERS)}")


def load_head(
    model: str,
    retrieval: bool,
    oracle: str | None,
    path: str | Path | None = None,
    split: str = "dev",
    questions: Sequence[Question] | None = None,
    form: str = "text",
):
    """``(head, identity)``: the facts reader's answer head for ``model`` (the facts head, or the
    no-retrieval one when ``retrieval`` is off and no oracle is shown; ``path`` overrides), fitted
    on reads in prompt ``form`` (``sqa.facts.prompt``: a head of the other form never answers), and its
    identity ``"<kind>:<12 hex of the sha256 of its model, spec, intercept and first 64
    coefficients>"``. When the model has no head (and no ``path`` is given): ``(None,
    "zero-shot:<kind>")``, and the reader answers with the model's own, uncalibrated P(yes)
    (``sqa.facts.reader.FactsReader``). Raises SqaError for a ``path`` that is missing or not a
    head, or when ``split`` / ``questions`` hold questions the head was trained on (its accuracy
    there would be in-sample)."""
    from sqa.facts.reader import head_for
    from sqa.types import HeadNotFound

    kind = "facts" if (retrieval or oracle) else "plain"
    try:
        h = head_for(model, kind, path, form)
    except HeadNotFound:
        if path:
            raise
        return None, zero_shot_identity(kind)
    trained_on = h.provenance.get("train_split")
    if trained_on == "train-2061" and questions is not None:
        from sqa.strategyqa import load_questions

        seen = {q.qid for q in load_questions("train-2061")}
        inside = [q.qid for q in questions if q.qid in seen]
        if inside:
            raise SqaError(
                f"{len(inside)} question(s) of the dataset (e.g. {inside[0]}) are train-2061 questions the "
                "shipped answer head was trained on, so its accuracy there would be in-sample; build heads "
                f"that record their questions with `sqa eval --split train --model {model}` (the dataset is "
                "then answered out-of-fold), or leave those questions out"
            )
    if trained_on == "train-2061" and split in ("train", "train-2061", "all"):
        raise SqaError(
            f"the answer head was trained on train-2061, so its accuracy on {split} would be in-sample; "
            + (
                "evaluate the oracles on dev"
                if oracle
                else f"leave --head out: `sqa eval --split {split}` answers it out-of-fold"
            )
        )
    digest = hashlib.sha256(
        json.dumps(
            {"spec": h.spec.to_dict(), "coef": h.coef.tolist()[:64], "b": h.intercept, "model": h.model}, sort_keys=True
        ).encode()
    ).hexdigest()[:12]
    return h, f"{kind}:{digest}"


def zero_shot_identity(kind: str) -> str:
    """The ``head`` option of a run answered without a head (recorded in ``run.json``'s identity,
    so a zero-shot run is never resumed with a head's answers, nor the other way round)."""
    return f"zero-shot:{kind}"


def check_head_states(head, model: str | LanguageModel) -> None:
    """Raise SqaError (one line) when ``head`` reads hidden states and ``model`` (a name, or a loaded
    model) gives none: a served model (``openai:NAME``) returns log-odds only, so its head must be
    one of log-odds features (``sqa eval --split train --model openai:NAME`` fits one). No head
    (None: zero-shot) reads log-odds only and passes."""
    from sqa.models.registry import is_served

    if head is None:
        return
    name = model if isinstance(model, str) else model.name
    no_states = is_served(name) if isinstance(model, str) else not model.capabilities.hidden_states
    if no_states and head.spec.states:
        raise SqaError(
            f"the answer head ({head.spec.name}) reads hidden states, which the served model {name} does not "
            f"return; pass --head with a log-odds head (`sqa eval --split train --model {name}` fits one) or use "
            "--preset steps"
        )


@dataclass
class Pipeline:
    """A ready reader and what it was built on: ``backend`` (None without retrieval) for showing
    evidence text, ``retriever``, ``model``. ``close()`` closes the backend."""

    reader: object  # FactsReader or StepsReader: both are sqa.types.BatchReader
    model: LanguageModel
    backend: SearchBackend | None = None
    retriever: Retriever | None = None

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()


def build_reader(
    settings: ReaderSettings,
    *,
    preset: Preset | None = None,
    model: LanguageModel | None = None,
    head=None,
    method=None,
    method_settings: dict | None = None,
    features_cache: str | Path | None = None,
    fewshot_pool: Sequence[Question] | None = None,
    retriever: str = "step",
    prompt_form: str = "text",
    zero_shot: bool = False,
) -> Pipeline:
    """The reader ``settings`` (a ``sqa.settings.ReaderSettings``: model, index and backend,
    served options, k, chat template, prefill) describe, over the index (opened first, so a
    missing index fails before a model loads; not opened when the preset reads no evidence) and
    the model (``model``: one loaded already, else ``settings.model`` loaded by
    ``sqa.models.registry.load_model``). ``preset``: the ``sqa.presets.Preset`` to read by
    (default ``settings.preset``; a method's is ``sqa.methods.registry.method_preset``).

    Facts reader: ``head`` (from :func:`load_head`; loaded here when None, and answering zero-shot
    when the model has none) is checked against the model; ``features_cache`` is a features file
    (``sqa.facts.features``); ``prompt_form``: its prompt form ("text" | "chat",
    ``sqa.facts.prompt``; a model served over chat reads "chat" whatever is asked). ``zero_shot``:
    the facts reader answers with the model's own P(yes) even when the model has a head (a train
    cut too small to cross-fit, ``sqa.api.evaluate``). Steps reader: ``fewshot_pool`` = the
    questions demonstrations come from (default train-2061). Reader ``method``
    (``sqa.presets.method_preset``): ``method`` (a ``sqa.methods.base.Method``) answers through
    ``sqa.methods.reader.MethodReader`` with ``method_settings`` (resolved; default
    ``settings.method`` resolved for it); what it needs from the model is checked once the model
    is loaded (BadInput, one line).
    Raises SqaError for a missing index, model or head, for a head that reads hidden states with a
    served model (which gives none), and for a head of another prompt form."""
    from sqa.models.registry import load_model, model_stem

    preset = preset or settings.preset
    k, prefill = settings.k if settings.k is not None else 10, settings.prefill
    model = model if model is not None else settings.model
    model_kw = {
        n: v for n, v in (("base_url", settings.served), ("chat_template", settings.chat_template)) if v is not None
    }
    be = ret = None
    if preset.retrieval or preset.oracle:
        be = open_index(settings.index_dir(), settings.backend)
        ret = make_retriever(be, retriever)
    try:
        if preset.reader == "method":
            from sqa.methods.reader import MethodReader
            from sqa.methods.registry import check_needs

            check_needs(method, None, be is not None)
            lm = load_model(model, **model_kw) if isinstance(model, str) else model
            check_needs(method, lm, be is not None)
            if method_settings is None:
                method_settings = settings.method.resolve(method)
            return Pipeline(MethodReader(method, lm, be, dict(method_settings)), lm, be, ret)
        if preset.reader == "facts":
            from sqa.facts.reader import FactsReader
            from sqa.facts.training import model_sha256

            name = model if isinstance(model, str) else model.name
            if head is None and not zero_shot:
                head, _ = load_head(name, preset.retrieval, preset.oracle, form=prompt_form)
            check_head_states(head, name if isinstance(model, str) else model)
            lm = load_model(model, **model_kw) if isinstance(model, str) else model
            if head is not None:
                import warnings

                from sqa.facts.heads import check_served_head, head_identity_checked, unchecked_head_note
                from sqa.types import SqaWarning

                head.check_model(model_stem(name), model_sha256(lm))
                check_served_head(head, lm)  # other weights behind a served name: refused
                if head_identity_checked(head, lm.name) is False:  # nothing to check it by: said once
                    warnings.warn(unchecked_head_note(head, lm.name), SqaWarning, stacklevel=2)
            from sqa.paths import sqa_home

            reader = FactsReader(
                lm,
                head,
                ret,
                k=k,
                oracle=preset.oracle,
                backend=be,
                features_cache=features_cache,
                prefix_cache=sqa_home() / "cache",
                prompt_form=prompt_form,
            )
        else:
            from sqa.steps.prompts import DemoSelector
            from sqa.steps.reader import StepsReader

            lm = load_model(model, **model_kw) if isinstance(model, str) else model
            reader = StepsReader(
                lm,
                ret,
                k,
                retrieval=preset.retrieval,
                demo_selector=DemoSelector(fewshot_pool) if fewshot_pool is not None else None,
                prefill=prefill,
            )
    except BaseException:
        if be is not None:
            be.close()
        raise
    return Pipeline(reader=reader, model=lm, backend=be, retriever=ret)


def reader_factory(
    settings: ReaderSettings,
    *,
    preset: Preset | None = None,
    model: LanguageModel | None = None,
    head=None,
    features_cache: str | Path | None = None,
    prompt_form: str = "text",
    zero_shot: bool = False,
) -> Callable:
    """``pool -> reader`` for ``sqa.eval.runner.run_eval``: builds the reader of ``settings`` once
    (the model loads once; arguments as :func:`build_reader`'s); the steps reader then switches its
    few-shot pool per cross-fitting fold, the facts reader's demonstrations are fixed so the pool
    does not change it."""
    state: dict = {}

    def reader_for(pool):
        p = state.get("pipeline")
        if p is None:
            p = state["pipeline"] = build_reader(
                settings,
                preset=preset,
                model=model,
                head=head,
                features_cache=features_cache,
                prompt_form=prompt_form,
                zero_shot=zero_shot,
                fewshot_pool=pool.questions if pool is not None else None,
            )
            return p.reader
        if (preset or settings.preset).reader == "steps":
            return p.reader.with_fewshot_pool(pool.questions)
        return p.reader

    return reader_for


@dataclass
class FeaturesReader:
    """What reads the facts reader's features (``sqa.facts.store.FeaturesStore.extract``): the
    loaded ``model``, the fact ``selector`` over a step retriever, ``decompose`` (a decomposer's
    bound method when the settings read facts per step, else None). ``close()`` closes the index."""

    model: LanguageModel
    selector: object  # sqa.facts.features.FactSelector
    decompose: Callable | None
    backend: SearchBackend

    def close(self) -> None:
        self.backend.close()


def features_reader(
    model: str,
    settings,
    index_dir: str | Path,
    backend: str = "embedded",
    base_url: str | None = None,
    on_loading: Callable[[str], None] = lambda s: None,
) -> FeaturesReader:
    """The :class:`FeaturesReader` for ``model`` (a name for ``load_model``; ``base_url``: the server
    of a served model) with fact ``settings`` (``sqa.facts.features.FactSettings``) over the index
    in ``index_dir`` (opened first: a missing index fails before the model loads). The model's
    fixed prompt prefixes are warmed into ``$SQA_HOME/cache`` when it keeps a prefix cache.
    ``on_loading(model)`` is called just before the model loads (which can take a minute).
    Raises SqaError for a missing index or model."""
    from sqa.facts.features import FactSelector
    from sqa.models.registry import load_model
    from sqa.paths import sqa_home
    from sqa.retriever.steps import StepRetriever

    be = open_index(index_dir, backend)
    try:
        on_loading(model)
        lm = load_model(model, base_url=base_url) if base_url else load_model(model)
        from sqa.facts.reader import reader_form

        form = reader_form(lm, settings.form)
        if form != settings.form:  # e.g. --api auto chose /v1/chat/completions: the store's key would lie
            raise SqaError(
                f"{lm.name} reads the facts reader's prompts in the {form} form (served over "
                f"/v1/{'chat/' if form == 'chat' else ''}completions), but this run's features are of the "
                f"{settings.form} form; pass --api {'chat' if form == 'chat' else 'completions'}"
            )
        sel = FactSelector(StepRetriever(be), settings)
        decompose = None
        if sel.needs_steps:
            from sqa.steps.decomposer import Decomposer

            decompose = Decomposer(lm, encode=sel.step_encode, require_minilm=True, cache_dir=sqa_home() / "cache")
        if lm.capabilities.prefix_cache and form == "text":
            from sqa.facts.prompt import facts_prefix, plain_prefix

            lm.warm_prefixes([plain_prefix(), facts_prefix()], sqa_home() / "cache")
    except BaseException:
        be.close()
        raise
    return FeaturesReader(lm, sel, decompose, be)


def shared_model(model: str | None, chat_template: str | Path | None = None, loading: Callable | None = None):
    """The model several presets answer with (``sqa eval --preset a,b``), loaded once on first use
    and remembering each prompt's reading (``sqa.models.memo.SharedReadings``); None for a served
    model (each run talks to the server). ``loading(model)``: a context manager shown while it loads."""
    from contextlib import nullcontext

    from sqa.models.memo import SharedReadings
    from sqa.models.registry import DEFAULT_MODEL, load_model

    model = model or DEFAULT_MODEL
    if model.startswith("openai:"):
        return None
    kw = {"chat_template": chat_template} if chat_template is not None else {}

    def load():
        with (loading or (lambda m: nullcontext()))(model):
            return load_model(model, **kw)

    return SharedReadings(load=load, name=model)


def make_decomposer(model: LanguageModel):
    """The decomposer (``sqa.steps.decomposer.Decomposer``) over ``model``, its demonstrations'
    embeddings cached in ``$SQA_HOME/cache``."""
    from sqa.paths import sqa_home
    from sqa.steps.decomposer import Decomposer

    return Decomposer(model, cache_dir=sqa_home() / "cache")
