"""``LanguageModel`` behind an OpenAI-compatible server (vLLM, SGLang, llama.cpp's server, Ollama):
``--model openai:NAME``.

The server is ``--base-url URL``, else ``$OPENAI_BASE_URL``, else ``http://127.0.0.1:8000/v1``
(vLLM's default); the key is ``$OPENAI_API_KEY`` (the variables the OpenAI SDK reads; a local server
needs none). A ``user:password@`` in the URL is sent as HTTP basic auth (httpx's rule, e.g. for a
reverse proxy) in place of the key, and shown and recorded without it (``sqa.redact.redact_url``). The HTTP client is the official ``openai`` SDK (``pip install 'sqa[server]'``): its
timeout, and its retries with exponential backoff on 408/409/429/5xx and connection errors.

Prompts go to ``/v1/completions`` as text rendered exactly as the in-process llama.cpp model
renders them (``sqa.models.chat.as_chatml_text``: raw text as is, a ``ChatPrompt`` as ChatML), so a
served model reads the same tokens as ``sqa.models.llamacpp`` does; generation is greedy
(temperature 0, no repetition penalty: llama-cpp-python's server applies ``repeat_penalty`` 1.1
unless told otherwise, so ``repeat_penalty`` / ``repetition_penalty`` 1.0 are sent, fields other
servers ignore).

Yes/no read-outs come from the top logprobs of the next token (``logprobs`` = the most the server
accepts, probed at load from :data:`LOGPROB_PROBE`). Where neither a Yes nor a No spelling is among
them the read-out is 0.5 (log-odds 0) and is counted in ``readout_stats["missing"]``; where only
one side is there, the other side's probability is taken as that of the last listed token (an upper
bound) and counted in ``readout_stats["one_sided"]``. ``sqa eval`` writes both counts to
``metrics.json`` and ``report.md``; ``sqa ask`` prints a warning line.

A server gives no hidden states over this API, so ``hidden_states`` returns ``(None, log_odds)``
and ``has_hidden_states`` is False: the facts reader's answer head must read log-odds features only
(``sqa.pipeline.build_reader`` refuses a head that needs states).

Concurrency: prompts of one call are sent by a thread pool of ``$SQA_OPENAI_CONCURRENCY`` (default
8) workers (a batching server such as vLLM or SGLang runs them together); with more than one worker
``prefers_batches`` is True, so the steps reader sends up to 32 questions in lockstep (answers are
then written per lockstep batch: ``sqa eval --batch-size`` bounds what a lost server costs).
llama-cpp-python's server runs one request at a time, so there 8 workers are no faster than 1
(bench/results/server_concurrency.json). ``$SQA_OPENAI_TIMEOUT`` (seconds per request,
default 120) and ``$SQA_OPENAI_MAX_RETRIES`` (default 2, the SDK's) tune the client.

Errors: at load, a server that does not answer, a model name it does not serve, or no logprobs
raise :class:`SqaError` (one line, exit 2); a server lost mid-run (after the SDK's retries) raises
:class:`ServerLost`, a SqaError whose message says that the same command resumes (``sqa eval``
keeps every answered question in ``traces.jsonl``). No message holds the key.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from sqa.models.chat import as_chatml_text
from sqa.redact import redact_url
from sqa.types import ModelCapabilities, Prompt, ServerLost, SqaError  # noqa: F401 (ServerLost re-exported)

PREFIX = "openai:"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT_S = 120.0
# top-logprobs counts tried at load, most first: vLLM refuses more than its --max-logprobs (20 by
# default), Ollama gives at most 20, OpenAI's own completions endpoint at most 5
LOGPROB_PROBE = (20, 10, 5, 1)
YES_WORDS = (" Yes", "Yes", " yes", "yes", " YES")  # as sqa.models.llamacpp
NO_WORDS = (" No", "No", " no", "no", " NO")
# neutral sampling fields of llama-cpp-python (repeat_penalty, default 1.1 there) and vLLM/SGLang
# (repetition_penalty); servers that do not know them ignore them
NEUTRAL_EXTRA = {"repeat_penalty": 1.0, "repetition_penalty": 1.0}
PROBE_PROMPT = "Question: Is the sun a star?\nAnswer (Yes or No):"



def served_name(model: str) -> str | None:
    """``NAME`` for ``openai:NAME``, else None (not a served model). Raises SqaError for an empty NAME."""
    if not model.startswith(PREFIX):
        return None
    name = model[len(PREFIX):].strip()
    if not name:
        raise SqaError(f"--model {model!r}: give the served model's name after {PREFIX!r}, e.g. openai:Qwen/Qwen2.5-7B-Instruct")
    return name


def _env_number(var: str, default: float, cast: Callable = float, low: float = 0.0):
    raw = os.environ.get(var)
    if raw is None or not raw.strip():
        return default
    try:
        v = cast(raw)
    except ValueError:
        raise SqaError(f"${var}={raw!r}: not a number; unset it or give e.g. {default}") from None
    if not v > low - 1e-12 or (isinstance(v, float) and math.isnan(v)):
        raise SqaError(f"${var}={raw!r}: must be at least {low}")
    return v


class OpenAIModel:
    """A model served over the OpenAI API (see the module doc).

    ``name`` is the model's name on the server (``openai:`` stripped); ``self.name`` is
    ``openai:NAME`` (what heads and runs are keyed by). ``base_url`` defaults to
    ``$OPENAI_BASE_URL`` then :data:`DEFAULT_BASE_URL`; ``concurrency`` to
    ``$SQA_OPENAI_CONCURRENCY`` (8), ``timeout`` (seconds per request) to ``$SQA_OPENAI_TIMEOUT``
    (120), ``max_retries`` to ``$SQA_OPENAI_MAX_RETRIES`` (2).

    ``server_info`` (recorded in ``run.json``): ``{"api": "openai", "base_url"`` (no credentials),
    ``"model", "engine"`` (``owned_by`` of ``/v1/models``), ``"top_logprobs"}``.
    Raises SqaError when the server does not answer, does not serve ``name`` or gives no logprobs.
    """

    has_hidden_states = False

    def __init__(self, name: str, base_url: str | None = None, *, concurrency: int | None = None,
                 timeout: float | None = None, max_retries: int | None = None):
        try:
            import openai
        except ImportError:
            raise SqaError("--model openai:NAME needs the openai package; install it with "
                           "`pip install 'sqa[server]'` (or `pip install openai`)") from None
        self._openai = openai
        self.served = name
        self.name = PREFIX + name
        url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).strip()
        if not url.lower().startswith(("http://", "https://")):
            raise SqaError(f"--base-url {redact_url(url)!r}: not an http(s) URL; give e.g. {DEFAULT_BASE_URL}")
        self.base_url = url.rstrip("/")
        self.shown_url = redact_url(self.base_url)
        self.concurrency = int(concurrency or _env_number("SQA_OPENAI_CONCURRENCY", DEFAULT_CONCURRENCY, int, 1))
        self.timeout = float(timeout or _env_number("SQA_OPENAI_TIMEOUT", DEFAULT_TIMEOUT_S, float, 0.001))
        self.max_retries = int(max_retries if max_retries is not None
                               else _env_number("SQA_OPENAI_MAX_RETRIES", 2, int, 0))
        self.prefers_batches = self.concurrency > 1
        # a local server needs no key, but the SDK wants one: a placeholder, never a real key
        key = os.environ.get("OPENAI_API_KEY") or "sqa-no-key"
        self.client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout,
                                    max_retries=self.max_retries)
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="sqa-openai")
        self._lock = threading.Lock()
        self.readout_stats = {"readouts": 0, "missing": 0, "one_sided": 0}
        self.stats = {"requests": 0, "prompt_tokens": 0, "generated_tokens": 0}
        self.engine = self._check_model()
        self.top_logprobs = self._probe_logprobs()
        self.capabilities = ModelCapabilities(hidden_states=False, hidden_size=None, endpoint="completions",
                                              readout="top_logprobs", top_logprobs=self.top_logprobs,
                                              chat_template="chatml", prefill=True, prefix_cache=False)
        self.server_info = {"api": "openai", "base_url": self.shown_url, "model": self.served, "engine": self.engine,
                            "top_logprobs": self.top_logprobs, "concurrency": self.concurrency,
                            "timeout_s": self.timeout, "max_retries": self.max_retries}

    # -- errors --------------------------------------------------------------------------------
    def _error(self, e: Exception, at_load: bool) -> SqaError:
        """One line for an SDK error (never the key: messages name the URL without credentials)."""
        o = self._openai
        again = ("start it (or check --base-url / $OPENAI_BASE_URL) and run the same command again" if at_load else
                 "the same command resumes (sqa eval keeps every answered question)")
        if isinstance(e, o.APITimeoutError):
            return (SqaError if at_load else ServerLost)(
                f"the server at {self.shown_url} did not answer within {self.timeout:g} s "
                f"({self.max_retries + 1} tries, $SQA_OPENAI_TIMEOUT); {again}")
        if isinstance(e, o.APIConnectionError):
            return (SqaError if at_load else ServerLost)(
                f"no OpenAI-compatible server answers at {self.shown_url} ({self.max_retries + 1} tries: "
                f"{type(e.__cause__).__name__ if e.__cause__ else 'connection error'}); {again}")
        if isinstance(e, o.AuthenticationError):
            return SqaError(f"the server at {self.shown_url} refused the key in $OPENAI_API_KEY (401); set the key it expects")
        if isinstance(e, o.NotFoundError):
            return SqaError(f"the server at {self.shown_url} answered 404 for model {self.served!r} ({_detail(e)}); "
                            "check --model openai:NAME against its /v1/models and --base-url (it usually ends in /v1)")
        if isinstance(e, o.APIStatusError):
            cls = ServerLost if (e.status_code >= 500 or e.status_code == 429) and not at_load else SqaError
            tail = again if cls is ServerLost or e.status_code >= 500 else "check the server's log"
            return cls(f"the server at {self.shown_url} answered HTTP {e.status_code} ({_detail(e)}) after "
                       f"{self.max_retries + 1} tries; {tail}")
        if isinstance(e, o.OpenAIError):
            return SqaError(f"the server at {self.shown_url}: {type(e).__name__} ({_detail(e)}); check the server")
        raise e

    def _call(self, fn: Callable, at_load: bool = False):
        try:
            return fn()
        except self._openai.OpenAIError as e:
            raise self._error(e, at_load) from None

    # -- load-time checks ------------------------------------------------------------------------
    def _check_model(self) -> str | None:
        """The engine (``owned_by``) of ``self.served`` in ``/v1/models``; SqaError when absent."""
        page = self._call(lambda: self.client.models.list(), at_load=True)
        models = list(getattr(page, "data", None) or [])
        ids = [m.id for m in models]
        if self.served not in ids:
            shown = ", ".join(f"openai:{i}" for i in ids[:5]) + (f" (+{len(ids) - 5} more)" if len(ids) > 5 else "")
            raise SqaError(f"the server at {self.shown_url} does not serve {self.served!r}; it serves "
                           f"{shown or 'no model'}: pass one of those as --model")
        m = models[ids.index(self.served)]
        return getattr(m, "owned_by", None) or None

    def _probe_logprobs(self) -> int:
        """The most top logprobs the server gives (first of :data:`LOGPROB_PROBE` it accepts)."""
        o = self._openai
        last: Exception | None = None
        for n in LOGPROB_PROBE:
            try:
                r = self._complete(PROBE_PROMPT, max_tokens=1, logprobs=n)
            except (o.BadRequestError, o.UnprocessableEntityError) as e:  # over the server's limit
                last = e
                continue
            except o.OpenAIError as e:
                raise self._error(e, at_load=True) from None
            top = _top(r)
            if not top:
                raise SqaError(f"the server at {self.shown_url} returns no logprobs for {self.served!r}, which the "
                               "yes/no read-outs need; use a server that does (vLLM, SGLang, llama.cpp's server, Ollama)")
            return n
        raise SqaError(f"the server at {self.shown_url} refuses logprobs for {self.served!r} ({_detail(last)}), which "
                       "the yes/no read-outs need; use a server that returns them")

    # -- requests --------------------------------------------------------------------------------
    def _complete(self, text: str, max_tokens: int, logprobs: int | None = None, stop: Sequence[str] = ()):
        kw = {"stop": list(stop)} if stop else {}
        if logprobs is not None:
            kw["logprobs"] = logprobs
        r = self.client.completions.create(model=self.served, prompt=text, max_tokens=max_tokens, temperature=0.0,
                                           extra_body=NEUTRAL_EXTRA, **kw)
        with self._lock:
            self.stats["requests"] += 1
            u = getattr(r, "usage", None)
            if u is not None:
                self.stats["prompt_tokens"] += int(getattr(u, "prompt_tokens", 0) or 0)
                self.stats["generated_tokens"] += int(getattr(u, "completion_tokens", 0) or 0)
        return r

    def _map(self, fn: Callable, prompts: Sequence[Prompt]) -> list:
        texts = [as_chatml_text(p) for p in prompts]
        if len(texts) <= 1 or self.concurrency == 1:
            return [self._call(lambda t=t: fn(t)) for t in texts]
        futures = [self._pool.submit(self._call, lambda t=t: fn(t)) for t in texts]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise

    # -- LanguageModel ---------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Prompt], max_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Greedy continuation of each prompt (concurrent requests), at most ``max_tokens`` tokens,
        cut before the first stop string (by the server, and again here)."""
        def one(text: str) -> str:
            r = self._complete(text, max_tokens, stop=stop)
            out = r.choices[0].text or ""
            cut = min((out.find(s) for s in stop if s and s in out), default=-1)
            return out[:cut] if cut >= 0 else out

        return self._map(one, prompts)

    def _log_odds(self, text: str) -> float:
        r = self._complete(text, max_tokens=1, logprobs=self.top_logprobs)
        return self._read(_top(r))

    def _read(self, top: dict) -> float:
        """``log P(Yes) - log P(No)`` from one next-token top-logprobs dict (see the module doc)."""
        py = sum(math.exp(top[w]) for w in YES_WORDS if w in top)
        pn = sum(math.exp(top[w]) for w in NO_WORDS if w in top)
        with self._lock:
            self.readout_stats["readouts"] += 1
            if py == 0.0 and pn == 0.0:
                self.readout_stats["missing"] += 1
                return 0.0
            if py == 0.0 or pn == 0.0:
                self.readout_stats["one_sided"] += 1
        floor = math.exp(min(top.values())) if top else 1e-30
        return math.log(py or floor) - math.log(pn or floor)

    def yes_probability(self, prompts: Sequence[Prompt]) -> list[float]:
        """P(Yes) / (P(Yes) + P(No)) of the next token after each prompt, from its top logprobs
        (the spellings of ``sqa.models.llamacpp``); 0.5 where neither is listed (counted)."""
        return [1.0 / (1.0 + math.exp(-max(min(lo, 60.0), -60.0))) for lo in self._map(self._log_odds, prompts)]

    def hidden_states(self, prompts: Sequence[Prompt]) -> list[tuple[None, float]]:
        """``(None, log_odds)`` per prompt: a served model gives no hidden state (see the module doc)."""
        return [(None, lo) for lo in self._map(self._log_odds, prompts)]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()


def _top(r) -> dict:
    """The first generated token's top-logprobs dict ``{token text: logprob}`` ({} if none)."""
    try:
        lp = r.choices[0].logprobs
        tops = getattr(lp, "top_logprobs", None) if lp is not None else None
        return dict(tops[0]) if tops else {}
    except (AttributeError, IndexError, TypeError):
        return {}


def _detail(e: Exception | None) -> str:
    """A short one-line reason from an SDK error (the server's message, cut)."""
    if e is None:
        return "no answer"
    body = getattr(e, "body", None)
    msg = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else str(inner)
        if msg is None and "detail" in body:
            msg = str(body["detail"])
    msg = " ".join(str(msg or getattr(e, "message", "") or e).split())
    return msg[:160] + ("…" if len(msg) > 160 else "")
