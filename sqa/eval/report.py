"""Human-readable reports of an evaluation run: ``report.md`` (metrics table, the final answer's
read-out, accuracy at 50 / 80 / 100 % coverage, the out-of-fold heads of an out-of-fold run, accuracy by
number of steps, calibration table, one row per wrong answer) and ``report.png`` (reliability diagram,
accuracy-coverage curve; accuracy by number of steps and the Recall@10 histogram only where defined:
a reader with steps, evidence annotations and retrieval). Columns undefined for a run (steps for the
facts reader, Recall@10 without annotations or retrieval) are left out.

Inputs are the ``metrics.json`` object and the per-question rows of
:func:`sqa.eval.runner.question_rows`. matplotlib is imported only by :func:`write_plots`, with the
non-interactive Agg canvas (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence
from sqa.eval.wording import plain_answer, plain_decomposition
from sqa.outfile import check_target, write_text_atomic


def _fmt(x, digits: int = 4) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _cell(text: str, width: int = 120) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def oof_scheme(metrics: dict) -> str | None:
    """How an out-of-fold run was cross-fitted ("out-of-fold, 5 term-grouped folds"): ``metrics.json``'s
    ``out_of_fold.scheme``, or its top-level ``protocol`` in files written before that key named the
    question set (as ``run.json``'s does); None for other runs."""
    oof = metrics.get("out_of_fold") or {}
    legacy = metrics.get("protocol")
    if oof.get("scheme"):
        return oof["scheme"]
    return legacy if isinstance(legacy, str) and legacy.startswith("out-of-fold") else None


def protocol_name(metrics: dict) -> str | None:
    """The named question set of a run (``sqa.eval.protocols``) from its ``metrics.json``: ``protocol``
    (or ``question_set.protocol``); None when the run names none (or in an older file whose
    ``protocol`` was the cross-fitting scheme)."""
    p = metrics.get("protocol")
    if isinstance(p, str) and p and not p.startswith("out-of-fold"):
        return p
    return (metrics.get("question_set") or {}).get("protocol")


def has_recall(metrics: dict) -> bool:
    """Whether Recall@10 means something for the run: its questions carry evidence annotations
    (``metrics["Recall@10"]`` not None) and the reader retrieved evidence (not ``--no-retrieval``,
    unless an oracle showed annotated paragraphs)."""
    opts = metrics.get("options") or {}
    return metrics.get("Recall@10") is not None and bool(opts.get("retrieval", True) or metrics.get("oracle"))


def has_steps(metrics: dict) -> bool:
    """Whether the reader wrote decomposition steps (the facts reader does not)."""
    return bool(metrics.get("accuracy_by_steps"))


def coverage_lines(metrics: dict) -> list[str]:
    """The metrics-table rows of accuracy at 50 / 80 / 100 % coverage (none when undefined)."""
    cov = metrics.get("accuracy_at_coverage")
    if not cov:
        return []
    how = "calibrated P(yes)" if cov.get("calibrated", True) else "the model's own P(yes), uncalibrated"
    return [
        f"| Accuracy at {a['coverage']:.0%} coverage (the {a['n']} most confident, {how}) | {_fmt(a['Accuracy'])} |"
        for a in cov["at"]
    ]


def markdown(metrics: dict, rows: Sequence[dict]) -> str:
    """The text of ``report.md``."""
    from sqa.eval.run_metrics import questions_summary

    opts = metrics.get("options", {})
    index = metrics.get("index") or {}
    lines = [
        f"# sqa eval{' ORACLE ' + metrics['oracle'] if metrics.get('oracle') else ''}: {metrics['split']} "
        f"({questions_summary(metrics)})",
        "",
        *([f"Command: `{metrics['command']}`", ""] if metrics.get("command") else []),
        f"Model `{metrics['model']}`, decomposition: {plain_decomposition(opts.get('decomposition'))}, top-k {opts.get('k')}, "
        f"index `{index.get('corpus') or ('preset:' + index['preset'] if index.get('preset') else '?')}` "
        f"({index.get('backend', opts.get('backend'))}, "
        f"{_fmt(index.get('paragraph_count'))} paragraphs).",
        "",
        f"Few-shot examples: {metrics['fewshot']['rule']}."
        if metrics.get("reader", "steps") == "steps"
        else f"Reader: facts (fixed demonstrations, facts shown, a trained answer head, id `{_fmt(metrics.get('head'))}`)."
        if metrics.get("answering") != "zero-shot"
        else "Reader: facts (fixed demonstrations, facts shown, no answer head).",
        "",
        *(
            [
                (
                    "Answering: **zero-shot**: P(yes) is the model's own, uncalibrated (answer Yes at P(yes) >= 0.5); "
                    + (
                        f"{metrics['answering_note']}."
                        if metrics.get("answering_note")
                        else f"`sqa eval --split train --model {metrics['model']}` fits an answer head."
                    )
                ),
                "",
            ]
            if metrics.get("reader") == "facts" and metrics.get("answering") == "zero-shot"
            else []
        ),
        *([f"**{metrics['oracle_note']}**", ""] if metrics.get("oracle") else []),
        *(_demonstrations_lines(metrics.get("demonstrations"))),
        *(
            [
                f"Question set: **{metrics['question_set']['protocol']}**, {metrics['question_set']['summary']}"
                + (
                    f" (cut to the first {metrics['question_set']['cut_to']} by --limit)"
                    if metrics["question_set"].get("cut_to")
                    else ""
                )
                + ".",
                "",
            ]
            if metrics.get("question_set")
            else []
        ),
        *(
            [
                f"Cross-fitting: **{oof_scheme(metrics)}** "
                f"({(metrics.get('out_of_fold') or {}).get('note') or metrics.get('protocol_note', '')}).",
                "",
            ]
            if oof_scheme(metrics)
            else []
        ),
        f"Final answer: {plain_answer(tag := metrics.get('final_answer') or metrics.get('decision') or metrics.get('head'))}"
        + (f" (`{tag}`)." if tag else "."),
        "",
        "| metric | value |",
        "|---|---|",
        f"| questions scored (n) | {metrics['n']} |",
        f"| Accuracy | {_fmt(metrics['Accuracy'])}"
        + (
            f" (95 % interval {metrics['Accuracy_interval95'][0]:.4f}–{metrics['Accuracy_interval95'][1]:.4f})"
            if metrics.get("Accuracy_interval95")
            else ""
        )
        + " |",
        *([f"| AUC of P(yes) | {_fmt(metrics['AUC'])} |"] if metrics.get("AUC") is not None else []),
        f'| majority baseline (always "no") Accuracy | {_fmt(metrics["majority_baseline"]["Accuracy"])} |',
        *coverage_lines(metrics),
        *([f"| Recall@10 | {_fmt(metrics['Recall@10'])} |"] if has_recall(metrics) else []),
        *(
            [f"| SARI (decomposition) | {_fmt(metrics['SARI'])} |"]
            if metrics.get("SARI") is not None and has_steps(metrics)
            else []
        ),
        f'| share of "yes" answers | {_fmt(metrics["yes_rate"])} |',
        f"| ECE (10 bins) | {_fmt(metrics['ECE'])} |",
        f"| seconds / question | {_fmt(metrics['seconds_per_question'], 2)} |",
        *(
            [
                f"| yes/no read-outs with neither Yes nor No in the server's top logprobs (read as 0.5) | "
                f"{metrics['yes_no_unread']['missing']} of {metrics['yes_no_unread']['readouts']} "
                f"({metrics['yes_no_unread']['one_sided']} with one side only) |"
            ]
            if metrics.get("yes_no_unread")
            else []
        ),
        *method_lines(metrics.get("method")),
        "",
    ]
    if metrics.get("signals"):
        readout = metrics.get("final_answer") or metrics.get("decision") or metrics.get("head")
        lines += [
            f"## P(yes) readings (final answer: {plain_answer(readout)}" + (f", `{readout}`)" if readout else ")"),
            "",
            "Each reading alone, thresholded at 0.5 (`plain` = the same model with no steps and no evidence).",
            "",
            "| reading | n | Accuracy | mean P(yes) |",
            "|---|---|---|---|",
        ]
        for name, v in metrics["signals"].items():
            lines.append(f"| {name} | {v['n']} | {_fmt(v['Accuracy'])} | {_fmt(v['mean_p_yes'])} |")
        lines.append("")
    oof = metrics.get("out_of_fold")
    if oof:
        lines += [
            "## Out-of-fold heads",
            "",
            "| head | questions | n | Accuracy (95 % interval) | AUC |",
            "|---|---|---|---|---|",
        ]
        for subset, label in (("all", "all labelled"), ("without_demonstrations", "without the demonstrations")):
            for kind, v in oof[subset].items():
                lines.append(
                    f"| {kind} | {label} | {v['n']} | {v['accuracy']:.4f} ({v['interval95'][0]:.4f}–"
                    f"{v['interval95'][1]:.4f}) | {_fmt(v['auc'])} |"
                )
        lines += ["", "| fold | fitted on | answered | facts feature set (C) | plain C |", "|---|---|---|---|---|"]
        for f in oof["folds"]:
            fx = f.get("facts") or {}
            lines.append(
                f"| {f['fold'] + 1} | {f['n_fit']} | {f['n_answered']} | "
                f"{fx.get('spec', '–')} ({_fmt(fx.get('C'), 5)}) | {_fmt(f['plain']['C'], 5)} |"
            )
        lines += [
            "",
            f"Cross-fitting took {oof['crossfit_seconds']} s; the final heads "
            f"({', '.join(f'{k}: `{v}`' for k, v in oof['final_heads'].items())}) are fitted on all "
            f"{oof['fitted_on_pool']} labelled questions but the demonstrations.",
            "",
        ]
    if metrics["accuracy_by_steps"]:  # a reader that writes no steps has none
        lines += [
            "## Accuracy by number of steps",
            "",
            "| steps | n | Accuracy |",
            "|---|---|---|",
        ]
        for n_steps, v in metrics["accuracy_by_steps"].items():
            lines.append(f"| {n_steps} | {v['n']} | {_fmt(v['Accuracy'])} |")
        lines.append("")
    lines += [
        "## Calibration (confidence of the given answer)",
        "",
        "| confidence | n | mean confidence | Accuracy |",
        "|---|---|---|---|",
    ]
    for b in metrics["calibration"]:
        if b["n"]:
            lines.append(
                f"| {b['lo']:.1f}–{b['hi']:.1f} | {b['n']} | {_fmt(b['confidence'])} | {_fmt(b['accuracy'])} |"
            )
    errors = [r for r in rows if r["correct"] is False]
    errors.sort(key=lambda r: -r["confidence"])
    steps, recall = has_steps(metrics), has_recall(metrics)
    cols = (
        ["qid", "question", "gold", "predicted", "confidence"]
        + (["steps"] if steps else [])
        + (["Recall@10"] if recall else [])
        + (["decomposition"] if steps else [])
    )
    lines += [
        "",
        f"## Errors ({len(errors)}, most confident first)",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for r in errors:
        qid = r["qid"] + (" (demonstration: answer in the prompt)" if r.get("demonstration") else "")
        cells = [qid, _cell(r["question"]), _fmt(r["gold"]), _fmt(r["answer"]), f"{r['confidence']:.3f}"]
        if steps:
            cells.append(str(r["n_steps"]))
        if recall:
            cells.append(_fmt(r["recall"], 2))
        if steps:
            cells.append(_cell(" / ".join(f"{i}. {s}" for i, s in enumerate(r["decomposition"], 1)), 300))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def write_markdown(path: str | Path, metrics: dict, rows: Sequence[dict]) -> Path:
    """Write ``report.md``; returns the path."""
    path = Path(path)
    check_target(path, Path(path).with_name(Path(path).name + ".tmp"))  # refused before the work
    return write_text_atomic(path, markdown(metrics, rows))  # sqa.outfile's rule


def write_plots(path: str | Path, metrics: dict, rows: Sequence[dict]) -> Path:
    """Write ``report.png``: the reliability diagram, with accuracy by number of steps (majority
    baseline drawn) only for a reader that writes steps and the Recall@10 histogram only when the
    questions carry evidence annotations; returns the path."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    by_steps = metrics["accuracy_by_steps"]
    recalls = [r["recall"] for r in rows if r["recall"] is not None] if has_recall(metrics) else []
    coverage = (metrics.get("accuracy_at_coverage") or {}).get("curve")
    panels = (
        (["steps"] if by_steps else [])
        + ["calibration"]
        + (["coverage"] if coverage else [])
        + (["recall"] if recalls else [])
    )
    fig = Figure(figsize=(5 * len(panels), 4.5), dpi=100)
    FigureCanvasAgg(fig)
    axes = dict(zip(panels, np.atleast_1d(fig.subplots(1, len(panels)))))

    if "steps" in axes:
        ax1 = axes["steps"]
        xs = [int(k) for k in by_steps]
        ax1.bar(xs, [v["Accuracy"] for v in by_steps.values()], color="tab:blue")
        for x, v in zip(xs, by_steps.values()):
            ax1.annotate(f"n={v['n']}", (x, v["Accuracy"]), ha="center", va="bottom", fontsize=8)
        if metrics["majority_baseline"]["Accuracy"] is not None:
            ax1.axhline(metrics["majority_baseline"]["Accuracy"], color="gray", ls="--", label='always "no"')
            ax1.legend(loc="lower right", fontsize=8)
        ax1.set_ylim(0, 1.05)
        ax1.set_xlabel("number of steps")
        ax1.set_ylabel("accuracy")
        ax1.set_title("Accuracy by number of steps")

    ax2 = axes["calibration"]
    bins = [b for b in metrics["calibration"] if b["n"]]
    ax2.plot([0, 1], [0, 1], color="gray", ls="--", lw=1, label="perfect calibration")
    ax2.bar(
        [(b["lo"] + b["hi"]) / 2 for b in bins],
        [b["accuracy"] for b in bins],
        width=0.09,
        alpha=0.7,
        color="tab:orange",
        label="accuracy in bin",
    )
    ax2.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], "o", color="tab:red", ms=4)
    for b in bins:
        ax2.annotate(str(b["n"]), ((b["lo"] + b["hi"]) / 2, b["accuracy"]), ha="center", va="bottom", fontsize=7)
    ax2.set_xlim(0, 1)
    ax2.set_ylim(0, 1.05)
    ax2.set_xlabel("confidence of the given answer")
    ax2.set_ylabel("accuracy")
    ece = metrics.get("ECE")
    ax2.set_title("Reliability" + (f" (ECE {ece:.3f})" if ece is not None else ""))
    ax2.legend(loc="upper left", fontsize=8)

    if "coverage" in axes:
        ax4 = axes["coverage"]
        ax4.plot([c["coverage"] for c in coverage], [c["Accuracy"] for c in coverage], "o-", color="tab:purple", ms=3)
        if metrics["majority_baseline"]["Accuracy"] is not None:
            ax4.axhline(metrics["majority_baseline"]["Accuracy"], color="gray", ls="--", label='always "no"')
            ax4.legend(loc="lower left", fontsize=8)
        ax4.set_xlim(0, 1.02)
        ax4.set_ylim(0, 1.05)
        ax4.set_xlabel("coverage (share answered, most confident first)")
        ax4.set_ylabel("accuracy")
        ax4.set_title("Accuracy at coverage")

    if "recall" in axes:
        ax3 = axes["recall"]
        ax3.hist(recalls, bins=[i / 10 for i in range(11)], color="tab:green", edgecolor="white")
        ax3.set_xlabel("Recall@10 of the question")
        ax3.set_ylabel("questions")
        mean = metrics.get("Recall@10")
        ax3.set_title("Recall@10 distribution" + (f" (mean {mean:.3f})" if mean is not None else ""))

    import textwrap

    title = (
        f"sqa eval{' ORACLE ' + metrics['oracle'] if metrics.get('oracle') else ''} {metrics['split']}: "
        f"{metrics['model']}, n={metrics['n']}, accuracy {metrics['Accuracy']:.3f}"
        + "".join(f" ({x})" for x in (protocol_name(metrics), oof_scheme(metrics)) if x)
        if metrics["Accuracy"] is not None
        else "sqa eval"
    )
    # wrapped to the figure's width (about 11 characters per inch at this size), so it is never cut off
    fig.suptitle("\n".join(textwrap.wrap(title, width=int(11 * 5 * len(panels)))), fontsize=11)
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    check_target(path, tmp)  # sqa.outfile
    fig.savefig(tmp, format="png")
    tmp.replace(path)
    return path


def _demonstrations_lines(d: dict | None) -> list[str]:
    """report.md's line on the answered demonstration questions (metrics.json's ``demonstrations``)."""
    if not d:
        return []
    w = d["without_demonstrations"]
    head = f"Demonstrations: **{d['n']}** of the questions ({', '.join(d['qids'])}) are {d['note']}"
    if w["Accuracy"] is None:  # no other question: no accuracy without them to show
        return [head + ".", ""]
    ci = w.get("Accuracy_interval95")
    return [
        f"{head}; accuracy without them {w['Accuracy']:.3f} "
        f"(n={w['n']}{f', 95 % interval {ci[0]:.3f}–{ci[1]:.3f}' if ci else ''}).",
        "",
    ]


def method_facts(method: dict | None) -> dict[str, str]:
    """A method run's rows (``metrics.json`` ``method``), label -> value: its answer rule, the
    outputs no rule could read, and the cost per question; {} for the readers. report.md and
    report.html show these."""
    if not method:
        return {}
    cost = method["cost_per_question"]
    return {
        "method, answer rule": f"{method['name']}, {method['answer_rule']}",
        "outputs no answer rule could read": f"{method['unread_outputs']} ({method['unread_questions']} "
        "questions answered by the rule's fallback)",
        "cost per question": ", ".join(
            f"{_fmt(cost[k], 1)} {k.replace('_', ' ')}" for k in cost if cost[k] is not None
        ),
    }


def method_lines(method: dict | None) -> list[str]:
    """report.md's table rows of :func:`method_facts`; [] for the readers."""
    return [f"| {label} | {value} |" for label, value in method_facts(method).items()]
