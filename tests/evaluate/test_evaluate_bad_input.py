"""Bad input to `mens bench | decontaminate | gate | card | report | status | merge | export`: each case is one line
`mens: error: … (where) — what to do`, exit code 2, no traceback, and nothing written (not even a
temp file) — checked before any model is loaded wherever the input can be checked without one.

A case is (argv, exit code, a phrase the error line must contain). `{t}` is the case's folder,
holding what `inputs()` makes; `{model}` a tiny model, `{run}` an adapter run over it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bad_input import assert_one_line_error
from evaluate_run_fixture import make_run

TASK = {"id": "t1", "category": "function", "prompt": "Write a Vox function that adds two numbers.",
        "expect_contains": ["fn"]}
DEEP = "[" * 100_000


def inputs(t: Path, model: Path, run: Path, argv: str) -> None:
    (t / "bench.jsonl").write_text(json.dumps(TASK) + "\n")
    (t / "empty.jsonl").write_text("")
    (t / "blank.jsonl").write_text("\n\n")
    (t / "emptydir").mkdir()
    (t / "latin1.jsonl").write_bytes(json.dumps(TASK).encode() + b"\n" + '{"prompt": "café"}\n'.encode("latin-1"))
    (t / "binary.jsonl").write_bytes(b"\x00\x01\x02PK\x03\x04\xff\xfe" * 64)
    (t / "deep.jsonl").write_text(json.dumps(TASK) + "\n" + DEEP + "\n")
    (t / "noprompt.jsonl").write_text(json.dumps({"id": "x"}) + "\n")
    (t / "dup.jsonl").write_text(json.dumps(TASK) + "\n" + json.dumps(TASK) + "\n")
    (t / "needles.jsonl").write_text(json.dumps({**TASK, "expect_contains": "fn"}) + "\n")
    (t / "ctx_str.jsonl").write_text(json.dumps({**TASK, "context_files": "a.vox"}) + "\n")
    (t / "badlang.jsonl").write_text(json.dumps({**TASK, "lang": 5}) + "\n")
    (t / "abs_ctx.jsonl").write_text(json.dumps({**TASK, "context_files": ["/etc/passwd"]}) + "\n")
    (t / "up_ctx.jsonl").write_text(json.dumps({**TASK, "context_files": ["../outside.vox"]}) + "\n")
    (t.parent / "outside.vox").write_text("fn f() to int { return 1 }\n")
    (t / "link.vox").symlink_to(t.parent / "outside.vox")
    (t / "link_ctx.jsonl").write_text(json.dumps({**TASK, "context_files": ["link.vox"]}) + "\n")
    (t / "gone_ctx.jsonl").write_text(json.dumps({**TASK, "context_files": ["gone.vox"]}) + "\n")
    (t / "data.jsonl").write_text(json.dumps({"prompt": "p", "response": "r"}) + "\n")
    (t / "adir").mkdir()
    (t / "afile").write_text("a file, not a folder\n")
    make_run(t)  # {t}/run: manifest, telemetry, eval and bench results
    (t / "policy.yaml").write_text("gates:\n  - {metric: eval.parse_rate, op: '>=', threshold: 0.9}\n")
    for name, metric, threshold in [("rate_high", "eval.parse_rate", 1.5), ("rate_low", "bench.pass_at_1", -0.1),
                                    ("pct_high", "eval.construct_coverage_pct", 150),
                                    ("count_neg", "eval.safety_rejections", -1)]:
        (t / f"{name}.yaml").write_text(f"gates:\n  - {{metric: {metric}, op: '>=', threshold: {threshold}}}\n")
    (t / "nan.yaml").write_text("gates:\n  - {metric: train.final_loss, op: '<=', threshold: .nan}\n")
    (t / "inf.yaml").write_text("gates:\n  - {metric: train.final_loss, op: '<=', threshold: .inf}\n")
    (t / "strthr.yaml").write_text("gates:\n  - {metric: eval.parse_rate, op: '>=', threshold: high}\n")
    (t / "badop.yaml").write_text("gates:\n  - {metric: eval.parse_rate, op: '=>', threshold: 0.9}\n")
    (t / "badmetric.yaml").write_text("gates:\n  - {metric: parse_rate, op: '>=', threshold: 0.9}\n")
    (t / "nogates.yaml").write_text("gates: []\n")
    (t / "badblocking.yaml").write_text("gates:\n  - {metric: eval.parse_rate, threshold: 0.9, blocking: maybe}\n")
    (t / "keytypo.yaml").write_text("gates:\n  - {metric: eval.parse_rate, threshold: 0.9, blokcing: false}\n")
    (t / "toptypo.yaml").write_text("gate:\n  - {metric: eval.parse_rate, threshold: 0.9}\n")
    (t / "topextra.yaml").write_text("gates:\n  - {metric: eval.parse_rate, threshold: 0.9}\nstrict: true\n")
    (t / "binary.yaml").write_bytes(b"gates: \xff\xfe\x00\n")
    (t / "deep.yaml").write_text("gates: " + DEEP + "\n")
    (t / "malformed.yaml").write_text("gates: [unclosed\n")
    (t / "garbage.json").write_text("{not json")
    (t / "latin1.json").write_bytes('{"parse_rate": "café"}'.encode("latin-1"))
    runs = {  # run folders with one broken file each
        "run_badmanifest": ("training_manifest.json", b"{not json"),
        "run_deepmanifest": ("training_manifest.json", DEEP.encode()),
        "run_latin1manifest": ("training_manifest.json", '{"name": "café"}'.encode("latin-1")),
        "run_latin1tele": ("telemetry.jsonl", '{"event": "step", "loss": "café"}\n'.encode("latin-1")),
        "run_binarytele": ("telemetry.jsonl", b"\x00\xff\xfe\x01" * 50),
        "run_badeval": ("eval_results.json", b"[1, 2,"),
        "run_binarybench": ("benchmark_results.json", b"\xff\xd8\xff\xe0" * 10),
        "run_listbench": ("benchmark_results.json", b"[1, 2]"),
        "run_listmanifest": ("training_manifest.json", b'"a string"'),
    }
    for name, (file, data) in runs.items():
        if name in argv:
            make_run(t / name)
            shutil.move(t / name / "run", t / f"{name}.tmpmove")
            shutil.rmtree(t / name)
            (t / f"{name}.tmpmove").rename(t / name)
            (t / name / file).write_bytes(data)
    (t / "run_cardfolder").mkdir() if "run_cardfolder" in argv else None
    if "run_cardfolder" in argv:
        make_run(t / "run_cardfolder")
        (t / "run_cardfolder" / "run" / "MODEL_CARD.md").mkdir()
    # broken copies of the tiny model and the adapter run, made only for the cases that use them
    models = {
        "m_badconfig": (model, "config.json", b"{garbage"),
        "m_binaryconfig": (model, "config.json", b"\x00\xff" * 20),
        "m_truncated": (model, "model.safetensors", None),
        "m_badtokenizer": (model, "tokenizer.json", b"\x00\x01\x02"),
        "r_badadapterconfig": (run, "adapter_config.json", b"{garbage"),
        "r_truncated": (run, "adapter_model.safetensors", None),
        "r_zero": (run, "adapter_model.safetensors", b""),
        "r_badmanifest": (run, "training_manifest.json", b"\xff\xfe{"),
        "r_listmanifest": (run, "training_manifest.json", b"[1, 2]"),
        "r_strbase": (run, "training_manifest.json", json.dumps({"base_model": "somewhere", "backend": "lora"}).encode()),
        "r_listadapterconfig": (run, "adapter_config.json", b"[1]"),
    }
    for name, (src, file, data) in models.items():
        if name in argv:
            shutil.copytree(src, t / name)
            target = t / name / file
            target.write_bytes(data if data is not None else target.read_bytes()[: target.stat().st_size // 2])
    if "r_nobase" in argv:
        shutil.copytree(run, t / "r_nobase")
        manifest = json.loads((t / "r_nobase" / "training_manifest.json").read_text())
        manifest["base_model"] = {"path": str(t / "gone"), "id": str(t / "gone")}
        (t / "r_nobase" / "training_manifest.json").write_text(json.dumps(manifest))
        cfg = json.loads((t / "r_nobase" / "adapter_config.json").read_text())
        cfg["base_model_name_or_path"] = str(t / "gone")
        (t / "r_nobase" / "adapter_config.json").write_text(json.dumps(cfg))


B = ["bench", "--model", "{run}", "--bench", "{t}/bench.jsonl", "-o", "{t}/out.json"]
MB = ["bench", "--bench", "{t}/bench.jsonl", "-o", "{t}/out.json", "--model"]
D = ["decontaminate", "--bench", "{t}/bench.jsonl", "--data", "{t}/data.jsonl"]
G = ["gate", "--run", "{t}/run", "-o", "{t}/receipt.json", "--policy"]
OUTPUT_IS_FOLDER = "the output is an existing folder"

CASES = {
    # bench: numbers
    "bench-negative-limit": (B + ["--limit", "-3"], 2, "--limit must be 1 or more, got -3"),
    "bench-zero-limit": (B + ["--limit", "0"], 2, "--limit must be 1 or more, got 0"),
    "bench-zero-max-new-tokens": (B + ["--max-new-tokens", "0"], 2, "--max-new-tokens must be 1 or more, got 0"),
    "bench-negative-max-new-tokens": (B + ["--max-new-tokens", "-1"], 2, "--max-new-tokens must be 1 or more"),
    "bench-unknown-grammar": (B + ["--grammar", "klingon"], 2, "--grammar"),
    "bench-negative-temperature": (B + ["--temperature", "-0.5"], 2, "--temperature must be 0 or more, got -0.5"),
    "bench-nan-temperature": (B + ["--temperature", "nan"], 2, "--temperature must be 0 or more, got nan"),
    "bench-inf-temperature": (B + ["--temperature", "inf"], 2, "--temperature must be 0 or more, got inf"),
    "bench-zero-batch": (B + ["--batch-size", "0"], 2, "--batch-size must be 1 or more, got 0"),
    "bench-zero-k": (B + ["-k", "0"], 2, "-k must be 1 or more, got 0"),
    "bench-negative-samples": (B + ["-n", "-2"], 2, "--samples must be 1 or more, got -2"),
    "bench-samples-below-k": (B + ["-k", "3", "-n", "2", "--temperature", "0.8"], 2, "need 1 <= k <= n samples"),
    "bench-samples-greedy": (B + ["-k", "2", "-n", "2"], 2, "several samples per task need sampling"),
    "bench-limit-not-int": (B + ["--limit", "ten"], 2, "argument --limit: invalid int value: 'ten' (mens bench)"),
    "bench-temperature-not-float": (B + ["--temperature", "hot"], 2, "argument --temperature: invalid float value"),
    "bench-missing-model-flag": (["bench", "--bench", "{t}/bench.jsonl"], 2,
                                 "the following arguments are required: --model (mens bench)"),
    # bench: device
    "bench-device-cuda-absent": (B + ["--device", "cuda"], 2, "--device cuda, but this machine has no usable CUDA device"),
    "bench-device-bogus": (B + ["--device", "tpu"], 2, "unknown device 'tpu' (--device)"),
    "bench-device-bad-index": (B + ["--device", "cuda:x"], 2, "unknown device 'cuda:x'"),
    # bench: bench files
    "bench-missing-bench": (B[:4] + ["{t}/none.jsonl", "-o", "{t}/out.json"], 2, "bench not found ({t}/none.jsonl)"),
    "bench-empty-file": (B[:4] + ["{t}/empty.jsonl", "-o", "{t}/out.json"], 2,
                         "the bench holds no tasks ({t}/empty.jsonl)"),
    "bench-blank-file": (B[:4] + ["{t}/blank.jsonl", "-o", "{t}/out.json"], 2, "the bench holds no tasks"),
    "bench-empty-dir": (B[:4] + ["{t}/emptydir", "-o", "{t}/out.json"], 2, "no bench tasks found ({t}/emptydir)"),
    "bench-latin1": (B[:4] + ["{t}/latin1.jsonl", "-o", "{t}/out.json"], 2, "line is not UTF-8 text (byte 15) ({t}/latin1.jsonl:2)"),
    "bench-binary": (B[:4] + ["{t}/binary.jsonl", "-o", "{t}/out.json"], 2, "({t}/binary.jsonl:1)"),
    "bench-deep": (B[:4] + ["{t}/deep.jsonl", "-o", "{t}/out.json"], 2,
                   "nested too deeply ({t}/deep.jsonl:2) — flatten the line\n"),  # bench has no --lenient to name
    "bench-task-without-prompt": (B[:4] + ["{t}/noprompt.jsonl", "-o", "{t}/out.json"], 2,
                                  "a bench task needs a non-empty string 'prompt' ({t}/noprompt.jsonl:1)"),
    "bench-context-absolute": (B[:4] + ["{t}/abs_ctx.jsonl", "-o", "{t}/out.json"], 2,
                               "context file '/etc/passwd' is outside the bench folder ({t}/abs_ctx.jsonl:1)"),
    "bench-context-climbs-out": (B[:4] + ["{t}/up_ctx.jsonl", "-o", "{t}/out.json"], 2,
                                 "context file '../outside.vox' is outside the bench folder"),
    "bench-context-link-out": (B[:4] + ["{t}/link_ctx.jsonl", "-o", "{t}/out.json"], 2,
                               "context file 'link.vox' is outside the bench folder"),
    "bench-context-missing": (B[:4] + ["{t}/gone_ctx.jsonl", "-o", "{t}/out.json"], 2,
                              "context file 'gone.vox' not found ({t}/gone_ctx.jsonl:1)"),
    "bench-context-files-not-list": (B[:4] + ["{t}/ctx_str.jsonl", "-o", "{t}/out.json"], 2,
                                     "'context_files' must be a list of strings ({t}/ctx_str.jsonl:1)"),
    "bench-unknown-lang": (B[:4] + ["{t}/badlang.jsonl", "-o", "{t}/out.json"], 2,  # before the model loads
                           "unknown lang '5'"),
    "bench-duplicate-ids": (B[:4] + ["{t}/dup.jsonl", "-o", "{t}/out.json"], 2, "duplicate task id 't1' ({t}/dup.jsonl:2)"),
    "bench-needles-not-list": (B[:4] + ["{t}/needles.jsonl", "-o", "{t}/out.json"], 2,
                               "'expect_contains' must be a list of strings"),
    "bench-train-data-missing": (B + ["--train-data", "{t}/none.jsonl"], 2, "file not found (--train-data {t}/none.jsonl)"),
    "bench-train-data-folder": (B + ["--train-data", "{t}/adir"], 2, "is a folder, not a file (--train-data {t}/adir)"),
    # bench: outputs
    "bench-output-folder": (B[:-1] + ["{t}/adir"], 2, OUTPUT_IS_FOLDER + " (-o {t}/adir)"),
    "bench-output-under-file": (B[:-1] + ["{t}/afile/out.json"], 2, "{t}/afile is a file, not a folder"),
    "bench-output-read-only": (B[:-1] + ["/proc/mens-out.json"], 2, "cannot write in /proc"),
    # bench: models
    "bench-model-missing": (MB + ["{t}/nomodel"], 2, "model path not found ({t}/nomodel)"),
    "bench-model-empty-dir": (MB + ["{t}/adir"], 2, "not a model directory (no config.json or adapter_config.json)"),
    "bench-model-is-file": (MB + ["{t}/afile"], 2, "is a file, not a model directory ({t}/afile)"),
    "bench-model-hub-offline": (MB + ["nobody/no-such-model"], 2, "is not in the local cache and HF_HUB_OFFLINE=1"),
    "bench-model-garbage-config": (MB + ["{t}/m_badconfig"], 2, "corrupt JSON file"),
    "bench-model-binary-config": (MB + ["{t}/m_binaryconfig"], 2, "({t}/m_binaryconfig/config.json)"),
    "bench-model-truncated-weights": (MB + ["{t}/m_truncated"], 2,
                                      "corrupt safetensors file: Error while deserializing header"),
    "bench-model-garbage-tokenizer": (MB + ["{t}/m_badtokenizer"], 2, "({t}/m_badtokenizer/tokenizer.json)"),
    "bench-adapter-garbage-config": (MB + ["{t}/r_badadapterconfig"], 2, "({t}/r_badadapterconfig/adapter_config.json)"),
    "bench-adapter-truncated": (MB + ["{t}/r_truncated"], 2, "corrupt safetensors file"),
    "bench-adapter-empty-weights": (MB + ["{t}/r_zero"], 2, "({t}/r_zero/adapter_model.safetensors)"),
    "bench-adapter-binary-manifest": (MB + ["{t}/r_badmanifest"], 2, "({t}/r_badmanifest/training_manifest.json)"),
    "bench-adapter-list-manifest": (MB + ["{t}/r_listmanifest"], 2, "a JSON list, not an object"),
    "bench-adapter-list-config": (MB + ["{t}/r_listadapterconfig"], 2,
                                  "a JSON list, not an object ({t}/r_listadapterconfig/adapter_config.json)"),
    "bench-adapter-base-gone": (MB + ["{t}/r_nobase"], 2, "{t}/gone"),
    # decontaminate
    "deco-missing-bench": (["decontaminate", "--bench", "{t}/none.jsonl", "--data", "{t}/data.jsonl"], 2,
                           "no bench tasks found ({t}/none.jsonl)"),
    "deco-empty-bench": (["decontaminate", "--bench", "{t}/empty.jsonl", "--data", "{t}/data.jsonl"], 2,
                         "the bench holds no tasks ({t}/empty.jsonl)"),
    "deco-latin1-bench": (["decontaminate", "--bench", "{t}/latin1.jsonl", "--data", "{t}/data.jsonl"], 2,
                          "({t}/latin1.jsonl:2)"),
    "deco-missing-data": (D[:4] + ["{t}/none.jsonl"], 2, "file not found (--train-data {t}/none.jsonl)"),
    "deco-data-folder": (D[:4] + ["{t}/adir"], 2, "is a folder, not a file (--train-data {t}/adir)"),
    "deco-latin1-data": (D[:4] + ["{t}/latin1.jsonl"], 2, "({t}/latin1.jsonl:2)"),
    "deco-binary-data": (D[:4] + ["{t}/binary.jsonl"], 2, "({t}/binary.jsonl:1)"),
    "deco-deep-data": (D[:4] + ["{t}/deep.jsonl"], 2, "({t}/deep.jsonl:2) — flatten the line\n"),
    "deco-output-folder": (D + ["-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "deco-output-under-file": (D + ["-o", "{t}/afile/r.json"], 2, "is a file, not a folder"),
    "deco-output-is-data": (D + ["-o", "{t}/data.jsonl"], 2, "the output would overwrite the input"),
    "deco-empty-data": (D[:4] + ["{t}/empty.jsonl"], 2,
                        "no training rows to check against: the data holds no JSON object ({t}/empty.jsonl)"),
    "deco-no-data": (["decontaminate", "--bench", "{t}/bench.jsonl", "--data"], 2,
                     "argument --data: expected at least one argument"),
    # gate
    "gate-rate-above-1": (G + ["{t}/rate_high.yaml"], 2, "threshold 1.5 is out of range for eval.parse_rate (0-1)"),
    "gate-rate-below-0": (G + ["{t}/rate_low.yaml"], 2, "threshold -0.1 is out of range for bench.pass_at_1"),
    "gate-pct-above-100": (G + ["{t}/pct_high.yaml"], 2, "out of range for eval.construct_coverage_pct (0-100)"),
    "gate-negative-count": (G + ["{t}/count_neg.yaml"], 2, "out of range for eval.safety_rejections (0 or more)"),
    "gate-nan-threshold": (G + ["{t}/nan.yaml"], 2, "threshold must be a finite number"),
    "gate-inf-threshold": (G + ["{t}/inf.yaml"], 2, "threshold must be a finite number"),
    "gate-string-threshold": (G + ["{t}/strthr.yaml"], 2, "threshold must be a finite number"),
    "gate-bad-op": (G + ["{t}/badop.yaml"], 2, "unknown op '=>'"),
    "gate-bad-metric": (G + ["{t}/badmetric.yaml"], 2, "metric 'parse_rate' must start with eval., bench. or train."),
    "gate-no-gates": (G + ["{t}/nogates.yaml"], 2, "gate policy needs a non-empty 'gates' list"),
    "gate-bad-blocking": (G + ["{t}/badblocking.yaml"], 2, "blocking must be true or false"),
    # a misspelt key is named, never ignored (`blokcing: false` would leave the gate blocking)
    "gate-key-typo": (G + ["{t}/keytypo.yaml"], 2,
                      "unknown key 'blokcing' ({t}/keytypo.yaml: gates[0]) — did you mean 'blocking'?"),
    "gate-top-key-typo": (G + ["{t}/toptypo.yaml"], 2, "unknown key 'gate' ({t}/toptypo.yaml) — did you mean 'gates'?"),
    "gate-top-key-extra": (G + ["{t}/topextra.yaml"], 2, "unknown key 'strict' ({t}/topextra.yaml)"),
    "gate-binary-policy": (G + ["{t}/binary.yaml"], 2, "gate policy is not UTF-8 text"),
    "gate-deep-policy": (G + ["{t}/deep.yaml"], 2, "({t}/deep.yaml)"),
    "gate-malformed-policy": (G + ["{t}/malformed.yaml"], 2, "gate policy is not valid YAML"),
    "gate-missing-policy": (G + ["{t}/none.yaml"], 2, "gate policy not found ({t}/none.yaml)"),
    "gate-policy-folder": (G + ["{t}/adir"], 2, "gate policy not found ({t}/adir)"),
    "gate-missing-run": (["gate", "--run", "{t}/none", "--policy", "{t}/policy.yaml"], 2, "run directory not found ({t}/none)"),
    "gate-run-is-file": (["gate", "--run", "{t}/afile", "--policy", "{t}/policy.yaml"], 2,
                         "is a file, not a run directory ({t}/afile)"),
    "gate-eval-missing": (G + ["{t}/policy.yaml", "--eval", "{t}/none.json"], 2, "file not found (--eval {t}/none.json)"),
    "gate-eval-folder": (G + ["{t}/policy.yaml", "--eval", "{t}/adir"], 2, "is a folder, not a file (--eval {t}/adir)"),
    "gate-eval-garbage": (G + ["{t}/policy.yaml", "--eval", "{t}/garbage.json"], 2, "cannot read JSON"),
    "gate-eval-latin1": (G + ["{t}/policy.yaml", "--eval", "{t}/latin1.json"], 2, "not UTF-8 text (byte 19) ({t}/latin1.json)"),
    "gate-bench-missing": (G + ["{t}/policy.yaml", "--bench", "{t}/none.json"], 2, "file not found (--bench-results {t}/none.json)"),
    "gate-output-folder": (["gate", "--run", "{t}/run", "--policy", "{t}/policy.yaml", "-o", "{t}/adir"], 2,
                           OUTPUT_IS_FOLDER),
    "gate-output-under-file": (["gate", "--run", "{t}/run", "--policy", "{t}/policy.yaml", "-o", "{t}/afile/r.json"], 2,
                               "is a file, not a folder"),
    "gate-output-read-only": (["gate", "--run", "{t}/run", "--policy", "{t}/policy.yaml", "-o", "/proc/r.json"], 2,
                              "cannot write in /proc"),
    "gate-manifest-garbage": (["gate", "--run", "{t}/run_badmanifest", "--policy", "{t}/policy.yaml"], 2,
                              "cannot read JSON"),
    "gate-manifest-deep": (["gate", "--run", "{t}/run_deepmanifest", "--policy", "{t}/policy.yaml"], 2,
                           "JSON nested too deeply ({t}/run_deepmanifest/training_manifest.json)"),
    "gate-eval-file-garbage": (["gate", "--run", "{t}/run_badeval", "--policy", "{t}/policy.yaml"], 2,
                               "({t}/run_badeval/eval_results.json)"),
    "gate-telemetry-latin1": (["gate", "--run", "{t}/run_latin1tele", "--policy", "{t}/policy.yaml"], 2,
                              "telemetry is not UTF-8 text (byte 30) ({t}/run_latin1tele/telemetry.jsonl:1)"),
    "gate-bench-file-list": (["gate", "--run", "{t}/run_listbench", "--policy", "{t}/policy.yaml"], 2,
                             "a JSON list, not an object ({t}/run_listbench/benchmark_results.json)"),
    "gate-telemetry-binary": (["gate", "--run", "{t}/run_binarytele", "--policy", "{t}/policy.yaml"], 2,
                              "telemetry is not UTF-8 text"),
    # card
    "card-missing-run": (["card", "{t}/none"], 2, "run directory not found ({t}/none)"),
    "card-run-is-file": (["card", "{t}/afile"], 2, "is a file, not a run directory"),
    "card-manifest-garbage": (["card", "{t}/run_badmanifest"], 2, "({t}/run_badmanifest/training_manifest.json)"),
    "card-manifest-latin1": (["card", "{t}/run_latin1manifest"], 2, "not UTF-8 text (byte 13)"),
    "card-manifest-deep": (["card", "{t}/run_deepmanifest"], 2, "JSON nested too deeply"),
    "card-bench-binary": (["card", "{t}/run_binarybench"], 2, "({t}/run_binarybench/benchmark_results.json)"),
    "card-eval-garbage": (["card", "{t}/run_badeval"], 2, "({t}/run_badeval/eval_results.json)"),
    "card-bench-list": (["card", "{t}/run_listbench"], 2, "a JSON list, not an object"),
    "card-place-is-folder": (["card", "{t}/run_cardfolder/run"], 2, "({t}/run_cardfolder/run/MODEL_CARD.md)"),
    # report
    "report-missing-run": (["report", "{t}/none"], 2, "run directory not found ({t}/none)"),
    "report-run-is-file": (["report", "{t}/afile"], 2, "is a file, not a run directory"),
    # an output over what the command reads: its input, or another file of the run
    "report-output-is-telemetry": (["report", "{t}/run", "-o", "{t}/run/telemetry.jsonl"], 2,
                                   "the output would overwrite telemetry.jsonl, a file of the run"),
    "gate-output-is-policy": (["gate", "--run", "{t}/run", "--policy", "{t}/policy.yaml", "-o", "{t}/policy.yaml"], 2,
                              "the output would overwrite the input ({t}/policy.yaml)"),
    "gate-output-is-manifest": (["gate", "--run", "{t}/run", "--policy", "{t}/policy.yaml", "-o",
                                 "{t}/run/training_manifest.json"], 2,
                                "the output would overwrite training_manifest.json, a file of the run"),
    "bench-output-is-bench": (MB[:3] + ["-o", "{t}/bench.jsonl", "--model", "{run}"], 2,
                              "the output would overwrite the input ({t}/bench.jsonl)"),
    "bench-output-is-run-file": (MB[:3] + ["-o", "{t}/run/training_manifest.json", "--model", "{t}/run"], 2,
                                 "the output would overwrite training_manifest.json, a file of the run"),
    "report-output-folder": (["report", "{t}/run", "-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "report-output-under-file": (["report", "{t}/run", "-o", "{t}/afile/r.html"], 2, "is a file, not a folder"),
    "report-output-read-only": (["report", "{t}/run", "-o", "/proc/r.html"], 2, "cannot write in /proc"),
    "report-telemetry-latin1": (["report", "{t}/run_latin1tele"], 2, "telemetry is not UTF-8 text"),
    "report-telemetry-binary": (["report", "{t}/run_binarytele"], 2, "({t}/run_binarytele/telemetry.jsonl:1)"),
    "report-manifest-garbage": (["report", "{t}/run_badmanifest"], 2, "cannot read JSON"),
    "report-manifest-string": (["report", "{t}/run_listmanifest"], 2,
                               "a JSON str, not an object ({t}/run_listmanifest/training_manifest.json)"),
    "status-manifest-string": (["status", "{t}/run_listmanifest"], 2, "a JSON str, not an object"),
    "report-manifest-deep": (["report", "{t}/run_deepmanifest"], 2, "JSON nested too deeply"),
    # merge
    "merge-missing-run": (["merge", "{t}/none", "--out", "{t}/m"], 2, "run directory not found ({t}/none)"),
    "merge-run-is-file": (["merge", "{t}/afile", "--out", "{t}/m"], 2, "is a file, not a run directory"),
    "export-run-is-file": (["export", "{t}/afile", "--gguf", "{t}/m.gguf"], 2,
                           "is a file, not a run or model directory ({t}/afile)"),
    "push-run-is-file": (["push", "{t}/afile", "--repo", "me/x", "--dry-run", "{t}/staged"], 2,
                         "is a file, not a run or model directory ({t}/afile)"),
    "merge-not-a-run": (["merge", "{t}/adir", "--out", "{t}/m"], 2, "not a run or model directory"),
    "merge-out-not-empty": (["merge", "{run}", "--out", "{t}/run"], 2, "output directory exists and is not empty"),
    "merge-out-is-file": (["merge", "{run}", "--out", "{t}/afile"], 2, "--output-dir is a file, not a folder"),
    "merge-out-under-file": (["merge", "{run}", "--out", "{t}/afile/m"], 2, "{t}/afile is a file, not a folder"),
    "merge-out-read-only": (["merge", "{run}", "--out", "/proc/mens-merged"], 2, "cannot write in /proc"),
    "merge-bad-shard-size": (["merge", "{run}", "--out", "{t}/m", "--max-shard-size", "huge"], 2,
                             "bad --max-shard-size 'huge'"),
    "merge-zero-shard-size": (["merge", "{run}", "--out", "{t}/m", "--max-shard-size", "0GB"], 2,
                              "bad --max-shard-size '0GB'"),
    "merge-bad-dtype": (["merge", "{run}", "--out", "{t}/m", "--dtype", "int3"], 2, "argument --dtype: invalid choice"),
    "merge-adapter-garbage-config": (["merge", "{t}/r_badadapterconfig", "--out", "{t}/m"], 2, "corrupt JSON file"),
    "merge-adapter-truncated": (["merge", "{t}/r_truncated", "--out", "{t}/m"], 2, "corrupt safetensors file"),
    "merge-adapter-empty-weights": (["merge", "{t}/r_zero", "--out", "{t}/m"], 2, "corrupt safetensors file"),
    "merge-manifest-binary": (["merge", "{t}/r_badmanifest", "--out", "{t}/m"], 2,
                              "({t}/r_badmanifest/training_manifest.json)"),
    "merge-model-truncated": (["merge", "{t}/m_truncated", "--out", "{t}/m"], 2, "corrupt safetensors file"),
    "merge-model-garbage-config": (["merge", "{t}/m_badconfig", "--out", "{t}/m"], 2, "corrupt JSON file"),
    "merge-manifest-list": (["merge", "{t}/r_listmanifest", "--out", "{t}/m"], 2,
                            "a JSON list, not an object ({t}/r_listmanifest/training_manifest.json)"),
    "merge-manifest-base-string": (["merge", "{t}/r_strbase", "--out", "{t}/m"], 2,
                                   "the training manifest's 'base_model' is a JSON str, not an object"),
    "merge-adapter-config-list": (["merge", "{t}/r_listadapterconfig", "--out", "{t}/m"], 2, "a JSON list, not an object"),
    "export-manifest-list": (["export", "{t}/r_listmanifest", "--gguf", "{t}/m.gguf"], 2, "a JSON list, not an object"),
    "merge-base-gone": (["merge", "{t}/r_nobase", "--out", "{t}/m"], 2, "{t}/gone"),
}


@pytest.fixture(scope="module")
def adapter_run(make_adapter_run):
    return make_adapter_run("bad-input-run")


@pytest.mark.parametrize("argv, code, phrase", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_and_writes_nothing(request, tmp_path, run_cli, tiny_model_dir, adapter_run, argv, code,
                                                  phrase):
    import torch

    if request.node.callspec.id.endswith("cuda-absent") and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    fill = dict(t=tmp_path, model=tiny_model_dir, run=adapter_run)
    inputs(tmp_path, tiny_model_dir, adapter_run, " ".join(argv))
    assert_one_line_error(run_cli, [a.format(**fill) for a in argv], code, phrase.format(**fill),
                          [tmp_path, tiny_model_dir, adapter_run])


def test_result_files_with_wrong_typed_parts_render_what_they_can(tmp_path, run_cli):
    """Objects whose parts have other types (a hand-edited receipt, a foreign bench file) are no
    traceback: card and report leave the wrong-typed parts out, gate finds those metrics missing."""
    run = make_run(tmp_path)
    manifest = json.loads((run / "training_manifest.json").read_text())
    (run / "training_manifest.json").write_text(json.dumps({**manifest, "results": "abc", "name": 5,
                                                            "data": {"path": 5}}))
    (run / "eval_results.json").write_text(json.dumps({"parse_rate": 0.9, "by_category": {"a": "x", "b": [1]}}))
    (run / "benchmark_results.json").write_text(json.dumps({"pass_at_1": 0.1, "by_category": {"a": 5, "b": {"pass_at_1": "x"}}}))
    (run / "gate_receipt.json").write_text(json.dumps({"passed": True, "gates": [1, "x", {"verdict": '"><b>'}]}))
    for argv, want in ((["report", run], 0), (["card", run], 0),
                       (["gate", "--run", run, "--policy", tmp_path / "p.yaml", "-o", tmp_path / "r.json"], 1)):
        (tmp_path / "p.yaml").write_text("gates:\n  - {metric: train.final_loss, op: '<=', threshold: 9}\n")
        code, out, err = run_cli(*argv)
        assert "Traceback" not in err and code == want, err
    assert '"><b>' not in (run / "report.html").read_text()
