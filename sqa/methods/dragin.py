"""DRAGIN: retrieval when the model's information need shows in its attention and entropy.

Su et al. 2024 ("DRAGIN: Dynamic Retrieval Augmented Generation based on the Real-time Information
Needs of Large Language Models", ACL 2024), as its public code runs StrategyQA: oneal2000/DRAGIN
``src/generate.py`` (``AttnWeightRAG.inference``, ``modifier``, ``keep_real_words``) and
``config/Llama2-13b-chat/StrategyQA/DRAGIN.json`` @4d71efc (θ = ``hallucination_threshold`` 1.3,
``retrieve_topk`` 3, ``retrieve_keep_top_k`` 25 query words, ``generate_max_length`` 100,
``query_formulation`` "real_words").

One round: the model continues the answer greedily (:meth:`Tools.attend`); the continuation is
split into sentences and, in order, each word gets RIND = ``attention / sum(attention in the
sentence) x entropy x sentence length in words x non-stopword``. At the first sentence with a word
above θ, the text before it is kept, a query is built from the words of the question and text so
far that the triggering words attend to most (the 25 highest, non-stopwords, in text order), the
top-k paragraphs are put in DRAGIN's "Context:" block, and the model writes the sentence again,
of which the first sentence is kept. Otherwise the whole continuation is kept. Rounds go on until
the text says "the answer is", stops growing, or exceeds ``max_tokens`` words. The answer rule
(default DRAGIN's ``answer-is-else-no``) reads the text.

Where sqa differs from the code (each named in docs/methods.md): sentences are split by
punctuation (the code uses spaCy); "real words" are words outside NLTK's English stopword list, the
paper's RIND definition (the code keeps spaCy's NOUN/ADJ/VERB/PROPN/NUM and masks them only after
triggering); generation stops at the CoT stop strings (the code generates 100 tokens and cuts
"Question:" afterwards); the text's length is counted in words, not tokens. Needs attention
weights: the transformers reader (llama.cpp and servers give none: refused in one line).
"""

from __future__ import annotations

import re

from sqa.methods import prompts as P
from sqa.methods.base import Method, MethodOutput, cite
from sqa.methods.cot import STOP
from sqa.methods.rag import _step, paragraph_text
from sqa.retriever.stopwords import STOPWORDS

QUERY_WORDS = 25  # config/.../DRAGIN.json retrieve_keep_top_k
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """``text`` split after ., ! or ? followed by whitespace; empty pieces dropped."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def real_word(word: str) -> bool:
    """Whether ``word`` (a generated word, punctuation attached) carries content: it holds a
    letter or digit and, stripped of punctuation and lower-cased, is not an NLTK stopword."""
    core = re.sub(r"[^\w']", "", word).lower()
    return bool(core) and any(c.isalnum() for c in core) and core not in STOPWORDS


def rind(gen, theta: float):
    """The first sentence of ``gen`` (a :class:`sqa.types.AttendedGeneration`) with a word whose
    RIND exceeds ``theta``: ``(text before it, its words, per word True where RIND > theta)``;
    None when no sentence has one. A sentence's words are located as DRAGIN's ``modifier`` does:
    from the previous sentence's end, the shortest run of words whose space-joined text contains
    the sentence (the last sentence takes every remaining word)."""
    sents, words = sentences(gen.text), list(gen.words)
    start = 0
    for sid, sent in enumerate(sents):
        left = start
        if sid == len(sents) - 1:
            right = len(words)
        else:
            right = next((i for i in range(left + 1, len(words) + 1) if sent in " ".join(words[left:i])), left)
            start = right
        if right <= left:
            continue
        att = gen.attention[left:right]
        total = sum(att) or 1.0
        flags = [
            att[i] / total * gen.entropy[left + i] * (right - left) > theta and real_word(words[left + i])
            for i in range(right - left)
        ]
        if any(flags):
            return " ".join(sents[:sid]), words[left:right], flags
    return None


def attention_query(tools, before: str, words: list[str], flags: list[bool]) -> str:
    """DRAGIN's "real_words" query: the words of ``before`` + ``words`` that the flagged words pay
    most attention to (mean over the flagged words of :meth:`Tools.word_attention`'s rows), the
    flagged words themselves and stopwords left out, the :data:`QUERY_WORDS` highest kept in text
    order. Falls back to the sentence's unflagged real words when the re-tokenised text has fewer
    words than the sentence."""
    all_words, rows = tools.word_attention(f"{before} {' '.join(words)}".strip())
    first = len(all_words) - len(words)
    hit = [first + i for i, f in enumerate(flags) if f]
    if first < 0 or not hit:
        return " ".join(w for w, f in zip(words, flags) if not f and real_word(w))
    weight = [sum(rows[h][j] for h in hit) / len(hit) for j in range(len(all_words))]
    pairs = [(weight[j], j) for j, w in enumerate(all_words) if j not in hit and real_word(w)]
    top = sorted(sorted(pairs, reverse=True)[:QUERY_WORDS], key=lambda p: p[1])
    return " ".join(all_words[j] for _, j in top)


class Dragin(Method):
    """DRAGIN: RIND-triggered retrieval with an attention-built query (see the module doc)."""

    name = "dragin"
    source = "Su et al. 2024, DRAGIN (ACL 2024), AttnWeightRAG; " + cite(P.DRAGIN_SOURCE)
    needs = ("generate", "p_yes", "search", "attention")
    prompts = ("dragin",)
    defaults = {"prompt": "dragin", "answer_rule": "answer-is-else-no", "k": 3, "theta": 1.3, "max_tokens": 100}

    def answer(self, question, tools):
        s = tools.settings
        text, steps, docs = "", [], []
        while True:
            old = len(text)
            gen = tools.attend(P.continue_prompt(question, [], text, s["prompt"]), stop=STOP)
            found = rind(gen, s["theta"])
            if found is None:
                text = " ".join(t for t in (text.strip(), gen.text.strip()) if t)
            else:
                before, words, flags = found
                query = attention_query(tools, " ".join(t for t in (question, text, before) if t), words, flags)
                hits = tools.search(query or question)
                steps.append(_step(len(steps) + 1, query or question, hits))
                docs = [paragraph_text(h) for h in hits]
                so_far = " ".join(t for t in (text.strip(), before.strip()) if t)
                again = tools.generate(P.continue_prompt(question, docs, so_far, s["prompt"]), stop=STOP)[0].text
                first = (sentences(again) or [""])[0]
                text = " ".join(t for t in (so_far, first) if t)
            if len(text.split()) > s["max_tokens"] or len(text) <= old or P.DRAGIN_ANSWER_MARK in text:
                break
        d = tools.decide(P.continue_prompt(question, docs, "", s["prompt"]), text)
        return MethodOutput(d.answer, d.p_yes, d.read, text, steps)
