"""GGUF through llama.cpp's own tools: its converter (`convert_hf_to_gguf.py`,
`convert_lora_to_gguf.py`), its quantizer (llama-cpp-python's `llama_model_quantize`) and the
`gguf` package (reading a file back, rewriting its metadata). mens writes no GGUF byte itself.

Where the converter comes from, in order:
1. `MENS_LLAMA_CPP=DIR`: a llama.cpp checkout (or any folder holding `convert_hf_to_gguf.py`).
2. The cache `~/.cache/mens/llama.cpp-<V>/` (`MENS_CACHE` moves it), V = the installed
   llama-cpp-python version, so the converter and the runtime are one llama.cpp commit.
3. Fetched into that cache once: `pip download --no-binary :all: --no-deps llama-cpp-python==V`
   and the converter, its `conversion/` package, its `gguf-py/` and llama.cpp's LICENSE (MIT)
   taken out of the sdist's `vendor/llama.cpp/`.

The converter runs in a child process (mens.export.convert_runner), as llama.cpp means it to.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mens.errors import MensError
from mens.progress import say

QUANTS = ("f16", "q8_0", "q4_k_m")
CONVERTER = "convert_hf_to_gguf.py"
LORA_CONVERTER = "convert_lora_to_gguf.py"
_SDIST_KEEP = (CONVERTER, LORA_CONVERTER, "conversion/", "gguf-py/", "LICENSE")
_INSTALL = "pip install 'mens[export]' (builds llama-cpp-python from source)"


def llama_cpp_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def cache_root() -> Path:
    if os.environ.get("MENS_CACHE"):
        return Path(os.environ["MENS_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "mens"


def converter_dir(fetch: bool = True) -> Path:
    """The folder holding llama.cpp's converters (see the module doc for the order)."""
    env = os.environ.get("MENS_LLAMA_CPP")
    if env:
        if not (Path(env) / CONVERTER).is_file():
            raise MensError(f"MENS_LLAMA_CPP has no {CONVERTER}", env, "point it at a llama.cpp checkout, or unset it")
        return Path(env)
    version = llama_cpp_version()
    if version is None:
        raise MensError("GGUF export needs llama-cpp-python (its converter and quantizer)", "mens export",
                        _INSTALL)
    cached = cache_root() / f"llama.cpp-{version}"
    if (cached / CONVERTER).is_file():
        return cached
    if not fetch:
        raise MensError("llama.cpp's converter is not in the cache", str(cached), "run mens export once online")
    return _fetch_sdist(version, cached)


def _fetch_sdist(version: str, cached: Path) -> Path:
    say(f"export: fetching llama.cpp's converter (llama-cpp-python {version} sdist) into {cached}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                               "-d", tmp, f"llama-cpp-python=={version}"],
                              capture_output=True, text=True)
        sdists = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        if proc.returncode or not sdists:
            last = (proc.stderr.strip().splitlines() or ["no sdist"])[-1][:160]
            raise MensError(f"cannot fetch the llama-cpp-python {version} sdist: {last}", "pip download",
                            "check your network, or set MENS_LLAMA_CPP to a llama.cpp checkout")
        out = Path(tmp) / "converter"
        with tarfile.open(sdists[0]) as tar:
            for member in tar.getmembers():
                rel = member.name.split("/vendor/llama.cpp/", 1)[-1] if "/vendor/llama.cpp/" in member.name else None
                if rel and (rel in _SDIST_KEEP or rel.startswith(tuple(k for k in _SDIST_KEEP if k.endswith("/")))):
                    member.name = rel
                    tar.extract(member, out, filter="data")
        if not (out / CONVERTER).is_file():
            raise MensError(f"the llama-cpp-python {version} sdist has no vendor/llama.cpp/{CONVERTER}",
                            str(sdists[0]), "set MENS_LLAMA_CPP to a llama.cpp checkout")
        os.replace(out, cached)
    return cached


# ---------------------------------------------------------------- the tokenizer llama.cpp will rebuild

