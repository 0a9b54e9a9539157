"""DSpark acceptance measured in ds4rt itself: greedy generations of held-out prompts with the
drafter attached, summed from ds4rt's own speculative statistics (docs/DSPARK.md,
"Statistics"). Used by tools/train/eval_ds4rt.py (development machine) and
tools/train/drafter_run.py (the GPU machine's CPU, right after training).

The prompts are split over `workers` processes (each loads the pair once), so a machine with
many cores measures the same numbers in a fraction of the time; every number is a sum over
prompts, so the split changes nothing.

    python tools/train/accept_ds4rt.py --target T --support S --prompts P.json \\
        [--tokens 96] [--workers 4] [--threads 1] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

# (name, generate() keywords): every cycle drafting a full block (what the drafter can do) and
# ds4rt's defaults (adaptive scheduler, confidence threshold 0.5: what a user gets)
CONFIGS = (
    ("always_threshold0", {"scheduler": "always", "confidence_threshold": 0.0}),
    ("defaults", {}),
)
COUNTERS = ("cycles", "accepted_draft", "proposed", "tokens", "no_draft", "confidence_cuts")

_pair = None


def _load(target: str, support: str, threads: int) -> None:
    global _pair
    import ds4rt

    m = ds4rt.Model(target, n_threads=threads)
    _pair = (m, ds4rt.DSpark(m, support))


def _one(job):
    """Counters of one prompt under one configuration (runs in a worker)."""
    ids, n, kw, stop_at_eos = job
    m, d = _pair
    s = m.session(n_ctx=len(ids) + n + 16, max_batch=32)
    s.generate(ids, max_tokens=n, dspark=d, stop_at_eos=stop_at_eos, **kw)
    st = s.spec_stats()
    out = {k: int(st[k]) for k in COUNTERS}
    out["proposed_at"] = list(st["proposed_at"])
    out["accepted_at"] = list(st["accepted_at"])
    return out


def summarise(rows: list[dict], block_size: int) -> dict:
    """Sums over prompts: committed tokens per verified cycle (accepted drafts + the bonus),
    the share of drafts accepted, and per block position the acceptance given the position
    was verified and given every earlier draft of the cycle was accepted."""
    tot = {k: sum(r[k] for r in rows) for k in COUNTERS}
    pa = np.sum([r["proposed_at"] for r in rows], axis=0)[:block_size]
    aa = np.sum([r["accepted_at"] for r in rows], axis=0)[:block_size]
    reached = np.concatenate([[pa[0]], aa[: block_size - 1]])
    cyc = max(tot["cycles"], 1)
    return {
        "prompts": len(rows),
        **tot,
        "committed_per_cycle": (tot["accepted_draft"] + tot["cycles"]) / cyc,
        "accept_rate": tot["accepted_draft"] / max(tot["proposed"], 1),
        "acceptance_at": (aa / np.maximum(pa, 1)).tolist(),
        "conditional_acceptance_at": (aa / np.maximum(reached, 1)).tolist(),
    }


def measure(
    target: str,
    support: str,
    prompts: list[list[int]],
    tokens: int = 96,
    workers: int = 1,
    threads: int = 1,
    stop_at_eos: bool = True,
    configs=CONFIGS,
) -> dict:
    """{config name: summary} over `prompts` (lists of ids), greedy, `tokens` per prompt."""
    import ds4rt

    block = ds4rt.DSpark(ds4rt.Model(target), support).block_size
    jobs = [(list(p), tokens, kw, stop_at_eos) for _, kw in configs for p in prompts]
    if workers <= 1:
        _load(target, support, threads)
        rows = [_one(j) for j in jobs]
    else:
        # spawned, not forked: the parent has loaded ds4rt (and its worker threads) already
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            workers, mp_context=ctx, initializer=_load, initargs=(target, support, threads)
        ) as ex:
            rows = list(ex.map(_one, jobs, chunksize=1))
    out, k = {}, len(prompts)
    for i, (name, _) in enumerate(configs):
        out[name] = summarise(rows[i * k : (i + 1) * k], block)
    return {
        "ds4rt": {"build": ds4rt.build_info(), "path": ds4rt.__file__},
        "tokens": tokens,
        "stop_at_eos": stop_at_eos,
        **out,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--support", required=True)
    ap.add_argument("--prompts", type=Path, required=True, help="prompts.json of prepare_data.py")
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="first N prompts only")
    args = ap.parse_args(argv)
    prompts = [p["ids"] for p in json.loads(args.prompts.read_text(encoding="utf-8"))]
    if args.limit:
        prompts = prompts[: args.limit]
    res = measure(args.target, args.support, prompts, args.tokens, args.workers, args.threads)
    json.dump(res, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
