"""The outputs of a run, regenerated from its traces: ``predictions.json`` (official leaderboard
format), ``metrics.json``, ``report.md``, ``report.html`` (:mod:`sqa.eval.html`) and ``report.png``
(:func:`finalize_run`).

``metrics.json`` holds the official metrics (Accuracy, Recall@10, SARI; :mod:`sqa.eval.leaderboard`),
the majority baseline, calibration (reliability bins and ECE), accuracy at 50 / 80 / 100 % coverage
with the accuracy-coverage curve (:mod:`sqa.eval.coverage`), accuracy by number of steps, the
P(yes) readings recorded in the traces, few-shot provenance, timings, the options and the index
identity. The hidden-label test split gets predictions only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from sqa.eval.coverage import coverage_metrics, record_calibrated
from sqa.eval.fewshot import fewshot_description
from sqa.eval.leaderboard import score_predictions, validate_predictions
from sqa.eval.metrics import recall_at_k
from sqa.eval.options import EvalOptions
from sqa.eval.protocols import ZERO_SHOT_CUT, question_set
from sqa.eval.rundir import TRACES_FILE, invocation, now, result_from_dict
from sqa.jsonio import write_json_atomic
from sqa.types import Question

PREDICTIONS_FILE = "predictions.json"
METRICS_FILE = "metrics.json"
REPORT_MD = "report.md"
REPORT_PNG = "report.png"


@dataclass
class EvalSummary:
    """What a run produced: counts, the metrics (None for the test split or before any answer),
    whether it was interrupted, and the files written."""

    out_dir: Path
    total: int
    done: int
    new: int
    metrics: dict | None
    interrupted: bool = False
    repaired_bytes: int = 0
    files: list[Path] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.done == self.total


def question_rows(questions: Sequence[Question], done: dict[str, dict]) -> list[dict]:
    """One row per answered question (in split order): qid, question, gold, answer, correct,
    p_yes, confidence, n_steps, recall (Recall@10; None without labels), decomposition, seconds."""
    rows = []
    for q in questions:
        rec = done.get(q.qid)
        if rec is None:
            continue
        r = result_from_dict(rec)
        labelled = q.answer is not None
        ev = rec.get("eval") or {}
        rows.append(
            {
                "qid": q.qid,
                "question": q.question,
                "gold": q.answer,
                "answer": bool(r.answer),
                "correct": (bool(r.answer) == q.answer) if labelled else None,
                "p_yes": float(r.p_yes),
                "confidence": float(r.confidence),
                "calibrated": record_calibrated(rec),
                "n_steps": len(r.steps),
                "recall": recall_at_k(q.evidence, r.paragraphs) if labelled else None,
                "decomposition": r.decomposition,
                "paragraphs": list(r.paragraphs),
                "seconds": ev.get("seconds"),
                "timings": dict(r.timings),
                "fewshot_pool": ev.get("fewshot_pool"),
                "fewshot_qids": rec.get("fewshot_qids"),
                "signals": dict(rec.get("signals") or {}),
                "demonstration": bool(ev.get("demonstration")),
            }
        )
    return rows


def calibration_bins(rows: Sequence[dict], n_bins: int = 10) -> list[dict]:
    """Reliability table: labelled rows binned by confidence into ``n_bins`` equal-width bins on
    [0, 1]; each bin gives lo, hi, n, mean confidence and accuracy (None when empty)."""
    bins = [
        {"lo": i / n_bins, "hi": (i + 1) / n_bins, "n": 0, "confidence": None, "accuracy": None} for i in range(n_bins)
    ]
    sums = [[0.0, 0.0] for _ in range(n_bins)]
    for r in rows:
        if r["correct"] is None:
            continue
        i = min(int(r["confidence"] * n_bins), n_bins - 1)
        bins[i]["n"] += 1
        sums[i][0] += r["confidence"]
        sums[i][1] += float(r["correct"])
    for b, (c, a) in zip(bins, sums):
        if b["n"]:
            b["confidence"] = c / b["n"]
            b["accuracy"] = a / b["n"]
    return bins


def expected_calibration_error(bins: Sequence[dict]) -> float | None:
    """ECE (Guo et al., "On Calibration of Modern Neural Networks", ICML 2017):
    sum over bins of n_b / n * |accuracy_b - confidence_b|; None without labelled rows."""
    n = sum(b["n"] for b in bins)
    if not n:
        return None
    return sum(b["n"] / n * abs(b["accuracy"] - b["confidence"]) for b in bins if b["n"])


def signal_accuracy(rows: Sequence[dict]) -> dict[str, dict]:
    """Accuracy (P(yes) >= 0.5) and mean P(yes) of every P(yes) reading recorded for all labelled
    rows (``--signals``; see ``sqa.steps.reader.StepsReader``): e.g. ``plain`` is the no-retrieval answer of the
    same questions. ``{name: {"n", "Accuracy", "mean_p_yes"}}``; empty when none was recorded."""
    labelled = [r for r in rows if r["correct"] is not None]
    if not labelled:
        return {}
    names = [n for n in labelled[0]["signals"] if all(n in r["signals"] for r in labelled)]
    out = {}
    for n in names:
        ps = [float(r["signals"][n]) for r in labelled]
        out[n] = {
            "n": len(ps),
            "Accuracy": sum((p >= 0.5) == bool(r["gold"]) for p, r in zip(ps, labelled)) / len(ps),
            "mean_p_yes": sum(ps) / len(ps),
        }
    return out


def accuracy_interval95(rows: Sequence[dict]) -> list[float] | None:
    """``[low, high]``, the Wilson score 95 % interval of the accuracy of the labelled rows
    (``sqa.facts.head.accuracy_interval``, with its sources), rounded to 4 places; None without any."""
    from sqa.facts.head import accuracy_interval

    c = [bool(r["correct"]) for r in rows if r["correct"] is not None]
    if not c:
        return None
    _, lo, hi = accuracy_interval(c)
    return [round(lo, 4), round(hi, 4)]


def auc_of(rows: Sequence[dict]) -> float | None:
    """ROC AUC of P(yes) against the gold answers of the labelled rows (the Mann-Whitney statistic,
    ties counted half); None unless both answers occur."""
    lab = [(r["p_yes"], bool(r["gold"])) for r in rows if r["correct"] is not None]
    pos = [p for p, g in lab if g]
    neg = [p for p, g in lab if not g]
    if not pos or not neg:
        return None
    import bisect

    neg.sort()
    wins = sum(
        bisect.bisect_left(neg, p) + 0.5 * (bisect.bisect_right(neg, p) - bisect.bisect_left(neg, p)) for p in pos
    )
    return wins / (len(pos) * len(neg))


def demonstrations_summary(rows: Sequence[dict]) -> dict | None:
    """metrics.json's ``demonstrations``: the answered questions that are the facts reader's fixed
    demonstrations (their answer is in the prompt: ``sqa.eval.protocols.DEMONSTRATION_NOTE``), how
    many, their qids and the accuracy with its interval without them; None when there are none."""
    from sqa.eval.protocols import DEMONSTRATION_NOTE

    demos = [r for r in rows if r.get("demonstration")]
    if not demos:
        return None
    rest = [r for r in rows if not r.get("demonstration") and r["correct"] is not None]
    return {
        "n": len(demos),
        "qids": [r["qid"] for r in demos],
        "without_demonstrations": {
            "n": len(rest),
            "Accuracy": sum(r["correct"] for r in rest) / len(rest) if rest else None,
            "Accuracy_interval95": accuracy_interval95(rest),
        },
        "note": DEMONSTRATION_NOTE,
    }


def final_answer_readout(done: dict[str, dict]) -> str | None:
    """How the final answers were made, from the traces' ``decision`` (e.g. the answer head and its
    feature set); the most frequent one, with the count of others when they differ."""
    from collections import Counter

    c = Counter(rec.get("decision") for rec in done.values() if rec.get("decision"))
    if not c:
        return None
    (top, n), rest = c.most_common(1)[0], sum(c.values()) - c.most_common(1)[0][1]
    return top if not rest else f"{top} ({n} questions; {rest} others by {len(c) - 1} other read-out(s))"


def compute_metrics(
    options: EvalOptions,
    questions: Sequence[Question],
    done: dict[str, dict],
    predictions: dict[str, dict],
    rows: Sequence[dict],
    index_info: dict | None,
) -> dict:
    """The ``metrics.json`` object (see the module doc of :mod:`sqa.eval.report` for its use).
    ``Recall@10`` and ``SARI`` are None when no scored question carries evidence / decomposition
    annotations (a ``--dataset`` file without them); ``accuracy_by_steps`` is empty for a reader
    that writes no steps."""
    labelled_q = [q for q in questions if q.answer is not None and q.qid in predictions]
    scores = score_predictions({q.qid: predictions[q.qid] for q in labelled_q}, labelled_q, source="predictions.json")
    majority = score_predictions({q.qid: {"answer": False} for q in labelled_q}, labelled_q, source="majority baseline")
    seconds = [r["seconds"] for r in rows if r["seconds"] is not None]
    phases: dict[str, list[float]] = {}
    for r in rows:
        for name, s in r["timings"].items():
            phases.setdefault(name, []).append(float(s))
    by_steps: dict[int, list[bool]] = {}
    for r in rows:
        if r["correct"] is not None:
            by_steps.setdefault(r["n_steps"], []).append(r["correct"])
    bins = calibration_bins(rows)
    pools: dict[str, int] = {}
    used_examples: set[str] = set()
    for r in rows:
        pools[r["fewshot_pool"] or "?"] = pools.get(r["fewshot_pool"] or "?", 0) + 1
        used_examples.update(r["fewshot_qids"] or ())
    yes_rate = sum(r["answer"] for r in rows) / len(rows) if rows else None
    unread = yes_no_unread(done, questions)
    demos = demonstrations_summary(rows)
    return {
        "split": options.split,
        "n": scores["n"],
        "n_predicted": len(predictions),
        "n_questions": len(questions),
        "protocol": options.protocol or None,  # the named question set, as in run.json
        "question_set": question_set(options.protocol, len(questions)),
        "questions_in_set": (full := questions_in_set(options)),
        "limit": options.limit,
        # every question of the split / named set answered: False for a --limit cut (issue 48)
        "complete": len(predictions) == len(questions) and (full is None or len(questions) >= full),
        "Accuracy": scores.get("Accuracy"),
        "Accuracy_interval95": accuracy_interval95(rows),
        "AUC": auc_of(rows),
        "Recall@10": scores.get("Recall@10") if any(q.evidence for q in labelled_q) else None,
        "SARI": scores.get("SARI") if any(q.decomposition for q in labelled_q) else None,
        "majority_baseline": {
            "answer": False,
            "Accuracy": majority.get("Accuracy"),
            "note": "always 'no', the majority answer of the StrategyQA train file",
        },
        "yes_rate": yes_rate,
        "ECE": expected_calibration_error(bins),
        "calibration": bins,
        "accuracy_at_coverage": coverage_metrics(rows),
        "accuracy_by_steps": {str(n): {"n": len(v), "Accuracy": sum(v) / len(v)} for n, v in sorted(by_steps.items())}
        if any(r["n_steps"] for r in rows)
        else {},
        "decision": options.decision,
        "final_answer": options.decision or final_answer_readout(done),
        "reader": options.reader,
        "oracle": options.oracle,
        "oracle_note": (
            f"ORACLE run: the reader was shown each question's annotated {options.oracle}; an upper "
            "bound for diagnosis, not a system result"
        )
        if options.oracle
        else None,
        "head": options.head or None,
        "answering": options.answering,
        **({"answering_note": ZERO_SHOT_CUT} if zero_shot_cut(options) else {}),
        "calibrated": options.answering != "zero-shot",
        "signals": signal_accuracy(rows),
        "model": options.model,
        "index": index_info or {},
        "command": invocation(),  # the sqa command of this session; None from Python
        "options": options.to_dict(),
        "fewshot": {
            **fewshot_description(options.split, options.folds),
            "questions_per_pool": pools,
            "example_qids": sorted(used_examples) if used_examples else None,
        },
        "seconds_per_question": sum(seconds) / len(seconds) if seconds else None,
        "seconds_per_question_note": "wall-clock seconds inside answer_batch between one finished question and "
        "the next (batch start for the first), mean over answered questions of all "
        "sessions of this run (model loading not included)",
        "phase_seconds_mean": {k: sum(v) / len(v) for k, v in sorted(phases.items())},
        **({"yes_no_unread": unread} if unread else {}),
        **({"demonstrations": demos} if demos else {}),
        **({"method": method} if (method := method_summary(done, questions)) else {}),
        "written_at": now(),
    }


COST_KEYS = ("calls", "generations", "p_yes_reads", "prompt_tokens", "generated_tokens", "retrievals", "seconds")


def mean_cost(costs: Sequence[dict], keys: Sequence[str] = COST_KEYS, digits: int = 4) -> dict:
    """The mean of each of ``keys`` over ``costs`` (methods' per-question ``method.cost`` dicts),
    rounded to ``digits``; None for a key some question lacks (e.g. tokens a model did not count)."""
    out = {}
    for key in keys:
        values = [c.get(key) for c in costs]
        out[key] = None if any(v is None for v in values) else round(sum(values) / len(values), digits)
    return out


def method_summary(done: dict[str, dict], questions: Sequence[Question]) -> dict | None:
    """For a method's run (``sqa.methods``): its name and answer rule, how many outputs no rule
    could read (``unread_outputs``; questions answered by the ``forced`` fallback or scored by the
    rule's default: ``unread_questions``), and the mean cost per question (calls, continuations,
    P(yes) read-outs, prompt and generated tokens, retrievals, seconds; a token mean is None when
    the model did not count tokens). None when no record is a method's."""
    recs = [done[q.qid]["method"] for q in questions if q.qid in done and isinstance(done[q.qid].get("method"), dict)]
    if not recs:
        return None
    per_question = mean_cost([r.get("cost", {}) for r in recs])
    return {
        "name": recs[0].get("name"),
        "answer_rule": recs[0].get("answer_rule"),
        "questions": len(recs),
        "unread_outputs": sum(int(r.get("unread_outputs", 0)) for r in recs),
        "unread_questions": sum(1 for r in recs if not r.get("read", True)),
        "cost_per_question": per_question,
        "note": "cost counted by the method's toolbox (sqa.methods.toolbox): calls to the model (n samples in one "
        "request count once), prompt tokens as sent (cached prefixes included), retrievals = searches",
    }


def questions_in_set(options: EvalOptions) -> int | None:
    """How many questions the run's question set has before ``--limit`` cuts it: the named
    protocol's (``sqa.eval.protocols``), else the split's; None for a ``--dataset`` file or list
    (``custom``), whose size before the cut is not recorded."""
    from sqa.strategyqa import SPLITS, load_questions

    from sqa.eval.protocols import PROTOCOLS

    p = PROTOCOLS.get(options.protocol or "")
    if p is not None:
        return p.n or len(load_questions(p.split))
    return len(load_questions(options.split)) if options.split in SPLITS else None


def questions_summary(metrics: dict) -> str:
    """How many questions a run answered of how many, in words, from its ``metrics.json``:
    ``"229 of 229 questions"``, ``"first 5 of 229 questions (--limit 5)"`` for a cut,
    ``"3 answered of the first 5 of 229 questions (--limit 5)"`` for an unfinished cut,
    ``"100 of 229 questions, incomplete"`` for an unfinished run. Files written before
    ``questions_in_set`` was recorded read as before (``n_predicted`` of ``n_questions``)."""
    done, n = metrics.get("n_predicted", metrics.get("n")), metrics.get("n_questions")
    full = metrics.get("questions_in_set")
    if full is None or n is None or n >= full:
        return f"{done} of {n} questions{'' if done == n else ', incomplete'}"
    cut = f"first {n} of {full} questions (--limit {metrics.get('limit') or n})"
    return cut if done == n else f"{done} answered of the {cut}"


def zero_shot_cut(options: EvalOptions) -> bool:
    """Whether the run is a train cut the facts reader answered zero-shot, too small to cross-fit
    (``sqa.eval.protocols.ZERO_SHOT_CUT``): a train split is otherwise answered out-of-fold."""
    return (
        options.reader == "facts"
        and not options.oracle
        and options.answering == "zero-shot"
        and options.split in ("train", "train-2061", "all")
    )


def yes_no_unread(done: dict[str, dict], questions: Sequence[Question]) -> dict | None:
    """For a run through a served model (``sqa.models.openai``): how many yes/no read-outs found
    neither Yes nor No among the server's top logprobs (``missing``, read as 0.5) or only one side
    (``one_sided``), of ``readouts``, summed over the trace records; None when no record counts them."""
    recs = [
        done[q.qid]["eval"]["yes_no_unread"]
        for q in questions
        if q.qid in done and isinstance(done[q.qid].get("eval", {}).get("yes_no_unread"), dict)
    ]
    if not recs:
        return None
    keys = ["readouts", "missing", "one_sided"] + sorted(
        {k for r in recs for k in r} - {"readouts", "missing", "one_sided"}
    )
    out = {k: sum(int(r.get(k, 0) or 0) for r in recs) for k in keys}  # + the read-out methods of sqa.models.openai
    out["note"] = (
        "served model: read-outs whose top logprobs held neither Yes nor No (missing, read as P(yes) 0.5) "
        "or one side only (the other taken at the last listed token's probability); sqa.models.openai"
    )
    return out


def finalize_run(
    out_dir: str | Path,
    options: EvalOptions,
    questions: Sequence[Question],
    done: dict[str, dict],
    *,
    index_info: dict | None = None,
    new: int = 0,
    plots: bool = True,
    extra: dict | None = None,
) -> "EvalSummary":
    """Regenerate ``predictions.json`` (+ ``metrics.json``, ``report.md``, ``report.png`` unless the
    split is ``test``) from the trace records ``done`` (``{qid: record}``) for ``questions``.
    ``new``: questions answered in this session (for the summary). ``extra``: keys added to
    ``metrics.json`` (the out-of-fold run's ``protocol`` and ``out_of_fold`` figures)."""
    out_dir = Path(out_dir)
    predictions = {
        q.qid: result_from_dict(done[q.qid]).to_prediction().to_leaderboard() for q in questions if q.qid in done
    }
    validate_predictions(predictions, str(out_dir / PREDICTIONS_FILE))
    write_json_atomic(out_dir / PREDICTIONS_FILE, predictions)
    files = [out_dir / TRACES_FILE, out_dir / PREDICTIONS_FILE]
    metrics = None
    if options.split != "test" and predictions:
        from sqa.eval import report

        rows = question_rows(questions, done)
        metrics = compute_metrics(options, questions, done, predictions, rows, index_info)
        metrics.update(extra or {})
        write_json_atomic(out_dir / METRICS_FILE, metrics)
        report.write_markdown(out_dir / REPORT_MD, metrics, rows)
        from sqa.eval.html import REPORT_HTML, write_run_html

        write_run_html(out_dir / REPORT_HTML, metrics, questions, done)
        files += [out_dir / METRICS_FILE, out_dir / REPORT_MD, out_dir / REPORT_HTML]
        if plots:
            report.write_plots(out_dir / REPORT_PNG, metrics, rows)
            files.append(out_dir / REPORT_PNG)
    return EvalSummary(
        out_dir=out_dir, total=len(questions), done=len(predictions), new=new, metrics=metrics, files=files
    )
