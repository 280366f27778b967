"""The prompts the shipped results depend on, pinned byte for byte.

The answer heads in ``sqa/_data/heads`` were trained on the hidden states the facts reader reads
after exactly these prompts (prompt version ``facts-v1``); a changed byte would silently
invalidate them. The steps pipeline's recorded run (``bench/results/runs/dev229``) was made with
the ChatML rendering pinned below (Qwen2.5's template, rendered by sqa for llama.cpp).
"""

from __future__ import annotations

import hashlib

from sqa.reasoner.factreader import PROMPT_VERSION, facts_head, facts_prompts, plain_head, plain_prompt
from sqa.strategyqa import load_questions, questions_by_id


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_facts_reader_prompts_are_byte_identical_to_facts_v1():
    q = load_questions("dev")[0]  # "Will the Albany in Georgia reach a hundred thousand occupants before ..."
    assert q.qid == "29bf9aa61ed4124cd84c" and len(q.facts) == 2
    ps = facts_prompts(q.question, list(q.facts))
    assert PROMPT_VERSION == "facts-v1"
    assert [_sha(p) for p in ps] == ["960513589583d535963bdeded0c0d90e2bc4054f9acb49077cf10e9301b67837",
                                     "1f303152a92351617469ea7391502dcc89d1b5f98d4031fb8a747902001785ca"]
    assert _sha(plain_prompt(q.question)) == "e2d51d4fd364030cb2f529ded585fe9a29c16b13d46a8ac318326fc9ad3991dd"
    assert _sha(facts_head()) == "c1d499ae82e3cd362dec7b6a21e7a0d2e706de7f93080ea2f139078ffedba643"
    assert _sha(plain_head()) == "1b9d642c5d3074a025f5dfb6c0c142eb1de4348810b294a7c7be871b01269113"
    assert ps[-1].endswith("Question: Will the Albany in Georgia reach a hundred thousand occupants before the one "
                           "in New York?\nFacts:\n- Albany, GA has around 75,000 people\n- Albany, NY has almost "
                           "100,000 people\nAnswer:")
