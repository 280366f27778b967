"""What a finished (or interrupted) evaluation session gives back: :class:`Run`, a run folder and
its numbers, its per-question :class:`Record` s (``run.records``, ``run.to_pandas()``,
``run.errors()``), and :func:`default_run_dir`, where a run goes when no folder is named."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path

from sqa.eval.run_metrics import METRICS_FILE, PREDICTIONS_FILE, EvalSummary
from sqa.eval.rundir import RUN_FILE
from sqa.types import BadInput, RunNotFound


@dataclass(frozen=True)
class Record:
    """One answered question of a run, read back from its ``traces.jsonl`` (or the
    ``traces.jsonl.xz`` a recorded run keeps).

    ``qid``, ``question``; ``gold``: the labelled answer (None for an unlabelled question, e.g.
    the test split); ``answer``: the run's yes (True) / no; ``p_yes``: the final P(yes) in [0, 1]
    (None for a record without one); ``calibrated``: True when ``p_yes`` came from a fitted answer
    head, False when it is the model's own (zero-shot); ``confidence``: P(the answer is right),
    ``p_yes`` for a yes, ``1 - p_yes`` for a no; ``correct``: ``answer == gold`` (None unlabelled);
    ``signals``: the model's own P(yes) readings the answer was made from (reading name -> P(yes),
    e.g. ``{"plain": 0.70, "facts": 0.57}``; empty when the trace has none); ``facts``: what the
    facts reader read, each ``{"text", "source", "ref", "score"}`` (``source`` "wikipedia" with
    ``ref`` an evidence ID, "train-facts" with ``ref`` a train qid, or an oracle's); ``paragraphs``:
    the retrieved evidence IDs, best first; ``recall``: Recall@10 of ``paragraphs`` against the
    question's gold evidence (``sqa.eval.metrics.recall_at_k``, the official definition), None when
    the run retrieved nothing or the question has no evidence annotation; ``seconds``: wall-clock
    seconds of this question inside its batch (None when not recorded); ``cost``: what the method
    spent on this question, the trace's ``eval.cost`` (a served model's calls, tokens, request
    seconds) updated with its ``eval.method_cost`` when present; {} for an in-process model."""

    qid: str
    question: str
    gold: bool | None
    answer: bool
    p_yes: float | None
    calibrated: bool
    confidence: float | None
    correct: bool | None
    signals: dict = field(default_factory=dict)
    facts: tuple = field(default=(), repr=False)
    paragraphs: tuple = field(default=(), repr=False)
    recall: float | None = None
    seconds: float | None = None
    cost: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The fields as a JSON-serialisable dict (``facts`` and ``paragraphs`` as lists)."""
        d = asdict(self)
        d["facts"], d["paragraphs"] = [dict(f) for f in self.facts], list(self.paragraphs)
        return d


def read_records(path: str | Path, run: dict | None = None) -> list["Record"]:
    """The :class:`Record` of every answered question of the run folder ``path``, in the split's
    order (questions not in the split, e.g. of a ``--dataset`` file, in trace order after them).
    ``run``: the folder's ``run.json`` object (read when None). Gold answers and evidence come from
    the split ``run.json`` names (``sqa.strategyqa``), or, for a ``--dataset`` run, from the gold
    answer each trace line records (no evidence, so ``recall`` None). [] when the folder has no
    traces. Raises sqa.SqaError for traces that do not parse."""
    from sqa.eval.coverage import record_calibrated
    from sqa.eval.metrics import recall_at_k
    from sqa.eval.rundir import read_recorded_traces
    from sqa.strategyqa import SPLITS, load_questions

    path = Path(path)
    if run is None:
        run = json.loads((path / RUN_FILE).read_text(encoding="utf-8"))
    opts = run.get("options") or {}
    done = read_recorded_traces(path) or {}
    split = opts.get("split", "dev")
    known = {q.qid: q for q in load_questions(split)} if split in SPLITS else {}
    order = {qid: i for i, qid in enumerate(known)}
    retrieved = bool(opts.get("retrieval", True) or opts.get("oracle"))
    out = []
    for qid in sorted(done, key=lambda x: order.get(x, len(order))):  # stable: unknown qids keep trace order
        rec = done[qid]
        ev = rec.get("eval") or {}
        q = known.get(qid)
        gold = q.answer if q is not None else ev.get("gold")
        answer = bool(rec.get("answer"))
        p_yes = rec.get("p_yes")
        paragraphs = tuple(rec.get("paragraphs") or ())
        recall = recall_at_k(q.evidence, paragraphs) if retrieved and q is not None and q.evidence else None
        out.append(
            Record(
                qid=qid,
                question=q.question if q is not None else rec.get("question", ""),
                gold=gold,
                answer=answer,
                p_yes=None if p_yes is None else float(p_yes),
                calibrated=record_calibrated(rec),
                confidence=None if p_yes is None else (float(p_yes) if answer else 1.0 - float(p_yes)),
                correct=None if gold is None else answer == gold,
                signals=dict(rec.get("signals") or {}),
                facts=tuple(dict(f) for f in rec.get("facts") or ()),
                paragraphs=paragraphs,
                recall=recall,
                seconds=ev.get("seconds"),
                cost={**(ev.get("cost") or {}), **(ev.get("method_cost") or {})},
            )
        )
    return out


