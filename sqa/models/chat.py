"""Rendering a :class:`sqa.types.ChatPrompt` as text for a model that is given text (llama.cpp, or
a server's ``/v1/completions``): in the model's own chat template, or ChatML.

- :class:`ChatTemplate`: a Jinja chat template (a GGUF file's ``tokenizer.chat_template``
  metadata, or a ``--chat-template FILE``) rendered as Hugging Face transformers'
  ``apply_chat_template`` renders it (and llama.cpp's server with ``--jinja``): jinja2's
  ``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``, the
  ``loopcontrols`` extension, ``raise_exception``, ``strftime_now`` and a ``tojson`` filter that
  keeps non-ASCII text, ``bos_token`` / ``eos_token`` from the model, ``add_generation_prompt=True``;
  the reply so far is appended to the opened assistant turn. Source: transformers
  ``utils/chat_template_utils.py`` (``_compile_jinja_template``). ``source`` says where it came
  from ("gguf", "file", "chatml"), as ``ModelCapabilities.chat_template`` records it.
- A template that refuses a system message (Gemma's raise "System role not supported") gets the
  system text merged into the first user turn (``system + "\\n\\n" + user``), as Gemma 3's own
  template does.
- A template renders within limits (issue 50 item 7): at most ``RENDER_SECONDS`` of running and
  ``RENDER_CHARS`` characters (``*``, ``**``, ``+``, ``%``, ``~``, calls and filters refuse to
  build more: ``_bounded_env``); one that raises (division by zero, endless recursion) or runs past
  them is one BadInput line naming its source. transformers' rendering (``sqa.models.hf``) runs
  under the same deadline (``render_deadline``).
- ChatML (no template): each turn is ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; the open
  assistant turn is ``<|im_start|>assistant\\n`` followed by the reply so far. This is what
  Qwen2.5's own template gives for a conversation that opens with a system message (every
  ChatPrompt of the steps reader does), so the packaged GGUF models render the same either way.

jinja2 is imported only when a template is rendered (the models extra installs it).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

from sqa.types import BadInput, ChatPrompt, Prompt

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
TEMPLATE_SOURCES = ("gguf", "file", "chatml")


def render_chatml(prompt: ChatPrompt) -> str:
    """The ChatML text of ``prompt`` (see the module doc)."""
    turns = "".join(f"{IM_START}{role}\n{content}{IM_END}\n" for role, content in prompt.messages)
    return f"{turns}{IM_START}assistant\n{prompt.reply}"


def as_chatml_text(prompt: Prompt) -> str:
    """Raw text stays as it is; a ChatPrompt is rendered as ChatML."""
    return prompt if isinstance(prompt, str) else render_chatml(prompt)


class ChatTemplate:
    """How a model renders ``ChatPrompt`` s: ``text`` (a Jinja chat template; None: ChatML),
    ``source`` ("gguf" | "file" | "chatml"), the model's ``bos_token`` / ``eos_token`` text, and
    ``where`` (the file or model it came from, for messages). Raises BadInput naming ``where``
    for a template that does not compile, or that fails to render a prompt."""

    def __init__(
        self,
        text: str | None = None,
        source: str = "chatml",
        *,
        bos_token: str = "",
        eos_token: str = "",
        where: str = "",
    ):
        if source not in TEMPLATE_SOURCES:
            raise ValueError(f"unknown chat template source {source!r}")
        self.text, self.source, self.where = text, source if text is not None else "chatml", where
        self.bos_token, self.eos_token = bos_token, eos_token
        self._compiled = _compile(text, where) if text is not None else None

    def render(self, prompt: Prompt) -> str:
        """Raw text as it is; a ChatPrompt in this template (the module doc), reply appended."""
        if isinstance(prompt, str):
            return prompt
        if self._compiled is None:
            return render_chatml(prompt)
        messages = [{"role": r, "content": c} for r, c in prompt.messages]
        try:
            return self._render(messages) + prompt.reply
        except BadInput:
            merged = merge_system(messages)
            if merged is None:
                raise
        return self._render(merged) + prompt.reply

    def _render(self, messages: list[dict]) -> str:
        try:
            return bounded_render(
                self._compiled,
                messages=messages,
                add_generation_prompt=True,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except Exception as e:  # the template's own fault (template_failure)
            raise BadInput(
                f"{self.where}: its chat template failed to render a prompt ({template_failure(e)}); pass a "
                "working one with --chat-template FILE"
            ) from None


# what one rendering of a chat template may take (issue 50 item 7): a template that loops without
# end, or builds text past any prompt's size, is one line naming it, not a run without end
RENDER_SECONDS = 10.0
RENDER_CHARS = 1_000_000


class RenderLimit(Exception):
    """A chat template ran past ``RENDER_SECONDS`` or built more than ``RENDER_CHARS`` characters."""


@contextmanager
def render_deadline():
    """Within this block, jinja2 template code (any environment's: transformers' too) that runs
    past ``RENDER_SECONDS`` raises RenderLimit, checked at every line of the template's code (a
    trace function on code named ``<template>``), so a loop that yields nothing is stopped too."""
    import sys
    import time

    deadline, limit = time.monotonic() + RENDER_SECONDS, RENDER_SECONDS

    def local(frame, event, arg):
        if time.monotonic() > deadline:
            raise RenderLimit(f"it ran past {limit:g} s; a chat template renders in milliseconds")
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename == "<template>" else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)


def bounded_render(template, **context) -> str:
    """``template`` (a compiled jinja2 Template) rendered with ``context`` within the limits above
    (``render_deadline``; its text at most ``RENDER_CHARS`` characters). Raises RenderLimit past
    either; anything the template raises propagates."""
    out, n = [], 0
    with render_deadline():
        for chunk in template.generate(**context):
            n += len(chunk)
            if n > RENDER_CHARS:
                raise RenderLimit(f"it renders more than the {RENDER_CHARS:,} characters a prompt may have")
            out.append(chunk)
    return "".join(out)


def template_failure(e: BaseException) -> str:
    """What a chat template's exception says, for the one line naming the template (RecursionError,
    MemoryError and the template's own errors, ZeroDivisionError, TypeError ...)."""
    from jinja2.exceptions import TemplateError

    if isinstance(e, (TemplateError, RenderLimit)):
        return str(e)
    if isinstance(e, RecursionError):
        return "RecursionError: it calls itself without end"
    if isinstance(e, MemoryError):
        return f"MemoryError: it builds text past the {RENDER_CHARS:,} characters a prompt may have"
    return f"{type(e).__name__}: {e}"


