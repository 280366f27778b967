"""The prompt texts of the StrategyQA methods, copied from their public sources.

Every text here is data copied from a paper or a public repository at a fixed commit (each
``*_SOURCE`` names it); the functions only put the copied pieces together the way the source's
own code does. Plain completion text: a method sends the returned string as raw text.

Sources (read from snapshots of the repositories at the commits below):

- Chain of thought, Wei et al. 2022 (arXiv:2201.11903), appendix Table 25: six StrategyQA
  exemplars in "Q: ... / A: ... So the answer is yes." form. The paper has no code; the
  exemplars and the "Q:/A:" assembly are taken as voidism/DoLa ``strqa_eval.py`` copies them
  (``create_demo_text``/``build_prompt``), cross-checked against the DRAGIN and FLARE copies.
  The one difference between the copies: DoLa writes the pear density "0.6 g/cm^3", DRAGIN and
  FLARE "0.6g/cm^3"; the paper typesets "0.6g/cm³" (no space), so "0.6g/cm^3" is kept.
- DRAGIN, Su et al. 2024 (oneal2000/DRAGIN): ``src/data.py`` class ``StrategyQA`` (exemplars,
  ``demo_input_template``, ``test_input_template``, ``output_template``) and ``src/generate.py``
  (how ``SingleRAG``, ``FixLengthRAG``, ``TokenRAG`` (FLARE), ``AttnWeightRAG`` (DRAGIN) join the
  demonstrations, the "Context:" block and the text generated so far). DRAGIN's exemplars are
  Table 25's, but the "Yes or no: " prefix of the last four questions is dropped.
- FLARE, Jiang et al. 2023 (jzbjyb/FLARE): ``src/datasets.py`` class ``StrategyQA`` has the same
  six exemplars as DRAGIN with its own templates ("Generate a yes or no answer to the following
  question." and "So the final answer is"); the repository ships no StrategyQA retrieval config.
- Self-Ask, Press et al. 2022: the original few-shot prompt of ofirpress/self-ask's
  ``self-ask_plus_search-engine_demo.ipynb``. That repository is not in the snapshot store; the
  text is copied from KeksMember/Local-Self-Ask ``LocalSelfAsk.py`` (a credited re-use of the
  prompt, CRLF line ends normalised to LF); it agrees with the prompt printed on the author's blog
  post (ofir.io "Self-ask Prompting") and with another public copy of the notebook code.
- Iter-RetGen, Shao et al. 2023 (arXiv:2305.15294): no public source with its StrategyQA
  exemplars was found (no official code; FlashRAG's ``IterativePipeline`` uses a generic
  template). The fallback is DRAGIN's exemplars in DRAGIN's single-retrieval form; the retrieval
  query of iteration t > 1 is "{question} {previous generation}" as in FlashRAG.
- IRCoT, Trivedi et al. 2023 (StonyBrookNLP/ircot) has no StrategyQA prompts (its prompts cover
  HotpotQA, 2WikiMultihopQA, MuSiQue, IIRC); DRAGIN re-implements FLARE/IRCoT-style iterative
  retrieval with the shared exemplars, which is what :func:`continue_prompt` gives.
"""

from __future__ import annotations

import re

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Exemplar:
    """One few-shot exemplar: ``question``, chain-of-thought ``rationale`` (without the final
    answer sentence) and ``answer`` ("yes" or "no")."""

    question: str
    rationale: str
    answer: str


@dataclass(frozen=True)
class Source:
    """Where a prompt text was copied from: the ``paper``, the place in it (``where``), the public
    ``repo`` ("owner/name"), the file ``path`` in it, the 40-hex ``commit`` read, and a ``note``
    on differences or fallbacks."""

    paper: str
    where: str
    repo: str
    path: str
    commit: str
    note: str = ""


