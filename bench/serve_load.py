"""Serving throughput: 8 concurrent streaming clients against `mens serve` vs sequential HF `generate`.

    .venv/bin/python bench/serve_load.py [--layers 2] [--clients 8] [--tokens 64] [--rounds 2]
                                         [--no-grammar] [--llamacpp [--quant f16 q8_0 …]]
                                         [--json-out bench/results/serve_load.json]

The model is Qwen2.5-0.5B's published shape (`../shared/assets/model-configs/qwen2.5-0.5b.json`)
cut to `--layers`, random weights, the real Qwen2 tokenizer (151,936 ids) — its cost is real, its
text is not. The same 8 prompts (Vox code prefixes), greedy, `--tokens` new tokens each:

- peer: one process calls `model.generate` for each prompt in turn, as a naive server would.
  Every request arrives at t=0, so its time to first token includes the requests before it.
- mens: `mens serve` in a subprocess; 8 `openai` clients start together (a barrier) and stream
  `/v1/completions`. Time to first token is from each client's send to its first text chunk.
- mens --grammar vox: the same load with constrained decoding (whole mode: the prompt is Vox
  code, so every token is checked against the Vox parser) — the grammar's tokens/s cost.
- with --llamacpp, also `mens serve --engine llamacpp` under the same load, over the model
  exported to GGUF (`--quant`, f16 by default, one row per quant; the export is timed apart):
  llama.cpp batching the 8 clients as the mens engine does, side by side with the mens engine
  from the same invocation. Both take OMP_NUM_THREADS threads when it is set.

Aggregate tokens/s = all generated tokens ÷ wall time of the whole load; the best of `--rounds`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSETS = REPO.parent / "shared" / "assets"
if not ASSETS.is_dir() and (REPO / ".assets").is_dir():  # on the GPU machine: scripts/gpu_prepare's copy
    ASSETS = REPO / ".assets"
sys.path.insert(0, str(REPO / "src"))

PROMPTS = [
    "fn add(a: int, b: int) to int {\n    return ",
    "// Sum a list of numbers.\nfn total(xs: list[int]) to int {\n    let mut acc = 0\n    for x in xs {\n        acc = ",
    "type Shape =\n    | Circle(r: int)\n    | Rect(w: int, h: int)\n\nfn area(s: Shape) to int {\n    match s {\n        ",
    "fn greet(name: str) to str {\n    return ",
    "fn max(a: int, b: int) to int {\n    if a > b {\n        return ",
    "// Count down from n.\nfn countdown(n: int) to int {\n    let mut i = n\n    while i > 0 {\n        i = ",
    "fn is_even(n: int) to bool {\n    return ",
    "fn clamp(x: int, lo: int, hi: int) to int {\n    if x < lo {\n        return ",
]


def build_model(out: Path, layers: int) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if (out / "config.json").is_file():
        return out
    cfg = AutoConfig.from_pretrained(ASSETS / "model-configs" / "qwen2.5-0.5b.json")
    cfg.num_hidden_layers = layers
    cfg.max_window_layers = min(getattr(cfg, "max_window_layers", layers), layers)
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = cfg.layer_types[:layers]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(ASSETS / "qwen2-tokenizer").save_pretrained(out)
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# ---------------------------------------------------------------- peer: sequential HF generate

DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def run_sequential(model_dir: Path, prompts: list[str], tokens: int, device: str = "cpu", dtype: str = "f32") -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.generation.streamers import BaseStreamer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, DTYPES[dtype])).to(device).eval()
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    class FirstToken(BaseStreamer):
        def __init__(self):
            self.calls, self.first = 0, None

        def put(self, value):
            self.calls += 1
            if self.calls == 2 and self.first is None:  # call 1 is the prompt
                sync()
                self.first = time.perf_counter()

        def end(self):
            pass

    model.generate(**tok("warm up", return_tensors="pt").to(device), max_new_tokens=2, do_sample=False)
    ttft, generated = [], 0
    start = time.perf_counter()
    with torch.inference_mode():
        for p in prompts:
            enc = tok(p, return_tensors="pt").to(device)
            streamer = FirstToken()
            out = model.generate(**enc, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                                 streamer=streamer, pad_token_id=tok.pad_token_id or tok.eos_token_id)
            generated += out.shape[1] - enc.input_ids.shape[1]
            ttft.append(streamer.first - start)
    sync()
    wall = time.perf_counter() - start
    return {"tokens": generated, "wall_s": wall, "ttft": ttft}


# ---------------------------------------------------------------- mens serve under concurrent load

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model_dir: Path, *extra: str, name: str = "bench", log: Path | None = None):
    """`mens serve MODEL_DIR --name NAME EXTRA…` on a free port, waited for until /health answers;
    its output goes to `log` (else only stderr is kept, for the error message)."""
    import httpx

    port = free_port()
    cmd = [sys.executable, "-m", "mens", "serve", str(model_dir), "--name", name, "--port", str(port), *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MENS_QUIET": "1",
           # keep the caller's path: on the GPU machine the packages the image lacks live there
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    out = log.open("w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT if log else subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while True:
        if proc.poll() is not None:
            said = log.read_text() if log else proc.stderr.read()
            raise SystemExit(f"mens serve exited: {said[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        if time.time() > deadline:
            proc.kill()
            raise SystemExit("mens serve did not come up in 180 s")
        time.sleep(0.3)


def run_concurrent(url: str, prompts: list[str], tokens: int) -> dict:
    import httpx
    from openai import OpenAI

    client = OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)
    client.completions.create(model="bench", prompt="warm up", max_tokens=2, temperature=0)
    before = httpx.get(url + "/stats").json()
    barrier = threading.Barrier(len(prompts) + 1)
    ttft, counts, errors = [0.0] * len(prompts), [0] * len(prompts), []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            sent = time.perf_counter()
            stream = client.completions.create(model="bench", prompt=prompts[i], max_tokens=tokens, temperature=0,
                                               stream=True, stream_options={"include_usage": True})
            for chunk in stream:
                if chunk.choices and chunk.choices[0].text and not ttft[i]:
                    ttft[i] = time.perf_counter() - sent
                if chunk.usage:
                    counts[i] = chunk.usage.completion_tokens
        except Exception as exc:  # noqa: BLE001 — reported, not hidden
            errors.append(f"client {i}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise SystemExit("serve_load: " + "; ".join(errors))
    after = httpx.get(url + "/stats").json()
    steps = after["decode_steps"] - before["decode_steps"]
    return {"tokens": sum(counts), "wall_s": wall, "ttft": ttft, "decode_steps": steps,
            "mean_batch": round((after["tokens"] - before["tokens"]) / max(steps, 1), 2),
            "grammar_rejections": after["grammar_rejections"] - before["grammar_rejections"],
            "grammar_fallbacks": after["grammar_fallbacks"] - before["grammar_fallbacks"]}


def serve_round(model_dir: Path, prompts: list[str], tokens: int, rounds: int, grammar: str | None,
                *extra: str) -> dict:
    proc, url = start_server(model_dir, "--max-batch", str(len(prompts)), *(["--grammar", grammar] if grammar else []),
                             *extra)
    try:
        return max((run_concurrent(url, prompts, tokens) for _ in range(rounds)), key=lambda r: r["tokens"] / r["wall_s"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def summary(name: str, r: dict) -> dict:
    return {"name": name, "tokens": r["tokens"], "wall_s": round(r["wall_s"], 3),
            "tokens_per_s": round(r["tokens"] / r["wall_s"], 2),
            "ttft_p50_s": round(pct(r["ttft"], 0.5), 3), "ttft_p95_s": round(pct(r["ttft"], 0.95), 3),
            **{k: r[k] for k in ("decode_steps", "mean_batch", "grammar_rejections", "grammar_fallbacks") if k in r}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2, help="layers of the Qwen2.5-0.5B shape to keep (2)")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients = prompts (8)")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per request (64)")
    ap.add_argument("--rounds", type=int, default=2, help="timed rounds per setting; the best counts (2)")
    ap.add_argument("--no-grammar", action="store_true", help="skip the --grammar vox run")
    ap.add_argument("--llamacpp", action="store_true", help="also `mens serve --engine llamacpp` (needs the "
                    "export extra)")
    ap.add_argument("--quant", nargs="+", default=["f16"], choices=["f16", "q8_0", "q4_k_m"],
                    help="the GGUF(s) --llamacpp serves, one row each (f16)")
    ap.add_argument("--model-dir", type=Path, help="reuse/keep the random model here")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda: the sequential peer and every "
                    "mens serve run (passed as --device) use it")
    ap.add_argument("--dtype", choices=sorted(DTYPES), help="weights' type for both sides (default: f32 on "
                    "CPU, bf16 on CUDA, as mens serve picks)")
    ap.add_argument("--json-out", type=Path, default=REPO / "bench" / "results" / "serve_load.json")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dtype = args.dtype or ("bf16" if args.device.startswith("cuda") else "f32")
    on = ("--device", args.device, "--dtype", dtype)  # mens serve gets the same device and type

    prompts = (PROMPTS * (args.clients // len(PROMPTS) + 1))[:args.clients]
    model_dir = build_model(args.model_dir or Path(tempfile.mkdtemp(prefix="serve-load-")) / "model", args.layers)

    seq = min((run_sequential(model_dir, prompts, args.tokens, args.device, dtype) for _ in range(args.rounds)),
              key=lambda r: r["wall_s"])
    rows = [summary("HF generate, sequential", seq),
            summary(f"mens serve, {args.clients} streaming clients", serve_round(model_dir, prompts, args.tokens,
                                                                                  args.rounds, None, *on))]
    export_s = {}
    for quant in args.quant if args.llamacpp else []:
        gguf = model_dir.parent / f"{model_dir.name}.{quant}.gguf"
        if not gguf.is_file():
            from mens.export.export import export

            start = time.perf_counter()
            export(model_dir, gguf, quant=quant)
            export_s[quant] = round(time.perf_counter() - start, 1)
        rows.append(summary(f"mens serve --engine llamacpp ({quant}), {args.clients} clients",
                            serve_round(gguf, prompts, args.tokens, args.rounds, None, "--engine", "llamacpp")))
    if not args.no_grammar:
        rows.append(summary(f"mens serve --grammar vox, {args.clients} clients",
                            serve_round(model_dir, prompts, args.tokens, args.rounds, "vox", *on)))
    base = rows[0]["tokens_per_s"]
    for row in rows:
        row["ratio_vs_sequential"] = round(row["tokens_per_s"] / base, 2)
        if row is not rows[1] and row["name"].startswith("mens serve"):
            row["ratio_vs_mens_serve"] = round(row["tokens_per_s"] / rows[1]["tokens_per_s"], 3)

    import torch

    result = {"bench": "serve_load", "model": f"qwen2.5-0.5b shape, {args.layers} layers, random weights, {dtype}",
              "clients": args.clients, "tokens_per_request": args.tokens, "rounds": args.rounds,
              "device": args.device, "torch_threads": torch.get_num_threads(),
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "gguf_export_s": export_s,
              "cpu_count": os.cpu_count(), "platform": platform.platform(), "rows": rows,
              "command": "python bench/serve_load.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(f"{'setting':44} {'tokens':>6} {'wall s':>7} {'tok/s':>8} {'× seq':>6} {'TTFT p50':>9} {'TTFT p95':>9}")
    for r in rows:
        print(f"{r['name']:44} {r['tokens']:>6} {r['wall_s']:>7.2f} {r['tokens_per_s']:>8.1f} "
              f"{r['ratio_vs_sequential']:>6.2f} {r['ttft_p50_s']:>9.3f} {r['ttft_p95_s']:>9.3f}")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
