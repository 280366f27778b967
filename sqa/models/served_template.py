"""How a served model's ``ChatPrompt`` s are rendered over ``/v1/completions`` (``sqa.models.openai``,
a mixin; issue 50, item 5c).

Over ``/v1/chat/completions`` the server applies the model's own template (``"server"``). Over
``/v1/completions`` sqa sends text, so it must render a ``ChatPrompt`` in the template the model was
trained with; a Llama, Mistral or Gemma model reading Qwen's ChatML control tokens as text answers
something else without a word. Where the template comes from, first found wins:

1. ``--chat-template FILE`` (``chat_template=``): ``"file"``;
2. the server's own, where it says: llama.cpp's ``llama-server`` answers ``GET /props`` (at the
   server's root, beside ``/v1``) with ``chat_template``, ``bos_token`` and ``eos_token``
   (tools/server/README.md of ggml-org/llama.cpp): ``"props"``. Every server of the model is asked;
   two that give different templates stop the load in one line naming both;
3. ChatML, where the server's chat endpoint shows that the model's template *is* ChatML for the
   steps reader's prompts (Qwen2.5's is, for every conversation that opens with a system message):
   the probe conversation :data:`TEMPLATE_PROBE` is read once over chat and once as ChatML text over
   completions, and the two agree: the same prompt token count (``usage.prompt_tokens``, where both
   give it), the same top token, each one's top 3 among the other's, every shared top logprob
   within :data:`SAME_LOGPROB` (the same text where the server gives no logprobs): ``"chatml"``;
4. otherwise none is known (``"none"``): raw text (the facts reader's prompts) is sent as before,
   and the first ``ChatPrompt`` is refused in one line naming the server and what to pass
   (``--chat-template FILE``, or ``--api chat``), before any answer of it is kept.

The leading ``bos_token`` text of a rendering is dropped before sending: the server's tokenizer
adds BOS itself for the vocabularies whose templates write it (llama.cpp's ``llama-server`` and
llama-cpp-python's server tokenize a completions prompt with ``add_special``, vLLM with
``add_special_tokens``), and llama.cpp's own chat rendering drops it the same way
(``common/chat.cpp``, ``apply``); so the server reads the tokens the model reads in-process
(``sqa.models.llamacpp``: the template's text tokenized without added specials). A
``--chat-template FILE`` over a server that does not say its ``bos_token`` renders with an empty one.
"""

from __future__ import annotations

from pathlib import Path

from sqa.models import served_read as R
from sqa.models.chat import ChatTemplate, read_template_file, render_chatml
from sqa.models.served_probe import GENERATION_TOKENS, PATHS
from sqa.types import ChatPrompt, Prompt, ServerError

# the probe conversation: a system turn then a user turn, as every prompt of the steps reader opens; an
# open request, so that its first token is not one sure answer that any rendering would give alike
TEMPLATE_PROBE = ChatPrompt((("system", "You are a helpful assistant."), ("user", "Say one word you like.")))
SAME_LOGPROB = 0.1  # two reads of the same tokens differ by serving noise only (a few hundredths)


