#!/usr/bin/env python3
"""Benchmark of speculative decoding against plain decoding, in one run, on one machine.

    python tools/bench_spec.py [--target T --support S] [--tokens N] [--repeats R] [--threads K]

Prints JSON: per configuration the median wall time of a greedy generation of N tokens after a
fixed prompt, tokens/s, the ratio to plain decoding measured in the same run, and the
speculative counters (proposed, accepted, cycles). Greedy output is checked to be identical to
plain decoding's for every configuration. Configurations:

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
import statistics
import sys
import time

import numpy as np

import ds4rt
from ds4rt import data


def run(model, prompt, n, repeats, max_batch, **kw):
    times, out, stats = [], None, None
    for _ in range(repeats):
        s = model.session(n_ctx=len(prompt) + n + 8, max_batch=max_batch)
        t0 = time.perf_counter()
        got = s.generate(prompt, max_tokens=n, stop_at_eos=False, **kw).ids
        times.append(time.perf_counter() - t0)
        if out is not None and got != out:
            raise RuntimeError("non-deterministic output")
        out = got
        if "dspark" in kw or "draft" in kw:
            stats = s.spec_stats()
    return statistics.median(times), out, stats


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
    rng = np.random.default_rng(0)
    prompt = [max(model.bos_id, 0)] + rng.integers(
        3, model.n_vocab, args.prompt_tokens - 1
    ).tolist()
    max_batch = max(32, dspark.block_size + 1)
    n = args.tokens

    base_t, base_out, _ = run(model, prompt, n, args.repeats, max_batch)
    full = prompt + base_out

    def oracle(ctx, k):
        m = len(ctx)
        return [full[m + i] if m + i < len(full) else 0 for i in range(k)]

    def wrong(ctx, k):
        return [(t + 1) % model.n_vocab for t in oracle(ctx, k)]

    configs = {
        "dspark-always": dict(dspark=dspark, scheduler="always", confidence_threshold=0.0),
        "dspark-adaptive": dict(dspark=dspark),
        "oracle-always": dict(draft=oracle, scheduler="always"),
        "wrong-adaptive": dict(draft=wrong),
    }
    results = [
        {"config": "plain", "median_s": base_t, "tokens_per_s": n / base_t, "ratio_to_plain": 1.0}
    ]
    for name, kw in configs.items():
        t, out, st = run(model, prompt, n, args.repeats, max_batch, **kw)
        if out != base_out:
            raise RuntimeError(f"{name}: greedy output differs from plain decoding")
        results.append(
            {
                "config": name,
                "median_s": t,
                "tokens_per_s": n / t,
                "ratio_to_plain": base_t / t,
                "cycles": st["cycles"],
                "proposed": st["proposed"],
                "accepted_draft": st["accepted_draft"],
                "no_draft": st["no_draft"],
                "tokens_per_cycle": n / max(st["cycles"], 1),
            }
        )
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
        "prompt_tokens": len(prompt),
        "repeats": args.repeats,
        "greedy_identical": True,
        "results": results,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