def gguf_tokenizer_kind(model_dir: str | Path) -> str | None:
    """Why llama.cpp cannot rebuild this tokenizer (a one-line reason), or None when it can try.
    Also returns the pre-tokenizer mens may name for the converter: see pretokenizer_fallback."""
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        return None  # SentencePiece (tokenizer.model) or a hub layout: the converter decides
    tok = json.loads(path.read_text(encoding="utf-8"))
    model = (tok.get("model") or {}).get("type")
    if model == "WordLevel":
        return ("its tokenizer is a WordLevel vocabulary (the scratch model's VoxTokenizer), which llama.cpp "
                "has no tokenizer type for")
    return None


# The split regexes of llama.cpp's BPE pre-tokenizers mens can recognise in a tokenizer.json
# (tokenizers' Split + ByteLevel(use_regex=False), as transformers writes Qwen2's and Llama 3's).
_SPLIT_PRETOKENIZERS = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+": "qwen2",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
    r"\s+(?!\S)|\s+": "llama-bpe",
    # Qwen3.5's (transformers' Qwen3_5Tokenizer writes it whatever the vocabulary): letters with their marks
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+": "qwen35",
}


def pretokenizer_fallback(model_dir: str | Path) -> str | None:
    """The llama.cpp pre-tokenizer that splits text exactly as this tokenizer.json does — `gpt-2`
    for a lone ByteLevel with its regex, `qwen2`/`llama-bpe`/`qwen35` for their Split regexes — so a
    vocabulary the converter has no fingerprint for (one trained by mens or a user) still
    converts; None when mens cannot tell (the converter's own check then decides)."""
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        return None
    pre = json.loads(path.read_text(encoding="utf-8")).get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space", False):
        return "gpt-2"
    steps = pre.get("pretokenizers") or []
    if pre.get("type") == "Sequence" and len(steps) == 2 and steps[0].get("type") == "Split" \
            and steps[1].get("type") == "ByteLevel" and not steps[1].get("use_regex", True) \
            and str(steps[0].get("behavior")).lower() == "isolated" and not steps[0].get("invert"):
        return _SPLIT_PRETOKENIZERS.get((steps[0].get("pattern") or {}).get("Regex"))
    return None


# ---------------------------------------------------------------- convert, quantize, read back

def _run_converter(conv: Path, script: str, args: list[str], pre: str | None, what: str,
                   no_mtp: bool = False) -> None:
    cmd = [sys.executable, "-m", "mens.export.convert_runner", str(conv), script]
    cmd += (["--pre", pre] if pre else []) + (["--no-mtp"] if no_mtp else []) + ["--"] + args
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode:
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        mine = [ln.split("mens-convert-error: ", 1)[1] for ln in lines if "mens-convert-error: " in ln]
        reason = (mine or lines or ["no output"])[-1].strip()[:240]
        if "pre-tokenizer was not recognized" in reason:  # llama.cpp knows tokenizers by a hash of how they split
            raise MensError(f"llama.cpp cannot convert {what}: its tokenizer splits text by a rule llama.cpp "
                            "does not know (a mens scratch model's learned BPE keeps names whole, a rule of its "
                            "own)", script, "serve it with `mens serve` (its own engine) instead; see docs/export.md")
        raise MensError(f"llama.cpp's converter cannot convert {what}: {reason}", script,
                        "see docs/export.md (supported architectures and tokenizers)")


def convert(model_dir: Path, out: Path, outtype: str) -> None:
    """`convert_hf_to_gguf.py MODEL --outfile OUT --outtype f16|q8_0|f32`, for a model transformers
    saved (mens merge), so without multi-token-prediction weights (convert_runner's --no-mtp)."""
    why = gguf_tokenizer_kind(model_dir)
    if why:
        raise MensError(f"cannot export to GGUF: {why}", str(model_dir),
                        "train the scratch model with --scratch-vocab N (a byte-level BPE), or fine-tune a "
                        "Llama/Qwen2/GPT-2 base")
    _run_converter(converter_dir(), CONVERTER, [str(model_dir), "--outfile", str(out), "--outtype", outtype],
                   pretokenizer_fallback(model_dir), "the model", no_mtp=True)


