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


@pytest.fixture(scope="session")
def long_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with an 8192-token window: the tiny model decodes ~1000 tokens/s, so a
    request for 8000 tokens holds its batch row for seconds — long enough to queue others behind it."""
    import json
    import shutil

    model_dir = tmp_path_factory.mktemp("long-window") / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 8192}))
    return model_dir
