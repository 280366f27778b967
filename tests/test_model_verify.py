"""Issue 34: model files verified by content, no NaN in any output, answer heads validated before
a model loads, a damaged KV-cache entry dropped and rebuilt.

The registry checks use a model split into small real part modules (as the PyPI wheels are), so
the damage is done to a file of this test's own, never to the shared models."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import types
import warnings

import numpy as np
import pytest

import sqa.models.registry as registry
from sqa.facts.head import AnswerHead, FeatureSpec, shipped_head_path
from sqa.models.registry import GgufSpec, assemble_gguf
from sqa.models.base import ModelBase
from sqa.types import ModelCapabilities, Question, SqaError, SqaWarning


def _spec(tmp_path, name: str = "t", prefix: str = "sqa_verify_part", n_mb: int = 6) -> tuple[GgufSpec, bytes]:
    """A model of ``n_mb`` MiB of random bytes in 3 part modules (``prefix``1..3)."""
    rng = np.random.default_rng(0)
    whole = b"GGUF" + rng.bytes(n_mb * (1 << 20) - 4)
    third = len(whole) // 3
    blobs = [whole[:third], whole[third : 2 * third], whole[2 * third :]]
    for i, b in enumerate(blobs, start=1):
        f = tmp_path / f"{prefix}{i}.bin"
        f.write_bytes(b)
        mod = types.ModuleType(f"{prefix}{i}")
        mod.get_part_path = lambda f=f: str(f)
        sys.modules[mod.__name__] = mod
    return GgufSpec(name, f"{name}.gguf", prefix, 3, len(whole), hashlib.sha256(whole).hexdigest(), "x-part"), whole


def _damage_middle(path, keep_mtime: bool) -> None:
    st = path.stat()
    with open(path, "r+b") as f:  # 2 MiB of zeros in the middle: same size
        f.seek(st.st_size // 2 - (1 << 20))
        f.write(bytes(2 << 20))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_a_damaged_model_file_of_the_right_size_is_reassembled(tmp_path, keep_mtime):
    # issue 34 item 6: a file of the right size was trusted without reading it
    spec, whole = _spec(tmp_path)
    out = assemble_gguf(spec, tmp_path / "models")
    assert out.read_bytes() == whole and (out.parent / ".t.gguf.verified.json").is_file()
    _damage_middle(out, keep_mtime)  # keep_mtime: bit rot, caught by the sampled hash
    with pytest.warns(SqaWarning, match=r"t\.gguf: the model file is damaged .*re-assembling it from the wheels"):
        again = assemble_gguf(spec, tmp_path / "models")
    assert again == out and hashlib.sha256(out.read_bytes()).hexdigest() == spec.sha256


def test_a_damaged_model_without_its_wheels_is_named_with_how_to_fix_it(tmp_path):
    spec, _ = _spec(tmp_path)
    out = assemble_gguf(spec, tmp_path / "models")
    _damage_middle(out, keep_mtime=False)
    gone = GgufSpec(spec.name, spec.filename, "sqa_verify_absent_part", 3, spec.size, spec.sha256, "x-part")
    with pytest.raises(
        SqaError,
        match=rf"{out}: the model file 't' is damaged.*pip install x-part1 x-part3.*then "
        rf"delete {out}",
    ) as e:
        assemble_gguf(gone, tmp_path / "models")
    assert "\n" not in str(e.value)


def test_an_unchanged_model_is_checked_by_its_sample_not_its_full_hash(tmp_path, monkeypatch):
    spec, _ = _spec(tmp_path)
    out = assemble_gguf(spec, tmp_path / "models")
    calls = []
    full = registry.file_sha256
    monkeypatch.setattr(registry, "file_sha256", lambda p, *a: calls.append(p) or full(p, *a))
    assert assemble_gguf(spec, tmp_path / "models") == out and calls == []  # sample only
    os.utime(out)  # touched: the full hash once, then the record is current again
    assert assemble_gguf(spec, tmp_path / "models") == out and calls == [out]
    assert assemble_gguf(spec, tmp_path / "models") == out and calls == [out]


# --- answer heads ----------------------------------------------------------------------------------


def _head_obj(**change) -> dict:
    obj = json.loads(shipped_head_path("qwen2.5-coder-1.5b", "plain").read_text(encoding="utf-8"))
    obj.update(change)
    return obj


@pytest.mark.parametrize(
    "obj, field",
    [
        ([1, 2, 3], "JSON list, not an object"),
        (_head_obj(coef=[float("nan")] * 1537), "'coef' entry 0 is nan"),
        (_head_obj(intercept=float("inf")), "'intercept' is inf"),
        (
            _head_obj(coef=[0.1] * 1536, spec={"states": ["plain", "f1"], "log_odds": ["plain"]}),
            "'coef' has 1,536 numbers",
        ),
        (_head_obj(coef=[1e39] * 1537), "'coef' entry 0 is 1e\\+39"),
        (_head_obj(provenance=["a"]), "'provenance' must be an object"),
        (_head_obj(provenance={"facts": "3 wiki"}), "'provenance.facts' must be an object"),
        (_head_obj(provenance={"facts": {"wiki": "3"}}), "'provenance.facts.wiki' is '3'"),
        (_head_obj(spec={"states": "plain", "log_odds": ["plain"]}), "'spec.states' must be a list"),
        (_head_obj(model=5), "'model' must be"),
    ],
)
def test_a_head_file_with_a_wrong_shape_or_type_is_one_line_naming_the_field(tmp_path, obj, field):
    # issue 34 item 10 (and 6: a head with NaN coefficients gave "confidence": NaN)
    p = tmp_path / "head.json"
    p.write_text(json.dumps(obj), encoding="utf-8")  # json.dumps writes NaN / Infinity as Python reads them
    with pytest.raises(SqaError, match=rf"{p}: not a readable answer head: .*{field}") as e:
        AnswerHead.load(p)
    assert "\n" not in str(e.value)


def test_a_head_for_another_model_size_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    # issue 34 (low): the wrong coefficient count surfaced after the model read the question, as a
    # raw numpy message
    from sqa.facts.reader import head_for

    monkeypatch.setattr(registry, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    with pytest.raises(
        SqaError,
        match=r"has 1,537 coefficients, but model qwen2.5-coder-0.5b \(hidden size 896\).*"
        r"needs 897",
    ):
        head_for("qwen2.5-coder-0.5b", "plain", shipped_head_path("qwen2.5-coder-1.5b", "plain"))
    p = tmp_path / "short.json"
    p.write_text(json.dumps(_head_obj(coef=[0.1] * 1536)), encoding="utf-8")  # one state float short
    with pytest.raises(
        SqaError,
        match=rf"answer head {p}: has 1,536 coefficients, but model qwen2.5-coder-1.5b "
        r"\(hidden size 1,536\) with features plain lo:plain needs 1,537",
    ):
        head_for("qwen2.5-coder-1.5b", "plain", p)


# --- no NaN in any output --------------------------------------------------------------------------


class _NaNModel(ModelBase):
    """A LanguageModel whose read-outs are NaN (what a damaged GGUF gave)."""

    name = "damaged-model"
    hidden_size = 4
    capabilities = ModelCapabilities(hidden_states=True, hidden_size=4)

    def hidden_states(self, prompts):
        return [(np.full(4, np.nan, dtype=np.float32), float("nan")) for _ in prompts]

    def yes_probability(self, prompts):
        return [float("nan") for _ in prompts]

    def generate(self, prompts, max_tokens, stop=()):
        return [" 1. Is the sun a star?\nAnswer: Yes" for _ in prompts]


def test_nan_read_outs_stop_the_facts_reader_naming_the_model():
    from sqa.facts.reader import FactsReader

    head = AnswerHead(FeatureSpec(("plain",), ("plain",)), np.zeros(5, dtype=np.float32), 0.0, "damaged-model", None)
    reader = FactsReader(_NaNModel(), head)
    with pytest.raises(SqaError, match=r"model damaged-model: its read-outs for question 'q1' are not numbers"):
        reader.answer_batch([Question(qid="q1", question="Is the sun a star?")])


def test_ask_json_with_a_nan_answer_is_one_line_never_invalid_json(gold_index, monkeypatch, capsys):
    # issue 34 item 6: `sqa ask --json` printed "confidence": NaN and exited 0
    from sqa.cli import main

    monkeypatch.setattr(registry, "load_model", lambda name: _NaNModel())
    rc = main(["ask", "Is the sun a star?", "--json", "--preset", "steps", "--index-dir", str(gold_index.index_dir)])
    out, err = capsys.readouterr()
    assert rc == 2 and "NaN" not in out
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: model damaged-model: P(yes) for question") and "not a number" in line


def test_trace_lines_refuse_nan(tmp_path):
    from sqa.eval.rundir import TraceLog

    with TraceLog(tmp_path / "traces.jsonl") as log:
        with pytest.raises(ValueError):
            log.append([{"qid": "q", "p_yes": math.nan}])
    assert (tmp_path / "traces.jsonl").read_bytes() == b""


# --- KV cache ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_truncated_or_flipped_kv_cache_entry_is_dropped_noted_and_rebuilt(tmp_path):
    # issue 34 item 8: zipfile.BadZipFile traceback on every later run until deleted
    from sqa.facts.prompt import plain_prefix
    from sqa.models.registry import load_model

    m = load_model("qwen2.5-coder-0.5b", n_ctx=2048)
    assert m.warm_prefixes([plain_prefix()], tmp_path) == ["read"]
    (f,) = tmp_path.glob("prefix-*.kv")
    good = f.read_bytes()
    for damage in (good[: len(good) // 2], good[:100] + bytes([good[100] ^ 0xFF]) + good[101:], good[:-40] + bytes(40)):
        f.write_bytes(damage)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert m.warm_prefixes([plain_prefix()], tmp_path) == ["read"]
        assert [str(w.message) for w in seen if issubclass(w.category, SqaWarning)] == [
            f"{f}: unreadable KV-cache entry (BadZipFile) dropped; it is rebuilt"
        ]
        assert f.read_bytes() == good  # rebuilt
        assert m.warm_prefixes([plain_prefix()], tmp_path) == ["loaded"]


def test_an_unreadable_embedding_cache_entry_is_dropped_noted_and_rebuilt(tmp_path):
    # issue 34: caches are disposable (the decomposer's demonstration embeddings)
    from sqa.steps.prompts import MiniLMDemoSelector

    calls = []

    def encode(texts):
        calls.append(len(texts))
        rng = np.random.default_rng(len(texts))
        v = rng.standard_normal((len(texts), 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    first = MiniLMDemoSelector(encode=encode, cache_dir=tmp_path)
    (f,) = tmp_path.glob("demo-embeddings-minilm-*.npy")
    good = f.read_bytes()
    n = len(first.demos)
    for damage in (good[: len(good) // 2], b"garbage", None, "shape", "nan"):
        if damage is None:
            np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        elif damage == "shape":
            np.save(f, np.zeros((n, 3), dtype=np.float64))
        elif damage == "nan":
            np.save(f, np.full((n, 8), np.nan, dtype=np.float32))
        else:
            f.write_bytes(damage)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            sel = MiniLMDemoSelector(encode=encode, cache_dir=tmp_path)
        assert [str(w.message).split(" (")[0] for w in seen if issubclass(w.category, SqaWarning)] == [
            f"{f}: unreadable embedding-cache entry"
        ]
        assert np.array_equal(sel._emb, first._emb) and f.read_bytes() == good  # rebuilt
    assert len(calls) == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MiniLMDemoSelector(encode=encode, cache_dir=tmp_path)  # read from the cache, silently
    assert len(calls) == 6  # nothing encoded


@pytest.mark.slow
def test_a_damaged_gguf_of_ones_own_stops_naming_the_file_instead_of_answering_half(tmp_path):
    # issue 34 item 6: a damaged model of the right size answered with NaN / 0.5, exit 0
    from sqa.models.registry import MODELS, load_model, resolve_gguf

    src = resolve_gguf("qwen2.5-coder-0.5b")
    mine = tmp_path / "mine.gguf"
    data = bytearray(src.read_bytes())
    assert len(data) == MODELS["qwen2.5-coder-0.5b"].size
    data[100_000_000:300_000_000] = b"\xff" * 200_000_000
    mine.write_bytes(bytes(data))
    del data
    m = load_model(str(mine), n_ctx=512)
    with pytest.raises(
        SqaError,
        match=rf"model mine.gguf \({mine}\): its read-outs are not numbers \(NaN/inf\); its "
        r"file may be damaged \(sha256 [0-9a-f]{12}…",
    ):
        m.yes_probability(["Is the sun a star? Answer:"])


def test_a_trace_line_holding_nan_is_refused_naming_file_and_line(tmp_path):
    # probing the same class (NaN in output): a traces.jsonl written before this fix, by a damaged
    # model, made metrics.json invalid JSON on every later run
    from sqa.eval.rundir import read_traces

    (tmp_path / "traces.jsonl").write_text(
        '{"qid": "a", "p_yes": NaN, "answer": true}\n{"qid": "b", "p_yes": 0.2}\n', encoding="utf-8"
    )
    with pytest.raises(
        SqaError,
        match=r"traces.jsonl:1: not a valid trace line \(NaN where a number belongs.*delete "
        "that line",
    ):
        read_traces(tmp_path)


def test_p_yes_of_a_large_score_is_0_or_1_not_an_overflow():
    # probing heads with extreme but finite coefficients: math.exp raised OverflowError past |z| ~ 709
    head = AnswerHead(FeatureSpec(("plain",), ("plain",)), np.array([1e30, 0.0, 0.0], dtype=np.float32), 0.0, "m", None)
    assert head.p_yes(np.array([-1.0, 0.0, 0.0])) == 0.0 and head.p_yes(np.array([1.0, 0.0, 0.0])) == 1.0
    assert head.p_yes(np.array([0.0, 0.0, 0.0])) == 0.5


def test_damage_between_the_sampled_blocks_with_the_mtime_set_back_is_caught(tmp_path):
    """Issue 41 item 7: 0cf7775 trusted a file whose bytes changed between the sampled blocks when
    its size and mtime were kept (P(yes) 0.631 instead of 0.646 with the 1.5B model); the ctime
    (which no user can set back) now sends it to the full hash."""
    spec, whole = _spec(tmp_path, name="gap", prefix="sqa_gap_part", n_mb=16)
    out = assemble_gguf(spec, tmp_path / "models")
    st = out.stat()
    gap = (st.st_size - registry.VERIFY_BLOCK) // (registry.VERIFY_SAMPLES - 1) // 2  # between blocks 0 and 1
    assert registry.VERIFY_BLOCK < gap < (st.st_size - registry.VERIFY_BLOCK) // (registry.VERIFY_SAMPLES - 1)
    with open(out, "r+b") as f:
        f.seek(gap)
        f.write(bytes(4096))
    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert out.stat().st_size == st.st_size and out.stat().st_mtime_ns == st.st_mtime_ns
    assert registry.sampled_sha256(out) == json.loads((out.parent / ".gap.gguf.verified.json").read_text())["sample"]
    assert registry.verify_gguf(spec, out) is False  # the sample alone would have passed it
    with pytest.warns(SqaWarning, match="re-assembling it from the wheels"):
        assert assemble_gguf(spec, tmp_path / "models").read_bytes() == whole


def test_nan_read_outs_check_the_file_in_full_and_really_re_assemble_it(tmp_path, monkeypatch):
    """Issue 41 item 7: NaN read-outs said "re-checked and re-assembled on the next run", but the
    next run's sampled check passed the same damaged file, so every run stopped there. Now the full
    hash runs at once and a damaged registry file is re-assembled before the message is shown."""
    spec, whole = _spec(tmp_path, name="nan", prefix="sqa_nan_part")
    monkeypatch.setitem(registry.MODELS, "nan-model", spec)
    out = assemble_gguf(spec, tmp_path / "models")
    msg = registry.recheck_after_nonfinite(out, "nan-model")
    assert "intact (sha256 checked in full)" in msg and out.read_bytes() == whole
    _damage_middle(out, keep_mtime=True)
    msg = registry.recheck_after_nonfinite(out, "nan-model")
    assert "has been re-assembled from its wheels; run the same command again" in msg and str(out) in msg
    assert out.read_bytes() == whole and registry.verify_gguf(spec, out)
    own = tmp_path / "mine.gguf"
    own.write_bytes(b"GGUF" + bytes(100))
    msg = registry.recheck_after_nonfinite(own, "mine.gguf")
    assert f"sha256 {hashlib.sha256(own.read_bytes()).hexdigest()[:12]}" in msg and "download it again" in msg
