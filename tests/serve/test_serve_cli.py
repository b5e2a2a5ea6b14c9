"""`mens serve` as users run it (a subprocess on a free port), the bounded queue, and --engine vllm."""

import os
import subprocess
import sys
import threading
import time

import openai
import pytest

from live_server import LiveServer, _free_port, wait_until_healthy


@pytest.mark.slow  # `mens serve` in a subprocess
def test_mens_serve_command_answers_the_openai_client(make_adapter_run):
    run = make_adapter_run("serve-cli-run", seed=5, copy_tokenizer=False)
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MENS_QUIET": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "mens", "serve", str(run), "--name", "mine", "--port", str(port),
                             "--api-key", "k"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        wait_until_healthy(proc, port)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["mine"]
        stream = client.chat.completions.create(model="mine", messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=5, stream=True)
        assert sum(1 for c in stream if c.choices and c.choices[0].finish_reason) == 1
        proc.terminate()   # SIGTERM (kill, systemd, docker stop) leaves as Ctrl+C does: exit 130, as README says
        assert proc.wait(timeout=20) == 130
        out = proc.stdout.read()
        assert "(cpu, batch ≤ 8)" in out and out.rstrip().endswith("mens: interrupted"), out
    finally:
        proc.kill()
        proc.wait(timeout=20)


@pytest.mark.slow  # a live server
def test_full_queue_answers_429_and_recovers(tiny_model_dir):
    from mens.serve.app import build_server

    app, engine = build_server(str(tiny_model_dir), name="q", max_batch=1, queue_size=1, device="cpu")
    server = LiveServer(app, engine)
    try:
        client = server.client()
        first = client.completions.create(model="q", prompt="fn", max_tokens=400, temperature=0, stream=True)
        next(iter(first))                        # submitted (a first chunk may come before it is admitted)
        deadline = time.time() + 10
        while engine.snapshot()["waiting"] > 0:  # admitted: it holds the only batch row
            assert time.time() < deadline
            time.sleep(0.01)
        waiting = threading.Thread(target=lambda: client.completions.create(model="q", prompt="x", max_tokens=2))
        waiting.start()
        while engine.snapshot()["waiting"] < 1:
            assert time.time() < deadline
            time.sleep(0.01)
        with pytest.raises(openai.RateLimitError) as exc:
            client.completions.create(model="q", prompt="y", max_tokens=2)
        assert exc.value.body["code"] == "queue_full"
        first.close()                            # the client hangs up: its row is freed
        waiting.join(timeout=30)
        assert client.completions.create(model="q", prompt="z", max_tokens=2).choices
        assert engine.snapshot()["rejected_queue_full"] == 1
    finally:
        server.close()


def test_engine_vllm(make_adapter_run, tiny_model_dir, run_cli):
    from mens.serve.vllm import vllm_command

    run = make_adapter_run("serve-vllm-run")
    cmd = vllm_command(str(run), {"other": str(run)}, port=9000, api_key="s", name="mine")
    assert cmd[cmd.index("--model") + 1] == str(tiny_model_dir)
    assert "--enable-lora" in cmd and f"mine={run}" in cmd and f"other={run}" in cmd
    assert cmd[cmd.index("--max-lora-rank") + 1] == "8"
    assert cmd[cmd.index("--tokenizer") + 1] == str(run)  # the chat template the adapter trained with
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(run).chat_template
    merged = vllm_command(str(tiny_model_dir), {}, name="m")
    assert "--enable-lora" not in merged and merged[merged.index("--served-model-name") + 1] == "m"
    try:
        import vllm  # noqa: F401
    except ImportError:
        code, _, err = run_cli("serve", str(run), "--engine", "vllm")
        assert code == 2 and "vLLM is not installed" in err


def test_bad_adapter_flag_is_a_user_error(tiny_model_dir, run_cli):
    code, _, err = run_cli("serve", str(tiny_model_dir), "--adapter", "noequals")
    assert code == 2 and "NAME=RUN" in err
    code, _, err = run_cli("serve", str(tiny_model_dir), "--adapter", f"x={tiny_model_dir}")
    assert code == 2 and "not an adapter run" in err


