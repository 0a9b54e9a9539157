#!/usr/bin/env python3
"""Benchmark: opening a GGUF file shaped like the real DeepSeek V4 Flash (q2 mix).

Writes, with gguf-py's GGUFWriter, the header of a file with the real model's tensor inventory
(the real model: 43 layers, ~1400 tensors, ~81 GiB of data), a
129,280-entry token array and as many merges, then extends it to full size as a sparse file
(the data is a hole: nothing is written or read). Times ds4rt's open (C reader: parse and
validate the header) and inspect() (plus conversion of all metadata to Python), and prints
one JSON object with medians.

    python tools/bench_gguf_open.py [--repeat 9] [--dir /tmp] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time

N_LAYER, D, V, N_HC, N_EXPERT, F, N_HASH = 43, 4096, 129280, 4, 256, 2048, 3


def ratio(layer: int) -> int:
    return 0 if layer < 2 else (4 if layer % 2 == 0 else 128)


def inventory(qt) -> list[tuple[str, list[int], object]]:
    """(name, ne, type) of every tensor of the real model (q2 mix)."""
    f16, f32, q8, i32 = qt.F16, qt.F32, qt.Q8_0, qt.I32
    hc_dim, hc_mix = N_HC * D, (2 + N_HC) * N_HC
    out = [
        ("token_embd.weight", [D, V], f16),
        ("output_hc_fn.weight", [hc_dim, N_HC], f16),
        ("output_hc_scale.weight", [1], f32),
        ("output_hc_base.weight", [N_HC], f32),
        ("output_norm.weight", [D], f32),
        ("output.weight", [D, V], q8),
    ]
    for layer in range(N_LAYER):
        p, r = f"blk.{layer}.", ratio(layer)
        coff = 2 if r == 4 else 1
        for part in ("attn", "ffn"):
            out += [
                (p + f"hc_{part}_fn.weight", [hc_dim, hc_mix], f16),
                (p + f"hc_{part}_scale.weight", [3], f32),
                (p + f"hc_{part}_base.weight", [hc_mix], f32),
            ]
        out += [
            (p + "attn_norm.weight", [D], f32),
            (p + "ffn_norm.weight", [D], f32),
            (p + "attn_q_a.weight", [D, 1024], q8),
            (p + "attn_q_a_norm.weight", [1024], f32),
            (p + "attn_q_b.weight", [1024, 64 * 512], q8),
            (p + "attn_kv.weight", [D, 512], q8),
            (p + "attn_kv_a_norm.weight", [512], f32),
            (p + "attn_sinks.weight", [64], f32),
            (p + "attn_output_a.weight", [4096, 8 * 1024], q8),
            (p + "attn_output_b.weight", [8 * 1024, D], q8),
        ]
        if r:
            out += [
                (p + "attn_compressor_ape.weight", [coff * 512, r], f16),
                (p + "attn_compressor_kv.weight", [D, coff * 512], f16),
                (p + "attn_compressor_gate.weight", [D, coff * 512], f16),
                (p + "attn_compressor_norm.weight", [512], f32),
            ]
        if r == 4:
            out += [
                (p + "indexer.attn_q_b.weight", [1024, 64 * 128], f16),
                (p + "indexer.proj.weight", [D, 64], f16),
                (p + "indexer_compressor_ape.weight", [256, 4], f16),
                (p + "indexer_compressor_kv.weight", [D, 256], f16),
                (p + "indexer_compressor_gate.weight", [D, 256], f16),
                (p + "indexer_compressor_norm.weight", [128], f32),
            ]
        out += [
            (p + "ffn_gate_inp.weight", [D, N_EXPERT], f16),
            (p + "exp_probs_b.bias", [N_EXPERT], f32),
        ]
        if layer < N_HASH:
            out.append((p + "ffn_gate_tid2eid.weight", [6, V], i32))
        out += [
            (p + "ffn_gate_exps.weight", [D, F, N_EXPERT], qt.IQ2_XXS),
            (p + "ffn_up_exps.weight", [D, F, N_EXPERT], qt.IQ2_XXS),
            (p + "ffn_down_exps.weight", [F, D, N_EXPERT], qt.Q2_K),
            (p + "ffn_gate_shexp.weight", [D, F], q8),
            (p + "ffn_up_shexp.weight", [D, F], q8),
            (p + "ffn_down_shexp.weight", [F, D], q8),
        ]
    return out


def write_header(path: str) -> tuple[int, int]:
    """Writes the header and extends the file to its full size. Returns (tensors, size)."""
    import gguf
    import numpy as np

    qt = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(path, arch="deepseek4")
    w.add_uint32("deepseek4.block_count", N_LAYER)
    w.add_uint32("deepseek4.embedding_length", D)
    w.add_key_value(
        "deepseek4.attention.compress_ratios",
        [ratio(i) for i in range(N_LAYER)],
        gguf.GGUFValueType.ARRAY,
        sub_type=gguf.GGUFValueType.UINT32,
    )
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_token_list([f"Ġtok{i:06d}" for i in range(V)])
    w.add_token_merges([f"Ġa{i} b{i}" for i in range(V - 256)])
    tensors = inventory(qt)
    total = 0
    for name, ne, t in tensors:
        block, size = gguf.GGML_QUANT_SIZES[t]
        n = int(np.prod(ne))
        nbytes = n // block * size
        # add_tensor_info takes the numpy-order shape; uint8 + raw_dtype means byte shape.
        w.add_tensor_info(name, list(reversed(ne)), np.dtype(np.float32), nbytes, raw_dtype=t)
        total += -total % 32 + nbytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        header = fh.tell()
        data_offset = header + (-header % 32)
        fh.truncate(data_offset + total)
    return len(tensors), data_offset + total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--dir", default=None, help="where to put the sparse file (default: tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the file and print its path")
    args = ap.parse_args()

    from ds4rt import _core
    from ds4rt import gguf as dg

    d = tempfile.mkdtemp(dir=args.dir)
    path = os.path.join(d, "dsv4-flash-shaped.gguf")
    n_tensors, size = write_header(path)
    open_s, inspect_s = [], []
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        h = _core.gguf_open(path)
        open_s.append(time.perf_counter() - t0)
        h.close()
        t0 = time.perf_counter()
        info = dg.inspect(path)
        inspect_s.append(time.perf_counter() - t0)
    assert len(info["tensors"]) == n_tensors and info["file_size"] == size
    result = {
        "benchmark": "gguf_open",
        "tensors": n_tensors,
        "keys": len(info["metadata"]),
        "file_size": size,
        "header_bytes": info["data_offset"],
        "data_bytes_on_disk": os.stat(path).st_blocks * 512 - info["data_offset"],
        "repeat": args.repeat,
        "open_ms_median": round(statistics.median(open_s) * 1e3, 3),
        "inspect_ms_median": round(statistics.median(inspect_s) * 1e3, 3),
        "max_rss_growth_mib": round(
            (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024, 1
        ),
    }
    if args.keep:
        result["path"] = path
    else:
        os.unlink(path)
        os.rmdir(d)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
