"""Attention read-outs of a transformers reader, as DRAGIN's public code computes them (what
``--method dragin`` reads; :mod:`sqa.methods.dragin`).

Source: oneal2000/DRAGIN ``src/generate.py`` @4d71efc — ``BasicGenerator.generate_attn`` (the
``"max"`` attention solver and per-token entropies, used by ``AttnWeightRAG`` with
``method == "dragin"``) and ``AttnWeightRAG.keep_real_words`` (the attention each word of the
text so far receives from the words that triggered retrieval). Tokens are merged into words where
a token's decoded piece begins with whitespace (DRAGIN tests its tokenizer's space marker, or
Llama's newline token 13, which a decoded piece spells the same way).

The attention is the last layer's, read with transformers' eager attention (the fused kernels do
not return weights); the model's attention implementation is set back afterwards.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

from sqa.models.base import cut_at_stop, tokens_of_text
from sqa.types import AttendedGeneration, Prompt


def word_spans(pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Inclusive ``(first, last)`` token positions of each word of ``pieces`` (decoded tokens): a
    word starts at the first token and at every token whose piece begins with whitespace."""
    spans: list[list[int]] = []
    for i, piece in enumerate(pieces):
        if i == 0 or piece[:1].isspace():
            spans.append([i, i])
        else:
            spans[-1][1] = i
    return [(a, b) for a, b in spans]


def _words(pieces: Sequence[str], spans) -> list[str]:
    return ["".join(pieces[a : b + 1]).strip() for a, b in spans]


@contextlib.contextmanager
def _eager(model):
    """The model with eager attention (which returns weights) inside the block."""
    before = getattr(model.config, "_attn_implementation", None)
    switch = before not in (None, "eager") and hasattr(model, "set_attn_implementation")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(before)


def _last_layer(hf, ids):
    """The last layer's attention over ``ids`` (a 1 x n tensor), mean over heads: an n x n tensor
    (row i: how token i attends to tokens 0..i). Counts the n tokens as prompt tokens read."""
    torch = hf._torch
    hf._usage["prompt_tokens"] += int(ids.shape[1])
    with _eager(hf.model), torch.inference_mode():
        att = hf.model(input_ids=ids.to(hf.device), output_attentions=True).attentions[-1][0]
    return att.float().cpu()  # heads x n x n


def attend(hf, prompt: Prompt, max_tokens: int, stop: Sequence[str] = ()) -> AttendedGeneration:
    """A greedy continuation of ``prompt`` (at most ``max_tokens`` tokens, cut before the first of
    ``stop``) with, per generated word, DRAGIN's attention and entropy (see
    :class:`sqa.types.AttendedGeneration`). The attention is read, as DRAGIN does, by one more
    forward pass over the generated tokens alone: last layer, max over the attending positions,
    mean over heads. Entropy: ``-sum p log(p + 1e-10)`` of each step's softmax (DRAGIN's), averaged
    over a word's tokens."""
    torch = hf._torch
    enc = hf._encode([prompt])
    with torch.inference_mode():
        out = hf.model.generate(
            **enc,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            max_new_tokens=max_tokens,
            pad_token_id=hf.tokenizer.pad_token_id,
            eos_token_id=sorted(hf._eos),
            stop_strings=list(stop) or None,
            tokenizer=hf.tokenizer,
            return_dict_in_generate=True,
            output_scores=True,
        )
    row = out.sequences[0, enc["input_ids"].shape[1] :]
    ids = hf._generated_ids(row)
    hf._usage["completion_tokens"] += len(ids)
    full = hf.tokenizer.decode(ids, skip_special_tokens=True)
    text = cut_at_stop(full, stop)
    if not ids:
        return AttendedGeneration(text)
    entropies = []
    for step in out.scores[: len(ids)]:
        p = torch.softmax(step[0].double(), dim=-1)
        entropies.append(float(-(p * torch.log(p + 1e-10)).sum()))
    pieces = [hf.tokenizer.decode([t], skip_special_tokens=True) for t in ids]
    if text != full:  # cut at a stop string: the tokens the text is made of
        pieces, entropies = tokens_of_text(text, pieces, entropies)
    n = len(pieces)
    if n == 0:
        return AttendedGeneration(text)
    att = _last_layer(hf, torch.tensor([ids[:n]]))
    received = att.max(dim=1).values.mean(dim=0)  # DRAGIN's "max" solver: per token, over heads
    spans = word_spans(pieces)
    return AttendedGeneration(
        text,
        tuple(_words(pieces, spans)),
        tuple(float(received[a : b + 1].sum()) for a, b in spans),
        tuple(sum(entropies[a : b + 1]) / (b - a + 1) for a, b in spans),
    )


def word_attention(hf, text: str) -> tuple[list[str], list[list[float]]]:
    """The words of ``text`` (raw text, tokenized as it is) and, per word ``w``, the attention it
    pays to each word before it: for each token of ``w``, the last-layer attention (mean over heads)
    that the token before it pays to the tokens before ``w``, normalised to sum 1; averaged over
    ``w``'s tokens, then summed per word (DRAGIN ``keep_real_words``). Returns ``(words, rows)``,
    ``rows`` one list of ``len(words)`` floats per word (zeros at and after the word itself)."""
    torch = hf._torch
    ids = hf.tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    if ids.shape[1] == 0:
        return [], []
    pieces = [hf.tokenizer.decode([t], skip_special_tokens=True) for t in ids[0].tolist()]
    att = _last_layer(hf, ids).mean(dim=0)  # n x n
    spans = word_spans(pieces)
    n = ids.shape[1]
    rows = []
    for a, b in spans:
        acc = torch.zeros(n)
        for i in range(max(a, 1), b + 1):
            v = att[i - 1][:a]
            if a and float(v.sum()) > 0:
                acc[:a] += v / v.sum()
        acc /= b - a + 1
        rows.append([float(acc[s : e + 1].sum()) for s, e in spans])
    return _words(pieces, spans), rows
