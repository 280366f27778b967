"""``ServedCompletions``: ``complete`` of a served model (``sqa.models.openai.OpenAIModel``):
sampled continuations (``temperature``, ``seed``, ``n`` in one request, or one request per seed
where a server refuses ``n``) and per-token logprobs of generated text, every request through the
model's response cache and cost meter (``_request``)."""

from __future__ import annotations

from typing import Sequence

from sqa.models import served_read as R
from sqa.models.base import check_complete_args, cut_at_stop, tokens_of_text
from sqa.models.served_probe import PATHS
from sqa.types import BadInput, Generation, Prompt, ServerError


class ServedCompletions:
    """The ``complete`` half of ``OpenAIModel`` (a mixin: it uses the model's ``_body``,
    ``_request``, ``_map``, ``endpoint``, ``prefill``, ``servers`` and ``capabilities``)."""

    _one_per_request = False  # set once a server refused or ignored ``n``: one request per seed

    def complete(
        self,
        prompts: Sequence[Prompt],
        max_tokens: int,
        stop: Sequence[str] = (),
        *,
        temperature: float = 0.0,
        seed: int = 0,
        n: int = 1,
        logprobs: bool = False,
    ) -> list[list[Generation]]:
        """``n`` continuations per prompt (prompts as concurrent requests, each through the response
        cache and the cost meter like every request).

        ``temperature`` 0: the body of ``generate`` (so both share cached answers; ``n`` > 1 gives
        ``n`` copies). Above 0: the body gets ``temperature`` and ``seed``, and for ``n`` > 1 one
        request asks ``n`` choices; where a server refuses ``n`` (HTTP 400/422) or answers fewer
        choices (llama.cpp's server ignores ``n``), ``n`` requests with seeds ``seed``, ``seed + 1``,
        ... are sent instead, and so for every later prompt of this model object (a refused request
        is not cached: a new process sends it once again). Whether a seed makes samples repeatable
        is the server's business (vLLM's and llama.cpp's do; the response cache does either way).
        ``logprobs``: completions ask ``logprobs: 1`` (read from ``logprobs.tokens/token_logprobs``),
        chat ``logprobs: true, top_logprobs: 1`` (``logprobs.content[j].token/logprob``;
        ``served_read.choice_token_logprobs``). Raises ServerError (one line) when logprobs are asked
        and the server gives none (known at load: ``capabilities.token_logprobs`` False; or a
        response without them) or gives an unusable value; BadInput for temperature < 0 or n < 1."""
        check_complete_args(self.name, temperature, n)
        if logprobs and not self.capabilities.token_logprobs:
            raise ServerError(self._no_logprobs_line("at load"))
        k = n if temperature > 0 else 1

        def one(p: Prompt) -> list[Generation]:
            body = self._body(self.endpoint, p, max_tokens, 1 if logprobs else 0, stop)
            if temperature > 0:
                body.update(temperature=float(temperature), seed=int(seed))
            gens: list[Generation] = []
            if k > 1 and not self._one_per_request:
                try:
                    gens = self._generations(self._request(self.endpoint, {**body, "n": k}), p, stop, logprobs)
                except ServerError as e:
                    if getattr(e, "status_code", None) not in (400, 422):
                        raise
                    gens = []
                if len(gens) < k:
                    self._one_per_request = True
                    gens = []
            if not gens:
                for i in range(k):
                    r = self._request(self.endpoint, {**body, "seed": int(seed) + i} if k > 1 else body)
                    gens.append((self._generations(r, p, stop, logprobs) or [Generation("")])[0])
            return gens[:k] if temperature > 0 else gens[:1] * n

        return self._map(one, prompts)

    def check_sampling(self, what: str) -> None:
        """One sampled request of one token (temperature 0.7, seed 0) to the first server, at load:
        raises BadInput naming ``what`` (e.g. "--method sc") when the server refuses sampling
        (HTTP 400/422), so a run that needs it stops before anything is written. Other server
        errors raise as they are (ServerError)."""
        body = self._body(self.endpoint, "Yes or no?", 1, 0, ())
        body.update(temperature=0.7, seed=0)
        try:
            self._request(self.endpoint, body)
        except ServerError as e:
            if getattr(e, "status_code", None) not in (400, 422):
                raise
            raise BadInput(
                f"{what} needs sampling (temperature and seed), which the server of {self.name} at "
                f"{self.shown_url} refuses ({str(e).splitlines()[0][:160]}); serve the model where "
                "sampling is allowed or pick a method that samples nothing"
            ) from None

    def _generations(self, r: dict, prompt: Prompt, stop: Sequence[str], want_lp: bool) -> list[Generation]:
        """One Generation per choice of response ``r`` (text as ``generate`` reads it)."""
        out = []
        for c in R.choices(r):
            text = R.choice_text(c, self.endpoint)
            if self.endpoint == "chat" and not isinstance(prompt, str) and self.prefill != "turns":
                text = R.strip_prefill(text, prompt.reply)
            text = cut_at_stop(text, stop)
            toks: tuple = ()
            lps: tuple = ()
            if want_lp:
                pairs = R.choice_token_logprobs(c)
                if pairs is None or (text and not pairs):
                    raise ServerError(self._no_logprobs_line("in its answer"))
                toks, lps = tokens_of_text(text, [t for t, _ in pairs], [v for _, v in pairs])
                bad = next((i for i, v in enumerate(lps) if v is None), None)
                if bad is not None:
                    raise ServerError(
                        f"the server of {self.name} at {self.shown_url} gave no usable logprob for generated "
                        f"token {bad} ({toks[bad]!r}: not a number in [-1000, 0]); check the server"
                    )
            out.append(Generation(text, toks, lps))
        return out

    def _no_logprobs_line(self, where: str) -> str:
        urls = ", ".join(s.shown for s in self.servers)
        return (
            f"the server at {urls} gives no per-token logprobs for {self.served!r} over /v1{PATHS[self.endpoint]} "
            f"({where}); this method needs per-token logprobs of generated text: serve the model where "
            "they are given (vLLM, SGLang, llama.cpp's server) or pick a method that needs none"
        )
