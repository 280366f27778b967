"""The comparison page's per-direction filters (issue 48, done-when 2: "only A right", "only B
right"), clicked in headless Chromium: the browser is driven over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: JSON messages ending in NUL on fds 3 and 4, stdlib only), each filter
button is pressed with a mouse event at its centre, and the rows left shown are counted. They must
be exactly the questions an independent computation from the two runs' predictions.json files
and the dev labels gives. Skips without Chromium (under CI=true a skip fails the run)."""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from helpers import run_sqa
from test_report_html import CHROMIUM, RUNS, browser

pytestmark = pytest.mark.browser


class DevTools:
    """A headless Chromium driven over ``--remote-debugging-pipe`` (Chrome DevTools Protocol), with
    one page attached (``flatten`` sessions). Use as a context manager; :meth:`call` sends one
    command and returns its result, skipping events."""

    def __init__(self, timeout: float = 60.0):
        self.timeout, self.next_id, self.buf, self.session = timeout, 0, b"", None
        self.profile = tempfile.TemporaryDirectory()
        to_chrome, from_chrome = os.pipe(), os.pipe()
        # above fd 4, so the child's dup2 onto 3 and 4 cannot clobber one of them
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (*to_chrome, *from_chrome)]
        for fd in (*to_chrome, *from_chrome):
            os.close(fd)
        child_in, self.w, self.r, child_out = high

        def fds() -> None:  # Chromium reads commands on fd 3 and writes on fd 4
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        args = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={self.profile.name}"]
        self.proc = subprocess.Popen(
            [CHROMIUM, *args, "--remote-debugging-pipe", "about:blank"],
            preexec_fn=fds,
            close_fds=False,  # the others are close-on-exec (PEP 446); 3 and 4 are dup2'd inheritable
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(child_in)
        os.close(child_out)

    def call(self, method: str, session: bool = True, **params) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self.buf:
                left = deadline - time.monotonic()
                assert left > 0 and select.select([self.r], [], [], left)[0], f"no answer to {method}"
                chunk = os.read(self.r, 1 << 16)
                assert chunk, f"Chromium closed the pipe ({method})"
                self.buf += chunk
            raw, self.buf = self.buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                assert "error" not in reply, reply
                return reply["result"]

    def open(self, url: str) -> None:
        """Open ``url`` in a new page, attach to it and wait until it has loaded."""
        target = self.call("Target.createTarget", session=False, url=url)["targetId"]
        self.session = self.call("Target.attachToTarget", session=False, targetId=target, flatten=True)["sessionId"]
        deadline = time.monotonic() + self.timeout
        while self.js("location.href + ' ' + document.readyState") != f"{url} complete":
            assert time.monotonic() < deadline, "the page did not load"
            time.sleep(0.1)

    def js(self, expression: str):
        """The value of ``expression`` evaluated in the page (JSON-serialisable)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    def click(self, selector: str) -> None:
        """A left click, as a mouse makes it, at the centre of the element ``selector`` (scrolled into view)."""
        x, y = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
            " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def __enter__(self) -> "DevTools":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.call("Browser.close", session=False)
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        os.close(self.w)
        os.close(self.r)
        self.profile.cleanup()


SHOWN = "Array.from(document.querySelectorAll('tr.q')).filter(r => r.offsetParent !== null).map(r => r.dataset.qid)"


def right_only(a: Path, b: Path) -> tuple[set[str], set[str]]:
    """(qids A answered right and B wrong, the reverse), from the runs' predictions.json files and
    the dev labels (read without sqa's run or comparison code)."""
    from sqa.strategyqa import load_questions

    gold = {q.qid: q.answer for q in load_questions("dev")}
    pa, pb = (json.loads((p / "predictions.json").read_text(encoding="utf-8")) for p in (a, b))
    both = set(pa) & set(pb) & set(gold)
    ra = {q for q in both if pa[q]["answer"] == gold[q]}
    rb = {q for q in both if pb[q]["answer"] == gold[q]}
    return ra - rb, rb - ra


@browser
def test_clicking_each_direction_filter_shows_the_questions_only_that_run_got_right(tmp_path):
    pytest.importorskip("scipy", reason="scipy (the models extra) runs sqa compare's McNemar test")
    a, b = RUNS / "dev229-facts-h2055", RUNS / "dev229-plain-h2055"
    only_a, only_b = right_only(a, b)
    assert (len(only_a), len(only_b)) == (6, 12)  # as sqa compare prints for these two runs
    page = tmp_path / "cmp.html"
    r = run_sqa(["compare", a, b, "--html", page])
    assert r.returncode == 0, r.stderr
    with DevTools() as chrome:
        chrome.open(page.resolve().as_uri())
        labels = chrome.js("Array.from(document.querySelectorAll('.controls button')).map(b => b.textContent.trim())")
        assert "only dev229-facts-h2055 right" in labels and "only dev229-plain-h2055 right" in labels, labels
        assert len(chrome.js(SHOWN)) == 229
        for key, want in (("only-0-1", only_a), ("only-1-0", only_b), ("all", None)):
            chrome.click(f'.controls button[data-filter="{key}"]')
            shown = chrome.js(SHOWN)
            assert len(shown) == len(set(shown))
            if want is None:
                assert len(shown) == 229
            else:
                assert set(shown) == want, key
            active = chrome.js("document.querySelector('.controls button.active').getAttribute('data-filter')")
            count = chrome.js("document.getElementById('count').textContent")
            assert active == key and count == f"{len(shown)} of 229 questions shown", (active, count)
