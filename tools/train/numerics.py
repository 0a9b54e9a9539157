"""ds4rt's "official" numerics in PyTorch, differentiable by straight-through estimation.

* FP8 E4M3FN round trip in blocks of 64 with power-of-two (ue8m0) scales: the non-RoPE dims of
  every raw and compressed KV row (docs/MODEL.md "Numerics").
* FP4 E2M1 round trip in blocks of 32 with power-of-two scales, after the Hadamard rotation: the
  indexer's q and k (docs/MODEL.md "Indexer").

Rounding is to the nearest grid value, ties to the even code, exactly as
tests/reference/lowp.py does it (the grid and the tie rule are the same; the scale is the least
power of two s with qmax * s >= amax, found with exact comparisons). The forward value is the
rounded one; the gradient passes through unchanged (straight-through), so training sees the
quantisation error the runtime will apply and can adapt to it.
"""

from __future__ import annotations

import math

import torch

FP8_MAX, FP8_FLOOR, FP8_BLOCK = 448.0, 1e-4, 64
FP4_MAX, FP4_FLOOR, FP4_BLOCK = 6.0, 6.0 * 2.0**-126, 32


def _e4m3_grid() -> list[float]:
    out = []
    for code in range(127):
        e, m = code >> 3, code & 7
        out.append(m * 2.0**-9 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7))
    return out


E4M3 = _e4m3_grid()
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
_GRIDS: dict = {}


def _grid(values, like: torch.Tensor):
    key = (id(values), like.device, like.dtype)
    g = _GRIDS.get(key)
    if g is None:
        grid = torch.tensor(values, dtype=like.dtype, device=like.device)
        g = (grid, (grid[1:] + grid[:-1]) * 0.5)
        _GRIDS[key] = g
    return g


def round_to_grid(x: torch.Tensor, values) -> torch.Tensor:
    """Signed nearest grid value, ties to the even code, saturating at the largest value."""
    grid, mids = _grid(values, x)
    a = x.abs()
    code = torch.bucketize(a, mids)  # number of midpoints strictly below a
    last = len(mids) - 1
    tie = (a == mids[code.clamp(max=last)]) & (code <= last)  # exactly on the midpoint above
    code = code + (tie & (code % 2 == 1)).to(code.dtype)
    return torch.sign(x) * grid[code]


def pow2_scale(amax: torch.Tensor, qmax: float) -> torch.Tensor:
    """The least power of two s with qmax * s >= amax (exact comparisons)."""
    _, e = torch.frexp(amax / qmax)
    e = e.to(torch.int32) - 1
    one = torch.ones_like(amax)
    for _ in range(2):
        e = torch.where(torch.ldexp(one * qmax, e) < amax, e + 1, e)
    e = torch.where(torch.ldexp(one * qmax, e - 1) >= amax, e - 1, e)
    return torch.ldexp(one, e)


def blockwise_roundtrip(x, block: int, qmax: float, floor: float, values) -> torch.Tensor:
    shape = x.shape
    xb = x.reshape(*shape[:-1], shape[-1] // block, block)
    amax = xb.detach().abs().amax(-1, keepdim=True).clamp_min(floor)
    s = pow2_scale(amax, qmax)
    q = round_to_grid((xb.detach() / s).clamp(-qmax, qmax), values) * s
    return q.reshape(shape)


def straight_through(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return x + (q - x).detach()


def fp8_st(x: torch.Tensor) -> torch.Tensor:
    """FP8 E4M3 round trip of the last axis (a multiple of 64), straight-through gradient."""
    return straight_through(x, blockwise_roundtrip(x, FP8_BLOCK, FP8_MAX, FP8_FLOOR, E4M3))


def fp4_st(x: torch.Tensor) -> torch.Tensor:
    """FP4 E2M1 round trip of the last axis (a multiple of 32), straight-through gradient."""
    return straight_through(x, blockwise_roundtrip(x, FP4_BLOCK, FP4_MAX, FP4_FLOOR, E2M1))


def hadamard_matrix(n: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """Sylvester H_n / sqrt(n) in natural order (symmetric, orthogonal)."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"Hadamard size {n} is not a power of two")
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (h / math.sqrt(n)).to(dtype=dtype, device=device)
