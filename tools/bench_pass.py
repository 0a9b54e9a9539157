#!/usr/bin/env python3
"""Cost of one target pass (decode = n 1, verify sizes n > 1) on the installed ds4rt: a thin
wrapper over ds4rt.bench.verify_costs (`ds4-cli bench` measures this and more).

    python tools/bench_pass.py [--target T] [--sizes 1,2,4,8,17] [--repeats R] [--threads K]

Prints JSON: per pass size the median milliseconds of a pass after a 32-token context, in
process CPU time (robust on a shared machine; with --threads 1 it is the pass's own work) and
in wall time. Run it from two environments (e.g. before/after a change) to compare them.
"""

from __future__ import annotations

import argparse
import json

import ds4rt
from ds4rt import bench, data


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", default=data.default_target())
    ap.add_argument("--sizes", default="1,2,4,8,17")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--passes", type=int, default=3, help="passes timed per repeat")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    m = ds4rt.Model(args.target, n_threads=args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    v = bench.verify_costs(m, sizes, ctx=32, repeats=args.repeats, passes=args.passes)
    out = {
        "command": "bench_pass.py",
        "build": ds4rt.build_info(),
        "threads": args.threads,
        "results": [
            {"n": r["n"], "cpu_ms": r["cpu_ms"]["median"], "wall_ms": r["ms"]["median"]}
            for r in v["rows"]
        ],
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
