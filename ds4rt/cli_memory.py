"""ds4-cli info --memory: the memory plan of a model from its header (ds4rt.memory, docs/CLI.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .cli_common import UsageError, fmt_bytes, int_in
from .memory import memory_plan

GIB = 1 << 30


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ds4-cli info --memory",
        description="What loading a deepseek4 file and one session of --ctx tokens would hold: "
        "weights by kind, session state (window, compressed and indexer rows), scratch, the "
        "DSpark drafter's share (--support) and the Q8->F16 cache per policy. Only the header "
        "is read (a header written alone, as tools/make_big_model.py prepare writes it, will "
        "do). Without PATH: the embedded pair.",
    )
    p.add_argument("path", nargs="?", help="target GGUF or its header (default: the embedded one)")
    p.add_argument("--memory", action="store_true", required=True, help="the memory plan")
    p.add_argument(
        "-c", "--ctx", type=int_in(1, 2**31, "tokens"), default=4096, help="context (4096)"
    )
    p.add_argument(
        "-b", "--batch-size", dest="batch", type=int_in(1, 4096), default=32, help="max_batch (32)"
    )
    p.add_argument("--support", help="DSpark support GGUF (or its header): the drafter's share")
    p.add_argument(
        "--cache-budget",
        type=int_in(0, 2**63, "bytes"),
        default=0,
        metavar="BYTES",
        help="budget of the cache's `on` policy (0: none)",
    )
    p.add_argument("-t", "--threads", type=int_in(0, 4096), default=0, help="CPU threads (0: all)")
    p.add_argument(
        "--available",
        type=float,
        default=None,
        metavar="GIB",
        help="memory of the machine in GiB: says for each case whether it fits",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    return p


def _gib(n: int) -> str:
    return f"{fmt_bytes(n):>12}"


def fits(plan: dict[str, Any], available_gib: float) -> dict[str, Any]:
    """Per case of plan["totals"]: bytes, headroom and whether it fits `available_gib` GiB."""
    avail = int(available_gib * GIB)
    out: dict[str, Any] = {}
    for case, total in plan["totals"].items():
        out[case] = None if total is None else {"bytes": total, "left": avail - total}
        if total is not None:
            out[case]["fits"] = total <= avail
    return out


def print_plan(plan: dict[str, Any], available: float | None) -> None:
    w, s, c = plan["weights"], plan["state"], plan["cache"]
    out = sys.stdout.write
    out(
        f"memory plan of {plan['path']} ({plan['n_layer']} layers; header read, no tensor data): "
        f"one session of {plan['n_ctx']:,} tokens, max_batch {plan['max_batch']}\n"
    )
    out(f"{'weights':<28}{_gib(w['total'])}  ({fmt_bytes(w['owned'])} of it f32 copies)\n")
    for kind, b in sorted(w["by_kind"].items(), key=lambda kv: -kv[1]):
        out(f"  {kind:<26}{_gib(b)}\n")
    out(
        f"{'session state':<28}{_gib(s['total'])}  (fixed {fmt_bytes(s['fixed'])} + "
        f"{fmt_bytes(s['per_1k'])} per 1K tokens)\n"
    )
    out(f"  {'window (raw KV rings)':<26}{_gib(s['window'])}\n")
    out(f"  {'compressor frontiers':<26}{_gib(s['frontiers'])}\n")
    out(
        f"  {'compressed KV rows':<26}{_gib(s['compressed'])}  "
        f"({fmt_bytes(s['compressed_per_1k'])} per 1K tokens)\n"
    )
    out(
        f"  {'indexer rows':<26}{_gib(s['indexer'])}  "
        f"({fmt_bytes(s['indexer_per_1k'])} per 1K tokens)\n"
    )
    out(f"{'scratch (CPU backend)':<28}{_gib(plan['scratch'])}\n")
    d = plan["drafter"]
    if d:
        out(
            f"{'DSpark drafter':<28}{_gib(d['weights'] + d['state'] + d['scratch'])}  (weights "
            f"{fmt_bytes(d['weights'])}, state {fmt_bytes(d['state'])}, scratch "
            f"{fmt_bytes(d['scratch'])})\n"
        )
    out(
        f"{'Q8->F16 cache (GPU)':<28}off 0, auto 0, on {fmt_bytes(c['by_policy']['on'])} "
        f"({c['matrices']} Q8_0 matrices of {fmt_bytes(c['q8_bytes'])}"
        + (f", budget {fmt_bytes(c['budget'])}" if c["budget"] else "")
        + "; the CPU backend holds none)\n"
    )
    verdict = fits(plan, available) if available is not None else {}
    for case, total in plan["totals"].items():
        if total is None:
            continue
        label = "total, " + case.replace("_cache_on", " + cache on").replace("_", " ")
        extra = ""
        if case in verdict:
            v = verdict[case]
            extra = f"  {'fits' if v['fits'] else 'does NOT fit'} in {available:g} GiB "
            extra += f"({v['left'] / GIB:+.2f} GiB left)"
        out(f"{label:<28}{_gib(total)}{extra}\n")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.available is not None and not args.available > 0:
        raise UsageError("--available must be a positive number of GiB")
    plan = memory_plan(
        args.path,
        n_ctx=args.ctx,
        max_batch=args.batch,
        support=args.support,
        cache_budget=args.cache_budget,
        n_threads=args.threads,
    )
    if args.available is not None:
        plan["fits"] = fits(plan, args.available)
        plan["available_gib"] = args.available
    if args.json:
        json.dump(plan, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print_plan(plan, args.available)
    return 0
