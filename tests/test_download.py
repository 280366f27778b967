"""``sqa index --corpus full``: the resumable corpus download (sqa.indexing.download) against a local
HTTP server that serves a small gzipped corpus of real lines (the shipped distractors, in the full
corpus's format), cuts connections mid-file, honours or ignores range requests and can be slow;
then the command interrupted mid-download and mid-index, resumed to the exact line count."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import re
import signal
import subprocess
import threading
import time

import pytest

from helpers import default_sigint, free_port, one_error_line, run_sqa, sqa_argv
from sqa.indexing import read_manifest
from sqa.indexing.build import CHECKPOINT
from sqa.indexing.download import CORPUS_NAME, fetch_corpus
from sqa.types import SqaError
from helpers import real_lines

NAME = CORPUS_NAME


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (http.server's name)
        srv = self.server
        if self.path != "/" + NAME:
            self.send_error(404, "Not Found")
            return
        data, rng = srv.data, self.headers.get("Range")
        start, status = 0, 200
        if rng and srv.ranges:
            start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                srv.log.append({"range": rng, "start": start, "status": 416, "sent": 0})
                return
            status = 206
        body = data[start:]
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes" if srv.ranges else "none")
        self.end_headers()
        entry = {"range": rng, "start": start, "status": status, "sent": 0, "auth": self.headers.get("Authorization")}
        srv.log.append(entry)
        cut = srv.cuts.pop(0) if srv.cuts else None  # bytes of this body to send before hanging up
        for i in range(0, len(body), 32768):
            chunk = body[i : i + 32768]
            if cut is not None and entry["sent"] + len(chunk) >= cut:
                chunk = chunk[: cut - entry["sent"]]
            try:
                self.wfile.write(chunk)
                self.wfile.flush()
            except OSError:  # the client went away (killed)
                self.close_connection = True
                return
            entry["sent"] += len(chunk)
            if cut is not None and entry["sent"] >= cut:
                self.close_connection = True  # the connection drops mid-file
                return
            if srv.delay:
                time.sleep(srv.delay)

    def log_message(self, *args):
        pass


def _corpus_bytes(n: int) -> tuple[bytes, int]:
    lines = real_lines(n)
    return gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), compresslevel=6), len(lines)


@pytest.fixture
def server():
    """A threaded local HTTP server for ``/corpus-enwiki-...jsonl.gz``: ``data`` (bytes), ``ranges``
    (honour Range), ``cuts`` (per response, bytes to send before closing the connection),
    ``delay`` (seconds between 32 KiB chunks), ``log`` (one dict per request), ``url``."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.data, srv.lines = _corpus_bytes(3_000)
    srv.ranges, srv.cuts, srv.delay, srv.log = True, [], 0.0, []
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/{NAME}"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


# --- fetch_corpus --------------------------------------------------------------------------------


def test_a_connection_cut_mid_file_is_resumed_with_a_range_request_not_restarted(server, tmp_path):
    cut = len(server.data) * 2 // 5
    server.cuts = [cut]
    path = fetch_corpus(server.url, tmp_path, retries=2)
    assert path == tmp_path / NAME and path.read_bytes() == server.data
    assert [(e["start"], e["status"]) for e in server.log] == [(0, 200), (cut, 206)]
    assert server.log[1]["range"] == f"bytes={cut}-"
    assert sum(e["sent"] for e in server.log) == len(server.data)  # every byte sent once
    record = json.loads((tmp_path / (NAME + ".json")).read_text())
    assert record["size"] == len(server.data) and record["lines"] == server.lines
    assert record["sha256"] == hashlib.sha256(server.data).hexdigest()
    assert not (tmp_path / (NAME + ".part")).exists()
    # done: a second call sends no request
    assert fetch_corpus(server.url, tmp_path) == path and len(server.log) == 2


def _left_part(server, tmp_path, data: bytes) -> None:
    """A ``.part`` as an interrupted run leaves it: the bytes and the sidecar recording its URL."""
    (tmp_path / (NAME + ".part")).write_bytes(data)
    (tmp_path / (NAME + ".part.json")).write_text(json.dumps({"url": server.url, "size": len(server.data)}))


