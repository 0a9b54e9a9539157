"""What the server tests share: a ds4rt server (ds4rt.server) on the embedded default pair,
in process (Starlette's test client) or on a real uvicorn bound to a free loopback port."""

from __future__ import annotations

import json
from typing import Any

import ds4rt
from ds4rt.server import ServerConfig, ServerEngine
from ds4rt.server.background import BackgroundServer


def engine(model: Any, dspark: Any, **config: Any) -> ServerEngine:
    return ServerEngine(model, dspark, ServerConfig(**config))


# a free port of 127.0.0.1, in a thread; stop() drains like SIGTERM
LiveServer = BackgroundServer


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
