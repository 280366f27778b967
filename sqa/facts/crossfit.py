"""Cross-fitted (out-of-fold) answers of the facts reader, and the final answer heads, from one set
of features records (``sqa eval --split train``).

Protocol (issue 35): the labelled questions are split into ``folds`` (5) folds by scikit-learn
``GroupKFold`` grouped by StrategyQA ``term`` (questions on one term never straddle folds). For each
outer fold, on that fold's *training* questions only (nested): every candidate feature set
(``crossfit_specs``) gets its regularisation C by an inner term-grouped CV (``search_c``,
log-loss), the facts feature set is chosen by a one-standard-error rule against the default (all
read-outs + retrieval scores; Hastie et al., ESL 7.10), and both heads (facts, no-retrieval "plain")
are fitted there and answer the held-out fold. The demonstration questions of the prompt
(``sqa.facts.prompt.demo_qids``) and unlabelled questions are answered but never fitted on
(``trainable`` False). The same search on all trainable questions then fits the final heads, which
record exactly the qids they were fitted on (``provenance["fitted_qids"]``).

Lean by design (the old ``sqa train-head`` compared 11 feature sets with a 9-value C grid in
23 min at 2,290 questions on 2 cores): 2 facts feature sets + the plain one, 3 inner folds, C on a
5-value grid (``C_STATES``, 1e-4..1e-2: on the 1.5B model's 2,055 train-2061 questions every
chosen C was 3e-4..1e-3, bench/results/head.json) for hidden-state features (liblinear's dual
solver, see ``_model``), 5 values (1e-3..10) for the few log-odds features of a model without hidden states
(served models).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from sqa.facts.head import SCALARS, AnswerHead, FeatureSpec, accuracy_interval, feature_vector, scalar_features

C_STATES = tuple(float(c) for c in np.logspace(-4, -2, 5))
C_LOG_ODDS = tuple(float(c) for c in np.logspace(-3, 1, 5))
PROTOCOL = "out-of-fold, {folds} term-grouped folds"


def crossfit_shortfall(questions, folds: int, demos=frozenset()) -> str | None:
    """Why ``questions`` (``sqa.types.Question``; known before any is read) cannot be cross-fitted
    into ``folds`` folds, or None: ``crossfit`` needs labelled questions, ``demos`` left out, of
    both answers on at least ``folds`` terms (StrategyQA ``term``; the qid when there is none)."""
    rows = {q.qid: q for q in questions if q.answer is not None and q.qid not in demos}
    terms = {q.term or q.qid for q in rows.values()}
    if len(terms) >= folds and len({bool(q.answer) for q in rows.values()}) == 2:
        return None
    return f"got {len(rows)} labelled question(s) on {len(terms)} term(s)"


def n_facts_of(records: Sequence[dict]) -> int:
    """The largest fact read-out ``fN`` in the records (0: no facts were read)."""
    return max(
        (int(k[1:]) for r in records for k in r.get("log_odds", {}) if k.startswith("f") and k[1:].isdigit()), default=0
    )


def has_states(records: Sequence[dict]) -> bool:
    """True when every record carries the plain read-out's hidden state (a served model gives
    log-odds only)."""
    return bool(records) and all("plain" in (r.get("states") or {}) for r in records)


def crossfit_specs(n_facts: int, states: bool) -> tuple[FeatureSpec, list[FeatureSpec]]:
    """(the plain spec, the facts candidates with the default last). With hidden states: plain =
    plain state + log-odds; facts = after the last fact (state, log-odds, retrieval scores), and the
    default plain + last fact. Without (``states`` False): the same read-outs' log-odds only; the
    default reads every fact's log-odds. No facts candidates when ``n_facts`` is 0."""
    last = f"f{n_facts}"
    if states:
        plain = FeatureSpec(("plain",), ("plain",))
        facts = [FeatureSpec((last,), (last,), SCALARS), FeatureSpec(("plain", last), ("plain", last), SCALARS)]
    else:
        plain = FeatureSpec((), ("plain",))
        facts = [
            FeatureSpec((), (last,), SCALARS),
            FeatureSpec((), ("plain", *(f"f{i}" for i in range(1, n_facts + 1))), SCALARS),
        ]
    return plain, (facts if n_facts else [])


