"""The model's own chat template for in-process GGUF files (issue 42, item 2): a file's
``tokenizer.chat_template`` renders ``ChatPrompt`` s token for token as the reference renderings of
the same template do (transformers' ``apply_chat_template``; llama.cpp's built-in Llama-3
renderer), ChatML only without one, ``--chat-template FILE`` overrides it, and run.json records
which. The GGUF files here are tiny llama models written with the ``gguf`` package (27 kB)."""

from __future__ import annotations

import json

import pytest

from helpers import SPECIALS, tiny_gguf as _tiny_gguf
from sqa.types import BadInput, ChatPrompt, SqaError

# Meta's Llama-3 Instruct template (tokenizer_config.json of meta-llama/Meta-Llama-3-8B-Instruct)
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
# Google's Gemma-2 template (google/gemma-2-2b-it): no system role
GEMMA2 = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)
PROMPT = ChatPrompt(
    (
        ("system", "Answer yes/no questions. Finish with 'Answer: Yes' or 'Answer: No'."),
        ("user", "Question: Is the sun a star?"),
        ("assistant", "Steps:\n1. Is the sun a star?\nAnswer: Yes"),
        ("user", "Question: Can a goldfish drive a car?"),
    ),
    "Steps:\n1.",
)


def tiny_gguf(path, template: str | None):
    """``helpers.tiny_gguf`` with Gemma's ``<bos>`` for Gemma-2's template, Llama-3's otherwise."""
    return _tiny_gguf(path, template, bos="<bos>" if template == GEMMA2 else "<|begin_of_text|>")


def hf_reference(template: str, bos: str, eos: str, messages) -> str:
    """transformers' apply_chat_template of ``messages`` with ``template`` (the reference rendering)."""
    pytest.importorskip("transformers", reason="transformers (the hf extra) gives the reference rendering")
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel({"<unk>": 0}, unk_token="<unk>")), bos_token=bos, eos_token=eos
    )
    tok.chat_template = template
    return tok.apply_chat_template(
        [{"role": r, "content": c} for r, c in messages], tokenize=False, add_generation_prompt=True
    )


def _load(path, **kw):
    from sqa.models.llamacpp import LlamaCppModel

    return LlamaCppModel(path, n_ctx=256, n_threads=1, **kw)


def test_a_gguf_with_a_llama3_template_renders_chat_prompts_token_for_token_as_the_references(tmp_path):
    pytest.importorskip("cyllama", reason="llama.cpp's binding (the models extra) reads the GGUF")
    from cyllama.llama import llama_cpp as L

    m = _load(tiny_gguf(tmp_path / "llama3.gguf", LLAMA3))
    assert m.capabilities.chat_template == "gguf" and m.capabilities.to_dict()["chat_template"] == "gguf"
    text = m.template.render(PROMPT)
    ref = hf_reference(LLAMA3, "<|begin_of_text|>", "<|eot_id|>", PROMPT.messages) + PROMPT.reply
    assert text == ref and "<|im_start|>" not in text
    # llama.cpp's own (C++) Llama-3 renderer leaves BOS to the tokenizer; with it, the same tokens
    cpp = m.model.chat_apply_template(LLAMA3, [L.LlamaChatMessage(r, c) for r, c in PROMPT.messages], True)
    tokens = m.tokenize(text)
    assert tokens == m.tokenize("<|begin_of_text|>" + cpp + PROMPT.reply) == m.tokenize(ref)
    assert tokens[:2] == [SPECIALS.index("<|begin_of_text|>"), SPECIALS.index("<|start_header_id|>")]
    assert tokens.count(SPECIALS.index("<|eot_id|>")) == 4  # each closed turn ends with one control token
    # the model reads what was rendered: the growing transcript reuses its KV cache
    assert 0.0 <= m.yes_probability([PROMPT])[0] <= 1.0
    m.yes_probability([PROMPT.extend(" Is")])
    assert m.stats["cached_tokens"] >= len(tokens)


