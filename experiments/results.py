"""Write the research record, docs/results.md, and the README's results table from the recorded
results, so that each number is written once (in ``bench/results/``) and copied by this script only.

    python -m experiments.results            # rewrite docs/results.md, README.md's and docs/methods.md's tables
    python -m experiments.results --check    # exit 1, naming the file, when either is out of date

Sources, all under ``bench/results/``:

- ``runs/NAME/metrics.json``: one recorded ``sqa eval`` run per preset (``sqa.presets.PRESETS``, each
  names its run) and the other recorded dev runs: accuracy with its 95 % interval, the Wilson
  score interval (``sqa.facts.head.wilson_interval``): the run's own ``Accuracy_interval95``, else
  computed from its accuracy and n; seconds per question, Recall@10; the majority class ("no")
  from the same file.
- ``runs/train2290-PRESET-oof/metrics.json`` (when it exists): the preset's out-of-fold accuracy on
  the 2,290 train questions (``sqa eval --split train``); "—" where none is recorded.
- ``head.json`` (the shipped heads' cross-validation), ``head_cv.json`` (the oracle and study
  entries), ``retrieval.json`` (Recall@10), ``index_vs_lucene*.json`` (indexing speed).
- ``log.md``: the narrative lab log (moved from the README), included as it is; the measurement
  notes stay in ``notes.md``, linked.

The paper's figures (Geva et al., TACL 2021, "Did Aristotle Use a Laptop?", abstract: humans 87 %,
the best baseline about 66 %, on the test split) are the only numbers written here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sqa.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
DOC = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- results:begin (python -m experiments.results) -->", "<!-- results:end -->"
PAPER = [
    ("the paper: humans (Geva et al. 2021, abstract)", "test", "0.87"),
    ("the paper: its best baseline (Geva et al. 2021, abstract)", "test", "about 0.66"),
]
STUDIES = [  # head_cv.json entries quoted in docs/results.md: (entry, what the head read)
    ("oracle-facts-n1000", "ORACLE facts: the question's annotated facts"),
    ("oracle-paragraphs-n1000", "ORACLE paragraphs: the 5 best sentences of its annotated evidence paragraphs"),
    (
        "ceiling-paragraphs-n1000",
        "DOUBLE ORACLE: the annotated paragraphs' 5 sentences that best cover the annotated facts",
    ),
    ("rerank-ceiling-n1000", "the best 5 of the shipped pool, chosen with the annotated facts (oracle)"),
    ("steps-gold-n1000", "ORACLE decomposition: per-step facts from the annotated steps"),
    ("rerank-n1000", "a sentence re-ranker trained on train-2061's annotated facts"),
    ("rerank-wide-n862", "the re-ranker over a wide pool (all sentences of the top-10 paragraphs)"),
    ("expanded-n600", "facts retrieved with a query the reader expanded"),
    ("steps-n600", "facts found per step of the model's own decomposition"),
    ("minilm-n600", "facts ranked by MiniLM instead of BM25"),
]
FACTS_ROW = "plain+f5 lo:plain+f5 +retrieval"


def load(path: Path) -> dict:
    """A JSON results file; {} when it does not exist."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def interval(acc: float, n: int) -> tuple[float, float]:
    """The Wilson score 95 % interval of an accuracy over n questions
    (``sqa.facts.head.wilson_interval``, which cites its sources; ``round(acc * n)`` right)."""
    from sqa.facts.head import wilson_interval

    return wilson_interval(round(acc * n), n)


def acc_text(acc: float | None, n: int | None, recorded: list | None = None) -> str:
    """``0.664 (0.600–0.722)``, or "—": the interval ``recorded`` (a metrics.json
    ``Accuracy_interval95``) where given, else :func:`interval`."""
    if acc is None or not n:
        return "—"
    lo, hi = recorded if isinstance(recorded, list) and len(recorded) == 2 else interval(acc, n)
    return f"{acc:.3f} ({lo:.3f}–{hi:.3f})"


def seconds(m: dict) -> str:
    """Seconds per question a run spent reading (``seconds_per_question``), or "—†" where its
    read-outs came from a features cache (``phase_seconds_mean.cached``): such a run timed no reading
    (bench/results/runs/README.md)."""
    if (m.get("phase_seconds_mean") or {}).get("cached"):
        return "—†"
    s = m.get("seconds_per_question")
    return f"{s:.1f}" if s else "—"


