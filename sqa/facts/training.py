"""Training the answer head as the retired ``sqa train-head`` did (kept for bench/ scripts; today's
runs use ``sqa.facts.crossfit`` through ``sqa eval --split train``): features over train-2061,
cross-validated choice of the feature set, the fitted heads and their report.

Protocol (the answer-quality issue): 5-fold cross-fitting grouped by StrategyQA ``term`` (questions
on the same term never straddle folds; scikit-learn ``GroupKFold``), out-of-fold predictions for
every train question, the regularisation chosen by grouped CV, the 6 fixed demonstration questions
left out. Two heads are written: ``plain`` (no retrieval: the plain prompt's features only) and
``facts`` (the feature set with the best out-of-fold accuracy among those that read facts).
Dev is never read here.
"""

from __future__ import annotations

from pathlib import Path
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from sqa.facts.head import (
    SCALARS,
    AnswerHead,
    FeatureSpec,
    accuracy_interval,
    choose_c,
    feature_vector,
    fit_head,
    out_of_fold,
    paired_difference,
    scalar_features,
)


def candidate_specs(n_facts: int) -> list[FeatureSpec]:
    """The feature sets compared: plain alone (no retrieval); after N facts alone; plain + after N
    facts (N = 1..n_facts), the latter two with the retrieval scores."""
    specs = [FeatureSpec(("plain",), ("plain",))]
    for n in range(1, n_facts + 1):
        specs.append(FeatureSpec((f"f{n}",), (f"f{n}",), SCALARS))
        specs.append(FeatureSpec(("plain", f"f{n}"), ("plain", f"f{n}"), SCALARS))
    return specs


@dataclass
class Dataset:
    """Feature records (dicts from a features file) with labels and term groups, in a fixed order."""

    records: list[dict]
    y: np.ndarray
    groups: np.ndarray
    qids: list[str]

    @classmethod
    def build(cls, records: Sequence[dict], questions_by_id: dict) -> "Dataset":
        recs = [
            r
            for r in records
            if questions_by_id.get(r["qid"]) is not None and questions_by_id[r["qid"]].answer is not None
        ]
        from sqa.facts.prompt import decode_state

        for r in recs:  # decode once
            if r["states"] and isinstance(next(iter(r["states"].values())), str):
                r["states"] = {k: decode_state(v) for k, v in r["states"].items()}
        y = np.array([bool(questions_by_id[r["qid"]].answer) for r in recs], dtype=int)
        terms = [questions_by_id[r["qid"]].term or r["qid"] for r in recs]
        ids = {t: i for i, t in enumerate(dict.fromkeys(terms))}
        return cls(recs, y, np.array([ids[t] for t in terms]), [r["qid"] for r in recs])

    def matrix(self, spec: FeatureSpec) -> np.ndarray:
        return np.stack([feature_vector(spec, r["states"], r["log_odds"], scalar_features(r)) for r in self.records])


def verbalised(ds: Dataset, readout: str) -> np.ndarray:
    """P(yes) the model itself gives at a read-out (sigmoid of its yes/no log-odds)."""
    from sqa.facts.head import feature_vector as fv

    lo = np.array([fv(FeatureSpec((), (readout,)), {}, r["log_odds"], {})[0] for r in ds.records])
    return 1 / (1 + np.exp(-lo))


def cross_validate(ds: Dataset, specs: Sequence[FeatureSpec], folds: int = 5, log=print) -> list[dict]:
    """Out-of-fold accuracy (with its 95 % interval), log-loss and AUC of each spec. C is chosen
    once per spec by grouped CV on all rows (9 values; a mild optimism noted in the report), then
    the out-of-fold predictions use it."""
    from sklearn.metrics import log_loss, roc_auc_score

    rows = []
    for spec in specs:
        X = ds.matrix(spec)
        C = choose_c(X, ds.y, ds.groups, folds)
        p, _ = out_of_fold(X, ds.y, ds.groups, folds, fixed_c=C)
        correct = (p >= 0.5) == ds.y.astype(bool)
        acc, lo, hi = accuracy_interval(correct)
        row = {
            "spec": spec.to_dict(),
            "name": spec.name,
            "C": C,
            "accuracy": round(acc, 4),
            "interval95": [round(lo, 4), round(hi, 4)],
            "log_loss": round(float(log_loss(ds.y, p)), 4),
            "auc": round(float(roc_auc_score(ds.y, p)), 4),
            "yes_rate": round(float(np.mean(p >= 0.5)), 4),
            "oof": p.tolist(),
            "n_features": int(X.shape[1]),
        }
        rows.append(row)
        log(f"{spec.name:40s} C={C:.4g} acc {acc:.3f} [{lo:.3f}, {hi:.3f}] AUC {row['auc']:.3f}")
    return rows


