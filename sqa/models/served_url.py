"""What a served model (``--model openai:NAME``) is reached with: the server URLs, the endpoint
choice and the key, parsed and checked by sqa before any HTTP client sees them.

- :class:`ServedOptions`: ``--base-url`` (repeatable), ``--api chat|completions|auto``,
  ``--allow-model-alias``; what the CLI hands to ``sqa.models.registry.load_model``.
- :func:`parse_base_url`: one URL -> :class:`ServerURL` (credentials split off for HTTP basic
  auth, the host and a numeric port checked). A URL that does not parse is one line naming it
  *without* its credentials (``sqa.redact.redact_url``): a password holding ``/ # ? @ :`` is split
  off first (``sqa.redact.split_credentials`` reads up to the last ``@`` before a host), so no
  client ever parses it, and no traceback can show it (issue 41, item 2).
- :func:`api_key`: ``$SQA_OPENAI_API_KEY``, else ``$OPENAI_API_KEY`` (None: a local server needs
  none), and which variable it came from (named in a 401's message, never the value).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence
from urllib.parse import urlsplit

from sqa.redact import redact_url, split_credentials
from sqa.types import BadInput

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
APIS = ("auto", "chat", "completions")


@dataclass(frozen=True)
class ServedOptions:
    """How to reach a served model. ``base_urls``: one or more servers (empty: ``$OPENAI_BASE_URL``,
    else :data:`DEFAULT_BASE_URL`); requests are spread over them. ``api``: ``"auto"`` (probe the
    server at load), ``"chat"`` (``/v1/chat/completions``) or ``"completions"`` (``/v1/completions``).
    ``allow_model_alias``: accept responses whose ``model`` field names another model than asked for."""

    base_urls: tuple[str, ...] = ()
    api: str = "auto"
    allow_model_alias: bool = False

    def __post_init__(self):
        if self.api not in APIS:
            raise BadInput(f"--api {self.api!r}: use one of {', '.join(APIS)}")

    def __repr__(self) -> str:  # the URLs without their user:password@ (tracebacks, --showlocals)
        urls = tuple(redact_url(u) for u in self.base_urls)
        return f"ServedOptions(base_urls={urls!r}, api={self.api!r}, allow_model_alias={self.allow_model_alias!r})"

    __str__ = __repr__

    def __bool__(self) -> bool:  # "was anything served asked for" (load_model refuses it for a local model)
        return bool(self.base_urls) or self.api != "auto" or self.allow_model_alias

    @classmethod
    def of(cls, value) -> "ServedOptions":
        """``value`` (None, a URL string, a sequence of URL strings or a ServedOptions) as ServedOptions."""
        if value is None:
            return cls()
        if isinstance(value, ServedOptions):
            return value
        if isinstance(value, str):
            return cls(base_urls=(value,))
        return cls(base_urls=tuple(str(v) for v in value))


@dataclass(frozen=True)
class ServerURL:
    """A parsed base URL: ``url`` (no credentials: what the client is given), ``shown`` (the same,
    for messages and ``run.json``), ``user``/``password`` (percent-decoded; sent as HTTP basic auth)
    and ``has_v1`` (the path ends in ``/v1``, as OpenAI-compatible servers expect). Its ``repr``
    and ``str`` show ``password`` as ``'***'`` (tracebacks, pytest ``--showlocals``, Sentry)."""

    url: str
    shown: str
    user: str | None
    password: str | None = field(repr=False)
    has_v1: bool

    def __repr__(self) -> str:
        pw = None if self.password is None else "***"
        return (
            f"ServerURL(url={self.url!r}, shown={self.shown!r}, user={self.user!r}, password={pw!r}, "
            f"has_v1={self.has_v1!r})"
        )

    __str__ = __repr__


def parse_base_url(raw: str, flag: str = "--base-url") -> ServerURL:
    """Parse and check one base URL (see the module doc). Raises :class:`BadInput` (its message
    holds the URL without credentials) for a URL that is not ``http(s)://host[:port][/path]`` or
    whose port is not a number in 1..65535."""
    raw = str(raw).strip()
    clean, user, password = split_credentials(raw)
    shown = redact_url(raw)
    if not clean.lower().startswith(("http://", "https://")):
        raise BadInput(f"{flag} {shown!r}: not an http(s) URL; give e.g. {DEFAULT_BASE_URL}")
    try:
        parts = urlsplit(clean)
        port = parts.port  # raises ValueError for a port that is not a number or out of range
    except ValueError:
        raise BadInput(
            f"{flag} {shown!r}: the port is not a number in 1..65535; give e.g. {DEFAULT_BASE_URL}"
        ) from None
    if not parts.hostname or "@" in parts.netloc:
        raise BadInput(f"{flag} {shown!r}: no host name; give e.g. {DEFAULT_BASE_URL}")
    if port == 0:
        raise BadInput(f"{flag} {shown!r}: the port is not a number in 1..65535; give e.g. {DEFAULT_BASE_URL}")
    if parts.query or parts.fragment:
        raise BadInput(
            f"{flag} {redact_url(clean.split('?')[0].split('#')[0])!r}: a base URL takes no '?' or "
            "'#' part (a password holding them belongs before the '@')"
        )
    url = clean.rstrip("/")
    return ServerURL(
        url=url,
        shown=redact_url(url),
        user=user,
        password=password,
        has_v1=urlsplit(url).path.rstrip("/").endswith("/v1"),
    )


def base_urls(options: ServedOptions) -> list[ServerURL]:
    """The servers of ``options`` parsed (``$OPENAI_BASE_URL`` or the default when none is given);
    duplicates removed. Raises BadInput (see :func:`parse_base_url`)."""
    given: Sequence[str] = options.base_urls or (os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,)
    flag = (
        "--base-url"
        if options.base_urls
        else ("$OPENAI_BASE_URL" if os.environ.get("OPENAI_BASE_URL") else "the default base URL")
    )
    out: list[ServerURL] = []
    for raw in given:
        u = parse_base_url(raw, flag)
        if u.url not in [o.url for o in out]:
            out.append(u)
    return out


def api_key() -> tuple[str | None, str | None]:
    """``(key, variable)``: ``$SQA_OPENAI_API_KEY`` first, then ``$OPENAI_API_KEY``; ``(None, None)``
    when neither is set (a local server needs no key)."""
    for var in ("SQA_OPENAI_API_KEY", "OPENAI_API_KEY"):
        v = (os.environ.get(var) or "").strip()
        if v:
            return v, var
    return None, None


def served_flags(base_url) -> str:
    """The served-model flags that ``base_url`` (a URL, URLs or :class:`ServedOptions`) stands for,
    for a message refusing them with a local model (e.g. ``--api``)."""
    if not isinstance(base_url, ServedOptions):
        return "--base-url"
    flags = [
        f
        for f, on in (
            ("--base-url", base_url.base_urls),
            ("--api", base_url.api != "auto"),
            ("--allow-model-alias", base_url.allow_model_alias),
        )
        if on
    ]
    return "/".join(flags) or "--base-url"
