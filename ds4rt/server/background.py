"""The server on uvicorn in a background thread of the calling process, bound to a free port
of the loopback address unless told otherwise: for tests, benchmarks and hosts that embed it.

    with BackgroundServer(engine) as srv:
        requests.post(srv.url + "/v1/completions", json={...})
"""

from __future__ import annotations

import math
import socket
import threading
import time
from typing import Any

import uvicorn

from .app import create_app

__all__ = ["BackgroundServer"]


class BackgroundServer:
    """uvicorn serving ``create_app(engine)``; ``stop()`` drains it as SIGTERM would."""

    def __init__(
        self,
        engine: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        drain_timeout: float = 10.0,
        log_level: str = "warning",
        start_timeout: float = 30.0,
    ):
        self.engine = engine
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        self.host = host
        self.port = int(sock.getsockname()[1])
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(
            create_app(engine),
            log_level=log_level,
            timeout_graceful_shutdown=math.ceil(drain_timeout),
        )
        self.server = uvicorn.Server(config)
        # uvicorn installs no signal handlers outside the main thread
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, name="ds4rt-server", daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + start_timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.server.should_exit = True
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.01)

    def stop(self, timeout: float = 60.0) -> None:
        """Stops accepting, lets in-flight requests finish (drain_timeout), frees the
        sessions; returns when done."""
        self.server.should_exit = True
        self.thread.join(timeout=timeout)
        if self.thread.is_alive():
            raise RuntimeError(f"the server on {self.url} did not stop within {timeout} s")

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
