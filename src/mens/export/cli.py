"""`mens merge` (an HF model dir), `mens export` (GGUF, GGUF LoRA, Ollama Modelfile) and `mens push`
(the Hugging Face Hub).
Light at import time: everything heavy loads in the handlers."""

from __future__ import annotations

import argparse


def register(sub) -> None:
    from mens.flags import add_flag, dtype_value

    p = sub.add_parser("merge", help="fold a run's adapter into its full-precision base → HF model dir",
                       description="Fold a run's adapter into the ORIGINAL full-precision base (QLoRA too) and "
                       "write a complete HF model dir atomically; reports the logit difference vs the adapter.")
    p.add_argument("run", help="run dir of mens train (adapter_config.json + training_manifest.json)")
    add_flag(p, "--output-dir", "-o", required=True, help="output model directory (must not exist or be empty)")
    add_flag(p, "--dtype", default="bf16", type=dtype_value, metavar="{bf16,fp16,fp32}",
             help="saved weight dtype (bf16; f16 and f32 read as fp16 and fp32)")
    p.add_argument("--max-shard-size", default="2GB", help="safetensors shard size (2GB)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_merge)

    e = sub.add_parser("export", help="merge a run and convert it to GGUF for llama.cpp / Ollama / LM Studio",
                       description="Merge RUN_OR_MODEL (as `mens merge` does) and convert it to GGUF with "
                       "llama.cpp's own converter, the chat template and end-of-turn token embedded. Needs "
                       "`pip install 'mens[export]'`; see docs/export.md.")
    e.add_argument("source", metavar="RUN_OR_MODEL", help="a mens run dir, a merged model dir or an HF model dir")
    e.add_argument("--gguf", required=True, metavar="OUT.gguf", help="the GGUF file to write")
    e.add_argument("--quant", default="f16", help="f16 (default), q8_0, or q4_k_m (llama.cpp's quantizer)")
    e.add_argument("--lora-gguf", metavar="ADAPTER.gguf", help="also write the adapter alone as a GGUF LoRA")
    e.add_argument("--ollama", metavar="DIR", help="also write DIR/Modelfile for `ollama create`")
    add_flag(e, "--system-prompt", help="the Modelfile's SYSTEM prompt")
    add_flag(e, "--merge-dtype", default="bf16", type=dtype_value, metavar="{bf16,fp16,fp32}",
             help="the dtype of the intermediate merged model (bf16)")
    add_flag(e, "--upstream-model-id",
             help="the Hub id of the base, named in the GGUFs' metadata (else the manifest's provenance; "
             "a local path is never written)")
    e.add_argument("--json", action="store_true", help="print the export report as JSON")
    e.set_defaults(func=_export)

    p = sub.add_parser("push", help="upload a run (adapter) or a merged model to the Hugging Face Hub",
                       description="Upload RUN_OR_MERGED to the Hub with a model card (the Hub's metadata "
                       "header, bench and gate results) and the files a loader needs, nothing else. "
                       "Token: HF_TOKEN or `hf auth login`. See docs/export.md.")
    p.add_argument("source", metavar="RUN_OR_MERGED", help="a mens run dir (adapter or full) or a merged model dir")
    p.add_argument("--repo", required=True, metavar="USER/NAME", help="the Hub repository")
    p.add_argument("--private", action="store_true", help="create the repository private")
    add_flag(p, "--upstream-model-id",
             help="the Hub id of the base model (else the manifest's provenance or base id)")
    p.add_argument("--dry-run", metavar="DIR", help="write the exact files to DIR instead of uploading")
    p.set_defaults(func=_push)


def _merge(args: argparse.Namespace) -> int:
    from mens.export.merge import format_report, merge_run, report_json

    report = merge_run(args.run, args.output_dir, dtype=args.dtype, max_shard_size=args.max_shard_size)
    print(report_json(report) if args.json else format_report(report))
    return 0


def _export(args: argparse.Namespace) -> int:
    from mens.export.export import export, format_report, report_json

    report = export(args.source, args.gguf, quant=args.quant, lora_gguf=args.lora_gguf, ollama_dir=args.ollama,
                    system=args.system_prompt, merge_dtype=args.merge_dtype,
                    upstream_model_id=args.upstream_model_id)
    print(report_json(report) if args.json else format_report(report))
    return 0


def _push(args: argparse.Namespace) -> int:
    from mens.export.push import push

    print(push(args.source, args.repo, private=args.private, upstream_model_id=args.upstream_model_id,
               dry_run=args.dry_run))
    return 0
