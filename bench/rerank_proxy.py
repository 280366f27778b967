"""A sentence re-ranker trained on train-2061's annotated facts, and the ceiling of any re-ranker,
measured without the model: writes bench/results/rerank_proxy.json.

    python bench/rerank_proxy.py --index-dir INDEX_DIR [--limit 2055]     # a few minutes on 2 cores

The question this answers: can a better *choice* among the candidate sentences the shipped
selection already sees give the reader the facts it needs? Per train-2061 question (release order,
the 6 demonstration questions left out), the candidate pool is what ``sqa.facts.features.FactSelector``
ranks today: the sentences of the best ``sentence_paragraphs`` (3) of the top-10 paragraphs for the
question, as "Title: sentence" (``sqa.facts.sources._sentence_candidates``), and the 20 best
train-2061 annotated facts by BM25 (never the question's own; ``AnnotatedFacts.select``). Shown are
5 facts, as shipped (``FactSettings``: 3 Wikipedia + 2 train facts).

Rows, each the new-information recall of the annotated facts (bench/fact_selection.py's proxy:
the share of each annotated fact's content words that are not in the question found in the best
shown fact; the oracle facts themselves score 1.0):

- ``shipped``: the shipped selection (BM25 within each source, 3 + 2).
- ``learned``: a re-ranker trained on the annotated facts: per candidate, the share of the
  question's annotated facts' new words it covers (its best fact) is the target of a gradient
  boosted regressor (scikit-learn ``HistGradientBoostingRegressor``) over candidate features (its
  source, BM25 score and rank within its source, paragraph rank, sentence position, length, new
  words, question words covered, digits, and the all-MiniLM-L6-v2 cosine with the question);
  out-of-fold over 5 folds grouped by StrategyQA ``term`` (``GroupKFold``), so no question is
  ranked by a model that saw it or its term. Picks the 5 best predicted, either keeping the 3 + 2
  quota (``learned-quota``) or not (``learned-any``).
- ``ceiling``: the best 5 of the pool chosen *with* the annotated facts (greedy on the proxy
  itself): what no re-ranker of this pool can beat.

``--pool-paragraphs 10`` (the wide pool, session 22) takes the Wikipedia candidates from all of the
question's top-10 paragraphs instead of the best 3 (the top 10 hold an annotated evidence paragraph
far more often than the top 3; the ``shipped`` row stays the shipped selection), and
``--extra-features`` gives the re-ranker five more (``EXTRA_FEATURES``). ``--gold-weight W`` adds W
to the target of a candidate from an annotated evidence paragraph, and ``--pools`` keeps the built
pools so that settings compare in seconds. Each row also gives the share of the 5 shown facts that
come from one of the question's annotated evidence paragraphs (every annotator's), the measure that
ordered the head's gains at 1,000 questions better than the recall (bench/results/notes.md).

The reading of the rows against the answer head (bench/results/notes.md): +0.043 of this proxy
(the expanded query) gave no head gain at 600 questions, and the oracle facts (1.0) give the
largest known gain. So a re-ranker is worth a feature extraction only if it moves the proxy by
far more than that.
"""

from __future__ import annotations

import argparse
import json
import pickle
import re
import sys
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import fact_selection  # noqa: E402
from fact_selection import gold_new_words, new_info_recall  # noqa: E402

from sqa.facts.features import FactSelector, FactSettings  # noqa: E402
from sqa.pipeline import index_info, make_retriever, open_index  # noqa: E402
from sqa.facts.prompt import demo_qids, interleave  # noqa: E402
from sqa.facts.sources import _BM25, _sentence_candidates, default_annotated_facts  # noqa: E402
from sqa.strategyqa import load_questions  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "rerank_proxy.json"
# the greedy ceiling scores each candidate many times: memoise the proxy's word sets
content_words = fact_selection.content_words = lru_cache(maxsize=None)(fact_selection.content_words)
TRAIN_POOL = 20
FEATURES = ("is_train", "bm25", "bm25_rel", "rank", "para_rank", "sent_pos", "words", "new_words",
            "q_words_covered", "q_share_covered", "digits", "cosine", "cosine_rel")
# --extra-features (the wide pool's re-ranker): the paragraph's own BM25 score relative to the
# question's best, the share of its title's content words found in the question, the sentence's
# MiniLM cosine relative to the best of its own paragraph, and the paragraph's MiniLM cosine with
# the question (its sentences' mean embedding) and its rank by it among the pool's paragraphs (-1
# for train facts)
EXTRA_FEATURES = ("para_score_rel", "title_in_q", "cosine_para_rel", "para_cosine", "para_cosine_rank")


