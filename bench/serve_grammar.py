"""Grammar mode's effect on the held-out bench: pass@1, parse rate, viable-prefix rate and tokens/s,
with `--grammar vox` on (whole mode: the response is the code) and off, on the same server.

    .venv/bin/python bench/serve_grammar.py [--model RUN_OR_MODEL] [--bench examples/bench]
                                            [--limit 16] [--tokens 64] [--clients 8]

Without `--model` it uses serve_load.py's random 2-layer Qwen2.5-0.5B-shaped model: its pass@1 is 0
either way, but the rates still show what the constraint guarantees (every response lexes and
parses as far as it goes) and what it costs. Give a trained run for the pass@1 figure that matters.
Each task is one greedy chat request; 8 clients at a time. Writes bench/results/serve_grammar.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from serve_load import build_model, start_server  # noqa: E402


def run_mode(url: str, prompts: list[str], mode: str, tokens: int, clients: int) -> tuple[list[str], dict]:
    from openai import OpenAI

    client = OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=900)

    def ask(prompt: str):
        r = client.chat.completions.create(model="bench", messages=[{"role": "user", "content": prompt}],
                                           max_tokens=tokens, temperature=0, extra_body={"grammar": mode})
        return r.choices[0].message.content, r.usage.completion_tokens

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(ask, prompts))
    wall = time.perf_counter() - start
    generated = sum(n for _, n in results)
    return [text for text, _ in results], {"tokens": generated, "wall_s": round(wall, 2),
                                           "tokens_per_s": round(generated / wall, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="run dir or model dir (default: serve_load's random model)")
    ap.add_argument("--bench", default=str(REPO / "examples" / "bench"))
    ap.add_argument("--limit", type=int, default=16, help="tasks (16)")
    ap.add_argument("--tokens", type=int, default=64, help="max new tokens per response (64)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--json-out", type=Path, default=REPO / "bench" / "results" / "serve_grammar.json")
    args = ap.parse_args(argv)

    from mens.evaluate.bench import code_of, score_bench
    from mens.evaluate.tasks import load_tasks
    from mens.lang import get_pack
    from mens.grammar import Constraint

    model = Path(args.model) if args.model else build_model(Path(tempfile.gettempdir()) / "serve-load-model", 2)
    tasks = load_tasks(args.bench, limit=args.limit)
    prompts = [task.full_prompt(base) for task, base in tasks]
    constraint = Constraint(get_pack("vox"))
    proc, url = start_server(model, "--max-batch", str(args.clients), "--grammar", "vox")
    rows = []
    try:
        for mode in ("off", "whole"):
            responses, speed = run_mode(url, prompts, mode, args.tokens, args.clients)
            scores = score_bench([t for t, _ in tasks], [[r] for r in responses], k=1)
            # Viable: the pack's viable_prefix, a keyword cut off mid-word by max_tokens judged by the code before it.
            viable = sum(constraint.allows(code_of(r), prefix="") for r in responses) / len(responses)
            rows.append({"grammar": "off" if mode == "off" else "vox (whole)", "pass_at_1": round(scores["pass_at_1"], 3),
                         "parse_rate": round(scores["parse_rate"], 3), "viable_prefix_rate": round(viable, 3),
                         **speed})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    rows[1]["tokens_per_s_ratio"] = round(rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"], 3)

    print(f"{'grammar':12} {'pass@1':>7} {'parses':>7} {'viable':>7} {'tokens':>7} {'tok/s':>7}")
    for r in rows:
        print(f"{r['grammar']:12} {r['pass_at_1']:>7.3f} {r['parse_rate']:>7.3f} {r['viable_prefix_rate']:>7.3f} "
              f"{r['tokens']:>7} {r['tokens_per_s']:>7.1f}")
    result = {"bench": "serve_grammar", "model": str(model) if args.model else "random 2-layer qwen2.5-0.5b shape",
              "tasks": len(tasks), "tokens_per_response": args.tokens, "rows": rows,
              "command": "python bench/serve_grammar.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
