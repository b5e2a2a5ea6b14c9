"""Fault injection: kill -9 (and SIGTERM) at random points of training, corpus stages and the
pipeline, then rerun, many times over; count what a kill may never leave behind.

    .venv/bin/python bench/kill_loops.py                        # the figures in docs/performance.md
    .venv/bin/python bench/kill_loops.py --train 2 --corpus 4 --pipeline 1 --seed 7   # a quick look

Per loop it reports: orphaned processes (anything left in the killed command's process group),
half-written outputs (a final output file that exists right after the kill), temp files still
there after the next run, and whether the rerun's result equals an uninterrupted run's (training:
every step's loss; corpus stages: the output bytes; pipeline: the corpus, the mix and the final
adapter). Every figure should be 0 mismatches / 0 leftovers. The kill points are random (seeded):
the fast, fixed-point versions of these checks are tests/train/test_train_kill.py and
tests/corpus/test_kill.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests"), str(REPO / "tests" / "train")]

from tiny import build_model, build_tokenizer  # noqa: E402
from test_train_kill import _leftovers as temps, _step_losses as step_losses  # noqa: E402  (the kill tests' readers)
from train_helpers import train_args, write_pairs  # noqa: E402

ENV = dict(os.environ, MENS_QUIET="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
TRAIN = dict(backend="lora", max_steps=6, lr=5e-3, lora_dropout=0.1, seq_len=128, save_interval=1, keep_checkpoints=2)


def mens(*argv, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mens", *map(str, argv)], env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, **kw)


def group_left(pgid: int) -> list[int]:
    """Live (non-zombie) processes still in process group `pgid`."""
    left = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = raw[raw.rindex(")") + 2:].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                left.append(int(entry))
    return left


def kill_at(proc: subprocess.Popen, when, sig: int = signal.SIGKILL, timeout: float = 600) -> dict:
    """Wait until `when()` is true (or the process ends), kill it with `sig`, then count what is
    left of its group after a grace second (and clean that up)."""
    deadline = time.time() + timeout
    while proc.poll() is None and not when() and time.time() < deadline:
        time.sleep(0.01)
    landed = proc.poll() is None
    if landed:
        os.kill(proc.pid, sig)
    proc.wait()
    time.sleep(1.0)
    left = group_left(proc.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return {"landed": landed, "orphans": len(left), "code": proc.returncode}


def sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


# ---------------------------------------------------------------- training

def train_loop(rng: random.Random, work: Path, model: Path, data: Path, reference: dict[int, float]) -> dict:
    run = work / f"train-{rng.random():.6f}"
    argv = train_args(model, data, run, **TRAIN)
    kills, orphans = 0, 0
    for _ in range(rng.randint(1, 3)):
        target = min(len(step_losses(run)) + rng.randint(0, 2), TRAIN["max_steps"] - 1)
        delay = rng.uniform(0.0, 0.4)   # lands between steps, inside checkpoint writes, or in the final save
        proc = mens(*argv)
        seen: dict = {}

        def when():
            if len(step_losses(run)) >= target:
                seen.setdefault("t", time.time())
                return time.time() - seen["t"] >= delay
            return False

        res = kill_at(proc, when)
        kills += res["landed"]
        orphans += res["orphans"]
    done = subprocess.run([sys.executable, "-m", "mens", *map(str, argv)], env=ENV, capture_output=True, text=True)
    got = step_losses(run)
    exact = done.returncode == 0 and all(abs(got.get(s, float("nan")) - reference[s]) <= 1e-6 for s in reference)
    return {"kills": kills, "orphans": orphans, "temps_after_rerun": len(temps(run)), "resume_exact": exact}


# ---------------------------------------------------------------- corpus stages

def corpus_case(rng: random.Random, work: Path, pairs: Path, tree: Path, name: str) -> dict:
    out = work / f"{name}-{rng.random():.6f}"
    out.mkdir()
    argv = {"validate": ["corpus", "validate", pairs, "-o", out / "v.jsonl", "--quarantine", out / "q.jsonl",
                         "--workers", "2"],
            "extract": ["corpus", "extract", tree, "-o", out / "units.jsonl", "--workers", "2"]}[name]
    final = [out / "v.jsonl", out / "q.jsonl"] if name == "validate" else [out / "units.jsonl"]
    sig = rng.choice([signal.SIGKILL, signal.SIGKILL, signal.SIGTERM])
    delay = rng.uniform(0.3, 2.0)
    t0 = time.time()
    res = kill_at(mens(*argv), lambda: time.time() - t0 >= delay, sig)
    half = sum(p.exists() for p in final) if res["landed"] else 0
    subprocess.run([sys.executable, "-m", "mens", *map(str, argv)], env=ENV, capture_output=True, check=True)
    return {"kills": int(res["landed"]), "orphans": res["orphans"], "half_written": half,
            "temps_after_rerun": len(temps(out)), "output": [sha(p) for p in final]}


# ---------------------------------------------------------------- pipeline

def pipeline_project(root: Path) -> Path:
    import yaml

    (root / "src").mkdir(parents=True)
    for f in sorted((REPO / "examples" / "vox").rglob("*.vox"))[:12]:
        (root / "src" / f.name).write_text(f.read_text())
    policy = yaml.safe_load((REPO / "examples" / "gates.yaml").read_text())
    for gate in policy["gates"]:
        gate["blocking"] = False
    (root / "gates.yaml").write_text(yaml.safe_dump(policy))
    config = {"work_dir": "work", "seed": 0, "corpus": {"sources": ["src"]}, "generate_data": {"count": 40},
              "scratch": {"scratch_shape": "tiny", "max_steps": 6, "seq_len": 128, "eval_interval": 0,
                          "save_interval": 2},
              "train": {"max_steps": 4, "seq_len": 128, "eval_interval": 0, "save_interval": 1},
              "bench": {"path": str(REPO / "examples" / "bench"), "max_new_tokens": 8, "limit": 4},
              "gate": {"policy": "gates.yaml"}}
    (root / "pipeline.yaml").write_text(yaml.safe_dump(config))
    return root / "pipeline.yaml"


def pipeline_outputs(work: Path) -> dict:
    return {"pairs": sha(work / "corpus" / "pairs.valid.jsonl"), "mix": sha(work / "data" / "train.jsonl"),
            "adapter": sha(work / "run" / "adapter_model.safetensors")}


def pipeline_loop(rng: random.Random, work: Path) -> dict:
    """An uninterrupted run first (outputs embed the project's paths, so the reference is made in
    the same place), then a fresh work dir killed 1-2 times at random points of its run, rerun."""
    import shutil

    root = work / f"pipeline-{rng.random():.6f}"
    config = pipeline_project(root)
    t0 = time.time()
    subprocess.run([sys.executable, "-m", "mens", "pipeline", "--config", str(config)], env=ENV, capture_output=True)
    took, reference = time.time() - t0, pipeline_outputs(root / "work")
    shutil.rmtree(root / "work")
    kills, orphans = 0, 0
    for _ in range(rng.randint(1, 2)):
        delay = rng.uniform(0.5, 0.95 * took)
        t0 = time.time()
        res = kill_at(mens("pipeline", "--config", config), lambda: time.time() - t0 >= delay)
        kills += res["landed"]
        orphans += res["orphans"]
    done = subprocess.run([sys.executable, "-m", "mens", "pipeline", "--config", str(config)], env=ENV,
                          capture_output=True, text=True)
    got = pipeline_outputs(root / "work")
    return {"kills": kills, "orphans": orphans, "rerun_exit": done.returncode,
            "temps_after_rerun": len(temps(root / "work")), "same_outputs": got == reference,
            "differs": sorted(k for k in got if got[k] != reference[k])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=int, default=6, help="training loops (each 1-3 kills, then a rerun)")
    ap.add_argument("--corpus", type=int, default=12, help="corpus-stage kills (validate and extract)")
    ap.add_argument("--pipeline", type=int, default=3, help="pipeline loops (each 1-2 kills, then a rerun)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out", default=str(REPO / "bench" / "results" / "kill_loops.json"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="mens-kill-"))
    model = build_model(work / "model", "qwen2", tokenizer_dir=build_tokenizer(work / "tok"))
    data = write_pairs(work / "data", n=40)
    report: dict = {"seed": args.seed, "train": [], "corpus": [], "pipeline": []}

    if args.train:
        ref_run = work / "train-reference"
        subprocess.run([sys.executable, "-m", "mens", *map(str, train_args(model, data, ref_run, **TRAIN))],
                       env=ENV, check=True, capture_output=True)
        reference = step_losses(ref_run)
        for i in range(args.train):
            report["train"].append(train_loop(rng, work, model, data, reference))
            print("train", i, report["train"][-1], flush=True)
    if args.corpus:
        sys.path.insert(0, str(REPO / "tests" / "corpus"))
        from test_kill import _big_pairs, _big_tree  # the corpus kill tests' inputs

        pairs, tree = _big_pairs(work / "pairs.jsonl", 24_000), _big_tree(work / "tree", 5_000)
        want = {}
        for name, argv, outs in (("validate", ["corpus", "validate", pairs, "-o", work / "ref-v.jsonl", "--quarantine",
                                               work / "ref-q.jsonl"], ["ref-v.jsonl", "ref-q.jsonl"]),
                                 ("extract", ["corpus", "extract", tree, "-o", work / "ref-u.jsonl"], ["ref-u.jsonl"])):
            subprocess.run([sys.executable, "-m", "mens", *map(str, argv)], env=ENV, check=True, capture_output=True)
            want[name] = [sha(work / o) for o in outs]
        for i in range(args.corpus):
            name = rng.choice(["validate", "extract"])
            row = corpus_case(rng, work, pairs, tree, name)
            row["same_output"] = row.pop("output") == want[name]
            row["stage"] = name
            report["corpus"].append(row)
            print("corpus", i, row, flush=True)
    if args.pipeline:
        for i in range(args.pipeline):
            report["pipeline"].append(pipeline_loop(rng, work))
            print("pipeline", i, report["pipeline"][-1], flush=True)

    rows = [r for part in ("train", "corpus", "pipeline") for r in report[part]]
    report["totals"] = {
        "kills": sum(r["kills"] for r in rows), "orphans": sum(r["orphans"] for r in rows),
        "half_written": sum(r.get("half_written", 0) for r in rows),
        "temps_after_rerun": sum(r["temps_after_rerun"] for r in rows),
        "mismatches": sum(not r.get("resume_exact", r.get("same_output", r.get("same_outputs", True))) for r in rows),
    }
    Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["totals"]))


if __name__ == "__main__":
    main()
