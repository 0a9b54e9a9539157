"""The HC, row and MoE-piece kernels of hip/ops.h against the CPU backend
(tests/gpu/test_ops.c, the Meson target test_ops of the `gpu` configuration; docs/GPU.md,
"Row ops, HC and MoE pieces"). Skips when the installed ds4rt has no GPU build, or when the
build has no device to run on (the program exits 77)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

# every family of kernels the program must report on (op names as test_ops prints them)
FAMILIES = {
    "matmul_float",
    "hc_pre",
    "hc_post",
    "hc_head",
    "capture",
    "argmax",
    "add",
    "nonfinite",
    "dspark_confidence",
    "swiglu",
    "moe_route",
    "moe",
    "sample",
}


@pytest.fixture(scope="module")
def run(c_programs):
    exe = c_programs("gpu").path("test_ops")

    def go(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
        full = {**os.environ, **(env or {})}
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=600, env=full)
        if r.returncode == 77:
            pytest.skip(r.stdout.strip())
        return r

    return go


@pytest.mark.parametrize("seed", [1, 7])
def test_ops_match_the_cpu_backend(run, seed):
    r = run("--seed", str(seed))
    lines = r.stdout.splitlines()
    failed = [line for line in lines if line.startswith("FAIL")]
    assert r.returncode == 0 and not failed, r.stdout + r.stderr
    assert lines[-1].startswith("test-ops:") and " 0 failed" in lines[-1], lines[-1]
    reported = {line.split()[1] for line in lines if line.startswith("ok")}
    assert FAMILIES <= reported, FAMILIES - reported
    # batch invariance is checked for every family that has rows
    alone = {line.split()[1] for line in lines if "alone == in batch" in line}
    assert {"matmul_float", "hc_pre", "hc_post", "hc_head", "argmax", "moe", "sample"} <= alone
    # learned routing met exact ties inside the top k (the tie-break is exercised)
    ties = [int(m.group(1)) for m in re.finditer(r"learned: ids \((\d+) slots on tied", r.stdout)]
    assert ties and ties[0] > 0, r.stdout


def test_hc_rms_in_mix_matches_the_two_launches(run):
    """The HC mix of up to 16 tokens with its RMS scale formed inside the product
    (DS4RT_GPU_HC_RMS_IN_MIX=1, DS4RT_GPU_FS1=16; docs/GPU.md "Merged launches"): at the real
    width batches of 1..16 (one launch) must equal the batch of 17 (the two launches), and
    hc_pre must match the CPU backend."""
    r = run("--seed", "3", env={"DS4RT_GPU_HC_RMS_IN_MIX": "1", "DS4RT_GPU_FS1": "16"})
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and not [x for x in lines if x.startswith("FAIL")], r.stdout + r.stderr
    real = [x for x in lines if x.startswith("ok") and " hc_pre " in f" {x} " and "D=4096" in x]
    assert real, r.stdout
    assert any("alone == in batch" in x and x.split()[1] == "hc_pre" for x in lines), r.stdout


def test_hc_pre_in_one_launch_matches(run):
    """hc_pre of up to 16 tokens in one launch (DS4RT_GPU_HC_PRE1=1: the HC RMS, the mixing
    product, pre, post and xn in gk_hc_pre1_kernel; docs/GPU.md "Merged launches"): at the real
    width every batch of 1..16 tokens (one launch) must equal the batch of 17 (the separate
    launches) bitwise, and hc_pre must match the CPU backend; the HC head likewise."""
    r = run("--seed", "5", env={"DS4RT_GPU_HC_PRE1": "1"})
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and not [x for x in lines if x.startswith("FAIL")], r.stdout + r.stderr
    form = "info forms HC pre and head one launch up to 16 tokens"
    assert any(x.startswith(form) for x in lines), lines[:3]
    real = [x for x in lines if x.startswith("ok") and x.split()[1] == "hc_pre" and "D=4096" in x]
    assert len(real) >= 9, r.stdout  # xn, post and comb of F32, F16 and BF16
    same = "batches 1..17 == batch of 17"
    batches = [x for x in lines if x.split()[:2] == ["ok", "hc_pre"] and same in x]
    assert len(batches) >= 3, r.stdout
    # the HC head takes the same kernel: a row alone (one launch) == the row in a batch of 17
    head = [x for x in lines if x.split()[:2] == ["ok", "hc_head"] and "alone == in batch" in x]
    assert len(head) >= 12, r.stdout  # 4 shapes x F32, F16, BF16
