#!/usr/bin/env python3
"""Projected DSpark speed-up for a real-size deepseek4 model, from bytes and measured costs.

    python tools/project_dspark.py --plan big43.plan.json \
        [--acceptance EVAL.json] [--measured BENCH.json --measured-plan big4.plan.json]

The plan is what `tools/make_big_model.py prepare --layers 43` writes (the real model's tensor
table without its data); a full GGUF can be given with --gguf instead. Prints JSON (and a
Markdown table with --markdown). docs/PERFORMANCE.md, "DSpark on the real model, projected",
shows the result and states the model; in short:

* A pass over n tokens reads every non-expert weight once, one embedding row and one hash-table
  row per token, and each routed expert that at least one of the n tokens selects. With k of E
  experts per token chosen uniformly and independently (real routing is correlated between
  neighbouring tokens, so this overstates the bytes), a layer reads E·(1 − (1 − k/E)^n)
  distinct experts in expectation.
* A DSpark proposal runs its stages once over the block (block-size rows each): per stage the
  non-expert bytes of a dense trunk layer (stages have no compressor or indexer) and the distinct
  experts of `block` rows, then the target's output head over the block rows and the Markov head
  (two V × rank F16 matrices).
* Bandwidth-bound parts (a 256 GB/s unified-memory machine): a pass costs its bytes, so
  verify(n)/decode is a ratio of bytes and does not depend on the bandwidth.
* The H200 with ds4rt's kernels as measured (--measured, a tools/bench_gpu.py JSON on the 4-layer
  real-width file): the measured verify(n)/decode of the 4-layer file over its own byte ratio is
  ds4rt's excess cost at n; the projection applies that excess to the 43-layer byte ratio.
* With conditional acceptance a_i at draft position i, drafting L tokens commits
  E(L) = 1 + Σ_{j≤L} Π_{i≤j} a_i per cycle at cost verify(L + 1) + proposal (in decodes):
  speed-up(L) = E(L) / (verify(L + 1)/decode + proposal/decode). The table gives every L; the
  adaptive scheduler's steady state is the best L (its per-cycle trimming can only add to it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

EXPERT_TENSOR = re.compile(r"^blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$")
PER_TOKEN_ROW = ("token_embd.weight", "ffn_gate_tid2eid.weight")  # one row read per token
COMPRESSOR_OR_INDEXER = ("attn_compressor", "indexer")


def load_tensors(args: argparse.Namespace) -> list[dict]:
    if args.plan:
        return json.loads(Path(args.plan).read_text())["tensors"]
    import ds4rt.gguf

    return [
        {"name": t["name"], "ne": list(t["shape"]), "nbytes": t["nbytes"]}
        for t in ds4rt.gguf.inspect(args.gguf)["tensors"]
    ]


def byte_model(tensors: list[dict]) -> dict:
    """Bytes a pass reads, split into what every pass reads once, per-token rows and experts."""
    once = per_token = 0
    expert_bytes: dict[int, int] = {}  # layer -> bytes of one expert (gate + up + down)
    dense0 = {"non_expert": 0, "per_expert": 0}
    n_expert = None
    head = 0
    for t in tensors:
        name, nbytes = t["name"], int(t["nbytes"])
        m = EXPERT_TENSOR.match(name)
        if m:
            n_expert = int(t["ne"][2])
            layer = int(m.group(1))
            expert_bytes[layer] = expert_bytes.get(layer, 0) + nbytes // n_expert
            continue
        if name.endswith(PER_TOKEN_ROW):
            per_token += nbytes // int(t["ne"][1])
            continue
        once += nbytes
        if name == "output.weight":
            head = nbytes
        if name.startswith("blk.0.") and not any(s in name for s in COMPRESSOR_OR_INDEXER):
            dense0["non_expert"] += nbytes
    if n_expert is None:
        raise SystemExit("no routed expert tensors (blk.N.ffn_*_exps.weight) in the tensor table")
    dense0["per_expert"] = expert_bytes[0]
    vocab = next(int(t["ne"][1]) for t in tensors if t["name"] == "output.weight")
    return {
        "once": once,
        "per_token": per_token,
        "expert_bytes": [expert_bytes[k] for k in sorted(expert_bytes)],
        "n_expert": n_expert,
        "head": head,
        "vocab": vocab,
        "dense_layer": dense0,
        "layers": len(expert_bytes),
    }


def distinct_experts(n_rows: int, n_expert: int, k: int) -> float:
    return n_expert * (1.0 - (1.0 - k / n_expert) ** n_rows)


def pass_bytes(bm: dict, n: int, k: int) -> float:
    d = distinct_experts(n, bm["n_expert"], k)
    return bm["once"] + n * bm["per_token"] + d * sum(bm["expert_bytes"])


def proposal_bytes(bm: dict, stages: int, block: int, k: int, markov_rank: int) -> float:
    per_stage = (
        bm["dense_layer"]["non_expert"]
        + distinct_experts(block, bm["n_expert"], k) * bm["dense_layer"]["per_expert"]
    )
    markov = 2 * bm["vocab"] * markov_rank * 2
    return stages * per_stage + bm["head"] + markov


def committed(accept: list[float], draft_len: int) -> float:
    total, run = 1.0, 1.0
    for a in accept[:draft_len]:
        run *= a
        total += run
    return total


def measured_ratios(path: str) -> dict[int, float]:
    """verify(n)/decode of the graphs-on run (else the first run) of a bench_gpu.py JSON."""
    runs = json.loads(Path(path).read_text())["results"]
    run = next((r for r in runs if r.get("graphs")), runs[0])
    return {int(v["n"]): float(v["vs_decode"]) for v in run["verify"]}


def interpolate(points: dict[int, float], n: int) -> float:
    if n in points:
        return points[n]
    lo = max(x for x in points if x < n)
    hi = min(x for x in points if x > n)
    return points[lo] + (points[hi] - points[lo]) * (n - lo) / (hi - lo)


def scenario(costs: dict[int, float], proposal: float, accept: list[float]) -> dict:
    rows = []
    for L in range(len(accept) + 1):
        cost = 1.0 if L == 0 else costs[L + 1] + proposal
        rows.append(
            {
                "draft_len": L,
                "verify_over_decode": costs[L + 1],
                "proposal_over_decode": 0.0 if L == 0 else proposal,
                "committed_per_cycle": committed(accept, L),
                "speedup": committed(accept, L) / cost,
            }
        )
    best = max(rows, key=lambda r: r["speedup"])
    return {"rows": rows, "best_draft_len": best["draft_len"], "best_speedup": best["speedup"]}


def flat_acceptance_for(
    target: float, costs: dict[int, float], proposal: float, block: int
) -> float:
    """Smallest constant per-position acceptance at which drafting (some L >= 1) reaches
    speed-up `target`."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        rows = scenario(costs, proposal, [mid] * block)["rows"][1:]
        if max(r["speedup"] for r in rows) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--plan", help="tensor plan JSON of tools/make_big_model.py prepare")
    src.add_argument("--gguf", help="a complete deepseek4 GGUF (header read only)")
    ap.add_argument("--acceptance", default="docs/bench/default_model_eval.json")
    ap.add_argument("--measured", help="tools/bench_gpu.py JSON on the 4-layer real-width file")
    ap.add_argument("--measured-plan", help="tensor plan of the file --measured ran on")
    ap.add_argument("--experts-used", type=int, default=6)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--markov-rank", type=int, default=256)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    ev = json.loads(Path(args.acceptance).read_text())["acceptance"]["always_threshold0"]
    accept = [float(a) for a in ev["conditional_acceptance_at"]]
    block = len(accept)
    k = args.experts_used
    bm = byte_model(load_tensors(args))
    decode = pass_bytes(bm, 1, k)
    floor = {n: pass_bytes(bm, n, k) / decode for n in range(1, block + 2)}
    proposal = proposal_bytes(bm, args.stages, block, k, args.markov_rank) / decode
    out = {
        "command": " ".join(["project_dspark.py"] + sys.argv[1:]),
        "experts_used": k,
        "acceptance_source": args.acceptance,
        "conditional_acceptance": accept,
        "model": {
            "layers": bm["layers"],
            "decode_bytes": decode,
            "verify_bytes": {n: pass_bytes(bm, n, k) for n in floor},
            "proposal_bytes": proposal * decode,
        },
        "bandwidth_bound": scenario(floor, proposal, accept),
    }
    out["bandwidth_bound"]["flat_acceptance_for"] = {
        str(s): flat_acceptance_for(s, floor, proposal, block) for s in (1.0, 1.5, 2.0)
    }
    if args.measured:
        if not args.measured_plan:
            ap.error("--measured needs --measured-plan (the tensor plan of the measured file)")
        small = byte_model(json.loads(Path(args.measured_plan).read_text())["tensors"])
        small_floor = {n: pass_bytes(small, n, k) / pass_bytes(small, 1, k) for n in floor}
        meas = measured_ratios(args.measured)
        excess = {n: interpolate(meas, n) / small_floor[n] for n in floor}
        costs = {n: floor[n] * excess[n] for n in floor}
        h200 = scenario(costs, proposal, accept)
        h200["excess_over_bytes"] = excess
        h200["flat_acceptance_for"] = {
            str(s): flat_acceptance_for(s, costs, proposal, block) for s in (1.0, 1.5, 2.0)
        }
        out["measured_gpu"] = h200
    print(json.dumps(out, indent=1))
    if args.markdown:
        for key in ("bandwidth_bound", "measured_gpu"):
            if key not in out:
                continue
            print(f"\n{key}\n\n| L | verify(L+1)/decode | proposal/decode | committed | speed-up |")
            print("|---|---|---|---|---|")
            for r in out[key]["rows"]:
                print(
                    f"| {r['draft_len']} | {r['verify_over_decode']:.3f} | "
                    f"{r['proposal_over_decode']:.3f} | {r['committed_per_cycle']:.3f} | "
                    f"{r['speedup']:.3f} |"
                )


if __name__ == "__main__":
    main()
