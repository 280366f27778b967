"""The reader's step loop, prompts and demonstrations on real StrategyQA questions, GGUF assembly,
and the yes/no scoring of the real 0.5B model (llama.cpp)."""

from __future__ import annotations

import hashlib
import re
import sys
import types

import pytest

from helpers import ScriptedModel
from sqa.models.chat import as_chatml_text
from sqa.steps import prompts as P
from sqa.models.registry import GgufSpec, assemble_gguf
from sqa.steps.operations import is_operation_step
from sqa.steps.reader import DECISION, StepsReader, combine_log_odds
from sqa.retriever.backend import BackendRetriever
from sqa.retriever.clean import resolve_references
from sqa.strategyqa import load_questions, questions_by_id
from sqa.types import ChatPrompt, ModelCapabilities, Question, SqaError


class RecordingRetriever:
    """Wraps a retriever and records the step texts with their prior answers it was asked for."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple[str, list[str | None]]] = []

    def retrieve_step(self, step, prior_steps, k=10, question=None):
        self.calls.append((step.question, [s.answer for s in prior_steps]))
        return self.inner.retrieve_step(step, prior_steps, k, question=question)

    def retrieve(self, question, steps, k=10):
        return self.inner.retrieve(question, steps, k)

    def __getattr__(self, name):  # name, last_queries, step_query: the inner retriever's
        return getattr(self.inner, name)


def _with_refs(split: str = "dev", n: int = 3) -> list[Question]:
    """Real questions whose gold decomposition uses "#k" in a step that is not an operation step."""
    out = [
        q
        for q in load_questions(split)
        if len(q.decomposition) >= 3 and "#1" in q.decomposition[1] and not is_operation_step(q.decomposition[1])
    ]
    return out[:n]


def test_step_loop_substitutes_earlier_answers_on_real_questions(gold_index):
    retriever = RecordingRetriever(BackendRetriever(gold_index))
    for q in _with_refs():
        model = ScriptedModel()
        r = StepsReader(model, retriever, k=5)
        retriever.calls.clear()
        res = r.answer(q.question, qid=q.qid, decomposition=list(q.decomposition))
        assert [s.question for s in res.steps] == list(q.decomposition)
        # step 2 was retrieved with step 1's answer known, and its query has #1 replaced by it
        assert retriever.calls[1] == (q.decomposition[1], ["ANSWER1"])
        assert "#1" not in res.steps[1].query and "ANSWER1" in res.steps[1].query
        assert res.steps[0].answer == "ANSWER1"
        # the reader saw step 1's evidence before answering step 1, and its answer before step 2
        first_read = next(p for p in model.generate_prompts if p.endswith("#1 ="))
        top = gold_index.get([res.steps[0].evidence[0]])[0]
        assert f"Evidence 1 ({top.title})" in first_read
        second_read = next(p for p in model.generate_prompts if p.endswith("#2 ="))
        assert "#1 = ANSWER1\n" in second_read
        # final answer: the log-odds mean of the three readings; only the transcript holds "ANSWER1"
        assert res.signals == {"transcript": 0.9, "direct": 0.2, "plain": 0.2} and res.decision == DECISION
        assert res.p_yes == pytest.approx(combine_log_odds([0.9, 0.2, 0.2])) and res.answer is False
        assert len(res.paragraphs) == 5 and len(set(res.paragraphs)) == 5
        assert all(len(s.evidence) == 5 for s in res.steps)


class TurnsModel(ScriptedModel):
    """A model read in turns (no assistant prefill): it records the ChatPrompts it is given; a new
    message answers as ScriptedModel does: the steps, "ANSWER{k}" when asked for step k, and
    P(yes) 0.9 when an earlier message holds "ANSWER1"."""

    def __init__(self, steps):
        super().__init__(steps)
        self.capabilities = ModelCapabilities(prefill=False)
        self.given: list[ChatPrompt] = []

    def generate(self, prompts, max_tokens, stop=()):
        self.given.extend(prompts)
        out = []
        for p in prompts:
            ask = re.match(r"Answer step (\d+) \(", p.messages[-1][1])
            steps = "\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1))
            out.append(f"#{ask.group(1)} = ANSWER{ask.group(1)}" if ask else f"Steps:\n{steps}\nAnswer: Yes")
        return out

    def yes_probability(self, prompts):
        self.given.extend(prompts)
        return [0.9 if any("ANSWER1" in c for _, c in p.messages) else 0.2 for p in prompts]


def test_a_model_without_prefill_reads_the_transcript_in_turns(gold_index):
    """A model that cannot continue an assistant message (``capabilities.prefill`` False, as a chat
    server without prefill), or ``prefill=False``: every prompt has an empty reply; the model writes
    the steps in a new message, is asked for each step's answer by a user turn naming it (an echoed
    "#k =" is cut), and reads yes/no after a user turn asking for it; the transcript it reads holds
    the same steps, evidence and answers as with prefill."""
    q = _with_refs(n=1)[0]
    steps = ["Who wrote #0 the book?", "When was #1 born?", "Is #2 before 1900?"]
    model = TurnsModel(steps)
    reader = StepsReader(model, BackendRetriever(gold_index), k=3)
    assert reader.turns and not StepsReader(ScriptedModel(), None, retrieval=False).turns
    res = reader.answer(q.question, qid=q.qid)
    assert StepsReader(ScriptedModel(), None, retrieval=False, prefill=False).turns
    assert all(p.reply == "" for p in model.given)
    decompose, step1, step2, transcript, direct, plain = model.given
    assert decompose.messages[-1] == ("user", f"Question: {q.question}")
    assert res.decomposition == steps and [s.answer for s in res.steps[:2]] == ["ANSWER1", "ANSWER2"]
    assert step1.messages[-1] == ("user", "Answer step 1 (Who wrote #0 the book?) in a few words.")
    role, text = step2.messages[-2]
    assert role == "assistant" and text.startswith("Steps:\n1. Who wrote") and "#1 = ANSWER1\n" in text
    assert "Evidence 2 (" in text and not text.endswith("#2 =")
    assert transcript.messages[-1] == ("user", f"Question: {q.question}\nAnswer with Yes or No.")
    assert "#1 = ANSWER1" in transcript.messages[-2][1]
    assert direct.messages[-1][1].endswith(f"Question: {q.question}\nAnswer with Yes or No.")
    assert plain.messages[-1] == direct.messages[-1] and plain.messages != direct.messages
    assert res.signals == {"transcript": 0.9, "direct": 0.2, "plain": 0.2}


def test_an_answer_in_place_of_steps_is_no_decomposition():
    """A decomposer that answers instead ("1. Answer: No", as a small model asked to continue a
    closed message did) writes no step, so the question itself is read as its one step."""
    assert P.parse_steps("1. Answer: No") == []
    assert P.parse_steps("Steps:\n1. Who?\n2. Is #1 old?\nAnswer: Yes") == ["Who?", "Is #1 old?"]
    assert P.clean_step_answer(" #2 = 3,776 meters", 2) == "3,776 meters"


def test_no_prefill_with_the_facts_reader_is_one_line(tmp_path):
    """``--no-prefill`` goes with the steps reader: with the facts reader it is one line, exit 2,
    before any model loads."""
    from helpers import one_error_line, run_sqa, throwaway_home

    env = {"SQA_HOME": str(throwaway_home(tmp_path / "home"))}
    line = one_error_line(run_sqa(["ask", "--no-prefill", "Is the sun a star?"], env=env))
    assert "--no-prefill goes with the steps reader" in line
    line = one_error_line(run_sqa(["eval", "--split", "dev", "--limit", "1", "--no-prefill"], env=env))
    assert "--no-prefill goes with the steps reader" in line


def test_predicted_decomposition_is_parsed_and_operation_step_is_not_read(gold_index):
    q = questions_by_id()[_with_refs("train-2061", 1)[0].qid]
    steps = ["What is the capital of France?", "What river flows through #1?", "Is #2 longer than 500 km?"]
    model = ScriptedModel(steps)
    res = StepsReader(model, BackendRetriever(gold_index), k=3).answer(q.question, qid=q.qid)
    assert res.decomposition == steps
    # the last step is an operation over #2: no reader call, its answer is the final yes/no
    assert not any(p.endswith("#3 =") for p in model.generate_prompts)
    assert res.steps[2].answer == "no"  # the final answer: log-odds mean of 0.9, 0.2, 0.2 < 0.5
    assert res.steps[1].query == "What river flows through ANSWER1?" or "ANSWER1" in res.steps[1].query


def test_no_retrieval_and_question_modes(gold_index):
    q = _with_refs(n=1)[0]
    model = ScriptedModel(["Who?", "Is #1 old?"])
    res = StepsReader(model, None, retrieval=False).answer(q.question, qid=q.qid)
    assert res.paragraphs == [] and all(s.evidence == [] for s in res.steps)
    assert not any("Evidence" in p for p in model.yes_prompts[-3:])
    model = ScriptedModel()
    res = StepsReader(model, BackendRetriever(gold_index), k=4).answer_batch([q], decomposition="question")[0]
    assert res.steps == [] and len(res.paragraphs) == 4
    assert res.decomposition == [q.question] and res.to_prediction().decomposition == [q.question]  # one step
    assert model.generate_prompts == []  # question mode: one yes/no read, nothing generated
    transcript = model.yes_prompts[-3]
    assert "Evidence 1 (" in transcript and "Steps:" not in transcript.split("Question: ")[-1]


def test_answer_batch_gold_mode_and_errors(gold_index):
    qs = _with_refs(n=2)
    r = StepsReader(ScriptedModel(), BackendRetriever(gold_index), k=3)
    res = r.answer_batch(qs, decomposition="gold")
    assert [x.qid for x in res] == [q.qid for q in qs]
    assert [x.decomposition for x in res] == [list(q.decomposition) for q in qs]
    with pytest.raises(SqaError, match="empty question"):
        r.answer("   ")
    with pytest.raises(SqaError, match="unknown decomposition mode"):
        r.answer_batch(qs, decomposition="oracle")
    with pytest.raises(SqaError, match="needs a retriever"):
        StepsReader(ScriptedModel(), None)


def test_demonstrations_come_from_train_by_similarity_never_the_question():
    sel = P.default_selector()
    train = {q.qid for q in load_questions("train-2061")}
    dev_ids = {q.qid for q in load_questions("dev")}
    assert {d.qid for d in sel.demos} <= train and not ({d.qid for d in sel.demos} & dev_ids)
    q = load_questions("train-2061")[0]  # "Are more people today related to Genghis Khan than Julius Caesar?"
    demos = sel.select(q.question, 3, exclude_qid=q.qid)
    assert len(demos) == 3 and q.qid not in {d.qid for d in demos}
    assert all(d.question != q.question for d in demos)
    # BM25 similarity: the best demonstration shares a rare word with the question
    words = {w.lower().strip("?") for w in q.question.split() if len(w) > 4}
    assert words & {w.lower().strip("?") for w in demos[0].question.split()}
    assert {d.answer for d in demos} == {True, False}  # both labels shown
    # unbalanced (sqa ask --steps): the 3 nearest, where the balanced list swaps its third for a
    # question of the other answer ("Did Aristotle use a laptop?": Ivan the Terrible's calendar)
    near = sel.select("Did Aristotle use a laptop?", 3, balance=False)
    assert [d.question for d in near][:2] == [
        "Was Aristotle a member of the House of Lords?",
        "Can you buy a fair trade laptop?",
    ]
    assert not any("Ivan" in d.question for d in near)
    assert any("Ivan" in d.question for d in sel.select("Did Aristotle use a laptop?", 3))


@pytest.mark.slow
def test_minilm_demonstrations_share_the_strategy_and_their_embeddings_are_cached(demo_embeddings):
    """``sqa ask --steps``' demonstrations by meaning (all-MiniLM-L6-v2 in numpy): for the card's example the
    nearest train questions are anachronism questions, not BM25's "fair trade laptop"; the train
    questions' embeddings are computed once (by the session's ``demo_embeddings`` selector, into
    its cache folder) and read back from the cache."""
    from sqa.retriever.minilm import default_encoder

    encode = default_encoder()
    sel, cache = demo_embeddings
    near = [d.question for d in sel.select("Did Aristotle use a laptop?", 3, balance=False)]
    assert "Did Al Capone carry a smartphone?" in near and "Can you buy a fair trade laptop?" not in near
    assert len(list(cache.glob("demo-embeddings-minilm-*.npy"))) == 1

    def only_queries(texts):  # a second selector must not embed the 2,000 train questions again
        assert len(texts) == 1, "train embeddings were recomputed instead of read from the cache"
        return encode(texts)

    again = P.MiniLMDemoSelector(encode=only_queries, cache_dir=cache)
    assert [d.question for d in again.select("Did Aristotle use a laptop?", 3, balance=False)] == near
    q = load_questions("train-2061")[0]
    assert all(d.qid != q.qid for d in again.select(q.question, 5, exclude_qid=q.qid))


def test_parse_steps_and_substitute_and_trim():
    assert P.parse_steps("1. Who wrote Hamlet?\n2. When was #1 born?\nAnswer: Yes") == [
        "Who wrote Hamlet?",
        "When was #1 born?",
    ]
    prior = [("Who wrote Hamlet?", "Shakespeare"), ("When was #1 born?", "1564")]
    assert resolve_references("Is #2 older than #1?", prior, unknown="keep") == "Is 1564 older than Shakespeare?"
    assert resolve_references("Is #3 big?", prior[:1], unknown="keep") == "Is #3 big?"
    assert resolve_references("Where is #1's grave?", prior, unknown="keep") == "Where is Shakespeare's grave?"
    text = (
        "Paris is the capital of France. It has many museums. The Seine flows through Paris and into the "
        "English Channel at Le Havre. Many bridges cross it. " * 3
    )
    out = P.trim_evidence(text, "Which river flows through Paris?", max_words=25)
    assert len(out.split()) <= 26 and "Seine" in out


def _fake_parts(tmp_path, blobs):
    names = []
    for i, b in enumerate(blobs, start=1):
        f = tmp_path / f"part{i}.bin"
        f.write_bytes(b)
        mod = types.ModuleType(f"sqa_test_part{i}")
        mod.get_part_path = lambda f=f: str(f)
        sys.modules[mod.__name__] = mod
        names.append(mod.__name__)
    return names


def test_assemble_gguf_joins_parts_verifies_hash_and_is_atomic(tmp_path):
    blobs = [b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7]
    _fake_parts(tmp_path, blobs)
    whole = b"".join(blobs)
    spec = GgufSpec("t", "t.gguf", "sqa_test_part", 3, len(whole), hashlib.sha256(whole).hexdigest(), "x-part")
    out = assemble_gguf(spec, tmp_path / "cache")
    assert out.read_bytes() == whole
    bad = GgufSpec("t2", "t2.gguf", "sqa_test_part", 3, len(whole), "0" * 64, "x-part")
    with pytest.raises(SqaError, match="sha256"):
        assemble_gguf(bad, tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        ".t.gguf.verified.json",
        "t.gguf",
    ]  # no partial file left
    missing = GgufSpec("t3", "t3.gguf", "sqa_test_nonexistent_part", 2, 1, "0" * 64, "x-part")
    with pytest.raises(SqaError, match="not installed"):
        assemble_gguf(missing, tmp_path / "cache")


def test_missing_gguf_path_is_a_clear_error(tmp_path):
    from sqa.models.registry import load_model

    with pytest.raises(SqaError, match="not found"):
        load_model(str(tmp_path / "nope.gguf"))


@pytest.fixture(scope="module")
def small_model():
    from sqa.models.registry import load_model

    return load_model("qwen2.5-coder-0.5b", n_ctx=1024)


def _chat(q: str) -> str:
    return (
        f"<|im_start|>system\nAnswer the question with Yes or No.<|im_end|>\n"
        f"<|im_start|>user\nQuestion: {q}<|im_end|>\n<|im_start|>assistant\nAnswer:"
    )


@pytest.mark.slow
def test_yes_probability_ranks_obvious_yes_above_obvious_no(small_model):
    yes_qs = ["Is Paris the capital of France?", "Is water wet?", "Do birds have feathers?"]
    no_qs = [
        "Is Paris the capital of Germany?",
        "Can a dog fly to the Moon by flapping its ears?",
        "Is the number 3 larger than the number 7?",
    ]
    py = small_model.yes_probability([_chat(q) for q in yes_qs])
    pn = small_model.yes_probability([_chat(q) for q in no_qs])
    assert all(0.0 <= p <= 1.0 for p in py + pn)
    assert min(py) > max(pn), (py, pn)
    # the 0.5B model is weakly calibrated (measured: yes 0.45-0.62, no 0.38-0.43), so only the
    # ranking and a clear gap of the means are asserted
    assert sum(py) / 3 - sum(pn) / 3 > 0.05


@pytest.mark.slow
def test_generation_stops_and_prefix_cache_is_reused(small_model):
    prompt = "<|im_start|>user\nList three colours, one per line, numbered.<|im_end|>\n<|im_start|>assistant\n1."
    before = dict(small_model.stats)
    a = small_model.generate([prompt], 30, stop=["\n"])[0]
    b = small_model.generate([prompt], 30, stop=["\n"])[0]
    assert a == b and a.strip() and "\n" not in a
    cached = small_model.stats["cached_tokens"] - before["cached_tokens"]
    n_prompt = len(small_model.tokenize(prompt))
    assert cached >= n_prompt - 1  # the second call re-read at most the last prompt token


def test_fewshot_pool_is_respected_and_recorded(gold_index):
    train = load_questions("train-2061")
    pool = train[:300]
    q = train[0]  # in the pool: must never be its own demonstration
    r = StepsReader(ScriptedModel(["Who?", "Is #1 old?"]), BackendRetriever(gold_index), k=3).with_fewshot_pool(pool)
    res = r.answer_batch([q])[0]
    assert len(res.fewshot_qids) == 3 and q.qid not in res.fewshot_qids
    assert set(res.fewshot_qids) <= {x.qid for x in pool}
    assert res.to_dict()["fewshot_qids"] == res.fewshot_qids


def test_lockstep_batches_match_one_by_one(gold_index):
    """A model with ``prefers_batches`` (GPU) gets one call per phase for the whole batch; the
    results equal answering the questions one by one."""
    qs = _with_refs(n=3)

    class Batched(ScriptedModel):
        prefers_batches = True

        def __init__(self):
            super().__init__()
            self.calls = []

        def generate(self, prompts, max_tokens, stop=()):
            self.calls.append(len(prompts))
            return super().generate(prompts, max_tokens, stop)

    batched = Batched()
    a = StepsReader(batched, BackendRetriever(gold_index), k=3).answer_batch(qs, decomposition="gold")
    b = StepsReader(ScriptedModel(), BackendRetriever(gold_index), k=3).answer_batch(qs, decomposition="gold")
    assert max(batched.calls) == 3  # all three questions' steps read in one call
    for x, y in zip(a, b):
        assert (x.qid, x.answer, x.p_yes, x.paragraphs) == (y.qid, y.answer, y.p_yes, y.paragraphs)
        assert [(s.question, s.answer, s.evidence) for s in x.steps] == [
            (s.question, s.answer, s.evidence) for s in y.steps
        ]


@pytest.mark.slow
def test_cpu_default_path_does_not_import_torch(gold_index):
    """The CPU default (llama.cpp + tantivy) never even tries to import torch/transformers: an import
    hook records every attempt, so the test means the same where torch is installed (CI) and where
    it is not (the README's install, where a bare `m in sys.modules` check could never fail)."""
    import subprocess

    code = (
        "import sys, importlib.abc\n"
        "HEAVY = ('torch', 'transformers', 'sentence_transformers')\n"
        "tried = []\n"
        "class Spy(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in HEAVY: tried.append(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Spy())\n"
        "from sqa.pipeline import build_reader\n"
        "from sqa.settings import ReaderSettings\n"
        "from sqa.steps.reader import StepsSettings\n"
        f"s = ReaderSettings('steps', model='qwen2.5-coder-0.5b', index={str(gold_index.index_dir)!r}, k=3)\n"
        "r = build_reader(s).reader\n"
        "r.settings = StepsSettings(max_steps=2, decompose_tokens=30)\n"
        "res = r.answer('Is the Eiffel Tower in Paris?')\n"
        "assert 0 <= res.p_yes <= 1\n"
        "bad = [m for m in HEAVY if m in sys.modules]\n"
        "assert not bad and not tried, (bad, tried)\n"
        "try:\n"
        "    import torch  # the control: the spy sees an attempt, installed or not\n"
        "except ImportError:\n"
        "    pass\n"
        "assert tried and tried[0] == 'torch', tried\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


def test_final_answer_reads_transcript_direct_and_plain_and_averages_log_odds(gold_index):
    """The three readings each read their own prompt (transcript = steps, evidence and answers with
    the question repeated; direct and plain = no steps, plain with question-only demonstrations);
    the final answer is their log-odds mean (DECISION)."""
    q = _with_refs(n=1)[0]
    model = ScriptedModel()
    res = StepsReader(model, BackendRetriever(gold_index), k=3).answer(
        q.question, qid=q.qid, decomposition=list(q.decomposition)
    )
    assert (
        list(res.signals) == ["transcript", "direct", "plain"] and res.decision == DECISION == "transcript+direct+plain"
    )
    transcript, direct, plain = model.yes_prompts[-3:]
    turn = f"<|im_start|>user\nQuestion: {q.question}<|im_end|>\n<|im_start|>assistant\n"
    assert "Evidence 1 (" in transcript and "#1 = ANSWER1" in transcript
    assert transcript.endswith(f"Question: {q.question}\nAnswer:")  # the question asked again
    assert direct.endswith(turn + "Answer:") and "ANSWER" not in direct and "Steps:\n1. " in direct
    assert plain.endswith(turn + "Answer:") and "Steps:" not in plain
    # scripted P(yes): 0.9 when "ANSWER1" is in the prompt, else 0.2
    assert res.signals == {"transcript": 0.9, "direct": 0.2, "plain": 0.2}
    assert res.p_yes == pytest.approx(combine_log_odds([0.9, 0.2, 0.2])) and res.answer is False
    assert combine_log_odds([0.7]) == 0.7 and combine_log_odds([0.3, 0.7]) == pytest.approx(0.5)


def test_operation_steps_are_computed_not_generated(gold_index):
    """The llama example: step 3 ("2 times #2") and step 4 (a comparison) are computed from the
    reader's answers to steps 1-2; the model is asked to generate only steps 1 and 2."""

    class Numbers(ScriptedModel):
        def generate(self, prompts, max_tokens, stop=()):
            out = []
            for p in map(as_chatml_text, prompts):
                self.generate_prompts.append(p)
                if p.endswith("Steps:\n1."):
                    out.append(" " + "\n".join(f"{i}. {s}" for i, s in enumerate(self.steps, 1))[3:])
                else:
                    k = int(re.search(r"#(\d+) =$", p).group(1))
                    out.append({1: " 1 year", 2: " 11.5 months"}[k])
            return out

    steps = [
        "How long was the War in Vietnam (1945-46)?",
        "How long is the gestation period of a llama?",
        "What is 2 times #2?",
        "Is #3 less than #1?",
    ]
    m = Numbers(steps)
    r = StepsReader(m, BackendRetriever(gold_index), k=3).answer(
        "Could a llama birth twice during the War in Vietnam (1945-46)?"
    )
    assert [s.answer for s in r.steps] == ["1 year", "11.5 months", "23 months", "no"]
    assert [s.computed for s in r.steps] == [False, False, True, True]
    assert sum(1 for p in m.generate_prompts if p.endswith(" =")) == 2
    assert "#3 = 23 months\n#4 = no\n" in m.yes_prompts[0]
