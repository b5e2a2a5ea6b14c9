"""A real mens server (uvicorn in a thread, free 127.0.0.1 port) over a tiny model with two adapters."""

import socket
import threading
import time

import pytest

API_KEY = "test-key"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, app, engine):
        import uvicorn

        self.engine, self.port = engine, _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.05)

    def client(self, key=API_KEY):
        from openai import OpenAI

        return OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=60)

    def close(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.engine.stop()


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
