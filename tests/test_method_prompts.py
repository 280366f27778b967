"""The StrategyQA methods' prompt texts (sqa.methods.prompts) against their public sources.

The expected questions, answers and phrases below are written out here from the sources
(Wei et al. 2022 Table 25; DRAGIN src/data.py + src/generate.py; Self-Ask's notebook prompt), not
read back from the module.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from sqa.methods import prompts as P

Q = "Is the tibia necessary to win the Stanley Cup?"
DOCS = ["Stanley Cup is awarded annually.", "The tibia is a bone in the leg."]

TABLE_25 = [  # (question, first words of the chain of thought, answer) as printed in the paper
    ("Do hamsters provide food for any animals?", "Hamsters are prey animals.", "yes"),
    ("Could Brooke Shields succeed at University of Pennsylvania?", "Brooke Shields went to Princeton", "yes"),
    ("Yes or no: Hydrogen's atomic number squared exceeds number of Spice Girls?", "Hydrogen has an atomic", "no"),
    ("Yes or no: Is it common to see frost during some college commencements?", "College commencement", "yes"),
    ("Yes or no: Could a llama birth twice during War in Vietnam (1945-46)?", "The War in Vietnam was 6", "no"),
    ("Yes or no: Would a pear sink in water?", "The density of a pear is about 0.6g/cm^3,", "no"),
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_cot_exemplars_are_table_25():
    assert [(e.question, e.answer) for e in P.COT_EXEMPLARS] == [(q, a) for q, _, a in TABLE_25]
    for e, (_, start, _) in zip(P.COT_EXEMPLARS, TABLE_25):
        assert e.rationale.startswith(start)
        assert e.rationale.split(". ")[-1].startswith("Thus, ")  # every chain ends in a "Thus, ..." sentence
        assert "answer" not in e.rationale
    blocks = P.cot_prompt(Q).split("\n\n")
    assert len(blocks) == 7
    for block, (q, _, a) in zip(blocks, TABLE_25):
        assert block.startswith(f"Q: {q}\nA: ")
        assert block.endswith(f". So the answer is {a}.")  # the paper's final phrase
    assert P.ANSWER_IS == "So the answer is"


def test_wei_prompt_ends_with_the_question_and_A():
    p = P.cot_prompt(Q, "wei")
    assert p.startswith("Q: Do hamsters provide food for any animals?\nA: Hamsters are prey animals. Prey are food")
    assert p.endswith(f"So the answer is no.\n\nQ: {Q}\nA:")
    assert p == P.cot_prompt(Q)  # "wei" is the default


def test_dragin_differs_from_wei_exactly_where_the_sources_differ():
    """DRAGIN (and FLARE) copy Table 25's chains and answers character for character but drop the
    "Yes or no: " prefix of the last four questions, and use their own templates."""
    for w, d in zip(P.COT_EXEMPLARS, P.DRAGIN_EXEMPLARS, strict=True):
        assert (w.rationale, w.answer) == (d.rationale, d.answer)
    assert all(w.question.endswith(d.question) for w, d in zip(P.COT_EXEMPLARS, P.DRAGIN_EXEMPLARS))
    assert [w.question[: -len(d.question)] for w, d in zip(P.COT_EXEMPLARS, P.DRAGIN_EXEMPLARS)] == [""] * 2 + [
        "Yes or no: "
    ] * 4
    p = P.cot_prompt(Q, "dragin")
    assert p.startswith(
        "Question: Do hamsters provide food for any animals?\nAnswer: Hamsters are prey animals. Prey are food for "
        "predators. Thus, hamsters provide food for some animals. So the answer is yes.\nQuestion: Could Brooke"
    )
    assert "Yes or no" not in p
    assert p.endswith(
        "Thus, a pear would float. So the answer is no.\n"
        f"Following the examples above, answer the question by reasoning step-by-step.\n\nQuestion: {Q}\nAnswer:"
    )
    f = P.cot_prompt(Q, "flare")
    assert f.count("Generate a yes or no answer to the following question.\nQuestion: ") == 7
    assert f.count("So the final answer is ") == 6 and f.endswith(f"\nQuestion: {Q}\nAnswer:")


def test_rag_prompt_is_dragins_single_retrieval_form():
    p = P.rag_prompt(Q, DOCS)
    assert p.startswith(P.cot_prompt(Q, "dragin").split("Following the examples")[0])
    assert p.endswith(
        "So the answer is no.\nContext:\n[1] Stanley Cup is awarded annually.\n[2] The tibia is a bone in the leg.\n"
        "Answer in the same format as before.\nFollowing the examples above, answer the question by reasoning "
        f"step-by-step.\n\nQuestion: {Q}\nAnswer:"
    )
    assert "Context:\nAnswer in the same format as before.\n" in P.rag_prompt(Q, [])  # SingleRAG keeps the block


def test_continue_prompt_appends_the_text_generated_so_far():
    assert P.continue_prompt(Q, DOCS, "") == P.rag_prompt(Q, DOCS)
    p = P.continue_prompt(Q, DOCS, "  The tibia is a leg bone. ")
    assert p == P.rag_prompt(Q, DOCS) + " The tibia is a leg bone."
    no_docs = P.continue_prompt(Q, [], "The tibia is a leg bone.")
    assert "Context:" not in no_docs and no_docs == P.cot_prompt(Q, "dragin") + " The tibia is a leg bone."


def test_self_ask_prompt_holds_the_original_exemplars():
    p = P.self_ask_prompt(Q)
    for q in (
        "Who lived longer, Muhammad Ali or Alan Turing?",
        "When was the founder of craigslist born?",
        "Who was the maternal grandfather of George Washington?",
        "Are both the directors of Jaws and Casino Royale from the same country? ",
    ):
        assert f"Question: {q}\nAre follow up questions needed here: Yes." in p
    assert p.count("So the final answer is: ") == 4 and p.count("Follow up: ") == 10
    assert "So the final answer is: Muhammad Ali \n\n" in p  # the original's trailing space
    assert p.endswith(f"So the final answer is: No\n\nQuestion: {Q}\nAre follow up questions needed here:")
    assert P.SELF_ASK_STOPS == ("\nIntermediate answer:",)
    assert P.SELF_ASK_FINAL == "\nSo the final answer is:" and P.SELF_ASK_FOLLOW_UP == "Follow up:"


def test_iter_retgen_falls_back_to_dragins_form_and_says_so():
    assert P.iter_retgen_prompt(Q, DOCS) == P.rag_prompt(Q, DOCS)
    assert P.iter_retgen_query(Q) == Q and P.iter_retgen_query(Q, " bones. ") == f"{Q} bones."
    assert P.ITER_RETGEN_SOURCE.note.startswith("FALLBACK")


def test_direct_prompt_stops_where_the_answer_word_goes():
    p = P.direct_prompt(Q)
    assert p.endswith(f"A: So the answer is no.\n\nQ: {Q}\nA: So the answer is")
    assert "Thus," not in p and p.count("Q: ") == 7


def test_every_source_names_a_repository_and_commit():
    assert set(P.SOURCES.values()) >= {P.COT_SOURCE, P.DRAGIN_SOURCE, P.SELF_ASK_SOURCE, P.ITER_RETGEN_SOURCE}
    for s in P.SOURCES.values():
        assert re.fullmatch(r"[0-9a-f]{40}", s.commit), s
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", s.repo) and s.path and s.paper and s.where


@pytest.mark.parametrize(
    "call",
    [
        lambda: P.cot_prompt(Q, "kojima"),
        lambda: P.rag_prompt(Q, DOCS, "wei"),
        lambda: P.continue_prompt(Q, DOCS, "", "x"),
    ],
)
def test_unknown_variant_raises_naming_the_known_ones(call):
    with pytest.raises(ValueError, match=r"unknown .* prompt variant .*; known: (wei, dragin, flare|dragin)$"):
        call()


def test_prompt_texts_are_pinned():
    """sha256 of each prompt for Q, computed (outside this repository) by running each source's own
    assembly code on its own data: DoLa strqa_eval.py build_prompt @805230e5 with the pear density
    written "0.6g/cm^3"; DRAGIN src/data.py + src/generate.py @4d71efcf (the non-retrieval prompt,
    SingleRAG, AttnWeightRAG after retrieval with text "Brooke went to school."); FLARE src/datasets.py
    @ec4b06b5 (blank-line join of CtxPrompt.format); Self-Ask prompt[0] + Q + prompt[1] from
    KeksMember/Local-Self-Ask LocalSelfAsk.py @1b423dde (CRLF -> LF)."""
    assert _sha(P.cot_prompt(Q, "wei")) == "35c93463b6ab923ab572a090809ca52f2317895e768ae25eb217dda38c561f70"
    assert _sha(P.cot_prompt(Q, "dragin")) == "4624da0a7c35358300d8c5c18656f88f720d2b3e82e66ba10378d2647ec994cb"
    assert _sha(P.rag_prompt(Q, DOCS)) == "6bb0152de8af495c8869eb63b05ca6db8c1f1c67679bcf0db12d97968b8c23ea"
    assert (
        _sha(P.continue_prompt(Q, DOCS, "Brooke went to school."))
        == "dfb31893dcbdf8bbbfe4afee44656d418e31c9bd9a906b3b0f34f2baf0cc3b5e"
    )
    assert _sha(P.cot_prompt(Q, "flare")) == "5f7fe25da8ce109b7dcaa9212ee05eb0189909268aee9a3879384bfb7361b0d7"
    assert _sha(P.self_ask_prompt(Q)) == "b83b8c4d961e3a714f7ff02a4f9194b4505dafd2f8595116d74db110338222fa"
