#!/usr/bin/env python3
"""DSpark's adaptive scheduler against plain decoding, configurations alternated in one run.

    python tools/sched_bench.py [--pair default|quant] [--repeats 5] [--threads 2] [--tokens 96]
        [--prompts 12] [--configs plain,dspark-adaptive,...] [--good]

Prints JSON. Per configuration: the median over repeats of the wall time and of the process
CPU time of one round (every prompt once, greedy, a fresh session per prompt, as a server or a
CLI run does), tokens/s and the ratio to plain decoding (the round's medians), with the load
average before and after. Configurations are alternated round by round, their order rotated,
so that the load of the shared machine falls on all of them alike; greedy output is checked
identical to plain decoding's.

  plain             no drafter
  dspark-adaptive   DSpark, the default scheduler and threshold
  dspark-off        DSpark attached, scheduler "off" (the loop and the captures, no drafting)
  dspark-always     DSpark, every cycle a full block (threshold 0)
  wrong-adaptive    a host drafter that is always wrong, default scheduler
  alt-adaptive      with --alt-support FILE: DSpark with that support file, default scheduler
                    (two drafters, or one with and without its acceptance prior, side by side)

--pair default: the embedded pair on chat prompts made from function signatures of held-out
standard-library files (tools/train/corpus.py's split). --pair quant: the generated quant pair
(tools/make_tiny_model.py --config quant, random weights: its drafter is always wrong) on a
random 32-token prompt. --good: also the cost model's prediction against the measured speed-up
of DSpark-always on the prompts where the drafter does best (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ds4rt
from ds4rt import data

HERE = Path(__file__).resolve().parent


def heldout_prompts(model, n):
    sys.path.insert(0, str(HERE / "train"))
    import corpus

    rng = random.Random(0)
    out = []
    for d in corpus.python_docs():
        if not d.heldout:
            continue
        for c in corpus.chat_samples(d.text, rng):
            if 8 <= len(c.user) <= 200:
                out.append(model.tokenizer.encode_chat([{"role": "user", "content": c.user}]))
                break
        if len(out) == n:
            break
    return out


def quant_pair():
    sys.path.insert(0, str(HERE))
    import tinymodel

    d = Path(tempfile.gettempdir()) / "ds4rt-sched-bench-quant"
    if not (d / "target.gguf").exists():
        tinymodel.generate(d, config="quant")
    return str(d / "target.gguf"), str(d / "support.gguf")


def round_of(model, prompts, tokens, kw, stop_at_eos, refs=None):
    outs, stats = [], []
    w0, c0 = time.perf_counter(), time.process_time()
    for i, p in enumerate(prompts):
        s = model.session(n_ctx=len(p) + tokens + 16, max_batch=32)
        extra = dict(kw)
        if "draft" in extra:  # the host drafter needs the plain continuation to be wrong
            extra["draft"] = extra["draft"](p + refs[i])
        outs.append(s.generate(p, max_tokens=tokens, stop_at_eos=stop_at_eos, **extra).ids)
        if "dspark" in kw or "draft" in kw:
            stats.append(s.spec_stats())
    return time.perf_counter() - w0, time.process_time() - c0, outs, stats


def wrong_drafter(full):
    def draft(ctx, k):
        m = len(ctx)
        return [(full[m + i] + 1) % 1000 if m + i < len(full) else 0 for i in range(k)]

    return draft


def sum_stats(stats):
    keys = ("cycles", "proposed", "accepted_draft", "probes", "scheduler_skips", "tokens")
    return {k: sum(s[k] for s in stats) for k in keys}


def good_prompts(model, dspark, prompts, tokens, stop_at_eos, k):
    """The k prompts on which DSpark-always commits the most tokens per cycle."""
    scored = []
    for p in prompts:
        s = model.session(n_ctx=len(p) + tokens + 16, max_batch=32)
        s.generate(
            p,
            max_tokens=tokens,
            stop_at_eos=stop_at_eos,
            dspark=dspark,
            scheduler="always",
            confidence_threshold=0.0,
        )
        st = s.spec_stats()
        scored.append((st["tokens"] / max(st["cycles"], 1), p))
    scored.sort(key=lambda x: -x[0])
    return [p for _, p in scored[:k]], [t for t, _ in scored[:k]]


def predict(model, dspark, prompts, tokens, stop_at_eos):
    """The cost model's speed-up of DSpark-always over plain decoding, two ways.

    model: what the scheduler's own estimates say at the end of each generation (the schedule
    log's last event): expected tokens per cycle from its per-position acceptance estimates x
    the plain-decode time, over its proposal + verify(1 + block) estimates; averaged over the
    prompts weighted by cycles. passes: the measured proposal and verify times of every cycle
    (the same log) against tokens x the plain-decode time, i.e. the loop's time outside the
    passes left out. The plain-decode time is measured on the same prompts without a drafter."""
    decode = []
    for p in prompts:
        s = model.session(n_ctx=len(p) + tokens + 16, max_batch=32)
        g = s.generate(p, max_tokens=tokens, stop_at_eos=stop_at_eos)
        decode.append(g.timings.generation_seconds * 1e3 / max(len(g.ids), 1))
    dec = statistics.median(decode)
    t_spec = 0.0
    n_tok = 0
    model_num = model_den = 0.0
    for p in prompts:
        ev = []
        s = model.session(n_ctx=len(p) + tokens + 16, max_batch=32)
        g = s.generate(
            p,
            max_tokens=tokens,
            stop_at_eos=stop_at_eos,
            dspark=dspark,
            scheduler="always",
            confidence_threshold=0.0,
            on_schedule=ev.append,
        )
        n_tok += len(g.ids)
        for e in ev:
            t_spec += (e["propose_ms"] if e["propose_ms"] > 0 else 0.0) + e["verify_ms"]
        full = max(e["planned"] for e in ev)  # the block, unless the tail cut every cycle
        last = [e for e in ev if e["planned"] == full][-1]
        model_num += len(ev) * last["expected_tokens"] * dec
        model_den += len(ev) * (last["cost_propose"] + last["cost_verify"])
    return {
        "predicted_speedup_model": model_num / model_den,
        "predicted_speedup_passes": n_tok * dec / t_spec,
        "decode_ms": dec,
        "tokens": n_tok,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pair", choices=("default", "quant"), default="default")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--configs", default="plain,dspark-adaptive,dspark-off,wrong-adaptive")
    ap.add_argument("--good", type=int, default=0, help="prompts for the prediction check")
    ap.add_argument(
        "--alt-support",
        default=None,
        help="a second support file for the same target: adds alt-adaptive (its own handle)",
    )
    args = ap.parse_args(argv)

    if args.pair == "default":
        target, support = data.default_target(), data.default_support()
    else:
        target, support = quant_pair()
    model = ds4rt.Model(target, n_threads=args.threads)
    dspark = ds4rt.DSpark(model, support)
    if args.pair == "default":
        prompts = heldout_prompts(model, args.prompts)
        stop_at_eos = True
    else:
        rng = np.random.default_rng(0)
        prompts = [[max(model.bos_id, 0)] + rng.integers(3, model.n_vocab, 31).tolist()]
        stop_at_eos = False
    configs = {
        "plain": {},
        "dspark-adaptive": {"dspark": dspark},
        "dspark-off": {"dspark": dspark, "scheduler": "off"},
        "dspark-always": {"dspark": dspark, "scheduler": "always", "confidence_threshold": 0.0},
        "wrong-adaptive": {"draft": wrong_drafter},
    }
    if args.alt_support:
        configs["alt-adaptive"] = {"dspark": ds4rt.DSpark(model, args.alt_support)}
    names = args.configs.split(",")
    load0 = os.getloadavg()
    _, _, refs, _ = round_of(model, prompts, args.tokens, {}, stop_at_eos)  # warm-up, refs
    res = {n: {"wall": [], "cpu": [], "stats": None} for n in names}
    for r in range(args.repeats):
        for n in names[r % len(names) :] + names[: r % len(names)]:  # rotated: no place bias
            w, c, outs, stats = round_of(model, prompts, args.tokens, configs[n], stop_at_eos, refs)
            if outs != refs:
                raise SystemExit(f"{n}: greedy output differs from plain decoding")
            res[n]["wall"].append(w)
            res[n]["cpu"].append(c)
            res[n]["stats"] = sum_stats(stats) if stats else None
    n_tok = sum(len(o) for o in refs)
    base = statistics.median(res[names[0]]["wall"])
    base_cpu = statistics.median(res[names[0]]["cpu"])
    given = argv if argv is not None else sys.argv[1:]
    out = {
        "command": " ".join(["tools/sched_bench.py", *given]),
        "build": ds4rt.build_info(),
        "cpus_available": len(os.sched_getaffinity(0)),
        "pair": args.pair,
        "prompts": len(prompts),
        "tokens": n_tok,
        "repeats": args.repeats,
        "load_before": load0,
        "results": {},
    }
    for n in names:
        w = statistics.median(res[n]["wall"])
        c = statistics.median(res[n]["cpu"])
        out["results"][n] = {
            "median_s": w,
            "spread_s": [min(res[n]["wall"]), max(res[n]["wall"])],
            "cpu_s": c,
            "tokens_per_s": n_tok / w,
            "ratio_to_" + names[0]: base / w,
            "cpu_ratio_to_" + names[0]: base_cpu / c,
            "last_round": res[n]["stats"],
        }
    out["load_after"] = os.getloadavg()
    if args.good:
        good, per_cycle = good_prompts(model, dspark, prompts, args.tokens, stop_at_eos, args.good)
        pred = predict(model, dspark, good, args.tokens, stop_at_eos)
        t = {"plain": [], "dspark-always": []}
        for _ in range(args.repeats):
            for n in t:
                w, _, _, _ = round_of(model, good, args.tokens, configs[n], stop_at_eos)
                t[n].append(w)
        pred["measured_speedup"] = statistics.median(t["plain"]) / statistics.median(
            t["dspark-always"]
        )
        pred["prompts"] = len(good)
        pred["tokens_per_cycle"] = per_cycle
        out["prediction"] = pred
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
