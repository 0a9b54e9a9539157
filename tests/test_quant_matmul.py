"""The quantised matmul y = W x: accuracy against float64, the kernels alone against float64 of
the same rounded operands, bitwise agreement of every CPU path with the scalar one, row-wise
batch and thread invariance, odd shapes and argument errors."""

from __future__ import annotations

import numpy as np
import pytest
from quant_util import (
    activation_error_bound,
    dequant_matrix,
    random_matrix,
    rounded_activations,
)

from ds4rt import errors, ops

TYPES = ops.COMPUTE_TYPES

# Relative bound on the kernels' own f32 error (the products' sum is exact in integers for the
# block types; what remains is a handful of f32 roundings per block and the lane sums),
# relative to sum_c |W_rc * x_c|. Measured worst cases are around 1e-7.
KERNEL_RTOL = 1e-6


def cols_for(name: str) -> int:
    blk = ops.activation_block(name)
    return {1: 1000, 32: 800, 256: 1024}[blk]  # 800 = 25 blocks: a partial group of 8


def make_case(name: str, rows: int, n_tok: int, seed: int = 0):
    cols = cols_for(name)
    w = random_matrix(name, rows, cols, seed=seed)
    x = np.random.default_rng(seed + 1).standard_normal((n_tok, cols)).astype(np.float32)
    x[:, ::97] *= 25.0  # some large activations, so block scales vary
    return w, x, cols


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


@pytest.fixture
def restore_isa():
    before = ops.isa()
    yield
    ops.set_isa(before)


@pytest.mark.parametrize("name", TYPES)
def test_matmul_vs_float64(name):
    """|y - W x| <= sum_c |W_rc| * e_c + KERNEL_RTOL * sum_c |W_rc x_c|, where e_c bounds the
    rounding of activation c (half a Q8 step, half an f16/bf16 ulp, 0 for F32)."""
    rows, n_tok = 45, 5
    w, x, cols = make_case(name, rows, n_tok)
    y = ops.matmul(w, name, rows, cols, x)
    assert y.shape == (n_tok, rows) and y.dtype == np.float32
    wd = dequant_matrix(w, name, rows, cols)
    ref = x.astype(np.float64) @ wd.T
    bound = activation_error_bound(name, x) @ np.abs(wd).T
    bound += KERNEL_RTOL * (np.abs(x.astype(np.float64)) @ np.abs(wd).T) + 1e-30
    err = np.abs(y - ref)
    assert (err <= bound).all(), f"worst err/bound {np.max(err / bound):.3g}"


@pytest.mark.parametrize("name", TYPES)
def test_kernel_vs_float64_of_rounded_operands(name):
    """Isolates the kernel: the same rounded activations, summed in float64."""
    rows, n_tok = 45, 5
    w, x, cols = make_case(name, rows, n_tok, seed=10)
    y = ops.matmul(w, name, rows, cols, x).astype(np.float64)
    wd = dequant_matrix(w, name, rows, cols)
    xr = rounded_activations(name, x)
    ref = xr @ wd.T
    scale = np.abs(xr) @ np.abs(wd).T
    rel = np.abs(y - ref) / np.maximum(scale, 1e-30)
    assert rel.max() <= KERNEL_RTOL, f"kernel error {rel.max():.3g} of sum |terms|"


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("isa", ops.ALL_ISAS)
def test_every_isa_path_matches_scalar_bitwise(isa, name, restore_isa):
    try:
        ops.set_isa(isa)
    except (errors.UnsupportedError, errors.InvalidArgumentError) as e:
        pytest.skip(f"{isa}: {e}")
    rows, n_tok = 37, 7
    w, x, cols = make_case(name, rows, n_tok, seed=20)
    y = ops.matmul(w, name, rows, cols, x)
    ops.set_isa("scalar")
    y_ref = ops.matmul(w, name, rows, cols, x)
    assert np.array_equal(bits(y), bits(y_ref))


@pytest.mark.parametrize("name", TYPES)
def test_row_wise_batch_and_thread_invariance(name):
    rows, n_tok = 23, 17
    w, x, cols = make_case(name, rows, n_tok, seed=30)
    full = ops.matmul(w, name, rows, cols, x, n_threads=1)
    for t in range(n_tok):
        one = ops.matmul(w, name, rows, cols, x[t : t + 1], n_threads=1)
        assert np.array_equal(bits(one[0]), bits(full[t])), f"token {t} alone"
    for nb in range(2, n_tok + 1):
        t0 = (3 * nb) % (n_tok - nb + 1)
        part = ops.matmul(w, name, rows, cols, x[t0 : t0 + nb], n_threads=1)
        assert np.array_equal(bits(part), bits(full[t0 : t0 + nb])), f"batch of {nb} at {t0}"
    for threads in (2, 3, 8):
        again = ops.matmul(w, name, rows, cols, x, n_threads=threads)
        assert np.array_equal(bits(again), bits(full)), f"{threads} threads"


