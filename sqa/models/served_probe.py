"""The load-time checks of a served model (``sqa.models.openai.OpenAIModel``, a mixin): is the model
served, which endpoint and how many top logprobs, does its answer open a thinking block, can an
assistant message be continued (prefill), its fingerprint, and how many requests each server runs
at once. Every probe is sent (never answered from the response cache); what they find is recorded
and reused by ``sqa.models.served_load``; see the model's module doc.
"""

from __future__ import annotations

import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor

from sqa.models import served_read as R
from sqa.models.served_http import Server, is_chat_only, measured_timeout
from sqa.models.served_http import _detail as _short
from sqa.types import ChatPrompt, ServerError

LOGPROB_PROBE = (20, 10, 5, 1)  # vLLM's --max-logprobs and OpenAI's chat allow 20, OpenAI's completions 5
# neutral sampling fields of llama-cpp-python (repeat_penalty, 1.1 there by default) and vLLM/SGLang
# (repetition_penalty); left out where a server refuses unknown fields (OpenAI's API)
NEUTRAL_EXTRA = {"repeat_penalty": 1.0, "repetition_penalty": 1.0}
PROBE_PROMPT = "Question: Is the sun a star?\nAnswer (Yes or No):"
FINGERPRINT_PROMPTS = (
    PROBE_PROMPT,
    "Question: Can a fish climb a tree?\nAnswer (Yes or No):",
    "The capital of France is",
)
PREFILL_PROBE = ChatPrompt((("user", "Count from 1 to 20, separated by commas."),), "1, 2, 3, 4, 5, 6, 7, 8,")
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
GENERATION_TOKENS = 8
DEFAULT_CONCURRENCY = 8
PATHS = {"completions": "/completions", "chat": "/chat/completions"}


