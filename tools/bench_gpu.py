#!/usr/bin/env python3
"""Decode, verify and prefill cost of the target on the CPU and GPU backends of the installed
ds4rt, on one GGUF (docs/GPU.md, "On the GPU machine"; docs/PERFORMANCE.md records results).

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
import statistics
import sys
import time

import numpy as np

import ds4rt


def timed_passes(s, ctx, chunk, k):
    """Mean wall seconds of k passes of `chunk` after `ctx`, each pass rolled back."""
    s.reset()
    s.eval(ctx)
    total = 0.0
    for _ in range(k):
        t0 = time.perf_counter()
        s.logits(chunk)
        total += time.perf_counter() - t0
        s.truncate(len(ctx))
    return total / k


def bench_backend(path, backend, cache, sizes, prefill, repeats, budget_s):
    t_load = time.perf_counter()
    m = ds4rt.Model(path, backend=backend, cache=cache)
    load_s = time.perf_counter() - t_load
    rng = np.random.default_rng(0)
    ctx = [0] + rng.integers(3, m.n_vocab, 63).tolist()
    start = time.perf_counter()
    out = {
        "backend": backend,
        "cache_policy": cache,
        "device": m.info["device"],
        "load_s": load_s,
        "memory": m.info["memory"],
        "cache": m.info["cache"],
        "truncated": False,
        "verify": [],
    }
    s = m.session(n_ctx=max(1024, prefill + len(ctx) + 64), max_batch=max(max(sizes), prefill, 1))

    def over():
        return time.perf_counter() - start > budget_s

    for n in sizes:
        chunk = rng.integers(3, m.n_vocab, n).tolist()
        timed_passes(s, ctx, chunk, 1)  # warm-up (first use of a shape)
        med = []
        for _ in range(repeats):
            med.append(timed_passes(s, ctx, chunk, 3))
            if over():
                break
        row = {
            "n": n,
            "us_per_pass": statistics.median(med) * 1e6,
            "us_per_token": statistics.median(med) * 1e6 / n,
            "samples": len(med),
        }
        out["verify"].append(row)
        if n == 1:
            out["decode_us_per_token"] = row["us_per_pass"]
        if over():
            out["truncated"] = True
            break
    if prefill and not out["truncated"]:
        chunk = rng.integers(3, m.n_vocab, prefill).tolist()
        med = []
        for _ in range(max(1, min(repeats, 3))):
            s.reset()
            t0 = time.perf_counter()
            s.eval(chunk)
            s.current_logits()
            med.append(time.perf_counter() - t0)
            if over():
                out["truncated"] = True
                break
        out["prefill"] = {
            "tokens": prefill,
            "ms": statistics.median(med) * 1e3,
            "tokens_per_s": prefill / statistics.median(med),
        }
    if out.get("decode_us_per_token"):
        d = out["decode_us_per_token"]
        for row in out["verify"]:
            row["vs_decode"] = row["us_per_pass"] / d
    s.close()
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
