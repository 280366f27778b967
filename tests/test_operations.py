"""Operation steps computed from earlier answers (``sqa.steps.operations``), on step texts as
StrategyQA's annotators and our decomposer write them."""

import pytest

from sqa.steps.operations import compute_step, parse_quantity


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("322 BC", "year", -322),
        ("1976", "year", 1976),
        ("AD 79", "year", 79),
        ("in 1492", "year", 1492),
        ("11.5 months", "duration", 11.5 * 30.44),
        ("about two years", "duration", 2 * 365.25),
        ("3 weeks", "duration", 21),
        ("1,200", "number", 1200),
        ("2.5 million people", "number", 2.5e6),
        ("The gestation period of a llama is 11.5 months", "duration", 11.5 * 30.44),
    ],
)
def test_parse_quantity(text, kind, value):
    q = parse_quantity(text)
    assert q is not None and q.kind == kind and q.value == pytest.approx(value)


def test_unparseable_answers_give_none():
    assert parse_quantity("Greek philosopher") is None
    assert parse_quantity(None) is None
    assert compute_step("Is #1 longer than #2?", ["a long time", "5 days"]) is None


def test_the_llama_example_is_computed_not_generated():
    # "Could a llama birth twice during the War in Vietnam (1945-46)?"
    answers = ["1 year", "11.5 months", None, None]
    two = compute_step("What is 2 times #2?", answers)
    assert two == "23 months"
    answers[2] = two
    assert compute_step("Is #3 less than #1?", answers) == "no"
    assert compute_step("Is #1 greater than #3?", answers) == "no"
    assert compute_step("Is #3 longer than #1?", answers) == "yes"


@pytest.mark.parametrize(
    "step, answers, expected",
    [
        ("Is #1 before #2?", ["322 BC", "1981"], "yes"),
        ("Did #2 happen before #1?", ["322 BC", "1981"], "no"),
        ("Is #2 after #1?", ["322 BC", "1981"], "yes"),
        ("Is #1 more than #2?", ["1,200", "900"], "yes"),
        ("Is #1 the same as #2?", ["Paris", "paris"], "yes"),
        ("Is #1 equal to #2?", ["12", "12.0"], "yes"),
        ("What is #1 plus #2?", ["3 weeks", "4 days"], "25 days"),
        ("What is #1 minus #2?", ["1981", "1945"], "36 years"),
        ("What is the difference between #1 and #2?", ["10", "14"], "4"),
        ("What is #1 divided by #2?", ["100", "4"], "25"),
        ("What is #1 times #2?", ["2", "3.5 hours"], "7 hours"),
        ("Is #1 greater than 5?", ["7 children"], "yes"),
    ],
)
def test_comparisons_and_arithmetic(step, answers, expected):
    assert compute_step(step, answers) == expected


def test_steps_that_are_not_operations_are_left_to_the_reader():
    assert compute_step("When did Aristotle die?", []) is None
    assert compute_step("Was #1 a philosopher?", ["Aristotle"]) is None
    assert compute_step("What is #3 of #1?", ["a", "b", "c"]) is None


def test_is_operation_step_agrees_with_the_annotators_operation_tag():
    """The one operation-step rule (the retriever's former "no content words" rule found 16 % of
    them): on the 2,290 train questions' gold steps, against the steps most annotators tagged
    "operation", it must keep precision >= 0.8, recall >= 0.9 and agreement >= 0.9."""
    from sqa.steps.operations import is_operation_step
    from sqa.strategyqa import load_questions

    tp = fp = fn = tn = 0
    for q in load_questions("train"):
        for i, step in enumerate(q.decomposition):
            tags = [ann[i] for ann in q.evidence if i < len(ann)]
            gold = 2 * sum("operation" in t for t in tags) > len(tags)
            pred = is_operation_step(step)
            tp, fp, fn, tn = (
                tp + (pred and gold),
                fp + (pred and not gold),
                fn + (gold and not pred),
                tn + (not pred and not gold),
            )
    assert tp + fp + fn + tn == 6720
    assert tp / (tp + fp) >= 0.8 and tp / (tp + fn) >= 0.9 and (tp + tn) / (tp + fp + fn + tn) >= 0.9
    assert is_operation_step("Is #2 greater than #1?") and is_operation_step("Are #1 and #2 the same?")
    assert not is_operation_step("What is #1 made of?") and not is_operation_step("Is the sun a star?")
