"""``ThreadTuner``: a thread count chosen by measured speed; ``ThreadCounts``: those of llama.cpp's
one-token decodes and prompt reads (``sqa.models.llamacpp``)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence


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


READ_TUNED_TOKENS = 32  # prompt reads at least this long pick their thread count by measurement
UNCONTENDED = 0.85  # a read whose threads ran this share of its wall time had the CPUs to itself


class ThreadCounts:
    """The two thread counts of one llama.cpp context, each picked by a ``ThreadTuner``: one-token
    decodes (generation; timed per decode) and prompt reads of ``READ_TUNED_TOKENS`` tokens or more
    (timed per token read; tuned only while other jobs take the CPUs, see ``read``). ``set_threads(one_token, batch)`` applies a pair (llama.cpp's
    ``n_threads`` and ``n_threads_batch``). ``auto`` False keeps ``n_threads`` for reads and
    ``generate`` threads for decodes."""

    def __init__(self, set_threads: Callable[[int, int], None], n_threads: int, generate: int | str = "auto"):
        choices = sorted({1, max(1, n_threads // 2), n_threads}, reverse=True)
        auto = generate == "auto"
        self.token_tuner = ThreadTuner(choices if auto else [int(generate)])
        # one timed read a question (the facts prompt): one probe each, re-timed every 24 reads
        self.read_tuner = ThreadTuner(choices if auto else [n_threads], probe=1, explore_every=24)
        self._set = set_threads
        self.current = (n_threads, n_threads)
        self.contended = False

    def _apply(self, pair: tuple[int, int]) -> None:
        if pair != self.current:
            self._set(*pair)
            self.current = pair

    @contextmanager
    def token(self) -> Iterator[None]:
        """Around one one-token decode: its thread count picked, its seconds recorded."""
        n = self.token_tuner.pick()
        self._apply((n, self.current[1]))
        t = time.perf_counter()
        yield
        self.token_tuner.record(n, time.perf_counter() - t)

    @contextmanager
    def read(self, n_tokens: int) -> Iterator[None]:
        """Around reading ``n_tokens`` prompt tokens. At ``READ_TUNED_TOKENS`` or more: all threads
        while the last such read had its CPUs to itself (process CPU seconds at least
        ``UNCONTENDED`` of threads x wall seconds), else the count the read tuner picks; the seconds
        per token are recorded. Shorter reads keep the current count."""
        if n_tokens < READ_TUNED_TOKENS:
            yield
            return
        n = self.read_tuner.pick() if self.contended else max(self.read_tuner.choices)
        self._apply((self.current[0], n))
        t, cpu = time.perf_counter(), time.process_time()
        yield
        wall = time.perf_counter() - t
        self.read_tuner.record(n, wall / n_tokens)
        self.contended = time.process_time() - cpu < UNCONTENDED * n * wall
