"""Credentials out of everything shown or written: the one redaction for URLs and messages.

- ``redact_url(url)``: a URL without its ``user:password@`` part (messages, manifests,
  ``run.json``), with or without a scheme.
- ``redact(text)``: a whole message with every URL-like word passed through ``redact_url`` and the
  values of the variables in ``SECRET_ENV`` and the password in ``SQA_ES_URL`` (as typed,
  percent-decoded and percent-encoded) replaced by ``***``. The CLI's error boundary
  (``sqa.cli.errors``) and its warnings use it for every line they print.
- ``split_credentials(url)``: ``(url without credentials, user, password)``, percent-decoded, for
  the code that must send them (the corpus download, the Elasticsearch client).
- ``remember_sent(user=, password=, key=)``: credentials sqa sends to a server (a served model's
  basic auth and bearer key), remembered for this process so that ``redact`` and ``scrub`` remove
  them in every form a server may echo back: as typed, percent-decoded and -encoded, the base64 of
  ``user:password`` (HTTP Basic, RFC 7617) with and without its ``=`` padding, and the bearer key.
- ``scrub(obj, secrets)``: a JSON value (a server's answer, before it is cached or shown) with
  every string passed through ``redact``.

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

import base64
import os
import re
import threading
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


_SENT: set[str] = set()
_SENT_LOCK = threading.Lock()


def sent_forms(user: str | None = None, password: str | None = None, key: str | None = None) -> list[str]:
    """Every form in which ``user``/``password`` (HTTP Basic) and ``key`` (a bearer API key) can
    come back from a server: each as typed, percent-decoded and -encoded, and the base64 of
    ``user:password`` (RFC 7617), padded and not. Forms shorter than 3 characters are left out."""
    out: list[str] = []
    if password:
        out += _variants(password)
        pair = f"{user or ''}:{password}"
        out += _variants(pair)
        for enc in ("utf-8", "latin-1"):
            try:
                b64 = base64.b64encode(pair.encode(enc)).decode("ascii")
            except UnicodeEncodeError:
                continue
            out += [b64, b64.rstrip("="), base64.urlsafe_b64encode(pair.encode(enc)).decode("ascii").rstrip("=")]
    if key:
        out += _variants(key)
        out.append(base64.b64encode(key.encode()).decode("ascii").rstrip("="))
    return sorted({s for s in out if len(s) >= 3}, key=len, reverse=True)


def remember_sent(user: str | None = None, password: str | None = None, key: str | None = None) -> None:
    """Remember credentials sqa sends (see ``sent_forms``) for the rest of this process: ``redact``
    removes them from every message from then on."""
    with _SENT_LOCK:
        _SENT.update(sent_forms(user, password, key))


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
    with _SENT_LOCK:
        out += _SENT
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


def _replace_all(text: str, forms: list[str]) -> str:
    for s in forms:
        if s in text:
            text = text.replace(s, "***")
    return text


def _forms(secrets) -> list[str]:
    return sorted({v for x in secrets if x for v in _variants(str(x))} | set(env_secrets()), key=len, reverse=True)


def scrub(obj, secrets: tuple[str, ...] | list[str] = ()):
    """A copy of the JSON value ``obj`` (dicts, lists, strings, numbers) with every string, keys
    included, passed through ``redact_secrets(s, secrets)`` (a server's answer before it is cached
    or shown: a server may echo the credentials it was sent). Never raises."""
    forms = _forms(secrets)
    if not forms:
        return obj

    def walk(o):
        if isinstance(o, str):
            return _replace_all(o, forms)
        if isinstance(o, dict):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v) for v in o]
        return o

    return walk(obj)


def redact_secrets(text: str, secrets: tuple[str, ...] | list[str] = ()) -> str:
    """``text`` with ``secrets`` (each as typed, percent-decoded and -encoded), the environment's
    and the sent credentials (``remember_sent``) replaced by ``***``; URLs left as they are (a
    server's answer may hold URLs that are not credentials). Never raises."""
    return _replace_all(str(text), _forms(secrets))
