"""A deterministic stand-in for the reader (same ``answer_batch`` signature as
``sqa.steps.reader.StepsReader``) used by the eval runner / CLI tests; also runnable as a script that
drives ``run_eval`` slowly so a test can kill it mid-run."""

from __future__ import annotations

import hashlib
import sys
import time

from sqa.eval.metrics import annotator_evidence
from sqa.trace import ReasoningResult, StepTrace


def fake_p_yes(qid: str) -> float:
    return int(hashlib.md5(qid.encode()).hexdigest()[:6], 16) / 0xFFFFFF


class FakeReasoner:
    """Answers from a hash of the qid; gold steps as decomposition; the first annotator's evidence
    IDs as paragraphs. Records every batch and the pool it was built for."""

    def __init__(self, pool=None, delay: float = 0.0):
        self.pool = pool
        self.delay = delay
        self.batches: list[list[str]] = []

    def answer_batch(self, questions, decomposition="predicted", on_result=None):
        self.batches.append([q.qid for q in questions])
        out = []
        for q in questions:
            if self.delay:
                time.sleep(self.delay)
            p_yes = fake_p_yes(q.qid)
            steps_text = list(q.decomposition) if decomposition != "question" else [q.question]
            ev = sorted(annotator_evidence(q.evidence)[0]) if q.evidence else []
            steps = [StepTrace(index=i + 1, question=s, query=s.replace("#", ""), answer="x", evidence=ev[:2],
                               scores=[1.0] * len(ev[:2]), seconds=0.001) for i, s in enumerate(steps_text)]
            out.append(ReasoningResult(question=q.question, steps=steps, answer=p_yes >= 0.5, p_yes=p_yes,
                                       paragraphs=ev[:10], qid=q.qid, timings={"total": 0.001}, model="fake",
                                       fewshot_qids=[d.qid for d in (self.pool.questions[:3] if self.pool else ())]))
            if on_result:
                on_result(out[-1])
        return out


def main(out_dir: str, split: str, limit: int, delay: float, batch_size: int) -> int:
    """Run the runner with a slow fake reader (for kill -9 / SIGINT tests); prints a summary line."""
    from sqa.eval.runner import EvalOptions, run_eval

    opts = EvalOptions(split=split, model="fake", limit=limit, batch_size=batch_size)
    summary = run_eval(opts, out_dir, lambda pool: FakeReasoner(pool, delay=delay))
    print(f"done={summary.done} new={summary.new} interrupted={summary.interrupted}", flush=True)
    return 130 if summary.interrupted else 0


if __name__ == "__main__":
    import signal

    # a child of a background job inherits SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: restore it so the Ctrl-C test sends a real Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])))
