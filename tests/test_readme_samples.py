"""The README's sample outputs are what the commands print (``experiments.readme_samples``)."""

from __future__ import annotations

import sys

import pytest

from helpers import REPO

sys.path.insert(0, REPO)
from experiments.readme_samples import README, differences, run_sample, samples  # noqa: E402

SHOWN = """└── No  P(yes)=0.05 (answer head qwen2.5-coder-1.5b.facts.json, fitted on 2,055 questions; the
    model's own P(yes): plain 0.42, facts 0.20)  confidence=0.95  (1.9 s, qwen2.5-coder-1.5b)
"""


def test_differences_leave_out_the_seconds_and_the_last_digit_only():
    assert differences(SHOWN, SHOWN.replace("(1.9 s,", "(31.4 s,")) == []
    assert differences(SHOWN, SHOWN.replace("0.42", "0.43").replace("0.95", "0.94")) == []
    assert differences(SHOWN, SHOWN.replace("P(yes)=0.05", "P(yes)=0.35")) == ["0.05 shown, 0.35 printed now"]
    assert differences(SHOWN, SHOWN.replace("2,055", "2,290")) == ["055 shown, 290 printed now"]
    assert differences(SHOWN, SHOWN.replace("answer head qwen", "head qwen"))  # the words themselves
    assert differences(SHOWN, SHOWN.replace("No ", "Yes "))


def test_the_readme_shows_at_least_the_ask_sample():
    assert [m.group(2) for m in samples(README.read_text())] == ['sqa ask "Did Aristotle use a laptop?"']


@pytest.mark.slow
def test_the_readme_samples_are_what_sqa_prints_now(mini_index):
    """Each ``$ sqa ...`` block of the README against the command run now on the mini index (the
    default 1.5B model, the shipped head): fails when sqa's output drifts from the README's."""
    for m in samples(README.read_text()):
        now = run_sample(m.group(2), mini_index)
        assert differences(m.group(3), now) == [], f"run python -m experiments.readme_samples; now:\n{now}"