def ask_speed() -> str:
    """The footnote for "—†": ``sqa ask``'s speed with the facts reader (ask.json ``phases``, from
    ``python -m bench.ask_phases``; else the older ``facts_reader`` entry)."""
    entry = load(RESULTS / "ask.json").get("qwen2.5-coder-1.5b", {})
    if p := entry.get("phases"):
        later = p["session"]["seconds_to_each_answer"][1:]
        wall = p["one_question"]["phases_median_s"]["wall (sqa's)"]
        return (
            f" `sqa ask` with the facts reader: {wall:.1f} s for one "
            f"command, {min(later):.1f}-{max(later):.1f} s a later question in `sqa ask -` (`ask.json` `phases`, "
            f"{len(p['session']['seconds_to_each_answer'])} dev questions)."
        )
    f = entry.get("facts_reader")
    if not f:
        return ""
    return (
        f" `sqa ask` with the facts reader: {f['seconds_per_question_mean']:.1f} s a question, "
        f"{f['seconds_per_question_mean_excluding_first']:.1f} s after the first (`ask.json` `facts_reader`, "
        f"{f['n_questions']} dev questions)."
    )


def rel(run: str) -> str:
    """A run folder relative to bench/results/."""
    return run.removeprefix("bench/results/")


ANSWERING = {
    "head": "held-out head",
    "zero-shot": "zero-shot",
    "cross-fitted": "cross-fitted",
    "out-of-fold": "out-of-fold",
}


def answering(m: dict) -> str:
    """How a run's answers were made (run.json's ``answering``, issue 41 item 8): its metrics'
    ``answering`` when recorded, else derived as ``sqa.eval.options.EvalOptions.answering`` does
    (runs from before the field: the steps reader is zero-shot, a head named out-of-fold on dev is
    cross-fitted, any other head held-out)."""
    if m.get("answering"):
        return m["answering"]
    if not m:
        return ""
    head = str(m.get("head") or "")
    if m.get("reader") in (None, "steps") or head.startswith("zero-shot"):
        return "zero-shot"
    if head.startswith("out-of-fold"):
        return "out-of-fold" if m.get("split") in ("train", "train-2061", "all") else "cross-fitted"
    return "head"


def preset_rows() -> list[list[str]]:
    """One row per preset: name, dev accuracy (95 %), how dev was answered, train out-of-fold
    accuracy (95 %), s/question, Recall@10, recorded run."""
    rows = []
    for p in PRESETS.values():
        m = load(ROOT / p.run / "metrics.json")
        oof = load(RESULTS / "runs" / f"train2290-{p.name}-oof" / "metrics.json")
        recall = m.get("Recall@10") if p.oracle is None and p.retrieval else None
        rows.append(
            [
                f"`--preset {p.name}`" + (" (ORACLE)" if p.oracle else ""),
                acc_text(m.get("Accuracy"), m.get("n"), m.get("Accuracy_interval95")),
                ANSWERING.get(answering(m), ""),
                acc_text(oof.get("Accuracy"), oof.get("n"), oof.get("Accuracy_interval95")) if oof else "—",
                seconds(m),
                f"{recall:.3f}" if recall else "",
                f"`{rel(p.run)}/`",
            ]
        )
    return rows


def majority_row() -> list[str]:
    """Always "no" on dev, from the facts preset's run."""
    m = load(ROOT / PRESETS["facts"].run / "metrics.json")
    maj = m.get("majority_baseline") or {}
    return ['majority class (always "no")', acc_text(maj.get("Accuracy"), m.get("n")), "", "—", "", "", ""]


def table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def readme_table() -> str:
    """The README's one results table (between the markers)."""
    header = [
        "reader",
        "dev accuracy (95 %)",
        "dev answered by",
        "train out-of-fold (95 %)",
        "s/question",
        "Recall@10",
        "recorded run (`bench/results/`) or source",
    ]
    rows = (
        preset_rows()
        + [majority_row()]
        + [[name, "—", "", "—", "", "", f"{split} split: {acc}"] for name, split, acc in PAPER]
    )
    return "\n".join(
        [
            table(header, rows),
            "",
            "dev = the 229-question dev split, mini index (159,930 paragraphs), Qwen2.5-Coder-1.5B (GGUF) on "
            "llama.cpp, 2 CPU cores. Dev answered by: held-out head = the shipped answer head, fitted on "
            "train-2061 only (2,055 questions), never on dev; zero-shot = the model's own P(yes); a dev run "
            "answered with heads that `sqa eval --split train` fitted on all 2,290 labelled questions would be "
            "cross-fitted (each fold fitted with the other dev questions' labels: a cross-validated figure, "
            "not comparable with a held-out one). † read-outs from a features cache, so the run timed no reading;"
            + ask_speed()
            + " Paper rows: accuracy on the official test split (490 questions). Every study "
            "behind these rows: [docs/results.md](docs/results.md).",
        ]
    )


