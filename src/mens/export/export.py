"""`mens export RUN_OR_MODEL --gguf OUT.gguf`: merge (mens.export.merge), convert with llama.cpp's
converter (mens.export.gguf), quantize when asked, embed the chat template and the end-of-turn
token mens stops on (mens.hf.stop_token_ids), and optionally write the adapter alone as a GGUF
LoRA and an Ollama Modelfile. Every output is written to a temp name and renamed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mens.errors import MensError
from mens.progress import say, warn

_CONVERTER_OUTTYPE = {"f16": "f16", "q8_0": "q8_0", "q4_k_m": "f16"}  # q4_k_m: f16 first, then llama.cpp quantizes


@dataclass
class ExportReport:
    source: str
    gguf: str
    quant: str
    arch: str
    size_bytes: int
    chat_template: str          # "chatml" or "model's own"
    stop_tokens: list[str] = field(default_factory=list)
    lora_gguf: str | None = None
    modelfile: str | None = None
    seconds: float = 0.0


def check_export_args(source: Path, out: Path, quant: str, lora_gguf: Path | None, ollama_dir: Path | None,
                      upstream_model_id: str | None = None) -> None:
    """Everything export can check before it loads a weight or fetches the converter."""
    from mens.hf import ADAPTER_CONFIG, check_files, is_adapter_run
    from mens.train.preflight import check_writable_dir

    from mens.export.gguf import QUANTS, gguf_tokenizer_kind

    if source.is_file():
        raise MensError("is a file, not a run or model directory", str(source), "give a mens run dir or a model dir")
    if not source.is_dir():
        raise MensError("run or model directory not found", str(source), "give a mens run dir or a model dir")
    if not (source / "config.json").is_file() and not is_adapter_run(source):
        raise MensError(f"not a run or model directory (no {ADAPTER_CONFIG} or config.json)", str(source),
                        "give the --output-dir of mens train, or a merged model dir")
    if quant not in QUANTS:
        raise MensError(f"unknown --quant {quant!r}", "--quant", f"use one of {', '.join(QUANTS)}")
    for flag, path in (("--gguf", out), ("--lora-gguf", lora_gguf)):
        if path is None:
            continue
        if path.suffix != ".gguf":
            raise MensError(f"{flag} must name a .gguf file", str(path), "e.g. model.gguf")
        if path.exists():
            raise MensError(f"{flag} already exists", str(path), "choose a new file name or remove it")
        check_writable_dir(path.parent, flag)
    if lora_gguf is not None and not is_adapter_run(source):
        raise MensError("--lora-gguf needs a run with an adapter (adapter_config.json)", str(source),
                        "give a lora/qlora run, or leave --lora-gguf out")
    if lora_gguf is not None and lora_gguf.resolve() == out.resolve():
        raise MensError("--lora-gguf is the same file as --gguf", str(lora_gguf), "give two file names")
    if upstream_model_id is not None:
        from mens.export.push import _is_local

        if _is_local(upstream_model_id):
            raise MensError(f"--upstream-model-id {upstream_model_id!r} is not a Hub id", "--upstream-model-id",
                            "write ORG/NAME as on huggingface.co")
    if ollama_dir is not None:
        if ollama_dir.is_file():
            raise MensError("--ollama is a file, not a folder", str(ollama_dir), "give a folder for the Modelfile")
        if (ollama_dir / "Modelfile").exists():
            raise MensError("--ollama folder already has a Modelfile", str(ollama_dir), "choose another folder")
    check_files(source)
    tok_dir = source if (source / "tokenizer.json").is_file() else None
    if tok_dir is None and is_adapter_run(source):
        from mens.hf import adapter_base

        tok_dir = Path(adapter_base(source))
    why = gguf_tokenizer_kind(tok_dir) if tok_dir is not None else None
    if why:
        raise MensError(f"cannot export to GGUF: {why}", str(source),
                        "train the scratch model with --scratch-vocab N (a byte-level BPE), or fine-tune a "
                        "Llama/Qwen2/GPT-2 base")


def _stop_tokens(model_dir: Path) -> tuple[list[int], list[str], object]:
    """The ids (and texts) mens stops on for the merged model: mens.hf.stop_token_ids."""
    from types import SimpleNamespace

    from transformers import GenerationConfig

    from mens.chat_template import stop_token_ids
    from mens.hf import load_tokenizer

    tok = load_tokenizer(model_dir)
    try:
        gen = GenerationConfig.from_pretrained(model_dir)
    except OSError:
        gen = None
    ids = stop_token_ids(SimpleNamespace(generation_config=gen), tok)
    return ids, [tok.convert_ids_to_tokens(i) for i in ids], tok


def _converter_ready(model_dir: Path) -> None:
    """Keys the converter reads that transformers no longer writes (GPT-2's `n_ctx` = its
    `n_positions`), added to mens's own temporary merged copy."""
    path = model_dir / "config.json"
    cfg = json.loads(path.read_text())
    if cfg.get("model_type") == "gpt2" and "n_ctx" not in cfg and "n_positions" in cfg:
        cfg["n_ctx"] = cfg["n_positions"]
        path.write_text(json.dumps(cfg, indent=2))


