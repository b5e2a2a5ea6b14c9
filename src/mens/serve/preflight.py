"""Checks `mens serve` makes before loading a model, each a one-line MensError (exit 2) naming the
flag or file and the fix: the device exists and the model's and adapters' files are readable
(`mens.hf.check_device` / `check_files`, shared with train, bench and merge), and the port can be
bound (the bound socket is handed to uvicorn, so nothing can take it in between).
"""

from __future__ import annotations

import errno
import socket

from mens.errors import MensError
from mens.hf import check_device, check_files, first_line

__all__ = ["bind", "check_device", "check_files", "check_sources", "load_checked"]


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
        raise MensError(f"cannot load the model: {type(exc).__name__}: {first_line(exc)}", str(model_or_run),
                        "check the model's and adapters' files (mens --debug serve … shows the traceback)") from exc