def candidates(q, hits, ann, settings: FactSettings):
    """[(text, source, feature dict)] of one question's pool (see the module doc): the sentences
    of the best ``settings.sentence_paragraphs`` of ``hits`` and the ``TRAIN_POOL`` best train
    facts. Every feature but the MiniLM ones (``cosine``, ``cosine_rel``, ``cosine_para_rel``,
    ``para_cosine``, ``para_cosine_rank``), which the caller sets."""
    out = []
    top = hits[: settings.sentence_paragraphs or settings.k]
    top_score = max((h.score for h in top), default=0.0) or 1.0
    qw = content_words(q.question)
    title_share = {h.evidence_id: len(content_words(h.paragraph.title) & qw) / max(1, len(content_words(h.paragraph.title)))
                   for h in top}
    para_score = {h.evidence_id: h.score / top_score for h in top}
    wiki = _sentence_candidates(top, settings.max_words)
    para_rank = {h.evidence_id: i for i, h in enumerate(top)}
    pos: dict[str, int] = {}
    bm = dict(_BM25([c.text for c in wiki]).rank(q.question, len(wiki))) if wiki else {}
    order = {i: r for r, i in enumerate(sorted(bm, key=lambda i: -bm[i]))}
    for i, c in enumerate(wiki):
        p = pos[c.ref] = pos.get(c.ref, -1) + 1
        out.append((c.text, "wikipedia", {"ref": c.ref, "is_train": 0, "bm25": bm.get(i, 0.0), "rank": order.get(i, len(wiki)),
                                          "para_rank": para_rank[c.ref], "sent_pos": p,
                                          "para_score_rel": para_score[c.ref], "title_in_q": title_share[c.ref]}))
    train = ann.select(q.question, TRAIN_POOL, exclude_qids=[q.qid])
    for r, f in enumerate(train):
        out.append((f.text, "train-facts", {"ref": f.ref, "is_train": 1, "bm25": f.score, "rank": r, "para_rank": -1, "sent_pos": -1,
                                            "para_score_rel": -1.0, "title_in_q": -1.0}))
    for src in ("wikipedia", "train-facts"):
        top_bm = max((d["bm25"] for _, s, d in out if s == src), default=0.0) or 1.0
        for _, s, d in out:
            if s == src:
                d["bm25_rel"] = d["bm25"] / top_bm
    for text, _, d in out:
        w = content_words(text)
        d.update(words=len(text.split()), new_words=len(w - qw), q_words_covered=len(w & qw),
                 q_share_covered=len(w & qw) / max(1, len(qw)), digits=int(bool(re.search(r"\d", text))))
    return out


def coverage(golds: list[set[str]], text: str) -> float:
    """The best share of an annotated fact's new words (``gold_new_words``) that ``text`` covers
    (0 if no fact adds a word)."""
    w = content_words(text)
    return max((len(g & w) / len(g) for g in golds), default=0.0)


def pick(pool, score, quota: tuple[int, int] | None, n: int = 5) -> list[int]:
    """Indices of the ``n`` best by ``score``; with ``quota`` (wiki, train) the best of each
    source, interleaved train first like the shipped order."""
    order = sorted(range(len(pool)), key=lambda i: -score[i])
    if quota is None:
        return order[:n]
    wiki = [i for i in order if pool[i][1] == "wikipedia"][: quota[0]]
    train = [i for i in order if pool[i][1] == "train-facts"][: quota[1]]
    return interleave(train, wiki)