class LoadProbes:
    """The load-time probes (methods of ``OpenAIModel``; they use its ``servers``, ``served``,
    ``_body`` and ``_request``)."""

    def _check_served(self) -> dict:
        """The ``/v1/models`` entry of ``self.served`` (the same on every server); SqaError when absent."""
        entry: dict | None = None
        for s in self.servers:
            models = s.models()
            ids = [m.get("id") for m in models]
            if self.served not in ids:
                shown = ", ".join(f"openai:{i}" for i in ids[:5]) + (f" (+{len(ids) - 5} more)" if len(ids) > 5 else "")
                raise ServerError(
                    f"the server at {s.shown} does not serve {self.served!r}; it serves "
                    f"{shown or 'no model'}: pass one of those as --model"
                )
            m = models[ids.index(self.served)]
            keep = {k: m[k] for k in ("id", "owned_by", "root", "parent", "max_model_len", "meta") if k in m}
            if entry is not None and entry != keep:
                raise ServerError(
                    f"the servers at {self.servers[0].shown} and {s.shown} describe {self.served!r} "
                    f"differently in /v1/models ({entry} vs {keep}); serve the same model on each"
                )
            entry = keep
        return entry or {}

    def _probe(self, endpoint: str, n: int) -> dict:
        """One load-time read-out request (never cached): over the server's limits, lower ``n``
        (or drop the neutral fields) and try again; the SDK's status errors pass through."""
        s = self.servers[0]
        body = self._body(endpoint, PROBE_PROMPT, 1, n)
        try:
            return s.post(PATHS[endpoint], body, at_load=True, raw_errors=True)[0]
        except s._openai.BadRequestError as e:
            if self._extra and any(k in str(e) for k in NEUTRAL_EXTRA):
                self._extra = {}
                return self._probe(endpoint, n)
            raise

    def _choose_endpoint(self, api: str) -> tuple[str, int, str]:
        """``(endpoint, top logprobs, thinking)`` for ``--api`` (see the module doc)."""
        o = self.servers[0]._openai
        found: dict[str, tuple[int, str]] = {}
        errors: dict[str, Exception] = {}
        unread: dict[str, list[str]] = {}  # endpoints whose logprobs came in a form sqa does not read
        for endpoint in ["completions", "chat"] if api == "auto" else [api]:
            for n in LOGPROB_PROBE:
                try:
                    r = self._probe(endpoint, n)
                except (o.BadRequestError, o.UnprocessableEntityError) as e:
                    errors[endpoint] = e
                    if endpoint == "completions" and is_chat_only(e):
                        break
                    continue
                except o.APIStatusError as e:
                    errors[endpoint] = e
                    if api == "auto" and found:  # completions answered (without logprobs): keep it
                        break
                    if endpoint == "completions" and is_chat_only(e):
                        if api == "auto":
                            break
                        raise ServerError(
                            f"the server at {self.shown_url} does not offer /v1/completions for "
                            f"{self.served!r} ({e.status_code}: {_short(e)}): a chat-only model; use "
                            "--api chat (or leave --api out)"
                        ) from None
                    raise self.servers[0].error(e, at_load=True) from None
                pos = R.token_positions(r, endpoint)
                fields = R.logprobs_unread(r, endpoint)
                if fields:
                    unread[endpoint] = fields
                thinking = "none"
                if R.opens_thinking(pos, R.generated_text(r, endpoint), r):
                    thinking = self._thinking_mode(endpoint, n)
                found[endpoint] = (n if pos and any(t for _, t in pos) else 0, thinking)
                break
            if endpoint in found and found[endpoint][0]:
                break
        if not found and api == "auto" and len(errors) == 2:  # each endpoint's own reason (issue 50, item 8)
            both = " and ".join(f"/v1{PATHS[ep]} ({_status(errors[ep])})" for ep in ("completions", "chat"))
            raise ServerError(
                f"the server at {self.shown_url} refused both {both} for {self.served!r}; check the "
                "request fields its log names, or pass --api for the endpoint that should work"
            )
        if not found:
            e = errors.get(api if api != "auto" else "chat") or next(iter(errors.values()), None)
            what = {
                "auto": "neither /v1/completions nor /v1/chat/completions",
                "chat": "/v1/chat/completions",
                "completions": "/v1/completions",
            }[api]
            hint = " (a chat-only model: use --api chat or auto)" if e is not None and is_chat_only(e) else ""
            raise ServerError(
                f"the server at {self.shown_url} refused {what} for {self.served!r}{hint} "
                f"({self.servers[0].error(e, True) if e is not None else 'no answer'})"
            )
        with_lp = [ep for ep in found if found[ep][0]]
        if not with_lp and unread:  # never read by generation a server that sent logprobs
            ep, fields = next(iter(unread.items()))
            other = "--api chat (or leave --api out)" if api == "completions" else "another server"
            raise ServerError(
                f"the server at {self.shown_url} answered /v1/{PATHS[ep][1:]} for {self.served!r} with "
                f"logprobs in a form sqa does not read (fields: {', '.join(fields)}); read by generation "
                f"instead, every P(yes) would be 0 or 1: try {other}, and report the server and its version"
            )
        endpoint = with_lp[0] if with_lp else ("chat" if "chat" in found else next(iter(found)))
        n, thinking = found[endpoint]
        return endpoint, n, thinking

    def _thinking_mode(self, endpoint: str, n: int) -> str:
        """``"disabled"`` where ``chat_template_kwargs`` stops the thinking, else ``"read-after"``."""
        if endpoint != "chat":
            return "read-after"
        s = self.servers[0]
        try:
            body = {**self._body(endpoint, PROBE_PROMPT, 1, n), **NO_THINKING}
            r = s.post(PATHS[endpoint], body, at_load=True, raw_errors=True)[0]
        except s._openai.APIStatusError:
            return "read-after"
        if R.opens_thinking(R.token_positions(r, endpoint), R.generated_text(r, endpoint), r):
            return "read-after"
        self._thinking_kw = dict(NO_THINKING)
        return "disabled"

    def _probe_prefill(self) -> str:
        """How a ChatPrompt's reply is continued over chat: ``continue_final_message`` (the flag is
        accepted and the model continues), ``final-assistant`` (continued without the flag), else ``turns``."""
        s = self.servers[0]
        for mode in ("continue_final_message", "final-assistant"):
            self.prefill = mode
            body = self._body("chat", PREFILL_PROBE, 3, 0)
            try:
                r = s.post(PATHS["chat"], body, at_load=True, raw_errors=True)[0]
            except (s._openai.BadRequestError, s._openai.UnprocessableEntityError):
                continue
            except s._openai.APIStatusError as e:
                raise s.error(e, at_load=True) from None
            if R.strip_prefill(R.generated_text(r, "chat"), PREFILL_PROBE.reply).strip().startswith("9"):
                return mode
        return "turns"

    def _fingerprint(self) -> str:
        """A short hash of the ``/v1/models`` entry and the first server's read-outs of
        :data:`FINGERPRINT_PROMPTS` (the top-3 tokens in order, or the generated text without
        logprobs); sent, never cached. Every other server is read the same way and must agree
        (``same_reads``): one with other weights behind the name stops the load in one line naming
        both servers (issue 50, item 4), before any answer of it is kept."""
        first, self.fingerprint_reads = self._reads_of(self.servers[0])
        for s in self.servers[1:]:
            reads, fine = self._reads_of(s)
            if not same_reads(self.fingerprint_reads, fine):
                a, b = self._hash(first), self._hash(reads)
                raise ServerError(
                    f"the servers at {self.servers[0].shown} and {s.shown} serve {self.served!r} with other "
                    f"weights (fingerprint {a} vs {b}: they read the same prompts otherwise), whose answers "
                    "must not mix in one run; serve the same model on each, or give one --base-url"
                )
        return self._hash(first)

    def _hash(self, reads: list) -> str:
        blob = json.dumps({"entry": self.entry, "reads": reads, "endpoint": self.endpoint}, sort_keys=True)
        return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()[:16]

    def _reads_of(self, s: Server) -> tuple[list, list]:
        """``(reads, fingerprint_reads)`` of server ``s`` for :data:`FINGERPRINT_PROMPTS`: the top-3
        tokens (or the text) per prompt, and ``{token: logprob}`` of them (compared with a tolerance)."""
        reads, fine = [], []
        for p in FINGERPRINT_PROMPTS:
            body = self._body(self.endpoint, p, GENERATION_TOKENS if not self.top_logprobs else 1, self.top_logprobs)
            r, dt = s.post(PATHS[self.endpoint], body, at_load=True)
            self._check_answer(s, r)
            u = r.get("usage") if isinstance(r.get("usage"), dict) else {}
            n = u.get("prompt_tokens") if isinstance(u.get("prompt_tokens"), int) else len(p) // 4
            self.answer_timeout = max(self.answer_timeout or 0.0, measured_timeout(dt, n))
            pos = R.token_positions(r, self.endpoint)
            top = pos[0][1] if pos else {}
            best = sorted(top, key=top.get, reverse=True)[:3]
            reads.append(best if top else R.generated_text(r, self.endpoint))
            fine.append({t: round(top[t], 3) for t in best} if top else R.generated_text(r, self.endpoint))
        return reads, fine

    def _measure_concurrency(self, s: Server) -> int:
        """1 where 3 requests at once take over 2.2x one request (+50 ms), else DEFAULT_CONCURRENCY.
        Each request is a prompt of about 60 tokens no other shares (so a prefix cache cannot
        answer it and its compute outweighs HTTP overhead), and the one-request time is the faster
        of two, so a busy CPU that slows one single request does not pass for a parallel server."""

        def one(i: int) -> float:
            words = " ".join(f"{i}-{j}" for j in range(16))
            body = self._body(self.endpoint, f"Count {i}: {words}", 1, self.top_logprobs)
            return s.post(PATHS[self.endpoint], body, at_load=True)[1]

        t1 = min(one(1), one(2))
        t = time.perf_counter()
        with ThreadPoolExecutor(3) as ex:
            list(ex.map(one, range(3, 6)))
        return 1 if time.perf_counter() - t > 2.2 * t1 + 0.05 else DEFAULT_CONCURRENCY