def test_a_gguf_without_a_template_gets_chatml(tmp_path):
    from sqa.models.chat import render_chatml

    m = _load(tiny_gguf(tmp_path / "plain.gguf", None))
    assert m.capabilities.chat_template == "chatml" and m.template.render(PROMPT) == render_chatml(PROMPT)
    assert m.template.render("raw text") == "raw text"


def test_chat_template_file_overrides_and_a_template_without_system_role_gets_it_in_the_first_user_turn(tmp_path):
    f = tmp_path / "gemma.jinja"
    f.write_text(GEMMA2, encoding="utf-8")
    m = _load(tiny_gguf(tmp_path / "llama3.gguf", LLAMA3), chat_template=f)
    assert m.capabilities.chat_template == "file"
    merged = [("user", PROMPT.messages[0][1] + "\n\n" + PROMPT.messages[1][1]), *PROMPT.messages[2:]]
    text = m.template.render(PROMPT)
    assert text == hf_reference(GEMMA2, "<|begin_of_text|>", "<|eot_id|>", merged) + PROMPT.reply
    assert text.startswith("<|begin_of_text|><start_of_turn>user\nAnswer yes/no") and "<|start_header_id|>" not in text
    # a tokenizer_config.json holding the template works too
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"chat_template": LLAMA3}), encoding="utf-8")
    assert _load(tmp_path / "llama3.gguf", chat_template=cfg).template.render(PROMPT) == _load(
        tmp_path / "llama3.gguf"
    ).template.render(PROMPT)


