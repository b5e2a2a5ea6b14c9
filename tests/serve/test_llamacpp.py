"""`mens serve --engine llamacpp`: the flags it refuses (always run), and a real server on
127.0.0.1 over the GGUF exported from a LoRA run of the tiny model, driven by the `openai`
client (needs the `export` extra: llama-cpp-python and llama.cpp's converter; skipped without)."""

import sys

import pytest

from bad_input import assert_one_line_error
from live_server import API_KEY, LiveServer


@pytest.mark.parametrize("extra,phrase", [
    (["--grammar", "vox"], "--grammar is not available with --engine llamacpp"),
    (["--adapter", "a=b"], "--adapter is not available with --engine llamacpp"),
    (["--dtype", "f16"], "--dtype is not available with --engine llamacpp"),
    (["--device", "cuda"], "--device is not available with --engine llamacpp"),
])
def test_refused_flags(run_cli, tiny_model_dir, tmp_path, extra, phrase):
    assert_one_line_error(run_cli, ["serve", tiny_model_dir, "--engine", "llamacpp", "--port", "0", *extra], 2,
                          phrase, [tmp_path, tiny_model_dir])


def test_quant_needs_llamacpp(run_cli, tiny_model_dir, tmp_path):
    assert_one_line_error(run_cli, ["serve", tiny_model_dir, "--quant", "q8_0", "--port", "0"], 2,
                          "--quant is for --engine llamacpp", [tmp_path])


def test_without_llama_cpp_python(run_cli, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)      # as if it were not installed
    err = assert_one_line_error(run_cli, ["serve", tiny_model_dir, "--engine", "llamacpp", "--port", "0"], 2,
                                "needs llama-cpp-python", [tmp_path, tiny_model_dir])
    assert "pip install 'mens[export]'" in err


@pytest.mark.parametrize("case", ["missing", "not-gguf"])
def test_bad_source(run_cli, tmp_path, case):
    pytest.importorskip("llama_cpp", reason="needs the export extra: pip install -e '.[export]'")
    src = tmp_path / "nope.gguf"
    if case == "not-gguf":
        src.write_text("not a model")
    phrase = "no such file or directory" if case == "missing" else "not a GGUF file"
    assert_one_line_error(run_cli, ["serve", src, "--engine", "llamacpp", "--port", "0"], 2, phrase, [tmp_path])


# ---------------------------------------------------------------- a live llama.cpp server

@pytest.fixture(scope="module")
def gguf_run(make_adapter_run):
    """A LoRA run over the tiny Qwen2 (llama-cpp-python and the converter, or skip)."""
    pytest.importorskip("llama_cpp", reason="needs the export extra: pip install -e '.[export]'")
    from mens.export.gguf import converter_dir

    converter_dir()
    return make_adapter_run("serve-llamacpp", seed=3)


@pytest.fixture(scope="module")
def llamacpp_server(gguf_run):
    from mens.serve.llamacpp_engine import build_llamacpp_server

    app, engine = build_llamacpp_server(str(gguf_run), name="tiny", api_key=API_KEY, queue_size=8)
    server = LiveServer(app, engine)
    yield server
    server.close()


@pytest.mark.slow
def test_run_is_exported_once_beside_it(llamacpp_server, gguf_run, monkeypatch):
    from mens.export import export as export_module
    from mens.serve.gguf_model import resolve_gguf

    cached = gguf_run.parent / f"{gguf_run.name}.f16.gguf"
    assert llamacpp_server.engine.gguf == cached and cached.is_file()
    monkeypatch.setattr(export_module, "export", lambda *a, **k: pytest.fail("exported again"))
    assert resolve_gguf(gguf_run) == cached                  # newer than every file of the run: reused
    assert resolve_gguf(cached) == cached                    # a .gguf is served as it is


