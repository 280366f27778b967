"""``ModelBase``: what every :class:`sqa.types.LanguageModel` has, with the defaults of a model
that has none of the optional abilities. Runtimes (llama.cpp, transformers, a served model) and
test stand-ins inherit it and override what they do; callers read the attributes directly (no
``getattr`` probing) and ask ``capabilities`` what the model can do."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from sqa.types import ModelCapabilities, Prompt


class ModelBase:
    """Defaults of the :class:`sqa.types.LanguageModel` Protocol.

    - ``name``: the model's name as given (``qwen2.5-coder-1.5b``, ``openai:NAME``, a path).
    - ``prefers_batches``: callers send whole batches in lockstep (True on a GPU).
    - ``capabilities``: :class:`sqa.types.ModelCapabilities` (none of the optional abilities here).
    - ``path``: the weights file when there is one (its sha256 identifies the model; None for a
      served model or a Hugging Face checkpoint).
    - ``hidden_size``: floats per hidden state (None when the model gives none).
    - ``readout_stats``: a served model's counts of yes/no read-outs (``readouts``, ``missing``,
      ``one_sided``, ...; None in-process); ``server_info``: a served model's server details
      (no credentials; None in-process); ``cost``: a served model's calls, tokens and seconds
      (``sqa.models.served_cache.Cost``; None in-process).
    """

    name: str = "model"
    prefers_batches: bool = False
    capabilities: ModelCapabilities = ModelCapabilities()
    path: Path | None = None
    hidden_size: int | None = None
    readout_stats: dict | None = None
    server_info: dict | None = None
    cost = None

    def generate(self, prompts: Sequence[Prompt], max_tokens: int, stop: Sequence[str] = ()) -> list[str]:
        """Greedy continuation of each prompt (see :class:`sqa.types.LanguageModel`)."""
        raise NotImplementedError(f"{self.name}: this model does not generate text")

    def yes_probability(self, prompts: Sequence[Prompt]) -> list[float]:
        """P(" Yes") / (P(" Yes") + P(" No")) of the next token after each prompt."""
        raise NotImplementedError(f"{self.name}: this model gives no yes/no read-outs")

    def hidden_states(self, prompts: Sequence[Prompt]) -> list:
        """``(state, log_odds)`` per prompt (see :class:`sqa.types.LanguageModel`)."""
        raise NotImplementedError(f"{self.name}: this model gives no hidden states")

    def warm_prefixes(self, texts: Sequence[str], cache_dir: str | Path) -> list[str]:
        """Keep the KV cache of fixed prompt heads on disk (``capabilities.prefix_cache``); returns
        per text what was done ("read", "loaded"), or [] when the model keeps no prefix cache."""
        return []
