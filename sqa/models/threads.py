"""``ThreadTuner``: the thread count of llama.cpp's one-token decodes, chosen by measured speed
(``sqa.models.llamacpp``)."""

from __future__ import annotations

from typing import Sequence


class ThreadTuner:
    """Picks a thread count for one-token decodes by measured speed: each choice is timed on
    ``probe`` decodes first, then the fastest (exponential moving average of seconds per decode)
    is used, and every ``explore_every`` decodes each other choice is re-timed for ``probe`` decodes,
    so the choice follows changing load. ``choices`` are tried in the given order."""

    def __init__(self, choices: Sequence[int], probe: int = 3, explore_every: int = 160, alpha: float = 0.3):
        self.choices = list(choices)
        self.probe = probe
        self.explore_every = explore_every
        self.alpha = alpha
        self.ema: dict[int, float] = {}
        self.seen: dict[int, int] = {c: 0 for c in self.choices}
        self.n = 0
        self._exploring: int | None = None
        self._left = 0

    def pick(self) -> int:
        self.n += 1
        for c in self.choices:
            if self.seen[c] < self.probe:
                return c
        if len(self.choices) > 1 and self._left <= 0 and self.n % self.explore_every == 0:
            others = [c for c in self.choices if c != self.best()]
            self._exploring = others[(self.n // self.explore_every) % len(others)]
            self._left = self.probe
        if self._left > 0 and self._exploring is not None:
            self._left -= 1
            return self._exploring
        return self.best()

    def best(self) -> int:
        return min(self.choices, key=lambda c: self.ema.get(c, float("inf")))

    def record(self, choice: int, seconds: float) -> None:
        self.seen[choice] = self.seen.get(choice, 0) + 1
        old = self.ema.get(choice)
        self.ema[choice] = seconds if old is None else (1 - self.alpha) * old + self.alpha * seconds