# --- final-answer phrases, exactly as each source writes them -------------------------------
ANSWER_IS = "So the answer is"  # Wei et al. Table 25; DRAGIN output_template ("{cot} So the answer is {ans}.")
FLARE_ANSWER_IS = "So the final answer is"  # FLARE cot_output_template ("{cot} So the final answer is {ans}.")
SELF_ASK_ANSWER_IS = "So the final answer is:"  # Self-Ask exemplars and its ``finalans``
IRCOT_ANSWER_IS = "So the answer is:"  # IRCoT's prompts ("... So the answer is: Walls and Bridges.")
# DRAGIN's reader (src/data.py StrategyQA.get_real_prediction): the text after the first
# "the answer is" + 1 character; "yes" when it starts with "yes" (any case), else "no"; "" when absent.
DRAGIN_ANSWER_MARK = "the answer is"
# DRAGIN's eval (src/eval.py regenerate_answer): cut the output at the first of these words, and when
# "the answer is" is missing append " So the answer is " and let the model write 20 more tokens.
DRAGIN_CUT_WORDS = ("Question:", "#10000000", "Note:")
DRAGIN_FORCE_ANSWER = " So the answer is "

# --- Wei et al. 2022, Table 25 ---------------------------------------------------------------
COT_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        "Do hamsters provide food for any animals?",
        "Hamsters are prey animals. Prey are food for predators. Thus, hamsters provide food for some animals.",
        "yes",
    ),
    Exemplar(
        "Could Brooke Shields succeed at University of Pennsylvania?",
        "Brooke Shields went to Princeton University. Princeton University is about as academically rigorous as "
        "the University of Pennsylvania. Thus, Brooke Shields could also succeed at the University of Pennsylvania.",
        "yes",
    ),
    Exemplar(
        "Yes or no: Hydrogen's atomic number squared exceeds number of Spice Girls?",
        "Hydrogen has an atomic number of 1. 1 squared is 1. There are 5 Spice Girls. Thus, Hydrogen's atomic "
        "number squared is less than 5.",
        "no",
    ),
    Exemplar(
        "Yes or no: Is it common to see frost during some college commencements?",
        "College commencement ceremonies can happen in December, May, and June. December is in the winter, so "
        "there can be frost. Thus, there could be frost at some commencements.",
        "yes",
    ),
    Exemplar(
        "Yes or no: Could a llama birth twice during War in Vietnam (1945-46)?",
        "The War in Vietnam was 6 months. The gestation period for a llama is 11 months, which is more than 6 "
        "months. Thus, a llama could not give birth twice during the War in Vietnam.",
        "no",
    ),
    Exemplar(
        "Yes or no: Would a pear sink in water?",
        "The density of a pear is about 0.6g/cm^3, which is less than water. Objects less dense than water "
        "float. Thus, a pear would float.",
        "no",
    ),
)
COT_SOURCE = Source(
    paper="Wei et al. 2022, Chain-of-Thought Prompting Elicits Reasoning in Large Language Models (arXiv:2201.11903)",
    where="Appendix Table 25, few-shot exemplars for full chain of thought prompt for StrategyQA",
    repo="voidism/DoLa",
    path="strqa_eval.py",
    commit="805230e57e63ca561cb759994681b122ff6f81f0",
    note="create_demo_text/build_prompt: 'Q: {q}\\nA: {chain} So the answer is {a}.\\n\\n' per exemplar, then "
    "'Q: {question}\\nA:'. DoLa writes the pear density '0.6 g/cm^3'; kept '0.6g/cm^3' as the paper (0.6g/cm3 "
    "typeset) and the DRAGIN/FLARE copies write it.",
)
WEI_DEMO = "Q: {question}\nA: {rationale} " + ANSWER_IS + " {answer}."
WEI_TEST = "Q: {question}\nA:"
WEI_STOPS: tuple[str, ...] = ("Q:", "\n\n##")  # DoLa strqa_eval.py main(): stop_word_list