def _too_big(op: str, left, right) -> str | None:
    """Why ``left op right`` would build past the limits (``RENDER_CHARS`` characters or items,
    a number past 65,536 bits, a ``%`` format width past ``RENDER_CHARS``), or None."""
    seq = (str, list, tuple)
    if op == "*" and isinstance(left, int) and isinstance(right, seq):
        left, right = right, left
    if op == "%" and isinstance(left, str):
        args = right if isinstance(right, tuple) else (right,)
        return _wide("%", left) or _big_ints(args)
    if op == "*" and isinstance(left, seq) and isinstance(right, int):
        size = len(left) * max(right, 0)
    elif op == "+" and isinstance(left, seq) and isinstance(right, seq):
        size = len(left) + len(right)
    elif op in ("*", "**") and isinstance(left, int) and isinstance(right, int):
        bits = left.bit_length() + right.bit_length() if op == "*" else max(left.bit_length(), 1) * max(right, 0)
        return (
            f"{op} makes a number of about {bits:,} bits, more than the 65,536 a template may build"
            if bits > 65_536
            else None
        )
    else:
        return None
    big = f"{op} makes {size:,} characters or items, more than the {RENDER_CHARS:,} a prompt may have"
    return big if size > RENDER_CHARS else None


def _wide(how: str, fmt: str) -> str | None:
    """Why format string ``fmt`` (``%`` or ``str.format``) pads past ``RENDER_CHARS``, or None."""
    import re

    if how == "%":  # %[flags][width][.precision]
        found = [n for pair in re.findall(r"%[-+ #0]*(\d*)(?:\.(\d*))?", fmt) for n in pair]
    else:  # {field:spec}: the numbers of each spec
        found = [n for spec in re.findall(r"\{[^{}]*:([^{}]*)\}", fmt) for n in re.findall(r"\d+", spec)]
    big = max((int(n) for n in found if n), default=0)
    return (
        f"a {how} format width of {big:,}, more than the {RENDER_CHARS:,} characters a prompt may have"
        if big > RENDER_CHARS
        else None
    )


def _big_ints(args) -> str | None:
    """Why arguments ``args`` (a width, a count) would build past ``RENDER_CHARS``, or None."""
    big = max((a for a in args if isinstance(a, int) and not isinstance(a, bool)), default=0)
    return (
        f"an argument of {_short(big)}, more than the {RENDER_CHARS:,} characters a prompt may have"
        if big > RENDER_CHARS
        else None
    )


def _bounded_env(base: type) -> type:
    """``base`` (a jinja2 sandboxed environment class) that refuses, before building it, text or a
    list past ``RENDER_CHARS`` or a number past 65,536 bits (RenderLimit): ``*``, ``**``, ``+``
    and ``%`` are checked (``_too_big``), as are calls (``'x'.ljust(N)``, ``'{:N}'.format``) and
    filters (``center(N)``) given a number past ``RENDER_CHARS``; ``~`` is checked by ``_join``."""
    import functools

    def guarded(f):
        skip = 2 if getattr(f, "jinja_pass_arg", None) is not None else 1  # the context, then the value

        @functools.wraps(f)
        def filter_(*args, **kwargs):
            why = _big_ints((*args[skip:], *kwargs.values()))
            if why:
                raise RenderLimit(why)
            return f(*args, **kwargs)

        return filter_

    class Bounded(base):
        intercepted_binops = frozenset(("*", "**", "+", "%"))

        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.filters = {name: guarded(f) for name, f in self.filters.items()}

        def call_binop(self, context, operator, left, right):
            why = _too_big(operator, left, right)
            if why:
                raise RenderLimit(why)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja2's signature)
            of = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)  # jinja2 wraps str.format
            why = _big_ints((*args, *kwargs.values())) or (
                _wide("str.format", of)
                if isinstance(of, str) and getattr(__obj, "__name__", "") in ("format", "format_map")
                else None
            )
            if why:
                raise RenderLimit(why)
            return super().call(__context, __obj, *args, **kwargs)

    return Bounded


