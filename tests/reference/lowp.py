"""Low-precision simulations of DeepSeek V4 (docs/MODEL.md "Numerics"), in float64.

Everything here is exact: the grids are small dyadic numbers, the scales are powers of two, and
every comparison that decides a rounding is made against an exactly representable midpoint, so
there is one and only one answer for every input (no dependence on float32 log2 or division).

* E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits, no infinities, only 0x7F/0xFF are NaN.
  Non-negative finite values by code c = (e << 3) | m, c = 0..126:
  e = 0 -> m * 2^-9 (subnormals), e >= 1 -> (1 + m/8) * 2^(e-7). Largest 448 (code 126).
* E2M1: codes 0..7 -> 0, 0.5, 1, 1.5, 2, 3, 4, 6.
* Round to nearest; a value exactly halfway between two neighbours goes to the neighbour with the
  even code (= even mantissa LSB; IEEE round-half-to-even on these formats).
"""

from __future__ import annotations

import numpy as np

FP8_MAX = 448.0
FP8_AMAX_FLOOR = 1e-4
FP8_BLOCK = 64

FP4_MAX = 6.0
FP4_AMAX_FLOOR = 6.0 * 2.0**-126
FP4_BLOCK = 32


def e4m3fn_value(code: int) -> float:
    """The non-negative value of E4M3FN code 0..126 (the sign bit is handled by callers)."""
    if not 0 <= code <= 126:
        raise ValueError(f"E4M3FN code {code} is not a non-negative finite value")
    e, m = code >> 3, code & 7
    if e == 0:
        return m * 2.0**-9
    return (1.0 + m / 8.0) * 2.0 ** (e - 7)


E4M3FN_GRID = np.array([e4m3fn_value(c) for c in range(127)], dtype=np.float64)
E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)


def round_to_grid_codes(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Code index (into the ascending non-negative `grid`) nearest to |x|, ties to the even code.

    |x| above the largest grid value maps to the largest code (saturation)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    last = len(grid) - 1
    lo = np.searchsorted(grid, a, side="right") - 1  # grid[lo] <= a (a >= 0 = grid[0])
    lo = np.clip(lo, 0, last)
    hi = np.minimum(lo + 1, last)
    mid = (grid[lo] + grid[hi]) * 0.5  # exact: neighbours differ by a power of two
    up = (a > mid) | ((a == mid) & (hi != lo) & (hi % 2 == 0))
    return np.where(up, hi, lo)


def round_to_grid(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Signed nearest grid value (ties to even code, saturating)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * grid[round_to_grid_codes(x, grid)]


def round_e4m3fn(x: np.ndarray) -> np.ndarray:
    return round_to_grid(x, E4M3FN_GRID)


def round_e2m1(x: np.ndarray) -> np.ndarray:
    return round_to_grid(x, E2M1_GRID)


def pow2_scale(amax: np.ndarray, qmax: float) -> np.ndarray:
    """2^ceil(log2(amax / qmax)) computed exactly: the least power of two s with qmax*s >= amax."""
    amax = np.asarray(amax, dtype=np.float64)
    _, e = np.frexp(amax / qmax)  # amax/qmax ~= m * 2^e, m in [0.5, 1): answer is e-1 or e (or e+1)
    e = e.astype(np.int64) - 1
    # Fix the (rounded) division exactly: qmax * 2^e is exact, so these comparisons are exact.
    for _ in range(2):
        e = np.where(np.ldexp(qmax, e) < amax, e + 1, e)
    e = np.where(np.ldexp(qmax, e - 1) >= amax, e - 1, e)
    return np.ldexp(1.0, e)


def _blockwise_roundtrip(
    x: np.ndarray, block: int, qmax: float, floor: float, grid: np.ndarray
) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.shape[-1] % block:
        raise ValueError(f"last dimension {x.shape[-1]} is not a multiple of the block {block}")
    xb = x.reshape(*x.shape[:-1], x.shape[-1] // block, block)
    amax = np.maximum(np.abs(xb).max(axis=-1, keepdims=True), floor)
    s = pow2_scale(amax, qmax)
    q = round_to_grid(np.clip(xb / s, -qmax, qmax), grid)
    return (q * s).reshape(x.shape)


def fp8_roundtrip(x: np.ndarray) -> np.ndarray:
    """FP8: per block of 64 along the last axis, ue8m0 power-of-two scale, E4M3FN round trip."""
    return _blockwise_roundtrip(x, FP8_BLOCK, FP8_MAX, FP8_AMAX_FLOOR, E4M3FN_GRID)


def fp4_roundtrip(x: np.ndarray) -> np.ndarray:
    """FP4: per block of 32 along the last axis, power-of-two scale, E2M1 round trip."""
    return _blockwise_roundtrip(x, FP4_BLOCK, FP4_MAX, FP4_AMAX_FLOOR, E2M1_GRID)


def hadamard_matrix(n: int) -> np.ndarray:
    """Sylvester Hadamard matrix H_n in natural order (H_1 = [1], H_2n = [[H, H], [H, -H]])."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"Hadamard size {n} is not a power of two")
    h = np.ones((1, 1), dtype=np.float64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def hadamard(x: np.ndarray) -> np.ndarray:
    """(H_d · v) / sqrt(d) applied to the last axis (H is symmetric, so v·H = H·v)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    return (x @ hadamard_matrix(d)) / np.sqrt(d)