def _status(e: Exception) -> str:
    """``HTTP 400: message`` of an SDK status error, for a line naming what each endpoint said."""
    code = getattr(e, "status_code", None)
    return f"HTTP {code}: {_short(e)}" if code is not None else _short(e)


def same_reads(a, b, tol: float = 0.25) -> bool:
    """Whether two ``fingerprint_reads`` lists come from the same weights, allowing for serving
    noise (batching, KV-cache reuse move a logprob by a few hundredths): the same top token per
    prompt and every logprob listed in both within ``tol`` (texts equal where there were no logprobs)."""
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, dict) and isinstance(y, dict) and x and y:
            if max(x, key=x.get) != max(y, key=y.get):
                return False
            if any(abs(float(x[t]) - float(y[t])) > tol for t in set(x) & set(y)):
                return False
        elif x != y:
            return False
    return True


def served_identity(model) -> dict | None:
    """What identifies the weights behind a served model (``OpenAIModel``; None for an in-process
    one), as features stores and answer heads record it: ``fingerprint``, ``fingerprint_reads``,
    ``endpoint``, ``models_entry`` (from its ``server_info``) and ``base_urls`` (shown, without
    credentials: for messages only)."""
    info = getattr(model, "server_info", None)
    if not isinstance(info, dict) or not info.get("fingerprint"):
        return None
    keep = ("fingerprint", "fingerprint_reads", "endpoint", "models_entry", "base_urls")
    return {k: info.get(k) for k in keep}


def same_weights(a: dict, b: dict) -> bool:
    """Whether two ``served_identity`` records name the same weights read the same way: the same
    endpoint, and the same fingerprint or fingerprint reads within ``same_reads``' tolerance."""
    if not isinstance(a, dict) or not isinstance(b, dict) or a.get("endpoint") != b.get("endpoint"):
        return False
    return a.get("fingerprint") == b.get("fingerprint") or same_reads(
        a.get("fingerprint_reads"), b.get("fingerprint_reads")
    )


def identity_line(ident: dict) -> str:
    """``fingerprint F (endpoint, through URL, ...)`` for messages."""
    urls = ", ".join(ident.get("base_urls") or []) or "?"
    return f"fingerprint {ident.get('fingerprint')} over /v1/{'chat/' if ident.get('endpoint') == 'chat' else ''}completions at {urls}"
