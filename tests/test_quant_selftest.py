"""The C kernel self-test (tests/quant_selftest.c, the Meson target quant_selftest): every ISA
path vs scalar bitwise, batch/thread invariance, float64. Natively it covers the paths this CPU
runs; cross-compiled for aarch64 (tests/cross/aarch64-linux-gnu.ini) and run under qemu it
covers NEON and NEON+dotprod."""

from __future__ import annotations

import os
import subprocess

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("guided", ["0", "1"])
def test_selftest_native(c_programs, guided):
    """Also with the pool's guided chunking (DS4RT_POOL_GUIDED=1): every item exactly once and
    the same bits whatever the split."""
    exe = c_programs("native").path("quant_selftest")
    env = dict(os.environ, DS4RT_POOL_GUIDED=guided)
    r = subprocess.run([exe], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASSED" in r.stdout and "OK scalar" in r.stdout and "OK pool" in r.stdout


@pytest.mark.slow
def test_selftest_neon_under_qemu(c_programs):
    exe = c_programs("aarch64").path("quant_selftest")
    r = subprocess.run(
        ["qemu-aarch64", "-cpu", "max", exe], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK neon:" in r.stdout and "OK neon-dotprod:" in r.stdout
