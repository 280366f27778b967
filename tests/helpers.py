"""What the tests share (issue 33: helper fakes in one module, never imported from another test file).

- Running the ``sqa`` command the way a user does: a real process, with the README's install
  (``sqa_argv``, ``run_sqa``, ``one_error_line``, ``default_sigint``, ``step_reader``). The README
  installs ``.[models]`` only, where ``click`` is absent (typer >= 0.20 vendors its own copy as
  ``typer._click``); ``run_sqa`` hides ``click`` from the process when typer has its vendored copy,
  so these tests see what a newcomer sees even where a dev extra pulled ``click`` in.
- ``ScriptedModel``: a deterministic ``LanguageModel`` for the steps reader.
- ``FakeReader`` / ``fake_p_yes``: a deterministic stand-in for a reader (same ``answer_batch``
  signature as ``sqa.steps.reader.StepsReader``) for the eval runner and CLI tests; this file also
  runs as a script that drives ``run_eval`` slowly, so a test can kill it mid-run.
- ``real_lines``: real lines of the shipped distractor file.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import itertools
import os
import re
import signal
import subprocess
import sys
import time

from sqa.eval.metrics import annotator_evidence
from sqa.models.chat import as_chatml_text
from sqa.strategyqa import DISTRACTORS_FILE
from sqa.trace import ReasoningResult, StepTrace


# the real entry point, with `click` made unimportable when typer does not need it
_BOOT = ("import sys\n"
         "if {block}:\n"
         "    sys.modules['click'] = None  # as in the README's install: typer vendors click\n"
         "from sqa.cli import main\n"
         "sys.exit(main())\n")
HIDES_CLICK = importlib.util.find_spec("typer._click") is not None


def sqa_argv(block_click: bool = HIDES_CLICK) -> list[str]:
    """``[python, -c, ...]`` running ``sqa`` (``sqa.cli.main``) with click hidden if asked."""
    return [sys.executable, "-c", _BOOT.format(block=bool(block_click))]


def default_sigint() -> None:
    """``preexec_fn`` for a child that must react to Ctrl-C: a test run as a background job has
    SIGINT ignored, which a child inherits (and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_sqa(args: list[str], env: dict | None = None, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run ``sqa ARGS`` in a fresh process; returns the CompletedProcess (text output)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("SQA_DEBUG", None)
    return subprocess.run(sqa_argv() + [str(a) for a in args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, preexec_fn=default_sigint, **kw)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed run; asserts exit status 2, exactly one line, no traceback."""
    lines = r.stderr.splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith("error: ") and "Traceback" not in r.stderr
    return lines[0]


def step_reader(command: str) -> list[str]:
    """``["--reader", "steps"]`` when ``sqa COMMAND`` has a ``--reader`` option (choosing the step
    pipeline, which these tests exercise, over a reader that needs a trained head), else ``[]``."""
    import typer.main

    from sqa.cli import _register, app

    _register()
    sub = typer.main.get_command(app).commands.get(command)
    opts = {o for p in getattr(sub, "params", []) for o in getattr(p, "opts", [])}
    return ["--reader", "steps"] if "--reader" in opts else []


# --- fakes -----------------------------------------------------------------------------------


def fake_p_yes(qid: str) -> float:
    return int(hashlib.md5(qid.encode()).hexdigest()[:6], 16) / 0xFFFFFF


class FakeReader:
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


class ScriptedModel:
    """A deterministic LanguageModel: the decomposer returns ``steps``; the reader answers step k
    with "ANSWER{k}"; P(yes) is 0.9 when the transcript holds "ANSWER1", else 0.2. Records every
    prompt it is given."""

    name = "scripted"
    prefers_batches = False

    def __init__(self, steps: list[str] | None = None):
        self.steps = steps
        self.generate_prompts: list[str] = []
        self.yes_prompts: list[str] = []

    def generate(self, prompts, max_tokens, stop=()):
        out = []
        for p in map(as_chatml_text, prompts):  # rendered as llama.cpp renders them
            self.generate_prompts.append(p)
            if p.endswith("Steps:\n1."):
                out.append(" " + "\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1))[3:] + "\nAnswer: Yes")
            else:
                k = int(re.search(r"#(\d+) =$", p).group(1))
                out.append(f" ANSWER{k}")
        return out

    def yes_probability(self, prompts):
        prompts = [as_chatml_text(p) for p in prompts]
        self.yes_prompts.extend(prompts)
        return [0.9 if "ANSWER1" in p else 0.2 for p in prompts]


def real_lines(n: int, start: int = 0) -> list[str]:
    """``n`` real lines of the shipped distractor file (full-corpus JSONL schema)."""
    with gzip.open(DISTRACTORS_FILE, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, start, start + n)]


def main(out_dir: str, split: str, limit: int, delay: float, batch_size: int) -> int:
    """Run the runner with a slow fake reader (for kill -9 / SIGINT tests); prints a summary line."""
    from sqa.eval.runner import EvalOptions, run_eval

    opts = EvalOptions(split=split, model="fake", limit=limit, batch_size=batch_size)
    summary = run_eval(opts, out_dir, lambda pool: FakeReader(pool, delay=delay))
    print(f"done={summary.done} new={summary.new} interrupted={summary.interrupted}", flush=True)
    return 130 if summary.interrupted else 0


if __name__ == "__main__":
    # a child of a background job inherits SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: restore it so the Ctrl-C test sends a real Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound once by the OS, then released): for a
    server a test starts, or for "nothing listening" at a URL."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