def test_bad_chat_template_files_are_one_line(tmp_path):
    from sqa.models.chat import ChatTemplate, check_template_file

    with pytest.raises(BadInput, match="nope.jinja: --chat-template file not found"):
        check_template_file(tmp_path / "nope.jinja")
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for m in messages %}{{ m.content }", encoding="utf-8")
    with pytest.raises(BadInput, match=r"bad\.jinja: not a Jinja chat template \(TemplateSyntaxError"):
        check_template_file(bad)
    (tmp_path / "t.json").write_text('{"bos_token": "<s>"}', encoding="utf-8")
    with pytest.raises(BadInput, match="without a chat_template string"):
        check_template_file(tmp_path / "t.json")
    ok = tmp_path / "ok.jinja"
    ok.write_text(LLAMA3, encoding="utf-8")
    assert check_template_file(ok).startswith("file:ok.jinja:")
    refuses = ChatTemplate("{{ raise_exception('no tools here') }}", "file", where="x.jinja")
    with pytest.raises(BadInput, match=r"x\.jinja: its chat template failed to render a prompt \(no tools here\)"):
        refuses.render(ChatPrompt((("user", "Q"),)))


def test_the_cli_names_a_broken_template_before_any_model_loads_and_served_models_refuse_one(tmp_path):
    from helpers import one_error_line, run_sqa

    from sqa.models.registry import load_model

    (tmp_path / "bad.jinja").write_text("{% if %}", encoding="utf-8")
    for args in (["ask", "--reader", "steps", "Is it?"], ["eval", "--reader", "steps", "--limit", "1"]):
        line = one_error_line(
            run_sqa(
                args + ["--model", "nowhere.gguf", "--chat-template", "bad.jinja"],
                env={"SQA_HOME": str(tmp_path)},
                timeout=120,
                cwd=tmp_path,
            )
        )
        assert line.startswith("error: bad.jinja: not a Jinja chat template (TemplateSyntaxError"), line
    # a served model takes one for /v1/completions (tests/test_safety_served.py); a broken one before any request
    with pytest.raises(BadInput, match=r"bad\.jinja: not a Jinja chat template"):
        load_model("openai:m", base_url="http://127.0.0.1:9/v1", chat_template=tmp_path / "bad.jinja")


def test_eval_records_the_template_in_run_json(tmp_path):
    """The steps reader over a tiny GGUF, one question, no retrieval: run.json's ``model`` names the
    template that rendered the chat prompts, and the identity names an overriding file."""
    from helpers import run_sqa

    gguf = tiny_gguf(tmp_path / "llama3.gguf", LLAMA3)
    f = tmp_path / "gemma.jinja"
    f.write_text(GEMMA2, encoding="utf-8")
    for name, extra, source in (("own", [], "gguf"), ("file", ["--chat-template", str(f)], "file")):
        out = tmp_path / name
        r = run_sqa(
            [
                "eval",
                "--reader",
                "steps",
                "--no-retrieval",
                "--split",
                "dev",
                "--limit",
                "1",
                "--model",
                str(gguf),
                "--out",
                str(out),
                *extra,
            ],
            env={"SQA_HOME": str(tmp_path / "home")},
            timeout=300,
            cwd=tmp_path,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        run = json.loads((out / "run.json").read_text())
        assert run["model"]["capabilities"]["chat_template"] == source and run["answering"] == "zero-shot"
        assert run["identity"]["chat_template"] == ("" if name == "own" else run["options"]["chat_template"])
    assert json.loads((tmp_path / "file" / "run.json").read_text())["identity"]["chat_template"].startswith(
        "file:gemma.jinja:"
    )


@pytest.mark.slow
def test_the_packaged_qwen_gguf_renders_the_steps_readers_prompts_with_its_own_template_as_chatml():
    """Qwen2.5's own template (the shipped GGUFs' metadata) gives the ChatML the steps reader was
    tuned with for every prompt that opens with a system message, as all of its prompts do."""
    from sqa.models.chat import render_chatml
    from sqa.models.registry import load_model
    from sqa.steps.prompts import DemoSelector, question_prompt

    try:
        m = load_model("qwen2.5-coder-0.5b", n_ctx=512)
    except SqaError as e:
        pytest.skip(f"0.5B model not available: {e}")
    assert m.capabilities.chat_template == "gguf" and "<|im_start|>" in m.template.text
    demos = DemoSelector().select("Could a llama birth twice during the Vietnam War?", 3, None)
    for p in (
        question_prompt(demos, "Could a llama birth twice during the Vietnam War?"),
        question_prompt(demos, "Is the sun a star?", decompose=False).extend("Answer:"),
        PROMPT,
    ):
        assert m.template.render(p) == render_chatml(p)
    # without a system message its template adds Qwen's own (ChatML would not): as transformers renders it
    bare = ChatPrompt(PROMPT.messages[1:], "Steps:")
    text = m.template.render(bare)
    assert text == hf_reference(m.template.text, m.template.bos_token, m.template.eos_token, bare.messages) + "Steps:"
    assert text.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.") and text != render_chatml(
        bare
    )


def test_the_transformers_reader_takes_a_template_file_and_merges_a_refused_system_turn(tmp_path):
    """A Hugging Face checkpoint (the tiny one of tests/tiny_hf.py) with Gemma-2's template, which
    refuses the system role: the steps reader's prompts render with the system text in the first
    user turn, as transformers renders those merged messages; a template failing otherwise is one line."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tiny_hf import build_tiny_checkpoint

    from sqa.models.hf import HFModel

    d = build_tiny_checkpoint(tmp_path / "tiny-qwen2")
    f = tmp_path / "gemma.jinja"
    f.write_text(GEMMA2, encoding="utf-8")
    m = HFModel(str(d), device="cpu", chat_template=f)
    assert m.capabilities.chat_template == "file"
    merged = [("user", PROMPT.messages[0][1] + "\n\n" + PROMPT.messages[1][1]), *PROMPT.messages[2:]]
    bos = m.tokenizer.bos_token or ""
    assert m.render(PROMPT) == hf_reference(GEMMA2, bos, m.tokenizer.eos_token, merged) + PROMPT.reply
    assert 0.0 <= m.yes_probability([PROMPT])[0] <= 1.0
    f.write_text("{{ raise_exception('only tools') }}", encoding="utf-8")
    with pytest.raises(BadInput, match=r"gemma\.jinja: its chat template failed to render a prompt \(only tools\)"):
        HFModel(str(d), device="cpu", chat_template=f).render(PROMPT)
