"""The shipped methods by name, loading a method of your own (``module:Class``), and checking
that a model and an index give what a method needs.

Add a method: its own module under ``sqa/methods/`` (a :class:`sqa.methods.base.Method` subclass
whose ``name`` is the method's name) and one line in :data:`MethodName`. A name's class is found
by that ``name`` among the package's modules, imported on the first lookup (:func:`find_methods`);
importing this module imports none of them.
"""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path
from typing import Literal, get_args

from sqa.types import BadInput

# the registry: the shipped methods' names, one a line, also what an editor completes in
# sqa.Reader(method=...); each name's class is the Method subclass of that `name` in sqa/methods/
MethodName = Literal[
    "direct",
    "cot",
    "sc",
    "self-ask",
    "rag",
    "iter-retgen",
    "ircot",
    "flare",
    "dragin",
    "bigbench",
    "facts",
    "steps",
]
METHODS: tuple[str, ...] = get_args(MethodName)  # the shipped names, in MethodName's order


def method_names() -> list[str]:
    """The shipped methods' names, in :data:`MethodName` order."""
    return list(METHODS)


def _spec(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def find_methods(package: str, names) -> dict[str, type]:
    """``{name: class}`` for each of ``names`` (strs): the Method subclass whose ``name`` it is,
    found by importing every public module of ``package`` (a dotted package name; modules whose
    name starts with ``_`` and subpackages are skipped; a module with no Method subclass, such as
    ``base`` or ``toolbox``, gives none). A class counts in the module that defines it (not where
    it is imported) and only when its ``name`` is one of ``names``. Raises RuntimeError when two
    classes have one name or a name has no class: a fault of the package, not of the input."""
    import pkgutil

    from sqa.methods.base import Method

    found: dict[str, type] = {}
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for cls in vars(module).values():
            if not (isinstance(cls, type) and issubclass(cls, Method) and cls.__module__ == module.__name__):
                continue
            if cls.name and cls.name in names:
                if found.get(cls.name, cls) is not cls:
                    raise RuntimeError(
                        f"{package}: two methods are named {cls.name!r}: {_spec(found[cls.name])} and "
                        f"{_spec(cls)}; a name is one class"
                    )
                found[cls.name] = cls
    missing = [n for n in names if n not in found]
    if missing:
        raise RuntimeError(
            f"{package}: no Method subclass is named {', '.join(map(repr, missing))}; give its class "
            f"that `name` in a module of {package}, or take the name out of MethodName"
        )
    return {n: found[n] for n in names}


@functools.cache
def _shipped() -> dict[str, type]:
    """The shipped methods' classes by name (:func:`find_methods` over ``sqa.methods``, once)."""
    return find_methods("sqa.methods", METHODS)


def load_method(spec):
    """A :class:`sqa.methods.base.Method` instance for ``spec``: a shipped name (:data:`MethodName`),
    ``module:Class`` (imported with the current directory on the path, as ``python -m`` would), a
    Method subclass, or an instance (returned as it is). Raises BadInput naming what could not be
    found."""
    from sqa.methods.base import Method

    if isinstance(spec, Method):
        return spec
    if isinstance(spec, type) and issubclass(spec, Method):
        return spec()
    if not isinstance(spec, str) or not spec.strip():
        raise BadInput(f"method: a name ({', '.join(METHODS)}), module:Class, or a sqa Method (got {spec!r})")
    if spec in METHODS:
        return _shipped()[spec]()
    if ":" not in spec:
        raise BadInput(f"unknown method {spec!r}; use one of {', '.join(METHODS)}, or module:Class for your own")
    module, _, cls_name = spec.partition(":")
    cwd = str(Path.cwd())
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise BadInput(f"method {spec!r}: cannot import module {module!r} ({e})") from None
    finally:
        if added:
            sys.path.remove(cwd)
    cls = getattr(mod, cls_name, None)  # a user's module: its attribute is what we check
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise BadInput(f"method {spec!r}: {module}.{cls_name} is not a subclass of sqa.methods.Method")
    method = cls()
    if not method.name:
        raise BadInput(f"method {spec!r}: {cls_name} has no `name`")
    return method


def method_spec(method) -> str:
    """How a run records its method: the shipped name when ``method`` is that name's shipped class,
    else ``module:Class``."""
    target = _spec(type(method))
    return method.name if method.name in METHODS and _spec(_shipped()[method.name]) == target else target


def check_needs(method, model=None, has_index: bool | None = None) -> None:
    """Raise BadInput (one line) when ``model`` (a loaded ``LanguageModel``) or the run's index
    (``has_index``) lacks what ``method`` needs: sampling, per-token logprobs of generated text,
    attention weights, next-token yes/no read-outs or a search index. A served model that declares
    sampling is asked one sampled token here (``check_sampling``): its server may refuse it."""
    from sqa.methods.base import NEEDS

    for need in method.needs:
        if need not in NEEDS:
            raise BadInput(f"method {method.name}: unknown need {need!r}; use {', '.join(NEEDS)}")
    if has_index is False and "search" in method.needs:
        raise BadInput(f"--method {method.name} searches an index; give --index-dir (or build one: sqa index)")
    if model is None:
        return
    caps = model.capabilities
    what = {
        "sampling": (caps.sampling, "sampling (temperature and seed)"),
        "token_logprobs": (caps.token_logprobs, "the log-probability of every generated token"),
        "attention": (caps.attention, "attention weights"),
    }
    for need in method.needs:
        if need in what and not what[need][0]:
            raise BadInput(
                f"--method {method.name} needs {what[need][1]}, which {model.name} does not give "
                f"({caps.endpoint}{', ' + caps.readout if caps.endpoint != 'in-process' else ''}); "
                "use a reader that does (see docs/methods.md)"
            )
    if "sampling" in method.needs and hasattr(model, "check_sampling"):  # a server may refuse it
        model.check_sampling(f"--method {method.name}")


def method_preset(method):
    """The ``sqa.presets.Preset`` a method runs as: ``facts`` and ``steps`` their own presets
    (unchanged); any other method an unnamed preset of reader ``method`` that retrieves when the
    method searches, recorded by :func:`method_spec`."""
    from sqa.presets import Preset, get_preset

    if method.preset:
        return get_preset(method.preset)
    return Preset(method.name, "method", retrieval=method.retrieves, summary=method.source, method=method_spec(method))


def reader_method(method, settings, k: int | None):
    """What ``sqa.Reader(method=..., settings=..., k=...)`` runs: ``(preset, k, method, settings,
    resolved)``,
    the preset of :func:`method_preset`, the top-k (the method's resolved ``k`` where it reads one),
    the loaded method, its ``sqa.methods.MethodSettings`` (``k`` put in where given and read) and
    their resolved values; for ``facts`` and ``steps`` method and settings are None and resolved {} (their presets' readers, which take
    only ``k``). ``method``: as :func:`load_method` takes it, or None to take ``settings.method``.
    Raises BadInput for settings that are no MethodSettings, are another method's, or that the
    method does not read."""
    from dataclasses import replace

    from sqa.methods.settings import MethodSettings

    if settings is not None and not isinstance(settings, MethodSettings):
        raise BadInput(f"settings: a sqa.methods.MethodSettings (got {type(settings).__name__})")
    m = load_method(method if method is not None else settings.method)
    spec = method_spec(m)
    if settings is not None and settings.method not in (spec, m.name) and method is not None:
        raise BadInput(f"settings are for method {settings.method!r}, not {m.name!r}")
    settings = settings or MethodSettings(spec)
    if m.preset:  # facts / steps: their presets, with the readers' own options (top-k)
        if set(settings.given()) - {"k"}:
            raise BadInput(f"--method {m.name} is the {m.preset} preset's reader: it takes no method settings")
        return method_preset(m), settings.k if settings.k is not None else k, None, None, {}
    if k is not None and settings.k is None and "k" in m.defaults:
        settings = replace(settings, k=k)
    resolved = settings.resolve(m)
    return method_preset(m), resolved.get("k", k), m, settings, resolved
