"""`--nproc N`: train data-parallel in N local processes without typing torchrun.

This starts the N ranks the way `torchrun --standalone --nproc_per_node N` does — the same
RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT environment, which `prepare.open_run`
reads to join the process group — but keeps mens's own contract: a one-line error and exit code
2 for bad input (checked here before any rank starts), 130 after Ctrl+C, and a failing rank's
own last words instead of torchrun's ChildFailedError traceback. Each rank runs
`mens train --config RESOLVED.yaml`, so every rank trains exactly the config this process
resolved. On a CPU each rank gets cores / N threads (one per rank on a 2-core machine): small
models use two processes far better than two threads of one (docs/training.md).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from mens.errors import MensError
from mens.train.config import TrainConfig

if TYPE_CHECKING:
    from mens.train.probe import Probe


def launches_ranks(cfg: TrainConfig) -> bool:
    """Whether this process starts the ranks: `nproc` > 1 and it is not itself one of them
    (a rank, or a run under the user's own torchrun, has WORLD_SIZE set)."""
    return cfg.nproc > 1 and "WORLD_SIZE" not in os.environ


def check(cfg: TrainConfig) -> Probe:
    """What would stop every rank at once, said once, before any starts; the probe of this machine."""
    from mens.train import preflight
    from mens.train.probe import probe

    info = probe(cfg.device)
    preflight.check_device(info.device)
    if info.device == "mps":
        raise MensError("--nproc does not run on mps (one Apple GPU, no process group backend)", "--nproc",
                        "drop --nproc, or pass --device cpu")
    if info.device == "cuda":
        import torch

        if cfg.nproc > torch.cuda.device_count():
            raise MensError(f"--nproc {cfg.nproc} but {torch.cuda.device_count()} GPU(s) here", "--nproc",
                            f"pass --nproc {torch.cuda.device_count()} or less (one rank per GPU)")
    preflight.check_run_dir(cfg.output_dir, model=cfg.model)
    preflight.check_bench(cfg.bench)
    if cfg.data_dir is not None or not cfg.raw_text:  # its warnings are rank 0's to say, when it reads it
        preflight.check_data(cfg.data_dir, cfg.lenient, warn_small=False)
    if cfg.curriculum_steps:
        preflight.check_data(cfg.curriculum_data, cfg.lenient, flag="--curriculum-data", warn_small=False)
    return info


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cfg: TrainConfig, force_restart: bool = False) -> int:
    """Run `cfg` in cfg.nproc local ranks; returns the exit code (0, 2, 130, or a failed rank's)."""
    import yaml

    info = check(cfg)
    n = cfg.nproc
    fd, config_path = tempfile.mkstemp(prefix="mens-nproc.", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg.to_dict(), fh, sort_keys=False)
    cmd = [sys.executable, "-m", "mens", "train", "--config", config_path] + (["--force-restart"] if force_restart else [])
    port = _free_port()
    threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // n))
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    try:
        for rank in range(n):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS=threads,
                       # every rank computes in the dtype this process measured pays (probe.cpu_bf16)
                       MENS_CPU_BF16="1" if info.device == "cpu" and info.bf16 else "0")
            if rank == 0:  # rank 0 writes the run and speaks for it
                procs.append(subprocess.Popen(cmd, env=env))
                continue
            log = Path(tempfile.mkstemp(prefix=f"mens-rank{rank}.", suffix=".log")[1])
            logs.append(log)
            with open(log, "wb") as out:
                procs.append(subprocess.Popen(cmd, env={**env, "MENS_QUIET": "1"}, stdout=out, stderr=out))
        return _wait(procs, logs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for path in [Path(config_path), *logs]:
            path.unlink(missing_ok=True)


def _wait(procs: list[subprocess.Popen], logs: list[Path]) -> int:
    """Wait for every rank. SIGTERM here goes on to the ranks (each saves a checkpoint); Ctrl+C
    reaches them from the terminal. A rank that fails while others run stops them: the rest would
    wait on it in their next collective until gloo's timeout."""
    import time

    interrupted = False

    def forward(signum, _frame):
        nonlocal interrupted
        interrupted = True  # once: a rank's second SIGTERM ends it at once (mens.train.runtime.StopFlag)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed and not interrupted:
                forward(signal.SIGTERM, None)
            try:
                time.sleep(0.2)
            except KeyboardInterrupt:  # the ranks got the same Ctrl+C and are saving a checkpoint
                interrupted = True
    finally:
        signal.signal(signal.SIGTERM, previous)
    codes = [p.returncode for p in procs]
    if codes[0] != 0:
        return codes[0]
    for rank, code in enumerate(codes[1:], start=1):
        if code != 0:  # rank 0 ended well but another did not: its last lines say why
            tail = logs[rank - 1].read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
            print("\n".join([f"mens: rank {rank} of {len(procs)} failed (exit code {code}):", *tail]),
                  file=sys.stderr)
            return code
    return 0