# --- DRAGIN (Su et al. 2024) -------------------------------------------------------------------
_DRAGIN_QUESTIONS = (
    "Do hamsters provide food for any animals?",
    "Could Brooke Shields succeed at University of Pennsylvania?",
    "Hydrogen's atomic number squared exceeds number of Spice Girls?",
    "Is it common to see frost during some college commencements?",
    "Could a llama birth twice during War in Vietnam (1945-46)?",
    "Would a pear sink in water?",
)
# The rationales and answers are Table 25's character for character (checked against src/data.py).
DRAGIN_EXEMPLARS: tuple[Exemplar, ...] = tuple(
    Exemplar(q, e.rationale, e.answer) for q, e in zip(_DRAGIN_QUESTIONS, COT_EXEMPLARS, strict=True)
)
DRAGIN_SOURCE = Source(
    paper="Su et al. 2024, DRAGIN: Dynamic Retrieval Augmented Generation based on the Real-time Information "
    "Needs of Large Language Models (arXiv:2403.10081)",
    where="src/data.py StrategyQA (examplars, demo/test input templates, output_template); src/generate.py "
    "(SingleRAG, FixLengthRAG, TokenRAG, AttnWeightRAG prompt assembly); config/*/StrategyQA/*.json",
    repo="oneal2000/DRAGIN",
    path="src/data.py",
    commit="4d71efcf6712bf82c4a5c7c81455af4efee20dcc",
    note="Table 25's exemplars without the 'Yes or no: ' prefix; FixLengthRAG's instruction line has the typo "
    "'Answer in t he same format as before.' (SingleRAG, TokenRAG and AttnWeightRAG spell it right).",
)
# config/{Llama2-7b-chat,Llama2-13b-chat,Vicuna-13b-v1.5}/StrategyQA/*.json at DRAGIN_SOURCE.commit. Shared by all
# six: fewshot 6, sample 1000, generate_max_length 100 (new tokens per generate call and the cap on the whole
# answer's tokens), retriever BM25 (Elasticsearch "wiki"), retrieve_topk 3; BasicRAG.retrieve truncates the query
# to its last 64 tokenizer tokens (max_query_length=64). Per-model values are (Llama2-7b, Llama2-13b, Vicuna-13b).
DRAGIN_STRATEGYQA_CONFIGS: dict[str, dict[str, object]] = {
    "wo-RAG": {"method": "non-retrieval"},
    "SR-RAG": {"method": "single-retrieval", "query_formulation": "direct"},
    "FL-RAG": {"method": "fix-length-retrieval", "query_formulation": "direct"},  # no fix_length key: the shipped
    # FixLengthRAG reads self.fix_length, which these configs do not set
    "FS-RAG": {"method": "fix-sentence-retrieval", "query_formulation": "direct"},
    "FLARE": {
        "method": "token",
        "query_formulation": "direct",
        "sentence_solver": "avg",
        "hallucination_threshold": (0.1, 0.06, 0.1),
    },
    "DRAGIN": {
        "method": "dragin",
        "query_formulation": "real_words",
        "check_real_words": True,
        "retrieve_keep_top_k": (35, 25, 25),
        "hallucination_threshold": (0.75, 1.3, 1.5),
    },
}
DRAGIN_DEMO = "Question: {question}\nAnswer: {rationale} " + ANSWER_IS + " {answer}."
DRAGIN_TEST = (
    "Following the examples above, answer the question by reasoning step-by-step.\n\nQuestion: {question}\nAnswer:"
)
DRAGIN_CONTEXT_HEADER = "Context:\n"
DRAGIN_DOC = "[{i}] {doc}\n"  # i counts from 1
DRAGIN_INSTRUCTION = "Answer in the same format as before.\n"