def matrix(records: Sequence[dict], spec: FeatureSpec) -> np.ndarray:
    """Feature matrix (n, d) of ``records`` (states already decoded to arrays) for ``spec``."""
    return np.stack([feature_vector(spec, r.get("states") or {}, r["log_odds"], scalar_features(r)) for r in records])


def decode_states(records: Sequence[dict]) -> None:
    """Decode base64 states to float32 arrays in place (once)."""
    from sqa.facts.prompt import decode_state

    for r in records:
        st = r.get("states") or {}
        if st and isinstance(next(iter(st.values())), str):
            r["states"] = {k: decode_state(v) for k, v in st.items()}


@dataclass
class Choice:
    """One feature set's inner-CV result: the chosen C and the per-inner-fold log-loss at it."""

    spec: FeatureSpec
    C: float
    fold_loss: np.ndarray

    @property
    def loss(self) -> float:
        """Mean inner-fold log-loss at the chosen C."""
        return float(self.fold_loss.mean())


def _grid(X: np.ndarray) -> tuple[float, ...]:
    return C_STATES if X.shape[1] > 64 else C_LOG_ODDS


def _model(C: float, d: int):
    """An L2 logistic regression for standardised features of width ``d``. Wide (hidden states,
    more features than questions): liblinear's dual coordinate descent with ``intercept_scaling``
    100 (the intercept, which corrects the model's yes-bias, then carries a negligible penalty),
    5-6x faster than lbfgs and within 1e-3 of its P(yes) at C 1e-4..3e-3 (measured on 800 train-2061
    questions of the 1.5B model); narrow: lbfgs."""
    from sklearn.linear_model import LogisticRegression

    if d > 64:
        return LogisticRegression(
            C=C, solver="liblinear", dual=True, intercept_scaling=100.0, max_iter=5000, random_state=0
        )
    return LogisticRegression(C=C, max_iter=2000)


