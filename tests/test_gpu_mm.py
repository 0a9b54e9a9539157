"""The GPU matrix products (hip/mm.h) against the CPU backend's, bitwise: every weight type on
random data, odd shapes, n = 1..17 rows, batch invariance, expert stacks with device ids, row
gathers (tests/gpu/test_mm.c, the Meson target test_mm of the `gpu` configuration; docs/GPU.md,
"Matrix products"). Skips without a GPU build, or without a device; under HIP-CPU it runs the
same checks on the CPU (slowly: the quick set of shapes and n)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ds4rt

GPU_KIND = (re.search(r"gpu=(\w+)", ds4rt.build_info()) or [None, "none"])[1]
# HIP-CPU runs kernels on CPU threads: the quick set keeps the test to about a minute there
QUICK = ["--quick"] if GPU_KIND == "hipcpu" else []
NO_DEVICE = 77


def _program(c_programs, name: str) -> str:
    import meson_programs

    try:
        return c_programs("gpu").path(name)
    except meson_programs.Unavailable as e:
        pytest.skip(str(e))


def _run(exe: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode == NO_DEVICE:
        pytest.skip(r.stdout.strip() or "no GPU device")
    return r


@pytest.fixture(scope="module")
def test_mm(c_programs):
    return _program(c_programs, "test_mm")


TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "MXFP4", "Q2_K", "Q4_K", "Q5_K", "Q6_K", "IQ2_XXS"]


@pytest.mark.parametrize("wtype", TYPES)
def test_type_matches_cpu_bitwise(test_mm, wtype):
    r = _run(test_mm, "--type", wtype, "--seed", "7", *QUICK)
    lines = r.stdout.splitlines()
    failed = [line for line in lines if line.startswith("FAIL")]
    assert r.returncode == 0 and not failed, r.stdout[-8000:] + r.stderr
    mine = [line for line in lines if line.startswith("ok") and line.split()[1] == wtype]
    # every kind of check ran for this type (a check that silently vanished fails here)
    kinds = {"matmul", "batch", "experts", "get_rows"} | (
        set() if wtype in ("F32", "F16", "BF16") else {"activation"}
    )
    assert kinds <= {line.split()[2] for line in mine}, r.stdout
    assert any(" n=17 " in line for line in mine) and any("unaligned" in line for line in mine)
    assert lines[-1].startswith("test_mm:") and lines[-1].endswith(" 0 failed"), lines[-1]


# The expert-stack forms (docs/GPU.md, "Matrix products"): each setting in a fresh process, the
# program's "info forms" line must name the form taken, and every check must pass bitwise (the
# default run above covers the defaults; these cover the others).
FORMS = [
    ("IQ2_XXS", {"DS4RT_GPU_QS_IQ2": "old"}, "IQ2_XXS mm_qs old (DS4RT_GPU_QS_IQ2)"),
    ("IQ2_XXS", {"DS4RT_GPU_QS_IQ2": "new"}, "IQ2_XXS mm_qs new (DS4RT_GPU_QS_IQ2)"),
    ("Q2_K", {"DS4RT_GPU_QS_Q2K": "1"}, "Q2_K mm_qs new (DS4RT_GPU_QS_Q2K)"),
    ("Q2_K", {"DS4RT_GPU_QS_Q2K": "old"}, "Q2_K mm_qs old (DS4RT_GPU_QS_Q2K)"),
    ("Q2_K", {"DS4RT_GPU_QS_Q2K": "0"}, "Q2_K mm_q (DS4RT_GPU_QS_Q2K)"),
    # registers unbounded or bounded for 4 blocks per multiprocessor (spills included; 3 is the
    # default), either arithmetic
    ("IQ2_XXS", {"DS4RT_GPU_QS_MINB": "1", "DS4RT_GPU_QS_IQ2": "old"}, "registers unbounded"),
    ("IQ2_XXS", {"DS4RT_GPU_QS_MINB": "4", "DS4RT_GPU_QS_IQ2": "new"}, "registers for 4 blocks"),
    ("Q2_K", {"DS4RT_GPU_QS_MINB": "1", "DS4RT_GPU_QS_Q2K": "1"}, "registers unbounded"),
    ("Q2_K", {"DS4RT_GPU_QS_MINB": "4", "DS4RT_GPU_QS_Q2K": "old"}, "registers for 4 blocks"),
]


@pytest.mark.parametrize(
    "wtype,env,form", FORMS, ids=[f"{t}-{'-'.join(e.values())}" for t, e, _ in FORMS]
)
def test_expert_forms_match_cpu_bitwise(test_mm, wtype, env, form):
    full = {**os.environ, **env}
    for shape in (
        [],
        ["--shape", "70x2560"],
        ["--shape", "33x8448"],
        ["--shape", "9x768", "--misalign"],
        # 16-byte aligned rows of several steps of mm_qs_kernel, the last one partial for Q2_K
        # (IQ2_XXS: 24 blocks = 16 + 8; Q2_K: 24 = 3 x 8, and 12 = 8 + 4 at 3072 columns)
        ["--shape", "70x6144"],
        ["--shape", "40x3072"],
    ):
        args = [test_mm, "--type", wtype, "--seed", "11", *shape, *QUICK]
        r = subprocess.run(args, capture_output=True, text=True, timeout=600, env=full)
        if r.returncode == NO_DEVICE:
            pytest.skip(r.stdout.strip() or "no GPU device")
        lines = r.stdout.splitlines()
        info = [line for line in lines if line.startswith("info forms ")]
        assert info and form in info[0], (env, info)
        assert r.returncode == 0 and "FAIL" not in r.stdout, (
            env,
            shape,
            r.stdout[-6000:],
            r.stderr,
        )
        assert any(line.startswith("ok") and " experts " in line for line in lines), r.stdout


def _checks_pass(test_mm, wtype: str, seed: int, shape: list[str], env: dict) -> list[str]:
    """test_mm of one type under `env`: every check must pass; its output lines."""
    args = [test_mm, "--type", wtype, "--seed", str(seed), *shape, *QUICK]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    if r.returncode == NO_DEVICE:
        pytest.skip(r.stdout.strip() or "no GPU device")
    assert r.returncode == 0 and "FAIL" not in r.stdout, (env, shape, r.stdout[-6000:], r.stderr)
    return r.stdout.splitlines()


@pytest.mark.parametrize("wtype", ["Q8_0", "Q4_0", "MXFP4"])
def test_streamed_row_groups_match_cpu_bitwise(test_mm, wtype):
    """mm_qt_kernel with fewer thread blocks than row groups, each streaming its groups
    (docs/GPU.md, "Streaming row groups"): forced to 4 blocks (1 per group of the grouped
    product's 4), so the test's small shapes and a 2100 x 4096 product stream, the latter also
    in the fused forms that convert activations once per block (dense and grouped)."""
    for shape in ([], ["--shape", "2100x4096"]):
        lines = _checks_pass(test_mm, wtype, 13, shape, {"DS4RT_GPU_QT_STREAM": "4"})
        info = [line for line in lines if line.startswith("info forms ")]
        assert info and "Q8_0 row groups streamed by 4 blocks" in info[0], info
        # rows of 16-byte multiples (4096 columns) take the grouped products, fused ones too
        assert not shape or any(" grouped fused n=1 " in line for line in lines), lines


@pytest.mark.parametrize("wtype", ["F32", "F16", "BF16"])
def test_raw_float_rows_match_cpu_bitwise(test_mm, wtype):
    """Float products of up to 32 tokens rounding their raw activation rows as they load them
    (DS4RT_GPU_RAW_FLOAT=1, docs/GPU.md "Merged launches"): every check bitwise the CPU's."""
    for shape in ([], ["--shape", "24x16384"]):
        lines = _checks_pass(test_mm, wtype, 17, shape, {"DS4RT_GPU_RAW_FLOAT": "1"})
        assert any(line.startswith("ok") and " n=17 " in line for line in lines), lines


@pytest.mark.parametrize("wtype", ["F32", "F16", "BF16"])
@pytest.mark.parametrize("raw", ["0", "1"])
def test_hc_mix_of_several_tokens_matches_cpu_bitwise(test_mm, wtype, raw):
    """The HC mixes' shape (24 x 16384) with mm_fs1_kernel taking up to 16 tokens, a block per
    row and token (DS4RT_GPU_FS1=16, docs/GPU.md "Streaming row groups"), with converted or raw
    activation rows: every check of n = 1..17 bitwise the CPU's, and the form reported."""
    env = {"DS4RT_GPU_FS1": "16", "DS4RT_GPU_RAW_FLOAT": raw}
    lines = _checks_pass(test_mm, wtype, 19, ["--shape", "24x16384"], env)
    info = [line for line in lines if line.startswith("info forms ")]
    assert info and "HC mixes mm_fs1 up to 16 tokens (DS4RT_GPU_FS1)" in info[0], info
    assert any(line.startswith("ok") and " n=3 " in line for line in lines), lines


def test_expert_forms_default_reported(test_mm):
    knobs = ("DS4RT_GPU_QS_IQ2", "DS4RT_GPU_QS_Q2K", "DS4RT_GPU_QS_MINB", "DS4RT_GPU_FS1")
    env = {k: v for k, v in os.environ.items() if k not in knobs}
    r = subprocess.run(
        [test_mm, "--type", "none"], capture_output=True, text=True, timeout=600, env=env
    )
    if r.returncode == NO_DEVICE:
        pytest.skip(r.stdout.strip() or "no GPU device")
    info = [line for line in r.stdout.splitlines() if line.startswith("info forms ")]
    assert info and "IQ2_XXS mm_qs old (default), Q2_K mm_qs new (default)" in info[0], info
    assert "registers for 3 blocks (default)" in info[0], info
    assert "HC mixes mm_fs1 up to 1 token (default)" in info[0], info


BLOCK = {"F32": 1, "F16": 1, "BF16": 1, "Q8_0": 32, "Q4_0": 32, "MXFP4": 32}  # others: 256


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    wtype=st.sampled_from(TYPES),
    rows=st.integers(1, 70),
    blocks=st.integers(1, 40),
    seed=st.integers(1, 2**31),
    misalign=st.booleans(),
)
def test_searched_shapes_match_cpu_bitwise(test_mm, wtype, rows, blocks, seed, misalign):
    """Shapes drawn by hypothesis (any rows, any whole number of blocks, rows 16-byte aligned or
    not), every check of test_mm on each."""
    blk = BLOCK.get(wtype, 256)
    cols = blocks * (7 if blk == 1 and blocks % 2 else max(blk, 8))
    args = ["--type", wtype, "--seed", str(seed), "--shape", f"{rows}x{cols}", "--quick"]
    r = _run(test_mm, *args, *(["--misalign"] if misalign else []))
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and "FAIL" not in r.stdout, (args, r.stdout[-6000:], r.stderr)
    assert any(line.startswith("ok") and " matmul " in line for line in lines), (args, r.stdout)


