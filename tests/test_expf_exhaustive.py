"""The CPU backend's vector expf (src/backend/cpu/cpu_expf_fma.c) against the C library's expf
for all 2^32 float inputs, bit for bit (the C program tests/expf_exhaustive.c, ~45 s). It skips
where the machine takes the library's expf itself (no AVX2 and FMA, or not glibc >= 2.28)."""

from __future__ import annotations

import subprocess

import pytest


@pytest.mark.slow
def test_expf_rows_bitwise_for_every_float(c_programs):
    exe = c_programs("native").path("expf_exhaustive")
    r = subprocess.run([exe], capture_output=True, text=True, timeout=900)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASSED: 0 of 2^32 inputs differ" in r.stdout
