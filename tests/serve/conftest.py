"""A real mens server (uvicorn in a thread, free 127.0.0.1 port) over a tiny model with two adapters."""

import pytest

from live_server import API_KEY, LiveServer  # noqa: E402


@pytest.fixture(scope="session")
def serve_runs(make_adapter_run):
    return {"alpha": make_adapter_run("serve-alpha", seed=11), "beta": make_adapter_run("serve-beta", seed=12)}


@pytest.fixture(scope="session")
def live_server(tiny_model_dir, serve_runs):
    from mens.serve.app import build_server

    app, engine = build_server(str(tiny_model_dir), adapters={k: str(v) for k, v in serve_runs.items()},
                               name="tiny", api_key=API_KEY, max_batch=8, queue_size=32, device="cpu")
    server = LiveServer(app, engine)
    yield server
    server.close()
