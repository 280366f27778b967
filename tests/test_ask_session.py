"""``sqa ask -`` (questions one a line from stdin) and ``sqa ask -i`` (a prompt) load the model once
and answer each question exactly as a separate ``sqa ask "QUESTION"`` does (issue 49 item 2): with
the deterministic ``fake-states`` reader model (tests/helpers.py ``StateModel``) on the gold index,
and with ``--method cot`` over a stand-in OpenAI-compatible server (``StandIn``)."""

from __future__ import annotations

import io
import json
import os
import re
import select
import subprocess
import sys
import time

import pytest

import sqa.models.registry as registry
from helpers import FAKE_STATES_MODEL, REPO, StandIn, StateModel, one_error_line, run_sqa
from sqa.cli import main

QUESTIONS = [
    "Did Aristotle use a laptop?",
    "Is the sun a star?",
    "Could a llama birth twice during the Vietnam War?",
    "Would the top of Mount Fuji stick out of the Sea of Japan? ",  # dev's own text, its trailing space kept
]


@pytest.fixture
def states(monkeypatch):
    """Every model load in this process gives a fresh ``StateModel`` (no delay); returns the list
    of the models loaded, so a test can count the loads."""
    loaded: list[StateModel] = []

    def load(*a, **kw):
        loaded.append(StateModel())
        return loaded[-1]

    monkeypatch.setattr(registry, "load_model", load)
    monkeypatch.setattr(registry, "resolve_gguf", lambda *a, **kw: None)
    return loaded


def _ask(args: list, capsys, stdin: str | None = None, monkeypatch=None) -> str:
    """``sqa ARGS`` in this process (``stdin`` as its standard input); asserts exit 0; returns stdout."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert rc == 0, err[-3000:]
    return out


def _separate(questions, common: list, capsys) -> list[dict]:
    """Each question asked by its own ``sqa ask QUESTION --json COMMON`` (its own reader and model)."""
    return [_untimed(json.loads(_ask(["ask", q, "--json", *common], capsys))) for q in questions]


def _untimed(obj: dict) -> dict:
    """``sqa ask --json``'s object without its ``timings`` (seconds differ from run to run)."""
    return {k: v for k, v in obj.items() if k != "timings"}


def test_piped_questions_are_answered_as_separate_asks_with_one_model_load(gold_index, states, capsys, monkeypatch):
    """4 questions (and blank lines) on stdin: 4 JSON Lines equal to 4 separate ``sqa ask --json``
    answers, one model load instead of four; without --json each tree equals ``sqa ask``'s."""
    common = ["--model", "fake-states", "--index-dir", gold_index.index_dir]
    apart = _separate(QUESTIONS, common, capsys)
    assert len(states) == 4
    piped = "\n".join(QUESTIONS[:2]) + "\n\n  \n" + "\n".join(QUESTIONS[2:]) + "\n"  # blank lines skipped
    out = _ask(["ask", "-", "--json", *common], capsys, piped, monkeypatch)
    lines = out.splitlines()
    assert len(lines) == 4 and len(states) == 5  # JSON Lines, and the session loaded the model once
    session = [_untimed(json.loads(x)) for x in lines]
    assert session == apart  # answer, P(yes), facts, paragraphs: all identical
    assert [a["question"] for a in session] == QUESTIONS
    assert len({a["p_yes"] for a in session}) == 4  # four different answers, not one repeated

    # the rich trees one after the other, the seconds taken (the only thing that differs) left out
    def untimed(text: str) -> str:
        return re.sub(r"\(\d+\.\d s, fake-states\)", "(s)", text)

    alone = "".join(_ask(["ask", q, *common], capsys) for q in QUESTIONS[:2])
    together = _ask(["ask", "-", *common], capsys, "\n".join(QUESTIONS[:2]) + "\n", monkeypatch)
    assert untimed(together) == untimed(alone) and together.count("P(yes)=") == 2


