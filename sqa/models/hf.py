"""``LanguageModel`` on Hugging Face transformers + torch: any causal-LM checkpoint by hub name or
local directory (or a GGUF file via ``gguf_file``, dequantised by transformers).

On CUDA the weights are bfloat16 and prompts are run as left-padded batches (greedy generation and
the yes/no read are one forward pass per batch); on CPU float32, one batch at a time as well.
torch and transformers are imported only when this class is instantiated, so the CPU default path
(``sqa.models.llamacpp``) never imports them.

Prompts: raw text is read as it is (the facts reader's prompts); a ``ChatPrompt`` is rendered with
the checkpoint's own chat template (``tokenizer.apply_chat_template``, generation prompt added,
then the assistant's reply so far); a checkpoint without one gets ChatML (``sqa.models.chat``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from sqa.models.base import ModelBase, check_complete_args, cut_at_stop, tokens_of_text
from sqa.models.llamacpp import NO_WORDS, YES_WORDS
from sqa.models.chat import render_chatml
from sqa.types import (
    AttendedGeneration,
    BadInput,
    ChatPrompt,
    Generation,
    ModelCapabilities,
    ModelNotFound,
    Prompt,
    SqaError,
)

if TYPE_CHECKING:  # numpy is imported with torch, at use
    import numpy as np


def _check_hub(name: str, filename: str = "config.json") -> None:
    """For a hub name not in the local cache: one request to the hub (``HfApi.model_info``, no
    retries) so that offline, a DNS failure or an unknown name is one line at once instead of the
    hub client's retry loop (23 warning lines over about 50 s offline). Raises SqaError."""
    try:
        from huggingface_hub import HfApi, try_to_load_from_cache
    except ImportError:
        return
    if isinstance(try_to_load_from_cache(name, filename), str):
        return  # cached (``filename``: its config, or the GGUF file asked for): transformers reads it offline too
    import os

    if os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0"):
        raise ModelNotFound(
            f"--model {name}: not in the local Hugging Face cache and HF_HUB_OFFLINE is set; download it "
            "first or pass a local directory"
        )
    try:
        HfApi().model_info(name, timeout=10)
    except Exception as e:  # noqa: BLE001  requests / hub errors of every kind: one line each
        kind = type(e).__name__
        if kind in ("RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError"):
            why = "no such model on the Hugging Face hub (or it is private/gated: log in with `hf auth login`)"
        elif kind in (
            "ConnectionError",
            "ConnectError",
            "ConnectTimeout",
            "ReadTimeout",
            "Timeout",
            "TimeoutException",
            "OfflineModeIsEnabled",
        ):
            why = "cannot reach the Hugging Face hub (offline?)"
        else:
            why = f"the Hugging Face hub did not answer ({kind})"
        raise ModelNotFound(
            f"--model {name}: {why}; pass a local directory, a .gguf file or one of the built-in model names"
        ) from None


