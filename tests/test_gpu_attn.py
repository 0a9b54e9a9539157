"""The attention-side GPU kernels (hip/attn.hip) against the CPU backend's ops
(tests/gpu/test_attn.c, the Meson target test_attn of the `gpu` configuration): RMS norm, RoPE
with YaRN, FP8/FP4, Hadamard, the KV ring, the compressor with rollback at every keep length,
the indexer's top-k and attention with sinks; bitwise where the arithmetic order is the CPU's,
within the tolerances docs/GPU.md states elsewhere, and batch invariant bitwise on the GPU.

Skips without a GPU build (gpu=none) or without a device; under HIP-CPU it runs on the CPU."""

from __future__ import annotations

import subprocess

import meson_programs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def run(c_programs):
    try:
        exe = c_programs("gpu").path("test_attn")
    except meson_programs.Unavailable as e:
        pytest.skip(str(e))

    def go(*args: str) -> subprocess.CompletedProcess:
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)
        if r.returncode == 77:
            pytest.skip(r.stdout.strip())
        return r

    return go


def _passes(r: subprocess.CompletedProcess) -> None:
    failed = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert r.returncode == 0 and not failed, r.stdout + r.stderr
    summary = r.stdout.strip().splitlines()[-1]
    assert summary.startswith("test_attn:") and summary.endswith(" 0 failed"), summary


@pytest.mark.parametrize("seed", [1, 2])
def test_attention_kernels_match_the_cpu_backend(run, seed):
    _passes(run("--seed", str(seed)))


@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(min_value=3, max_value=2**62))
def test_attention_kernels_on_searched_seeds(run, seed):
    """Each seed draws its own shapes, positions, ring sizes and key kinds."""
    _passes(run("--seed", str(seed)))


def test_every_kernel_is_checked(run):
    out = run().stdout
    checked = {line.split()[1] for line in out.splitlines() if line.startswith("ok")}
    ops = {
        "rms_norm",
        "rope",
        "fp8_round",
        "fp4_round",
        "hadamard",
        "kv_store",
        "compressor",
        "indexer_topk",
        "attention",
    }
    assert ops <= checked, ops - checked
    # rollback across ratio-4 and ratio-128 emissions, and the real attention width
    assert "R 4 d 512 fp8: " in out and "R 128 d 512 fp8: " in out
    assert "real width" in out


def test_usage_errors_exit_2(run):
    assert run("--bogus").returncode == 2
