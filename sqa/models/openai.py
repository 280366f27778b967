"""``LanguageModel`` behind OpenAI-compatible servers (vLLM, SGLang, llama.cpp's server, Ollama,
OpenAI's API): ``--model openai:NAME``. Which server does what, with sources: docs/served.md.

Servers: ``--base-url URL`` (repeatable: requests are spread over all of them), else
``$OPENAI_BASE_URL``, else ``http://127.0.0.1:8000/v1``; URLs are parsed by
``sqa.models.served_url`` before any client sees them (credentials go as basic auth). The key is
``$SQA_OPENAI_API_KEY``, else ``$OPENAI_API_KEY``. Each server's client is ``sqa.models.served_http``.

Endpoint (``--api``, default ``auto``): at load, ``auto`` asks ``/v1/completions`` for one token
with logprobs; a 404/405 or a "chat model" refusal there, or no logprobs there but logprobs over
chat (Ollama), picks ``/v1/chat/completions``. Over completions, prompts are text (a
``ChatPrompt`` in the model's own template, or refused where none is known:
``sqa.models.served_template``); over chat, a
``ChatPrompt`` goes as messages and the server applies the model's own chat template; raw text
(the facts reader's prompts) goes as one user message (so the model reads it inside its template:
its P(yes) then differs from a completions read-out of the same text). A ``ChatPrompt``'s
non-empty ``reply`` (the steps reader's growing transcript) is continued as the final assistant
message where the server can (probed at load: vLLM/SGLang's ``continue_final_message``, which
llama.cpp's llama-server also accepts; llama-server continues a final assistant message by
default); elsewhere (llama-cpp-python's server, OpenAI) it is carried as turns
(``ChatPrompt.as_turns``: the reply as an assistant turn, then a user turn asking to continue it).
The steps reader reads such a server in turns of its own instead (``sqa.steps.prompts``: every
prompt ends with a user turn, no reply), as an in-process model does with ``--no-prefill``.

Read-outs (``capabilities.readout``): ``top_logprobs`` of the answer's first token (``logprobs``
= the most the server accepts, at most 20; parsing in ``sqa.models.served_read``); a model whose
answer opens with ``<think>`` is first asked with ``chat_template_kwargs: {"enable_thinking":
false}`` and, where that does not stop it, read after its thinking block; a server that gives no
logprobs is read by ``generation`` (a short greedy answer parsed as Yes/No: P(yes) 1 or 0); one
whose logprobs come in a form ``served_read`` does not read is refused at load, never read by generation. Every
read-out is counted in ``readout_stats`` (``readouts``, ``missing``, ``one_sided``,
``top_logprobs``, ``generation``, ``after_thinking``), which ``sqa eval`` writes to metrics.json.

Identity: ``identity`` (the ``/v1/models`` entry and a fingerprint of the read-outs of
``FINGERPRINT_PROMPTS``, never cached) and ``fingerprint`` (a short string), recorded in
``server_info``; responses are cached under it (``sqa.models.served_cache``), and a response whose
``model`` field names another model stops the run unless ``allow_model_alias``. The load-time
findings are recorded in the cache's file and taken as recorded by the next load with the same
servers, name and ``--api`` (no request), checked live at the first cache miss
(``sqa.models.served_load``; ``server_info`` ``contacted`` and ``identity`` say which).

Concurrency: each server gets ``$SQA_OPENAI_CONCURRENCY`` slots when set, else it is measured at
load: 3 requests at once taking over 2.2x one request means the server runs them one at a time
(llama-cpp-python's server) and it gets 1 slot, else 8 (3 requests at once vs one, one server at a
time: servers sharing a host would slow each other's measurement; issue 50, item 5e). ``capabilities.concurrency`` is the total
and ``prefers_batches`` is True when it is over 1: the steps reader then runs that many questions
in lockstep (one at a time where every server runs one request at a time), each lockstep batch
written when done; a server lost mid-run costs at most that many unwritten answers, whose
answered requests are in the response cache, so the resumed run sends none of them again. A lost
server's requests go to the others; the run stops (resumably) only when every server is lost.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Callable, Sequence

from sqa.models import served_read as R
from sqa.models.base import ModelBase
from sqa.models.served_complete import ServedCompletions
from sqa.models.served_cache import Cost, ResponseCache, cache_enabled, request_key
from sqa.models.served_load import LoadRecord, load_key
from sqa.models.served_template import ServedTemplate
from sqa.models.served_http import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    Server,
    env_number,
)
from sqa.models.served_probe import (  # noqa: F401
    DEFAULT_CONCURRENCY,
    FINGERPRINT_PROMPTS,
    GENERATION_TOKENS,
    LOGPROB_PROBE,
    NEUTRAL_EXTRA,
    PATHS,
    PROBE_PROMPT,
    LoadProbes,
)
from sqa.models.served_url import DEFAULT_BASE_URL, ServedOptions, api_key, base_urls  # noqa: F401 (re-exported)
from sqa.types import ModelCapabilities, Prompt, ServerError, ServerLost, SqaError

PREFIX = "openai:"
YES_WORDS, NO_WORDS = R.YES_WORDS, R.NO_WORDS


def served_name(model: str) -> str | None:
    """``NAME`` for ``openai:NAME``, else None (not a served model). Raises SqaError for an empty NAME."""
    if not model.startswith(PREFIX):
        return None
    name = model[len(PREFIX) :].strip()
    if not name:
        raise SqaError(
            f"--model {model!r}: give the served model's name after {PREFIX!r}, e.g. openai:Qwen/Qwen2.5-7B-Instruct"
        )
    return name


def _same_model(asked: str, answered) -> bool:
    """Whether an answer's ``model`` field names the model asked for: exactly the same name, or no
    name at all (a server that leaves the field out says nothing). A name that merely starts
    with, or shares the last path part of, the one asked for (``gpt-4o-mini`` for ``gpt-4``,
    ``Qwen2.5-7B-Instruct`` for ``Qwen/Qwen2.5-7B``) is another model: accepted only with
    ``allow_model_alias`` (issue 50, item 5a)."""
    if not isinstance(answered, str) or not answered.strip():
        return True
    return answered == asked


class OpenAIModel(ServedCompletions, ServedTemplate, LoadRecord, LoadProbes, ModelBase):
    """A model served over the OpenAI API (see the module doc).

    ``name``: the model's name on the server; ``self.name`` is ``openai:NAME``. ``base_url``: a URL,
    a list of URLs or a :class:`ServedOptions` (``api``, ``allow_model_alias`` and the keywords
    override its fields). ``concurrency`` (slots per server), ``timeout`` (seconds per try, default
    20) and ``max_retries`` (default 1) default to ``$SQA_OPENAI_CONCURRENCY`` / ``_TIMEOUT`` /
    ``_MAX_RETRIES``; ``cache``: a ResponseCache, False for none (default: ``$SQA_HOME``'s).

    Raises SqaError (one line) at load when a URL is malformed, no server answers, one does not serve
    ``name``, or the endpoint asked for is not there; ServerLost mid-run when the servers stop answering."""

    def __init__(
        self,
        name: str,
        base_url=None,
        *,
        api: str | None = None,
        concurrency: int | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        allow_model_alias: bool | None = None,
        cache: ResponseCache | bool | None = None,
        chat_template=None,
    ):
        if chat_template is not None:  # a missing or broken file: one line before anything else
            from sqa.models.chat import check_template_file

            check_template_file(chat_template)
        try:
            import openai  # noqa: F401
        except ImportError:
            raise SqaError(
                "--model openai:NAME needs the openai package; install it with "
                "`pip install 'sqa[server]'` (or `pip install openai`)"
            ) from None
        opts = ServedOptions.of(base_url)
        opts = replace(opts, api=api or opts.api, allow_model_alias=bool(allow_model_alias or opts.allow_model_alias))
        self.options, self.served, self.name = opts, name, PREFIX + name
        urls = base_urls(opts)
        given = timeout is not None or bool((os.environ.get("SQA_OPENAI_TIMEOUT") or "").strip())
        self.timeout = float(timeout or env_number("SQA_OPENAI_TIMEOUT", DEFAULT_TIMEOUT_S, float, 0.001))
        self.max_retries = int(
            max_retries
            if max_retries is not None
            else env_number("SQA_OPENAI_MAX_RETRIES", DEFAULT_MAX_RETRIES, int, 0, 20)
        )
        fixed = concurrency or env_number("SQA_OPENAI_CONCURRENCY", 0, int, 0, 256) or None
        key, var = api_key()
        self.servers = [Server(u, name, key, var, self.timeout, self.max_retries) for u in urls]
        for s in self.servers:
            s.timeout_how = "$SQA_OPENAI_TIMEOUT" if given else "the default"
        self.answer_timeout: float | None = None  # measured at load (served_http.measured_timeout)
        self.base_url, self.shown_url = self.servers[0].url, self.servers[0].shown
        self._lock = threading.Lock()
        self._local = threading.local()  # per-thread token counts (usage)
        self.readout_stats = {
            "readouts": 0,
            "missing": 0,
            "one_sided": 0,
            "top_logprobs": 0,
            "generation": 0,
            "after_thinking": 0,
        }
        self.cost = Cost()
        self.cache = (
            (ResponseCache() if cache_enabled() else None) if cache is None else (cache if cache is not False else None)
        )
        self._extra: dict = dict(NEUTRAL_EXTRA)
        self._thinking_kw: dict = {}
        self._live_lock, self.recorded_at, self._fixed, self._refused = threading.Lock(), None, fixed, None
        self._load_key = load_key([s.url for s in self.servers], name, opts.api) if self.cache is not None else None
        recorded = self.cache.get_load(self._load_key) if self._load_key is not None else None
        # a load recorded before is taken as it was (no request); probed live at the first cache miss
        self.live = not (recorded is not None and self._adopt(recorded))
        if self.live:
            self._probe_findings()
            for s in self.servers if not fixed else ():  # one server at a time (module doc)
                s.concurrency = self._measure_concurrency(s)
            self._record()
        if not given and self.answer_timeout:  # a CPU server's long prompt (issue 50, item 5d)
            self.timeout = self.answer_timeout
            for s in self.servers:
                s.set_timeout(self.answer_timeout)
        self._use_template(chat_template)  # how ChatPrompts go over /v1/completions (served_template)
        self.engine = self.entry.get("owned_by") or None
        self.readout = "top_logprobs" if self.top_logprobs else "generation"
        if fixed:
            for s in self.servers:
                s.concurrency = int(fixed)
        self.concurrency = sum(s.concurrency for s in self.servers)
        # the steps reader runs as many questions in lockstep as there are slots (one at a time where
        # every server runs one request at a time), so a lost server costs at most that many unwritten
        # answers, and their requests are in the response cache
        self.prefers_batches = self.concurrency > 1
        self._slots: queue.Queue = queue.Queue()
        for i in range(max(s.concurrency for s in self.servers)):  # interleaved: requests alternate servers
            for s in self.servers:
                if i < s.concurrency:
                    self._slots.put(s)
        self._pool = ThreadPoolExecutor(max_workers=max(self.concurrency, 1), thread_name_prefix="sqa-openai")
        self.capabilities = ModelCapabilities(
            hidden_states=False,
            hidden_size=None,
            endpoint=self.endpoint,
            readout=self.readout,
            top_logprobs=self.top_logprobs,
            chat_template=self.template_source,
            prefill=self.prefill in ("continue_final_message", "final-assistant", "completions-text"),
            prefix_cache=False,
            concurrency=self.concurrency,
            sampling=True,
            token_logprobs=self.top_logprobs > 0,  # the load-time probe asked for logprobs and got them
        )
        self._one_per_request = False  # a server refused or ignored ``n`` > 1: one request per sample
        self.identity = {
            "name": self.name,
            "models_entry": self.entry,
            "fingerprint": self.fingerprint,
            "fingerprint_reads": self.fingerprint_reads,
        }
        self.server_info = {
            "api": "openai",
            "base_url": self.shown_url,
            "base_urls": [s.shown for s in self.servers],
            "model": self.served,
            "engine": self.engine,
            "endpoint": self.endpoint,
            "readout": self.readout,
            "top_logprobs": self.top_logprobs,
            "thinking": self.thinking,
            "prefill": self.prefill,
            "chat_template": self.template_source,
            "fingerprint": self.fingerprint,
            "fingerprint_reads": self.fingerprint_reads,
            "models_entry": self.entry,
            "concurrency": {s.shown: s.concurrency for s in self.servers},
            "timeout_s": self.timeout,
            "max_retries": self.max_retries,
            "cache": str(self.cache.path) if self.cache is not None else None,
            "contacted": self.live,
            "identity": "live" if self.live else f"as recorded at {self.recorded_at}",
        }

    # -- requests --------------------------------------------------------------------------------
    def _messages(self, prompt: Prompt) -> tuple[list[dict], dict]:
        if isinstance(prompt, str):
            return [{"role": "user", "content": prompt}], {}
        msgs = [{"role": r, "content": c} for r, c in prompt.messages]
        if not prompt.reply:
            return msgs, {}
        if self.prefill == "continue_final_message":
            return msgs + [{"role": "assistant", "content": prompt.reply}], {
                "continue_final_message": True,
                "add_generation_prompt": False,
            }
        if self.prefill == "final-assistant":
            return msgs + [{"role": "assistant", "content": prompt.reply}], {}
        return [{"role": r, "content": c} for r, c in prompt.as_turns().messages], {}

    def _body(self, endpoint: str, prompt: Prompt, max_tokens: int, logprobs: int, stop: Sequence[str] = ()) -> dict:
        body: dict = {"model": self.served, "max_tokens": max_tokens, "temperature": 0.0, **self._extra}
        if endpoint == "completions":
            body["prompt"] = self._completions_text(prompt)
            if logprobs:
                body["logprobs"] = logprobs
        else:
            msgs, flags = self._messages(prompt)
            body.update(messages=msgs, **flags, **self._thinking_kw)
            if logprobs:
                body.update(logprobs=True, top_logprobs=logprobs)
        if stop:
            body["stop"] = list(stop)[:4]  # OpenAI's API takes at most 4
        return body

    def _request(self, endpoint: str, body: dict, use_cache: bool = True, count: bool = True) -> dict:
        """One request, answered from the cache where it was sent before (see the module doc)."""
        key = (
            request_key(f"{self.name}|{self.fingerprint}", endpoint, body)
            if use_cache and self.cache is not None
            else None
        )
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                with self._lock:
                    self.cost.calls_cached += 1
                return hit
        if not self.live:  # loaded from a record: check the servers before the first request sent
            self._go_live()
        while True:
            s = self._take() if count else self.servers[0]
            try:
                r, dt = s.post(PATHS[endpoint], body)
            except ServerLost:
                s.alive = False
                if not count or not any(x.alive for x in self.servers):
                    raise
                continue  # another server takes it; this one's slots are dropped
            finally:
                if count and s.alive:
                    self._slots.put(s)
            break
        self._check_answer(s, r)
        if not count:  # a load-time probe: not a question's cost
            return r
        u = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        with self._lock:
            self.cost.calls_sent += 1
            self.cost.request_seconds += dt
            mine = self._thread_usage()
            for field, k in (("prompt_tokens", "prompt_tokens"), ("completion_tokens", "completion_tokens")):
                v = u.get(k)
                add = int(v) if isinstance(v, (int, float)) and v >= 0 else 0
                setattr(self.cost, field, getattr(self.cost, field) + add)
                mine[field] += add
        if key is not None:
            self.cache.put(key, endpoint, r)
        return r

    def _take(self) -> Server:
        """A free slot of a live server (waits); ServerLost once every server is lost."""
        while True:
            if not any(x.alive for x in self.servers):
                raise ServerLost(
                    f"every server of {self.name} stopped answering ({', '.join(x.shown for x in self.servers)}); "
                    "the same command resumes (sqa eval keeps every answered question)"
                )
            try:
                s = self._slots.get(timeout=0.5)
            except queue.Empty:
                continue
            if s.alive:
                return s

    def _check_answer(self, s: Server, r: dict) -> None:
        if not self.options.allow_model_alias and not _same_model(self.served, r.get("model")):
            raise ServerError(
                f"the server at {s.shown} answered as model {str(r.get('model'))[:80]!r} when asked for "
                f"{self.served!r} (names must match exactly; another model behind that name?); pass "
                "--allow-model-alias (Python: allow_model_alias=True) to accept it"
            )

    def _map(self, fn: Callable, prompts: Sequence[Prompt]) -> list:
        if len(prompts) <= 1 or self.concurrency <= 1:
            return [fn(p) for p in prompts]
        futures = [self._pool.submit(fn, p) for p in prompts]
        try:
            return [f.result() for f in futures]
        except BaseException as e:
            for f in futures:
                f.cancel()
            if not isinstance(e, KeyboardInterrupt):  # the requests in flight finish (each within the
                wait(futures)  # timeout): their answers are counted and cached before the error goes up
            raise

    # -- LanguageModel ---------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Prompt], max_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Greedy continuation of each prompt (concurrent requests), at most ``max_tokens`` tokens,
        cut before the first stop string (by the server, and again here)."""

        def one(p: Prompt) -> str:
            out = R.generated_text(
                self._request(self.endpoint, self._body(self.endpoint, p, max_tokens, 0, stop)), self.endpoint
            )
            if self.endpoint == "chat" and not isinstance(p, str) and self.prefill != "turns":
                out = R.strip_prefill(out, p.reply)
            cut = min((out.find(s) for s in stop if s and s in out), default=-1)
            return out[:cut] if cut >= 0 else out

        return self._map(one, prompts)

    def usage(self) -> dict:
        """``{"prompt_tokens", "completion_tokens"}`` of the requests this model object sent from
        the calling thread, as the server's ``usage`` fields report them: answers from the response
        cache and the load-time probes count nothing (``cost.calls_cached`` counts the cached
        answers); a server's own prefix cache does not lower prompt_tokens unless the server says so.
        Per thread, so that questions answered at once (``sqa.methods.reader``, one thread each, one
        prompt a call) are each counted exactly; every thread's together: ``cost``."""
        return dict(self._thread_usage())

    def _thread_usage(self) -> dict:
        counts = getattr(self._local, "usage", None)  # threading.local: absent in a new thread
        if counts is None:
            counts = self._local.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        return counts

    def _log_odds(self, prompt: Prompt) -> float:
        if self.readout == "generation":
            tokens = GENERATION_TOKENS + (R.THINK_TOKENS if self.thinking == "read-after" else 0)
            r = self._request(self.endpoint, self._body(self.endpoint, prompt, tokens, 0))
            yes = R.parse_yes_no(R.generated_text(r, self.endpoint))
            lo, kind = (0.0, "missing") if yes is None else (60.0 if yes else -60.0, "generation")
        else:
            after = self.thinking == "read-after"
            r = self._request(
                self.endpoint, self._body(self.endpoint, prompt, R.THINK_TOKENS if after else 1, self.top_logprobs)
            )
            lo, kind = R.log_odds(R.answer_position(R.token_positions(r, self.endpoint)))
            kind = "after_thinking" if after and kind != "missing" else kind
        with self._lock:
            self.readout_stats["readouts"] += 1
            self.readout_stats[kind if kind != "both" else "top_logprobs"] += 1
            if kind == "one_sided":
                self.readout_stats["top_logprobs"] += 1
        return lo

    def yes_probability(self, prompts: Sequence[Prompt]) -> list[float]:
        """P(Yes) / (P(Yes) + P(No)) of the answer's first token after each prompt (see the module
        doc for the read-out methods); 0.5 where it could not be read (counted as missing)."""
        import math

        return [1.0 / (1.0 + math.exp(-max(min(lo, 60.0), -60.0))) for lo in self._map(self._log_odds, prompts)]

    def hidden_states(self, prompts: Sequence[Prompt]) -> list[tuple[None, float]]:
        """``(None, log_odds)`` per prompt: a served model gives no hidden state (see the module doc)."""
        return [(None, lo) for lo in self._map(self._log_odds, prompts)]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for s in self.servers:
            s.close()