def head_rows() -> list[list[str]]:
    """The shipped heads' out-of-fold accuracy (head.json) and the head_cv.json study entries."""
    rep = load(RESULTS / "head.json").get("train_head", {}).get("report", {})
    rows = []
    for key, label in (
        ("facts_head", "shipped facts head (train-2061, term-grouped CV)"),
        ("plain_head", "shipped no-retrieval head"),
    ):
        h = rep.get(key)
        if h:
            rows.append(
                [
                    label,
                    str(rep["n"]),
                    f"{h['accuracy']:.3f} ({h['interval95'][0]:.3f}–{h['interval95'][1]:.3f})",
                    "" if key == "plain_head" else _diff(rep.get("facts_minus_plain")),
                    "`head.json` `train_head`",
                ]
            )
    cv = load(RESULTS / "head_cv.json")
    for entry, label in STUDIES:
        e = cv.get(entry)
        row = next((r for r in (e or {}).get("rows", []) if r["name"] == FACTS_ROW), None)
        if row is None:
            continue
        rows.append(
            [
                label,
                str(e["n"]),
                f"{row['accuracy']:.3f} ({row['interval95'][0]:.3f}–{row['interval95'][1]:.3f})",
                _diff(row.get("minus_plain")),
                f"`head_cv.json` `{entry}`",
            ]
        )
    return rows


def _diff(d: dict | None) -> str:
    if not d:
        return ""
    lo, hi = d["interval95"]
    return f"{d['difference']:+.3f} ({lo:+.3f} to {hi:+.3f})"


def all_runs() -> list[list[str]]:
    """Every recorded run folder with a metrics.json: split, n, accuracy (95 %), s/question."""
    rows = []
    for mf in sorted((RESULTS / "runs").glob("*/metrics.json")):
        m = load(mf)
        oracle = m.get("oracle")
        rows.append(
            [
                f"`runs/{mf.parent.name}/`",
                str(m.get("split")),
                str(m.get("n")),
                acc_text(m.get("Accuracy"), m.get("n"), m.get("Accuracy_interval95")),
                m.get("reader") or "steps",
                f"ORACLE {oracle}" if oracle else "",
                seconds(m),
                "yes" if m.get("complete") else "no",
            ]
        )
    return rows


def retrieval_rows() -> list[list[str]]:
    """Recall@10 of the official baselines and the step retriever (retrieval.json)."""
    res = load(RESULTS / "retrieval.json").get("results", {})
    rows = []
    for split, modes in res.items():
        for mode, d in modes.items():
            official = next((k for k in d if k.startswith("official")), None)
            step = d.get("step") or d.get("ours")  # "ours": the step retriever's name before issue 33
            if official and step:
                rows.append(
                    [
                        split,
                        mode,
                        f"{official.removeprefix('official ')} {d[official]['Recall@10']:.3f}",
                        f"{step['Recall@10']:.3f}",
                    ]
                )
    return rows


def indexing_rows() -> list[list[str]]:
    """Indexing rate, peak RSS and one-core search p50 of sqa and Lucene per corpus size
    (``summary`` of index_vs_lucene.json and index_vs_lucene_36m.json)."""
    rows = []
    for name in ("index_vs_lucene.json", "index_vs_lucene_36m.json"):
        for size, s in (load(RESULTS / name).get("summary") or {}).items():
            if not size.isdigit() or "sqa" not in s or "lucene" not in s:
                continue
            sqa, luc = s["sqa"], s["lucene"]
            rows.append(
                [
                    f"{int(size):,}",
                    f"{sqa['paragraphs_per_s']:,.0f}",
                    f"{luc['paragraphs_per_s']:,.0f}",
                    f"{sqa['peak_rss_mb'] / 1024:.1f} / {luc['peak_rss_mb'] / 1024:.1f}",
                    f"{sqa['search_p50_ms']} / {luc['search_p50_ms']}",
                    str(sqa.get("builds", "")),
                    f"`{name}`",
                ]
            )
    return rows