class ServedTemplate:
    """Methods of ``OpenAIModel``: find the template at load (``_find_template``), render a prompt
    for ``/v1/completions`` (``_completions_text``). Uses the model's ``servers``, ``endpoint``,
    ``top_logprobs``, ``_body`` and ``_chat_template_file`` (the ``--chat-template`` path or None)."""

    template: dict = {"source": "chatml"}
    _renderer: ChatTemplate | None = None

    def _find_template(self) -> dict:
        """``{"source", "text", "bos_token", "eos_token"}`` as the module doc says (a file is applied
        on top, in ``_use_template``); ServerError when two servers give different templates."""
        if self.endpoint != "completions":
            return {"source": "server"}
        found: dict | None = None
        for s in self.servers:
            p = s.props()
            t = p.get("chat_template") if isinstance(p, dict) else None
            if not isinstance(t, str) or not t.strip():
                continue
            mine = {
                "source": "props",
                "text": t,
                "bos_token": str(p.get("bos_token") or ""),
                "eos_token": str(p.get("eos_token") or ""),
            }
            if found is not None and found["text"] != t:
                raise ServerError(
                    f"the servers at {self.servers[0].shown} and {s.shown} give different chat templates "
                    f"for {self.served!r} (GET /props): other models behind one name; serve the same model on each"
                )
            found = found or mine
        if found is not None:
            return found
        return {"source": "chatml" if self._chatml_is_its_template() else "none"}

    def _chatml_is_its_template(self) -> bool:
        """Whether the server reads :data:`TEMPLATE_PROBE` over chat as it reads its ChatML text over
        completions (module doc): the same prompt token count where both answers give one, and the
        same read-out. A server that refuses the chat request (asked first): False, nothing more sent."""
        s, n = self.servers[0], self.top_logprobs
        reads, counts = [], []
        for endpoint, prompt in (("chat", TEMPLATE_PROBE), ("completions", render_chatml(TEMPLATE_PROBE))):
            try:
                r = s.post(
                    PATHS[endpoint], self._body(endpoint, prompt, 1 if n else GENERATION_TOKENS, n), at_load=True
                )[0]
            except ServerError:
                return False
            pos = R.token_positions(r, endpoint)
            reads.append(pos[0][1] if n and pos else R.generated_text(r, endpoint).strip())
            u = r.get("usage")
            counts.append(u.get("prompt_tokens") if isinstance(u, dict) else None)
        if all(isinstance(c, int) and c > 0 for c in counts) and counts[0] != counts[1]:
            return False
        a, b = reads
        if isinstance(a, dict) and isinstance(b, dict):
            if not a or not b or max(a, key=a.get) != max(b, key=b.get):
                return False
            top = [sorted(x, key=x.get, reverse=True)[:3] for x in (a, b)]
            if not set(top[0]) <= set(b) or not set(top[1]) <= set(a):
                return False
            return all(abs(a[t] - b[t]) <= SAME_LOGPROB for t in set(a) & set(b))
        return a == b and bool(a)

    def _use_template(self, file: str | Path | None) -> None:
        """Set the renderer from ``self.template`` and the ``--chat-template`` ``file`` (which wins).
        Raises ServerError for a file with a model served over chat; BadInput for a file that does
        not work (``sqa.models.chat``)."""
        t = self.template
        bos, eos = t.get("bos_token", ""), t.get("eos_token", "")
        if file is not None:
            if self.endpoint != "completions":
                raise ServerError(
                    f"--chat-template {Path(file).name}: {self.name} is read over /v1/chat/completions at "
                    f"{self.shown_url}, where the server applies its own template; pass --api completions "
                    "to render the prompts with that file"
                )
            self._renderer = ChatTemplate(
                read_template_file(file), "file", where=str(file), bos_token=bos, eos_token=eos
            )
            self.template_source = "file"
            return
        self.template_source = t["source"]
        if t["source"] == "props":
            where = f"the chat template of {self.served!r} from {self.shown_url}'s /props"
            self._renderer = ChatTemplate(t["text"], "gguf", where=where, bos_token=bos, eos_token=eos)

    def _completions_text(self, prompt: Prompt) -> str:
        """The text sent over ``/v1/completions`` for ``prompt`` (module doc): raw text as it is; a
        ChatPrompt in the model's template. Raises ServerError (one line) where none is known."""
        if isinstance(prompt, str):
            return prompt
        source = getattr(self, "template_source", "chatml")
        if source == "chatml":
            return render_chatml(prompt)
        if self._renderer is None:
            raise ServerError(
                f"the server at {self.shown_url} does not say which chat template {self.served!r} reads "
                "(no GET /props), and over its chat endpoint the model does not read ChatML: sqa cannot "
                "render chat prompts for /v1/completions; pass --chat-template FILE (the model's template, "
                "or its tokenizer_config.json) or --api chat (the server applies its own)"
            )
        text = self._renderer.render(prompt)
        bos = self._renderer.bos_token
        return text[len(bos) :] if bos and text.startswith(bos) else text
