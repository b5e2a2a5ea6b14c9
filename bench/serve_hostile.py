"""Hostile load on a local `mens serve`: mixed bad and good requests from many clients, bursts and
hang-ups, bounded in count. What it reports is what issue 15 asks of the server:

- 5xx answers to client mistakes (target 0) and tracebacks in the server's log (target 0);
- whether the engine still answers afterwards (/health 200 and a normal completion), and that
  nothing is left queued or running for nobody (/stats `waiting` 0 once the load is over);
- latency p50/p95 of the good requests under this load, and the server's memory after a warm-up
  of 8 good requests and after the load.

    .venv/bin/python bench/serve_hostile.py [--requests 600] [--clients 16] [--bursts 2] [--burst-size 64]
                                            [--layers 1] [--seed 0] [--json-out bench/results/serve_hostile.json]

The model is bench/serve_load.py's: Qwen2.5-0.5B's published shape cut to `--layers`, random
weights, the real Qwen2 tokenizer (so tokenising a huge prompt costs what it really costs). The
server runs with its defaults (batch 8, queue 64, 2 MiB bodies) and an API key.

Each client draws, per request, from a fixed seeded schedule: ~45% client mistakes (the cases in
BAD: broken JSON, deep nesting, lone surrogates, out-of-range numbers, 200 prompts × n=2, a 3 MB
body, a 1.5 MB prompt, a wrong key …), ~40% good requests (chat or completion, 8-16 tokens,
some streamed, some with "bearer" in lower case), ~15% hang-ups (a stream closed after its first
chunk, a request abandoned after 0.3 s). Between thirds of the schedule, `--burst-size` good
requests are sent at once (429s there are the queue doing its job, not errors).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import REPO, build_model, pct, start_server  # noqa: E402

KEY = "hostile-bench-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
P = {"model": "m", "prompt": "fn add(a: int, b: int) to int {", "max_tokens": 8}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "Write a Vox function that adds two ints."}],
        "max_tokens": 8}


def _j(obj) -> bytes:
    return json.dumps(obj).encode()


# name → (method, path, body bytes or None, headers); every one is a client mistake: a 4xx is right
BAD = {
    "broken JSON": ("POST", "/v1/completions", b'{"model": "m", "prompt": ', AUTH),
    "deep nesting": ("POST", "/v1/completions", b'{"model": "m", "prompt": ' + b"[" * 100_000 + b"]" * 100_000
                     + b"}", AUTH),
    "lone surrogate": ("POST", "/v1/chat/completions",
                       b'{"model": "m", "messages": [{"role": "user", "content": "a\\ud800"}]}', AUTH),
    "invalid UTF-8": ("POST", "/v1/completions", b'{"model": "m", "prompt": "\xff\xfe"}', AUTH),
    "not an object": ("POST", "/v1/completions", b"[1, 2, 3]", AUTH),
    "empty prompt": ("POST", "/v1/completions", _j({**P, "prompt": ""}), AUTH),
    "seed 2**64": ("POST", "/v1/completions", _j({**P, "seed": 2**64}), AUTH),
    "temperature 9": ("POST", "/v1/completions", _j({**P, "temperature": 9}), AUTH),
    "temperature NaN": ("POST", "/v1/completions", b'{"model": "m", "prompt": "x", "temperature": NaN}', AUTH),
    "top_p 0": ("POST", "/v1/completions", _j({**P, "top_p": 0}), AUTH),
    "n 0": ("POST", "/v1/chat/completions", _j({**CHAT, "n": 0}), AUTH),
    "n 1000": ("POST", "/v1/completions", _j({**P, "n": 1000}), AUTH),
    "max_tokens -1": ("POST", "/v1/chat/completions", _j({**CHAT, "max_tokens": -1}), AUTH),
    "max_tokens 10**9": ("POST", "/v1/completions", _j({**P, "max_tokens": 10**9}), AUTH),
    "logprobs 99": ("POST", "/v1/completions", _j({**P, "logprobs": 99}), AUTH),
    "200 prompts × n=2": ("POST", "/v1/completions", _j({**P, "prompt": ["fn"] * 200, "n": 2}), AUTH),
    "100 prompts (> queue)": ("POST", "/v1/completions", _j({**P, "prompt": ["fn"] * 100}), AUTH),
    "3 MB body": ("POST", "/v1/completions", _j({**P, "prompt": "fn " * 1_000_000}), AUTH),
    "1.5 MB prompt": ("POST", "/v1/completions", _j({**P, "prompt": "let x = 1\n" * 150_000}), AUTH),
    "wrong type": ("POST", "/v1/completions", _j({**P, "prompt": {"a": 1}}), AUTH),
    "bad role": ("POST", "/v1/chat/completions", _j({**CHAT, "messages": [{"role": "root", "content": "x"}]}), AUTH),
    "unknown model": ("POST", "/v1/completions", _j({**P, "model": "gpt-9"}), AUTH),
    "wrong key": ("POST", "/v1/completions", _j(P), {"Authorization": "Bearer nope"}),
    "no key on /stats": ("GET", "/stats", None, {}),
    "no key on /openapi.json": ("GET", "/openapi.json", None, {}),
    "GET a POST route": ("GET", "/v1/completions", None, AUTH),
    "unknown route": ("POST", "/v2/whatever", b"{}", AUTH),
}
HEAVY = {"3 MB body", "1.5 MB prompt", "deep nesting"}   # drawn less often: they cost the client too


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.bad = Counter()          # (case, status)
        self.good = Counter()         # status
        self.good_latency: list[float] = []
        self.hangups = Counter()
        self.transport_errors = Counter()

    def add(self, kind: str, key, latency: float | None = None):
        with self.lock:
            getattr(self, kind)[key] += 1
            if latency is not None:
                self.good_latency.append(latency)


def good_request(client: httpx.Client, rng: random.Random, tally: Tally) -> None:
    body = dict(rng.choice([P, CHAT]))
    body["max_tokens"] = rng.randint(8, 16)
    body["temperature"] = rng.choice([0, 0.7, 1.0])
    path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
    headers = {"Authorization": f"bearer {KEY}"} if rng.random() < 0.2 else AUTH
    start = time.perf_counter()
    try:
        if rng.random() < 0.4:
            with client.stream("POST", path, json={**body, "stream": True}, headers=headers) as r:
                text = "".join(r.iter_lines())
                ok = r.status_code == 200 and text.rstrip().endswith("data: [DONE]") and '"error"' not in text
                status = r.status_code if ok or r.status_code != 200 else "200 with a stream error"
        else:
            r = client.post(path, json=body, headers=headers)
            status = r.status_code
        tally.add("good", status, time.perf_counter() - start if status == 200 else None)
    except httpx.HTTPError as exc:
        tally.add("transport_errors", f"good: {type(exc).__name__}")


def bad_request(client: httpx.Client, case: str, tally: Tally) -> None:
    method, path, body, headers = BAD[case]
    try:
        r = client.request(method, path, content=body, headers={**headers, "Content-Type": "application/json"})
        shaped = "error" in r.json() and set(r.json()["error"]) == {"message", "type", "param", "code"}
        tally.add("bad", (case, r.status_code if shaped else f"{r.status_code} (not OpenAI-shaped)"))
    except (httpx.HTTPError, ValueError) as exc:
        tally.add("transport_errors", f"{case}: {type(exc).__name__}")


def hang_up(url: str, rng: random.Random, tally: Tally) -> None:
    if rng.random() < 0.5:                      # a stream closed after its first chunk
        with httpx.Client(base_url=url, timeout=60) as c:
            with c.stream("POST", "/v1/completions", json={**P, "max_tokens": 64, "stream": True}, headers=AUTH) as r:
                next(r.iter_lines(), None)
        tally.add("hangups", "stream closed after the first chunk")
    else:                                       # a request abandoned by its client's timeout
        try:
            r = httpx.post(url + "/v1/chat/completions", json={**CHAT, "max_tokens": 64}, headers=AUTH, timeout=0.3)
            tally.add("hangups", f"answered {r.status_code} within the 0.3 s timeout")
        except httpx.TimeoutException:
            tally.add("hangups", "abandoned after 0.3 s")


def schedule(n: int, seed: int) -> list[tuple[str, str | None]]:
    rng = random.Random(seed)
    light = [c for c in BAD if c not in HEAVY]
    out = []
    for _ in range(n):
        x = rng.random()
        if x < 0.45:
            out.append(("bad", rng.choice(list(HEAVY)) if rng.random() < 0.1 else rng.choice(light)))
        elif x < 0.85:
            out.append(("good", None))
        else:
            out.append(("hangup", None))
    return out


def run_load(url: str, plan: list, clients: int, bursts: int, burst_size: int, seed: int) -> tuple[Tally, float]:
    tally, cursor, lock = Tally(), iter(enumerate(plan)), threading.Lock()

    def client_loop(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        with httpx.Client(base_url=url, timeout=300) as client:
            while True:
                with lock:
                    item = next(cursor, None)
                if item is None:
                    return
                _, (kind, case) = item
                if kind == "bad":
                    bad_request(client, case, tally)
                elif kind == "good":
                    good_request(client, rng, tally)
                else:
                    hang_up(url, rng, tally)

    def burst(k: int) -> None:
        rng = random.Random(seed + 7 * k)
        barrier = threading.Barrier(burst_size)

        def one():
            barrier.wait()
            with httpx.Client(base_url=url, timeout=300) as client:
                good_request(client, rng, tally)

        threads = [threading.Thread(target=one) for _ in range(burst_size)]
        [t.start() for t in threads]
        [t.join() for t in threads]

    start = time.perf_counter()
    workers = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    [t.start() for t in workers]
    for k in range(bursts):                     # bursts land while the mixed load runs
        while sum(tally.bad.values()) + sum(tally.good.values()) + sum(tally.hangups.values()) \
                < len(plan) * (k + 1) / (bursts + 1) and any(t.is_alive() for t in workers):
            time.sleep(0.1)
        burst(k)
    [t.join() for t in workers]
    return tally, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--bursts", type=int, default=2)
    ap.add_argument("--burst-size", type=int, default=64)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-dir", type=Path)
    ap.add_argument("--json-out", type=Path, default=REPO / "bench" / "results" / "serve_hostile.json")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="serve-hostile-"))
    model_dir = build_model(args.model_dir or work / "model", args.layers)
    log = work / "server.log"
    proc, url = start_server(model_dir, "--api-key", KEY, name="m", log=log)
    try:
        with httpx.Client(base_url=url, timeout=300) as client:   # warm-up: memory is compared from here
            for i in range(8):
                good_request(client, random.Random(i), Tally())
        rss_before = rss_mb(proc.pid)
        tally, wall = run_load(url, schedule(args.requests, args.seed), args.clients, args.bursts,
                               args.burst_size, args.seed)
        time.sleep(1.0)                          # let hung-up rows be noticed and dropped
        stats = httpx.get(url + "/stats", headers=AUTH, timeout=30).json()
        health = httpx.get(url + "/health", timeout=30).status_code
        after = httpx.post(url + "/v1/completions", headers=AUTH, timeout=120, json={**P, "temperature": 0})
        rss_after = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    server_log = log.read_text(errors="replace")
    bad_5xx = sum(v for (case, status), v in tally.bad.items() if not str(status).startswith("4"))
    lat = tally.good_latency
    result = {
        "requests": args.requests, "clients": args.clients, "bursts": f"{args.bursts} × {args.burst_size}",
        "wall_s": round(wall, 1),
        "client_mistakes": sum(tally.bad.values()), "client_mistakes_not_4xx": bad_5xx,
        "client_mistake_statuses": {f"{case} → {status}": v for (case, status), v in sorted(tally.bad.items(),
                                                                                          key=str)},
        "good": sum(tally.good.values()), "good_statuses": {str(k): v for k, v in tally.good.items()},
        "good_latency_p50_s": round(pct(lat, 0.5), 2) if lat else None,
        "good_latency_p95_s": round(pct(lat, 0.95), 2) if lat else None,
        "hangups": dict(tally.hangups), "transport_errors": dict(tally.transport_errors),
        "tracebacks_in_server_log": server_log.count("Traceback"),
        "health_after": health, "answers_after": after.status_code == 200 and bool(after.json().get("choices")),
        "waiting_after": stats["waiting"], "cancelled": stats["cancelled"],
        "rejected_queue_full": stats["rejected_queue_full"],
        "rss_mb_before": round(rss_before), "rss_mb_after": round(rss_after),
    }
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if result["tracebacks_in_server_log"]:
        print(server_log[-4000:], file=sys.stderr)
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    ok = (bad_5xx == 0 and not result["tracebacks_in_server_log"] and health == 200 and result["answers_after"]
          and stats["waiting"] == 0 and not tally.transport_errors)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