@pytest.mark.parametrize("name", TYPES)
def test_column_chunking_is_invisible(name):
    """Wide rows with 16 tokens are computed in column chunks (matmul.c) with a ragged last
    chunk; one token alone is not. Both must give the same bits."""
    blk = ops.activation_block(name)
    cols = {1: 1064, 32: 32 * 75, 256: 256 * 13}[blk]
    rows = 19
    w = random_matrix(name, rows, cols, seed=40)
    x = np.random.default_rng(40).standard_normal((16, cols)).astype(np.float32)
    full = ops.matmul(w, name, rows, cols, x, n_threads=2)
    for t in (0, 7, 15):
        one = ops.matmul(w, name, rows, cols, x[t], n_threads=1)
        assert np.array_equal(bits(one), bits(full[t]))


@pytest.mark.parametrize("name", ["F16", "Q8_0", "Q4_K", "IQ2_XXS"])
@pytest.mark.parametrize("rows", [1, 3, 64, 1000])
def test_odd_shapes(name, rows):
    cols = ops.activation_block(name) * (1 if rows == 1000 else 3)
    cols = max(cols, 7) if name == "F16" else cols  # 7 columns: all tail, no full 32-lane step
    w = random_matrix(name, rows, cols, seed=rows)
    x = np.random.default_rng(rows).standard_normal((3, cols)).astype(np.float32)
    y = ops.matmul(w, name, rows, cols, x, n_threads=3)
    wd = dequant_matrix(w, name, rows, cols)
    xr = rounded_activations(name, x)
    ref = xr @ wd.T
    assert np.all(np.abs(y - ref) <= KERNEL_RTOL * (np.abs(xr) @ np.abs(wd).T) + 1e-30)
    assert np.array_equal(bits(ops.matmul(w, name, rows, cols, x[1])), bits(y[1]))


def test_empty_shapes():
    w = random_matrix("Q8_0", 4, 64, seed=1)
    assert ops.matmul(w, "Q8_0", 4, 64, np.zeros((0, 64), np.float32)).shape == (0, 4)
    assert ops.matmul(b"", "Q8_0", 0, 64, np.zeros((2, 64), np.float32)).shape == (2, 0)


def test_bad_arguments():
    w = random_matrix("Q4_K", 2, 256, seed=1)
    x = np.zeros((1, 256), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="not a multiple"):
        ops.matmul(bytes(200), "Q4_K", 1, 128, np.zeros((1, 128), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="not a multiple"):
        ops.matmul(bytes(34 * 2), "Q8_0", 1, 48, np.zeros((1, 48), np.float32))
    with pytest.raises(errors.UnsupportedError, match="unknown tensor type id 99"):
        ops.matmul(w, 99, 2, 256, x)
    with pytest.raises(errors.UnsupportedError, match="Q3_K"):
        ops.matmul(bytes(220), "Q3_K", 2, 256, x)
    with pytest.raises(ValueError, match="shape"):
        ops.matmul(w, "Q4_K", 2, 256, np.zeros((1, 255), np.float32))
    with pytest.raises(ValueError, match="too few"):
        ops.matmul(w[:-1], "Q4_K", 2, 256, x)
    with pytest.raises(ValueError, match="unknown tensor type"):
        ops.matmul(w, "Q9_9", 2, 256, x)


def test_non_finite_activations_do_not_crash():
    w = random_matrix("IQ2_XXS", 4, 256, seed=2)
    x = np.zeros((2, 256), np.float32)
    x[0, 3] = np.nan
    x[1, 5] = np.inf
    y = ops.matmul(w, "IQ2_XXS", 4, 256, x)
    assert y.shape == (2, 4)


def test_isa_control(restore_isa):
    avail = ops.available_isas()
    assert "scalar" in avail and ops.isa() in avail
    with pytest.raises(errors.InvalidArgumentError, match="unknown CPU path"):
        ops.set_isa("sse9")
    for name in ops.ALL_ISAS:
        if name not in avail:
            with pytest.raises(errors.UnsupportedError):
                ops.set_isa(name)
    ops.set_isa("scalar")
    assert ops.isa() == "scalar"
    ops.set_isa("auto")
    assert ops.isa() == avail[-1]  # the widest available path