def test_a_part_file_left_by_an_earlier_run_is_continued(server, tmp_path):
    k = len(server.data) // 3
    _left_part(server, tmp_path, server.data[:k])
    path = fetch_corpus(server.url, tmp_path)
    assert path.read_bytes() == server.data
    assert [(e["range"], e["status"], e["sent"]) for e in server.log] == [(f"bytes={k}-", 206, len(server.data) - k)]
    record = json.loads((tmp_path / (NAME + ".json")).read_text())
    assert record["resumed_from"] == k and record["restarted"] is False
    assert record["sha256"] == hashlib.sha256(server.data).hexdigest()  # the kept bytes are hashed too


def test_a_server_without_range_support_restarts_cleanly(server, tmp_path):
    server.ranges = False
    _left_part(server, tmp_path, b"x" * 5000)  # not even a prefix of the file: overwritten
    path = fetch_corpus(server.url, tmp_path)
    assert path.read_bytes() == server.data
    assert [(e["status"], e["sent"]) for e in server.log] == [(200, len(server.data))]
    assert json.loads((tmp_path / (NAME + ".json")).read_text())["restarted"] is True


def test_a_complete_part_file_gets_416_and_is_kept(server, tmp_path):
    _left_part(server, tmp_path, server.data)
    assert fetch_corpus(server.url, tmp_path).read_bytes() == server.data
    assert [e["status"] for e in server.log] == [416]