def search_c(spec: FeatureSpec, X: np.ndarray, y: np.ndarray, groups: np.ndarray, inner_folds: int) -> Choice:
    """C with the best mean log-loss over ``inner_folds`` term-grouped folds of these rows (features
    standardised on each inner training part)."""
    from sklearn.metrics import log_loss
    from sklearn.model_selection import GroupKFold
    from sklearn.preprocessing import StandardScaler

    k = min(inner_folds, len(set(groups.tolist())))
    grid = _grid(X)
    loss = np.zeros((k, len(grid)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # liblinear's occasional ConvergenceWarning at the largest C
        for i, (tr, va) in enumerate(GroupKFold(n_splits=k).split(X, y, groups)):
            if len(set(y[tr].tolist())) < 2:  # a tiny run: an inner part with one answer only says nothing
                loss[i] = np.nan
                continue
            sc = StandardScaler().fit(X[tr])
            a, b = sc.transform(X[tr]), sc.transform(X[va])
            for j, C in enumerate(grid):
                p = _model(C, X.shape[1]).fit(a, y[tr]).predict_proba(b)[:, 1]
                loss[i, j] = log_loss(y[va], np.clip(p, 1e-9, 1 - 1e-9), labels=[0, 1])
    ok = ~np.isnan(loss[:, 0])
    if not ok.any():
        return Choice(spec, 1e-3 if X.shape[1] > 64 else 1.0, np.zeros(1))
    best = int(np.argmin(loss[ok].mean(axis=0)))
    return Choice(spec, float(grid[best]), loss[ok, best])


def choose_facts(choices: Sequence[Choice]) -> Choice:
    """The default (last) facts feature set, unless another has a lower mean inner log-loss by more
    than one standard error of the per-fold difference (one-standard-error rule, ESL 7.10)."""
    default = choices[-1]
    best, margin = default, 0.0
    for c in choices[:-1]:
        if len(c.fold_loss) != len(default.fold_loss):
            continue
        d = default.fold_loss - c.fold_loss  # > 0: c better
        se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else float("inf")
        if float(d.mean()) - se > margin:
            best, margin = c, float(d.mean()) - se
    return best


def fit_folded(X: np.ndarray, y: np.ndarray, C: float) -> tuple[np.ndarray, float]:
    """(coef, intercept) of a standardised L2 logistic regression with the standardisation folded in
    (so P(yes) = sigmoid(x . coef + intercept) on raw features)."""
    from sklearn.preprocessing import StandardScaler

    if len(set(np.asarray(y).tolist())) < 2:  # one answer only (a tiny fold): its log-odds, smoothed
        rate = (float(np.sum(y)) + 1) / (len(y) + 2)
        return np.zeros(X.shape[1]), float(np.log(rate / (1 - rate)))
    sc = StandardScaler().fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lr = _model(C, X.shape[1]).fit(sc.transform(X), y)
    scale = np.where(sc.scale_ == 0, 1.0, sc.scale_)
    coef = lr.coef_[0] / scale
    return coef, float(lr.intercept_[0] - np.sum(lr.coef_[0] * sc.mean_ / scale))


def _p(X: np.ndarray, coef: np.ndarray, b: float) -> np.ndarray:
    z = np.clip(X.astype(np.float64) @ coef.astype(np.float64) + b, -60, 60)
    return 1.0 / (1.0 + np.exp(-z))


def auc(y: Sequence[bool], p: Sequence[float]) -> float | None:
    """ROC AUC (scikit-learn); None when only one class is present."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(y, dtype=int)
    return float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else None


@dataclass
class CrossFit:
    """Result of ``crossfit``: per row (the records' order) the facts head's and the plain head's
    P(yes) and the outer fold (-1: answered by the final heads, an unlabelled row); per outer fold
    the chosen feature set and Cs; the final heads; wall seconds."""

    qids: list[str]
    p_facts: np.ndarray | None
    p_plain: np.ndarray
    fold: np.ndarray
    folds: list[dict] = field(default_factory=list)
    heads: dict[str, AnswerHead] = field(default_factory=dict)
    seconds: float = 0.0
    protocol: str = ""

    def summary(self, y: Sequence[bool | None], exclude: set[str] = frozenset()) -> dict:
        """Out-of-fold accuracy (95 % interval) and AUC of both heads over the labelled rows
        (without ``exclude`` qids)."""
        out = {}
        rows = [i for i, (q, t) in enumerate(zip(self.qids, y)) if t is not None and q not in exclude]
        yy = np.asarray([bool(y[i]) for i in rows])
        for kind, p in (("facts", self.p_facts), ("plain", self.p_plain)):
            if p is None or not rows:
                continue
            pp = p[rows]
            acc, lo, hi = accuracy_interval((pp >= 0.5) == yy)
            a = auc(yy, pp)
            out[kind] = {
                "n": len(rows),
                "accuracy": round(acc, 4),
                "interval95": [round(lo, 4), round(hi, 4)],
                "auc": None if a is None else round(a, 4),
            }
        return out


def crossfit(
    records: Sequence[dict],
    y: Sequence[bool | None],
    groups: Sequence[str],
    trainable: Sequence[bool],
    *,
    model: str,
    model_sha256: str | None,
    provenance: dict,
    folds: int = 5,
    inner_folds: int = 3,
    log: Callable[[str], None] = lambda s: None,
) -> CrossFit:
    """Out-of-fold P(yes) of every labelled row and the final heads (see the module doc).

    ``records``: features dicts (``QuestionFeatures.to_dict()``; states decoded here in place);
    ``y``: gold answer per row (None: unlabelled, answered by the final heads); ``groups``: the
    StrategyQA term per row (the qid when there is none); ``trainable``: False for rows never fitted
    on (demonstrations). ``provenance`` is copied into both heads, plus ``fitted_qids``, ``C``,
    ``kind`` and the out-of-fold figures. Raises SqaError when fewer than ``folds`` term groups or
    only one class are trainable."""
    from sklearn.model_selection import GroupKFold

    from sqa.types import SqaError

    t0 = time.perf_counter()
    decode_states(records)
    n = len(records)
    qids = [r["qid"] for r in records]
    lab = np.array([v is not None for v in y])
    yv = np.array([bool(v) if v is not None else False for v in y], dtype=int)
    tr_mask = lab & np.asarray(trainable, dtype=bool)
    gid = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    g = np.array([gid[x] for x in groups])
    n_groups = len(set(g[tr_mask].tolist()))
    if n_groups < folds or len(set(yv[tr_mask].tolist())) < 2:
        raise SqaError(
            f"cross-fitting needs labelled questions of both answers on at least {folds} terms "
            f"(got {int(tr_mask.sum())} questions on {n_groups} terms); use a larger --limit"
        )
    states = has_states(records)
    plain_spec, facts_specs = crossfit_specs(n_facts_of(records), states)
    X = {s: matrix(records, s) for s in [plain_spec, *facts_specs]}

    def select(rows: np.ndarray) -> tuple[Choice, Choice | None]:
        ch = [search_c(s, X[s][rows], yv[rows], g[rows], inner_folds) for s in [plain_spec, *facts_specs]]
        return ch[0], (choose_facts(ch[1:]) if facts_specs else None)

    p_plain = np.full(n, np.nan)
    p_facts = np.full(n, np.nan) if facts_specs else None
    fold = np.full(n, -1)
    fold_info = []
    lab_idx = np.flatnonzero(lab)
    for f, (_, te_rel) in enumerate(GroupKFold(n_splits=folds).split(lab_idx, yv[lab_idx], g[lab_idx])):
        te = lab_idx[te_rel]
        tr = np.flatnonzero(tr_mask & ~np.isin(np.arange(n), te))
        cp, cf = select(tr)
        info = {
            "fold": f,
            "n_fit": int(len(tr)),
            "n_answered": int(len(te)),
            "plain": {"spec": cp.spec.name, "C": cp.C},
        }
        coef, b = fit_folded(X[cp.spec][tr], yv[tr], cp.C)
        p_plain[te] = _p(X[cp.spec][te], coef, b)
        if cf is not None:
            coef, b = fit_folded(X[cf.spec][tr], yv[tr], cf.C)
            p_facts[te] = _p(X[cf.spec][te], coef, b)
            info["facts"] = {"spec": cf.spec.name, "C": cf.C}
        fold[te] = f
        fold_info.append(info)
        log(
            f"fold {f + 1}/{folds}: fitted on {len(tr)}, answered {len(te)}; facts {info.get('facts')}, plain C={cp.C:.3g}"
        )
    result = CrossFit(qids, p_facts, p_plain, fold, fold_info, protocol=PROTOCOL.format(folds=folds))
    oof = result.summary(
        [None if not lab[i] else bool(yv[i]) for i in range(n)], exclude={qids[i] for i in range(n) if not tr_mask[i]}
    )
    tr = np.flatnonzero(tr_mask)
    cp, cf = select(tr)
    fitted = [qids[i] for i in tr]
    for kind, ch in (("plain", cp), ("facts", cf)):
        if ch is None:
            continue
        coef, b = fit_folded(X[ch.spec][tr], yv[tr], ch.C)
        prov = {
            **provenance,
            "kind": kind,
            "train_size": len(fitted),
            "C": ch.C,
            "folds": folds,
            "grouped_by": "term",
            "protocol": result.protocol,
            "cross_validated": oof.get(kind),
            "fitted_qids": fitted,
        }
        result.heads[kind] = AnswerHead(ch.spec, coef.astype(np.float32), b, model, model_sha256, prov)
        rest = np.flatnonzero(~lab)  # unlabelled rows: the final heads answer them (never fitted on)
        if len(rest):
            target = p_plain if kind == "plain" else p_facts
            target[rest] = _p(X[ch.spec][rest], coef, b)
    result.seconds = time.perf_counter() - t0
    log(f"final heads fitted on {len(fitted)} questions ({result.seconds:.0f} s in all)")
    return result