def choose(rows: Sequence[dict], y: np.ndarray | None = None) -> tuple[dict, dict]:
    """(the plain row, the chosen facts row). The default facts head reads everything: the plain
    prompt and the facts prompt after the last fact, plus the retrieval scores (the last candidate
    spec). Another facts spec replaces it only when its out-of-fold accuracy beats the default's by
    more than one standard error of the paired difference (with ``y``; a one-standard-error rule,
    Hastie et al., ESL 7.10), so a noisy argmax over a dozen specs does not decide."""
    plain = next(r for r in rows if r["spec"]["states"] == ["plain"])
    facts = [r for r in rows if FeatureSpec.from_dict(r["spec"]).uses_facts]
    default = facts[-1]
    if y is None:
        return plain, default
    yb = np.asarray(y).astype(bool)
    base = (np.asarray(default["oof"]) >= 0.5) == yb
    best, best_margin = default, 0.0
    for r in facts[:-1]:
        d = ((np.asarray(r["oof"]) >= 0.5) == yb).astype(float) - base.astype(float)
        se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("inf")
        margin = float(d.mean()) - se
        if margin > best_margin:
            best, best_margin = r, margin
    return plain, best


def report(ds: Dataset, rows: Sequence[dict]) -> dict:
    """The comparison of the chosen facts head with the plain head on the same out-of-fold
    questions (paired), and the model's own verbalised answers."""
    plain, best = choose(rows, ds.y)
    y = ds.y.astype(bool)
    a = (np.asarray(best["oof"]) >= 0.5) == y
    b = (np.asarray(plain["oof"]) >= 0.5) == y
    d, dlo, dhi = paired_difference(a, b)
    verbal = {}
    for name in ("plain", f"f{max(int(s[1:]) for r in ds.records for s in r['log_odds'] if s != 'plain')}"):
        pv = verbalised(ds, name)
        acc, lo, hi = accuracy_interval((pv >= 0.5) == y)
        verbal[name] = {
            "accuracy": round(acc, 4),
            "interval95": [round(lo, 4), round(hi, 4)],
            "yes_rate": round(float(np.mean(pv >= 0.5)), 4),
        }
    return {
        "n": len(y),
        "majority_no": round(float(np.mean(~y)), 4),
        "chosen_facts": best["name"],
        "choice_rule": "plain + facts after the last fact + retrieval scores, unless another facts spec beats it "
        "by more than one standard error of the paired out-of-fold difference",
        "plain_name": plain["name"],
        "facts_prefix": {k: best[k] for k in ("accuracy", "interval95", "auc", "log_loss", "C")},
        "plain_head": {k: plain[k] for k in ("accuracy", "interval95", "auc", "log_loss", "C")},
        "facts_minus_plain": {
            "difference": round(d, 4),
            "interval95": [round(dlo, 4), round(dhi, 4)],
            "paired_on": len(y),
        },
        "verbalised": verbal,
    }


def model_sha256(model) -> str | None:
    """sha256 of a loaded model's weights file (``model.path``; None for a transformers or served
    model): the registry's for a built-in model (checked when it was assembled), else the file's."""
    if model.path is None:
        return None
    from sqa.hashing import file_sha256
    from sqa.models.registry import MODELS

    for spec in MODELS.values():  # built-in models: checked against this sha256 when assembled
        if model.name == spec.name and Path(model.path).name == spec.filename:
            return spec.sha256
    return file_sha256(model.path)


def fit_heads(
    ds: Dataset, rows: Sequence[dict], model_name: str, sha: str | None, provenance: dict, folds: int = 5
) -> dict[str, AnswerHead]:
    """Fit the plain and the chosen facts head on all rows of ``ds``."""
    plain, best = choose(rows, ds.y)
    out = {}
    for kind, row in (("plain", plain), ("facts", best)):
        spec = FeatureSpec.from_dict(row["spec"])
        X = ds.matrix(spec)
        prov = {
            **provenance,
            "kind": kind,
            "train_size": len(ds.y),
            "cross_validated": {k: row[k] for k in ("accuracy", "interval95", "auc", "log_loss")},
        }
        out[kind] = fit_head(X, ds.y, ds.groups, spec, model_name, sha, prov, folds)
    return out
