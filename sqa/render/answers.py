"""The rich tree of an asked question (``sqa.api.ask.Asked``): the facts and their sources (facts
reader) or each decomposition step with its answer and top evidence (steps reader), then the
Yes/No with P(yes), how it was read, the time taken and the model."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.tree import Tree


def snippet(text: str, width: int = 160) -> str:
    """The first ``width`` characters of ``text`` on one line, with an ellipsis if cut."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def fit_command(model: str, served=None) -> str:
    """The command that fits ``model``'s answer heads, with a served model's ``--base-url`` (each,
    without credentials) and ``--api`` when given (``served``: a ``sqa.models.served_url.ServedOptions``,
    a URL, or None)."""
    from sqa.facts.reader import train_command
    from sqa.models.served_url import ServedOptions
    from sqa.redact import redact_url

    urls, api = (
        (served.base_urls, served.api) if isinstance(served, ServedOptions) else ((served,) if served else (), "auto")
    )
    return (
        train_command(model)
        + "".join(f" --base-url {redact_url(u)}" for u in urls)
        + (f" --api {api}" if api != "auto" else "")
    )


def answer_tree(asked, retrieval: bool = True) -> Tree:
    """A rich Tree of ``asked`` (``sqa.api.ask.Asked``); ``retrieval``: whether the preset
    retrieves (else no "no facts found" line)."""
    r = asked.result
    tree = Tree(f"[bold]{escape(r.question)}[/bold]")
    if asked.facts_reader:
        _facts(tree, asked, retrieval)
    else:
        _steps(tree, asked)
    if r.method:
        _method(tree, r.method)
    color = "green" if r.answer else "red"
    tree.add(
        f"[bold {color}]{'Yes' if r.answer else 'No'}[/bold {color}]  P(yes)={r.p_yes:.2f}{_how(asked)}  "
        f"confidence={r.confidence:.2f}  [dim]({r.timings.get('total', 0.0):.1f} s, {escape(r.model)})[/dim]"
    )
    return tree


def _method(tree: Tree, m: dict) -> None:
    """A method's reasoning (its final generation) and, per sampled path, its vote."""
    if m.get("text"):
        tree.add(f"[cyan]reasoning[/cyan] {escape(' '.join(m['text'].split()))}")
    if m.get("votes"):
        votes = ["yes" if v else "no" if v is not None else "unread" for v in m["votes"]]
        tree.add(f"[cyan]votes[/cyan] {', '.join(votes)}")


def _how(asked) -> str:
    r = asked.result
    if r.method:  # the method's answer rule and what the question cost
        c = r.method.get("cost", {})
        tokens = c.get("generated_tokens")
        read = "" if r.method.get("read", True) else ", no answer in the text: read by the rule's fallback"
        return (
            f"  [dim](method {escape(r.method['name'])}, rule {escape(r.method['answer_rule'])}{read}; "
            f"{c.get('calls', 0)} call{'' if c.get('calls') == 1 else 's'}, {'?' if tokens is None else tokens} tokens generated, "
            f"{c.get('retrievals', 0)} retrievals)[/dim]"
        )
    own = ", ".join(f"{n} {p:.2f}" for n, p in r.signals.items())
    if not asked.facts_reader:  # the P(yes) readings averaged in log-odds (sqa.steps.reader.DECISION)
        return f"  [dim](the model's own, uncalibrated: {own})[/dim]"
    from sqa.facts.heads import fitted_count

    by = (
        f"answer head {Path(r.head).name}, fitted on {fitted_count(asked.head):,} questions"
        if r.head
        else "answer head"
    )
    how = (
        f"{by}; the model's own P(yes): {own}"
        if r.calibrated
        else f"the model's own, uncalibrated: no answer head for {asked.model}; "
        f"`{fit_command(asked.model, asked.served)}` fits one"
    )
    return f" [dim]({escape(how)})[/dim]"


def _facts(tree: Tree, asked, retrieval: bool) -> None:
    r = asked.result
    if r.steps:
        why = (
            "decomposition and each step's best sentence, shown only: the answer reads the facts below; "
            f"demonstrations picked by {asked.demos_by}"
            if asked.demos_by
            else "decomposition; each step's best sentence is among the facts below, which the answer reads"
        )
        node = tree.add(f"[cyan]steps[/cyan] [dim]({why})[/dim]")
        for s, facts in zip(r.steps, asked.step_facts or [[]] * len(r.steps)):
            sn = node.add(f"[cyan]{s.index}.[/cyan] {escape(s.question)}")
            for f in facts:
                sn.add(f"{escape(f.text)}  [dim]({escape(f.source)} {escape(f.ref)})[/dim]")
    if r.facts:
        node = tree.add("[cyan]facts[/cyan]")
        for f in r.facts:
            node.add(f"{escape(f['text'])}  [dim]({escape(f['source'] + ' ' + f['ref'])})[/dim]")
    elif retrieval:
        tree.add("[dim]no facts found[/dim]")


def _steps(tree: Tree, asked) -> None:
    r, paras = asked.result, asked.paragraphs

    def evidence(eid: str) -> str:
        p = paras.get(eid)
        return f"[dim]{escape(eid)}[/dim]  " + (
            f"[bold]{escape(p.title)}[/bold]: {escape(snippet(p.text))}" if p else ""
        )

    for s in r.steps:
        node = tree.add(
            f"[cyan]{s.index}.[/cyan] {escape(s.question)} → [bold green]{escape(s.answer or '?')}[/bold green]"
            + (" [dim](computed)[/dim]" if s.computed else "")
        )
        if s.evidence:
            node.add(evidence(s.evidence[0]))
    if not r.steps and r.paragraphs:
        tree.add(evidence(r.paragraphs[0]))


def asked_printer(as_json: bool, json_lines: bool, retrieval: bool = True):
    """What ``sqa ask`` prints for each asked question (``sqa.api.ask.Asked``), as a function of
    it: the :func:`answer_tree` on stdout, or with ``as_json`` its JSON object (indented, or with
    ``json_lines`` on one line: JSON Lines, one object a question), flushed so that a pipe gets
    each answer as it comes. ``retrieval``: as :func:`answer_tree`'s."""
    import sys

    from rich.console import Console

    def show(asked) -> None:
        if as_json:
            print(asked.json_text(indent=None if json_lines else 1), flush=True)
        else:
            Console().print(answer_tree(asked, retrieval=retrieval))
            sys.stdout.flush()

    return show