def export(source: str | Path, out: str | Path, *, quant: str = "f16", lora_gguf: str | Path | None = None,
           ollama_dir: str | Path | None = None, system: str | None = None,
           merge_dtype: str = "bf16", upstream_model_id: str | None = None) -> ExportReport:
    """`upstream_model_id`: the base's Hub id, the only base the files name (else the manifest's
    provenance, else none: never a local path)."""
    from mens.export import gguf
    from mens.export.merge import merge_run
    from mens.export.ollama import default_system, is_chatml, write_modelfile
    from mens.export.push import upstream_id
    from mens.hf import adapter_base

    start = time.perf_counter()
    source, out = Path(source), Path(out)
    lora_gguf = Path(lora_gguf) if lora_gguf else None
    ollama_dir = Path(ollama_dir) if ollama_dir else None
    check_export_args(source, out, quant, lora_gguf, ollama_dir, upstream_model_id)
    upstream = upstream_id(source, upstream_model_id)
    gguf.converter_dir()                          # fetched (or a clear error) before the merge
    gguf.check_converts(source if (source / "config.json").is_file() else Path(adapter_base(source)))
    if quant == "q4_k_m" and importlib.util.find_spec("llama_cpp") is None:
        raise MensError("--quant q4_k_m needs llama.cpp's quantizer (llama-cpp-python)", "--quant",
                        "pip install 'mens[export]', or use --quant q8_0 or f16")

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".mens-export-", dir=out.parent) as tmp_str:
        tmp = Path(tmp_str)
        merged = tmp / "merged"
        say(f"export: merging {source}")
        merge_run(source, merged, dtype=merge_dtype, upstream_model_id=upstream)
        _converter_ready(merged)
        ids, stops, tokenizer = _stop_tokens(merged)
        chatml = is_chatml(tokenizer)
        if chatml and system is None:  # the template's own default, as the model was trained
            system = default_system(tokenizer)
        say(f"export: converting to GGUF ({_CONVERTER_OUTTYPE[quant]})")
        converted = tmp / "converted.gguf"
        gguf.convert(merged, converted, _CONVERTER_OUTTYPE[quant])
        if quant == "q4_k_m":
            say("export: quantizing to q4_k_m")
            gguf.quantize(converted, tmp / "quantized.gguf", quant)
            converted = tmp / "quantized.gguf"
        eot = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in stops else (ids[0] if ids else None)
        window, note = gguf.window_metadata(merged, gguf.read_info(converted))
        if note:
            warn(note)
        final = tmp / "final.gguf"
        if not gguf.rewrite_metadata(converted, final, tokenizer.chat_template, eot, window):
            final = converted
        info = gguf.read_info(final)
        if lora_gguf is not None:
            say("export: converting the adapter to a GGUF LoRA")
            gguf.convert_lora(source, Path(adapter_base(source)), tmp / "adapter.gguf", upstream)
            os.replace(tmp / "adapter.gguf", lora_gguf)
        os.replace(final, out)
    modelfile = None
    if ollama_dir is not None:
        modelfile = str(write_modelfile(ollama_dir, out, chatml=chatml, stops=stops, system=system))
    return ExportReport(source=str(source), gguf=str(out), quant=quant, arch=info.arch,
                        size_bytes=out.stat().st_size, chat_template="chatml" if chatml else "model's own",
                        stop_tokens=stops, lora_gguf=str(lora_gguf) if lora_gguf else None, modelfile=modelfile,
                        seconds=round(time.perf_counter() - start, 2))


def format_report(report: ExportReport) -> str:
    lines = [f"exported {report.source} → {report.gguf} ({report.arch}, {report.quant}, "
             f"{report.size_bytes / 2**20:.1f} MiB, {report.seconds:.1f}s)",
             f"  chat template: {report.chat_template}; stops on: {', '.join(report.stop_tokens)}"]
    if report.lora_gguf:
        lines.append(f"  adapter alone: {report.lora_gguf}")
    if report.modelfile:
        lines.append(f"  Ollama: ollama create NAME -f {report.modelfile}")
    return "\n".join(lines)


def report_json(report: ExportReport) -> str:
    return json.dumps(asdict(report), indent=2)