def test_a_download_that_is_not_a_complete_gzip_is_deleted_with_one_line(server, tmp_path):
    server.data = server.data[: len(server.data) // 2]  # the server's own file is cut short
    with pytest.raises(SqaError, match=r"not a complete gzip stream.*deleted, run the same command again") as e:
        fetch_corpus(server.url, tmp_path)
    assert "\n" not in str(e.value)
    assert not list(p.name for p in tmp_path.iterdir() if p.name.startswith(NAME) and not p.name.endswith(".lock"))


def test_a_connection_that_keeps_dropping_keeps_the_part_and_says_to_rerun(server, tmp_path):
    server.cuts = [1000, 0, 0]
    with pytest.raises(SqaError, match=r"lost 3 times in a row.*1,000 bytes are kept.*run the same command again"):
        fetch_corpus(server.url, tmp_path, retries=2)
    assert (tmp_path / (NAME + ".part")).read_bytes() == server.data[:1000]


def test_offline_refused_dns_and_http_errors_are_one_line_naming_the_url(server, tmp_path):
    port = free_port()
    with pytest.raises(
        SqaError, match=rf"http://127.0.0.1:{port}/x.gz: cannot download the corpus \(connection refused\)"
    ):
        fetch_corpus(f"http://127.0.0.1:{port}/x.gz", tmp_path)
    with pytest.raises(SqaError, match=r"http://sqa-test.invalid/x.gz: cannot download the corpus \(cannot resolve"):
        fetch_corpus("http://sqa-test.invalid/x.gz", tmp_path)
    with pytest.raises(SqaError, match=r"/nope.gz: HTTP 404"):
        fetch_corpus(server.url.replace(NAME, "nope.gz"), tmp_path)
    for bad in ("corpus.jsonl.gz", "ftp://host/x.gz", "http://host:port/x.gz"):
        with pytest.raises(SqaError, match="not a(n http\\(s\\)| usable) URL"):
            fetch_corpus(bad, tmp_path)
    with pytest.raises(SqaError) as e:
        fetch_corpus(f"http://alice:s3cret@127.0.0.1:{port}/x.gz", tmp_path)
    assert f"http://127.0.0.1:{port}/x.gz: cannot download" in str(e.value) and "s3cret" not in str(e.value)


def test_a_part_file_sqa_did_not_record_is_neither_continued_nor_deleted(server, tmp_path):
    # issue 34 item 3: a .part of the right name but with no sidecar recording it (not written by
    # sqa) was appended to, then deleted; on the 416 path deleted with a message blaming the server
    part = tmp_path / (NAME + ".part")
    for mine in (b"mine\n", server.data + b"more"):  # shorter than the file / longer (the 416 path)
        part.write_bytes(mine)
        with pytest.raises(SqaError, match=r"\.part: a partial file that sqa did not record.*move it away") as e:
            fetch_corpus(server.url, tmp_path)
        assert "\n" not in str(e.value)
        assert part.read_bytes() == mine and server.log == []  # untouched, nothing requested
    part.unlink()
    assert fetch_corpus(server.url, tmp_path).read_bytes() == server.data
    assert not (tmp_path / (NAME + ".part.json")).exists()  # the sidecar goes with the .part


def test_the_sidecar_records_url_and_size_while_a_download_is_partial(server, tmp_path):
    server.cuts = [len(server.data) // 2, 0]
    with pytest.raises(SqaError, match="lost"):
        fetch_corpus("http://alice:pw%2F1@" + server.url.split("//", 1)[1], tmp_path, retries=0)
    side = json.loads((tmp_path / (NAME + ".part.json")).read_text())
    assert side == {"url": server.url, "size": len(server.data)}  # the URL without its credentials


def test_a_server_that_ignores_ranges_and_always_hangs_up_half_way_is_given_up_on(server, tmp_path):
    # issue 34 item 7: the retry count reset whenever bytes arrived, so this restarted for ever
    server.ranges = False
    half = len(server.data) // 2
    server.cuts = [half] * 50
    t0 = time.monotonic()
    with pytest.raises(
        SqaError,
        match=rf"lost 3 times in a row without getting past {half:,} bytes.*run the same "
        "command again",
    ) as e:
        fetch_corpus(server.url, tmp_path, retries=2)
    assert "\n" not in str(e.value)
    assert len(server.log) == 3 and time.monotonic() - t0 < 30  # 1 + 2 restarts, 1 s + 2 s apart


def test_a_password_with_reserved_characters_is_sent_whole_and_never_shown(server, tmp_path):
    # issue 34 item 4: the authority was cut at the first "/", so the port was "Zq9" and the
    # message printed the password
    import base64

    pw = "Zq9/Se#c?r@e:t%41PW"
    url = f"http://user:{pw}@{server.url.split('//', 1)[1]}"
    assert fetch_corpus(url, tmp_path).read_bytes() == server.data
    assert base64.b64decode(server.log[0]["auth"].split()[1]).decode() == "user:Zq9/Se#c?r@e:tAPW"
    assert json.loads((tmp_path / (NAME + ".json")).read_text())["url"] == server.url
    port = free_port()
    with pytest.raises(SqaError) as e:
        fetch_corpus(f"http://user:{pw}@127.0.0.1:{port}/x.gz", tmp_path / "other")
    assert f"http://127.0.0.1:{port}/x.gz: cannot download" in str(e.value)
    assert not any(bit in str(e.value) for bit in ("Zq9", "Se#c", "PW", "user"))


def test_cli_password_with_a_slash_in_corpus_url_is_never_printed(tmp_path):
    url = f"http://user:Zq9/SecretPW@127.0.0.1:{free_port()}/x"
    r = run_sqa(
        ["index", "--corpus", "full", "--corpus-url", url, "--index-dir", tmp_path / "idx"],
        env={"SQA_HOME": str(tmp_path / "home")},
        timeout=120,
    )
    line = one_error_line(r)
    assert "cannot download the corpus (connection refused)" in line
    assert "Zq9" not in r.stderr + r.stdout and "SecretPW" not in r.stderr + r.stdout


def test_cli_an_empty_corpus_url_is_refused(tmp_path):
    r = run_sqa(
        ["index", "--corpus", "full", "--corpus-url", "", "--index-dir", tmp_path / "idx"],
        env={"SQA_HOME": str(tmp_path / "home")},
        timeout=120,
    )
    assert "--corpus-url / $SQA_CORPUS_URL is empty" in one_error_line(r)


# --- sqa index --corpus full -----------------------------------------------------------------------


def test_cli_offline_is_exit_2_one_line_with_credentials_redacted(tmp_path):
    url = f"http://alice:s3cret@127.0.0.1:{free_port()}/{NAME}"
    r = run_sqa(
        ["index", "--corpus", "full", "--corpus-url", url, "--index-dir", tmp_path / "idx"],
        env={"SQA_HOME": str(tmp_path / "home")},
        timeout=120,
    )
    line = one_error_line(r)
    assert f"{url.replace('alice:s3cret@', '')}: cannot download the corpus (connection refused)" in line
    assert "s3cret" not in line and "alice" not in line
    assert not (tmp_path / "idx" / "manifest.json").exists()


def _wait(cond, timeout: float = 60) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.01)


def test_cli_preset_full_killed_mid_download_and_mid_index_resumes_both_to_the_line_count(server, tmp_path):
    server.data, server.lines = _corpus_bytes(20_000)
    home, d = tmp_path / "home", tmp_path / "idx"
    part = home / "corpus" / (NAME + ".part")
    argv = sqa_argv() + [
        "index",
        "--corpus",
        "full",
        "--corpus-url",
        server.url,
        "--index-dir",
        str(d),
        "--commit-every",
        "1000",
    ]
    env = {**__import__("os").environ, "SQA_HOME": str(home)}

    # 1) killed (kill -9) half-way through the download
    server.delay = 0.02
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_sigint)
    _wait(lambda: part.exists() and part.stat().st_size > len(server.data) // 3)
    p.kill()
    p.wait(timeout=60)
    kept = part.stat().st_size
    assert 0 < kept < len(server.data) and not (d / CHECKPOINT).exists()

    # 2) resumed: one range request from what is on disk; then killed (kill -9) half-way through indexing
    server.delay, server.log = 0.0, []
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=default_sigint)
    _wait(lambda: (d / CHECKPOINT).exists() or p.poll() is not None)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert [(e["range"], e["status"]) for e in server.log] == [(f"bytes={kept}-", 206)]
    assert (home / "corpus" / NAME).read_bytes() == server.data
    ckpt = json.loads((d / CHECKPOINT).read_text())
    assert 0 < ckpt["indexed"] < server.lines, ckpt

    # 3) the same command again: no request (the file is complete and checked), the index resumes
    server.log = []
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, preexec_fn=default_sigint)
    assert r.returncode == 0, r.stderr[-3000:]
    assert server.log == [] and "(resumed)" in r.stdout
    manifest = read_manifest(d)
    assert manifest["paragraph_count"] == server.lines == 20_000 and manifest["preset"] == "full"
    assert manifest["corpus_files"] == [str((home / "corpus" / NAME).resolve())]
    # and once more: already built, still no request
    r = run_sqa(
        ["index", "--corpus", "full", "--corpus-url", server.url, "--index-dir", d], env={"SQA_HOME": str(home)}
    )
    assert r.returncode == 0 and "already built" in r.stderr and server.log == []