# --- FLARE (Jiang et al. 2023) -----------------------------------------------------------------
FLARE_EXEMPLARS: tuple[Exemplar, ...] = DRAGIN_EXEMPLARS  # identical in src/datasets.py cot_examplars
FLARE_SOURCE = Source(
    paper="Jiang et al. 2023, Active Retrieval Augmented Generation (arXiv:2305.06983)",
    where="src/datasets.py StrategyQA (cot_examplars, cot_demo_input_template, cot_output_template); "
    "src/templates.py CtxPrompt.format (elements joined by a blank line)",
    repo="jzbjyb/FLARE",
    path="src/datasets.py",
    commit="ec4b06b502b5ab54f3f9236b0112a5d28482e7bb",
    note="No StrategyQA retrieval config is shipped (configs/ has 2wikihop and wikiasp only); retrieved text "
    "goes in a 'Reference: [1]: ...' block (format_reference, default method). Only the no-retrieval form is "
    "built here.",
)
FLARE_DEMO = (
    "Generate a yes or no answer to the following question.\nQuestion: {question}\nAnswer: {rationale} "
    + FLARE_ANSWER_IS
    + " {answer}."
)
FLARE_TEST = "Generate a yes or no answer to the following question.\nQuestion: {question}\nAnswer:"

# --- Self-Ask (Press et al. 2022) ----------------------------------------------------------------
SELF_ASK_PROMPT = (
    "Question: Who lived longer, Muhammad Ali or Alan Turing?\n"
    "Are follow up questions needed here: Yes.\n"
    "Follow up: How old was Muhammad Ali when he died?\n"
    "Intermediate answer: Muhammad Ali was 74 years old when he died.\n"
    "Follow up: How old was Alan Turing when he died?\n"
    "Intermediate answer: Alan Turing was 41 years old when he died.\n"
    "So the final answer is: Muhammad Ali \n"
    "\n"
    "Question: When was the founder of craigslist born?\n"
    "Are follow up questions needed here: Yes.\n"
    "Follow up: Who was the founder of craigslist?\n"
    "Intermediate answer: Craigslist was founded by Craig Newmark.\n"
    "Follow up: When was Craig Newmark born?\n"
    "Intermediate answer: Craig Newmark was born on December 6, 1952.\n"
    "So the final answer is: December 6, 1952\n"
    "\n"
    "Question: Who was the maternal grandfather of George Washington?\n"
    "Are follow up questions needed here: Yes.\n"
    "Follow up: Who was the mother of George Washington?\n"
    "Intermediate answer: The mother of George Washington was Mary Ball Washington.\n"
    "Follow up: Who was the father of Mary Ball Washington?\n"
    "Intermediate answer: The father of Mary Ball Washington was Joseph Ball.\n"
    "So the final answer is: Joseph Ball \n"
    "\n"
    "Question: Are both the directors of Jaws and Casino Royale from the same country? \n"
    "Are follow up questions needed here: Yes. \n"
    "Follow up: Who is the director of Jaws? \n"
    "Intermediate Answer: The director of Jaws is Steven Spielberg. \n"
    "Follow up: Where is Steven Spielberg from? \n"
    "Intermediate Answer: The United States. \n"
    "Follow up: Who is the director of Casino Royale? \n"
    "Intermediate Answer: The director of Casino Royale is Martin Campbell. \n"
    "Follow up: Where is Martin Campbell from? \n"
    "Intermediate Answer: New Zealand. \n"
    "So the final answer is: No\n"
    "\n"
    "Question: "
)  # the original's prompt[0], trailing spaces and the "Intermediate Answer:" capitals included
SELF_ASK_SUFFIX = "\nAre follow up questions needed here:"  # the original's prompt[1]
SELF_ASK_FOLLOW_UP = "Follow up:"  # promptf's ``followup``: a follow-up question is asked on a last line holding it
SELF_ASK_INTERMEDIATE = "\nIntermediate answer:"  # promptf's ``intermediate``; the search answer is appended
# as intermediate + " " + answer + "."
SELF_ASK_FINAL = "\n" + SELF_ASK_ANSWER_IS  # promptf's ``finalans``; appended when the model did not write it,
# then one more call with stop "\n"
SELF_ASK_STOPS: tuple[str, ...] = (SELF_ASK_INTERMEDIATE,)  # call_gpt(cur_prompt, intermediate)
# When the search engine gave no answer the original lets the model answer with these stops instead:
SELF_ASK_NO_ANSWER_STOPS: tuple[str, ...] = ("\n" + SELF_ASK_FOLLOW_UP, SELF_ASK_FINAL)
SELF_ASK_SOURCE = Source(
    paper="Press et al. 2022, Measuring and Narrowing the Compositionality Gap in Language Models (arXiv:2210.03350)",
    where="ofirpress/self-ask self-ask_plus_search-engine_demo.ipynb: prompt = [prompt[0], prompt[1]] and "
    "promptf(question, prompt, intermediate, followup, finalans)",
    repo="KeksMember/Local-Self-Ask",
    path="LocalSelfAsk.py",
    commit="1b423dde8a1705b91bde7487246ff6e0b7ccf1c9",
    note="ofirpress/self-ask itself is not in the snapshot store; this credited copy (CRLF normalised to LF) "
    "agrees with the prompt on the author's blog post (ofir.io 'Self-ask Prompting'), trailing spaces included.",
)

