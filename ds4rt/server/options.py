"""The server's command line: ds4-cli's model, sampling and DSpark options (the defaults of
requests that do not set a field), plus the server's own (docs/SERVER.md)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field

from ..cli_common import (
    add_dspark_arguments,
    add_model_arguments,
    add_sampling_arguments,
    float_in,
    generation_options,
    int_in,
)
from ..generation import GenerationOptions

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# ds4-server's compatibility alias: clients configured for ds4 send this model name.
DS4_MODEL_ALIAS = "deepseek-v4-flash"
DEFAULT_MAX_BODY = 16 << 20


@dataclass
class ServerConfig:
    """What shapes the server (the model and support model are loaded separately)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    sessions: int = 1  # generations at once (one session each)
    queue: int = 64  # requests that may wait for a session; more are answered 429
    n_ctx: int = 4096
    max_batch: int | None = None  # None: 32, or the DSpark block + 1 if larger
    served_names: list[str] = field(default_factory=list)  # [] : the file's name + ds4's alias
    api_key: str | None = None
    drain_timeout: float = 30.0  # seconds in-flight requests get to finish at shutdown
    max_body_bytes: int = DEFAULT_MAX_BODY
    defaults: GenerationOptions = field(default_factory=lambda: GenerationOptions(max_tokens=None))
    dspark: bool = True  # decode with the support model unless a request says otherwise
    think: str = "none"
    system: str | None = None
    stats: bool = False  # print ds4's stats line at shutdown
    stats_json: bool = False
    log_level: str = "info"
    reuse_prefix: bool = True  # a prompt that extends a session's context evaluates the rest only

    def names_for(self, model_path: str) -> list[str]:
        if self.served_names:
            return list(self.served_names)
        stem = os.path.basename(model_path)
        stem = stem[:-5] if stem.endswith(".gguf") else stem
        return [stem] + ([DS4_MODEL_ALIAS] if stem != DS4_MODEL_ALIAS else [])


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    add_sampling_arguments(p, n_default=-1)
    add_dspark_arguments(p)
    p.add_argument(
        "--mtp",
        dest="support",
        metavar="SUPPORT",
        help="ds4-server's name for --support (the DSpark support GGUF)",
    )
    g = p.add_argument_group("server")
    g.add_argument("--host", default=DEFAULT_HOST, help=f"address (default {DEFAULT_HOST})")
    g.add_argument(
        "--port", type=int_in(0, 65535), default=DEFAULT_PORT, help=f"(default {DEFAULT_PORT})"
    )
    g.add_argument(
        "--sessions",
        "-np",
        "--parallel",
        "--batched-session",
        dest="sessions",
        type=int_in(1, 1024),
        default=1,
        help="generations at once, one session (context) each (default 1)",
    )
    g.add_argument(
        "--queue",
        type=int_in(0, 1 << 20),
        default=64,
        help="requests that may wait for a session; beyond, 429 at once (default 64)",
    )
    g.add_argument(
        "--served-model-name",
        "--alias",
        dest="served_names",
        action="append",
        default=[],
        metavar="NAME",
        help=f"model name clients use (repeatable; default: the file's name and {DS4_MODEL_ALIAS})",
    )
    g.add_argument(
        "--api-key",
        default=os.environ.get("DS4RT_API_KEY"),
        help="require 'Authorization: Bearer KEY' (default: $DS4RT_API_KEY, else none)",
    )
    g.add_argument(
        "--drain-timeout",
        type=float_in(0.0, 86400.0),
        default=30.0,
        help="seconds in-flight requests get to finish at shutdown (default 30)",
    )
    g.add_argument(
        "--max-body",
        type=int_in(1024, 1 << 34),
        default=DEFAULT_MAX_BODY,
        help=f"largest request body in bytes (default {DEFAULT_MAX_BODY})",
    )
    g.add_argument(
        "--no-prefix-reuse",
        dest="reuse_prefix",
        action="store_false",
        help="evaluate every prompt from an empty context (default: a prompt that extends what "
        "an idle session holds evaluates only the new tokens)",
    )
    g.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        default="info",
        help="uvicorn's log level (default info)",
    )


def config_from_args(args: argparse.Namespace, *, dspark_on: bool) -> ServerConfig:
    defaults = generation_options(args)
    if defaults.unlimited:
        defaults = dataclasses.replace(defaults, max_tokens=None)
    return ServerConfig(
        host=args.host,
        port=args.port,
        sessions=args.sessions,
        queue=args.queue,
        n_ctx=args.ctx,
        max_batch=args.batch,
        served_names=list(args.served_names),
        api_key=args.api_key or None,
        drain_timeout=args.drain_timeout,
        max_body_bytes=args.max_body,
        defaults=defaults,
        dspark=dspark_on,
        think="high" if args.think else "none",
        system=args.system,
        stats=args.stats,
        stats_json=args.stats_json,
        log_level=args.log_level,
        reuse_prefix=args.reuse_prefix,
    )
