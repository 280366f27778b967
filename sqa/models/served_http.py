"""One OpenAI-compatible server as sqa talks to it (``sqa.models.openai``): the official ``openai``
SDK's client (its timeout, and its retries with exponential backoff on 408/409/429/5xx and
connection errors) posting JSON bodies and reading JSON dicts back, and every SDK error turned into
one line that names the server (without credentials) and what failed.

Defaults (``$SQA_OPENAI_TIMEOUT`` seconds per try, ``$SQA_OPENAI_MAX_RETRIES`` extra tries): 20 s
and 1 at load, so a hung server holds ``sqa ask`` for about 41 s (two tries and the SDK's backoff),
not minutes; both are checked (a finite number, at most a day) before any client is made. After
load, unless ``$SQA_OPENAI_TIMEOUT`` is set, each try may take :func:`measured_timeout`: the load's
probes show how fast the server reads a prompt, and a CPU server reading a long facts prompt
(the 1.5B model took 35-40 s for ~470 tokens on two cores; issue 50, item 5d) is given that long.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Callable

from sqa.models.served_url import ServerURL
from sqa.redact import redact, remember_sent, scrub
from sqa.types import BadInput, ServerError, ServerLost

DEFAULT_TIMEOUT_S = 20.0
DEFAULT_MAX_RETRIES = 1
LONG_PROMPT_TOKENS = 4096  # twice the longest prompts sqa sends (a steps transcript with its demonstrations)
MAX_MEASURED_TIMEOUT_S = 900.0


def measured_timeout(seconds: float, prompt_tokens: int) -> float:
    """Seconds a try may take after load, from the slowest load-time probe (``seconds`` for
    ``prompt_tokens`` prompt tokens; its HTTP overhead counted as reading time, so the estimate errs
    long): the time to read :data:`LONG_PROMPT_TOKENS` at that pace, at least
    :data:`DEFAULT_TIMEOUT_S` and at most :data:`MAX_MEASURED_TIMEOUT_S`."""
    pace = max(seconds, 0.0) / max(int(prompt_tokens or 0), 8)
    return round(min(max(DEFAULT_TIMEOUT_S, pace * LONG_PROMPT_TOKENS), MAX_MEASURED_TIMEOUT_S), 1)


def env_number(var: str, default: float, cast: Callable = float, low: float = 0.0, high: float = 86400.0):
    """``$VAR`` as a number in [low, high] (``default`` when unset); BadInput naming the variable
    for text, NaN, inf or a value out of range."""
    raw = os.environ.get(var)
    if raw is None or not raw.strip():
        return default
    try:
        v = float(raw)
    except ValueError:
        raise BadInput(f"${var}={raw!r}: not a number; unset it or give e.g. {default:g}") from None
    if not math.isfinite(v) or not (low - 1e-12 <= v <= high) or (cast is int and v != int(v)):
        raise BadInput(
            f"${var}={raw!r}: give a{'' if cast is float else ' whole'} number from {low:g} to {high:g} "
            f"(e.g. {default:g})"
        )
    return cast(v)


def _detail(e: Exception | None) -> str:
    """A short one-line reason from an SDK error (the server's message, cut; every credential sqa
    sent removed first: ``sqa.redact.remember_sent``)."""
    if e is None:
        return "no answer"
    body = getattr(e, "body", None)
    msg = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else str(inner)
        if msg is None and "detail" in body:
            msg = str(body["detail"])
    msg = redact(" ".join(str(msg or getattr(e, "message", "") or e).split()))
    return msg[:160] + ("…" if len(msg) > 160 else "")


def is_chat_only(e: Exception) -> bool:
    """Whether an error from ``/v1/completions`` says that the model speaks chat only (OpenAI's
    "This is a chat model and not supported in the v1/completions endpoint", a 404/405 for the path)."""
    status = getattr(e, "status_code", None)
    text = _detail(e).lower()
    return status in (404, 405) or (status == 400 and ("chat" in text or "not supported" in text))


class Server:
    """One base URL: ``post(path, body) -> (dict, seconds)`` and ``models() -> list[dict]``.

    ``served``: the model name (for messages); ``key``/``key_var``: the API key and the variable it
    came from (None: none set, a placeholder is sent and a 401 says so). Credentials of the URL
    go as HTTP basic auth (``httpx``'s ``auth``), never in the URL the client is given. Both are
    remembered (``sqa.redact.remember_sent``): every message and every answer (before it is
    cached or read) has them removed in any encoding a server may echo (issue 50, item 0)."""

    def __init__(
        self, u: ServerURL, served: str, key: str | None, key_var: str | None, timeout: float, max_retries: int
    ):
        import openai

        self._openai = openai
        self.u, self.url, self.shown = u, u.url, u.shown
        self.served, self.key_var = served, key_var
        self.timeout, self.max_retries = timeout, max_retries
        self.concurrency = 1
        self.timeout_how = "$SQA_OPENAI_TIMEOUT"  # where the timeout came from, for messages
        self.alive = True
        self.lock = threading.Lock()
        remember_sent(u.user, u.password, key)
        kw = {}
        if u.user is not None:
            kw["http_client"] = openai.DefaultHttpxClient(auth=(u.user, u.password or ""))
        self.client = openai.OpenAI(
            api_key=key or "sqa-no-key", base_url=u.url, timeout=timeout, max_retries=max_retries, **kw
        )

    def set_timeout(self, seconds: float) -> None:
        """Let each try take ``seconds`` from now on (a timeout measured at load)."""
        self.timeout, self.timeout_how = float(seconds), "measured at load"
        self.client = self.client.with_options(timeout=self.timeout)

    def error(self, e: Exception, at_load: bool) -> Exception:
        """One line for an SDK error (never the key: messages name the URL without credentials)."""
        o = self._openai
        again = (
            "start it (or check --base-url / $OPENAI_BASE_URL) and run the same command again"
            if at_load
            else "the same command resumes (answers already received are in the response cache)"
        )
        tries = f"{self.max_retries + 1} tr{'y' if self.max_retries == 0 else 'ies'}"
        lost = ServerError if at_load else ServerLost
        if isinstance(e, o.APITimeoutError):
            return lost(
                f"the server at {self.shown} did not answer within {self.timeout:g} s ({tries}; {self.timeout_how}); a slow "
                f"server (a CPU one on a long prompt) needs longer: set $SQA_OPENAI_TIMEOUT to more seconds, "
                f"e.g. {max(600, 4 * self.timeout):g}; {again}"
            )
        if isinstance(e, o.APIConnectionError):
            cause = type(e.__cause__).__name__ if e.__cause__ else "connection error"
            if "RemoteProtocol" in cause or "Incomplete" in cause or "Decoding" in cause:
                return lost(
                    f"the server at {self.shown} closed the connection before its answer was complete "
                    f"({tries}: {cause}); check the server's log; {again}"
                )
            return lost(f"no OpenAI-compatible server answers at {self.shown} ({tries}: {cause}); {again}")
        if isinstance(e, o.AuthenticationError):
            if self.key_var is None:
                return ServerError(
                    f"the server at {self.shown} wants an API key (401) and none is set; set "
                    "$SQA_OPENAI_API_KEY (or $OPENAI_API_KEY) to the key it expects"
                )
            return ServerError(
                f"the server at {self.shown} refused the key in ${self.key_var} (401: {_detail(e)}); "
                "set the key it expects"
            )
        if isinstance(e, o.NotFoundError):
            where = "" if self.u.has_v1 else f"; the base URL does not end in /v1 — try {self.url}/v1"
            return ServerError(
                f"the server at {self.shown} answered 404 ({_detail(e)}) for model {self.served!r}"
                f"{where or '; check --base-url (it usually ends in /v1)'}"
            )
        if isinstance(e, o.APIStatusError):
            code = e.status_code
            # the SDK retries only these (408, 409, 429, 5xx): any other status came from one try
            after = f" after {tries}" if code in (408, 409, 429) or code >= 500 else ""
            if (code >= 500 or code == 429) and not at_load:
                return ServerLost(f"the server at {self.shown} answered HTTP {code} ({_detail(e)}){after}; {again}")
            if code == 403:
                return ServerError(
                    f"the server at {self.shown} answered HTTP 403 Forbidden ({_detail(e)}): it refuses this "
                    f"request; check that the key (or the base URL's user) may use {self.served!r} there"
                )
            tail = again if code >= 500 else "check the server's log"
            return ServerError(f"the server at {self.shown} answered HTTP {code} ({_detail(e)}){after}; {tail}")
        if isinstance(e, o.OpenAIError):
            return ServerError(f"the server at {self.shown}: {type(e).__name__} ({_detail(e)}); check the server")
        if isinstance(e, ValueError):  # a body that is not JSON (json.JSONDecodeError)
            return ServerError(
                f"the server at {self.shown} answered with a body that is not JSON ({type(e).__name__}: "
                f"{redact(str(e))[:80]}); check that --base-url points at an OpenAI-compatible API"
            )
        return e

    def _json(self, fn: Callable, path: str, at_load: bool):
        try:
            data = scrub(fn())
        except (self._openai.OpenAIError, ValueError) as e:
            err = self.error(e, at_load)
            err.status_code = getattr(e, "status_code", None)  # the HTTP status, for callers that read it
            raise err from None
        if not isinstance(data, dict):
            raise ServerError(
                f"the server at {self.shown} answered {path} with a body that is not a JSON object "
                f"({type(data).__name__}: {str(data)[:60]!r}); check that --base-url points at an "
                "OpenAI-compatible API"
            )
        return data

    def models(self) -> list[dict]:
        """The ``data`` entries of ``GET /models`` (ServerError/BadInput in one line)."""
        data = self._json(lambda: self.client.get("/models", cast_to=object), "/models", at_load=True)
        entries = data.get("data")
        return [m for m in entries if isinstance(m, dict)] if isinstance(entries, list) else []

    def props(self) -> dict | None:
        """``GET /props`` at the server's root (beside ``/v1``: llama.cpp's ``llama-server`` says
        there which chat template, ``bos_token`` and ``eos_token`` its model has), one try of at most
        5 s; None where the server answers anything else (most servers: 404)."""
        root = self.url[: -len("/v1")] if self.u.has_v1 else self.url
        try:
            data = self.client.get(root + "/props", cast_to=object, options={"timeout": 5.0, "max_retries": 0})
        except (self._openai.OpenAIError, ValueError):
            return None
        data = scrub(data)
        return data if isinstance(data, dict) else None

    def post(self, path: str, body: dict, at_load: bool = False, raw_errors: bool = False) -> tuple[dict, float]:
        """``POST path`` with ``body``: ``(JSON dict, seconds)``. ``raw_errors``: let the SDK's
        status errors through (load-time probes read them)."""
        t = time.perf_counter()
        if raw_errors:
            try:
                data = scrub(self.client.post(path, cast_to=object, body=body))
            except self._openai.APIStatusError:
                raise
            except (self._openai.OpenAIError, ValueError) as e:
                raise self.error(e, at_load) from None
            if not isinstance(data, dict):
                raise ServerError(
                    f"the server at {self.shown} answered {path} with a body that is not a JSON "
                    f"object ({type(data).__name__}); check that --base-url points at an "
                    "OpenAI-compatible API"
                )
        else:
            data = self._json(lambda: self.client.post(path, cast_to=object, body=body), path, at_load)
        return data, time.perf_counter() - t

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 (closing a client that may be half-made)
            pass