def findings_section(
    names: tuple[str, ...] = ("server_agreement", "server_concurrency", "server_overlap", "model_verify"),
) -> list[str]:
    """Markdown for result files that carry their own ``what`` / ``findings`` / ``command``: one
    subsection each, the findings as bullets (files that are absent are left out)."""
    out: list[str] = []
    for name in names:
        d = load(RESULTS / f"{name}.json")
        if not d:
            continue
        out += [f"### `{name}.json`", "", str(d.get("what", "")).strip(), ""]
        out += [f"- {f}" for f in d.get("findings", [])]
        for model, r in (d.get("results") or {}).items():  # model_verify.json: medians per model file
            if isinstance(r, dict) and "full_median_s" in r:
                out.append(
                    f"- {model} ({r['file_bytes']:,} bytes): full sha256 {r['full_median_s']:.3f} s, "
                    f"sampled check {r['sampled_median_s'] * 1000:.1f} ms (medians; page cache "
                    f"{d.get('page_cache', '?')})"
                )
        if d.get("command"):
            out += ["", f"Command: `{d['command']}`"]
        out.append("")
    return out


def results_doc() -> str:
    """docs/results.md, whole."""
    log = (RESULTS / "log.md").read_text(encoding="utf-8") if (RESULTS / "log.md").exists() else ""
    parts = [
        "# Results",
        "",
        "<!-- Generated by `python -m experiments.results` from bench/results/; edit those files, not this one. -->",
        "",
        "Every number here is copied from a file under `bench/results/` by `python -m experiments.results`;",
        "`tests/test_repo.py` fails when this page or the README's table is out of date. The studies that",
        "produced them are listed in [experiments/README.md](../experiments/README.md); the measurement notes",
        "(what was tried, decided and why) are in [bench/results/notes.md](../bench/results/notes.md).",
        "",
        "## Presets",
        "",
        readme_table().replace(" Every study behind these rows: [docs/results.md](docs/results.md).", ""),
        "",
        "## Answer heads, out-of-fold on train-2061",
        "",
        "The head's accuracy after reading 5 facts, cross-validated in 5 folds grouped by StrategyQA term, and its",
        "paired difference from the no-retrieval head on the same questions and folds.",
        "",
        table(
            [
                "facts shown to the reader",
                "questions",
                "out-of-fold accuracy (95 %)",
                "minus no retrieval (95 %)",
                "entry (`bench/results/`)",
            ],
            head_rows(),
        ),
        "",
        "## Retrieval, Recall@10 (mini index)",
        "",
        table(["split", "input", "official baseline", "step retriever"], retrieval_rows()),
        "",
        "## Indexing against Lucene",
        "",
        "The same resampled corpus built by `sqa index` and by Lucene 9.9 (pyserini / Anserini) on 2 cores;",
        "search on one core over 200 StrategyQA questions; medians of the builds.",
        "",
        table(
            [
                "paragraphs",
                "sqa paragraphs/s",
                "Lucene paragraphs/s",
                "peak RSS GiB sqa / Lucene",
                "search p50 ms sqa / Lucene",
                "builds",
                "file (`bench/results/`)",
            ],
            indexing_rows(),
        ),
        "",
        "## Served readers and the model-file check",
        "",
        *findings_section(),
        "## Every recorded run",
        "",
        table(
            ["run (`bench/results/`)", "split", "n", "accuracy (95 %)", "reader", "oracle", "s/question", "complete"],
            all_runs(),
        ),
        "",
    ]
    if log:
        body = log.strip().split("\n", 1)[1] if log.startswith("# ") else log  # its own title gives way to ours
        parts += ["## Lab log", "", body.strip().replace("](docs/", "](")]
    return "\n".join(parts).rstrip() + "\n"


METHODS_DOC = ROOT / "docs" / "methods.md"
M_BEGIN, M_END = "<!-- methods:begin (python -m experiments.results) -->", "<!-- methods:end -->"
COST = ("calls", "generated_tokens", "prompt_tokens", "retrievals", "seconds")


def method_runs() -> list[Path]:
    """The recorded runs of a method (``metrics.json`` holds ``method``), most questions first."""
    found = [(load(mf), mf.parent) for mf in (RESULTS / "runs").glob("*/metrics.json")]
    return [run for m, run in sorted((x for x in found if x[0].get("method")), key=lambda x: (-x[0]["n"], x[1].name))]