@pytest.mark.slow
def test_chat_prompt_is_the_transformers_one(llamacpp_server, gguf_run):
    """The GGUF's template and vocabulary give the very ids transformers gives (the mens engine's)."""
    from mens.hf import load_tokenizer

    tok = load_tokenizer(gguf_run)
    messages = [{"role": "system", "content": "You write Vox."}, {"role": "user", "content": "fn add(a: int) {"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ours = llamacpp_server.engine.tokenizer
    assert ours.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == text
    assert ours(text, add_special_tokens=False).input_ids == tok(text, add_special_tokens=False).input_ids
    assert tok.convert_tokens_to_ids("<|im_end|>") in llamacpp_server.engine.eos_ids


@pytest.mark.slow
def test_chat_and_completions(llamacpp_server):
    client = llamacpp_server.client()
    assert [m.id for m in client.models.list().data] == ["tiny"]
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Write Vox."}],
                                          max_tokens=6, temperature=0)
    ids = llamacpp_server.engine.tokenizer.apply_chat_template([{"role": "user", "content": "Write Vox."}],
                                                               tokenize=True)
    assert chat.choices[0].finish_reason == "length"
    assert chat.usage.prompt_tokens == len(ids) and chat.usage.completion_tokens == 6
    assert chat.usage.total_tokens == len(ids) + 6
    done = client.completions.create(model="tiny", prompt=["fn add(a: int", "type Shape ="], max_tokens=5,
                                     temperature=0)
    assert [c.index for c in done.choices] == [0, 1] and done.usage.completion_tokens == 10
    again = client.completions.create(model="tiny", prompt="fn add(a: int", max_tokens=5, temperature=0)
    assert again.choices[0].text == done.choices[0].text         # greedy is deterministic


@pytest.mark.slow
def test_streaming_matches_and_counts(llamacpp_server):
    client = llamacpp_server.client()
    whole = client.completions.create(model="tiny", prompt="fn add(a: int", max_tokens=12, temperature=0)
    chunks = list(client.completions.create(model="tiny", prompt="fn add(a: int", max_tokens=12, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    assert chunks[-1].usage.completion_tokens == 12
    chat = list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=4, temperature=0, stream=True))
    assert chat[0].choices[0].delta.role == "assistant" and chat[-1].choices[0].finish_reason == "length"


@pytest.mark.slow
def test_n_seed_and_stop(llamacpp_server):
    client = llamacpp_server.client()
    kw = dict(model="tiny", prompt="fn add(a: int", max_tokens=8, temperature=1.0, seed=7)
    three = client.completions.create(n=3, **kw)
    texts = [c.text for c in three.choices]
    assert [c.index for c in three.choices] == [0, 1, 2] and len(set(texts)) > 1
    assert [c.text for c in client.completions.create(n=3, **kw).choices] == texts   # seed + i per choice
    full = sum(c.finish_reason == "length" for c in three.choices)   # a sample may hit an end token
    assert 8 * full <= three.usage.completion_tokens <= 24
    # a stop string: the text ends before it, finish_reason stop
    greedy = client.completions.create(model="tiny", prompt="fn add(a: int", max_tokens=12, temperature=0)
    text = greedy.choices[0].text
    stop = next(text[i:i + 2] for i in range(2, len(text) - 1) if text[i:i + 2].isprintable()
                and text[i:i + 2].strip() and "\ufffd" not in text[i:i + 2] and text.find(text[i:i + 2]) == i)
    cut = client.completions.create(model="tiny", prompt="fn add(a: int", max_tokens=12, temperature=0, stop=[stop])
    assert cut.choices[0].finish_reason == "stop" and cut.choices[0].text == text[:text.index(stop)]


@pytest.mark.slow
def test_health_and_stats(llamacpp_server):
    import httpx

    assert httpx.get(llamacpp_server.url + "/health").json()["status"] == "ok"
    stats = httpx.get(llamacpp_server.url + "/stats", headers={"Authorization": f"Bearer {API_KEY}"}).json()
    assert stats["requests"] >= 1 and stats["max_batch_size"] >= 3 and stats["waiting"] == 0   # n=3 decode together


@pytest.mark.slow  # `mens serve` in a subprocess
def test_mens_serve_engine_llamacpp_command(llamacpp_server, gguf_run):
    """As users run it, over the GGUF the fixture exported (served as it is, named after the file)."""
    import os
    import subprocess

    import openai

    from live_server import _free_port, wait_until_healthy

    port = _free_port()
    gguf = gguf_run.parent / f"{gguf_run.name}.f16.gguf"
    proc = subprocess.Popen([sys.executable, "-m", "mens", "serve", str(gguf), "--engine", "llamacpp", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "MENS_QUIET": "0"})
    try:
        wait_until_healthy(proc, port)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        name = gguf.stem
        assert [m.id for m in client.models.list().data] == [name]
        chat = client.chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}], max_tokens=3)
        assert chat.usage.completion_tokens <= 3
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert "llama.cpp, batch ≤ 8" in out and "Traceback" not in out


@pytest.mark.slow
def test_concurrent_greedy_equals_alone(llamacpp_server):
    """Requests decoded together in one llama.cpp batch answer as each does alone."""
    import threading

    client = llamacpp_server.client()
    prompts = ["fn add(a: int", "type Shape =", "component Counter(start: int) {\n    state", "The quick brown"]

    def ask(prompt):
        return client.completions.create(model="tiny", prompt=prompt, max_tokens=40, temperature=0).choices[0].text

    alone = [ask(p) for p in prompts]
    together = [None] * len(prompts)
    threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, ask(prompts[i]))) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert together == alone


@pytest.mark.slow
def test_more_choices_than_rows(llamacpp_server):
    """n above --max-batch: the choices that do not fit start as rows free up."""
    from mens.serve.llamacpp_engine import build_llamacpp_server

    app, engine = build_llamacpp_server(str(llamacpp_server.engine.gguf), name="small", api_key=API_KEY,
                                        max_batch=2)
    server = LiveServer(app, engine)
    try:
        done = server.client().completions.create(model="small", prompt="fn", max_tokens=4, n=5, temperature=1,
                                                  seed=2)
        assert [c.index for c in done.choices] == [0, 1, 2, 3, 4]
        assert engine.snapshot()["max_batch_size"] == 2 and engine.snapshot()["sequences"] == 5
    finally:
        server.close()


@pytest.mark.slow
def test_a_client_gone_frees_its_row(llamacpp_server):
    """A request whose client is gone (its sink fails) leaves the batch at the next step."""
    import time

    from mens.serve.requests import Request, Sampling

    engine = llamacpp_server.engine
    before = engine.snapshot()
    events = []

    def sink(ev):
        events.append(ev)
        raise ConnectionError("client gone")       # Request.emit cancels the request

    engine.submit(Request(engine.tokenizer("fn add(a: int").input_ids, Sampling(max_tokens=300, temperature=0),
                          sink=sink))
    deadline = time.time() + 20
    while engine.snapshot()["cancelled"] == before["cancelled"]:
        assert time.time() < deadline
        time.sleep(0.01)
    after = engine.snapshot()
    assert after["tokens"] - before["tokens"] < 300 and len(events) == 1
