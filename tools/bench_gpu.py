#!/usr/bin/env python3
"""Decode, verify and prefill cost of the target on the CPU and GPU backends of the installed
ds4rt, on one GGUF (docs/GPU.md, "On the GPU machine"; docs/PERFORMANCE.md records results):
a sweep over backends, cache policies and GPU graphs of ds4rt.bench's measurements (one
backend at a time: `ds4-cli bench --backend B --cache P`).

    python tools/bench_gpu.py --target FILE.gguf [--backends cpu,cuda] [--sizes 1,2,4,6,8,16]
                              [--prefill 512] [--repeats 5] [--budget-s 120] [--cache off,on]
                              [--graphs 0,1] [--out OUT.json]

Per backend, after a 64-token context: decode (one token per pass, its logits row read back),
verify passes of n tokens (all n logits rows read back, as speculative verification does), and
one prefill pass of --prefill tokens (the logits of its last row only). Each figure is the
median over --repeats repeats (each repeat times several passes and takes their mean), in wall
microseconds per pass and per token. A backend whose cost is too high for the time budget
(e.g. the CPU on a real-width file) is cut short and says so ("truncated": true) rather than
being left out. --cache runs each backend once per Q8->F16 cache policy listed (docs/CACHE.md,
"On a GPU backend the cache does real work": on against off is the measurement `auto`
waits for); --graphs runs each once with the GPU backend's captured graphs off (0) and on
(1) (DS4RT_GPU_GRAPHS, docs/GPU.md "Graphs"). Prints JSON (and writes it to --out).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import ds4rt
from ds4rt import bench


def bench_backend(path, backend, cache, sizes, prefill, repeats, budget_s):
    """One backend and cache policy: ds4rt.bench's verify passes and prefill, in this tool's
    JSON (microseconds)."""
    t_load = time.perf_counter()
    m = ds4rt.Model(path, backend=backend, cache=cache)
    load_s = time.perf_counter() - t_load
    start = time.perf_counter()
    out = {
        "backend": backend,
        "cache_policy": cache,
        "device": m.info["device"],
        "load_s": load_s,
        "memory": m.info["memory"],
        "cache": m.info["cache"],
    }
    end = start + budget_s
    v = bench.verify_costs(m, sizes, ctx=64, repeats=repeats, passes=3, deadline=end, hard=end)
    out["truncated"] = v["truncated"]
    d = v["decode_ms"]["median"] * 1e3
    out["verify"] = [
        {
            "n": r["n"],
            "us_per_pass": r["ms"]["median"] * 1e3,
            "us_per_token": r["ms"]["median"] * 1e3 / r["n"],
            "samples": r["ms"]["n"],
            "vs_decode": r["ratio"],
        }
        for r in v["rows"]
    ]
    out["decode_us_per_token"] = d
    if prefill and not out["truncated"] and time.perf_counter() < end:
        p = bench.prefill_cost(
            m, prefill, repeats=max(1, min(repeats, 3)), max_batch=prefill, deadline=end
        )
        out["prefill"] = {
            "tokens": prefill,
            "ms": p["ms"]["median"],
            "tokens_per_s": p["tokens_per_s"]["median"],
        }
    m.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", required=True)
    ap.add_argument("--backends", default="cpu,auto")
    ap.add_argument("--sizes", default="1,2,4,6,8,16")
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=120.0, help="per backend and policy")
    ap.add_argument("--cache", default="auto", help="Q8->F16 cache policies, comma separated")
    ap.add_argument("--graphs", default="0", help="GPU graphs off (0) / on (1), comma separated")
    ap.add_argument("--out")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    res = {
        "command": "bench_gpu.py " + " ".join(sys.argv[1:]),
        "build": ds4rt.build_info(),
        "target": args.target,
        "results": [],
    }
    for b in args.backends.split(","):
        for graphs in args.graphs.split(",") if b != "cpu" else ["0"]:
            os.environ["DS4RT_GPU_GRAPHS"] = graphs  # read when a session's context is made
            for cache in args.cache.split(","):
                try:
                    r = bench_backend(
                        args.target, b, cache, sizes, args.prefill, args.repeats, args.budget_s
                    )
                except ds4rt.errors.Ds4rtError as e:
                    r = {"backend": b, "cache_policy": cache, "error": f"{type(e).__name__}: {e}"}
                r["graphs"] = graphs == "1"
                res["results"].append(r)
    text = json.dumps(res, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
