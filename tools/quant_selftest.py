#!/usr/bin/env python3
"""Builds the CPU kernel self-test (tests/quant_selftest.c, the Meson target quant_selftest of
tests/meson.build) and runs it: every CPU kernel path the machine can execute is checked bit for
bit against the scalar path, for batch and thread invariance, and against float64.

    python tools/quant_selftest.py                              # native, run here
    python tools/quant_selftest.py --cross aarch64              # NEON (+dotprod) under qemu
    python tools/quant_selftest.py --build-only --builddir /tmp/st   # to copy to an AVX-512 box

The cross build uses tests/cross/aarch64-linux-gnu.ini (aarch64-linux-gnu-gcc, static, run with
qemu-aarch64 -cpu max). Exit status: that of the self-test (0 = all paths pass), or 2 if the
build fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CROSS = {"aarch64": os.path.join(ROOT, "tests", "cross", "aarch64-linux-gnu.ini")}
WRAPPER = {"aarch64": ["qemu-aarch64", "-cpu", "max"]}


def meson() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "meson")
    return here if os.access(here, os.X_OK) else (shutil.which("meson") or "meson")


def build(builddir: str, cross: str | None) -> str:
    """Sets up (once) and compiles quant_selftest in builddir; returns the executable."""
    if not os.path.exists(os.path.join(builddir, "build.ninja")):
        args = [meson(), "setup", builddir, "-Dtest_programs=true", "-Dpython=false"]
        args += ["-Dwerror=true", "-Dbuildtype=debugoptimized"]
        if cross:
            args += ["--cross-file", CROSS[cross]]
        subprocess.run(args, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        [meson(), "compile", "-C", builddir, "quant_selftest"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    targets = subprocess.run(
        [meson(), "introspect", "--targets", builddir], check=True, capture_output=True, text=True
    ).stdout
    return next(t["filename"][0] for t in json.loads(targets) if t["name"] == "quant_selftest")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cross", choices=sorted(CROSS), help="cross-compile and run under qemu")
    ap.add_argument("--builddir", default=None, help="Meson build directory (default: temporary)")
    ap.add_argument("--build-only", action="store_true", help="build, print the path, do not run")
    args = ap.parse_args(argv)
    builddir = args.builddir or tempfile.mkdtemp(prefix="ds4rt-selftest-")
    try:
        exe = build(builddir, args.cross)
    except subprocess.CalledProcessError as e:
        print(f"build failed: {e}", file=sys.stderr)
        return 2
    if args.build_only:
        print(exe)
        return 0
    return subprocess.run([*WRAPPER.get(args.cross or "", []), exe]).returncode


if __name__ == "__main__":
    sys.exit(main())
