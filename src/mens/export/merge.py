"""`mens merge RUN --output-dir DIR`: fold a run's adapter into its base and write a complete HF model dir.

The adapter is folded into the ORIGINAL full-precision base weights, also for QLoRA runs: the
NF4 copy the adapter was trained against is only a training-time stand-in, and dequantising it
would bake its rounding into every weight. The report gives the largest logit difference
between adapter-on-base and merged on a few prompts (the fold's own error), and for QLoRA runs
also against the adapter on the NF4 base it was trained on (the quantisation gap), when the
manifest's `quantization` says the adapter was trained on one.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mens.errors import MensError
from mens.chat_template import CHATML_TEMPLATE, generation_config
from mens.hf import (adapter_base, is_adapter_run, is_nf4, load_causal_lm, load_tokenizer, read_manifest, torch_dtype,
                    write_checksums)
from mens.inference import load_peft
from mens.progress import say
from mens.files import atomic_path, write_json_atomic

__all__ = ["CHATML_TEMPLATE", "MergeReport", "format_report", "merge_run", "report_json"]
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")  # what PeftModel.from_pretrained reads
PROBE_PROMPTS = (
    "Write a Vox function that adds two numbers.",
    "fn main() {\n    let x = 1\n",
    "Explain how match works in Vox.",
)


@dataclass
class MergeReport:
    run: str
    out: str
    base: str
    backend: str
    dtype: str
    max_logit_diff: float                  # adapter on the fp base vs merged (fp32): the fold's error
    max_logit_diff_saved: float            # adapter on the fp base vs the saved model in `dtype`
    max_logit_diff_vs_nf4: float | None = None  # QLoRA only: adapter on the NF4 base vs merged
    adapter: bool = True                   # False: a full or scratch run, re-saved (nothing to fold)
    shards: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _logits(model, tokenizer, prompts):
    import torch

    out = []
    with torch.no_grad():
        for p in prompts:
            ids = tokenizer(p, return_tensors="pt").input_ids.to(model.device)
            out.append(model(input_ids=ids).logits.float().cpu())
    return out


def _max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def _model_card(report: MergeReport, manifest: dict, upstream_model_id: str | None = None) -> str:
    prov = manifest.get("provenance") or {}
    # `base_model` is Hub metadata (llama.cpp's converter turns it into a huggingface.co URL in
    # the GGUF): the upstream id when known, never a local path of this machine.
    base = manifest.get("base_model") or {}
    base_id = upstream_model_id or prov.get("upstream_model_id") \
        or (manifest.get("hyperparameters") or {}).get("upstream_model_id") \
        or (base.get("id") if not base.get("path") else None)  # `id` is the directory for a local base
    # The body names the run and the base without this machine's paths either (the folder is
    # what gets uploaded or served elsewhere): the run by its folder name, the base by its Hub id.
    run_name, base_name = Path(report.run).name, base_id or f"…/{Path(report.base).name}"
    # The header as `mens push` writes it (mens.evaluate.card.hub_metadata): huggingface_hub's
    # ModelCardData quotes what YAML needs, and the licence is the Hub's lower-case id.
    from huggingface_hub import ModelCardData

    licence = prov.get("license") or manifest.get("license")
    meta = ModelCardData(base_model=base_id, library_name="transformers", tags=["mens", "merged"],
                         license=str(licence).lower() if licence else None)
    lines = ["---", meta.to_yaml(), "---", "", f"# {Path(report.out).name}", ""]
    if report.adapter:
        lines += [f"Merged by `mens merge` from the {report.backend} run `{run_name}`: the adapter is folded "
                  f"into the full-precision weights of `{base_name}` and saved in {report.dtype}.", "",
                  f"- largest logit difference, adapter vs merged (fp32): {report.max_logit_diff:.2e}",
                  f"- largest logit difference, adapter vs saved {report.dtype} model: {report.max_logit_diff_saved:.2e}"]
    else:
        lines += [f"Saved by `mens merge` from the {report.backend} run `{run_name}` (a whole model: no "
                  f"adapter to fold) in {report.dtype}.", "",
                  f"- largest logit difference, run vs saved {report.dtype} model: {report.max_logit_diff_saved:.2e}"]
    if report.max_logit_diff_vs_nf4 is not None:
        lines.append(f"- largest logit difference, adapter on the NF4 training base vs merged: "
                     f"{report.max_logit_diff_vs_nf4:.2e}")
    if prov.get("attribution_required"):
        lines += ["", f"Attribution required by the upstream license of {prov.get('upstream_model_id') or base_name}."]
    results = manifest.get("results") or {}
    if results:
        lines += ["", "## Training results", ""] + [f"- {k}: {v}" for k, v in results.items()]
    lines += ["", "Load it with `AutoModelForCausalLM.from_pretrained(path)`, or serve it with "
              "`mens serve PATH` or vLLM (`vllm serve PATH`).", ""]
    return "\n".join(lines)


def merge_run(run: str | Path, out: str | Path, *, dtype: str = "bf16", max_shard_size: str = "2GB",
              prompts: tuple[str, ...] = PROBE_PROMPTS, upstream_model_id: str | None = None) -> MergeReport:
    """Fold `run`'s adapter into its fp base, save to `out` atomically, and measure the difference.
    `upstream_model_id` (a Hub id) is the card's base_model, ahead of the manifest's."""
    import torch
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    run, out = Path(run), Path(out)
    check_merge_args(run, out, max_shard_size)
    manifest = read_manifest(run)
    backend = str(manifest.get("backend") or ("lora" if is_adapter_run(run) else "full"))
    target = torch_dtype(dtype, "cpu")
    if is_adapter_run(run):
        base = adapter_base(run)
        say(f"merge: loading the full-precision base {base}")
        tokenizer = load_tokenizer(run, base)
        model = load_peft(load_causal_lm(base, device="cpu", dtype=torch.float32), run)
        model.eval()
        reference = _logits(model, tokenizer, prompts)
        merged = model.merge_and_unload()
    else:  # scratch/full runs are already a whole model: re-save it as a clean, typed HF dir
        base = str(run)
        tokenizer = load_tokenizer(run)
        merged = load_causal_lm(str(run), device="cpu", dtype=torch.float32).eval()
        reference = _logits(merged, tokenizer, prompts)
    fold_diff = _max_diff(reference, _logits(merged, tokenizer, prompts))

    nf4_diff = None
    if is_nf4(manifest) and is_adapter_run(run):
        nf4_diff = _nf4_gap(run, base, tokenizer, prompts, reference_merged=_logits(merged, tokenizer, prompts))

    if tokenizer.chat_template is None:
        tokenizer.chat_template = CHATML_TEMPLATE
    merged.generation_config = generation_config(merged, tokenizer)
    merged.config.use_cache = True  # training saves `false` (no KV cache while it trains); this is for inference
    merged = merged.to(target)
    report = MergeReport(run=str(run), out=str(out), base=base, backend=backend, dtype=str(target).split(".")[-1],
                         max_logit_diff=fold_diff, max_logit_diff_saved=0.0, max_logit_diff_vs_nf4=nf4_diff,
                         adapter=is_adapter_run(run))
    with atomic_path(out) as tmp:
        tmp.mkdir()
        merged.save_pretrained(tmp, max_shard_size=max_shard_size)
        tokenizer.save_pretrained(tmp)
        keep_base_tokenizer_files(tmp, [str(run), base, *_manifest_base(manifest)])
        saved = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
        report.max_logit_diff_saved = _max_diff(reference, _logits(saved, tokenizer, prompts))
        report.shards = sorted(p.name for p in tmp.glob("*.safetensors"))
        if manifest:
            write_json_atomic(tmp / "training_manifest.json", manifest)
        report.seconds = round(time.perf_counter() - start, 2)
        (tmp / "README.md").write_text(_model_card(report, manifest, upstream_model_id))
        if (run / "MODEL_CARD.md").is_file():  # the run's own card (bench, gates) travels with it
            shutil.copyfile(run / "MODEL_CARD.md", tmp / "MODEL_CARD.md")
        write_json_atomic(tmp / "merge_report.json", asdict(report))
        write_checksums(tmp)  # every later load checks them (mens.hf.verify_checksums)
    return report


def _manifest_base(manifest: dict) -> list[str]:
    base = manifest.get("base_model")
    return [v for v in (base.get("path"), base.get("id")) if v] if isinstance(base, dict) else []


def _source_file(source: str, name: str) -> Path | None:
    """`name` in a local model folder, or in the Hub cache for a Hub id (never fetched)."""
    if Path(source).is_dir():
        return Path(source) / name if (Path(source) / name).is_file() else None
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(source, name)
    except ValueError:  # not a valid Hub id either
        return None
    return Path(found) if isinstance(found, str) else None


def _vocab(tokenizer_json: Path | None) -> dict | list | None:
    return json.loads(tokenizer_json.read_text(encoding="utf-8")).get("model", {}).get("vocab") if tokenizer_json \
        else None


def keep_base_tokenizer_files(out: Path, sources: list[str]) -> None:
    """Put back what transformers 5's tokenizer.save_pretrained leaves out of the base's tokenizer,
    from the first source (run, base) with the same vocabulary: the SentencePiece model
    (`tokenizer.model`), which llama.cpp's converter reads for Gemma 2, Phi-3 and the other
    SentencePiece families (it stopped on 'File not found: tokenizer.model'), and the tokenizer
    class the base names where transformers wrote its generic `TokenizersBackend` (the converter
    takes Phi-4's vocabulary as GPT-2's only by the name `GPT2Tokenizer`)."""
    vocab = _vocab(out / "tokenizer.json")
    config_path = out / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    for source in dict.fromkeys(sources):
        source_json = _source_file(source, "tokenizer.json")
        if source_json is not None and _vocab(source_json) != vocab:
            continue   # another vocabulary (a tokenizer the run trained): nothing of it applies
        sentencepiece = _source_file(source, "tokenizer.model")
        if sentencepiece is not None and not (out / "tokenizer.model").is_file():
            shutil.copyfile(sentencepiece, out / "tokenizer.model")
        source_config = _source_file(source, "tokenizer_config.json")
        named = json.loads(source_config.read_text(encoding="utf-8")).get("tokenizer_class") if source_config else None
        if named and named != "TokenizersBackend" and config.get("tokenizer_class") == "TokenizersBackend":
            config["tokenizer_class"] = named
            config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def check_merge_args(run: Path, out: Path, max_shard_size: str) -> None:
    """Everything merge can check before loading a weight: the run and its files (every JSON
    parses, every safetensors header is whole, the base's too), the output folder, the shard size."""
    import re

    from mens.hf import check_files
    from mens.train.preflight import check_writable_dir

    if run.is_file():
        raise MensError("is a file, not a run directory", str(run), "give the --output-dir of mens train")
    if not run.is_dir():
        raise MensError("run directory not found", str(run), "give the --output-dir of mens train")
    if not (run / "config.json").is_file() and not is_adapter_run(run):
        raise MensError("not a run or model directory (no adapter_config.json or config.json)", str(run),
                        "give the --output-dir of mens train")
    check_files(run)
    if is_adapter_run(run):
        if not any((run / name).is_file() for name in ADAPTER_WEIGHTS):
            raise MensError(f"no adapter weights ({ADAPTER_WEIGHTS[0]}) beside adapter_config.json", str(run),
                            "copy the whole run dir of mens train, or re-run mens train")
        check_files(adapter_base(run))
    if out.is_file():
        raise MensError("--output-dir is a file, not a folder", str(out), "give a new folder for the merged model")
    if out.is_dir() and any(out.iterdir()):
        raise MensError("output directory exists and is not empty", str(out), "choose a new --output-dir or remove it")
    if out.resolve() == run.resolve():
        raise MensError("--output-dir is the run directory", str(out), "give a new folder for the merged model")
    check_writable_dir(out.parent, "--output-dir")
    if not re.fullmatch(r"\d+\s*([KMGT]i?B)?", str(max_shard_size).strip(), re.I) or \
            not re.match(r"\s*[1-9]", str(max_shard_size)):
        raise MensError(f"bad --max-shard-size {max_shard_size!r}", "--max-shard-size",
                        "give a size such as 2GB, 500MB or a number of bytes")


def _nf4_gap(run: Path, base: str, tokenizer, prompts, reference_merged) -> float | None:
    """Logit gap between the adapter on the NF4 base it was trained on and the fp merge; None when
    bitsandbytes cannot quantise here."""
    try:
        quantised = load_causal_lm(base, device="cpu", dtype=None, nf4=True)
        model = load_peft(quantised, run).eval()
        return _max_diff(_logits(model, tokenizer, prompts), reference_merged)
    except (ImportError, RuntimeError, ValueError, MensError) as exc:
        say(f"merge: NF4 comparison skipped ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})")
        return None


def format_report(report: MergeReport) -> str:
    lines = [f"merged {report.backend} run {report.run} → {report.out} ({report.dtype}, {len(report.shards)} shard(s), "
             f"{report.seconds:.1f}s)"]
    if report.adapter:
        lines += [f"  max |logit diff| adapter vs merged (fp32): {report.max_logit_diff:.3e}",
                  f"  max |logit diff| adapter vs saved {report.dtype}: {report.max_logit_diff_saved:.3e}"]
    else:  # a full or scratch run has no adapter: only the re-save's rounding to report
        lines.append(f"  max |logit diff| run vs saved {report.dtype}: {report.max_logit_diff_saved:.3e}")
    if report.max_logit_diff_vs_nf4 is not None:
        lines.append(f"  max |logit diff| adapter on NF4 base vs merged: {report.max_logit_diff_vs_nf4:.3e}")
    return "\n".join(lines)


def report_json(report: MergeReport) -> str:
    return json.dumps(asdict(report), indent=2)