def test_refusals_and_supported_types(test_mm):
    r = _run(test_mm, "--type", "none")
    lines = r.stdout.splitlines()
    assert r.returncode == 0, r.stdout + r.stderr
    for what in (
        "Q3_K is not supported",
        "unsupported type refused",
        "cols not a block multiple refused",
        "row_bytes too small refused",
        "scratch too small refused",
        "supported types are the CPU's",
    ):
        assert any(line.startswith("ok") and what in line for line in lines), (what, r.stdout)


ON_GPU_ONLY = "the benchmark's numbers mean something on a GPU only"


@pytest.mark.skipif(GPU_KIND != "hipcpu", reason=ON_GPU_ONLY)
def test_bench_mm_emits_json(c_programs):
    """The benchmark runs and its JSON has the fields the device run reads (speed is measured on
    the H200 by tools/gpu_device_run.sh, never by a test)."""
    exe = _program(c_programs, "bench_mm")
    r = _run(exe, "--quick", "--types", "Q8_0,IQ2_XXS,F16")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ops = {(x["op"], x["type"]) for x in doc["results"]}
    for want in (("matmul", "F16"), ("experts", "IQ2_XXS"), ("matmul+convert", "Q8_0")):
        assert want in ops, (want, ops)
    for x in doc["results"]:
        assert x["us"] > 0 and x["floor_us"] > 0 and x["gbps"] > 0


if os.environ.get("DS4RT_GPU_MM_SEEDS"):  # more seeds on the device: DS4RT_GPU_MM_SEEDS=1,2,3

    @pytest.mark.parametrize("seed", os.environ["DS4RT_GPU_MM_SEEDS"].split(","))
    def test_seeds(test_mm, seed):
        r = _run(test_mm, "--seed", seed)
        assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout[-8000:] + r.stderr
