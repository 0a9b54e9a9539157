"""``ds4-server`` and ``ds4-cli serve``: load the model (and support model), serve until
SIGINT/SIGTERM, drain, and, with --stats, print the DSpark statistics of all requests as ds4
does when its server stops (docs/SERVER.md)."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from .. import data
from ..cli_common import (
    EXIT_ERROR,
    EXIT_USAGE,
    UsageError,
    apply_environment,
    check_llama_cpp_flags,
    fmt_bytes,
    load,
)
from ..errors import Ds4rtError


def build_parser(prog: str) -> argparse.ArgumentParser:
    from .options import add_arguments

    p = argparse.ArgumentParser(
        prog=prog,
        description="OpenAI-compatible server on ds4rt: /v1/chat/completions, /v1/completions "
        "(streaming), /v1/models, /health, /metrics (docs/SERVER.md). Without -m it serves the "
        "embedded default pair with DSpark.",
    )
    add_arguments(p)
    return p


def stats_text(spec_total: dict[str, object]) -> str:
    """The summed statistics as one ``key=value`` line (ds4's names)."""
    parts = []
    for k, v in spec_total.items():
        if isinstance(v, dict):
            v = ",".join(f"{kk}:{vv}" for kk, vv in v.items())
        elif isinstance(v, list):
            v = ",".join(f"{i}:{x}" for i, x in enumerate(v) if x) or "-"
        elif isinstance(v, float):
            v = f"{v:.3f}"
        if k == "propose":  # ds4's line marks where its timers (milliseconds) begin
            parts.append("time_ms")
        parts.append(f"{k}={v}")
    return "ds4rt-server: DSpark stats (all requests) " + " ".join(parts)


def serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from . import ServerEngine, create_app
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        raise UsageError(
            f"serving needs the 'server' extra ({missing} is missing): pip install 'ds4rt[server]'"
        ) from None
    from .options import config_from_args

    apply_environment(args)
    # A support model the server knows of (--support, or the embedded pair's) is loaded even
    # when DSpark is off by default (--no-dspark, or -m without --dspark), so that requests
    # can still ask for it ("dspark": true); --dspark / the embedded pair make it the default.
    default_on = data.dspark_default(args.model, args.dspark, args.no_dspark)
    if args.support or not args.model:
        args.dspark, args.no_dspark = True, False
    loaded = load(args)
    with loaded.model as model:
        config = config_from_args(args, dspark_on=default_on and loaded.dspark is not None)
        engine = ServerEngine(model, loaded.dspark, config)
        app = create_app(engine)
        mem = model.info["memory"]
        per_session = mem["state_fixed"] + mem["state_per_1k"] * engine.n_ctx // 1024
        print(
            f"ds4rt-server: {model.path} as {', '.join(engine.names)}; {config.sessions} "
            f"session(s) of {engine.n_ctx} tokens ({fmt_bytes(per_session)} of state each), "
            f"queue {config.queue}, DSpark "
            + (
                "on"
                if config.dspark
                else "off by default (a request may ask for it)"
                if loaded.dspark is not None
                else "off (no support model)"
            ),
            file=sys.stderr,
        )
        threads = int(model.info["n_threads"])
        cores = os.cpu_count() or 1
        if config.sessions > 1 and config.sessions * threads > cores:
            print(
                f"ds4rt-server: note: {config.sessions} sessions x {threads} threads each on "
                f"{cores} cores: passes running at once compete for the cores; "
                f"-t {max(1, cores // config.sessions)} may serve more tokens/s "
                "(docs/SERVER.md, Concurrency)",
                file=sys.stderr,
            )
        uvicorn.run(
            app,
            host=config.host,
            port=config.port,
            log_level=config.log_level,
            timeout_graceful_shutdown=math.ceil(config.drain_timeout),
        )
        if loaded.dspark is not None and config.stats:
            print(stats_text(engine.metrics.spec_total), file=sys.stderr)
        if loaded.dspark is not None and config.stats_json:
            json.dump(engine.metrics.spec_total, sys.stderr)
            sys.stderr.write("\n")
    return 0


def main(argv: list[str] | None = None, prog: str = "ds4-server") -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    try:
        check_llama_cpp_flags(argv, parser)
        return serve(parser.parse_args(argv))
    except UsageError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Ds4rtError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
