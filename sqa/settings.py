"""``sqa.ReaderSettings``: the one typed settings object of a reader, validated once.

What ``sqa.Reader`` is built from (its keyword arguments become one of these), what
``sqa ask`` and ``sqa eval`` make of their options (:meth:`ReaderSettings.from_options`), what
``sqa.pipeline.build_reader`` reads, and what ``run.json`` records under ``settings`` as the
reader resolved it (:attr:`sqa.Reader.settings`: the top-k used and every method setting read,
defaults included).

>>> s = sqa.ReaderSettings(method="sc", model="openai:qwen", served="http://127.0.0.1:8000/v1")
>>> reader = sqa.Reader(settings=s)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Union

from sqa.methods.settings import MethodSettings
from sqa.models.served_url import ServedOptions
from sqa.types import MAX_K, BadInput

if TYPE_CHECKING:
    from sqa.presets import Preset

BACKENDS = ("embedded", "elasticsearch")


@dataclass(frozen=True)
class ReaderSettings:
    """Everything a reader is built from but the loaded objects (a model, an index, a method).

    - ``preset``: a preset's name (``sqa.presets``: ``facts``, ``no-retrieval``, ``steps``,
      ``oracle-facts``, ``oracle-paragraphs``) or a ``sqa.presets.Preset``; None with a
      ``method``, else ``facts``. Stored as the ``Preset``.
    - ``method``: a method instead of a preset, as ``sqa.methods.MethodSettings`` (its prompt
      variant, answer rule, k, samples, temperature, T, θ, max steps, max tokens, seed); a name
      (``"cot"``) or ``"module:Class"`` is taken as ``MethodSettings(name)``.
    - ``model``: a registry name (default ``qwen2.5-coder-1.5b``), a ``.gguf`` path, a Hugging Face
      checkpoint or ``openai:NAME``; ``served``: how to reach ``openai:NAME``
      (``sqa.models.served_url.ServedOptions``; a URL or a list of URLs is taken as its
      ``base_urls``).
    - ``index``: the index folder (None: ``$SQA_HOME/index``; an ``sqa.Index`` gives its folder
      and backend); ``backend``: ``embedded`` or ``elasticsearch``.
    - ``k``: paragraphs retrieved (top-k, 1..10,000; None: 10, or the method's own).
    - ``head``: an answer head file (facts reader); ``chat_template``: a Jinja chat template file;
      ``apply_chat_template``: the facts reader reads its prompts in the model's chat template;
      ``prefill``: the steps reader continues the assistant turn (False: reads in turns).

    Raises :class:`sqa.types.BadInput` (one line naming the setting, as its CLI flag) for a value
    of the wrong type or out of range, a preset and a method together, or a setting that does not
    go with the reader it is given to (e.g. ``head`` with the steps reader)."""

    preset: Union[str, "Preset", None] = None
    method: Union[MethodSettings, str, None] = None
    model: str = ""
    index: Union[str, Path, None] = None  # or an sqa.Index (not imported here: a later stage)
    backend: str = "embedded"
    served: Union[ServedOptions, str, tuple, list, None] = None
    k: int | None = None
    head: Union[str, Path, None] = None
    chat_template: Union[str, Path, None] = None
    apply_chat_template: bool = False
    prefill: bool = True

    def __post_init__(self):
        from sqa.models.registry import DEFAULT_MODEL, is_served
        from sqa.models.served_url import served_flags
        from sqa.presets import Preset, get_preset

        from sqa.checks import int_arg, path_arg, template_goes

        def put(name, value):
            object.__setattr__(self, name, value)

        if isinstance(self.method, str):
            put("method", MethodSettings(self.method))
        if self.method is not None and not isinstance(self.method, MethodSettings):
            raise BadInput(f"method: a name, module:Class or sqa.methods.MethodSettings (got {self.method!r:.60})")
        if self.method is not None and self.preset is not None:
            raise BadInput("give a preset or a method, not both (facts and steps are methods too)")
        if self.method is not None and None not in (self.k, self.method.k) and self.k != self.method.k:
            raise BadInput(f"-k {self.k} and the method's k {self.method.k}: give the top-k once")
        if isinstance(self.preset, str):
            put("preset", get_preset(self.preset))
        elif self.preset is None and self.method is None:
            put("preset", get_preset("facts"))
        elif self.preset is not None and not isinstance(self.preset, Preset):
            raise BadInput(f"preset: a preset's name (e.g. 'facts') or a sqa.presets.Preset, not {self.preset!r:.60}")
        if not isinstance(self.model, (str, Path)):
            raise BadInput(
                f"model: a model name (str, e.g. {DEFAULT_MODEL!r}) or a model file path, not {self.model!r:.60}"
            )
        put("model", str(self.model) or DEFAULT_MODEL)
        if hasattr(self.index, "path") and hasattr(self.index, "backend"):  # an sqa.Index: its folder and engine
            put("backend", self.index.backend)
            put("index", self.index.path)
        for name in ("index", "head", "chat_template"):
            path_arg("ReaderSettings", name, getattr(self, name))
            if getattr(self, name) is not None:
                put(name, Path(getattr(self, name)).expanduser())
        if self.backend not in BACKENDS:
            raise BadInput(f"--backend {self.backend!r}: use one of {', '.join(BACKENDS)}")
        int_arg("ReaderSettings", "k", self.k, 1, MAX_K, none_ok=True)
        for name in ("apply_chat_template", "prefill"):
            if not isinstance(getattr(self, name), bool):
                raise BadInput(f"ReaderSettings: {name} must be True or False, not {getattr(self, name)!r:.60}")
        served = ServedOptions.of(self.served)
        put("served", served if served else None)
        if self.served is not None and not is_served(self.model):
            raise BadInput(
                f"{served_flags(self.served)} goes with a served model (--model openai:NAME), not {self.model!r}"
            )
        kind = self.reader
        if self.head is not None and kind != "facts":
            raise BadInput("head goes with the facts reader; the steps reader has no answer head")
        template_goes(kind, self.chat_template, self.apply_chat_template)
        if self.apply_chat_template and kind != "facts":
            raise BadInput(
                "--apply-chat-template goes with the facts reader; the steps reader's prompts are chat "
                "prompts already, rendered in the model's own chat template"
            )
        if not self.prefill and kind != "steps":
            raise BadInput(
                "--no-prefill goes with the steps reader (--preset steps): the facts reader's prompts "
                "have no assistant message to continue"
            )
        if self.apply_chat_template and self.served is not None and self.served.api == "completions":
            raise BadInput(
                "--apply-chat-template with --api completions: sqa would render ChatML there, not the "
                "model's own chat template; use --api chat (the server applies its template)"
            )

    @property
    def reader(self) -> str:
        """The reader these settings build: ``facts``, ``steps`` or ``method`` (the methods
        ``facts`` and ``steps`` are their presets' readers)."""
        if self.method is not None:
            return self.method.method if self.method.method in ("facts", "steps") else "method"
        return self.preset.reader

    def index_dir(self) -> Path:
        """The index folder: ``index``, else ``$SQA_HOME/index``."""
        from sqa.paths import default_index_dir

        return self.index if self.index is not None else default_index_dir()

    def replace(self, **changes) -> "ReaderSettings":
        """A copy with ``changes`` (validated again). Raises BadInput as the constructor does."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """JSON-ready (``run.json``'s ``settings``): paths as strings (``~/`` for the home folder),
        the preset by name (its
        fields when it has none of the shipped presets'), the method's settings as given or
        resolved (None left out), served URLs without credentials."""
        from sqa.presets import PRESETS
        from sqa.redact import redact_url

        out: dict = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "preset" and v is not None:
                v = v.name if PRESETS.get(v.name) == v else {g.name: getattr(v, g.name) for g in fields(v)}
            elif f.name == "method" and v is not None:
                v = {"method": v.method, **v.given()}
            elif f.name == "served" and v is not None:
                v = {
                    "base_urls": [redact_url(u) for u in v.base_urls],
                    "api": v.api,
                    "allow_model_alias": v.allow_model_alias,
                }
            elif isinstance(v, Path):
                v = _shown(v)
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "ReaderSettings":
        """Settings from :meth:`to_dict`'s form (a ``run.json``'s ``settings``); unknown keys are
        refused (BadInput naming the first)."""
        from sqa.presets import Preset

        known = {f.name for f in fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise BadInput(f"unknown reader setting {bad[0]!r}; known: {', '.join(sorted(known))}")
        d = dict(d)
        if isinstance(d.get("preset"), dict):
            d["preset"] = Preset(**d["preset"])
        if isinstance(d.get("method"), dict):
            d["method"] = MethodSettings.from_dict(d["method"])
        if isinstance(d.get("served"), dict):
            s = d["served"]
            d["served"] = ServedOptions(
                tuple(s.get("base_urls", ())), s.get("api", "auto"), s.get("allow_model_alias", False)
            )
        return cls(**d)

    @classmethod
    def from_options(cls, o: dict, preset: "Preset | None" = None) -> "ReaderSettings":
        """The settings of ``sqa ask`` / ``sqa eval`` options ``o`` (by name: ``model``,
        ``index_dir``, ``backend``, ``base_url``, ``api``, ``allow_model_alias``, ``k``, ``head``,
        ``chat_template``, ``apply_chat_template``, ``prefill``, and ``--method`` with ``--prompt``,
        ``--answer-rule``, ``--samples``, ``--set KEY=VALUE``), with ``preset`` (the preset the
        flags chose; None with ``--method``). Raises BadInput as the constructor does, and for a
        method setting without ``--method`` or a bad ``--set``."""
        from sqa.methods.settings import method_from_options

        method = method_from_options(o)
        return cls(
            preset=None if method is not None else preset,
            method=method,
            model=o.get("model") or "",
            index=o.get("index_dir"),
            backend=o.get("backend") or "embedded",
            served=ServedOptions(
                tuple(o.get("base_url") or ()), o.get("api") or "auto", bool(o.get("allow_model_alias"))
            ),
            k=None if method is not None else o.get("k"),
            head=o.get("head"),
            chat_template=o.get("chat_template"),
            apply_chat_template=bool(o.get("apply_chat_template")),
            prefill=o.get("prefill", True),
        )


def _shown(path: Path) -> str:
    """``path`` as text, the home folder written ``~`` (so a record names no machine's home)."""
    try:
        return str(Path("~") / path.relative_to(Path.home()))
    except ValueError:
        return str(path)
