"""Connecting to Elasticsearch: URL checks, credentials from the environment, version check.

Split from :mod:`sqa.indexing.elastic` (the backend itself); see its module doc for the
environment variables (``SQA_ES_URL``, ``SQA_ES_API_KEY``, ``SQA_ES_USER``/``SQA_ES_PASSWORD``,
``SQA_ES_CA_CERTS``). A password never appears in a message or a file (``redact_url``).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from sqa.redact import redact_url, split_credentials  # noqa: F401  (redact_url re-exported: elastic.py)
from sqa.types import SqaError

DEFAULT_URL = "http://localhost:9200"
_HELP = "start it with `docker compose -f docker/docker-compose.yml up -d` or point SQA_ES_URL at your cluster"


def check_url(url: str, var: str = "SQA_ES_URL") -> str:
    """``url`` if it is a usable Elasticsearch URL (``http(s)://host[:port][/path]``, port 1-65535),
    else SqaError naming it without credentials and showing the fix."""
    shown = redact_url(url)
    bare, _, _ = split_credentials(url)  # a password may hold / # ? @ : (see sqa.redact)
    if "://" not in url:
        host = shown or "localhost:9200"
        raise SqaError(f"{var}={shown!r} has no scheme; write http://{host} (or https://{host} for TLS)")
    try:
        parts = urlsplit(bare)
        port = parts.port
    except ValueError:
        authority = shown.split("://", 1)[1].split("/", 1)[0]
        raise SqaError(
            f"{var}={shown!r}: the port in {authority!r} is not a number from 1 to 65535; "
            "use e.g. http://localhost:9200"
        ) from None
    if parts.scheme not in ("http", "https"):
        raise SqaError(
            f"{var}={shown!r}: the scheme must be http or https, not {parts.scheme!r}; use e.g. http://localhost:9200"
        )
    if not parts.hostname:
        raise SqaError(f"{var}={shown!r} has no host name; use e.g. http://localhost:9200")
    if port == 0:
        raise SqaError(f"{var}={shown!r}: port 0 is not a port; use e.g. http://localhost:9200")
    return url


def connect(url: str | None = None, request_timeout: float = 60.0, connections: int = 10):
    """An ``Elasticsearch`` client for ``url`` (else ``$SQA_ES_URL``, else ``http://localhost:9200``)
    with credentials from ``SQA_ES_API_KEY`` or ``SQA_ES_USER``/``SQA_ES_PASSWORD`` and the CA
    certificate from ``SQA_ES_CA_CERTS``; returns ``(client, url)``. Checks the server answers and
    that its major version matches the client's. Raises SqaError naming the URL when it is
    malformed (no scheme, a port that is not a number, see ``check_url``), unreachable, rejects the
    credentials, or runs another major version; the password never appears in a message."""
    from elastic_transport import ConnectionError as TransportConnectionError
    from elastic_transport import ConnectionTimeout, TlsError

    import elasticsearch
    from elasticsearch import ApiError, AuthenticationException, AuthorizationException, Elasticsearch

    url = check_url(url or os.environ.get("SQA_ES_URL") or DEFAULT_URL)
    shown = redact_url(url)
    bare, user, password = split_credentials(url)
    kwargs: dict = {
        "request_timeout": request_timeout,
        "connections_per_node": max(10, connections),
        "retry_on_timeout": True,
        "max_retries": 3,
    }
    if os.environ.get("SQA_ES_API_KEY"):
        kwargs["api_key"] = os.environ["SQA_ES_API_KEY"]
    elif os.environ.get("SQA_ES_PASSWORD"):
        kwargs["basic_auth"] = (os.environ.get("SQA_ES_USER") or "elastic", os.environ["SQA_ES_PASSWORD"])
    elif user is not None:  # credentials in the URL: sent as basic auth, read whole (see sqa.redact)
        kwargs["basic_auth"] = (user, password or "")
    if os.environ.get("SQA_ES_CA_CERTS"):
        kwargs["ca_certs"] = os.environ["SQA_ES_CA_CERTS"]
    try:
        es = Elasticsearch(bare, **kwargs)
    except ValueError as e:
        reason = str(e).replace(url, shown).replace(bare, shown)
        raise SqaError(
            f"SQA_ES_URL={shown!r} is not a valid Elasticsearch URL ({reason}); use e.g. http://localhost:9200"
        ) from None
    try:
        info = es.options(request_timeout=10, max_retries=0).info()
    except TlsError as e:
        raise SqaError(
            f"TLS handshake with Elasticsearch at {shown} failed ({e.message}); set SQA_ES_CA_CERTS "
            f"to the cluster's CA certificate"
        ) from None
    except (TransportConnectionError, ConnectionTimeout) as e:
        raise SqaError(f"cannot reach Elasticsearch at {shown} ({type(e).__name__}); {_HELP}") from None
    except (AuthenticationException, AuthorizationException) as e:
        raise SqaError(
            f"Elasticsearch at {shown} rejected the credentials (HTTP {e.status_code}); set SQA_ES_API_KEY "
            f"or SQA_ES_USER/SQA_ES_PASSWORD (docker/.env holds the compose password)"
        ) from None
    except ApiError as e:
        raise SqaError(
            f"Elasticsearch at {shown} answered HTTP {e.status_code} ({e.message}); check SQA_ES_URL"
        ) from None
    except elasticsearch.UnsupportedProductError:
        raise SqaError(f"the server at {shown} is not Elasticsearch; check SQA_ES_URL") from None
    server = str(info.get("version", {}).get("number", "0"))
    client_major = elasticsearch.__versionstr__.split(".")[0]
    if server.split(".")[0] != client_major:
        raise SqaError(
            f"Elasticsearch at {shown} runs {server} but the installed client is "
            f"{elasticsearch.__versionstr__}; install `elasticsearch=={server.split('.')[0]}.*` "
            f"or use the ES {client_major}.x server from docker/docker-compose.yml"
        )
    return es, url
