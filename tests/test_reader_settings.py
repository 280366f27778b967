"""``sqa.ReaderSettings``: one typed object for everything a reader is built from, validated once,
given to ``sqa.Reader`` or made from the CLI's options, and recorded in ``run.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_methods import MethodModel

import sqa
from sqa.methods import MethodSettings
from sqa.types import BadInput


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k": 0}, "k must be a whole number from 1 to 10,000, not 0"),
        ({"k": True}, "k must be a whole number"),
        ({"preset": "steps", "head": "h.json"}, "head goes with the facts reader"),
        ({"preset": "facts", "method": "cot"}, "give a preset or a method, not both"),
        ({"preset": "nope"}, "unknown preset 'nope'"),
        ({"served": "http://127.0.0.1:8000/v1"}, "--base-url goes with a served model"),
        ({"backend": "solr"}, "--backend 'solr': use one of embedded, elasticsearch"),
        ({"preset": "steps", "apply_chat_template": True}, "--apply-chat-template goes with the facts reader"),
        ({"prefill": False}, "--no-prefill goes with the steps reader"),
        ({"method": MethodSettings("sc", samples=3), "prefill": "no"}, "prefill must be True or False"),
        ({"model": 5}, "model: a model name"),
        ({"method": 5}, "method: a name, module:Class or sqa.methods.MethodSettings"),
    ],
)
def test_settings_that_do_not_go_together_are_one_line_naming_them(kwargs, message):
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        sqa.ReaderSettings(**kwargs)
    assert "\n" not in str(e.value)


def test_keyword_arguments_and_settings_build_the_same_reader():
    by_kwargs = sqa.Reader("steps", "openai:m", "some/index", base_url="http://127.0.0.1:9/v1", k=4, prefill=False)
    s = sqa.ReaderSettings(preset="steps", model="openai:m", index="some/index", served="http://127.0.0.1:9/v1", k=4, prefill=False)  # fmt: skip
    by_settings = sqa.Reader(settings=s)
    assert by_kwargs.settings == by_settings.settings == s
    assert (by_settings.k, by_settings.model, by_settings.index_dir) == (4, "openai:m", Path("some/index"))
    assert by_settings.base_url.base_urls == ("http://127.0.0.1:9/v1",) and by_settings.prefill is False
    with pytest.raises(BadInput, match=r"give settings= \(a sqa.ReaderSettings\) or k=, not both"):
        sqa.Reader(settings=s, k=5)
    with pytest.raises(BadInput, match="settings are for method 'sc', not 'cot'"):
        sqa.Reader(method="cot", settings=MethodSettings("sc", samples=3))
    with pytest.raises(BadInput, match="settings must be a sqa.ReaderSettings or sqa.methods.MethodSettings"):
        sqa.Reader(settings={"k": 5})


def test_an_index_object_gives_its_folder_and_engine(gold_index):
    with sqa.Index(gold_index.index_dir) as index:
        s = sqa.ReaderSettings(index=index, k=4)
    assert s == sqa.ReaderSettings(index=gold_index.index_dir, backend="embedded", k=4)
    assert sqa.Reader(settings=s).index_dir == Path(gold_index.index_dir)


def test_a_readers_settings_are_resolved_the_method_defaults_and_top_k_it_uses():
    sc = sqa.Reader(settings=sqa.ReaderSettings(method="sc"))
    assert sc.settings.method == MethodSettings(
        "sc", prompt="wei", answer_rule="answer-is", samples=5, temperature=0.7, max_tokens=256, seed=0
    )
    assert sc.settings.k == 10 and sc.method_settings["samples"] == 5
    rag = sqa.Reader(method="rag", k=3)
    assert rag.settings.method.k == 3 and rag.k == 3
    facts = sqa.Reader(settings=sqa.ReaderSettings(method=MethodSettings("facts", k=7)))
    assert facts.settings.preset.name == "facts" and facts.settings.method is None and facts.k == 7
    assert sqa.Reader().settings == sqa.ReaderSettings(preset="facts", k=10)


def test_the_record_reads_back_and_names_no_credential_and_no_home_folder():
    s = sqa.ReaderSettings(
        method=MethodSettings("iter-retgen", iterations=3),
        model="openai:m",
        served=["http://user:s3cret@127.0.0.1:9/v1", "http://127.0.0.1:10/v1"],
        index=Path.home() / "idx",
    )
    d = s.to_dict()
    text = json.dumps(d)
    assert "s3cret" not in text and str(Path.home()) not in text
    assert d["index"] == str(Path("~") / "idx") and d["method"] == {"method": "iter-retgen", "iterations": 3}
    back = sqa.ReaderSettings.from_dict(d)
    assert back.method == s.method and back.index == s.index and back.model == "openai:m"
    with pytest.raises(BadInput, match="unknown reader setting 'temperature'"):
        sqa.ReaderSettings.from_dict({**d, "temperature": 0.5})


def test_a_run_records_the_settings_its_reader_resolved_and_a_protocol_pinned(tmp_path):
    reader = sqa.Reader(model=MethodModel(), method="cot")
    run = sqa.evaluate(reader, protocol="dragin-1000", limit=2, out=tmp_path / "cot", progress=False)
    recorded = json.loads((tmp_path / "cot" / "run.json").read_text())["settings"]
    assert recorded["method"] == {
        "method": "cot",
        "prompt": "dragin",
        "answer_rule": "answer-is-else-no",
        "max_tokens": 256,
    }
    assert recorded["model"] == "method-fake" and recorded["preset"] is None
    assert run.settings == reader.settings and run.settings.method.prompt == "dragin"


def sqa_over_a_password_url(tmp_path, args: list) -> tuple:
    """``sqa ARGS --method direct --model openai:fake-reader --api completions`` against a stand-in
    server reached as ``http://user:s3cret@...``; returns (the finished process, the URL without
    its credentials). Asserts exit 0."""
    from helpers import StandIn, run_sqa

    pytest.importorskip("openai", reason="the server extra (pip install -e '.[server]') is not installed")
    server = StandIn()
    try:
        url = server.url.replace("http://", "http://user:s3cret@")
        served = ["--method", "direct", "--model", "openai:fake-reader", "--base-url", url, "--api", "completions"]
        r = run_sqa([args[0], *served, *args[1:]], cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        server.close()
    return r, server.url


def test_sqa_eval_records_the_settings_its_options_make(tmp_path):
    _, url = sqa_over_a_password_url(tmp_path, ["eval", "--split", "dev", "--limit", "2", "--out", tmp_path / "run"])
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())
    assert "s3cret" not in json.dumps(recorded)
    settings = sqa.Run.open(tmp_path / "run").settings
    assert settings.method == MethodSettings("direct")  # direct reads no setting
    assert settings.model == "openai:fake-reader" and settings.served.api == "completions"
    assert settings.served.base_urls == (url,)  # the URL without its user:password@
    assert recorded["settings"]["method"] == {"method": "direct"} and recorded["settings"]["k"] == 10


def test_sqa_ask_json_says_which_settings_answered(tmp_path):
    r, url = sqa_over_a_password_url(tmp_path, ["ask", "--json", "Is the sun a star?"])
    assert "s3cret" not in r.stdout + r.stderr
    settings = json.loads(r.stdout)["settings"]
    assert (
        sqa.ReaderSettings.from_dict(settings)
        == sqa.Reader(method="direct", model="openai:fake-reader", base_url=url, api="completions").settings
    )
