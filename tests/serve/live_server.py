"""A real mens server (uvicorn in a thread on a free 127.0.0.1 port), for the serve tests.
Kept out of conftest.py so test files can import it by a unique module name."""

import socket
import threading
import time

API_KEY = "test-key"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_healthy(proc, port: int, timeout: float = 60) -> None:
    """Wait for a `mens serve` child process on `port` to answer /health with 200; fail with its
    output if it exits first, or after `timeout` seconds."""
    import httpx

    deadline = time.time() + timeout
    while True:
        assert proc.poll() is None, proc.stdout.read()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.time() < deadline, "mens serve did not come up"
        time.sleep(0.2)


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