class HFModel(ModelBase):
    """A transformers causal LM. ``model`` is a hub name or a directory; ``gguf_file`` names a GGUF
    file inside that directory (``from_pretrained(dir, gguf_file=...)``). ``device`` defaults to
    "cuda" when available, else "cpu"; dtype bfloat16 on CUDA, float32 on CPU. ``batch_size``
    prompts per forward pass. ``chat_template``: a Jinja file (``sqa.models.chat.read_template_file``)
    used instead of the tokenizer's own. Raises SqaError when the checkpoint cannot be found or loaded."""

    def __init__(
        self,
        model: str,
        device: str | None = None,
        gguf_file: str | None = None,
        batch_size: int = 16,
        dtype: str | None = None,
        chat_template: str | Path | None = None,
    ):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:
            raise SqaError(
                f"--model {model}: Hugging Face models need torch and transformers (pip install 'sqa[hf]'): {e}"
            ) from None
        self._torch = torch
        self.name = model if not gguf_file else f"{model}/{gguf_file}"
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.prefers_batches = self.device.startswith("cuda")
        self.batch_size = batch_size
        torch_dtype = (
            getattr(torch, dtype) if dtype else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
        )
        kw = {"gguf_file": gguf_file} if gguf_file else {}
        if not Path(model).expanduser().exists():
            _check_hub(model, gguf_file or "config.json")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model, **kw)
            self.model = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype, **kw).to(self.device)
        except (OSError, ValueError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise SqaError(
                f"--model {model}: cannot load this Hugging Face checkpoint ({first}); pass a local "
                "directory, a reachable hub name, a .gguf file or one of the built-in model names"
            ) from None
        self.model.eval()
        self.chat_template_file = str(chat_template) if chat_template is not None else None
        if chat_template is not None:
            from sqa.models.chat import read_template_file

            self.tokenizer.chat_template = read_template_file(chat_template)
        self.hidden_size = getattr(self.model.config, "hidden_size", None)  # answer heads are checked against it
        self.capabilities = ModelCapabilities(
            hidden_states=True,
            hidden_size=self.hidden_size,
            endpoint="in-process",
            readout="logits",
            chat_template="file"
            if chat_template is not None
            else "tokenizer"
            if getattr(self.tokenizer, "chat_template", None)
            else "chatml",
            prefill=True,
            sampling=True,
            token_logprobs=True,
            attention=True,
        )
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # only the last position's logits are read (yes/no): transformers >= 4.50 calls the argument
        # logits_to_keep, 4.45-4.49 num_logits_to_keep; without it a forward pass materialises the
        # logits of every position (batch x length x vocabulary: 6.6 GB in bfloat16 for 32 prompts of
        # 683 tokens over Qwen2.5's 151,936 tokens)
        import inspect

        params = inspect.signature(self.model.forward).parameters
        self._last_only = next(({k: 1} for k in ("logits_to_keep", "num_logits_to_keep") if k in params), {})
        self._yes_ids = self._first_ids(YES_WORDS)
        self._no_ids = self._first_ids(NO_WORDS)
        eos = self.tokenizer.eos_token_id
        self._eos = set(eos if isinstance(eos, list) else [eos]) | {
            self.tokenizer.convert_tokens_to_ids(t)
            for t in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>")
            if t in self.tokenizer.get_vocab()
        }

    def _first_ids(self, words: Sequence[str]) -> list[int]:
        ids = []
        for w in words:
            t = self.tokenizer.encode(w, add_special_tokens=False)
            if len(t) == 1 and t[0] not in ids:
                ids.append(t[0])
        return ids

    def render(self, prompt: Prompt) -> str:
        """The text fed to the tokenizer: raw text as it is; a ChatPrompt in this checkpoint's chat
        template (ChatML when it has none), its reply appended to the opened assistant turn. A
        template that refuses the system role (Gemma-2) gets it in the first user turn
        (``sqa.models.chat.merge_system``). Raises BadInput when the template fails otherwise."""
        from jinja2.exceptions import TemplateError

        from sqa.models.chat import RENDER_CHARS, RenderLimit, merge_system, render_deadline

        if not isinstance(prompt, ChatPrompt):
            return prompt
        if not getattr(self.tokenizer, "chat_template", None):
            return render_chatml(prompt)
        msgs = [{"role": r, "content": c} for r, c in prompt.messages]
        for attempt in (msgs, merge_system(msgs)):
            try:
                with render_deadline():  # a template that loops without end is stopped (sqa.models.chat)
                    text = self.tokenizer.apply_chat_template(attempt, tokenize=False, add_generation_prompt=True)
                if len(text) > RENDER_CHARS:
                    raise RenderLimit(f"it renders more than the {RENDER_CHARS:,} characters a prompt may have")
                return text + prompt.reply
            except TemplateError as e:
                if attempt is msgs and merge_system(msgs) is not None:
                    continue
                raise self._template_failed(e) from None
            except Exception as e:  # the template's own fault: ZeroDivisionError, RecursionError, ...
                raise self._template_failed(e) from None

    def _template_failed(self, e: BaseException) -> BadInput:
        """The one line for a chat template that failed, naming its source (the file or the model)."""
        from sqa.models.chat import template_failure

        where = self.chat_template_file or f"--model {self.name}"
        return BadInput(
            f"{where}: its chat template failed to render a prompt ({template_failure(e)}); pass a "
            "working one with --chat-template FILE"
        )

    def _encode(self, prompts: Sequence[str]):
        enc = self.tokenizer(
            [self.render(p) for p in prompts], return_tensors="pt", padding=True, add_special_tokens=False
        )
        self._usage["prompt_tokens"] += int(enc["attention_mask"].sum())
        return {k: v.to(self.device) for k, v in enc.items()}

    def _generated_ids(self, row) -> list[int]:
        """A generated row's token IDs up to (not including) its first end-of-generation/padding token."""
        ids = []
        for t in row.tolist():
            if t in self._eos or t == self.tokenizer.pad_token_id:
                break
            ids.append(t)
        return ids

    def generate(self, prompts: Sequence[Prompt], max_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Greedy continuation of each prompt (batched), cut before the first stop string."""
        torch = self._torch
        out: list[str] = []
        for i in range(0, len(prompts), self.batch_size):
            enc = self._encode(prompts[i : i + self.batch_size])
            with torch.inference_mode():
                gen = self.model.generate(
                    **enc,
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=self.tokenizer.pad_token_id,
                    eos_token_id=sorted(self._eos),
                    stop_strings=list(stop) or None,
                    tokenizer=self.tokenizer,
                )
            new = gen[:, enc["input_ids"].shape[1] :]
            for row in new:
                self._usage["completion_tokens"] += len(self._generated_ids(row))
                text = self.tokenizer.decode(row, skip_special_tokens=True)
                cut = min((text.find(s) for s in stop if s and s in text), default=-1)
                out.append(text[:cut] if cut >= 0 else text)
        return out

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
        """``n`` continuations per prompt (batched like ``generate``).

        ``temperature`` 0: greedy, as ``generate`` (``n`` > 1 gives ``n`` copies). Above 0:
        ``model.generate(do_sample=True, temperature=..., top_k=0, top_p=1.0,
        num_return_sequences=n)`` (the whole vocabulary, as OpenAI's defaults) after
        ``torch.manual_seed(seed)`` for each batch (it sets torch's global generator): the same
        prompts, batch size, seed and device give the same texts (a prompt's samples depend on the
        prompts batched with it; CUDA kernels may differ between runs). ``logprobs``: each generated
        token's log-softmax of the raw logits (``output_logits=True``, the untempered distribution,
        float64), its piece the token decoded alone. Raises BadInput for temperature < 0 or n < 1."""
        check_complete_args(self.name, temperature, n)
        torch = self._torch
        k = n if temperature > 0 else 1
        if temperature > 0:
            mode = dict(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0, num_return_sequences=k)
        else:
            mode = dict(do_sample=False, temperature=None, top_p=None, top_k=None)
        out: list[list[Generation]] = []
        for i in range(0, len(prompts), self.batch_size):
            enc = self._encode(prompts[i : i + self.batch_size])
            if temperature > 0:
                torch.manual_seed(int(seed))
            with torch.inference_mode():
                gen = self.model.generate(
                    **enc,
                    **mode,
                    max_new_tokens=max_tokens,
                    pad_token_id=self.tokenizer.pad_token_id,
                    eos_token_id=sorted(self._eos),
                    stop_strings=list(stop) or None,
                    tokenizer=self.tokenizer,
                    return_dict_in_generate=True,
                    output_logits=bool(logprobs),
                )
            new = gen.sequences[:, enc["input_ids"].shape[1] :]
            chosen = None
            if logprobs:  # (rows, steps): log-softmax of the raw logits at each step, of the token chosen
                chosen = torch.stack(
                    [
                        torch.log_softmax(step.double(), dim=-1).gather(1, new[:, j : j + 1]).squeeze(1)
                        for j, step in enumerate(gen.logits)
                    ],
                    dim=1,
                ).cpu()
            gens = []
            for r, row in enumerate(new):
                ids = self._generated_ids(row)
                self._usage["completion_tokens"] += len(ids)
                text = cut_at_stop(self.tokenizer.decode(row, skip_special_tokens=True), stop)
                toks: tuple = ()
                lps: tuple = ()
                if chosen is not None:
                    pieces = [self.tokenizer.decode([t], skip_special_tokens=True) for t in ids]
                    toks, lps = tokens_of_text(text, pieces, [float(v) for v in chosen[r, : len(ids)]])
                gens.append(Generation(text, toks, lps))
            for j in range(0, len(gens), k):
                out.append(gens[j : j + k] if temperature > 0 else gens[j : j + 1] * n)
        return out

    def attend(self, prompt: Prompt, max_tokens: int, stop: Sequence[str] = ()) -> AttendedGeneration:
        """A greedy continuation with DRAGIN's per-word attention and entropy
        (:func:`sqa.models.hf_attention.attend`)."""
        from sqa.models.hf_attention import attend

        return attend(self, prompt, max_tokens, stop)

    def word_attention(self, text: str) -> tuple[list[str], list[list[float]]]:
        """The words of ``text`` and the attention each pays to the words before it
        (:func:`sqa.models.hf_attention.word_attention`)."""
        from sqa.models.hf_attention import word_attention

        return word_attention(self, text)

    def usage(self) -> dict:
        """``{"prompt_tokens", "completion_tokens"}`` since load: every prompt token read (padding
        not counted; nothing is cached) and every token generated before an end-of-generation token."""
        return dict(self._usage)

    def yes_probability(self, prompts: Sequence[Prompt]) -> list[float]:
        """P(Yes) / (P(Yes) + P(No)) of the next token (sum over the spellings in
        ``llamacpp.YES_WORDS`` / ``NO_WORDS``), one forward pass per batch."""
        torch = self._torch
        out: list[float] = []
        for i in range(0, len(prompts), self.batch_size):
            enc = self._encode(prompts[i : i + self.batch_size])
            with torch.inference_mode():
                logits = self.model(**enc, **self._last_only).logits[:, -1, :].float()
            probs = torch.softmax(logits, dim=-1)
            py = probs[:, self._yes_ids].sum(-1)
            pn = probs[:, self._no_ids].sum(-1)
            for a, b in zip(py.tolist(), pn.tolist()):
                out.append(a / (a + b) if a + b > 0 and not math.isnan(a + b) else 0.5)
        return out

    def hidden_states(self, prompts: Sequence[Prompt]) -> list[tuple["np.ndarray", float]]:
        """For each prompt: the final-layer hidden state of its last token (transformers'
        ``hidden_states[-1]``, after the output norm; shape ``(hidden_size,)``, float32) and the
        yes/no log-odds ``log P(Yes) - log P(No)`` of the next token. Batched like
        ``yes_probability``; left padding keeps the last token at position -1."""
        import numpy as np

        torch = self._torch
        out: list = []
        for i in range(0, len(prompts), self.batch_size):
            enc = self._encode(prompts[i : i + self.batch_size])
            with torch.inference_mode():
                res = self.model(**enc, output_hidden_states=True, **self._last_only)
            logits = torch.log_softmax(res.logits[:, -1, :].float(), dim=-1)
            ly = torch.logsumexp(logits[:, self._yes_ids], dim=-1)
            ln = torch.logsumexp(logits[:, self._no_ids], dim=-1)
            hs = res.hidden_states[-1][:, -1, :].float().cpu().numpy()
            for h, a, b in zip(hs, ly.tolist(), ln.tolist()):
                out.append((np.asarray(h, dtype=np.float32), float(a - b)))
        return out


def gguf_hf_model(path: str | Path, **kw) -> HFModel:
    """Load a local GGUF file with transformers (``from_pretrained(dir, gguf_file=name)``)."""
    p = Path(path)
    return HFModel(str(p.parent), gguf_file=p.name, **kw)
