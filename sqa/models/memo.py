"""A language model that reads each prompt's hidden state once: the readings several presets share
on the same questions (``sqa eval --preset facts,no-retrieval``: the facts reader's plain prompt is
read by both) are served from memory the second time.

Only ``hidden_states`` is remembered (the facts reader's read-out, ``sqa.facts.prompt``), keyed by
the exact prompt (text or ``ChatPrompt``); everything else goes to the wrapped model unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence


class SharedReadings:
    """Wraps a ``LanguageModel``; ``hidden_states(prompts)`` asks the model only for the prompts it
    has not read before (in one call, in order) and returns the remembered reading for the others.
    ``read`` / ``shared``: how many prompts were read by the model / served from memory. Every other
    attribute (capabilities, generate, yes_probability, path, ...) is the wrapped model's.

    ``model``: the model, or None with ``load`` (a callable returning it, called on the first use
    of anything but ``name``, so a caller that needs no reading never loads it) and ``name``."""

    def __init__(self, model=None, *, load=None, name: str | None = None):
        if model is None and load is None:
            raise ValueError("SharedReadings needs a model or a load callable")
        self._model = model
        self._load = load
        self.name = name if name is not None else model.name
        self._memo: dict = {}
        self.read = 0
        self.shared = 0

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def _get(self):
        if self._model is None:
            self._model = self._load()
        return self._model

    def __getattr__(self, attr):
        if attr.startswith("_"):  # not found on the wrapper itself (copy/pickle probes): not the model's
            raise AttributeError(attr)
        return getattr(self._get(), attr)

    def hidden_states(self, prompts: Sequence) -> list:
        """``[(state or None, log-odds)]`` per prompt, as the wrapped model's ``hidden_states``."""
        missing = list(dict.fromkeys(p for p in prompts if p not in self._memo))
        if missing:
            for p, out in zip(missing, self._get().hidden_states(missing)):
                self._memo[p] = out
            self.read += len(missing)
        self.shared += len(prompts) - len(missing)
        return [self._memo[p] for p in prompts]