def converter_architectures(conv: Path) -> frozenset[str] | None:
    """The architectures llama.cpp's converter has a class for: the keys of `TEXT_MODEL_MAP` in its
    `conversion/__init__.py` (what its `get_model_class` looks a name up in), read as a literal
    rather than imported, as importing the converter imports torch (~5 s). None if the file has
    no such table (a converter of another layout decides for itself)."""
    import ast

    try:
        tree = ast.parse((conv / "conversion" / "__init__.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == "TEXT_MODEL_MAP" for t in targets) and node.value is not None:
            try:
                return frozenset(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None


def check_converts(model_dir: Path) -> None:
    """Refuse, in one line naming the family, a model whose architecture llama.cpp's converter has
    no class for — asked of the converter's own table, before anything is merged."""
    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    arch = (cfg.get("architectures") or [None])[0]
    known = converter_architectures(converter_dir())
    if arch is None or known is None or arch in known:
        return   # nothing to ask by, or the converter decides
    raise MensError(f"cannot export {cfg.get('model_type', arch)} models to GGUF: llama.cpp's converter has "
                    f"no support for {arch}", str(model_dir),
                    "serve it with `mens serve` (its own engine) instead; see docs/export.md")


def convert_lora(adapter_dir: Path, base_dir: Path, out: Path, upstream_model_id: str | None = None) -> None:
    """`convert_lora_to_gguf.py ADAPTER --base BASE --outfile OUT --outtype f16`, over a clean copy
    of the adapter (clean_adapter_copy), so no local path of this machine goes into the file."""
    with tempfile.TemporaryDirectory(prefix=".mens-lora-", dir=out.parent) as tmp:
        clean = clean_adapter_copy(adapter_dir, Path(tmp), upstream_model_id)
        _run_converter(converter_dir(), LORA_CONVERTER,
                       [str(clean), "--base", str(base_dir), "--outfile", str(out), "--outtype", "f16"],
                       pretokenizer_fallback(base_dir), "the adapter")


def clean_adapter_copy(adapter_dir: Path, dest: Path, upstream_model_id: str | None) -> Path:
    """`dest/<run name>/`: the adapter as the LoRA converter should see it. The converter takes the
    GGUF's `general.base_model.*` and tags from the folder's README.md (PEFT writes the local base
    path there as `base_model`) and may read adapter_config.json's `base_model_name_or_path`: here
    both name the upstream Hub id, or no base at all when it is unknown. The weights are linked."""
    clean = dest / adapter_dir.name
    clean.mkdir()
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text(encoding="utf-8"))
    if upstream_model_id:
        cfg["base_model_name_or_path"] = upstream_model_id
    else:
        cfg.pop("base_model_name_or_path", None)
    (clean / "adapter_config.json").write_text(json.dumps(cfg, indent=2), encoding="utf-8")
    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        if (adapter_dir / name).is_file():
            try:
                os.symlink((adapter_dir / name).resolve(), clean / name)
            except OSError:  # no symlinks here (some Windows setups): a copy
                shutil.copyfile(adapter_dir / name, clean / name)
    card = ["---", "library_name: peft"] + ([f"base_model: {upstream_model_id}"] if upstream_model_id else [])
    (clean / "README.md").write_text("\n".join(card + ["tags: [mens, lora]", "---", ""]), encoding="utf-8")
    return clean


def quantize(src: Path, dst: Path, quant: str) -> None:
    """llama.cpp's quantizer (llama-cpp-python's `llama_model_quantize`) for the k-quants."""
    import ctypes

    try:
        import llama_cpp
    except ImportError:
        raise MensError(f"--quant {quant} needs llama-cpp-python's quantizer", "--quant", _INSTALL) from None
    ftype = {"q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}[quant]
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0 or not dst.is_file():
        raise MensError(f"llama.cpp's quantizer failed (code {rc})", str(src), "try --quant q8_0 or f16")


@dataclass
class GGUFInfo:
    arch: str
    file_type: int | None
    chat_template: str | None
    eos_id: int | None
    eot_id: int | None
    tokens: list[str]
    context_length: int | None = None
    sliding_window: int | None = None


def read_info(path: str | Path) -> GGUFInfo:
    """The metadata export checks, read with the `gguf` package."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))

    def value(key):
        field = reader.get_field(key)
        return None if field is None else field.contents()

    arch = value("general.architecture")
    return GGUFInfo(arch=arch, file_type=value("general.file_type"),
                    chat_template=value("tokenizer.chat_template"), eos_id=value("tokenizer.ggml.eos_token_id"),
                    eot_id=value("tokenizer.ggml.eot_token_id"), tokens=list(value("tokenizer.ggml.tokens") or []),
                    context_length=value(f"{arch}.context_length"),
                    sliding_window=value(f"{arch}.attention.sliding_window"))


# ---------------------------------------------------------------- sliding windows in llama.cpp

# llama.cpp architectures whose runtime attends within `{arch}.attention.sliding_window` on the
# layers the file marks, each proven by its family's test (tests/export/test_export_families.py).
# The others attend to every token: llama (Mistral's converter class), starcoder2, and phi3,
# whose window llama.cpp turns off.
WINDOWED_ARCHS = frozenset({"gemma2", "gemma3", "gpt-oss"})


def sliding_layers(config) -> tuple[int | None, list[bool]]:
    """(the window, which layers attend within it) as transformers builds the model's cache;
    (None, []) for a model without a window."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicSlidingWindowLayer

    layers = DynamicCache(config=config).layers
    sliding = [isinstance(layer, DynamicSlidingWindowLayer) for layer in layers]
    windows = {layer.sliding_window for layer in layers if isinstance(layer, DynamicSlidingWindowLayer)}
    return (min(windows) if windows else None), (sliding if windows else [])


def window_metadata(model_dir: Path, info: GGUFInfo) -> tuple[dict, str | None]:
    """The metadata that keeps the model's sliding window right in llama.cpp → ({key: value},
    a warning or None). Where llama.cpp keeps windows: which layers slide, from the model's
    config (the converter leaves that to llama.cpp's guess per family — every sixth layer full
    for Gemma 3 —, which a model with another layout does not follow). Elsewhere a window
    shorter than the context cannot be kept, so the context is cut to the window: within it,
    attending to every token is the same math."""
    from gguf import GGUFValueType
    from gguf.scripts.gguf_new_metadata import MetadataDetails
    from transformers import AutoConfig

    window, sliding = sliding_layers(AutoConfig.from_pretrained(model_dir))
    if window is None:
        return {}, None
    if info.arch in WINDOWED_ARCHS:
        pattern = MetadataDetails(GGUFValueType.ARRAY, sliding, sub_type=GGUFValueType.BOOL)
        return {f"{info.arch}.attention.sliding_window_pattern": pattern}, None
    if info.context_length is None or info.context_length <= window:
        return {}, None
    return ({f"{info.arch}.context_length": MetadataDetails(GGUFValueType.UINT32, window)},
            f"export: warning: llama.cpp's {info.arch} models attend to every token, not within this model's "
            f"sliding window of {window}: the GGUF's context is cut to {window} tokens (was "
            f"{info.context_length}), where both are the same")


def rewrite_metadata(src: Path, dst: Path, chat_template: str, eot_id: int | None, extra: dict) -> bool:
    """Copy `src` to `dst` with the chat template and end-of-turn token set, and the `extra`
    keys (window_metadata) — gguf's own gguf_new_metadata; False (nothing written) when the
    file already says all of it."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    info = read_info(src)
    new = dict(extra)
    if info.chat_template != chat_template:
        new[gguf.Keys.Tokenizer.CHAT_TEMPLATE] = MetadataDetails(gguf.GGUFValueType.STRING, chat_template)
    if eot_id is not None and eot_id not in (info.eot_id, info.eos_id):
        new[gguf.Keys.Tokenizer.EOT_ID] = MetadataDetails(gguf.GGUFValueType.UINT32, eot_id)
    if not new:
        return False
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch=info.arch, endianess=reader.endianess)
    copy_with_new_metadata(reader, writer, new, [])
    return True