def default_run_dir(stem: str, tag: str, model: str) -> Path:
    """``runs/eval/<stem>-<tag>-<model>`` (relative to the working directory): ``stem`` the split,
    the named protocol given (``--protocol``) or the dataset file's stem, ``tag`` the reader and
    how it answers (``facts``, ``facts-oof``,
    ``predicted-noretrieval``, ...), ``model`` the last path part of a local model (a ``.gguf``
    file or a checkpoint directory), else the whole name, with characters outside
    ``[A-Za-z0-9._-]`` replaced by ``_`` (``openai:Org/Name`` -> ``openai_Org_Name``)."""
    local = ("/" in model or model.endswith(".gguf")) and not model.startswith("openai:")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).name if local else model)
    return Path("runs") / "eval" / f"{stem}-{tag}-{name}"


@dataclass
class Run:
    """A run folder and what its latest session produced.

    ``path``: the folder (``run.json``, ``traces.jsonl``, ``predictions.json``, ``metrics.json``,
    ``report.md``; run the same evaluation with the same folder to resume); ``metrics``: the
    contents of ``metrics.json`` (``Accuracy`` in [0, 1], ``Recall@10``, ``SARI``, ``ECE``, ``n``,
    ...; None for the test split, which has no public labels, or before any answer); ``total`` /
    ``done`` / ``new``: questions in the run / answered so far / answered in this session;
    ``interrupted``: Ctrl-C stopped the session (what was done is saved); ``files``: the outputs
    written; ``heads``: answer-head files an out-of-fold train run wrote (kind -> path)."""

    path: Path
    metrics: dict | None
    total: int = 0
    done: int = 0
    new: int = 0
    interrupted: bool = False
    repaired_bytes: int = 0
    files: list[Path] = field(default_factory=list)
    heads: dict[str, Path] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every question of the run is answered (of a ``--limit`` cut, the cut's: ``metrics["complete"]``
        says whether the run covers its whole split or named question set)."""
        return self.done == self.total

    @property
    def predictions(self) -> dict[str, dict]:
        """``predictions.json``: qid -> the leaderboard entry ``{"answer", "decomposition",
        "paragraphs"}`` ({} before any answer)."""
        path = self.path / PREDICTIONS_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}

    @property
    def options(self) -> dict:
        """The options recorded in ``run.json`` (model, split, preset, k, ...)."""
        return json.loads((self.path / RUN_FILE).read_text(encoding="utf-8")).get("options", {})

    @property
    def settings(self):
        """The reader's settings recorded in ``run.json`` (a ``sqa.ReaderSettings``, as the reader
        resolved them: the top-k used, every method setting read), or None for a run recorded
        before they were. Raises :class:`sqa.types.BadInput` for a ``settings`` entry that does
        not read back."""
        from sqa.settings import ReaderSettings

        recorded = json.loads((self.path / RUN_FILE).read_text(encoding="utf-8")).get("settings")
        return ReaderSettings.from_dict(recorded) if recorded is not None else None

    def __repr__(self) -> str:
        """One line: method, model, Accuracy with its 95 % Wilson interval, questions, folder."""
        from sqa.display import run_repr

        return run_repr(self, self._questions())

    def _repr_html_(self) -> str:
        """The same as an HTML table (Jupyter), escaped."""
        from sqa.display import run_html

        return run_html(self, self._questions())

    def _questions(self) -> str:
        from sqa.eval.run_metrics import questions_summary

        return questions_summary(self.metrics) if self.metrics else f"{self.done} of {self.total} answered"

    @cached_property
    def records(self) -> list[Record]:
        """One :class:`Record` per answered question (:func:`read_records`: split order), read from
        the folder's traces once and kept."""
        return read_records(self.path)

    def errors(self) -> list[Record]:
        """The records answered wrong: labelled questions (``gold`` not None) whose ``answer`` is
        not ``gold`` (``correct`` False), most confident first (``confidence`` descending, ties in
        split order; unlabelled questions never appear)."""
        wrong = [r for r in self.records if r.correct is False]
        return sorted(wrong, key=lambda r: -(r.confidence if r.confidence is not None else 0.0))

    def to_pandas(self):
        """The records as a ``pandas.DataFrame``, one row per question in split order, one column per
        :class:`Record` field (``signals``, ``facts``, ``cost`` hold Python objects). pandas is an
        optional extra (``pip install 'sqa[pandas]'``); raises :class:`sqa.BadInput` without it."""
        try:
            import pandas as pd
        except ImportError:
            raise BadInput("Run.to_pandas needs pandas: pip install pandas (or pip install 'sqa[pandas]')") from None
        cols = [f.name for f in fields(Record)]
        return pd.DataFrame([{c: getattr(r, c) for c in cols} for r in self.records], columns=cols)

    @classmethod
    def from_summary(cls, summary: EvalSummary, heads: dict[str, Path] | None = None) -> "Run":
        """The :class:`Run` of a session summary (``sqa.eval.run_metrics.EvalSummary``)."""
        return cls(
            Path(summary.out_dir),
            summary.metrics,
            summary.total,
            summary.done,
            summary.new,
            summary.interrupted,
            summary.repaired_bytes,
            list(summary.files),
            dict(heads or {}),
        )

    @classmethod
    def open(cls, path: str | Path) -> "Run":
        """A run folder written before, read back (``metrics`` from ``metrics.json``; ``done`` and
        ``total``: the questions in ``predictions.json``). Raises :class:`RunNotFound` (a
        :class:`sqa.BadInput`) naming ``path`` when it holds no ``run.json``."""
        path = Path(path)
        if not (path / RUN_FILE).exists():
            what = "no such folder" if not path.exists() else f"no {RUN_FILE} in it"
            raise RunNotFound(f"{path}: not a run folder ({what}); give the --out folder of an `sqa eval` run")
        mpath = path / METRICS_FILE
        metrics = json.loads(mpath.read_text(encoding="utf-8")) if mpath.exists() else None
        run = cls(path, metrics)
        run.done = run.total = len(run.predictions)
        return run
