#!/usr/bin/env python3
"""Benchmark of speculative decoding against plain decoding, in one run, on one machine: a thin
wrapper over ds4rt.bench.spec_modes (`ds4-cli bench` measures this and more).

    python tools/bench_spec.py [--target T --support S] [--tokens N] [--repeats R] [--threads K]

Prints JSON: per configuration the median wall time of a greedy generation of N tokens after a
fixed prompt, tokens/s, the ratio to plain decoding measured in the same run, and the
speculative counters (proposed, accepted, cycles). Greedy output is checked to be identical to
plain decoding's for every configuration (exit 1 if not). Configurations:

  plain             ds4rt_generate without a drafter
  dspark-always     DSpark, scheduler "always", threshold 0 (every cycle drafts a full block)
  dspark-adaptive   DSpark, default scheduler and threshold
  oracle-always     a host drafter that proposes the plain continuation (every draft accepted:
                    the upper bound the verify batching allows on this machine)
  wrong-adaptive    a host drafter that is always wrong, adaptive scheduler (the overhead left
                    after the scheduler backs off)

Without --target/--support it uses the embedded tiny random-weight model, whose drafter drafts
at random (near-zero acceptance): numbers there measure the machinery, not DSpark's quality.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

import ds4rt
from ds4rt import bench, data

NAMES = {
    "always": "dspark-always",
    "adaptive": "dspark-adaptive",
    "oracle": "oracle-always",
    "wrong": "wrong-adaptive",
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--target", default=data.default_target())
    ap.add_argument("--support", default=data.default_support())
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)

    model = ds4rt.Model(args.target, n_threads=args.threads)
    dspark = ds4rt.DSpark(model, args.support)
    res = bench.spec_modes(
        model,
        dspark,
        ["always", "adaptive", "oracle", "wrong"],
        tokens=args.tokens,
        prompt_tokens=args.prompt_tokens,
        repeats=args.repeats,
    )
    n = args.tokens
    results = []
    for r in res["rows"]:
        row = {
            "config": NAMES.get(r["mode"], r["mode"]),
            "median_s": r["s"]["median"],
            "tokens_per_s": r["tokens_per_s"]["median"],
            "ratio_to_plain": r["speedup_vs_plain"],
        }
        if "cycles" in r:
            row.update(
                cycles=r["cycles"],
                proposed=r["proposed"],
                accepted_draft=r["accepted"],
                no_draft=r["no_draft"],
                tokens_per_cycle=n / max(r["cycles"], 1),
            )
        results.append(row)
    doc = {
        "command": " ".join(
            [os.path.basename(sys.argv[0])] + (argv if argv is not None else sys.argv[1:])
        ),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cpus_available": len(os.sched_getaffinity(0)),
        },
        "build": ds4rt.build_info(),
        "target": os.path.basename(args.target),
        "support": os.path.basename(args.support),
        "tokens": n,
        "prompt_tokens": res["prompt_tokens"],
        "repeats": args.repeats,
        "greedy_identical": res["greedy_identical"],
        "results": results,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if res["greedy_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