@pytest.mark.slow  # a live server
def test_a_client_that_hangs_up_frees_its_rows(tiny_model_dir, tmp_path):
    import json
    import shutil

    from mens.serve.app import build_server

    # The tiny model decodes ~1000 tokens/s: give it a long window so the abandoned request is
    # still running (for seconds) when the hang-up is noticed (within ~0.3 s).
    model_dir = tmp_path / "long-window"
    shutil.copytree(tiny_model_dir, model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 8192}))
    app, engine = build_server(str(model_dir), name="d", max_batch=2, device="cpu")
    server = LiveServer(app, engine)
    try:
        impatient = server.client()
        impatient.timeout = 0.3
        with pytest.raises(openai.APITimeoutError):
            impatient.completions.create(model="d", prompt="fn", max_tokens=8000, temperature=0)
        while engine.snapshot()["cancelled"] == 0 and engine.snapshot()["tokens"] < 8000:
            time.sleep(0.02)
        stats = engine.snapshot()
        assert stats["cancelled"] == 1 and stats["tokens"] < 8000, stats
    finally:
        server.close()


def _one_line_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mens: error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, err)


@pytest.mark.parametrize("flags,needle", [
    (["--queue-size", "-1"], "--queue-size"),
    (["--queue-size", "0"], "--queue-size"),
    (["--max-batch", "0"], "--max-batch"),
    (["--max-batch", "many"], "--max-batch"),
    (["--port", "70000"], "--port"),
    (["--port", "-1"], "--port"),
    (["--port", "http"], "--port"),
    (["--max-body-bytes", "10"], "--max-body-bytes"),
    (["--max-prompt-tokens", "0"], "--max-prompt-tokens"),
    (["--api-key", ""], "--api-key"),
    (["--device", "tpu"], "--device"),
    (["--device", "cuda:99"], "--device"),
    (["--grammar", "no-such-language"], "--grammar"),
    (["--host", "no.such.host.invalid"], "--host"),
])
def test_bad_serve_flags_are_one_line_errors(tiny_model_dir, run_cli, flags, needle):
    _one_line_error(*run_cli("serve", str(tiny_model_dir), *flags)[::2], needle)


def test_cuda_on_a_machine_without_it(tiny_model_dir, run_cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    _one_line_error(*run_cli("serve", str(tiny_model_dir), "--device", "cuda")[::2], "--device", "--device cpu")


def test_a_busy_port_is_a_one_line_error(tiny_model_dir, run_cli):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _one_line_error(*run_cli("serve", str(tiny_model_dir), "--port", port)[::2], "already in use", "--port")


def _corrupt_copy(src, tmp_path, name, damage):
    import shutil

    dst = tmp_path / name
    shutil.copytree(src, dst)
    damage(dst)
    return dst


def _truncate(path):
    path.write_bytes(path.read_bytes()[:100])


@pytest.mark.parametrize("damage,needle", [
    (lambda d: (d / "config.json").write_text("{not json"), "config.json"),
    (lambda d: (d / "tokenizer.json").write_bytes(b"\xff\xfe garbage"), "tokenizer.json"),
    (lambda d: _truncate(d / "model.safetensors"), "model.safetensors"),
    (lambda d: (d / "config.json").write_text('{"model_type": "no-such-family"}'), "cannot load the model"),
])
def test_a_corrupt_model_is_a_one_line_error(tiny_model_dir, tmp_path, run_cli, damage, needle):
    model = _corrupt_copy(tiny_model_dir, tmp_path, "model", damage)
    _one_line_error(*run_cli("serve", str(model), "--port", "0")[::2], needle)   # port 0: any free one


@pytest.mark.parametrize("damage,needle", [
    (lambda d: (d / "adapter_config.json").write_text("[[["), "adapter_config.json"),
    (lambda d: _truncate(d / "adapter_model.safetensors"), "adapter_model.safetensors"),
    (lambda d: (d / "training_manifest.json").write_bytes(b"\x00" * 8), "training_manifest.json"),
])
def test_a_corrupt_adapter_is_a_one_line_error(make_adapter_run, tiny_model_dir, tmp_path, run_cli, damage, needle):
    run = _corrupt_copy(make_adapter_run("serve-corrupt"), tmp_path, "run", damage)
    _one_line_error(*run_cli("serve", str(run), "--port", "0")[::2], needle)
    _one_line_error(*run_cli("serve", str(tiny_model_dir), "--adapter", f"x={run}", "--port", "0")[::2], needle)
