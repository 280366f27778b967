"""Paired comparison of ``sqa eval`` runs on the questions they share (``sqa compare``).

A run folder is read from its files alone (``run.json``, ``traces.jsonl`` or the recorded
``traces.jsonl.xz``, else ``predictions.json``); gold answers and evidence annotations come from the
split its ``run.json`` names (``sqa.strategyqa``), or, for a ``--dataset`` run, from the gold answer
each trace line records (no evidence annotations then, so no Recall@10).

On the labelled questions every run answered:

- each run's Accuracy with the 95 % interval :mod:`sqa.eval.run_metrics` reports (Wilson score
  interval, ``accuracy_interval95``), and its mean Recall@10 where defined;
- for every pair (A, B): the paired difference Accuracy(A) - Accuracy(B) with a 95 % percentile
  interval from a paired bootstrap (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
  ch. 13: questions resampled with replacement, ``RESAMPLES`` = 10,000 times, numpy's
  ``default_rng(SEED)``, ``SEED`` = 0, so the interval is the same on every machine);
  McNemar's exact test (McNemar 1947; the exact form: a two-sided binomial test of the discordant
  pairs, b = A right and B wrong, c = A wrong and B right, against p = 0.5,
  ``scipy.stats.binomtest``; p = 1 when b + c = 0); and the counts b and c;
- the same for Recall@10 where both runs retrieved evidence for annotated questions: the mean
  difference with its paired-bootstrap interval, how many questions each run recalled more of,
  and the Wilcoxon signed-rank test of the per-question differences (``scipy.stats.wilcoxon``,
  zero differences dropped; None when all are zero);
- the questions behind McNemar's counts: per pair, the qids only A got right and those only B got
  right (``Comparison.only_right``; ``only_a_qids`` / ``only_b_qids`` in ``to_dict``);
- with more than two runs, each McNemar p-value also Holm-adjusted over all the pairs
  (:func:`holm_adjusted`; Holm, "A Simple Sequentially Rejective Multiple Test Procedure",
  Scandinavian Journal of Statistics 6(2), 1979), which controls the family-wise error rate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sqa.eval.coverage import record_calibrated
from sqa.eval.metrics import recall_at_k
from sqa.eval.rundir import RUN_FILE, TRACES_FILE, read_recorded_traces
from sqa.types import SqaError

SEED = 0
RESAMPLES = 10_000


@dataclass
class RunData:
    """One run as ``sqa compare`` reads it: ``rows`` maps qid -> {question, gold, answer, correct,
    p_yes (None from predictions.json alone), calibrated, recall (None when undefined), ...}."""

    path: Path
    name: str
    run: dict
    rows: dict[str, dict]
    has_recall: bool
    records: dict[str, dict] = field(default_factory=dict, repr=False)  # the trace records by qid

    @property
    def options(self) -> dict:
        return self.run.get("options") or {}

    @property
    def label(self) -> str:
        """The preset (or reader) and protocol the run was made with, e.g. ``facts, dev-229``."""
        o = self.options
        what = o.get("preset") or o.get("reader") or "?"
        if self.run.get("protocol"):
            return f"{what}, {self.run['protocol']}"
        from sqa.eval.protocols import protocol_of  # a run recorded before run.json named its question set

        return f"{what}, {protocol_of(o.get('split', ''), len(self.rows)) or o.get('split', '?')}"


@dataclass
class RunStats:
    """One run on the shared questions: ``n_answered`` labelled questions in the run,
    ``left_out`` of them not shared by every run; Accuracy (fraction) and its 95 % interval;
    mean Recall@10 (None where undefined); ``cost``: a method's (``sqa.methods``) mean cost per
    shared question, from its traces' ``method.cost`` (None for the readers, or from
    predictions.json alone)."""

    name: str
    path: str
    label: str
    n_answered: int
    left_out: int
    correct: int
    accuracy: float
    interval95: list[float]
    recall: float | None = None
    cost: dict | None = None  # a method's mean cost per shared question (calls, tokens, retrievals, seconds)


@dataclass
class PairStats:
    """Run ``a`` against run ``b`` on ``n`` shared questions. ``difference`` = Accuracy(a) -
    Accuracy(b), ``interval95`` its paired-bootstrap 95 % interval; ``only_a`` = questions a got
    right and b wrong (McNemar's b), ``only_b`` the reverse (c); ``mcnemar_p`` the exact two-sided
    p-value. ``recall``: {a, b, difference, interval95, higher_a, higher_b, wilcoxon_p} or None."""

    a: str
    b: str
    n: int
    accuracy_a: float
    accuracy_b: float
    difference: float
    interval95: list[float]
    only_a: int
    only_b: int
    both_right: int
    both_wrong: int
    mcnemar_p: float
    recall: dict | None = None


@dataclass
class Comparison:
    """The result of :func:`compare_runs`: ``qids`` shared (in the first run's order), one
    :class:`RunStats` per run, one :class:`PairStats` per pair (i < j), and the bootstrap's seed
    and number of resamples. ``data`` keeps the runs read (for reports; not in ``to_dict``)."""

    qids: list[str]
    runs: list[RunStats]
    pairs: list[PairStats]
    seed: int = SEED
    resamples: int = RESAMPLES
    data: list[RunData] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        """JSON-serialisable: n, seed, resamples, runs, pairs (the ``sqa compare --json`` object).
        Each pair also has ``only_a_qids`` / ``only_b_qids`` (:meth:`only_right`, in the first
        run's order; absent when the runs' data were not kept) and ``mcnemar_p_holm`` (:attr:`holm_p`,
        equal to ``mcnemar_p`` for two runs)."""
        pairs = []
        for p, holm in zip(self.pairs, self.holm_p):
            d = asdict(p)
            if self.data:
                d["only_a_qids"], d["only_b_qids"] = self.only_right(p.a, p.b), self.only_right(p.b, p.a)
            d["mcnemar_p_holm"] = holm
            pairs.append(d)
        return {
            "n": len(self.qids),
            "seed": self.seed,
            "resamples": self.resamples,
            "interval": "Accuracy: Wilson score; differences: paired bootstrap percentile",
            "multiple_comparisons": "mcnemar_p_holm: McNemar p-values Holm-adjusted over all pairs (Holm 1979)",
            "runs": [asdict(r) for r in self.runs],
            "pairs": pairs,
        }

    def __repr__(self) -> str:
        """One line: the runs' accuracies and each pair's McNemar p (and Holm p for 3+ runs)."""
        from sqa.display import comparison_repr

        return comparison_repr(self)

    def _repr_html_(self) -> str:
        """The runs and the pairs as HTML tables (Jupyter), escaped."""
        from sqa.display import comparison_html

        return comparison_html(self)

    def table(self):
        """A ``rich.table.Table`` with one row per pair: A, B, n, both accuracies, A - B with its
        95 % paired-bootstrap interval, McNemar p, Holm p (more than two runs), only A right, only
        B right (``sqa.display.comparison_rows`` gives the same rows as dicts). Print it with
        ``rich.print`` or show it in Jupyter."""
        from sqa.display import comparison_table

        return comparison_table(self)

    @property
    def holm_p(self) -> list[float]:
        """The pairs' McNemar p-values Holm-adjusted over all pairs (:func:`holm_adjusted`), in the
        order of ``pairs``; for two runs (one pair) the raw p-value."""
        return holm_adjusted([p.mcnemar_p for p in self.pairs])

    def only_right(self, a: str | int, b: str | int) -> list[str]:
        """The shared qids (in ``qids`` order) run ``a`` answered right and run ``b`` wrong: ``a``
        and ``b`` are run names (as in ``runs[i].name`` and the pairs) or indexes into ``runs``.
        Needs the runs' data (kept by :func:`compare_runs`); raises SqaError for an unknown run or
        a Comparison without its data."""
        if not self.data:
            raise SqaError("this Comparison kept no per-question data; make it with sqa.compare / compare_runs")
        ra, rb = self._rows_of(a), self._rows_of(b)
        return [q for q in self.qids if ra[q]["correct"] and not rb[q]["correct"]]

    def _rows_of(self, run: str | int) -> dict[str, dict]:
        names = [r.name for r in self.runs]
        if isinstance(run, int) and 0 <= run < len(self.data):
            return self.data[run].rows
        if run in names:
            return self.data[names.index(run)].rows
        raise SqaError(f"no run {run!r} in this comparison; use one of {', '.join(names)} or an index")


def load_run(path: str | Path) -> RunData:
    """Read one run folder (see the module doc). Raises SqaError naming the folder when it has no
    ``run.json`` or no answers (traces or predictions)."""
    from sqa.strategyqa import load_questions

    run_dir = Path(path)
    if not (run_dir / RUN_FILE).is_file():
        raise SqaError(f"{run_dir}: no {RUN_FILE}; give the folder of an `sqa eval` run")
    try:
        run = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except ValueError as e:
        raise SqaError(f"{run_dir / RUN_FILE}: not valid JSON ({e})") from None
    opts = run.get("options") or {}
    records = read_recorded_traces(run_dir)
    if records is None:
        pred = run_dir / "predictions.json"
        if not pred.exists():
            raise SqaError(f"{run_dir}: neither {TRACES_FILE}(.xz) nor predictions.json; nothing to compare")
        from sqa.eval.leaderboard import load_predictions

        records = {
            qid: {"qid": qid, "answer": p["answer"], "p_yes": None, "paragraphs": p.get("paragraphs", [])}
            for qid, p in load_predictions(pred).items()
        }
    split = opts.get("split", "dev")
    known = {q.qid: q for q in load_questions(split)} if split != "custom" else {}
    retrieved = opts.get("retrieval", True) or bool(opts.get("oracle"))
    has_recall = retrieved and any(known[q].evidence for q in records if q in known)
    rows: dict[str, dict] = {}
    for qid, rec in records.items():
        q = known.get(qid)
        gold = q.answer if q is not None else (rec.get("eval") or {}).get("gold")
        if gold is None:
            continue
        answer = bool(rec.get("answer"))
        rows[qid] = {
            "qid": qid,
            "question": q.question if q else rec.get("question", ""),
            "gold": gold,
            "answer": answer,
            "correct": answer == gold,
            "p_yes": rec.get("p_yes"),
            "calibrated": record_calibrated(rec),
            "recall": recall_at_k(q.evidence, rec.get("paragraphs") or []) if has_recall and q else None,
        }
    return RunData(
        path=run_dir, name=run_dir.name or str(run_dir), run=run, rows=rows, has_recall=has_recall, records=records
    )


COST_KEYS = ("calls", "generated_tokens", "prompt_tokens", "retrievals", "seconds")


def method_cost(run: RunData, qids: list[str]) -> dict | None:
    """Mean ``method.cost`` over ``qids`` of a method's run (a key is None where a question lacks
    it, e.g. tokens a model did not count); None when the run's records carry no method cost."""
    from sqa.eval.run_metrics import mean_cost

    costs = [(run.records.get(q) or {}).get("method", {}).get("cost") for q in qids]
    if not qids or not all(isinstance(c, dict) for c in costs):
        return None
    return mean_cost(costs, COST_KEYS, digits=3)


def _bootstrap_interval(diffs, rng, resamples: int) -> list[float]:
    """95 % percentile interval of the mean of ``diffs`` over ``resamples`` paired resamples."""
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    n = len(d)
    means = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(n, 1))
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        means[start : start + m] = d[rng.integers(0, n, size=(m, n))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact two-sided p-value for ``b`` and ``c`` discordant pairs: the binomial test of
    b successes in b + c trials against 0.5 (``scipy.stats.binomtest``); 1.0 when b + c = 0.
    E.g. b=7, c=2: 2 * P(X <= 2 | n=9, p=0.5) = 0.1797."""
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


def holm_adjusted(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the order given: sort the m p-values
    ascending, multiply the i-th smallest (i from 0) by m - i, take the running maximum and cap at 1.
    Rejecting where the adjusted value is below alpha controls the family-wise error rate at alpha.
    E.g. [0.01, 0.04, 0.03] -> [0.03, 0.06, 0.06]."""
    m, running = len(pvalues), 0.0
    out = [1.0] * m
    for rank, i in enumerate(sorted(range(m), key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def _wilcoxon(diffs: Sequence[float]) -> float | None:
    if not any(diffs):
        return None
    from scipy.stats import wilcoxon

    return float(wilcoxon(diffs, zero_method="wilcox").pvalue)


def _scipy_check() -> None:
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        raise SqaError("sqa compare's tests (McNemar, Wilcoxon) need scipy: pip install 'sqa[models]'") from None


def compare_loaded(runs: Sequence[RunData], seed: int = SEED, resamples: int = RESAMPLES) -> Comparison:
    """:func:`compare_runs` on runs already read by :func:`load_run`."""
    import numpy as np

    from sqa.eval.run_metrics import accuracy_interval95

    if len(runs) < 2:
        raise SqaError("sqa compare needs at least two run folders")
    _scipy_check()
    shared = set(runs[0].rows)
    for r in runs[1:]:
        shared &= set(r.rows)
    if not shared:
        sizes = ", ".join(f"{r.name}: {len(r.rows)} labelled questions ({r.options.get('split', '?')})" for r in runs)
        raise SqaError(f"the runs share no labelled question ({sizes}); compare runs over the same questions")
    qids = [q for q in runs[0].rows if q in shared]
    names = [r.name for r in runs]
    if len(set(names)) < len(names):
        for r in runs:
            r.name = str(r.path)
    stats = []
    for r in runs:
        rows = [r.rows[q] for q in qids]
        stats.append(
            RunStats(
                name=r.name,
                path=str(r.path),
                label=r.label,
                n_answered=len(r.rows),
                left_out=len(r.rows) - len(qids),
                correct=sum(x["correct"] for x in rows),
                accuracy=sum(x["correct"] for x in rows) / len(rows),
                interval95=accuracy_interval95(rows),
                recall=sum(x["recall"] for x in rows) / len(rows) if r.has_recall else None,
                cost=method_cost(r, qids),
            )
        )
    pairs = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            a, b = runs[i], runs[j]
            ca = np.array([a.rows[q]["correct"] for q in qids], dtype=float)
            cb = np.array([b.rows[q]["correct"] for q in qids], dtype=float)
            only_a = int(((ca == 1) & (cb == 0)).sum())
            only_b = int(((ca == 0) & (cb == 1)).sum())
            rng = np.random.default_rng(seed)
            pair = PairStats(
                a=a.name,
                b=b.name,
                n=len(qids),
                accuracy_a=float(ca.mean()),
                accuracy_b=float(cb.mean()),
                difference=float(ca.mean() - cb.mean()),
                interval95=_bootstrap_interval(ca - cb, rng, resamples),
                only_a=only_a,
                only_b=only_b,
                both_right=int(((ca == 1) & (cb == 1)).sum()),
                both_wrong=int(((ca == 0) & (cb == 0)).sum()),
                mcnemar_p=mcnemar_exact(only_a, only_b),
            )
            if a.has_recall and b.has_recall:
                ra = np.array([a.rows[q]["recall"] for q in qids])
                rb = np.array([b.rows[q]["recall"] for q in qids])
                d = ra - rb
                pair.recall = {
                    "a": float(ra.mean()),
                    "b": float(rb.mean()),
                    "difference": float(d.mean()),
                    "interval95": _bootstrap_interval(d, np.random.default_rng(seed), resamples),
                    "higher_a": int((d > 0).sum()),
                    "higher_b": int((d < 0).sum()),
                    "wilcoxon_p": _wilcoxon(d.tolist()),
                }
            pairs.append(pair)
    return Comparison(qids=qids, runs=stats, pairs=pairs, seed=seed, resamples=resamples, data=list(runs))


def compare_runs(paths: Sequence[str | Path], seed: int = SEED, resamples: int = RESAMPLES) -> Comparison:
    """Compare two or more ``sqa eval`` run folders on the labelled questions they all answered
    (see the module doc for the statistics and their sources).

    Returns a :class:`Comparison`. Raises SqaError (one line) for fewer than two folders, a folder
    that is not a run, runs that share no labelled question (naming how many each has), or a
    missing scipy (the models extra)."""
    return compare_loaded([load_run(p) for p in paths], seed=seed, resamples=resamples)