# --- Iter-RetGen (Shao et al. 2023) --------------------------------------------------------------
ITER_RETGEN_EXEMPLARS: tuple[Exemplar, ...] = DRAGIN_EXEMPLARS
ITER_RETGEN_SOURCE = Source(
    paper="Shao et al. 2023, Enhancing Retrieval-Augmented Large Language Models with Iterative "
    "Retrieval-Generation Synergy (arXiv:2305.15294)",
    where="FlashRAG flashrag/pipeline/active_pipeline.py IterativePipeline (query = f'{q} {r}' after the first "
    "iteration); prompt: DRAGIN's single-retrieval form (fallback)",
    repo="RUC-NLPIR/FlashRAG",
    path="flashrag/pipeline/active_pipeline.py",
    commit="1ee524901aa3daf009f97b7a31e7a1b58eee8206",
    note="FALLBACK: no public source of Iter-RetGen's own StrategyQA exemplars was found; the prompt is DRAGIN's "
    "SingleRAG form with DRAGIN's exemplars (DRAGIN_SOURCE).",
)

IRCOT_SOURCE = Source(
    paper="Trivedi et al. 2023, Interleaving Retrieval with Chain-of-Thought Reasoning for Knowledge-Intensive "
    "Multi-Step Questions (arXiv:2212.10509)",
    where="prompts/{hotpotqa,2wikimultihopqa,musique,iirc}/*.txt: 'Wikipedia Title: {title}\\n{text}\\n\\n' per "
    "paragraph, then 'Q: {question}\\nA: {cot} So the answer is: {answer}.'",
    repo="StonyBrookNLP/ircot",
    path="prompts/hotpotqa/gold_with_2_distractors_context_cot_qa_codex.txt",
    commit="3c1820f698eea5eeddb4fba3c56b64c961e063e4",
    note="No StrategyQA prompt in the repository; DRAGIN's iterative form with its exemplars stands in.",
)

COT_VARIANTS = ("wei", "dragin", "flare")
RAG_VARIANTS = ("dragin",)


def _check(variant: str, known: Sequence[str], what: str) -> None:
    if variant not in known:
        raise ValueError(f"unknown {what} prompt variant {variant!r}; known: {', '.join(known)}")


def _dragin_demos(exemplars: Sequence[Exemplar] = DRAGIN_EXEMPLARS) -> str:
    # generate.py: prompt = "".join([d["case"]+"\n" for d in demo])
    return "".join(
        DRAGIN_DEMO.format(question=e.question, rationale=e.rationale, answer=e.answer) + "\n" for e in exemplars
    )


def _dragin_context(paragraphs: Sequence[str]) -> str:
    # generate.py SingleRAG/TokenRAG/AttnWeightRAG: "Context:\n" + "[i] doc\n"... + instruction
    docs = "".join(DRAGIN_DOC.format(i=i + 1, doc=p) for i, p in enumerate(paragraphs))
    return DRAGIN_CONTEXT_HEADER + docs + DRAGIN_INSTRUCTION


