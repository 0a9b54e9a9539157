#!/usr/bin/env python3
"""Benchmark of the CPU matmul (ds4rt.ops.matmul) at DeepSeek V4 Flash shapes; prints JSON.

    python tools/bench_matmul.py                         # every computable type, default shapes
    python tools/bench_matmul.py --types Q8_0,IQ2_XXS --shapes 4096x4096 --ntok 1,4,16
    python tools/bench_matmul.py --isa scalar            # force a CPU path (see docs/QUANTS.md)

For each type, shape (rows x cols) and batch size n_tok it reports the median wall time over
--repeats runs (after one warm-up), the weight bytes streamed per second (weights are read once
per call whatever n_tok is), and for n_tok > 1 `batch_over_single` = time(n_tok) / time(1)
(how much dearer a batch is than one token; n_tok for no reuse at all).

Weights are "cold" by default, as in a decode step of the real model: each call uses the next of
several copies of the matrix, together --cold-mb MiB (default 512, far above a last-level
cache), so they stream from memory. --hot reuses one copy (cache-resident when it fits).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from ds4rt import build_info, ops

DEFAULT_SHAPES = "4096x4096,2048x4096"
DEFAULT_NTOK = "1,2,4,6,16"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def time_call(fn, repeats: int) -> float:
    fn()  # warm-up: page-in, scratch growth, thread wake-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", default=",".join(ops.COMPUTE_TYPES))
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="rows x cols list (%(default)s)")
    ap.add_argument("--ntok", default=DEFAULT_NTOK, help="batch sizes (%(default)s)")
    ap.add_argument("--threads", type=int, default=0, help="0 = one per available CPU")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--isa", default="auto", help="CPU path to force (default: auto)")
    ap.add_argument("--cold-mb", type=int, default=512, help="MiB of weight copies to rotate")
    ap.add_argument("--hot", action="store_true", help="reuse one weight copy")
    args = ap.parse_args(argv)

    ops.set_isa(args.isa)
    threads = args.threads if args.threads > 0 else len(os.sched_getaffinity(0))
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    ntoks = [int(v) for v in args.ntok.split(",")]
    results = []
    for name in args.types.split(","):
        for rows, cols in shapes:
            w1 = np.frombuffer(ops.random_weights(name, rows, cols, seed=1), dtype=np.uint8)
            wbytes = w1.size
            copies = 1 if args.hot else max(1, (args.cold_mb << 20) // wbytes)
            ws = np.tile(w1, (copies, 1))
            turn = [0]
            single = None
            for n in ntoks:
                x = np.random.default_rng(2).standard_normal((n, cols)).astype(np.float32)

                def call(ws=ws, turn=turn, name=name, rows=rows, cols=cols, x=x):
                    turn[0] = (turn[0] + 1) % ws.shape[0]
                    return ops.matmul(ws[turn[0]], name, rows, cols, x, threads)

                t = time_call(call, args.repeats)
                if n == 1:
                    single = t
                rec = {
                    "type": name,
                    "rows": rows,
                    "cols": cols,
                    "n_tok": n,
                    "median_ms": round(t * 1e3, 4),
                    "weight_GBps": round(wbytes / t / 1e9, 3),
                    "ms_per_token": round(t * 1e3 / n, 4),
                }
                if single is not None and n > 1:
                    rec["batch_over_single"] = round(t / single, 3)
                results.append(rec)
                print(json.dumps(rec), file=sys.stderr, flush=True)
    out = {
        "command": "python tools/bench_matmul.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cpu": cpu_model(), "cpus_available": len(os.sched_getaffinity(0))},
        "build": build_info(),
        "isa": ops.isa(),
        "threads": threads,
        "repeats": args.repeats,
        "weights": "hot (one copy)" if args.hot else f"cold ({args.cold_mb} MiB of copies rotated)",
        "results": results,
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
