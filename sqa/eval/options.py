"""The options of one ``sqa eval`` run, which of them define the run, and reading them back.

A run is defined by :meth:`EvalOptions.identity` plus the identity of the index it searched
(:func:`sqa.indexing.manifest.index_identity`); the index directory is not part of it, so a
recorded run resumes from any location. ``run.json`` files written before (format 1) named the
index directory and the steps reader's ``decision`` and ``signals``: :func:`legacy_identity` maps
them onto today's identity, and :meth:`EvalOptions.from_dict` reads their options.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields

from sqa.steps.reader import DECISION as STEPS_DECISION
from sqa.strategyqa import SPLITS, load_questions
from sqa.types import MAX_K, ORACLES, Question, SqaError

DECOMPOSITIONS = ("predicted", "gold", "question")
READERS = ("facts", "steps", "method")  # "method": a sqa.methods method (EvalOptions.method)
DEFAULT_FOLDS = 5
# STEPS_DECISION: how the steps reader makes its final answer (fixed; sqa.steps.reader). It is
# recorded in the identity of steps runs, so a run recorded with another decision is refused, not mixed.


@dataclass(frozen=True)
class EvalOptions:
    """Options of one evaluation run (see :mod:`sqa.presets` for the named combinations).

    The fields in :attr:`IDENTITY` define the run: resuming a directory with different values is
    refused. ``limit`` (first N questions of the split), ``batch_size`` (questions per
    ``answer_batch`` call), ``preset`` (the name the options were given by) and ``protocol`` (the
    named question set, :mod:`sqa.eval.protocols`) may change between sessions. ``dataset``: for split ``custom``, ``"<file name>:<sha256 of its bytes, 12 hex>"``
    (``sqa eval --dataset``). ``head``: the answer head's identity (facts reader); ``prompt_form``:
    the facts reader's prompt form ("text" | "chat", ``sqa.facts.prompt``); ``prefill``: the steps
    reader's transcript continued in the assistant message (True) or read in turns (``sqa.steps.prompts``).
    Raises SqaError (one line) for an invalid combination.
    """

    split: str
    model: str
    decomposition: str = "predicted"
    k: int = 10
    backend: str = "embedded"
    folds: int = DEFAULT_FOLDS
    limit: int | None = None
    batch_size: int = 32
    retrieval: bool = True
    reader: str = "steps"  # the CLI's default is "facts"; "steps" is what runs recorded before it had
    oracle: str | None = None
    head: str = ""
    dataset: str = ""
    preset: str = ""
    protocol: str = ""  # the named question set (sqa.eval.protocols), recorded in run.json; not the identity
    chat_template: str = ""  # "" (the model's own) or check_template_file's "file:<name>:<sha256 12 hex>"
    prompt_form: str = "text"  # the facts reader's prompt form, "text" | "chat" (sqa.facts.prompt)
    prefill: bool = True  # the steps reader's transcript: continued (True) or read in turns (--no-prefill)
    method: str = ""  # reader "method": the method's name or module:Class (sqa.methods.registry.method_spec)
    method_settings: dict = field(default_factory=dict)  # its resolved MethodSettings (every value it read)

    IDENTITY = (
        "split",
        "model",
        "decomposition",
        "k",
        "folds",
        "retrieval",
        "decision",
        "reader",
        "oracle",
        "head",
        "dataset",
        "chat_template",
        "prompt_form",
        "prefill",
        "method",
        "method_settings",
    )

    def __post_init__(self):
        if (self.split == "custom") != bool(self.dataset):
            raise SqaError("split 'custom' goes with a --dataset file, and a --dataset file with split 'custom'")
        if self.split not in SPLITS and self.split != "custom":
            raise SqaError(f"unknown split {self.split!r}; use one of {', '.join(SPLITS)}")
        if self.decomposition not in DECOMPOSITIONS:
            raise SqaError(f"unknown decomposition {self.decomposition!r}; use one of {', '.join(DECOMPOSITIONS)}")
        if self.decomposition == "gold" and self.split in ("test", "all"):
            raise SqaError(
                f"--decomposition gold needs annotated steps, which the {self.split} split's test questions "
                "do not have; use predicted or question, or a labelled split (train, dev, train-2061)"
            )
        if not 1 <= self.k <= MAX_K:
            raise SqaError(f"top-k must be from 1 to {MAX_K:,} (got {self.k})")
        if self.batch_size < 1:
            raise SqaError(f"batch size must be at least 1 (got {self.batch_size})")
        if self.folds < 2:
            raise SqaError(f"cross-fitting needs at least 2 folds (got {self.folds})")
        if self.reader not in READERS:
            raise SqaError(f"unknown reader {self.reader!r}; use {' or '.join(READERS)}")
        if self.oracle is not None:
            if self.oracle not in ORACLES:
                raise SqaError(f"unknown oracle {self.oracle!r}; use {' or '.join(ORACLES)}")
            if self.split in ("test", "all"):
                raise SqaError(
                    f"--oracle {self.oracle} shows annotations the {self.split} split does not have (and "
                    "must never see); use dev, train or train-2061"
                )
            if self.reader != "facts":
                raise SqaError("--oracle goes with --reader facts")
        if self.reader == "facts" and self.decomposition != "question":
            raise SqaError(
                f"--decomposition {self.decomposition}: the facts reader retrieves for the whole question; "
                "use --decomposition question, or --reader steps"
            )
        if (self.reader == "method") != bool(self.method):
            raise SqaError("reader 'method' goes with a method (--method NAME), and a method with reader 'method'")
        if self.reader == "method" and self.decomposition != "question":
            raise SqaError(f"--decomposition {self.decomposition}: a method makes its own steps; leave it out")
        if self.limit is not None and self.limit < 1:
            raise SqaError(f"--limit must be at least 1 (got {self.limit})")

    @property
    def decision(self) -> str | None:
        """How the final answer is made: the steps reader's fixed ``STEPS_DECISION``; None for the
        facts reader (its answer head is identified by ``head``)."""
        return STEPS_DECISION if self.reader == "steps" else None

    @property
    def answering(self) -> str:
        """How the answers were made (run.json's vocabulary): "zero-shot" (the model's own,
        uncalibrated P(yes): the steps reader or a method, or the facts reader without a head, whose ``head``
        is "zero-shot:<kind>"), "out-of-fold" (train / train-2061 / all: heads fitted on the other
        folds), "cross-fitted" (dev, test or a dataset answered out-of-fold together with the
        questions a head was fitted on, each fold fitted with the others' labels: a cross-validated
        figure, issue 41 item 8) or "head" (one held-out answer head)."""
        if self.reader in ("steps", "method") or self.head.startswith("zero-shot"):
            return "zero-shot"
        if self.head.startswith("out-of-fold"):  # train splits out-of-fold; others with a head's fitted questions
            return "out-of-fold" if self.split in ("train", "train-2061", "all") else "cross-fitted"
        return "head"

    def identity(self) -> dict:
        """The options that define the run, as recorded in ``run.json`` (without the index's)."""
        return {name: getattr(self, name) for name in self.IDENTITY}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EvalOptions":
        """Options from a ``run.json`` ``options`` object, today's or an older one (keys this
        version no longer has, such as ``index_dir``, ``decision`` and ``signals``, are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


# identity keys added after runs were recorded, with the value those runs had (before ``decision``
# existed, the steps reader answered from the ``transcript`` reading alone)
LEGACY_DEFAULTS = {
    "reader": "steps",
    "oracle": None,
    "head": "",
    "dataset": "",
    "decision": "transcript",
    "retrieval": True,
}


def legacy_default(key: str):
    """The value a run recorded before ``key`` joined the identity had (``LEGACY_DEFAULTS``, else
    the option's default)."""
    if key in LEGACY_DEFAULTS:
        return LEGACY_DEFAULTS[key]
    f = EvalOptions.__dataclass_fields__.get(key)
    if f is None:
        return None
    return f.default_factory() if f.default_factory is not MISSING else f.default


def legacy_identity(old: dict) -> dict:
    """A format-1 ``run.json`` identity mapped onto today's keys: missing keys get the value the
    runs of that time had (``LEGACY_DEFAULTS``), the path keys go, and the facts reader's recorded
    ``decision`` (the steps reader's default, unused by it) becomes None."""
    out = {k: v for k, v in old.items() if k not in ("index_dir", "backend", "index_paragraphs", "index")}
    for key in EvalOptions.IDENTITY:
        if key not in out:
            out[key] = legacy_default(key)
    if out.get("reader") == "facts":
        out["decision"] = None
    return out


def select_questions(split: str, limit: int | None = None) -> list[Question]:
    """The first ``limit`` questions (all if None) of ``split``, in release order."""
    qs = load_questions(split)
    return qs[:limit] if limit else qs