def test_a_file_redirected_by_the_shell(gold_index, states, capsys, tmp_path):
    """``sqa ask - --json < questions.txt`` in a fresh process, as a user types it: the answers of
    separate ``sqa ask`` runs, in order."""
    common = ["--model", "fake-states", "--index-dir", str(gold_index.index_dir)]
    apart = _separate(QUESTIONS[:3], common, capsys)
    (tmp_path / "questions.txt").write_text("\n".join(QUESTIONS[:3]) + "\n")
    env = {**os.environ, "PYTHONPATH": REPO, "SQA_TEST_READ_DELAY": "0", "FS": FAKE_STATES_MODEL}
    env.pop("SQA_DEBUG", None)
    cmd = f'"{sys.executable}" -c "$FS" ask - --json {" ".join(common)} < questions.txt'
    r = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert [_untimed(json.loads(x)) for x in r.stdout.splitlines()] == apart


def test_a_method_in_a_session_over_a_served_model(capsys, monkeypatch):
    """``sqa ask - --method cot`` through a stand-in server: each answer (P(yes), the reasoning, the
    calls) is the one of a separate ``sqa ask --method cot``; the model is loaded (probed) once."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    monkeypatch.setenv("SQA_OPENAI_CACHE", "0")  # every answer from the server, none from the cache
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = StandIn(reason=lambda text: f" {text.split()[-3]} is a word. So the answer is yes.")
    try:
        common = ["--method", "cot", "--model", "openai:fake-reader", "--base-url", server.url]
        apart = _separate(QUESTIONS[:3], common, capsys)
        per_load = server.gets / 3  # each separate run loaded the model: GET /v1/models
        piped = _ask(["ask", "-", "--json", *common], capsys, "\n".join(QUESTIONS[:3]), monkeypatch)
        session = [json.loads(x) for x in piped.splitlines()]
        assert per_load >= 1 and server.gets - 3 * per_load == per_load  # loaded once, not once per question
    finally:
        server.close()
    keep = ("question", "answer", "p_yes", "confidence", "calibrated")
    assert [{k: a[k] for k in keep} for a in session] == [{k: a[k] for k in keep} for a in apart]
    assert [a["method"]["text"] for a in session] == [a["method"]["text"] for a in apart]
    assert all(a["method"]["cost"]["calls"] == 1 for a in session)


def test_mode_errors_are_one_line():
    line = one_error_line(run_sqa(["ask", "Is the sun a star?", "-i"], timeout=60))
    assert "-i opens a prompt" in line
    line = one_error_line(run_sqa(["ask"], stdin=subprocess.DEVNULL, timeout=60))
    assert "missing argument 'question'" in line.lower() and "`-`" in line


def _read_until(fd: int, pattern: str, seen: bytearray, timeout: float = 60) -> str:
    """Read the pseudo-terminal ``fd`` into ``seen`` until ``pattern`` (a regex) matches the text
    read so far, ANSI escapes removed; returns that text. Fails the test after ``timeout`` s."""
    end = time.monotonic() + timeout
    while True:
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen.decode("utf-8", "replace"))
        if re.search(pattern, text):
            return text
        left = end - time.monotonic()
        assert left > 0, f"no {pattern!r} after {timeout} s; the terminal shows:\n{text[-3000:]}"
        if select.select([fd], [], [], min(left, 0.5))[0]:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                pass


def test_interactive_prompt_through_a_pseudo_terminal(gold_index, states, capsys):
    """``sqa ask -i --json`` in a pseudo-terminal: a question answered, a second one cancelled with
    Ctrl-C while it is read, then asked again and answered, Ctrl-D leaves (exit 0); both answers
    equal separate ``sqa ask --json``'s, and the model loaded once (before the first prompt)."""
    import pty

    common = ["--model", "fake-states", "--index-dir", str(gold_index.index_dir)]
    apart = _separate(QUESTIONS[:2], common, capsys)
    env = {**os.environ, "PYTHONPATH": REPO, "SQA_TEST_READ_DELAY": "0.6", "COLUMNS": "4000", "TERM": "xterm"}
    env.pop("SQA_DEBUG", None)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the session leader, with the pseudo-terminal as its controlling terminal
        os.execve(sys.executable, [sys.executable, "-c", FAKE_STATES_MODEL, "ask", "-i", "--json", *common], env)
    seen = bytearray()
    try:
        _read_until(fd, r"question> $", seen)
        os.write(fd, (QUESTIONS[0] + "\n").encode())
        _read_until(fd, r'"p_yes".*\n.*question> $', seen)
        os.write(fd, (QUESTIONS[1] + "\n").encode())
        _read_until(fd, re.escape(QUESTIONS[1]) + r"\s*\n.*reading…", seen)  # its spinner: reads of 0.6 s each
        os.write(fd, b"\x03")  # Ctrl-C, as the terminal sends it: SIGINT to the foreground process group
        _read_until(fd, r"cancelled.*\n.*question> $", seen)
        os.write(fd, (QUESTIONS[1] + "\n").encode())
        _read_until(fd, r'(?s)cancelled.*"p_yes".*\n.*question> $', seen)
        os.write(fd, b"\x04")  # Ctrl-D at an empty prompt: leave
        text = _read_until(fd, r"question> \s*$", seen)
        _, status = os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, text[-3000:]
    answers = [_untimed(json.loads(x)) for x in re.findall(r'\{"question".*\}', text)]
    assert answers == apart, text[-3000:]  # the cancelled question printed nothing
    assert text.count("cancelled") == 1 and "Traceback" not in text