def cot_prompt(question: str, variant: str = "wei") -> str:
    """The six-exemplar chain-of-thought prompt for ``question``, ending where the model writes its
    chain of thought.

    ``variant``: "wei" (Table 25 in "Q:/A:" form, exemplars separated by a blank line, ending
    "\\nQ: {question}\\nA:"), "dragin" (DRAGIN's non-retrieval prompt: its "Question:/Answer:"
    demonstrations one per line, then "Following the examples above, answer the question by reasoning
    step-by-step.\\n\\nQuestion: {question}\\nAnswer:"), or "flare" (FLARE's StrategyQA templates,
    demonstrations and question joined by blank lines). Raises ValueError for any other variant.
    """
    _check(variant, COT_VARIANTS, "chain-of-thought")
    if variant == "wei":
        demos = [WEI_DEMO.format(question=e.question, rationale=e.rationale, answer=e.answer) for e in COT_EXEMPLARS]
        return "\n\n".join([*demos, WEI_TEST.format(question=question)])
    if variant == "dragin":
        return _dragin_demos() + DRAGIN_TEST.format(question=question)
    demos = [FLARE_DEMO.format(question=e.question, rationale=e.rationale, answer=e.answer) for e in FLARE_EXEMPLARS]
    return "\n\n".join([*demos, FLARE_TEST.format(question=question)])


def direct_prompt(question: str) -> str:
    """Standard (answer-only) few-shot prompt: Table 25's questions with only their final answer
    sentence, ending "\\nQ: {question}\\nA: So the answer is" so the next token is the answer.

    Derived, not copied: Wei et al. compare against "standard prompting" with the same exemplars
    minus the chains of thought but print no StrategyQA text for it; DoLa's ``create_demo_text``
    (cot_flag=False) likewise keeps only "So the answer is {a}.".
    """
    demos = [f"Q: {e.question}\nA: {ANSWER_IS} {e.answer}." for e in COT_EXEMPLARS]
    return "\n\n".join([*demos, f"Q: {question}\nA: {ANSWER_IS}"])


def rag_prompt(question: str, paragraphs: Sequence[str], variant: str = "dragin") -> str:
    """DRAGIN's single-retrieval (SingleRAG) prompt: the six demonstrations, "Context:" with the
    paragraphs numbered "[1] ...", "Answer in the same format as before." and the question.

    ``paragraphs`` are put in as given, one per "[i]" line (the block is there even when it is
    empty, as in SingleRAG). Raises ValueError for a variant other than "dragin".
    """
    _check(variant, RAG_VARIANTS, "retrieval")
    return _dragin_demos() + _dragin_context(paragraphs) + DRAGIN_TEST.format(question=question)


def continue_prompt(question: str, paragraphs: Sequence[str], generated_so_far: str, variant: str = "dragin") -> str:
    """The prompt DRAGIN's iterative methods (AttnWeightRAG = DRAGIN, TokenRAG = FLARE, FixLengthRAG)
    send to continue an answer: demonstrations, the "Context:" block when ``paragraphs`` is not
    empty (no block before the first retrieval), the question, then the text generated so far.

    As in AttnWeightRAG, the question and ``generated_so_far`` (stripped) are joined by one space and
    an empty text adds nothing, so ``continue_prompt(q, ps, "")`` equals ``rag_prompt(q, ps)`` for
    non-empty ``ps``. Raises ValueError for a variant other than "dragin".
    """
    _check(variant, RAG_VARIANTS, "retrieval")
    context = _dragin_context(paragraphs) if paragraphs else ""
    tail = " ".join(s for s in (DRAGIN_TEST.format(question=question), generated_so_far.strip()) if s)
    return _dragin_demos() + context + tail


def self_ask_prompt(question: str) -> str:
    """The original Self-Ask prompt for ``question``: ``prompt[0] + question + prompt[1]``, ending
    "Question: {question}\\nAre follow up questions needed here:". Generate with
    :data:`SELF_ASK_STOPS`."""
    return SELF_ASK_PROMPT + question + SELF_ASK_SUFFIX


