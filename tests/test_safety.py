"""Issue 50: nothing leaked, destroyed or silently wrong on the newest paths (credentials a
server echoes, output files that are not files, ``heads rm``, garbled read-outs, model names,
the Python API's inputs, control sequences in names, ``sqa compare``'s cost)."""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
from urllib.parse import quote

import pytest

from helpers import StandIn, one_error_line, run_sqa, sqa_argv, write_log_odds_head

USER, PASSWORD, KEY = "bob", "Pw9/SecretXY", "sk-test-Zq81SecretKey"


def _forms(user: str | None, password: str | None, key: str | None) -> list[str]:
    out = []
    if password:
        pair = f"{user}:{password}".encode()
        out += [password, quote(password, safe=""), base64.b64encode(pair).decode(), "SecretXY"]
        out += [base64.b64encode(pair).decode().rstrip("=")]
    if key:
        out += [key, "SecretKey"]
    return out


def _sqa(args, home, env_extra, debug=False):
    env = {**os.environ, "SQA_HOME": str(home), "SQA_OPENAI_MAX_RETRIES": "0", **env_extra}
    env.pop("SQA_DEBUG", None)
    env.pop("OPENAI_API_KEY", None)
    env.pop("SQA_OPENAI_API_KEY", None)
    env.update(env_extra)
    if debug:
        env["SQA_DEBUG"] = "1"
    return subprocess.run(sqa_argv() + [str(a) for a in args], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("code", [401, 403, 500])
@pytest.mark.parametrize("how", ["basic", "key"])
def test_echoed_authorization_is_never_shown(tmp_path, code, how):
    """A server that echoes the ``Authorization`` header in its 401/403/500 error body: the error
    line and the ``SQA_DEBUG=1`` traceback hold neither the password (as typed, percent-encoded),
    nor the base64 of ``user:password`` (Basic), nor the bearer key."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    server = StandIn(echo_auth=code)
    try:
        head = write_log_odds_head(tmp_path / "h.json")
        url = server.url.replace("http://", f"http://{USER}:{PASSWORD}@") if how == "basic" else server.url
        env = {"SQA_OPENAI_API_KEY": KEY} if how == "key" else {}
        args = ["ask", "Is the sun a star?", "--no-retrieval", "--head", head, "--model", "openai:fake-reader"]
        args += ["--base-url", url]
        forms = _forms(USER, PASSWORD, None) if how == "basic" else _forms(None, None, KEY)
        sent = {a for a in server.auth if a}
        for debug in (False, True):
            r = _sqa(args, tmp_path / "home", env, debug=debug)
            assert r.returncode == 2, r.stderr[-2000:]
            assert f"{code}" in r.stderr or "HTTP" in r.stderr, r.stderr[-2000:]
            sent = {a for a in server.auth if a}
            assert sent, "the stand-in saw no Authorization header"
            shown = r.stdout + r.stderr
            if code != 401:  # the body is shown, scrubbed
                assert "denied; you sent Authorization" in shown, shown[-1500:]
            for f in forms:
                assert f not in shown, (f, shown[-1500:])
        assert any(("Basic " if how == "basic" else "Bearer ") in a for a in sent)
    finally:
        server.close()


def test_server_url_and_options_repr_hide_the_password():
    from sqa.models.served_url import ServedOptions, parse_base_url

    raw = f"http://{USER}:{PASSWORD}@127.0.0.1:8000/v1"
    u = parse_base_url(raw)
    assert u.password == PASSWORD  # still sent
    for text in (repr(u), str(u), repr(ServedOptions.of(raw)), str(ServedOptions.of([raw]))):
        assert "127.0.0.1:8000" in text
        for f in _forms(USER, PASSWORD, None):
            assert f not in text, text


@pytest.mark.parametrize("how", ["basic", "key"])
def test_response_cache_never_stores_an_echoed_credential(tmp_path, how):
    """A server that puts the ``Authorization`` header it got into its answers: nothing holding
    the credential reaches the response cache (``$SQA_HOME/cache/responses/responses.sqlite``) or
    the output."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    server = StandIn(echo_auth="answer")
    try:
        head = write_log_odds_head(tmp_path / "h.json")
        url = server.url.replace("http://", f"http://{USER}:{PASSWORD}@") if how == "basic" else server.url
        env = {"SQA_OPENAI_API_KEY": KEY} if how == "key" else {}
        args = ["ask", "Is the sun a star?", "--no-retrieval", "--head", head, "--model", "openai:fake-reader"]
        r = _sqa(args + ["--base-url", url, "--json"], tmp_path / "home", env)
        assert r.returncode == 0, r.stderr[-2000:]
        db = tmp_path / "home" / "cache" / "responses" / "responses.sqlite"
        assert db.is_file()
        with sqlite3.connect(db) as c:
            rows = [str(row) for t in ("responses", "loads") for row in c.execute(f"SELECT * FROM {t}")]
        assert rows and any("***" in row for row in rows)  # the echo was there, and was scrubbed
        blob = "\n".join(rows) + r.stdout + r.stderr
        forms = _forms(USER, PASSWORD, None) if how == "basic" else _forms(None, None, KEY)
        for f in forms:
            assert f not in blob, f
    finally:
        server.close()


# -- item 1: output files that are not regular files -------------------------------------------------


def _two_runs(tmp_path):
    from test_compare import write_run

    from sqa.strategyqa import load_questions

    qs = load_questions("dev")[:6]
    a = write_run(tmp_path / "A", "dev", {q.qid: q.answer for q in qs})
    b = write_run(tmp_path / "B", "dev", {q.qid: not q.answer for q in qs}, preset="no-retrieval", retrieval=False)
    return a, b


def _targets(tmp_path):
    """(name, path, check-after) for a FIFO, a symlink to a file, a dangling symlink, a directory
    and a symlink planted at ``<name>.tmp``."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "link.html"
    link.symlink_to(victim)
    dangling = tmp_path / "dangling.html"
    dangling.symlink_to(tmp_path / "nowhere" / "x")
    folder = tmp_path / "folder"
    folder.mkdir()
    planted = tmp_path / "planted.html"
    (tmp_path / "planted.html.tmp").symlink_to(victim)

    def unchanged():
        import stat

        assert victim.read_text() == "keep me\n"
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and dangling.is_symlink()
        assert folder.is_dir() and not (tmp_path / "nowhere").exists()
        assert (tmp_path / "planted.html.tmp").is_symlink()

    return [("fifo", fifo), ("link", link), ("dangling", dangling), ("folder", folder), ("planted", planted)], unchanged


def test_compare_html_never_replaces_a_fifo_link_or_folder(tmp_path):
    """``sqa compare A B --html X`` with X a FIFO, a link (to a file, dangling), a directory, or
    with a link planted at ``X.tmp``: one line naming the path, exit 2, nothing there changed."""
    a, b = _two_runs(tmp_path)
    targets, unchanged = _targets(tmp_path)
    for name, path in targets:
        r = run_sqa(["compare", a, b, "--html", path], timeout=60)
        line = one_error_line(r)
        shown = str(path) + (".tmp" if name == "planted" else "")
        assert shown in line and "not a regular file" in line, (name, line)
        unchanged()
    r = run_sqa(["compare", a, b, "--html", tmp_path / "new.html"], timeout=60)
    assert r.returncode == 0 and (tmp_path / "new.html").is_file(), r.stderr[-2000:]


def test_every_writer_refuses_a_fifo_link_or_folder(tmp_path):
    """The writers behind ``--out``/report files (run JSON files, report.md, report.html, the
    predictions file, an answer head) apply the same rule: BadInput naming the path."""
    from sqa.eval.html import write_comparison_html
    from sqa.eval.leaderboard import write_predictions
    from sqa.eval.report import write_markdown
    from sqa.jsonio import write_json_atomic
    from sqa.types import BadInput

    a, b = _two_runs(tmp_path)
    from sqa.eval.compare import compare_runs

    comparison = compare_runs([a, b])
    m = __import__("json").loads((a / "run.json").read_text())
    writers = {
        "json": lambda p: write_json_atomic(p, {"x": 1}),
        "md": lambda p: write_markdown(p, m, []),
        "html": lambda p: write_comparison_html(p, comparison),
        "predictions": lambda p: write_predictions({}, p),
        "head": lambda p: write_log_odds_head(p),
    }
    targets, unchanged = _targets(tmp_path)
    for wname, write in writers.items():
        for name, path in targets:
            with pytest.raises(BadInput) as e:
                write(path)
            assert str(path) in str(e.value) and "not a regular file" in str(e.value), (wname, name, e.value)
            unchanged()


# -- item 2: heads rm and --replace-heads -----------------------------------------------------------


def _plain_head(n: int, prompt: str | None = None):
    import numpy as np

    from sqa.facts.head import AnswerHead, FeatureSpec

    prov = {"kind": "plain", "fitted_qids": [f"q{i}" for i in range(n)], **({"prompt": prompt} if prompt else {})}
    return AnswerHead(FeatureSpec((), ("plain",)), np.ones(1, dtype=np.float32), 0.0, "m", None, prov)


def test_heads_rm_removes_only_heads(tmp_path):
    """``sqa heads rm`` refuses, by name and without removing it, a file that is not a head: a
    note, a JSON file named as a head holding other text, a link to a head, a folder; it removes a
    head and a damaged head (JSON text, which ``choose_head`` tells to remove)."""
    from sqa.facts.heads import head_file_name

    heads = tmp_path / "heads"
    heads.mkdir()
    head = _plain_head(5).save(heads / head_file_name("m", "plain", "facts-v1-k10", ["a"]))
    damaged = heads / "m.plain.facts-v1-k10.n3-00000000.json"
    damaged.write_text('{"format": 1, "model": "m", "coef": [')
    others = {
        "notes.txt": "my notes\n",
        "notes.json": '{"a": 1}',
        "m.plain.fake.n1-1.json": "not a head at all\n",
    }
    for name, text in others.items():
        (heads / name).write_text(text)
    (heads / "m.plain.link.n1-2.json").symlink_to(head)
    (heads / "m.plain.dir.n1-3.json").mkdir()
    env = {"SQA_HOME": str(tmp_path)}
    for name in [*others, "m.plain.link.n1-2.json", "m.plain.dir.n1-3.json"]:
        line = one_error_line(run_sqa(["heads", "rm", name], env=env, timeout=60))
        assert name in line and "nothing was removed" in line, line
        assert os.path.lexists(heads / name)
    assert head.exists()
    for p in (head, damaged):
        r = run_sqa(["heads", "rm", p.name], env=env, timeout=60)
        assert r.returncode == 0 and not p.exists(), r.stderr


def test_replace_heads_names_and_keeps_other_settings_and_forms(tmp_path, monkeypatch):
    """``--replace-heads`` (``save_heads(replace=True)``) removes only the model's heads of the same
    kind, settings and prompt form, and names each; chat-form heads, other settings and the
    older ``<model>.<kind>.json`` stay."""
    from sqa.facts.heads import save_heads
    from sqa.facts.prompt import prompt_version

    monkeypatch.setenv("SQA_HOME", str(tmp_path))
    ((same, _),) = save_heads({"plain": _plain_head(20)}, "m", "facts-v1-k10")
    ((other_k, _),) = save_heads({"plain": _plain_head(21)}, "m", "facts-v1-k5")
    chat = prompt_version("chat")
    ((chat_head, _),) = save_heads({"plain": _plain_head(54, chat)}, "m", f"{chat}-k10")
    legacy = _plain_head(7).save(tmp_path / "heads" / "m.plain.json")
    said: list[str] = []
    ((new, _),) = save_heads({"plain": _plain_head(30)}, "m", "facts-v1-k10", True, said.append)
    assert new.exists() and not same.exists()
    assert other_k.exists() and chat_head.exists() and legacy.exists()
    assert len(said) == 1 and str(same) in said[0] and "removed" in said[0]


# -- item 3: garbled Yes/No logprobs count as missing ------------------------------------------------

GARBLED = {"null": None, "nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "absurd": 1e308}
GARBLED.update({"positive": 1e3, "below": -1e4, "text": "abc"})


@pytest.mark.parametrize("bad", sorted(GARBLED))
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_a_garbled_yes_or_no_is_missing_not_a_minor_spelling(bad, endpoint):
    """`` Yes`` with a NaN / inf / out-of-range / non-number logprob beside well-formed minor
    spellings ("Yes" -4, "No" -5): the read-out is missing (log-odds 0), not read from them."""
    from sqa.models.served_read import answer_position, log_odds, token_positions

    top = {" Yes": GARBLED[bad], " No": -0.2, "Yes": -4.0, "No": -5.0, " Maybe": -3.0}
    if endpoint == "completions":
        lp = {"tokens": [" Yes"], "top_logprobs": [top]}
    else:
        alts = [{"token": k, "logprob": v} for k, v in top.items()]
        lp = {"content": [{"token": " Yes", "logprob": -0.1, "top_logprobs": alts}]}
    resp = {"choices": [{"text": " Yes", "message": {"content": " Yes"}, "logprobs": lp}]}
    assert log_odds(answer_position(token_positions(resp, endpoint))) == (0.0, "missing")
    ok = {**top, " Yes": -0.5}
    resp["choices"][0]["logprobs"] = (
        {"tokens": [" Yes"], "top_logprobs": [ok]}
        if endpoint == "completions"
        else {"content": [{"token": " Yes", "top_logprobs": [{"token": k, "logprob": v} for k, v in ok.items()]}]}
    )
    assert log_odds(answer_position(token_positions(resp, endpoint)))[1] == "both"


@pytest.mark.parametrize("bad", ["null", "nan", "inf", "absurd", "text", "positive"])
def test_served_eval_counts_garbled_readouts_as_missing(tmp_path, bad):
    """Through ``sqa eval`` against a stand-in whose answers list a garbled `` Yes``/`` No`` and the
    minor spellings: every read-out is counted missing and P(yes) is 0.5 (main read 0.731)."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    import json

    from helpers import served_eval_args

    s = StandIn(bad=bad, minor=True)
    try:
        out = tmp_path / "run"
        env = {"SQA_HOME": str(tmp_path / "home"), "SQA_OPENAI_MAX_RETRIES": "0"}
        r = run_sqa(served_eval_args(s.url, write_log_odds_head(tmp_path / "h.json"), out, limit=3), env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        m = json.loads((out / "metrics.json").read_text())
        assert m["yes_no_unread"]["missing"] == 3, m["yes_no_unread"]
        traces = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()]
        assert [t["p_yes"] for t in traces] == [0.5] * 3
    finally:
        s.close()


# -- item 5a: a served model's name is checked exactly ----------------------------------------------


@pytest.mark.parametrize(
    "asked,answered", [("gpt-4", "gpt-4o-mini"), ("Qwen/Qwen2.5-7B", "Qwen2.5-7B-Instruct"), ("m", "org/m")]
)
def test_served_model_answering_under_another_name_is_refused(tmp_path, monkeypatch, asked, answered):
    """From Python: a server answering as ``answered`` when asked for ``asked`` (a name that only
    starts alike, or shares a last path part) is refused in one line naming both and
    ``allow_model_alias``; with ``allow_model_alias=True`` it reads."""
    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    from sqa.models.openai import OpenAIModel
    from sqa.types import SqaError

    monkeypatch.setenv("SQA_HOME", str(tmp_path))
    monkeypatch.setenv("SQA_OPENAI_MAX_RETRIES", "0")
    s = StandIn(model=asked, answer_as=answered)
    try:
        with pytest.raises(SqaError) as e:
            m = OpenAIModel(asked, s.url, cache=False, concurrency=1)
            m.yes_probability(["Question: Is water wet?\nAnswer (Yes or No):"])
        assert repr(answered) in str(e.value) and "allow_model_alias" in str(e.value)
        m = OpenAIModel(asked, s.url, cache=False, concurrency=1, allow_model_alias=True)
        assert 0.0 < m.yes_probability(["Question: Is water wet?\nAnswer (Yes or No):"])[0] < 1.0
        m.close()
    finally:
        s.close()


# -- items 5b / 7c: the Python API checks its inputs --------------------------------------------------


def _bad_input(fn, *words):
    from sqa.types import BadInput

    with pytest.raises(BadInput) as e:
        fn()
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    return str(e.value)


def test_python_api_refuses_wrong_types_naming_the_argument(tmp_path, monkeypatch):
    """A str where a list is meant, None, numbers where text is meant, a wrong ``limit`` /
    ``k`` type or value, a reader that is not a Reader, an unwritable ``out``: BadInput naming
    the argument (no TypeError/AttributeError from inside sqa, no answer to the question "None")."""
    import sqa
    from sqa.api.index import Index

    monkeypatch.setenv("SQA_HOME", str(tmp_path / "home"))
    idx = Index.__new__(Index)  # the checks come before any engine is asked
    idx._be = None
    _bad_input(lambda: idx.get("Laptop-1"), "evidence_ids", "list", "['Laptop-1']")
    _bad_input(lambda: idx.get([5]), "evidence_ids")
    _bad_input(lambda: idx.search("laptop", k="3"), "k", "'3'")
    _bad_input(lambda: idx.search(None), "query")
    _bad_input(lambda: Index.build(corpus=5, path=tmp_path / "i"), "corpus")
    _bad_input(lambda: sqa.Reader(model=5), "model")
    reader = sqa.Reader("no-retrieval", model="fake-model-never-loaded")
    _bad_input(lambda: reader.ask(None), "question", "NoneType")
    _bad_input(lambda: reader.ask(5), "question", "int")
    _bad_input(lambda: reader.ask_many("a question"), "questions", "list")
    _bad_input(lambda: sqa.evaluate("not a reader"), "reader")
    _bad_input(lambda: sqa.evaluate(reader, limit="3"), "limit")
    line = _bad_input(lambda: sqa.evaluate(reader, limit=0), "limit")
    assert "--limit" not in line
    _bad_input(lambda: sqa.evaluate(reader, limit=1, out="/proc/sqa-x/run"), "out", "/proc/sqa-x/run")
    _bad_input(lambda: sqa.score(5), "predictions")
    assert reader._pipeline is None  # nothing loaded on the way


# -- item 7a: names printed to a terminal carry no control sequence -----------------------------------

NASTY = "x\x1b[2J\x1b[H\x1b]0;pwned\x07\x9b31m\x07[red]y"


def _no_control(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text, repr(text)
    assert "[2J" not in text and "pwned" not in text


def test_heads_list_and_compare_strip_control_sequences(tmp_path):
    """A head file and run folders whose names hold a clear-screen sequence, an OSC title, a C1
    CSI and rich markup: ``sqa heads list`` and ``sqa compare`` print them without any of it."""
    heads = tmp_path / "home" / "heads"
    heads.mkdir(parents=True)
    _plain_head(4).save(heads / f"m.plain.{NASTY}.n4-0.json")
    r = run_sqa(["heads", "list"], env={"SQA_HOME": str(tmp_path / "home")}, timeout=60)
    assert r.returncode == 0 and "m.plain.x" in r.stdout and "[red]y" in r.stdout, r.stdout + r.stderr
    _no_control(r.stdout + r.stderr)
    from test_compare import write_run

    from sqa.strategyqa import load_questions

    qs = load_questions("dev")[:6]
    a = write_run(tmp_path / f"A{NASTY}", "dev", {q.qid: q.answer for q in qs})
    b = write_run(tmp_path / "B", "dev", {q.qid: not q.answer for q in qs[:5]})
    r = run_sqa(["compare", a, b], timeout=60)
    assert r.returncode == 0 and "Ax" in r.stdout and "left out" in r.stdout, r.stdout + r.stderr
    _no_control(r.stdout + r.stderr)


# -- item 7b: sqa compare is linear in the questions -------------------------------------------------


def test_compare_reads_20000_questions_per_run_in_seconds(tmp_path):
    """Two runs of 20,000 synthetic questions each: reading both and comparing them (a small
    bootstrap, so only the per-question work is timed) takes seconds; main copied the rest of
    ``traces.jsonl`` for every line it read (quadratic: 12,000 per run took 12 s to read)."""
    pytest.importorskip("scipy", reason="scipy (the models extra) runs sqa compare's tests")
    import json
    import time

    from sqa.eval.compare import _scipy_check, compare_runs

    n = 20_000
    for name, flip in (("A", 0), ("B", 1)):
        d = tmp_path / name
        d.mkdir()
        opts = {"split": "custom", "preset": "facts", "retrieval": False}
        (d / "run.json").write_text(json.dumps({"format": 2, "options": opts}))
        rec = {"question": "Is it?", "p_yes": 0.5, "steps": [], "paragraphs": []}
        lines = (
            json.dumps({**rec, "qid": f"q{i}", "answer": (i + flip) % 3 == 0, "eval": {"gold": i % 2 == 0}}) + "\n"
            for i in range(n)
        )
        (d / "traces.jsonl").write_text("".join(lines))
    _scipy_check()  # the import is not the per-question work
    t = time.perf_counter()
    c = compare_runs([tmp_path / "A", tmp_path / "B"], resamples=100)
    took = time.perf_counter() - t
    assert len(c.qids) == n and c.pairs[0].n == n
    assert took < 6.0, f"compare of {n:,} questions per run took {took:.1f} s"
