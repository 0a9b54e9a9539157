"""ds4-cli bench: one command for the benchmark of ds4rt.bench (docs/CLI.md, docs/PERFORMANCE.md
"One benchmark command")."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from . import bench
from .cli_common import UsageError, float_in, int_in
from .model import BACKENDS, CACHE_POLICIES, NUMERICS

MAX_PASS = 4096  # a session's largest max_batch


def parse_sizes(text: str, what: str, lo: int = 1, hi: int = MAX_PASS) -> list[int]:
    """'1-17', '1,2,4,8' or '1-4,8,16' as sorted distinct integers in [lo, hi]."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise UsageError(f"{what}: empty item in {text!r}")
        a, sep, b = part.partition("-")
        try:
            first, last = (int(a), int(b)) if sep else (int(a), int(a))
        except ValueError:
            raise UsageError(f"{what}: {part!r} is not an integer or a range N-M") from None
        if first > last:
            raise UsageError(f"{what}: the range {part!r} is empty (start after end)")
        if first < lo or last > hi:
            raise UsageError(f"{what}: {part!r} is outside [{lo}, {hi}]")
        out.update(range(first, last + 1))
    return sorted(out)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ds4-cli bench",
        description="Benchmark ds4rt on one model: decode and prefill tokens/s against context "
        "length, verify(n) against one decode beside the byte floor, the DSpark proposal cost, "
        "plain decoding against DSpark off/adaptive/always (acceptance, stage times, greedy "
        "outputs checked identical), peak memory. Medians over --repeats with min/max and "
        "quartiles, within --budget-s. Without -m: the embedded pair.",
    )
    g = p.add_argument_group("model")
    g.add_argument("-m", "--model", help="target GGUF (default: the embedded pair)")
    g.add_argument("--support", help="DSpark support GGUF (default without -m: the embedded one)")
    g.add_argument("--no-dspark", action="store_true", help="no support model: plain passes only")
    g.add_argument("--backend", choices=BACKENDS, default="auto")
    g.add_argument("-t", "--threads", type=int_in(0, 4096), default=0, help="CPU threads (0: all)")
    g.add_argument("--cache", choices=CACHE_POLICIES, default="auto", help="Q8->F16 cache policy")
    g.add_argument("--numerics", choices=NUMERICS, default="official")
    w = p.add_argument_group("what to measure")
    w.add_argument(
        "--verify",
        default="1-17",
        metavar="SIZES",
        help="pass sizes n of verify(n): N-M ranges and N, comma separated (default 1-17)",
    )
    w.add_argument(
        "--verify-ctx", type=int_in(1, 2**20), default=64, help="context before them (64)"
    )
    w.add_argument(
        "--ctx",
        default="64,256,1024",
        metavar="LENGTHS",
        help="context lengths of the speed curve (default 64,256,1024)",
    )
    w.add_argument("--prefill", type=int_in(1, 2**20), default=128, help="prefill tokens (128)")
    w.add_argument("-n", "--tokens", type=int_in(1, 2**20), default=64, help="generated (64)")
    w.add_argument("--prompt-tokens", type=int_in(2, 2**20), default=32, help="prompt (32)")
    w.add_argument(
        "--modes",
        default=",".join(bench.DEFAULT_MODES),
        help="DSpark modes besides plain decoding: off, adaptive, always, oracle, wrong "
        "(default off,adaptive,always; 'plain' alone: none)",
    )
    w.add_argument("-r", "--repeats", type=int_in(1, 1000), default=5, help="samples (5)")
    w.add_argument(
        "--budget-s",
        type=float_in(0.0, 1e7),
        default=120.0,
        help="time budget in seconds (120): it cuts repeats (every item keeps one sample); "
        "items are skipped, and the report says so, only past 1.5 x the budget + 30 s",
    )
    w.add_argument(
        "--bandwidth",
        type=float_in(1e-3, 1e6),
        default=None,
        metavar="GB/S",
        help="memory bandwidth for the byte floor (default: measured by a copy)",
    )
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    o.add_argument("--out", metavar="FILE", help="write the JSON report to FILE")
    o.add_argument("--plot", metavar="FILE.png", help="write a PNG plot (needs matplotlib)")
    o.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    return p


class Bar:
    """A one-line progress bar on stderr: the part being measured and the time used of the
    budget."""

    WIDTH = 30

    def __init__(self, budget_s: float):
        self.budget = max(budget_s, 1e-9)
        self.t0 = time.monotonic()
        self.last = 0.0

    def __call__(self, label: str, frac: float) -> None:
        now = time.monotonic()
        if now - self.last < 0.1 and frac < 1.0:
            return
        self.last = now
        used = min((now - self.t0) / self.budget, 1.0)
        fill = int(used * self.WIDTH)
        bar = "#" * fill + "-" * (self.WIDTH - fill)
        sys.stderr.write(f"\rbench [{bar}] {now - self.t0:6.1f}s  {label:<22}\x1b[K")
        sys.stderr.flush()

    def finish(self) -> None:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def config_from(args: argparse.Namespace) -> bench.BenchConfig:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if modes == ["plain"]:
        modes = []
    bad = [m for m in modes if m not in bench.MODES]
    if bad:
        raise UsageError(f"--modes: unknown mode {bad[0]!r} (modes: {', '.join(bench.MODES)})")
    if args.no_dspark:
        if args.support:
            raise UsageError("--no-dspark and --support contradict each other")
        modes = [m for m in modes if m in ("oracle", "wrong")]
    support = args.support
    if args.model and not support and any(m in ("off", "adaptive", "always") for m in modes):
        raise UsageError(
            "the DSpark modes with -m need --support FILE (or --no-dspark, or --modes plain)"
        )
    if args.support and not args.model:
        raise UsageError("--support needs -m (without -m the embedded pair is used)")
    return bench.BenchConfig(
        target=args.model,
        support=None if args.no_dspark else support,
        backend=args.backend,
        threads=args.threads,
        cache=args.cache,
        numerics=args.numerics,
        repeats=args.repeats,
        budget_s=args.budget_s,
        verify_sizes=parse_sizes(args.verify, "--verify"),
        verify_ctx=args.verify_ctx,
        contexts=parse_sizes(args.ctx, "--ctx", 2, 2**24),
        prefill=args.prefill,
        prompt_tokens=args.prompt_tokens,
        tokens=args.tokens,
        modes=modes,
        bandwidth_gbs=args.bandwidth,
    )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.no_dspark and args.model is None:
        args.support = None
    cfg = config_from(args)
    if cfg.target is None and args.no_dspark:
        cfg.support = None
        cfg.target = bench.data.default_target()
    if args.plot:
        try:
            bench.require_matplotlib()  # before the benchmark, not after it
        except bench.PlotUnavailable as e:
            raise UsageError(str(e)) from None
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = Bar(cfg.budget_s) if show else None
    try:
        report: dict[str, Any] = bench.run(cfg, progress=bar)
    except ValueError as e:
        raise UsageError(str(e)) from None
    finally:
        if bar is not None:
            bar.finish()
    report["command"] = "ds4-cli bench " + " ".join(argv)
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.plot:
        bench.plot(report, args.plot)
    if args.json:
        sys.stdout.write(text + "\n")
    else:
        print(bench.summary(report))
    return 0 if report["greedy_identical"] else 1