def iter_retgen_query(question: str, previous_generation: str = "") -> str:
    """Iter-RetGen's retrieval query: the question in the first iteration, then
    "{question} {previous generation}" (FlashRAG IterativePipeline)."""
    previous_generation = previous_generation.strip()
    return f"{question} {previous_generation}" if previous_generation else question


def iter_retgen_prompt(question: str, paragraphs: Sequence[str]) -> str:
    """Iter-RetGen's generation prompt for one iteration (FALLBACK, see :data:`ITER_RETGEN_SOURCE`):
    DRAGIN's single-retrieval form over this iteration's ``paragraphs``. The previous generation
    goes into the retrieval query (:func:`iter_retgen_query`), not into the prompt."""
    return rag_prompt(question, paragraphs, "dragin")


def exemplar_questions(variant: str) -> tuple[str, ...]:
    """The questions of the few-shot exemplars in the prompts of ``variant`` ("wei", "dragin",
    "flare" or "self-ask"; any other: none), without the "Yes or no: " that Table 25 puts before
    four of them: six StrategyQA train questions for the chain-of-thought variants, four
    non-StrategyQA questions for Self-Ask. A run marks its questions among these as demonstrations."""
    if variant == "self-ask":
        return tuple(q.strip() for q in re.findall(r"^Question: (.+)$", SELF_ASK_PROMPT, re.M))
    ex = {"wei": COT_EXEMPLARS, "dragin": DRAGIN_EXEMPLARS, "flare": FLARE_EXEMPLARS}.get(variant, ())
    return tuple(e.question.removeprefix("Yes or no: ") for e in ex)


# --- BIG-bench's zero-shot StrategyQA task as lm-evaluation-harness scores it ---------------
BIGBENCH_TEST = "Q: {question}\nA:"  # the task's ``inputs`` (see BIGBENCH_SOURCE's note)
BIGBENCH_CHOICES = ("Yes", "No")  # its ``multiple_choice_targets``; lm-eval scores " Yes" / " No"
BIGBENCH_SOURCE = Source(
    paper="Srivastava et al. 2022, BIG-bench, task strategyqa (zero-shot), as lm-evaluation-harness runs it",
    where="task bigbench_strategyqa_multiple_choice: doc_to_text 'inputs', doc_to_choice "
    "'multiple_choice_targets', doc_to_target the index of targets[0], metric acc (argmax of the "
    "choices' log-likelihoods after the default target delimiter ' ')",
    repo="EleutherAI/lm-evaluation-harness",
    path="lm_eval/tasks/bigbench/multiple_choice_template_yaml (strategyqa.yaml @337492adbf26)",
    commit="26d63fe77f6d7d6489ec50367593894cf612049d",
    note="FALLBACK for the text of the inputs: BIG-bench's task.json (google/BIG-bench "
    "bigbench/benchmark_tasks/strategyqa) is not in the store; the form 'Q: {question}\\nA:' with the "
    "choices Yes and No is read from public code that loads hails/bigbench strategyqa_zero_shot and "
    "strips exactly 'Q: ' and '\\nA:' from its inputs. sqa reads P(yes) over every spelling of yes and "
    "no (sqa.models.llamacpp.YES_WORDS), lm-eval only ' Yes' against ' No'.",
)


def bigbench_prompt(question: str) -> str:
    """BIG-bench's zero-shot StrategyQA input for ``question``: "Q: {question}\\nA:" (no exemplars;
    :data:`BIGBENCH_SOURCE`)."""
    return BIGBENCH_TEST.format(question=question)


SOURCES: dict[str, Source] = {
    "cot": COT_SOURCE,
    "dragin": DRAGIN_SOURCE,
    "flare": FLARE_SOURCE,
    "self-ask": SELF_ASK_SOURCE,
    "iter-retgen": ITER_RETGEN_SOURCE,
    "ircot": IRCOT_SOURCE,
    "bigbench": BIGBENCH_SOURCE,
}
