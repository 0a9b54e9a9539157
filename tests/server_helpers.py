"""What the server tests share: a ds4rt server (ds4rt.server) on the embedded default pair,
in process (Starlette's test client) or on a real uvicorn bound to a free loopback port."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import ds4rt

uvicorn = __import__("uvicorn")
from ds4rt.server import ServerConfig, ServerEngine, create_app  # noqa: E402


def engine(model: Any, dspark: Any, **config: Any) -> ServerEngine:
    return ServerEngine(model, dspark, ServerConfig(**config))


class LiveServer:
    """uvicorn serving an engine's app on 127.0.0.1:<free port>, in a thread."""

    def __init__(self, eng: ServerEngine, drain_timeout: float = 10.0):
        self.engine = eng
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(eng),
            log_level="warning",
            timeout_graceful_shutdown=drain_timeout,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the test server did not stop"

    def __enter__(self) -> LiveServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sse_events(lines: Any) -> list[Any]:
    """The JSON documents of an SSE body (an iterable of lines), "[DONE]" as the string."""
    out: list[Any] = []
    for line in lines:
        if isinstance(line, bytes):
            line = line.decode()
        if not line.startswith("data: "):
            assert line.strip() == "", f"not an SSE data line: {line!r}"
            continue
        data = line[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def chat_ids(model: ds4rt.Model, text: str) -> list[int]:
    return model.encode_chat([{"role": "user", "content": text}])


def metric(text: str, name: str, **labels: str) -> float:
    """One sample's value from a Prometheus text page (0 when the sample is absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0
