"""``MethodSettings``: the one typed settings object of a method run, validated once, recorded in
``run.json`` as it was resolved (every value the method read, defaults included).

A setting a method does not read is refused (one line naming the setting and the methods that
read it), so ``--samples 9`` with ``--method cot`` never passes silently.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from sqa.types import MAX_K, BadInput

# the answer rules (sqa.methods.rules), by name
ANSWER_RULES = ("answer-is", "answer-is-else-no", "forced")

# setting name -> the CLI flag that gives it (for messages)
FLAGS = {
    "prompt": "--prompt",
    "answer_rule": "--answer-rule",
    "k": "-k",
    "samples": "--samples",
    "temperature": "--temperature",
    "iterations": "--iterations",
    "theta": "--theta",
    "max_steps": "--max-steps",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
}


@dataclass(frozen=True)
class MethodSettings:
    """The settings of one method run. None means "the method's default" (its paper's value, see
    each method's ``defaults``); :meth:`resolve` gives every value the method reads.

    - ``method``: a shipped name (``sqa.methods.registry.MethodName``) or ``module:Class``.
    - ``prompt``: the prompt variant (e.g. ``wei`` or ``dragin`` for ``cot``).
    - ``answer_rule``: ``answer-is`` | ``answer-is-else-no`` | ``forced`` (``sqa.methods.rules``).
    - ``k``: paragraphs per retrieval (top-k, 1..10,000); ``samples``: sampled paths (self-consistency);
      ``temperature``: sampling temperature (>= 0); ``iterations``: T, retrieval-generation rounds;
      ``theta``: a threshold above 0 (FLARE's is a probability, below 1: its method's ``bounds``
      say so; DRAGIN's bounds an attention-weighted entropy); ``max_steps``: the most follow-up
      questions or reasoning sentences; ``max_tokens``: the most tokens one generation writes;
      ``seed``: the sampling seed.

    Raises :class:`sqa.types.BadInput` (one line naming the setting) for a value out of range."""

    method: str
    prompt: str | None = None
    answer_rule: str | None = None
    k: int | None = None
    samples: int | None = None
    temperature: float | None = None
    iterations: int | None = None
    theta: float | None = None
    max_steps: int | None = None
    max_tokens: int | None = None
    seed: int | None = None

    def __post_init__(self):
        if not isinstance(self.method, str) or not self.method.strip():
            raise BadInput("method: a method name (e.g. cot) or module:Class")
        checks = {
            "k": (int, lambda v: 1 <= v <= MAX_K, f"from 1 to {MAX_K:,}"),
            "samples": (int, lambda v: 1 <= v <= 64, "from 1 to 64"),
            "iterations": (int, lambda v: 1 <= v <= 20, "from 1 to 20"),
            "max_steps": (int, lambda v: 1 <= v <= 50, "from 1 to 50"),
            "max_tokens": (int, lambda v: 1 <= v <= 4096, "from 1 to 4,096"),
            "seed": (int, lambda v: 0 <= v < 2**31, "from 0 to 2**31-1"),
            "temperature": (float, lambda v: 0.0 <= v <= 5.0, "from 0 to 5"),
            "theta": (float, lambda v: 0.0 < v <= 100.0, "above 0 and at most 100"),
        }
        for name, (kind, ok, what) in checks.items():
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
                raise BadInput(f"{FLAGS[name]} must be {'a whole number' if kind is int else 'a number'} (got {v!r})")
            if (isinstance(v, float) and not math.isfinite(v)) or not ok(v):
                raise BadInput(f"{FLAGS[name]} must be {what} (got {v!r})")
        if self.answer_rule is not None and self.answer_rule not in ANSWER_RULES:
            raise BadInput(f"--answer-rule {self.answer_rule!r}: use one of {', '.join(ANSWER_RULES)}")
        if self.prompt is not None and (not isinstance(self.prompt, str) or not self.prompt):
            raise BadInput(f"--prompt must be a prompt variant's name (got {self.prompt!r})")

    def given(self) -> dict:
        """The settings given (not None), without ``method``."""
        return {k: v for k, v in asdict(self).items() if v is not None and k != "method"}

    def resolve(self, method) -> dict:
        """Every setting ``method`` (a :class:`sqa.methods.base.Method`) reads: its ``defaults``
        overridden by what was given, plus ``method`` (its name). Raises BadInput for a given
        setting the method does not read, or a prompt variant it does not have."""
        given = self.given()
        unread = [k for k in given if k not in method.defaults]
        if unread:
            flag = FLAGS[unread[0]]
            raise BadInput(
                f"{flag} does not apply to --method {method.name} (it reads "
                f"{', '.join(FLAGS[k] for k in method.defaults) or 'no settings'})"
            )
        out = {**method.defaults, **given}
        variants = method.prompts
        if "prompt" in out and variants and out["prompt"] not in variants:
            raise BadInput(f"--prompt {out['prompt']!r}: --method {method.name} has {', '.join(variants)}")
        for name in ("temperature", "theta"):
            if name in out and out[name] is not None:
                out[name] = float(out[name])
        for name, (low, high) in getattr(method, "bounds", {}).items():
            v = out.get(name)
            if v is not None and not low < v < high:
                raise BadInput(
                    f"{FLAGS[name]} must be between {low:g} and {high:g} (exclusive) for --method {method.name} (got {v!r})"
                )
        return {"method": method.name, **out}

    @classmethod
    def from_dict(cls, d: dict) -> "MethodSettings":
        """Settings from a dict (``run.json``'s ``method_settings``); unknown keys are refused."""
        known = {f.name for f in fields(cls)}
        bad = sorted(set(d) - known)
        if bad:
            raise BadInput(f"unknown method setting {bad[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**d)


def method_from_options(o: dict) -> "MethodSettings | None":
    """The method settings of the options ``o`` (``--method``, ``--prompt``, ``--answer-rule``,
    ``--samples``, ``--set KEY=VALUE``, ``-k``; ``sqa.settings.ReaderSettings.from_options``);
    None without ``--method``. Raises BadInput for a method setting without ``--method``, a preset
    option with it, or a bad ``--set``."""
    given = {"prompt": o.get("prompt"), "answer_rule": o.get("answer_rule"), "samples": o.get("samples")}
    for item in o.get("set") or ():
        key, eq, value = item.partition("=")
        key = {"T": "iterations", "θ": "theta"}.get(key.strip(), key.strip().replace("-", "_"))
        if not eq or key not in FLAGS or key in given:
            raise BadInput(
                f"--set {item!r}: use KEY=VALUE with KEY one of temperature, iterations, theta, max_steps, max_tokens, seed"
            )
        try:
            given[key] = float(value) if key in ("temperature", "theta") else int(value)
        except ValueError:
            raise BadInput(f"--set {item!r}: {value!r} is not a number") from None
    given = {k: v for k, v in given.items() if v is not None}
    if not o.get("method"):
        if given:
            raise BadInput(f"{FLAGS[next(iter(given))]} goes with --method")
        return None
    for key in ("preset", "reader", "oracle", "head", "decomposition", "steps", "no_retrieval", "retrieval"):
        if o.get(key) not in (None, False):
            flag = "--" + key.replace("_", "-") if key != "retrieval" else "--retrieval/--no-retrieval"
            raise BadInput(f"{flag} goes with a preset, not --method (facts and steps are methods too)")
    if o.get("k") is not None:
        given["k"] = o["k"]
    return MethodSettings(o["method"], **given)