def method_rows() -> list[list[str]]:
    """One row per recorded method run: accuracy (95 %), unread outputs, cost per question, Recall@10."""
    rows = []
    for run in method_runs():
        m = load(run / "metrics.json")
        meth, cost = m["method"], m["method"]["cost_per_question"]

        def c(key: str, digits: int = 1) -> str:
            return "—" if cost.get(key) is None else f"{cost[key]:.{digits}f}"

        rec = m.get("Recall@10")
        rows.append(
            [
                f"`{meth['name']}`",
                str(m["n"]),
                acc_text(m.get("Accuracy"), m.get("n"), m.get("Accuracy_interval95")),
                f"{meth['answer_rule']}; {meth['unread_outputs']}",
                *(c(k) for k in COST),
                "—" if rec is None or not cost.get("retrievals") else f"{rec:.3f}",
                f"`runs/{run.name}/`",
            ]
        )
    return rows


# the presets' recorded dev runs, compared with the methods (``facts`` and ``steps`` are methods too)
PRESET_RUNS = {"dev229-facts": "facts", "dev229": "steps"}


def method_comparison() -> list[list[str]]:
    """Each method run, then the presets' dev runs (:data:`PRESET_RUNS`), against the first method
    run (most questions, then name), pair by pair on the questions both answered: paired difference with its bootstrap 95 % interval and McNemar's exact p
    (``sqa.compare`` of the two runs)."""
    import sqa

    runs = method_runs()
    presets = [RESULTS / "runs" / name for name in PRESET_RUNS if (RESULTS / "runs" / name / "metrics.json").exists()]
    rows = []
    for other in runs[1:] + presets if runs else []:
        p = sqa.compare([runs[0], other]).to_dict()["pairs"][0]
        label = f" ({PRESET_RUNS[other.name]})" if other.name in PRESET_RUNS else ""
        rows.append(
            [
                f"`{p['b']}`{label} vs `{p['a']}`",
                str(p["n"]),
                f"{p['accuracy_b']:.3f} vs {p['accuracy_a']:.3f}",
                f"{-p['difference']:+.3f} ({-p['interval95'][1]:+.3f} to {-p['interval95'][0]:+.3f})",
                f"{p['only_b']} / {p['only_a']}",
                f"{p['mcnemar_p']:.3f}",
            ]
        )
    return rows


def methods_text(current: str) -> str:
    """docs/methods.md with its recorded-runs tables (between M_BEGIN and M_END) regenerated."""
    if M_BEGIN not in current or M_END not in current:
        raise SystemExit(f"error: docs/methods.md has no markers ({M_BEGIN} ... {M_END})")
    head, rest = current.split(M_BEGIN, 1)
    _, tail = rest.split(M_END, 1)
    header = [
        "method",
        "questions",
        "Accuracy (95 %)",
        "answer rule; unread outputs",
        "calls / q",
        "generated tokens / q",
        "prompt tokens / q",
        "retrievals / q",
        "seconds / q",
        "Recall@10",
        "run (`bench/results/`)",
    ]
    rows = method_rows()
    body = [table(header, rows)] if rows else ["No method run is recorded yet."]
    pairs = method_comparison()
    if pairs:
        body += [
            "",
            "Each run against the first, paired on the questions both answered (`sqa compare FIRST RUN`;",
            "difference and interval as the second minus the first; only right: questions only that run got right):",
            "",
            table(["pair", "questions", "Accuracy", "difference (95 %)", "only right (2nd / 1st)", "McNemar p"], pairs),
        ]
    return f"{head}{M_BEGIN}\n" + "\n".join(body) + f"\n{M_END}{tail}"


def readme_text(current: str) -> str:
    """README.md with its results table (between BEGIN and END) regenerated."""
    if BEGIN not in current or END not in current:
        raise SystemExit(f"error: README.md has no results markers ({BEGIN} ... {END})")
    head, rest = current.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{readme_table()}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """Write (or, with --check, compare) docs/results.md and README.md's table. Exit 1 when stale."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    a = ap.parse_args(argv)
    want = {DOC: results_doc(), README: readme_text(README.read_text(encoding="utf-8"))}
    import importlib.util

    if importlib.util.find_spec("scipy") is not None:  # the methods' comparison runs McNemar (scipy)
        want[METHODS_DOC] = methods_text(METHODS_DOC.read_text(encoding="utf-8"))
    else:
        print("docs/methods.md not checked: its comparison needs scipy (pip install -e '.[models]')", file=sys.stderr)
    stale = [p for p, text in want.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    if a.check:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is out of date: run python -m experiments.results", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(want[p], encoding="utf-8")
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
