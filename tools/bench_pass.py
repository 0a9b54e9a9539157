#!/usr/bin/env python3
"""Cost of one target pass (decode = n 1, verify sizes n > 1) on the installed ds4rt.

    python tools/bench_pass.py [--target T] [--sizes 1,2,4,8,17] [--repeats R] [--threads K]

Prints JSON: per pass size the median milliseconds of a pass after a 32-token context, in
process CPU time (robust on a shared machine; with --threads 1 it is the pass's own work) and
in wall time. Run it from two environments (e.g. before/after a change) to compare them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import ds4rt
from ds4rt import data


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", default=data.default_target())
    ap.add_argument("--sizes", default="1,2,4,8,17")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--passes", type=int, default=64, help="tokens evaluated per repeat")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    m = ds4rt.Model(args.target, n_threads=args.threads)
    ctx = [0] + np.random.default_rng(0).integers(3, m.n_vocab, 31).tolist()
    out = {
        "command": "bench_pass.py",
        "build": ds4rt.build_info(),
        "threads": args.threads,
        "results": [],
    }
    for n in (int(s) for s in args.sizes.split(",")):
        cpu, wall = [], []
        for _ in range(args.repeats):
            s = m.session(n_ctx=1024, max_batch=max(n, 1))
            s.eval(ctx)
            k = max(args.passes // n, 1)
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(k):
                s.eval(ctx[:n])
            cpu.append((time.process_time() - c0) / k * 1e3)
            wall.append((time.perf_counter() - w0) / k * 1e3)
        out["results"].append(
            {"n": n, "cpu_ms": statistics.median(cpu), "wall_ms": statistics.median(wall)}
        )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
