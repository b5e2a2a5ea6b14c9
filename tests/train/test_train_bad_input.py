"""Bad input to `mens train | probe | status`: each case is one line `mens: error: … (where) —
what to do`, exit code 2, no traceback, and nothing written — every flag, config field, path and
model file is checked before a model is loaded or a run dir is made.

A case is (argv, exit code, a phrase the error line must contain). `{t}` is the case's folder,
holding what `inputs()` makes; `{model}` is a tiny model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bad_input import assert_one_line_error
from train_helpers import write_pairs

DEEP = "[" * 100_000
TASK = {"id": "t1", "prompt": "Write a Vox function that adds two numbers.", "expect_contains": ["fn"]}


def inputs(t: Path, model: Path, argv: str) -> None:
    write_pairs(t / "data", n=8)
    for name, data in {"empty": b"", "latin1": '{"prompt": "café", "response": "x"}\n'.encode("latin-1"),
                       "binary": b"\x00\x01\x02PK\x03\x04\xff\xfe" * 64, "deep": DEEP.encode() + b"\n",
                       "noresponse": b'{"prompt": "p"}\n'}.items():
        (t / f"data_{name}").mkdir()
        (t / f"data_{name}" / "train.jsonl").write_bytes(data)
    (t / "data_folder" / "train.jsonl").mkdir(parents=True)
    (t / "data_none").mkdir()
    (t / "adir").mkdir()
    (t / "afile").write_text("a file, not a folder\n")
    (t / "notrun").mkdir()
    (t / "notrun" / "notes.txt").write_text("mine")
    (t / "adapter").mkdir()
    (t / "adapter" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(model)}))
    (t / "bench.jsonl").write_text(json.dumps(TASK) + "\n")
    (t / "unclosed.jinja").write_text("{% for m in messages %}{{ m.content")
    (t / "raises.jinja").write_text("{{ raise_exception('no system role') }}")
    (t / "bench_empty.jsonl").write_text("")
    (t / "bench_latin1.jsonl").write_bytes('{"prompt": "café"}\n'.encode("latin-1"))
    for name, text in {"fast": b"lr: fast\n", "unknown": b"learning_rat: 0.1\n", "list": b"- lr\n",
                       "binary": b"lr: \xff\xfe\x00\n", "deep": ("lr: " + DEEP + "\n").encode(),
                       "malformed": b"lr: [unclosed\n", "steps": b"max_steps: -4\n", "betas": b"adam_beta1: 2\n",
                       "bf16": b"bf16: maybe\n", "epochs_inf": b"epochs: .inf\nmax_steps: null\n",
                       "preset": b"preset: huge\n", "twice": b"lr: 1.0e-4\nmax_steps: 3\nlr: 3.0e-3\n"}.items():
        (t / f"cfg_{name}.yaml").write_bytes(text)
    models = {"m_badconfig": ("config.json", b"{garbage"), "m_binaryconfig": ("config.json", b"\x00\xff" * 20),
              "m_truncated": ("model.safetensors", None), "m_badtokenizer": ("tokenizer.json", b"\x00\x01\x02"),
              "m_run": ("training_manifest.json", b'{"status": "completed", "backend": "full"}'),
              "m_badtemplate": ("chat_template.jinja", b"{% for m in messages %}{{ m.content"),
              "m_noconfig": ("config.json", "delete"), "m_notokenizer": ("tokenizer.json", "delete")}
    for name, (file, data) in models.items():
        if name in argv:
            shutil.copytree(model, t / name)
            target = t / name / file
            if data == "delete":
                target.unlink()
                if file == "tokenizer.json":
                    (t / name / "tokenizer_config.json").unlink()
            else:
                target.write_bytes(data if data is not None else target.read_bytes()[: target.stat().st_size // 2])
    runs = {"run_latin1tele": ("telemetry.jsonl", '{"event": "step", "loss": "café"}\n'.encode("latin-1")),
            "run_binarytele": ("telemetry.jsonl", b"\x00\xff\xfe\x01" * 50),
            "run_badmanifest": ("training_manifest.json", b"{not json"),
            "run_latin1manifest": ("training_manifest.json", '{"status": "café"}'.encode("latin-1")),
            "run_deepmanifest": ("training_manifest.json", DEEP.encode())}
    if "run_done" in argv:  # a finished run that --force-restart must keep until the new run's checks pass
        (t / "run_done").mkdir()
        (t / "run_done" / "training_manifest.json").write_text(json.dumps({"status": "completed"}))
        (t / "run_done" / "adapter_model.safetensors").write_bytes(b"the earlier run's adapter")
    for name, (file, data) in runs.items():
        if name in argv:
            (t / name).mkdir()
            (t / name / "training_manifest.json").write_text(json.dumps({"status": "running"}))
            (t / name / file).write_bytes(data)


T = ["train", "--model", "{model}", "--data-dir", "{t}/data", "--output-dir", "{t}/run", "--preset", "tiny",
     "--device", "cpu", "--max-steps", "2"]


def flag(*more: str) -> list[str]:
    return T + list(more)


def with_(name: str, value: str) -> list[str]:
    """T with one of its values replaced."""
    argv = list(T)
    argv[argv.index(name) + 1] = value
    return argv


NO_STEPS = T[:-2]
CASES = {
    # numbers: ranges checked by TrainConfig.validate
    "lr-zero": (flag("--lr", "0"), 2, "lr must be positive, got 0.0 (--lr)"),
    "lr-negative": (flag("--lr", "-0.0001"), 2, "lr must be positive"),
    "lr-inf": (flag("--lr", "inf"), 2, "lr must be a finite number, got inf"),
    "lr-nan": (flag("--lr", "nan"), 2, "lr must be positive, got nan"),
    "epochs-zero": (NO_STEPS + ["--epochs", "0"], 2, "epochs must be positive, got 0.0"),
    "epochs-inf": (NO_STEPS + ["--epochs", "inf"], 2, "epochs must be a finite number, got inf"),
    "max-steps-zero": (with_("--max-steps", "0"), 2, "max_steps must be >= 1, got 0 (--max-steps)"),
    "max-steps-negative": (with_("--max-steps", "-5"), 2, "max_steps must be >= 1, got -5"),
    "seq-len-zero": (flag("--seq-len", "0"), 2, "seq_len must be >= 1, got 0"),
    "micro-batch-zero": (flag("--micro-batch", "0"), 2, "micro_batch must be >= 1"),
    "grad-accum-negative": (flag("--grad-accum", "-2"), 2, "grad_accum must be >= 1"),
    "lora-r-zero": (flag("--lora-r", "0"), 2, "lora_r must be >= 1"),
    "lora-alpha-zero": (flag("--lora-alpha", "0"), 2, "lora_alpha must be >= 1"),
    "lora-dropout-one": (flag("--lora-dropout", "1"), 2, "lora_dropout must be in [0, 1), got 1.0"),
    "lora-dropout-negative": (flag("--lora-dropout", "-0.1"), 2, "lora_dropout must be in [0, 1)"),
    "val-split-one": (flag("--val-split", "1"), 2, "val_split must be in [0, 1)"),
    "warmup-negative": (flag("--warmup-steps", "-1"), 2, "warmup_steps must be >= 0"),
    "save-interval-negative": (flag("--save-interval", "-1"), 2, "save_interval must be >= 0"),
    "eval-interval-negative": (flag("--eval-interval", "-3"), 2, "eval_interval must be >= 0"),
    "keep-checkpoints-negative": (flag("--keep-checkpoints", "-1"), 2, "keep_checkpoints must be >= 0"),
    "bench-every-negative": (flag("--bench-every", "-1"), 2, "bench_every must be >= 0"),
    "bench-limit-zero": (flag("--bench-limit", "0"), 2, "bench_limit must be >= 1, got 0"),
    "bench-max-new-tokens-zero": (flag("--bench-max-new-tokens", "0"), 2, "bench_max_new_tokens must be >= 1, got 0"),
    "bench-batch-size-zero": (flag("--bench-batch-size", "0"), 2, "bench_batch_size must be >= 1, got 0"),
    "weight-decay-negative": (flag("--weight-decay", "-0.1"), 2, "weight_decay must be >= 0"),
    "max-grad-norm-negative": (flag("--max-grad-norm", "-1"), 2, "max_grad_norm must be >= 0"),
    "betas-one": (flag("--adam-betas", "0.9", "1.0"), 2, "adam_betas must be in [0, 1), got [0.9, 1.0]"),
    "betas-negative": (flag("--adam-betas", "-0.1", "0.9"), 2, "adam_betas must be in [0, 1)"),
    "seed-negative": (flag("--seed", "-1"), 2, "seed must be 0 to 2**32-1, got -1"),
    "seed-huge": (flag("--seed", str(2**40)), 2, "seed must be 0 to 2**32-1"),
    "min-rating-zero": (flag("--min-rating", "0"), 2, "min_rating must be 1-5, got 0"),
    "min-rating-six": (flag("--min-rating", "6"), 2, "min_rating must be 1-5, got 6"),
    "ce-last-k-zero": (flag("--ce-last-k", "0"), 2, "ce_last_k must be >= 1"),
    "tokens-per-pass-zero": (flag("--tokens-per-pass", "0"), 2, "tokens_per_pass must be >= 1"),
    "loss-chunk-zero": (flag("--loss-chunk", "0"), 2, "loss_chunk must be >= 1"),
    "log-interval-zero": (flag("--log-interval", "0"), 2, "log_interval must be >= 1"),
    "scratch-layers-zero": (flag("--backend", "scratch", "--scratch-layers", "0"), 2, "scratch_layers must be >= 1"),
    "scratch-dropout-high": (flag("--backend", "scratch", "--scratch-dropout", "1.5"), 2,
                             "scratch_dropout must be in [0, 1)"),
    "target-modules-empty": (flag("--target-modules", ","), 2, "target_modules is empty"),
    "curriculum-without-steps": (flag("--curriculum-data", "{t}/data"), 2,
                                 "curriculum_data and curriculum_steps go together"),
    "curriculum-steps-without-data": (flag("--curriculum-steps", "1"), 2,
                                      "curriculum_data and curriculum_steps go together"),
    "curriculum-steps-all": (flag("--curriculum-data", "{t}/data", "--curriculum-steps", "2"), 2,
                             "curriculum_steps (2) must be fewer than max_steps (2)"),
    "curriculum-lr-zero": (flag("--curriculum-lr", "0"), 2, "curriculum_lr must be > 0, got 0.0"),
    "curriculum-data-missing": (flag("--curriculum-data", "{t}/nothere", "--curriculum-steps", "1"), 2,
                                "data directory not found ({t}/nothere) — pass --curriculum-data DIR"),
    "curriculum-data-empty": (flag("--curriculum-data", "{t}/data_empty", "--curriculum-steps", "1"), 2,
                              "train.jsonl holds no training pairs"),
    # argparse: one line naming the command, not a usage block
    "raw-text-file": (flag("--raw-text", "{t}/afile"), 2, "raw-text directory '{t}/afile' is a file, not a folder"),
    "raw-text-missing": (flag("--raw-text", "{t}/nowhere"), 2, "raw-text directory '{t}/nowhere' does not exist"),
    "lr-not-a-number": (flag("--lr", "fast"), 2, "argument --lr: invalid float value: 'fast' (mens train)"),
    "max-steps-not-int": (with_("--max-steps", "many"), 2, "argument --max-steps: invalid int value: 'many'"),
    "backend-unknown": (flag("--backend", "magic"), 2, "argument --backend: invalid choice: 'magic'"),
    "device-unknown": (with_("--device", "tpu"), 2, "argument --device: invalid choice: 'tpu'"),
    "dtype-unknown": (flag("--dtype", "int8"), 2, "argument --dtype: invalid choice: 'int8'"),
    "betas-one-value": (T + ["--adam-betas", "0.9"], 2, "argument --adam-betas: expected 2 arguments"),
    "unknown-flag": (flag("--lr-rate", "1"), 2, "unrecognized arguments: --lr-rate 1 (mens)"),
    "preset-unknown": (with_("--preset", "huge"), 2, "unknown preset 'huge' (--preset)"),
    # device
    "device-cuda-absent": (with_("--device", "cuda"), 2, "--device cuda but no CUDA device is available (--device)"),
    "device-mps-absent": (with_("--device", "mps"), 2, "--device mps but MPS is not available"),
    # the run dir
    "output-is-file": (with_("--output-dir", "{t}/afile"), 2, "output path exists and is not a directory ({t}/afile)"),
    "output-under-file": (with_("--output-dir", "{t}/afile/run"), 2,
                          "{t}/afile is a file, not a folder (--output-dir {t}/afile/run)"),
    "output-read-only": (with_("--output-dir", "/proc/mens-run"), 2, "cannot write in /proc"),
    "output-not-a-run": (with_("--output-dir", "{t}/notrun"), 2,
                         "output directory is not empty and is not a mens run (holds notes.txt…)"),
    "output-is-the-model-run": (with_("--model", "{t}/m_run")[:6] + ["{t}/m_run"] + T[7:] + ["--backend", "full"], 2,
                                "--output-dir is the start model's own directory ({t}/m_run)"),
    "output-missing": (["train", "--model", "{model}", "--data-dir", "{t}/data", "--preset", "tiny", "--device", "cpu"],
                       2, "no output directory given (--output-dir)"),
    "resume-manifest-garbage": (with_("--output-dir", "{t}/run_badmanifest"), 2,
                                "malformed training manifest: Expecting property name enclosed in double quotes "
                                "({t}/run_badmanifest/training_manifest.json) — restore it, or pass --force-restart"),
    "force-restart-keeps-run-on-error": (T[:3] + ["--data-dir", "{t}/none", "--output-dir", "{t}/run_done"] + T[7:]
                                         + ["--force-restart"], 2, "data directory not found ({t}/none)"),
    # data
    "data-missing": (with_("--data-dir", "{t}/none"), 2, "data directory not found ({t}/none)"),
    "data-is-file": (with_("--data-dir", "{t}/afile"), 2, "--data-dir is a file but not a .jsonl or .parquet one ({t}/afile)"),
    "data-no-train-jsonl": (with_("--data-dir", "{t}/data_none"), 2, "no train.jsonl in the data directory"),
    "data-train-jsonl-folder": (with_("--data-dir", "{t}/data_folder"), 2, "train.jsonl is a folder, not a file"),
    "data-empty": (with_("--data-dir", "{t}/data_empty"), 2, "train.jsonl holds no training pairs"),
    "data-latin1": (with_("--data-dir", "{t}/data_latin1"), 2, "not UTF-8 text (byte 15) ({t}/data_latin1/train.jsonl:1)"),
    "data-binary": (with_("--data-dir", "{t}/data_binary"), 2, "({t}/data_binary/train.jsonl:1)"),
    "data-deep": (with_("--data-dir", "{t}/data_deep"), 2, "nested too deeply ({t}/data_deep/train.jsonl:1)"),
    "data-no-response": (with_("--data-dir", "{t}/data_noresponse"), 2, "({t}/data_noresponse/train.jsonl:1)"),
    "data-all-skipped": (with_("--data-dir", "{t}/data_noresponse") + ["--lenient"], 2,
                         "train.jsonl holds no training pairs: --lenient skipped all 1 line(s), the first "
                         "{t}/data_noresponse/train.jsonl:1"),
    # --bench is read before training, not after it
    "bench-missing": (flag("--bench", "{t}/none.jsonl"), 2, "bench not found (--bench {t}/none.jsonl)"),
    "bench-empty": (flag("--bench", "{t}/bench_empty.jsonl"), 2, "the bench holds no tasks (--bench {t}/bench_empty.jsonl)"),
    "bench-empty-dir": (flag("--bench", "{t}/adir"), 2, "no bench tasks found ({t}/adir)"),
    "bench-latin1": (flag("--bench", "{t}/bench_latin1.jsonl"), 2, "({t}/bench_latin1.jsonl:1)"),
    "bench-with-fsdp": (flag("--bench", "{t}/bench.jsonl", "--distributed", "fsdp"), 2,
                        "--distributed fsdp does not support --bench"),
    # --chat-template: a broken template is named, not a traceback after the model loads
    "chat-template-missing": (flag("--chat-template", "{t}/none.jinja"), 2, "unknown chat template"),
    "chat-template-unclosed": (flag("--chat-template", "{t}/unclosed.jinja"), 2,
                               "the chat template is not valid Jinja: unexpected end of template, expected 'end of "
                               "print statement'. (line 1) ({t}/unclosed.jinja)"),
    "chat-template-raises": (flag("--chat-template", "{t}/raises.jinja"), 2,
                             "the chat template fails on pair 1: no system role"),
    "model-broken-template": (with_("--model", "{t}/m_badtemplate"), 2,
                              "the chat template fails on pair 1: unexpected end of template"),
    # config YAML
    "config-missing": (flag("--config", "{t}/none.yaml"), 2, "config file not found ({t}/none.yaml)"),
    "config-folder": (flag("--config", "{t}/adir"), 2, "config file not found ({t}/adir)"),
    "config-wrong-type": (flag("--config", "{t}/cfg_fast.yaml"), 2, "lr must be a number, got 'fast' ({t}/cfg_fast.yaml: lr)"),
    "config-unknown-key": (flag("--config", "{t}/cfg_unknown.yaml"), 2, "unknown config key 'learning_rat'"),
    "config-not-mapping": (flag("--config", "{t}/cfg_list.yaml"), 2, "config must be a mapping of field: value"),
    "config-binary": (flag("--config", "{t}/cfg_binary.yaml"), 2, "config file is not UTF-8 text ({t}/cfg_binary.yaml)"),
    "config-deep": (flag("--config", "{t}/cfg_deep.yaml"), 2, "config file is nested too deeply"),
    "config-malformed": (flag("--config", "{t}/cfg_malformed.yaml"), 2, "config file is not valid YAML"),
    "config-key-twice": (flag("--config", "{t}/cfg_twice.yaml"), 2,
                         "key 'lr' appears twice (first at line 1) ({t}/cfg_twice.yaml:3)"),
    "config-negative-steps": (T[:-2] + ["--config", "{t}/cfg_steps.yaml"], 2, "max_steps must be >= 1, got -4 ({t}/cfg_steps.yaml: max_steps)"),
    "config-beta-above-one": (flag("--config", "{t}/cfg_betas.yaml"), 2, "adam_betas must be in [0, 1)"),
    "config-bf16-not-bool": (flag("--config", "{t}/cfg_bf16.yaml"), 2, "bf16 must be true or false, got 'maybe'"),
    "config-epochs-inf": (T[:-2] + ["--config", "{t}/cfg_epochs_inf.yaml"], 2, "epochs must be a finite number, got inf ({t}/cfg_epochs_inf.yaml: epochs)"),
    "config-preset-unknown": (T[:7] + T[9:] + ["--config", "{t}/cfg_preset.yaml"], 2,
                              "unknown preset 'huge' ({t}/cfg_preset.yaml)"),
    # the base model
    "model-none": (T[:1] + T[3:], 2, "no base model given"),
    "model-missing": (with_("--model", "{t}/nomodel"), 2, "model directory not found ({t}/nomodel)"),
    "model-is-file": (with_("--model", "{t}/afile"), 2, "model path is not a directory ({t}/afile)"),
    "model-empty-dir": (with_("--model", "{t}/adir"), 2, "model directory has no config.json ({t}/adir)"),
    "model-adapter-run": (with_("--model", "{t}/adapter"), 2,
                          "--model is a LoRA adapter run, not a model ({t}/adapter)"),
    "model-no-config": (with_("--model", "{t}/m_noconfig"), 2, "model directory has no config.json"),
    "model-no-tokenizer": (with_("--model", "{t}/m_notokenizer"), 2, "model directory has no tokenizer"),
    "model-garbage-config": (with_("--model", "{t}/m_badconfig"), 2,
                             "corrupt JSON file: Expecting property name enclosed in double quotes"),
    "model-binary-config": (with_("--model", "{t}/m_binaryconfig"), 2, "({t}/m_binaryconfig/config.json)"),
    "model-truncated-weights": (with_("--model", "{t}/m_truncated"), 2,
                                "corrupt safetensors file: Error while deserializing header"),
    "model-garbage-tokenizer": (with_("--model", "{t}/m_badtokenizer"), 2, "({t}/m_badtokenizer/tokenizer.json)"),
    "model-hub-offline": (with_("--model", "nobody/no-such-model"), 2, "the hub is offline"),
    # probe
    "probe-cuda-absent": (["probe", "--device", "cuda"], 2, "--device cuda but no CUDA device is available"),
    "probe-mps-absent": (["probe", "--device", "mps"], 2, "--device mps but MPS is not available"),
    "probe-device-unknown": (["probe", "--device", "tpu"], 2, "argument --device: invalid choice: 'tpu'"),
    # status
    "status-missing": (["status", "{t}/none"], 2, "run directory not found ({t}/none)"),
    "status-is-file": (["status", "{t}/afile"], 2, "is a file, not a run directory ({t}/afile)"),
    "status-not-a-run": (["status", "{t}/adir"], 2, "not a training run (no training_manifest.json or telemetry.jsonl)"),
    "status-telemetry-latin1": (["status", "{t}/run_latin1tele"], 2,
                                "telemetry is not UTF-8 text (byte 30) ({t}/run_latin1tele/telemetry.jsonl:1)"),
    "status-telemetry-binary": (["status", "{t}/run_binarytele"], 2, "telemetry is not UTF-8 text"),
    "status-manifest-garbage": (["status", "{t}/run_badmanifest"], 2,
                                "cannot read JSON: Expecting property name enclosed in double quotes"),
    "status-manifest-latin1": (["status", "{t}/run_latin1manifest"], 2, "not UTF-8 text (byte 15)"),
    "status-manifest-deep": (["status", "{t}/run_deepmanifest"], 2, "JSON nested too deeply"),
    "status-interval-zero": (["status", "{t}/run_badmanifest", "--interval", "0"], 2, "cannot read JSON"),
    "status-interval-negative": (["status", "{t}/adir", "--watch", "--interval", "-1"], 2,
                                 "--interval must be a positive number of seconds, got -1.0"),
    "status-interval-nan": (["status", "{t}/adir", "--interval", "nan"], 2, "--interval must be a positive number"),
    "status-interval-text": (["status", "{t}/adir", "--interval", "soon"], 2, "argument --interval: invalid float value"),
}
NEEDS_NO_GPU = ("device-cuda-absent", "probe-cuda-absent", "device-mps-absent", "probe-mps-absent")


@pytest.mark.parametrize("argv, code, phrase", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_and_writes_nothing(request, tmp_path, run_cli, tiny_model_dir, argv, code, phrase):
    import torch

    case = request.node.callspec.id
    if case in NEEDS_NO_GPU and (torch.cuda.is_available() or torch.backends.mps.is_available()):
        pytest.skip("this machine has the device")
    inputs(tmp_path, tiny_model_dir, " ".join(argv))
    fill = dict(t=tmp_path, model=tiny_model_dir)
    assert_one_line_error(run_cli, [a.format(**fill) for a in argv], code, phrase.format(**fill),
                          [tmp_path, tiny_model_dir])