def test_the_ask_path_imports_no_progress_bars_nor_unused_libraries(gold_index, tmp_path):
    """A whole ``sqa ask --json`` (fake-states, facts reader: BM25 fact selection) in a fresh
    process imports neither tqdm nor asyncio (bm25s's progress bars, 0.1 s; sqa shows none) nor
    pandas, matplotlib, scikit-learn, torch or transformers; ``$DISABLE_TQDM`` is left as it was."""
    watch = ("tqdm", "asyncio", "pandas", "matplotlib", "sklearn", "torch", "transformers", "bm25s")
    boot = (
        "import atexit, os, sys\n"
        f"atexit.register(lambda: print('LOADED', [m for m in {watch!r} if m in sys.modules], "
        "os.environ.get('DISABLE_TQDM'), file=sys.stderr))\n" + FAKE_STATES_MODEL
    )
    env = {**os.environ, "PYTHONPATH": REPO, "SQA_TEST_READ_DELAY": "0"}
    env.pop("DISABLE_TQDM", None)
    args = ["ask", QUESTIONS[0], "--json", "--model", "fake-states", "--index-dir", str(gold_index.index_dir)]
    r = subprocess.run([sys.executable, "-c", boot, *args], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)["facts"], r.stderr[-3000:]
    assert "LOADED ['bm25s'] None" in r.stderr, r.stderr[-3000:]  # the facts were selected with bm25s


@pytest.mark.slow
def test_back_to_prefixes_reads_the_next_prompt_as_a_fresh_process_even_after_a_cut_read(tmp_path):
    """The packaged 0.5B on llama.cpp: after a warmed prompt head, a prompt's reading (hidden state
    and log-odds) is bit-identical when it is read again after another prompt that shares more
    tokens with it, and after a read cut short by Ctrl-C (KeyboardInterrupt between two batches),
    once ``back_to_prefixes`` put the KV cache back (what ``sqa ask -`` / ``-i`` do between questions)."""
    import numpy as np

    from helpers import small_gguf
    from sqa.models.llamacpp import LlamaCppModel

    m = LlamaCppModel(small_gguf(), n_ctx=1024, n_threads=2, n_batch=8)
    head = "Answer each question with Yes or No.\nQuestion: Is water wet?\nAnswer: Yes\n"
    ref = head + "Question: Did Aristotle use a laptop?\nAnswer:"
    m.warm_prefixes([head], tmp_path)
    want = m.hidden_states([ref])[0]

    def same() -> bool:
        m.back_to_prefixes()
        got = m.hidden_states([ref])[0]
        return bool(np.array_equal(got[0], want[0]) and got[1] == want[1])

    m.hidden_states([head + "Question: Did Aristotle write a book about laptops?\nAnswer:"])
    assert same()
    orig = m._decode

    def cut(tokens, pos0, slot):  # reads the first batch, then Ctrl-C
        orig(tokens[: m.n_batch], pos0, slot)
        raise KeyboardInterrupt

    m._decode = cut
    with pytest.raises(KeyboardInterrupt):
        m.hidden_states([head + "Question: Was Aristotle a Greek philosopher of ancient times?\nAnswer:"])
    m._decode = orig
    assert same()
