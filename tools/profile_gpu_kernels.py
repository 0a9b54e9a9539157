#!/usr/bin/env python3
"""Per-kernel device time and DRAM bytes of one decode step and one verify pass on the GPU
backend, read with Nsight Compute (docs/PERFORMANCE.md, "Where the GPU time goes").

    ncu --clock-control none --profile-from-start off --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        python3 tools/profile_gpu_kernels.py run --target FILE.gguf --n 1 > decode.csv
    python3 tools/profile_gpu_kernels.py summarize decode.csv [--json OUT.json]

`run` loads FILE on the cuda backend, evaluates a 64-token context, then profiles exactly one
pass of --n tokens (cuProfilerStart/Stop around it, so the load and the context are not in the
report). `summarize` groups ncu's rows by kernel name: launches, total µs, read and written
bytes, achieved GB/s, share of the pass; kernels run one at a time under ncu, so the sum is
the pass's device time without launch gaps (the gap is the wall time minus this sum). The
JSON also lists the pass in launch order (`sequence`: kernel, µs, MB read).
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import io
import json
import sys
from collections import defaultdict


def run(args) -> int:
    import numpy as np

    import ds4rt

    m = ds4rt.Model(args.target, backend="cuda")
    s = m.session()
    rng = np.random.default_rng(0)
    ctx = [0] + rng.integers(3, m.n_vocab, 63).tolist()
    chunk = rng.integers(3, m.n_vocab, args.n).tolist()
    s.eval(ctx)
    s.logits(chunk)  # warm: first-use allocations and module loads stay out of the report
    s.truncate(len(ctx))
    cuda = ctypes.CDLL("libcuda.so.1")
    rc = cuda.cuProfilerStart()
    if rc != 0:
        print(f"cuProfilerStart failed: CUresult {rc}", file=sys.stderr)
        return 2
    s.logits(chunk)
    cuda.cuProfilerStop()
    return 0


def summarize(args) -> int:
    text = open(args.csv, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        print("no ncu CSV rows found", file=sys.stderr)
        return 2
    # ncu's own "==PROF==" lines and the program's output may sit between the CSV rows
    lines = [ln for ln in text[start:].splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    per_launch: dict[str, dict[str, float]] = defaultdict(dict)
    names: dict[str, str] = {}
    scale = {
        "ns": 1e-3,
        "nsecond": 1e-3,
        "us": 1.0,
        "usecond": 1.0,
        "ms": 1e3,
        "msecond": 1e3,
        "s": 1e6,
        "second": 1e6,
        "byte": 1.0,
        "Kbyte": 1e3,
        "Mbyte": 1e6,
        "Gbyte": 1e9,
    }
    for r in rows:
        key = r["ID"]
        names[key] = r["Kernel Name"].split("(")[0]
        value = float(r["Metric Value"].replace(",", ""))
        per_launch[key][r["Metric Name"]] = value * scale.get(r["Metric Unit"], 1.0)
    groups: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, metrics in per_launch.items():
        g = groups[names[key]]
        g["launches"] += 1
        g["us"] += metrics.get("gpu__time_duration.sum", 0.0)
        g["read_bytes"] += metrics.get("dram__bytes_read.sum", 0.0)
        g["write_bytes"] += metrics.get("dram__bytes_write.sum", 0.0)
    total_us = sum(g["us"] for g in groups.values())
    table = []
    for name, g in sorted(groups.items(), key=lambda kv: -kv[1]["us"]):
        moved = g["read_bytes"] + g["write_bytes"]
        table.append(
            {
                "kernel": name,
                "launches": int(g["launches"]),
                "us": round(g["us"], 2),
                "share": round(g["us"] / total_us, 4) if total_us else 0.0,
                "read_MB": round(g["read_bytes"] / 1e6, 3),
                "GBps": round(moved / (g["us"] * 1e3), 1) if g["us"] else 0.0,
            }
        )
    # the pass in launch order (ncu numbers launches in issue order): which kernels sit next to
    # each other on the chain, the first thing a merge of launches needs to know
    sequence = [
        [
            names[key],
            round(per_launch[key].get("gpu__time_duration.sum", 0.0), 2),
            round(per_launch[key].get("dram__bytes_read.sum", 0.0) / 1e6, 3),
        ]
        for key in sorted(per_launch, key=lambda k: int(k) if k.isdigit() else k)
    ]
    out = {
        "launches": len(per_launch),
        "device_us": round(total_us, 1),
        "kernels": table,
        "sequence": sequence,
    }
    print(f"{len(per_launch)} launches, {total_us:.1f} us of device time")
    print(f"{'kernel':48s} {'n':>4s} {'us':>9s} {'share':>6s} {'MB read':>9s} {'GB/s':>7s}")
    for t in table:
        print(
            f"{t['kernel'][:48]:48s} {t['launches']:4d} {t['us']:9.1f} {t['share']:6.1%} "
            f"{t['read_MB']:9.2f} {t['GBps']:7.1f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--target", required=True)
    r.add_argument("--n", type=int, default=1)
    r.set_defaults(fn=run)
    sm = sub.add_parser("summarize")
    sm.add_argument("csv")
    sm.add_argument("--json")
    sm.set_defaults(fn=summarize)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
