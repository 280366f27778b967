"""Every name the docs give for code resolves: a dotted ``sqa.x.y`` (module or attribute), a
backticked dotted name under a stage package (``facts.reader.FactsReader`` means
``sqa.facts.reader.FactsReader``) and a backticked ``sqa/...`` path, in docs/*.md and README.md."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
PACKAGES = ("indexing", "retriever", "models", "steps", "facts", "eval", "api", "cli", "reader", "pipeline", "types")
DOTTED = re.compile(r"\bsqa(?:\.[A-Za-z_]\w*)+")
SPAN = re.compile(r"`([^`\s]+)`")


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _names() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        names = {m.rstrip(".") for m in DOTTED.findall(text)}
        for span in SPAN.findall(text):
            span = span.split("(")[0].rstrip(".,:;")
            parts = span.split(".")
            # a stage's module and name (`models.hf.HFModel`, `eval.Run`), not a variable's method
            # (`reader.ask_many`) or a JSON field (`eval.cost`)
            if (
                re.fullmatch(r"[a-z_]+(\.[A-Za-z_]\w*)+", span)
                and parts[0] in PACKAGES
                and (len(parts) >= 3 or parts[-1][:1].isupper())
                and not span.endswith((".py", ".md", ".json", ".jsonl"))
            ):
                names.add("sqa." + span)
        found[doc.name] = names
    return found


def test_every_dotted_name_in_the_docs_resolves():
    bad = [f"{doc}: {name}" for doc, names in _names().items() for name in sorted(names) if not _resolves(name)]
    assert not bad, "names in the docs that do not exist:\n" + "\n".join(bad)
    assert sum(len(n) for n in _names().values()) > 20  # the check sees the docs' names


def test_every_sqa_path_in_the_docs_exists():
    bad = []
    for doc in DOCS:
        for span in SPAN.findall(doc.read_text(encoding="utf-8")):
            path = span.rstrip(".,:;")
            if path.startswith("sqa/") and "*" not in path and "<" not in path and not (ROOT / path).exists():
                bad.append(f"{doc.name}: {path}")
    assert not bad, "paths in the docs that do not exist:\n" + "\n".join(bad)


def test_the_check_catches_a_name_that_does_not_exist():
    assert _resolves("sqa.facts.reader.FactsReader") and _resolves("sqa.Index.search")
    assert not _resolves("sqa.reader.facts_reasoner.FactsReasoner") and not _resolves("sqa.types.BatchReasoner")