def greedy_ceiling(q, pool, n: int = 5) -> list[int]:
    """The ``n`` facts of ``pool`` chosen greedily to maximise the proxy with the annotated facts."""
    chosen: list[int] = []
    for _ in range(min(n, len(pool))):
        best, best_v = None, -1.0
        for i in range(len(pool)):
            if i in chosen:
                continue
            v = new_info_recall(q.question, list(q.facts), [pool[j][0] for j in chosen + [i]]) or 0.0
            if v > best_v:
                best, best_v = i, v
        chosen.append(best)
    return chosen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--limit", type=int, default=2055)
    ap.add_argument("--pool-paragraphs", type=int, default=3,
                    help="the Wikipedia sentences of the pool come from this many of the question's top-10 paragraphs "
                         "(3: the shipped selection's pool; 10: the wide pool)")
    ap.add_argument("--extra-features", action="store_true", help=f"add {', '.join(EXTRA_FEATURES)} to the re-ranker's features")
    ap.add_argument("--out", type=Path, default=RESULTS, help="the results file (default bench/results/rerank_proxy.json)")
    ap.add_argument("--gold-weight", type=float, default=0.0,
                    help="the re-ranker's target is a candidate's coverage plus this much when it comes from one of "
                         "the question's annotated evidence paragraphs (0: coverage alone, as in session 17)")
    ap.add_argument("--pools", type=Path, default=None,
                    help="a pickle of the built pools: read when it exists (same questions and pool), written otherwise, "
                         "so that re-ranker settings are compared in seconds")
    ap.add_argument("--dump", default=None, help="write each question's out-of-fold learned selections here "
                    "(JSON lines: qid, learned-quota and learned-any facts) for bench/rerank_facts_extract.py")
    a = ap.parse_args()
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.model_selection import GroupKFold

    from sqa.retriever.minilm import default_encoder

    t0 = time.perf_counter()
    settings = FactSettings(sentence_paragraphs=a.pool_paragraphs)
    features = FEATURES + (EXTRA_FEATURES if a.extra_features else ())
    demos = demo_qids()
    qs = [q for q in load_questions("train-2061") if q.qid not in demos][: a.limit]
    retriever = make_retriever(open_index(a.index_dir), "ours")
    ann = default_annotated_facts()
    encode = default_encoder()
    selector = FactSelector(retriever, FactSettings(sentence_paragraphs=3), ann)  # the shipped selection
    pools, shipped_facts = [], []
    cache_key = {"qids": [q.qid for q in qs], "pool_paragraphs": a.pool_paragraphs, "index": index_info(a.index_dir)}
    if a.pools and a.pools.exists():
        with open(a.pools, "rb") as fh:
            cached = pickle.load(fh)
        if cached["key"] != cache_key:
            raise SystemExit(f"error: {a.pools}: built for other questions, pool or index; give another --pools path")
        pools, shipped_facts = cached["pools"], cached["shipped_facts"]
        print(f"{len(pools)} pools read from {a.pools}", flush=True)
    for qi, q in enumerate(qs if not pools else []):
        facts, hits = selector.select(q)  # the shipped selection, and the question's top-k it read
        shipped_facts.append(facts)
        pool = candidates(q, hits, ann, settings)
        emb = np.asarray(encode([q.question] + [t for t, _, _ in pool]), dtype=np.float32)
        cos = emb[1:] @ emb[0]
        top_cos = float(cos.max()) if len(cos) else 1.0
        rows_of: dict[str, list[int]] = {}  # each paragraph's sentences (pool positions)
        for j, ((t, s, d), c) in enumerate(zip(pool, cos)):
            d.update(cosine=float(c), cosine_rel=float(c) / (top_cos or 1.0))
            if s == "wikipedia":
                rows_of.setdefault(d["ref"], []).append(j)
        best_in_para = {ref: float(cos[rows].max()) for ref, rows in rows_of.items()}
        # a paragraph's embedding: the normalised mean of its sentences' (no second encoder pass,
        # which doubled the time a question)
        pcos = {}
        for ref, rows in rows_of.items():
            m = emb[1:][rows].mean(axis=0)
            pcos[ref] = float(m @ emb[0] / (np.linalg.norm(m) or 1.0))
        prank = {e: r for r, e in enumerate(sorted(pcos, key=lambda e: -pcos[e]))}
        for (t, s, d), c in zip(pool, cos):
            wiki = s == "wikipedia"
            d["cosine_para_rel"] = float(c) / (best_in_para[d["ref"]] or 1.0) if wiki else -1.0
            d["para_cosine"] = pcos[d["ref"]] if wiki else -1.0
            d["para_cosine_rank"] = prank[d["ref"]] if wiki else -1
        pools.append(pool)
        if qi % 200 == 0:
            print(f"{qi}/{len(qs)} pools, {time.perf_counter() - t0:.0f} s", flush=True)
    if a.pools and not a.pools.exists():
        with open(a.pools, "wb") as fh:
            pickle.dump({"key": cache_key, "pools": pools, "shipped_facts": shipped_facts}, fh)
    X = np.array([[d[f] for f in features] for pool in pools for _, _, d in pool], dtype=np.float64)
    golds = [gold_new_words(q.question, list(q.facts)) for q in qs]
    gold_ids = [fact_selection.gold_paragraph_ids(q) for q in qs]
    y = np.array([coverage(g, t) + a.gold_weight * (s == "wikipedia" and d["ref"] in gi)
                  for g, gi, pool in zip(golds, gold_ids, pools) for t, s, d in pool])
    owner = np.array([qi for qi, pool in enumerate(pools) for _ in pool])
    terms = {t: i for i, t in enumerate(sorted({q.term for q in qs}))}
    groups = np.array([terms[qs[qi].term] for qi in owner])
    pred = np.zeros(len(y))
    for tr, te in GroupKFold(n_splits=5).split(X, y, groups):
        m = HistGradientBoostingRegressor(max_iter=200, learning_rate=0.05, random_state=0).fit(X[tr], y[tr])
        pred[te] = m.predict(X[te])
    starts = np.concatenate([[0], np.cumsum([len(p) for p in pools])])
    sel = {"learned-quota": [], "learned-any": [], "ceiling": []}
    for qi, (q, pool) in enumerate(zip(qs, pools)):
        p = pred[starts[qi]: starts[qi + 1]]
        sel["learned-quota"].append(pick(pool, p, (settings.wiki, settings.train)))
        sel["learned-any"].append(pick(pool, p, None))
        sel["ceiling"].append(greedy_ceiling(q, pool))
    if a.dump:
        with open(a.dump, "w", encoding="utf-8") as fh:
            for qi, (q, pool) in enumerate(zip(qs, pools)):
                p = pred[starts[qi]: starts[qi + 1]]
                fh.write(json.dumps({"qid": q.qid, **{name: [
                    {"text": pool[i][0], "source": pool[i][1], "ref": pool[i][2]["ref"], "score": round(float(p[i]), 4)}
                    for i in sel[name][qi]] for name in ("learned-quota", "learned-any")}}) + "\n")
    recs = {"shipped": [new_info_recall(q.question, list(q.facts), [f.text for f in facts])
                        for q, facts in zip(qs, shipped_facts)]}
    gold_share = {"shipped": [np.mean([f.source == "wikipedia" and f.ref in g for f in facts])
                              for g, facts in zip(gold_ids, shipped_facts)]}
    for name, picks in sel.items():
        recs[name] = [new_info_recall(q.question, list(q.facts), [pool[i][0] for i in ix])
                      for q, pool, ix in zip(qs, pools, picks)]
        gold_share[name] = [np.mean([pool[i][1] == "wikipedia" and pool[i][2]["ref"] in g for i in ix])
                            for g, pool, ix in zip(gold_ids, pools, picks)]
    keep = [i for i, r in enumerate(recs["shipped"]) if r is not None]
    base = np.array([recs["shipped"][i] for i in keep])
    rows = []
    for name, r in recs.items():
        v = np.array([r[i] for i in keep])
        d = v - base
        se = d.std(ddof=1) / np.sqrt(len(d))
        rows.append({"facts": name, "new_info_recall": round(float(v.mean()), 4),
                     "se": round(float(v.std(ddof=1) / np.sqrt(len(v))), 4),
                     "minus_shipped": round(float(d.mean()), 4),
                     "minus_shipped_95": [round(float(d.mean() - 1.96 * se), 4), round(float(d.mean() + 1.96 * se), 4)]})
        rows[-1]["shown_from_annotated_paragraphs"] = round(float(np.mean([gold_share[name][i] for i in keep])), 3)
        if name in sel:
            rows[-1]["wikipedia_share"] = round(float(np.mean([pools[i][j][1] == "wikipedia"
                                                                for i in keep for j in sel[name][i]])), 3)
        print(rows[-1], flush=True)
    out = {"split": "train-2061", "questions": len(keep), "pool_questions": len(qs),
           "selection": "first N in release order without the 6 demonstration questions (questions whose facts add "
                        "no word left out of the means)",
           "index": index_info(a.index_dir),
           "pool": {"wikipedia": f"sentences of the best {a.pool_paragraphs} of the top-10 paragraphs "
                                 f"(FactSettings(sentence_paragraphs={a.pool_paragraphs}))",
                    "questions_with_an_annotated_paragraph_in_pool": round(float(np.mean(
                        [any(d["ref"] in g for _, s, d in pool if s == "wikipedia") for g, pool in zip(gold_ids, pools)])), 3),
                    "train_facts": f"the {TRAIN_POOL} best train-2061 annotated facts by BM25, the question's own left out",
                    "mean_candidates": round(float(np.mean([len(p) for p in pools])), 1)},
           "shown": 5, "features": list(features),
           "model": "sklearn HistGradientBoostingRegressor(max_iter=200, learning_rate=0.05), target = best "
                    "annotated-fact new-word coverage" + (f" + {a.gold_weight:g} if from an annotated evidence paragraph"
                                                           if a.gold_weight else "") + ", out-of-fold over GroupKFold(5) by term",
           "command": f"python bench/rerank_proxy.py --index-dir INDEX_DIR --limit {a.limit}"
                      + (f" --pool-paragraphs {a.pool_paragraphs}" if a.pool_paragraphs != 3 else "")
                      + (" --extra-features" if a.extra_features else "")
                      + (f" --gold-weight {a.gold_weight:g}" if a.gold_weight else "")
                      + (f" --pools {a.pools.as_posix()}" if a.pools else "")
                      + (f" --out {a.out.as_posix()}" if a.out != RESULTS else "")
                      + (f" --dump {a.dump}" if a.dump else ""),
           "metric": "new-information recall of the annotated facts (bench/fact_selection.py)",
           "seconds": round(time.perf_counter() - t0, 1), "rows": rows}
    a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
