#!/usr/bin/env python3
"""Builds tests/quant_selftest.c straight from the kernel sources (no Meson, no Python package)
and runs it: every CPU kernel path the machine can execute is checked bit for bit against the
scalar path, for batch and thread invariance, and against float64.

    python tools/quant_selftest.py                                   # native compiler, run here
    python tools/quant_selftest.py --cc aarch64-linux-gnu-gcc \\
        --run "qemu-aarch64 -cpu max"                                # NEON (+dotprod) under qemu
    python tools/quant_selftest.py --build-only --out /tmp/selftest  # to copy to an AVX-512 box

Exit status: that of the self-test (0 = all paths pass), or 2 if the build fails.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COMMON_SOURCES = [
    "src/core/error.c",
    "src/core/qtypes.c",
    "src/core/threadpool.c",
    "src/quant/compute_types.c",
    "src/quant/act_quant.c",
    "src/quant/cpu_isa.c",
    "src/quant/dequant.c",
    "src/quant/kernels_scalar.c",
    "src/quant/matmul.c",
    "tests/quant_selftest.c",
]

ISA_SOURCES = {
    "x86_64": [
        ("src/quant/kernels_avx2.c", ["-mavx2", "-mfma", "-mf16c", "-mbmi", "-mbmi2"]),
        (
            "src/quant/kernels_avx512.c",
            [
                "-mavx2",
                "-mfma",
                "-mf16c",
                "-mbmi",
                "-mbmi2",
                "-mavx512f",
                "-mavx512bw",
                "-mavx512vl",
            ],
        ),
    ],
    "aarch64": [
        ("src/quant/kernels_neon.c", []),
        ("src/quant/kernels_neon.c", ["-march=armv8.2-a+dotprod", "-DDS4RT_NEON_DOTPROD"]),
    ],
}

CFLAGS = [
    "-std=c11",
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-D_GNU_SOURCE",
    "-DDS4RT_BUILDING",
    "-ffp-contract=off",
    "-pthread",
]


def target_arch(cc: str) -> str:
    machine = subprocess.run([cc, "-dumpmachine"], capture_output=True, text=True, check=True)
    triple = machine.stdout.strip()
    for arch in ISA_SOURCES:
        if triple.startswith(arch):
            return arch
    return triple.split("-")[0]


def build(cc: str, out: str, static: bool) -> str:
    arch = target_arch(cc)
    inc = [f"-I{os.path.join(ROOT, d)}" for d in ("include", "src", "src/core", "src/quant")]
    units = [(s, []) for s in COMMON_SOURCES] + ISA_SOURCES.get(arch, [])
    objdir = tempfile.mkdtemp(prefix="ds4rt-selftest-")
    objs = []
    for i, (src, flags) in enumerate(units):
        obj = os.path.join(objdir, f"{i}_{os.path.basename(src)}.o")
        cmd = [cc, *CFLAGS, *flags, *inc, "-c", os.path.join(ROOT, src), "-o", obj]
        subprocess.run(cmd, check=True)
        objs.append(obj)
    link = [cc, "-pthread", *objs, "-o", out, "-lm"]
    if static:
        link.insert(1, "-static")
    subprocess.run(link, check=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cc", default=os.environ.get("CC", "cc"), help="C compiler (default: %(default)s)"
    )
    ap.add_argument("--out", default=None, help="path of the binary (default: a temporary file)")
    ap.add_argument("--run", default="", help="command prefix to run it with, e.g. 'qemu-aarch64'")
    ap.add_argument("--static", action="store_true", help="link statically")
    ap.add_argument("--build-only", action="store_true", help="build, print the path, do not run")
    args = ap.parse_args(argv)
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="ds4rt-selftest-"), "quant_selftest")
    try:
        build(args.cc, out, args.static)
    except subprocess.CalledProcessError as e:
        print(f"build failed: {e}", file=sys.stderr)
        return 2
    if args.build_only:
        print(out)
        return 0
    return subprocess.run([*shlex.split(args.run), out]).returncode


if __name__ == "__main__":
    sys.exit(main())
