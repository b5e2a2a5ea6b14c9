"""Checks `mens serve` makes before loading a model, each a one-line MensError (exit 2) naming the
flag or file and the fix: the device exists, the port can be bound (the bound socket is handed to
uvicorn, so nothing can take it in between), and the model's and adapters' files are readable —
every JSON file parses and every safetensors header is whole — so a corrupt file is reported by
name instead of as a library traceback halfway through loading.
"""

from __future__ import annotations

import errno
import json
import socket
from pathlib import Path

from mens.errors import MensError

_FIX = "restore the file, or re-run the mens command that wrote it (train, merge)"


def check_device(device: str) -> None:
    """`auto`, `cpu`, `cuda`, `cuda:N`, `mps` — and the device must be present on this machine."""
    import torch

    if device == "auto":
        return
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise MensError(f"unknown device {device!r}", "--device", "use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise MensError(f"--device {device}, but this machine has no usable CUDA device", "--device",
                            "use --device cpu (or auto)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise MensError(f"--device {device}, but this machine has {torch.cuda.device_count()} CUDA device(s)",
                            "--device", f"use cuda:0 … cuda:{torch.cuda.device_count() - 1}")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise MensError(f"--device {device}, but MPS is not available here", "--device", "use --device cpu")
    elif dev.type != "cpu":
        raise MensError(f"unsupported device {device!r}", "--device", "use auto, cpu, cuda or cuda:N")


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, ready for uvicorn (`Server.run(sockets=[…])`)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (socket.gaierror, UnicodeError):
        raise MensError(f"cannot resolve host {host!r}", "--host",
                        "give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise MensError(f"port {port} on {host} is already in use", "--port",
                            "stop the program using it, or choose another --port") from None
        if exc.errno == errno.EACCES:
            raise MensError(f"no permission to listen on port {port}", "--port",
                            "use a port above 1023 (or run with the privilege to bind low ports)") from None
        raise MensError(f"cannot listen on {host}:{port}: {exc.strerror}", "--host",
                        "give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None
    sock.set_inheritable(True)
    return sock


def check_files(path: str | Path) -> None:
    """Every JSON file of a model or run directory parses, every safetensors header is whole.
    Hub ids (not a directory here) are left to the loader."""
    p = Path(path)
    if not p.is_dir():
        return
    for f in sorted(p.glob("*.json")):
        try:
            json.loads(f.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise MensError(f"corrupt JSON file: {_first_line(exc)}", str(f), _FIX) from None
        except OSError as exc:
            raise MensError(f"cannot read the file: {exc.strerror}", str(f), "check its permissions") from None
    for f in sorted(p.glob("*.safetensors")):
        from safetensors import safe_open

        try:
            with safe_open(str(f), framework="pt"):
                pass
        except Exception as exc:  # SafetensorError (not exported under a stable name), OSError
            raise MensError(f"corrupt safetensors file: {_first_line(exc)}", str(f), _FIX) from None


def check_sources(model_or_run: str, adapters: dict[str, str] | None = None) -> None:
    """`check_files` on the model, each adapter run and their bases; every --adapter is a run."""
    from mens.inference import adapter_base, is_adapter_run

    for path in [model_or_run, *(adapters or {}).values()]:
        check_files(path)
        if is_adapter_run(path):
            check_files(adapter_base(path))
    for run in (adapters or {}).values():
        if not is_adapter_run(run):
            raise MensError("not an adapter run (no adapter_config.json)", str(run), "give a run dir of mens train")


def load_checked(model_or_run: str, *, adapters: dict[str, str] | None = None, device: str = "auto",
                 dtype: str | None = None, name: str | None = None):
    """`mens.inference.load_model` after `check_device` and `check_sources`; any other failure
    to load is a one-line error naming MODEL_OR_RUN instead of a traceback."""
    from mens.inference import load_model

    check_device(device)
    check_sources(model_or_run, adapters)
    try:
        return load_model(model_or_run, adapters=adapters, device=device, dtype=dtype, name=name)
    except MensError:
        raise
    except Exception as exc:
        raise MensError(f"cannot load the model: {type(exc).__name__}: {_first_line(exc)}", str(model_or_run),
                        "check the model's and adapters' files (mens --debug serve … shows the traceback)") from exc


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
