"""Issue 34 items 4-5: one redaction (``sqa.redact``) for every URL and message, against passwords
with ``/ # ? @ :`` and percent-encodings, with and without scheme or host; then the real commands
against a real server on 127.0.0.1 that rejects the credentials."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from helpers import free_port, one_error_line, run_sqa
from sqa.cli.errors import error_line, redact  # the one redaction, re-exported where the CLI always had it
from sqa.redact import redact_url
from sqa.types import SqaError

PASSWORDS = [
    "Zq9/SecretPW",
    "Zq9#SecretPW",
    "Zq9?SecretPW",
    "Zq9@SecretPW",
    "Zq9:SecretPW",
    "Zq9%2FSecretPW",
    "Zq9%40Se%3Acret",
    "Zq9/S#e?c@r:etPW",
    "Zq9 SecretPW"[:3] + "SecretPW",
]
HOSTS = ["127.0.0.1:39999", "es.example.org", "[::1]:9200", "localhost:9200/prefix?x=1#frag"]


def _bits(pw: str) -> list[str]:
    """Pieces of a password that must never be shown (what a cut at a reserved character leaves)."""
    return ["SecretPW", "Secret", "cret"] if "Secret" in pw else ["Se%3Acret", "cret"]


@pytest.mark.parametrize("pw", PASSWORDS)
@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("scheme", ["http://", "https://", ""])
def test_redact_url_and_messages_never_show_any_part_of_the_password(pw, host, scheme):
    url = f"{scheme}elastic:{pw}@{host}"
    assert redact_url(url) == scheme + host
    for text in (url, f"error: SQA_ES_URL={url!r}: bad", f"cannot reach {url} (ConnectionError)", f"<{url}>"):
        shown = redact(text)
        assert not any(b in shown for b in _bits(pw)), shown
        assert host.split("/")[0] in shown  # the host stays, so the message still says where
    from sqa.redact import split_credentials

    bare, user, password = split_credentials(url)
    assert (bare, user) == (scheme + host, "elastic")
    from urllib.parse import unquote

    assert password == unquote(pw)


@pytest.mark.parametrize(
    "value",
    ["elastic:Zq9SecretPW", "http://elastic:Zq9SecretPW", "elastic:Zq9/SecretPW", "http://elastic:Zq9%2FSecretPW/x"],
)
def test_credentials_without_a_host_are_never_shown(value, monkeypatch):
    # issue 34 item 5: `SQA_ES_URL='elastic:Zq9SecretPW'` was printed whole, twice
    assert "Secret" not in redact_url(value) and redact_url(value).endswith("elastic:***")
    monkeypatch.setenv("SQA_ES_URL", value)
    msg = f"SQA_ES_URL={value!r} has no scheme; write http://{value}"
    assert "Secret" not in redact(msg)


def test_host_port_and_urls_without_credentials_are_kept():
    for u in (
        "http://localhost:9200",
        "https://es.example.org:9243/prefix",
        "localhost:9200",
        "http://[::1]:9200/x",
        "http://host/a?b=c#d",
    ):
        assert redact_url(u) == u and redact(f"at {u}: ok") == f"at {u}: ok"
    assert redact("3 of 10 questions: 0.50 (p=0.3)") == "3 of 10 questions: 0.50 (p=0.3)"


def test_environment_secrets_in_every_form_are_scrubbed(monkeypatch):
    monkeypatch.setenv("SQA_ES_PASSWORD", "p@ss/w:rd#1")
    monkeypatch.setenv("SQA_ES_API_KEY", "a%2Fkey==")
    for s in ("p@ss/w:rd#1", "p%40ss%2Fw%3Ard%231", "a%2Fkey==", "a/key=="):
        assert redact(f"auth failed for {s}!") == "auth failed for ***!"
    assert error_line(SqaError("x p@ss/w:rd#1 y")) == "x *** y"


class _Reject(http.server.BaseHTTPRequestHandler):
    """Answers every request 401, as Elasticsearch does for wrong credentials."""

    def do_GET(self):  # noqa: N802
        body = json.dumps(
            {"error": {"type": "security_exception", "reason": "unable to authenticate"}, "status": 401}
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-elastic-product", "Elasticsearch")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture
def rejecting_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Reject)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("pw", ["Zq9/SecretPW", "Zq9#Secret?PW", "Zq9@SecretPW"])
def test_cli_search_index_and_eval_never_print_the_password(tmp_path, rejecting_server, pw):
    # issue 34 item 4: `the port in 'elastic:Zq9' is not a number`, and the whole password printed
    for port in (free_port(), rejecting_server):
        env = {"SQA_ES_URL": f"http://elastic:{pw}@127.0.0.1:{port}", "SQA_HOME": str(tmp_path / "home")}
        for args in (
            ["search", "sea", "--backend", "elasticsearch"],
            ["index", "--corpus", "strategyqa", "--backend", "elasticsearch"],
            ["eval", "--reader", "steps", "--backend", "elasticsearch", "--limit", "1", "--out", tmp_path / "run"],
        ):
            r = run_sqa(args, env=env, timeout=120)
            line = one_error_line(r)
            assert "Secret" not in r.stderr + r.stdout and "Zq9" not in r.stderr + r.stdout, line
            assert f"127.0.0.1:{port}" in line
            if port == rejecting_server:
                assert "rejected the credentials (HTTP 401)" in line


def test_cli_credentials_without_a_host_are_never_printed(tmp_path):
    r = run_sqa(["search", "sea", "--backend", "elasticsearch"], env={"SQA_ES_URL": "elastic:Zq9SecretPW"})
    line = one_error_line(r)
    assert "Zq9SecretPW" not in r.stderr and "has no scheme" in line
