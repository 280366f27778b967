"""The prompts the shipped results depend on, pinned byte for byte.

The answer heads in ``sqa/_data/heads`` were trained on the hidden states the facts reader reads
after exactly these prompts (prompt version ``facts-v1``); a changed byte would silently
invalidate them. The steps pipeline's recorded run (``bench/results/runs/dev229``) was made with
the ChatML rendering pinned below (Qwen2.5's template, rendered by sqa for llama.cpp).
"""

from __future__ import annotations

import hashlib

from sqa.facts.prompt import PROMPT_VERSION, facts_prefix, facts_prompts, plain_prefix, plain_prompt
from sqa.strategyqa import load_questions


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_facts_reader_prompts_are_byte_identical_to_facts_v1():
    q = load_questions("dev")[0]  # "Will the Albany in Georgia reach a hundred thousand occupants before ..."
    assert q.qid == "29bf9aa61ed4124cd84c" and len(q.facts) == 2
    ps = facts_prompts(q.question, list(q.facts))
    assert PROMPT_VERSION == "facts-v1"
    assert [_sha(p) for p in ps] == [
        "960513589583d535963bdeded0c0d90e2bc4054f9acb49077cf10e9301b67837",
        "1f303152a92351617469ea7391502dcc89d1b5f98d4031fb8a747902001785ca",
    ]
    assert _sha(plain_prompt(q.question)) == "e2d51d4fd364030cb2f529ded585fe9a29c16b13d46a8ac318326fc9ad3991dd"
    assert _sha(facts_prefix()) == "c1d499ae82e3cd362dec7b6a21e7a0d2e706de7f93080ea2f139078ffedba643"
    assert _sha(plain_prefix()) == "1b9d642c5d3074a025f5dfb6c0c142eb1de4348810b294a7c7be871b01269113"
    assert ps[-1].endswith(
        "Question: Will the Albany in Georgia reach a hundred thousand occupants before the one "
        "in New York?\nFacts:\n- Albany, GA has around 75,000 people\n- Albany, NY has almost "
        "100,000 people\nAnswer:"
    )


def test_steps_prompt_renders_the_chatml_the_recorded_steps_run_was_made_with():
    """The steps reader's prompt is chat messages now; rendered for llama.cpp it must be the same
    ChatML bytes as the string the recorded steps runs were made with."""
    from sqa.steps import prompts as P
    from sqa.models.chat import render_chatml

    q = load_questions("dev")[0]
    demos = P.default_selector().select(q.question, 3, exclude_qid=q.qid)
    assert [d.qid for d in demos] == ["62ac009461272e979537", "1111510e448112ed3c85", "5694613473f2c2c557f7"]
    with_steps = render_chatml(P.question_prompt(demos, q.question, decompose=True))
    plain = render_chatml(P.question_prompt(demos, q.question, decompose=False))
    assert _sha(with_steps) == "6d7f9f37e6e06834861cdbbcecac90fafc13894982adf53759c46a68fcea6dbb"
    assert _sha(plain) == "3b2f165039a21eb7c7f0f9c76c9ec9bfbd6d2c8db5fda73f4ea07d340197b6aa"
    assert with_steps.startswith("<|im_start|>system\nYou answer yes/no questions")
    assert with_steps.endswith(f"<|im_start|>user\nQuestion: {q.question}<|im_end|>\n<|im_start|>assistant\n")
