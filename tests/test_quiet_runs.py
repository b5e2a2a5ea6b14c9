"""A normal run of every command prints only mens's own lines (issue 36): no library warning
(FutureWarning, UserWarning …), progress bar, log line or bare traceback — those go to `--debug`
(mens.library_noise), and the causes mens owns are fixed where they are.

One child interpreter (a real stderr: no pytest capture or warning recorder between the libraries
and the terminal) runs each command's happy path in turn on a tiny GPT-2 (Conv1D layers, learned
positions), the way `mens …` would, and prints a marker line before each; every command must exit
0. `mens serve` answers one chat request from a thread of the driver, which then stops it as a
service manager would (SIGTERM: exit 130, as Ctrl+C). `mens export` runs where the `export` extra
is installed."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from paths import EXAMPLES, REPO

# What no normal run may print: Python warnings, tracebacks, progress bars (tqdm's `%|` and rates),
# library log lines (transformers' `[transformers]`, bitsandbytes' kernels notice).
NOISE = re.compile(r"Warning\b|warnings\.warn|Traceback|\d%\||it/s\]|examples/s\]|\[transformers\]|kernels-community")

DRIVER = r"""
import json, logging, os, signal, sys, threading, urllib.request, warnings
from mens.cli import main

def ask_then_stop(port):  # `mens serve`'s happy path: one chat request answered, then a stop
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except OSError:
                threading.Event().wait(0.1)
        body = json.dumps({"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        req = urllib.request.Request(base + "/v1/chat/completions", body.encode(),
                                     {"Content-Type": "application/json"})
        print("serve answered", urllib.request.urlopen(req, timeout=120).status, flush=True)
    finally:
        os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down, then mens serve leaves with 130

for line in sys.stdin.read().strip().split("\n"):
    print("=== " + line, flush=True)
    print("=== " + line, file=sys.stderr, flush=True)
    # as a fresh `mens` process would: a warning shown once per place is shown again
    filters = warnings.filters[:]
    warnings.resetwarnings()
    warnings.filters[:] = filters
    getattr(logging.Logger, "warning_once", None) and logging.Logger.warning_once.cache_clear()
    argv = line.split()
    if "serve" in argv:
        threading.Thread(target=ask_then_stop, args=(argv[argv.index("--port") + 1],), daemon=True).start()
    code = main(argv)
    print(f"=== exit {code}", flush=True)
"""

def commands(t, model, port: int, export: bool) -> list[str]:
    bench = EXAMPLES / "bench"
    return [
        f"vox check {EXAMPLES / 'vox' / 'ai'}",
        f"vox constructs {EXAMPLES / 'vox' / 'ai'}",
        f"corpus extract {EXAMPLES / 'vox' / 'ai'} -o {t}/units.jsonl --workers 1",
        f"corpus pairs {t}/units.jsonl -o {t}/pairs.jsonl --workers 1",
        f"corpus validate {t}/pairs.jsonl -o {t}/valid.jsonl --workers 1",
        f"corpus eval {t}/valid.jsonl -o {t}/eval.json",
        f"corpus stats {t}/valid.jsonl",
        f"corpus mix --config {t}/mix.yaml",
        f"generate-data --limit 10 -o {t}/synth.jsonl",
        f"pipeline --config {t}/pipeline.yaml --stages extract,pairs,validate,mix,eval",
        f"corpus prefs --model {model} --prompts {t}/prompts.jsonl -o {t}/prefs.jsonl -n 2 --max-new-tokens 8",
        "probe",
        f"train --model {model} --backend lora --data-dir {t}/train.jsonl -o {t}/run --preset tiny --device cpu "
        "--max-steps 1 --seq-len 64",
        f"status {t}/run",
        f"bench --model {t}/run --bench {bench} --limit 2 --max-new-tokens 8",
        f"decontaminate --bench {bench} --train-data {t}/train.jsonl",
        f"gate --run {t}/run --policy {t}/gates.yaml",
        f"card {t}/run",
        f"report {t}/run",
        f"merge {t}/run -o {t}/merged",
        *([f"export {t}/run --gguf {t}/run.gguf"] if export else []),
        f"push {t}/run --repo me/tiny --upstream-model-id me/tiny-base --dry-run {t}/push",
        f"serve {t}/run --name tiny --port {port} --device cpu",
        f"dpo --model {model} --data-dir {t}/dpo.jsonl -o {t}/dpo --max-steps 1 --micro-batch 2 --seq-len 64",
        f"rl --model {model} --prompts {t}/prompts.jsonl -o {t}/rl --max-steps 1 -n 2 --max-new-tokens 8 --device auto",
    ]


def inputs(t) -> None:
    rows = [{"prompt": f"Write a Vox function number {i}.", "response": f"fn f{i}() to int {{\n    return {i}\n}}"}
            for i in range(8)]
    (t / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (t / "prompts.jsonl").write_text("".join(json.dumps({"prompt": f"Write a Python function {i}.", "lang": "python"})
                                             + "\n" for i in range(2)))
    pref = {"prompt": "Write a Vox function.", "chosen": "fn a() to int {\n    return 1\n}", "rejected": "fn a( {"}
    (t / "dpo.jsonl").write_text(json.dumps(pref) + "\n" + json.dumps({**pref, "prompt": "Another one."}) + "\n")
    (t / "mix.yaml").write_text(f"sources:\n  - path: {t}/valid.jsonl\noutput: {t}/mixed.jsonl\nseed: 0\n")
    (t / "gates.yaml").write_text("gates:\n  - {name: parses, metric: bench.parse_rate, op: '>=', threshold: 0, "
                                  "blocking: true}\n")
    (t / "pipeline.yaml").write_text(f"work_dir: {t}/pipeline\ncorpus: {{sources: [{EXAMPLES / 'vox' / 'ai'}]}}\n"
                                     "generate_data: {count: 0}\n")


def exports() -> bool:
    """The `export` extra and llama.cpp's converter are here (else `mens export` is left out)."""
    try:
        import llama_cpp  # noqa: F401

        from mens.export.gguf import converter_dir

        converter_dir()
        return True
    except Exception:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(lines: list[str]) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "MENS_QUIET": "0", "HF_HUB_OFFLINE": "1"}
    for name in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        env.pop(name, None)  # as a user's shell has them: unset
    proc = subprocess.run([sys.executable, "-c", DRIVER], input="\n".join(lines), capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said: dict[str, str] = {}
    exits: dict[str, str] = {}
    for stream in (proc.stdout, proc.stderr):  # each command's lines, both streams
        for chunk in stream.split("=== ")[1:]:
            head, _, body = chunk.partition("\n")
            if head.startswith("exit "):
                exits[command] = head
            else:
                command = head
                said[head] = said.get(head, "") + body
    stopped = {cmd: "exit 130" for cmd in exits if cmd.startswith("serve ")}  # SIGTERM: as Ctrl+C
    failed = {cmd: said[cmd][-1000:] for cmd, code in exits.items() if code != stopped.get(cmd, "exit 0")}
    assert not failed, failed
    return said


@pytest.mark.slow  # one child interpreter, every command once
def test_every_command_prints_only_its_own_lines(tmp_path, tiny_tokenizer_dir):
    """…and, last, `mens --debug dpo`: TRL and PEFT still read transformers' deprecated
    `is_gradient_checkpointing`, and --debug says so (the detector is not blind)."""
    from tiny import build_model

    model = build_model(tmp_path / "gpt2", "gpt2", tokenizer_dir=tiny_tokenizer_dir)
    inputs(tmp_path)
    lines = commands(tmp_path, model, free_port(), exports())
    debug = f"--debug dpo --model {model} --data-dir {tmp_path}/dpo.jsonl -o {tmp_path}/dpo-debug --max-steps 1 " \
            "--seq-len 64"
    said = run(lines + [debug])
    assert set(said) == {*lines, debug}, sorted(set(lines) - set(said))
    assert NOISE.search(said.pop(debug))
    noisy = {cmd.split(" --")[0][:60]: [ln for ln in out.splitlines() if NOISE.search(ln)][:3]
             for cmd, out in said.items() if NOISE.search(out)}
    assert not noisy, noisy
    by_command = {line.split()[0]: out for line, out in said.items()}
    assert "trained 1 steps" in by_command["train"] and "dpo: 1 steps" in by_command["dpo"]
    assert "serve answered 200" in by_command["serve"], by_command["serve"]
    assert "eval" in by_command["pipeline"] and "FAILED" not in by_command["pipeline"]
