"""FP8 (E4M3FN) / FP4 (E2M1) simulations and the Hadamard rotation of the float64 reference
(docs/MODEL.md, numerics), checked exhaustively on the grids and their ties, against
hand-computed values and against ml_dtypes' casts as an independent oracle."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from reference import lowp


def _oracle_e4m3(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _oracle_e2m1(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.float4_e2m1fn).astype(np.float64)


# --- grids ----------------------------------------------------------------------------------
def test_e4m3fn_grid_matches_bit_decoding():
    codes = np.arange(127, dtype=np.uint8)
    oracle = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_array_equal(lowp.E4M3FN_GRID, oracle)
    assert lowp.E4M3FN_GRID[1] == 2.0**-9  # smallest subnormal
    assert lowp.E4M3FN_GRID[7] == 7 * 2.0**-9  # largest subnormal
    assert lowp.E4M3FN_GRID[8] == 2.0**-6  # smallest normal
    assert lowp.E4M3FN_GRID[0x38] == 1.0
    assert lowp.E4M3FN_GRID[126] == 448.0
    assert np.all(np.diff(lowp.E4M3FN_GRID) > 0)
    assert np.isnan(np.uint8(127).view(ml_dtypes.float8_e4m3fn).astype(np.float64))


def test_e2m1_grid_matches_bit_decoding():
    oracle = np.arange(8, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    np.testing.assert_array_equal(lowp.E2M1_GRID, oracle)
    np.testing.assert_array_equal(lowp.E2M1_GRID, [0, 0.5, 1, 1.5, 2, 3, 4, 6])


@pytest.mark.parametrize("grid", [lowp.E4M3FN_GRID, lowp.E2M1_GRID], ids=["e4m3", "e2m1"])
def test_every_grid_value_is_fixed(grid):
    for sign in (1.0, -1.0):
        np.testing.assert_array_equal(lowp.round_to_grid(sign * grid, grid), sign * grid)


@pytest.mark.parametrize("grid", [lowp.E4M3FN_GRID, lowp.E2M1_GRID], ids=["e4m3", "e2m1"])
def test_every_tie_goes_to_the_even_code(grid):
    lo, hi = grid[:-1], grid[1:]
    mid = (lo + hi) / 2
    codes = np.arange(len(grid))
    even = np.where(codes[1:] % 2 == 0, hi, lo)
    for sign in (1.0, -1.0):
        np.testing.assert_array_equal(lowp.round_to_grid(sign * mid, grid), sign * even)
    # one ulp either side of every midpoint goes to the nearer neighbour
    np.testing.assert_array_equal(lowp.round_to_grid(np.nextafter(mid, 0), grid), lo)
    np.testing.assert_array_equal(lowp.round_to_grid(np.nextafter(mid, np.inf), grid), hi)


def test_e2m1_ties_by_hand():
    x = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    np.testing.assert_array_equal(lowp.round_e2m1(x), [0, 1, 1, 2, 2, 4, 4])
    np.testing.assert_array_equal(lowp.round_e2m1(-x), -np.array([0, 1, 1, 2, 2, 4, 4.0]))


def test_e4m3_ties_by_hand():
    # 1 + 1/16 lies halfway between 1 (code 56, even) and 1.125 (57): -> 1
    # 1 + 3/16 between 1.125 (57) and 1.25 (58, even): -> 1.25
    # 2^-10 between 0 and 2^-9: -> 0; 1.5*2^-9 between 2^-9 (1) and 2^-8 (2): -> 2^-8
    # 432 between 416 (125) and 448 (126, even): -> 448; 400 between 384 (124) and 416: -> 384
    x = [1 + 1 / 16, 1 + 3 / 16, 2.0**-10, 1.5 * 2.0**-9, 432.0, 400.0]
    np.testing.assert_array_equal(lowp.round_e4m3fn(x), [1.0, 1.25, 0.0, 2.0**-8, 448.0, 384.0])


def test_saturation():
    np.testing.assert_array_equal(lowp.round_e4m3fn([460.0, 1e9, -1e9]), [448.0, 448.0, -448.0])
    np.testing.assert_array_equal(lowp.round_e2m1([6.5, 100.0, -7.0]), [6.0, 6.0, -6.0])


def test_rounding_matches_ml_dtypes_on_random_values():
    rng = np.random.default_rng(0)
    # log-uniform magnitudes across the whole normal and subnormal range, float32-exact
    x = (rng.choice([-1, 1], 200000) * 2.0 ** rng.uniform(-14, np.log2(448), 200000)).astype(
        np.float32
    )
    np.testing.assert_array_equal(lowp.round_e4m3fn(x.astype(np.float64)), _oracle_e4m3(x))
    y = (rng.uniform(-6, 6, 200000)).astype(np.float32)
    np.testing.assert_array_equal(lowp.round_e2m1(y.astype(np.float64)), _oracle_e2m1(y))


def test_rounding_matches_ml_dtypes_on_all_midpoints():
    for grid, oracle in ((lowp.E4M3FN_GRID, _oracle_e4m3), (lowp.E2M1_GRID, _oracle_e2m1)):
        mid = (grid[:-1] + grid[1:]) / 2
        pts = np.concatenate([mid, -mid, grid, -grid])
        np.testing.assert_array_equal(lowp.round_to_grid(pts, grid), oracle(pts))


# --- power-of-two scales ----------------------------------------------------------------------
def _exact_pow2_ceil(amax: float, qmax: float) -> float:
    r = Fraction(amax) / Fraction(qmax)
    e = 0
    while Fraction(2) ** e < r:
        e += 1
    while Fraction(2) ** (e - 1) >= r:
        e -= 1
    return 2.0**e


def test_pow2_scale_by_hand():
    assert lowp.pow2_scale(448.0, 448.0) == 1.0
    assert lowp.pow2_scale(np.nextafter(448.0, np.inf), 448.0) == 2.0
    assert lowp.pow2_scale(np.nextafter(448.0, 0), 448.0) == 1.0
    assert lowp.pow2_scale(224.0, 448.0) == 0.5
    assert lowp.pow2_scale(225.0, 448.0) == 1.0
    assert lowp.pow2_scale(1e-4, 448.0) == 2.0**-22  # the FP8 amax floor (docs/MODEL.md "Numerics")
    assert lowp.pow2_scale(6.0, 6.0) == 1.0 and lowp.pow2_scale(3.0, 6.0) == 0.5
    assert lowp.pow2_scale(lowp.FP4_AMAX_FLOOR, 6.0) == 2.0**-126


def test_pow2_scale_is_exact_ceil_log2():
    rng = np.random.default_rng(1)
    amax = 2.0 ** rng.uniform(-30, 30, 400)
    # include exact powers of two times qmax and their float neighbours
    edges = 448.0 * 2.0 ** np.arange(-20, 20)
    amax = np.concatenate([amax, edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf)])
    for qmax in (448.0, 6.0):
        got = lowp.pow2_scale(amax, qmax)
        want = [_exact_pow2_ceil(a, qmax) for a in amax]
        np.testing.assert_array_equal(got, want)


# --- block round trips ------------------------------------------------------------------------
def test_fp8_roundtrip_by_hand():
    x = np.zeros(128)
    x[0], x[1], x[2], x[3] = 56.0, 1.1, -0.3, 0.01  # block 0: amax 56 -> s = 2^-3
    x[64], x[65] = 1e-6, -2e-5  # block 1: amax below the 1e-4 floor -> s = 2^-22
    y = lowp.fp8_roundtrip(x)
    # 1.1 / 2^-3 = 8.8 -> grid spacing 1 in [8, 16) -> 9 -> 1.125
    # -0.3 / 2^-3 = -2.4 -> spacing 0.25 in [2, 4) -> -2.5 -> -0.3125
    # 0.01 / 2^-3 = 0.08 -> spacing 2^-6 in [2^-4, 2^-3) -> 5/64 -> 5/512
    assert (y[0], y[1], y[2], y[3]) == (56.0, 1.125, -0.3125, 5 / 512)
    assert np.all(y[4:64] == 0)
    s = 2.0**-22
    assert y[64] == lowp.round_e4m3fn(1e-6 / s) * s
    assert y[65] == lowp.round_e4m3fn(-2e-5 / s) * s


def test_fp8_roundtrip_properties():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 448)) * 2.0 ** rng.integers(-8, 8, (5, 1))
    y = lowp.fp8_roundtrip(x)
    np.testing.assert_array_equal(lowp.fp8_roundtrip(y), y)  # idempotent
    for blk_x, blk_y in zip(x.reshape(-1, 64), y.reshape(-1, 64), strict=True):
        s = lowp.pow2_scale(max(np.abs(blk_x).max(), 1e-4), 448.0)
        q = blk_y / s
        assert np.all(np.isin(np.abs(q), lowp.E4M3FN_GRID))  # on the scaled grid
        assert np.abs(blk_x / s).max() <= 448.0
        # relative error of normal-range values at most half a mantissa step (2^-4)
        big = np.abs(blk_x / s) >= 2.0**-6
        assert np.all(np.abs(blk_y - blk_x)[big] <= 2.0**-4 * np.abs(blk_x)[big])
    with pytest.raises(ValueError):
        lowp.fp8_roundtrip(np.ones(65))


def test_fp4_roundtrip_by_hand():
    x = np.zeros(64)
    x[:8] = [6.0, 0.3, 0.25, 2.5, 5.0, -1.75, 0.76, -6.0]  # block 0: amax 6 -> s = 1
    x[32:36] = [3.0, 0.2, 1.3, -0.7]  # block 1: amax 3 -> s = 2^ceil(log2 0.5) = 0.5
    y = lowp.fp4_roundtrip(x)
    np.testing.assert_array_equal(y[:8], [6.0, 0.5, 0.0, 2.0, 4.0, -2.0, 1.0, -6.0])
    # block 1 in units of 0.5: 6, 0.4 -> 0.5, 2.6 -> 3, -1.4 -> -1.5
    np.testing.assert_array_equal(y[32:36], [3.0, 0.25, 1.5, -0.75])
    assert np.all(y[8:32] == 0) and np.all(y[36:] == 0)
    assert np.all(lowp.fp4_roundtrip(np.zeros(32)) == 0)


# --- Hadamard ---------------------------------------------------------------------------------
def _fwht(v):
    """Independent butterfly (natural order) Walsh-Hadamard transform, unnormalised."""
    v = np.array(v, dtype=np.float64)
    h = 1
    while h < len(v):
        for i in range(0, len(v), 2 * h):
            a, b = v[i : i + h].copy(), v[i + h : i + 2 * h].copy()
            v[i : i + h], v[i + h : i + 2 * h] = a + b, a - b
        h *= 2
    return v


def test_hadamard_matrix():
    np.testing.assert_array_equal(lowp.hadamard_matrix(2), [[1, 1], [1, -1]])
    np.testing.assert_array_equal(
        lowp.hadamard_matrix(4),
        [[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]],
    )
    for n in (1, 2, 8, 32, 128):
        h = lowp.hadamard_matrix(n)
        np.testing.assert_array_equal(h @ h.T, n * np.eye(n))  # orthogonal up to sqrt(n)
        np.testing.assert_array_equal(h, h.T)
    with pytest.raises(ValueError):
        lowp.hadamard_matrix(48)


def test_hadamard_rotation():
    rng = np.random.default_rng(3)
    for n in (32, 128):
        x = rng.standard_normal((3, n))
        y = lowp.hadamard(x)
        np.testing.assert_allclose(y[0], _fwht(x[0]) / np.sqrt(n), rtol=0, atol=1e-13)
        np.testing.assert_allclose(np.linalg.norm(y, axis=1), np.linalg.norm(x, axis=1))
        np.testing.assert_allclose(lowp.hadamard(y), x, atol=1e-13)  # self-inverse
        np.testing.assert_allclose(y @ y.T, x @ x.T, atol=1e-12)  # preserves dot products
