"""Credentials out of everything shown or written: the one redaction for URLs and messages.

- ``redact_url(url)``: a URL without its ``user:password@`` part (messages, manifests,
  ``run.json``), with or without a scheme.
- ``redact(text)``: a whole message with every URL-like word passed through ``redact_url`` and the
  values of the variables in ``SECRET_ENV`` and the password in ``SQA_ES_URL`` (as typed,
  percent-decoded and percent-encoded) replaced by ``***``. The CLI's error boundary
  (``sqa.cli.errors``) and its warnings use it for every line they print.
- ``split_credentials(url)``: ``(url without credentials, user, password)``, percent-decoded, for
  the code that must send them (the corpus download, the Elasticsearch client).

Where the credentials end: operators paste passwords unencoded, so a ``/``, ``#``, ``?``, ``:`` or
``@`` in a password is common and RFC 3986's "the authority ends at the first ``/``" would cut the
password in two and show its second half. Here the credentials run up to the *last* ``@`` that is
followed by a host name (``[A-Za-z0-9._~%-]+`` or ``[IPv6]``, then ``:port``, a path or the end).
The cost of that choice: a URL with no credentials but an ``@`` in its path (``http://h/a@b``)
is shown as ``http://b`` — more hidden than needed, never less.

With no ``@`` at all, ``user:password`` without a host (``SQA_ES_URL='elastic:PW'``) looks like
``host:port``; a "port" that is not a number is therefore shown as ``***`` with everything after
it (``elastic:***``): a mistyped port costs a less specific message, a password is never shown.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, unquote

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# a host (name, IPv4 or [IPv6]) then an optional port, then the end of the authority
_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%-]+)(?::[^/?#\s]*)?(?=$|[/?#\s'\"<>),;])")
_PORT_TRAIL = ".,;:)]}"
# environment variables whose values are secrets wherever they appear (the Elasticsearch
# credentials, and the tokens a server reader or the Hugging Face hub client may be given)
SECRET_ENV = (
    "SQA_ES_PASSWORD",
    "SQA_ES_API_KEY",
    "OPENAI_API_KEY",
    "SQA_OPENAI_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)


def _parts(url: str) -> tuple[str, str | None, str]:
    """``(scheme prefix incl. '://' or '', userinfo or None, the rest: host[:port][path...])``."""
    m = _SCHEME.match(url)
    prefix = m.group(0) if m else ""
    rest = url[len(prefix) :]
    for i in range(len(rest) - 1, -1, -1):
        if rest[i] == "@" and _HOST.match(rest, i + 1):
            return prefix, rest[:i], rest[i + 1 :]
    return prefix, None, rest


def _mask_bad_port(rest: str) -> str:
    """``host:port...`` as is when the port is a number (or absent), else ``host:***`` (what looks
    like a port may be a password typed without a host)."""
    if rest.startswith("["):
        end = rest.find("]")
        head, tail = (rest[: end + 1], rest[end + 1 :]) if end >= 0 else (rest, "")
        if not tail.startswith(":"):
            return rest
        port = re.split(r"[/?#]", tail[1:], maxsplit=1)[0]
        return rest if port.rstrip(_PORT_TRAIL).isdigit() or not port else head + ":***"
    host, colon, after = rest.partition(":")
    if not colon or re.search(r"[/?#]", host):
        return rest
    port = re.split(r"[/?#]", after, maxsplit=1)[0]
    if not port or port.rstrip(_PORT_TRAIL).isdigit() or port.startswith("***"):
        return rest  # a number, or masked already
    return host + ":***"


def redact_url(url: str) -> str:
    """``url`` without any ``user:password@`` part (see the module doc for where it ends), with or
    without a scheme (``elastic:PW@host:9200`` too); a ``host:port`` whose port is not a number and
    that had no credentials becomes ``host:***``. Never raises."""
    url = str(url)
    prefix, userinfo, rest = _parts(url)
    if userinfo is not None:
        return prefix + rest
    return prefix + _mask_bad_port(rest)


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``(url without credentials, user, password)``, user and password percent-decoded (None when
    absent; password None for ``user@host``). The same boundary as ``redact_url``, so a password
    with ``/ # ? @ :`` in it is read whole. Never raises."""
    url = str(url)
    prefix, userinfo, rest = _parts(url)
    if userinfo is None:
        return url, None, None
    user, colon, password = userinfo.partition(":")
    return prefix + rest, unquote(user), unquote(password) if colon else None


def _variants(secret: str) -> list[str]:
    out = {secret, unquote(secret), quote(secret, safe=""), quote(unquote(secret), safe="")}
    return sorted((s for s in out if len(s) >= 3), key=len, reverse=True)


def env_secrets() -> list[str]:
    """The secrets in the environment, longest first, each as typed, percent-decoded and
    percent-encoded: the variables of ``SECRET_ENV``, and the password of ``SQA_ES_URL``
    (or, for a URL with no ``@``, a "port" that is not a number: ``elastic:PW``). Values shorter
    than 3 characters are left out (replacing them would garble every message)."""
    out: list[str] = []
    for var in SECRET_ENV:
        v = os.environ.get(var)
        if v:
            out += _variants(v)
    url = os.environ.get("SQA_ES_URL") or ""
    if url:
        _, user, password = split_credentials(url)
        if password:
            out += _variants(password)
        elif user is None:
            _, _, rest = _parts(url)
            shown = _mask_bad_port(rest)
            if shown.endswith(":***"):
                hidden = rest[len(shown) - 3 :]
                out += _variants(hidden)
                out += _variants(re.split(r"[/?#]", hidden, maxsplit=1)[0])
    return sorted(set(out), key=len, reverse=True)


_WORD = re.compile(r"[^\s'\"<>]+")


def redact(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` without credentials: every word holding an ``@`` or ``://`` goes through
    ``redact_url``; the environment's secrets (``env_secrets``) and ``secrets`` become ``***``.
    Never raises."""
    text = str(text)
    for s in sorted({v for x in secrets if x for v in _variants(x)} | set(env_secrets()), key=len, reverse=True):
        text = text.replace(s, "***")

    def word(m: re.Match) -> str:
        w = m.group(0)
        if "@" not in w and "://" not in w:
            return w
        prefix, userinfo, rest = _parts(w)
        if userinfo is not None:
            return prefix + "***@" + rest
        return prefix + _mask_bad_port(rest) if prefix else w

    return _WORD.sub(word, text)
