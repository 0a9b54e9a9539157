#!/usr/bin/env python3
"""DSpark's scheduler decisions under given costs, without timing anything.

    python tools/sched_model.py [--prompts 32] [--tokens 96] [--history-decay 0.99]
        [--cost NAME=BASE,PER_TOKEN,PROPOSE ...] [--support FILE] [--json]

The adaptive scheduler picks draft lengths from costs (a plain decode, a verify pass of n
tokens, a proposal) and from acceptance estimates. Its quality under one machine's costs can be
judged on another machine: the scheduler's fixed cost model (measured_costs = False) takes the
costs in decode units (verify(n) = BASE + PER_TOKEN * n, a proposal PROPOSE), the embedded
pair generates greedily on the held-out prompts (.traindata/prompts.json, each with a fresh
session, one DSpark handle), and every cycle's outcome from the schedule log is charged at those
costs: a skipped cycle 1, a drafting one PROPOSE + verify(1 + verified). Modeled speed-up =
committed tokens / charged time. Greedy output does not depend on the drafts, so the text, and
therefore the drafter's acceptance at every position, is the same in every configuration.

Configurations per cost profile: "always" (every cycle a full block, threshold 0, the best a
fixed length can do here) and "adaptive" (the default scheduler and threshold). The fixed cost
model starts every generation afresh (the library remembers only measured-cost schedulers), so
this measures the scheduler from a cold start in every generation of ~45 cycles: the first
generation of a DSpark handle, not the steady state of a long-lived one (docs/PERFORMANCE.md,
"The adaptive scheduler's memory").

Default profiles (decode units): gpu-like 1.0, 0.035, 1.0 (a small model on a GPU: passes bound
by launches, a proposal about one decode), cpu-dev2 0.62, 0.39, 0.36 (the default pair on the
2-core development VM), bw-bound 0.95, 0.05, 0.15 (a large model on a bandwidth-bound part).

--support replaces the embedded support model (the same drafter with an acceptance prior
written by tools/train/acceptance_prior.py, for instance: the fixed cost model starts every
generation from the file's prior, so the "fresh" figures are the prior's effect).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = {
    "gpu-like": (1.0, 0.035, 1.0),
    "cpu-dev2": (0.62, 0.39, 0.36),
    "bw-bound": (0.95, 0.05, 0.15),
}


def charged(events, base: float, per: float, prop: float) -> tuple[float, float, dict[int, int]]:
    """Committed tokens, charged time and the histogram of verified drafts of one generation."""
    tokens = time = 0.0
    hist: dict[int, int] = {}
    for e in events:
        drafting = e["planned"] > 0 or e["proposed"] > 0
        width = 1 + e["verified"]
        time += prop + (base + per * width if width > 1 else 1.0) if drafting else 1.0
        tokens += e["accepted"] + 1
        hist[e["verified"]] = hist.get(e["verified"], 0) + 1
    return tokens, time, hist


def run(
    model, dspark, prompts, tokens: int, cost, mode: str, threshold: float, decay: float
) -> dict:
    from ds4rt.generation import SchedulerOptions

    base, per, prop = cost
    sched = SchedulerOptions(
        mode=mode,
        measured_costs=False,
        verify_cost_base=base,
        verify_cost_per_token=per,
        propose_cost=prop,
        history_decay=decay,
    )
    tok = time = 0.0
    hist: dict[int, int] = {}
    for p in prompts:
        events: list[dict] = []
        model.session().generate(
            p["ids"],
            max_tokens=tokens,
            dspark=dspark,
            scheduler=sched,
            confidence_threshold=threshold,
            on_schedule=events.append,
        )
        t, c, h = charged(events, base, per, prop)
        tok, time = tok + t, time + c
        for k, v in h.items():
            hist[k] = hist.get(k, 0) + v
    return {
        "speedup": tok / time,
        "tokens": tok,
        "cycles_by_verified_drafts": dict(sorted(hist.items())),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--history-decay", type=float, default=None, help="default: the library's")
    ap.add_argument("--cost", action="append", default=[], help="NAME=BASE,PER_TOKEN,PROPOSE")
    ap.add_argument("--data", type=Path, default=ROOT / ".traindata")
    ap.add_argument("--support", type=Path, default=None, help="default: the embedded one")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import ds4rt
    from ds4rt import data
    from ds4rt.generation import SchedulerOptions

    profiles = dict(PROFILES) if not args.cost else {}
    for c in args.cost:
        name, vals = c.split("=")
        profiles[name] = tuple(float(v) for v in vals.split(","))
    decay = (
        args.history_decay if args.history_decay is not None else SchedulerOptions().history_decay
    )
    prompts = json.loads((args.data / "prompts.json").read_text())[: args.prompts]
    model = ds4rt.Model(data.default_target())
    support = str(args.support) if args.support else data.default_support()
    out = {
        "history_decay": decay,
        "prompts": len(prompts),
        "tokens": args.tokens,
        "support": support,
        "acceptance_prior": ds4rt.gguf.inspect(support)["metadata"].get(
            "ds4rt.dspark.acceptance_prior"
        ),
        "profiles": {},
    }
    for name, cost in profiles.items():
        res = {}
        for mode, thr in (
            ("always", 0.0),
            ("adaptive", ds4rt.GenerationOptions().confidence_threshold),
        ):
            dspark = ds4rt.DSpark(model, support)  # a fresh handle per configuration
            res[mode] = run(model, dspark, prompts, args.tokens, cost, mode, thr, decay)
            if not args.json:
                r = res[mode]
                print(
                    f"{name:10s} {mode:8s} modeled speed-up {r['speedup']:.3f}  "
                    f"cycles by verified drafts {r['cycles_by_verified_drafts']}",
                    file=sys.stderr,
                )
        out["profiles"][name] = {"cost": cost, **res}
    if args.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
