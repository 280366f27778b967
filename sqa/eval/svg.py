"""Inline SVG charts for ``report.html`` (no scripts, no external assets): the reliability diagram
and the accuracy-coverage curve (:mod:`sqa.eval.coverage`), one colour per run."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
W, H, L, B, T, R = 340, 280, 46, 40, 26, 12  # size and margins (left, bottom, top, right), px


def _x(v: float) -> float:
    return L + v * (W - L - R)


def _y(v: float) -> float:
    return H - B - v * (H - B - T)


def _frame(title: str, xlabel: str, ylabel: str) -> list[str]:
    out = [
        (f'<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(title)}">'),
        f'<text x="{W / 2:.0f}" y="16" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - B - T}" fill="none" stroke="#999"/>',
    ]
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<line x1="{_x(t):.1f}" y1="{H - B}" x2="{_x(t):.1f}" y2="{H - B + 4}" stroke="#999"/>'
            f'<text x="{_x(t):.1f}" y="{H - B + 15}" text-anchor="middle" font-size="10">{t:g}</text>'
            f'<line x1="{L - 4}" y1="{_y(t):.1f}" x2="{L}" y2="{_y(t):.1f}" stroke="#999"/>'
            f'<text x="{L - 6}" y="{_y(t) + 3:.1f}" text-anchor="end" font-size="10">{t:g}</text>'
        )
    out.append(
        f'<text x="{(L + W - R) / 2:.0f}" y="{H - 6}" text-anchor="middle" font-size="11">{escape(xlabel)}</text>'
    )
    out.append(
        f'<text x="12" y="{(T + H - B) / 2:.0f}" text-anchor="middle" font-size="11" '
        f'transform="rotate(-90 12 {(T + H - B) / 2:.0f})">{escape(ylabel)}</text>'
    )
    return out


def _legend(names: Sequence[str]) -> list[str]:
    if len(names) < 2:
        return []
    top = H - B - 8 - 13 * (len(names) - 1)  # bottom right of the plot, where both charts are empty
    return [
        f'<text x="{W - R - 6}" y="{top + 13 * i}" text-anchor="end" font-size="10" '
        f'fill="{COLOURS[i % len(COLOURS)]}">■ {escape(n)}</text>'
        for i, n in enumerate(names)
    ]


def reliability_svg(names: Sequence[str], bins_per_run: Sequence[Sequence[dict]]) -> str:
    """The reliability diagram: per run, the accuracy of each confidence bin (``calibration_bins``:
    lo, hi, n, confidence, accuracy) at its mean confidence, the bin's n beside it; the diagonal is
    perfect calibration."""
    out = _frame("Reliability", "confidence of the given answer", "accuracy")
    out.append(f'<line x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" stroke="#bbb" stroke-dasharray="4 3"/>')
    for i, bins in enumerate(bins_per_run):
        c = COLOURS[i % len(COLOURS)]
        pts = [(b["confidence"], b["accuracy"], b["n"]) for b in bins if b["n"]]
        if len(bins_per_run) == 1:
            for b in bins:
                if b["n"]:
                    x0, x1 = _x(b["lo"]) + 1, _x(b["hi"]) - 1
                    out.append(
                        f'<rect x="{x0:.1f}" y="{_y(b["accuracy"]):.1f}" width="{x1 - x0:.1f}" '
                        f'height="{_y(0) - _y(b["accuracy"]):.1f}" fill="{c}" fill-opacity="0.25"/>'
                    )
        out.append(
            f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="'
            + " ".join(f"{_x(x):.1f},{_y(y):.1f}" for x, y, _ in pts)
            + '"/>'
        )
        for x, y, n in pts:
            out.append(
                f'<circle cx="{_x(x):.1f}" cy="{_y(y):.1f}" r="3" fill="{c}"><title>{n} questions, '
                f"confidence {x:.3f}, accuracy {y:.3f}</title></circle>"
            )
            out.append(f'<text x="{_x(x) + 4:.1f}" y="{_y(y) - 4:.1f}" font-size="9" fill="{c}">{n}</text>')
    return "\n".join(out + _legend(names) + ["</svg>"])


def coverage_svg(names: Sequence[str], curves: Sequence[Sequence[dict] | None], baseline: float | None = None) -> str:
    """The accuracy-coverage curve per run (``accuracy_at_coverage.curve``: coverage, n, Accuracy),
    with the majority baseline (always "no") dashed when given."""
    out = _frame("Accuracy at coverage", "coverage (most confident first)", "accuracy")
    if baseline is not None:
        out.append(
            f'<line x1="{_x(0)}" y1="{_y(baseline):.1f}" x2="{_x(1)}" y2="{_y(baseline):.1f}" stroke="#999" '
            f'stroke-dasharray="4 3"><title>always "no": {baseline:.3f}</title></line>'
        )
    for i, curve in enumerate(curves):
        if not curve:
            continue
        c = COLOURS[i % len(COLOURS)]
        out.append(
            f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="'
            + " ".join(f"{_x(p['coverage']):.1f},{_y(p['Accuracy']):.1f}" for p in curve)
            + '"/>'
        )
        for p in curve:
            out.append(
                f'<circle cx="{_x(p["coverage"]):.1f}" cy="{_y(p["Accuracy"]):.1f}" r="2" fill="{c}"><title>'
                f"{p['coverage']:.0%} coverage: accuracy {p['Accuracy']:.3f} on {p['n']}</title></circle>"
            )
    return "\n".join(out + _legend(names) + ["</svg>"])