def test_cli_preset_full_with_a_copy_on_disk_downloads_nothing(tmp_path):
    data, n = _corpus_bytes(500)
    copy = tmp_path / "copy.jsonl.gz"
    copy.write_bytes(data)
    port = free_port()  # any download attempt would fail
    r = run_sqa(
        ["index", "--corpus", "full", "--corpus", copy, "--index-dir", tmp_path / "idx"],
        env={"SQA_HOME": str(tmp_path / "home"), "SQA_CORPUS_URL": f"http://127.0.0.1:{port}/x"},
    )
    assert r.returncode == 0, r.stderr
    m = read_manifest(tmp_path / "idx")
    assert m["paragraph_count"] == n and m["preset"] == "full" and not (tmp_path / "home" / "corpus").exists()


def test_a_part_of_a_file_that_changed_on_the_server_is_not_continued(server, tmp_path):
    # probing the .part sidecar: its recorded size differs from what the server now serves
    k = len(server.data) // 3
    (tmp_path / (NAME + ".part")).write_bytes(server.data[:k])
    (tmp_path / (NAME + ".part.json")).write_text(json.dumps({"url": server.url, "size": len(server.data) + 7}))
    with pytest.raises(SqaError, match=r"the file on the server changed since the partial download.*deleted"):
        fetch_corpus(server.url, tmp_path)
    assert not (tmp_path / (NAME + ".part")).exists()
    assert fetch_corpus(server.url, tmp_path).read_bytes() == server.data
