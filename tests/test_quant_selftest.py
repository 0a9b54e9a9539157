"""The C kernel self-test (tests/quant_selftest.c, built straight from the sources by
tools/quant_selftest.py): every ISA path vs scalar bitwise, batch/thread invariance, float64.
Natively it covers the paths this CPU runs; under qemu-aarch64 it covers NEON and NEON+dotprod."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


def run_selftest(repo_root: str, *args: str) -> subprocess.CompletedProcess:
    tool = os.path.join(repo_root, "tools", "quant_selftest.py")
    return subprocess.run(
        [sys.executable, tool, *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_selftest_native(repo_root):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    r = run_selftest(repo_root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASSED" in r.stdout and "OK scalar" in r.stdout


@pytest.mark.slow
def test_selftest_neon_under_qemu(repo_root):
    cc, qemu = shutil.which("aarch64-linux-gnu-gcc"), shutil.which("qemu-aarch64")
    if cc is None or qemu is None:
        pytest.skip(
            "needs aarch64-linux-gnu-gcc and qemu-aarch64"
            " (apt-get install gcc-aarch64-linux-gnu qemu-user)"
        )
    r = run_selftest(repo_root, "--cc", cc, "--static", "--run", f"{qemu} -cpu max")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK neon:" in r.stdout and "OK neon-dotprod:" in r.stdout
