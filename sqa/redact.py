"""Credentials out of everything shown or written: URLs without their ``user:password@`` part.

The one place that redacts a URL (messages, manifests, ``run.json``); ``sqa.cli.errors.redact``
scrubs whole messages.
"""

from __future__ import annotations


def redact_url(url: str) -> str:
    """``url`` without any ``user:password@`` part (for messages and the manifest), with or
    without a scheme (``elastic:PW@host:9200`` too). Never raises."""
    url = str(url)
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        authority = authority.rsplit("@", 1)[1]
    return (f"{scheme}://" if sep else "") + authority + slash + tail
