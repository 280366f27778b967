"""What ``report.html`` (:mod:`sqa.eval.html`) shows to explain a failure (issue 48): per question a
folded "gold" block (the gold decomposition, the gold facts and the text of the gold evidence
paragraphs, each marked retrieved and/or read as a fact by each run), a cost per question (tokens
where the run counted them, else seconds), the gold x predicted confusion counts of a run, and the
rule that charts are drawn only from :data:`CHARTS_FROM` questions on.

Paragraph text comes from the gold paragraphs shipped with the package
(``sqa.strategyqa.PARAGRAPHS_FILE``, the 9,251 paragraphs every index is built from); when that file
cannot be read the block says so in one line and still lists the IDs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from sqa.eval.metrics import annotator_ids
from sqa.types import Question

CHARTS_FROM = 30  # fewer questions than this: no reliability / coverage chart, a one-line note instead


def charts_note(n: int) -> str | None:
    """The line that replaces the charts of a page of ``n`` questions, None when they are drawn."""
    if n >= CHARTS_FROM:
        return None
    return (
        f"Charts (reliability, accuracy at coverage) are not drawn for so few questions "
        f"(n = {n}; they are drawn from {CHARTS_FROM} questions on)."
    )


@lru_cache(maxsize=1)
def _shipped_paragraphs() -> tuple[dict[str, dict] | None, str | None]:
    from sqa.strategyqa import PARAGRAPHS_FILE, load_json
    from sqa.types import SqaError

    try:
        data = load_json(PARAGRAPHS_FILE)
    except (SqaError, OSError) as e:  # said without the machine's paths: the page may be shared
        why = str(e).split(": ", 1)[-1].split(";")[0] or type(e).__name__
        return (
            None,
            f"paragraph text unavailable: the shipped gold paragraphs ({PARAGRAPHS_FILE.name}) cannot be read ({why})",
        )
    if not isinstance(data, dict):
        return None, "paragraph text unavailable (the shipped paragraphs file is not an object by ID)"
    return data, None


def paragraph_source() -> tuple[Mapping[str, dict] | None, str | None]:
    """The gold paragraphs by evidence ID (``{"title", "content", ...}``) and None, or None and the
    one line saying why their text is unavailable. Read once per process."""
    return _shipped_paragraphs()


def gold_ids(q: Question | None) -> list[str]:
    """The question's gold evidence IDs, every annotator's, in the order they first appear."""
    ids = (e for annotator in (q.evidence if q is not None else None) or () for e in annotator_ids(annotator))
    return list(dict.fromkeys(e for e in ids if isinstance(e, str)))


def gold_block(
    q: Question | None,
    cells: Sequence[dict],
    names: Sequence[str],
    paragraphs: Mapping[str, dict] | None,
    unavailable: str | None = None,
) -> dict | None:
    """The folded gold block of one question: its ``decomposition``, ``facts`` and ``paragraphs``
    (each ``{"id", "title", "text", "marks"}``: ``marks`` the runs that retrieved it and read it as
    a fact, e.g. ``["retrieved", "read"]``, prefixed with the run's name when several runs are
    shown), and ``note`` (one line when paragraph text is unavailable, else None). ``cells``: the
    runs' :func:`sqa.eval.html._cell` dicts, ``names`` their names. None when the question carries
    no gold decomposition, facts or evidence."""
    if q is None or not (q.decomposition or q.facts or q.evidence):
        return None
    several = len(cells) > 1
    rows = []
    missing = 0
    for pid in gold_ids(q):
        marks = []
        for name, c in zip(names, cells):
            got = [w for w, hit in (("retrieved", pid in c["retrieved"]), ("read", pid in c["read"])) if hit]
            if got:
                marks.append(f"{name}: {' and '.join(got)}" if several else " and ".join(got))
        para = (paragraphs or {}).get(pid) if paragraphs is not None else None
        if paragraphs is not None and para is None:
            missing += 1
        rows.append(
            {
                "id": pid,
                "title": (para or {}).get("title", ""),
                "text": (para or {}).get("content", ""),
                "marks": marks,
            }
        )
    note = unavailable if paragraphs is None and rows else None
    if missing and note is None:
        note = f"text of {missing} of these paragraphs is not in the shipped gold paragraphs"
    return {"decomposition": list(q.decomposition), "facts": list(q.facts), "paragraphs": rows, "note": note}


def cost_of(rec: dict) -> dict | None:
    """What answering one question cost, from its trace record: ``tokens`` (prompt + generated, a
    method's ``method.cost`` or a served model's ``eval.cost``; None where not counted),
    ``seconds`` (the method's, the served requests', else the reader's ``timings.total``: for reads
    served from the features store, ``cached``, the seconds of the original read), ``calls`` (None
    where not counted) and ``cached``; None when the record holds none of these."""
    m = (rec.get("method") or {}).get("cost") or {}
    ev = (rec.get("eval") or {}).get("cost") or {}
    tokens = calls = seconds = None
    if m.get("prompt_tokens") is not None or m.get("generated_tokens") is not None:
        tokens = int((m.get("prompt_tokens") or 0) + (m.get("generated_tokens") or 0))
    elif ev.get("prompt_tokens") is not None or ev.get("completion_tokens") is not None:
        tokens = int((ev.get("prompt_tokens") or 0) + (ev.get("completion_tokens") or 0))
    if m.get("calls") is not None:
        calls = m["calls"]
    elif ev.get("calls_sent") is not None:
        calls = ev["calls_sent"] + (ev.get("calls_cached") or 0)
    for s in (m.get("seconds"), ev.get("request_seconds"), (rec.get("timings") or {}).get("total")):
        if isinstance(s, (int, float)):
            seconds = float(s)
            break
    if tokens is None and seconds is None and calls is None:
        return None
    cached = not m and not ev and bool((rec.get("timings") or {}).get("cached"))
    return {"tokens": tokens, "seconds": seconds, "calls": calls, "cached": cached}


def cost_unit(cells: Sequence[dict]) -> str | None:
    """How a run's cost column sorts and reads: ``"tokens"`` when every question's cost counts
    tokens, else ``"seconds"`` when every one has seconds; None (no cost column) otherwise."""
    costs = [c["cost"] for c in cells]
    if not costs or any(c is None for c in costs):
        return None
    if all(c["tokens"] is not None for c in costs):
        return "tokens"
    if all(c["seconds"] is not None for c in costs):
        return "seconds"
    return None


def cost_text(cost: dict | None, unit: str | None) -> tuple[str, str, str]:
    """``(value to sort by, text shown, detail line)`` of one question's cost in ``unit``."""
    if cost is None or unit is None or cost.get(unit) is None:
        return "", "–", ""
    extra = []
    if unit == "tokens":
        value, shown = cost["tokens"], f"{cost['tokens']:,} tokens"
        if cost["seconds"] is not None:
            extra.append(f"{cost['seconds']:.1f} s")
    else:
        value, shown = cost["seconds"], f"{cost['seconds']:.2f} s"
    if cost["calls"] is not None:
        extra.append(f"{cost['calls']:g} call{'' if cost['calls'] == 1 else 's'}")
    if cost.get("cached"):
        extra.append("read earlier (stored)")
    return f"{value}", shown, ", ".join(extra)


def confusion(cells: Sequence[dict]) -> dict | None:
    """Gold yes/no x predicted yes/no counts of a run's labelled questions (``cells``: the
    :func:`sqa.eval.html._cell` dicts): ``{"yes-yes", "yes-no", "no-yes", "no-no", "n"}``, keyed
    gold first; None when no question is labelled."""
    out = {"yes-yes": 0, "yes-no": 0, "no-yes": 0, "no-no": 0}
    labelled = [c for c in cells if c["gold"] is not None]
    if not labelled:
        return None
    for c in labelled:
        out[f"{'yes' if c['gold'] else 'no'}-{'yes' if c['answer'] else 'no'}"] += 1
    return {**out, "n": len(labelled)}