def _join(seq) -> str:
    """jinja2's ``str_join`` (the ``~`` operator) that refuses text past ``RENDER_CHARS``."""
    parts = [str(x) for x in seq]
    size = sum(map(len, parts))
    if size > RENDER_CHARS:
        raise RenderLimit(f"~ makes {size:,} characters, more than the {RENDER_CHARS:,} a prompt may have")
    return "".join(parts)


def _short(v) -> str:
    t = repr(v)
    return t if len(t) <= 20 else t[:17] + "..."


def merge_system(messages: list[dict]) -> list[dict] | None:
    """``messages`` (``{"role", "content"}`` dicts) with a leading system message merged into the
    first user turn (``system + "\n\n" + user``), for a template that refuses the system role
    (Gemma-2's; Gemma 3's own template merges it the same way); None when there is no system message
    followed by a user turn to merge."""
    if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        return None
    return [{"role": "user", "content": messages[0]["content"] + "\n\n" + messages[1]["content"]}, *messages[2:]]


def _compile(text: str, where: str):
    """``text`` compiled in transformers' chat-template environment (the module doc)."""
    from datetime import datetime

    from jinja2 import ext
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = _bounded_env(ImmutableSandboxedEnvironment)(
        trim_blocks=True, lstrip_blocks=True, extensions=[ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        template = env.from_string(text)
        template.root_render_func.__globals__["str_join"] = _join  # the ``~`` of every block and macro
        return template
    except (TemplateError, RecursionError, MemoryError) as e:
        raise BadInput(
            f"{where}: not a Jinja chat template ({type(e).__name__}: {e}); pass a working one with "
            "--chat-template FILE"
        ) from None


def read_template_file(path: str | Path) -> str:
    """The Jinja text of a ``--chat-template`` FILE: the file itself, or the ``chat_template`` of a
    Hugging Face ``tokenizer_config.json`` (a string, or the entry named "default" of a list).
    Raises BadInput naming the file when it is missing, unreadable or holds no template."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: --chat-template file not found; give a Jinja chat template file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(
            f"{path}: cannot read the --chat-template file ({type(e).__name__}); give a UTF-8 Jinja chat template file"
        ) from None
    if path.suffix == ".json":
        try:
            t = json.loads(text).get("chat_template")
        except (ValueError, AttributeError):
            t = None
        if isinstance(t, list):
            t = next((x.get("template") for x in t if isinstance(x, dict) and x.get("name") == "default"), None)
        if not isinstance(t, str):
            raise BadInput(
                f"{path}: a JSON file without a chat_template string; give a Jinja chat template file "
                "or a tokenizer_config.json that has one"
            )
        text = t
    if not text.strip():
        raise BadInput(f"{path}: the --chat-template file is empty")
    return text


def gguf_chat_template(model, vocab, where: str, override: str | Path | None = None) -> ChatTemplate:
    """The chat template of a GGUF model loaded by cyllama (``model``: its ``LlamaModel``,
    ``vocab``: its vocabulary): ``override`` (a ``--chat-template`` file) if given, else the file's
    ``tokenizer.chat_template`` metadata, else ChatML. ``bos_token`` / ``eos_token`` are the
    vocabulary's special-token texts, as llama.cpp's server passes them. Raises BadInput as
    :class:`ChatTemplate` and :func:`read_template_file` do."""

    def piece(tok: int) -> str:
        return vocab.token_to_piece(tok, special=True) if tok >= 0 else ""

    tokens = {"bos_token": piece(vocab.token_bos()), "eos_token": piece(vocab.token_eos())}
    if override is not None:
        return ChatTemplate(read_template_file(override), "file", where=str(override), **tokens)
    try:
        text = model.meta_val_str("tokenizer.chat_template")
    except ValueError:  # cyllama: no such metadata key
        return ChatTemplate(where=where)
    return (
        ChatTemplate(text, "gguf", where=f"{where} (its tokenizer.chat_template)", **tokens)
        if text.strip()
        else ChatTemplate(where=where)
    )


def check_template_file(path: str | Path) -> str:
    """Read and compile a ``--chat-template`` FILE before any model loads; returns its identity
    ``"file:<name>:<12 hex of the sha256 of the template>"`` (recorded in ``run.json``). Raises
    BadInput as :func:`read_template_file` and :class:`ChatTemplate` do."""
    import hashlib

    text = read_template_file(path)
    ChatTemplate(text, "file", where=str(path))
    return f"file:{Path(path).name}:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"
