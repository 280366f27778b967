"""What loading a served model found, recorded so that a run answered wholly from the response cache
sends no request at all (``sqa.models.openai.OpenAIModel``, a mixin).

Loading ``openai:NAME`` asks the servers about a dozen things (``/v1/models``, the endpoint and how
many top logprobs, thinking, prefill, the fingerprint's reads of ``FINGERPRINT_PROMPTS``, each
server's concurrency: ``sqa.models.served_probe``). Those findings are recorded in the response
cache's file (``ResponseCache.put_load``) under :func:`load_key` (the set of base URLs, the model
name and ``--api``), with the time they were found. The next load with the same key takes them as
they were recorded and sends nothing (``server_info``: ``contacted`` false, ``identity`` "as
recorded at <time>"). At the first request the cache cannot answer, the probes run live (once, on
a copy of the model, so no request in flight sees a half-probed state), and the live findings are
compared with the recorded ones:

- the same (the fingerprint equal, or its reads within ``same_reads``' tolerance; endpoint,
  read-out, thinking, prefill and request fields equal): the model goes on, ``contacted`` true,
  ``identity`` "live" (the recorded fingerprint is kept, so cache keys stay the same);
- different: other weights, or another server, now answer under that name. Cached answers of the
  recorded weights may already have been given out (and a head or features store checked against
  them), so the run stops with one line naming both fingerprints (ServerError, exit 2); the live
  findings replace the record, so the next command goes by the new weights (and a run folder,
  features store or head of the old ones refuses them, each in one line).

Concurrency is not measured again on going live: the recorded slots are kept (``$SQA_OPENAI_CONCURRENCY``
overrides them; a record made under it holds none, and such a load runs one request at a time per server). With the cache off (``$SQA_OPENAI_CACHE=0``) every load probes live, as before.
Several processes share the file (SQLite's locking); the newest findings win. A record made by
another ``sqa.models.served_read.READ_VERSION`` (a reader that read the server's answers otherwise,
e.g. took llama-server's ``/v1/completions`` logprobs for none and chose the ``generation``
read-out) is not taken: the load probes live and records its own findings.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time

from sqa.models.served_probe import NEUTRAL_EXTRA, same_reads
from sqa.models.served_read import READ_VERSION
from sqa.types import ServerError

RECORD_FORMAT = "sqa-served-load/1"
# the findings that shape a request's body or how its answer is read: any difference on going live stops the run
SHAPING = ("models_entry", "endpoint", "top_logprobs", "thinking", "thinking_kw", "extra", "prefill", "template")


def load_key(urls, name: str, api: str) -> str:
    """The key of a load record: sha256 of the sorted base URLs (credentials included, never
    stored in clear), the served model name and ``--api``."""
    blob = json.dumps({"urls": sorted(urls), "model": name, "api": api}, sort_keys=True)
    return "load:" + hashlib.sha256(blob.encode()).hexdigest()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class LoadRecord:
    """Methods of ``OpenAIModel``: record, adopt and verify the load-time findings (module doc)."""

    def _findings(self) -> dict:
        return {
            "format": RECORD_FORMAT,
            "read_version": READ_VERSION,
            "models_entry": self.entry,
            "endpoint": self.endpoint,
            "top_logprobs": self.top_logprobs,
            "thinking": self.thinking,
            "thinking_kw": dict(self._thinking_kw),
            "extra": dict(self._extra),
            "prefill": self.prefill,
            "template": dict(self.template),
            "fingerprint": self.fingerprint,
            "fingerprint_reads": self.fingerprint_reads,
            "concurrency": {} if self._fixed else {s.shown: s.concurrency for s in self.servers},
            "base_urls": [s.shown for s in self.servers],
            "answer_timeout_s": self.answer_timeout,
            "recorded_at": _now(),
        }

    def _adopt(self, rec: dict) -> bool:
        """Take a recorded load's findings as this model's (True), or False for a record that
        cannot be read (then the model probes live)."""
        try:
            if rec.get("format") != RECORD_FORMAT or rec.get("read_version") != READ_VERSION:
                return False  # another version of sqa.models.served_read found it: probe again
            if not str(rec["fingerprint"]).startswith("sha256:"):
                return False
            entry, endpoint, n = dict(rec["models_entry"]), str(rec["endpoint"]), int(rec["top_logprobs"])
            if endpoint not in ("chat", "completions") or not isinstance(rec["fingerprint_reads"], list):
                return False
            thinking_kw, extra, prefill = dict(rec["thinking_kw"]), dict(rec["extra"]), str(rec["prefill"])
            conc = {str(k): int(v) for k, v in dict(rec["concurrency"]).items()}
            thinking, fp, when = str(rec["thinking"]), str(rec["fingerprint"]), str(rec["recorded_at"])
            template = dict(rec["template"])
            if template.get("source") not in ("server", "props", "chatml", "none"):
                return False
        except (KeyError, TypeError, ValueError):
            return False
        self.entry, self.endpoint, self.top_logprobs, self.thinking = entry, endpoint, n, thinking
        self._thinking_kw, self._extra, self.prefill, self.template = thinking_kw, extra, prefill, template
        self.fingerprint, self.fingerprint_reads, self.recorded_at = fp, rec["fingerprint_reads"], when
        for s in self.servers:
            s.concurrency = max(1, conc.get(s.shown, 1))
        t = rec.get("answer_timeout_s")
        self.answer_timeout = float(t) if isinstance(t, (int, float)) and 0 < t <= 86400 else None
        return True

    def _probe_findings(self) -> None:
        """Ask the servers what loading finds (``sqa.models.served_probe``: the ``/v1/models`` entry,
        endpoint and top logprobs, thinking, prefill, fingerprint), in that order, setting each on
        this model from neutral request fields; concurrency is measured apart. Raises ServerError."""
        self._extra, self._thinking_kw = dict(NEUTRAL_EXTRA), {}
        self.entry = self._check_served()
        self.endpoint, self.top_logprobs, self.thinking = self._choose_endpoint(self.options.api)
        self.prefill = self._probe_prefill() if self.endpoint == "chat" else "completions-text"
        self.fingerprint = self._fingerprint()
        self.template = self._find_template()  # how ChatPrompts go over /v1/completions (served_template)

    def _record(self) -> None:
        if self.cache is not None and self._load_key is not None:
            rec = self._findings()
            self.recorded_at = rec["recorded_at"]
            self.cache.put_load(self._load_key, rec)

    def _go_live(self) -> None:
        """Probe the servers now (the first request the cache cannot answer, on a model loaded from
        a record) and check them against the record; ServerError when they differ (module doc)."""
        with self._live_lock:
            if self.live:
                return
            if self._refused is not None:  # found other weights already: no probes again
                raise ServerError(str(self._refused))
            probe = copy.copy(self)  # probes set fields as they go: never on the model answering
            probe.live = True
            probe._probe_findings()
            old, new = self._findings(), probe._findings()
            diff = [k for k in SHAPING if old[k] != new[k]]
            same_weights = old["fingerprint"] == new["fingerprint"] or same_reads(
                old["fingerprint_reads"], new["fingerprint_reads"]
            )
            if diff or not same_weights:
                self._record_from(probe)
                what = ", ".join(f"{k} {old[k]!r} -> {new[k]!r}" for k in diff[:2])
                self._refused = ServerError(
                    f"{', '.join(s.shown for s in self.servers)} now serve{'s' if len(self.servers) == 1 else ''} "
                    f"{self.served!r} otherwise than recorded at {self.recorded_at} (fingerprint "
                    f"{new['fingerprint']} vs recorded {old['fingerprint']}{'; ' + what if what else ''}): other "
                    "weights or settings behind that name, whose answers must not mix with the recorded ones' "
                    f"({self.cost.calls_cached} answered from the cache so far); the new findings are recorded: "
                    "run the command again, into another --out for sqa eval"
                )
                raise self._refused
            self.live = True
            self.server_info.update(contacted=True, identity="live", verified_at=_now())

    def _record_from(self, probe) -> None:
        """Record ``probe``'s live findings (the recorded slots stay: concurrency is not measured again)."""
        if self.cache is not None and self._load_key is not None:
            self.cache.put_load(self._load_key, probe._findings())
