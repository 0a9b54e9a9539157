"""NumPy quantisers for the GGML block types gguf-py 0.19.0 cannot write: Q2_K, Q4_K, IQ2_XXS.

Byte layouts follow GGML's (docs/QUANTS.md, the type table). Each quantiser takes a float array
whose last dimension is a multiple of 256 and returns the raw block bytes as a uint8 array whose
last dimension is (row length / 256) * bytes-per-block, the form
GGUFWriter.add_tensor(raw_dtype=...) takes. gguf.quants.dequantize is the oracle these are tested
against (tests/test_tinymodel.py).

Everything is vectorised over blocks; the only Python loops run over a fixed handful of candidate
scales, so a few million elements quantise in well under a second.
"""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants as gq

QK_K = 256

# ---------------------------------------------------------------------------------------------
# Shared: least-squares (scale, min) per sub-block for "x ~ scale * q - min", q in [0, nmax].
# ---------------------------------------------------------------------------------------------


def _fit_scale_min(x: np.ndarray, nmax: int, n_candidates: int = 10):
    """Per row of x (shape [n, m]) find scale >= 0 and mn >= 0 minimising sum (scale*q - mn - x)^2.

    Candidate grid spacings around (max - min) / nmax give integer assignments; for each the
    optimal (scale, offset) is the closed-form least-squares line through (q, x). The offset is
    clamped to <= 0 (the formats store a non-negative min that is subtracted), refitting the
    scale alone when clamped. The best candidate by squared error wins.
    """
    x = x.astype(np.float64)
    lo = np.minimum(x.min(axis=1), 0.0)
    hi = x.max(axis=1)
    span = hi - lo
    best_err = np.full(x.shape[0], np.inf)
    best_scale = np.zeros(x.shape[0])
    best_min = np.zeros(x.shape[0])
    safe_span = np.where(span > 0, span, 1.0)
    m = x.shape[1]
    for t in np.linspace(-0.25, 0.25, n_candidates):
        iscale = (nmax + t) / safe_span
        q = np.clip(np.rint((x - lo[:, None]) * iscale[:, None]), 0, nmax)
        sq = q.sum(axis=1)
        sqq = (q * q).sum(axis=1)
        sx = x.sum(axis=1)
        sqx = (q * x).sum(axis=1)
        det = m * sqq - sq * sq
        ok = det > 0
        det = np.where(ok, det, 1.0)
        scale = np.where(ok, (m * sqx - sq * sx) / det, 0.0)
        off = np.where(ok, (sqq * sx - sq * sqx) / det, lo)
        # The stored min is non-negative: offset must be <= 0. Refit the scale with offset 0.
        pos = off > 0
        scale = np.where(pos, np.where(sqq > 0, sqx / np.where(sqq > 0, sqq, 1.0), 0.0), scale)
        off = np.where(pos, 0.0, off)
        scale = np.maximum(scale, 0.0)
        err = ((scale[:, None] * q + off[:, None] - x) ** 2).sum(axis=1)
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best_scale = np.where(better, scale, best_scale)
        best_min = np.where(better, -off, best_min)
    return best_scale, best_min


def _quantize_super(values: np.ndarray, nmax: int):
    """Two-level scale: values [nb, ns] >= 0 -> (f16 super-scale [nb], integer codes [nb, ns])."""
    vmax = values.max(axis=1)
    d = (vmax / nmax).astype(np.float16)
    d32 = d.astype(np.float64)
    safe = np.where(d32 > 0, d32, 1.0)
    codes = np.where(d32[:, None] > 0, np.clip(np.rint(values / safe[:, None]), 0, nmax), 0)
    return d, codes.astype(np.int64)


def _requantize(x, d_eff, m_eff, nmax):
    """Integer codes for x ~ d_eff * q - m_eff with the final (rounded) scales."""
    safe = np.where(d_eff > 0, d_eff, 1.0)
    q = np.rint((x + m_eff) / safe)
    return np.where(d_eff > 0, np.clip(q, 0, nmax), 0).astype(np.uint8)


def _blocks(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-1] % QK_K:
        raise ValueError(f"row length {x.shape[-1]} is not a multiple of {QK_K}")
    return x.reshape(-1, QK_K), x.shape


def _out_shape(shape: tuple[int, ...], type_size: int) -> tuple[int, ...]:
    return (*shape[:-1], shape[-1] // QK_K * type_size)


# ---------------------------------------------------------------------------------------------
# Q2_K: 16 sub-blocks of 16; 4-bit scale and 4-bit min per sub-block; 84 bytes per 256.
# ---------------------------------------------------------------------------------------------


def quantize_q2_k(x: np.ndarray) -> np.ndarray:
    blocks, shape = _blocks(x)
    nb = blocks.shape[0]
    sub = blocks.reshape(nb * 16, 16).astype(np.float64)
    scale, mn = _fit_scale_min(sub, 3)
    d, sc = _quantize_super(scale.reshape(nb, 16), 15)
    dmin, mc = _quantize_super(mn.reshape(nb, 16), 15)
    d_eff = (d.astype(np.float64)[:, None] * sc).reshape(-1, 1)
    m_eff = (dmin.astype(np.float64)[:, None] * mc).reshape(-1, 1)
    q = _requantize(sub, d_eff, m_eff, 3).reshape(nb, 256)

    out = np.zeros((nb, 84), dtype=np.uint8)
    out[:, 0:16] = (sc | (mc << 4)).astype(np.uint8)
    # Element e = 128n + 32j + 16h + l sits in qs[32n + 16h + l] at bit 2j.
    q4 = q.reshape(nb, 2, 4, 32)  # [n, j, 16h + l]
    qs = np.zeros((nb, 2, 32), dtype=np.uint8)
    for j in range(4):
        qs |= q4[:, :, j, :] << (2 * j)
    out[:, 16:80] = qs.reshape(nb, 64)
    out[:, 80:82] = d.reshape(nb, 1).view(np.uint8)
    out[:, 82:84] = dmin.reshape(nb, 1).view(np.uint8)
    return out.reshape(_out_shape(shape, 84))


# ---------------------------------------------------------------------------------------------
# Q4_K: 8 sub-blocks of 32; 6-bit scale and 6-bit min per sub-block; 144 bytes per 256.
# ---------------------------------------------------------------------------------------------


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    blocks, shape = _blocks(x)
    nb = blocks.shape[0]
    sub = blocks.reshape(nb * 8, 32).astype(np.float64)
    scale, mn = _fit_scale_min(sub, 15)
    d, sc = _quantize_super(scale.reshape(nb, 8), 63)
    dmin, mc = _quantize_super(mn.reshape(nb, 8), 63)
    d_eff = (d.astype(np.float64)[:, None] * sc).reshape(-1, 1)
    m_eff = (dmin.astype(np.float64)[:, None] * mc).reshape(-1, 1)
    q = _requantize(sub, d_eff, m_eff, 15).reshape(nb, 4, 2, 32)  # [c, hi, l]

    sc = sc.astype(np.uint8)
    mc = mc.astype(np.uint8)
    scales = np.zeros((nb, 12), dtype=np.uint8)
    scales[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = mc[:, 0:4] | ((mc[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((mc[:, 4:8] & 15) << 4)

    out = np.zeros((nb, 144), dtype=np.uint8)
    out[:, 0:2] = d.reshape(nb, 1).view(np.uint8)
    out[:, 2:4] = dmin.reshape(nb, 1).view(np.uint8)
    out[:, 4:16] = scales
    out[:, 16:144] = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(nb, 128)
    return out.reshape(_out_shape(shape, 144))


# ---------------------------------------------------------------------------------------------
# IQ2_XXS: 8 sub-blocks of 32 = 4 groups of 8. Each group: one of 256 grid points (values in
# {8, 25, 43}) and 7 sign bits (the 8th is implied: an even number of negatives). Each sub-block:
# a 4-bit scale ls, value = d * (0.5 + ls) / 4 * grid * sign. 66 bytes per 256.
# ---------------------------------------------------------------------------------------------

_GRID: np.ndarray | None = None


def iq2xxs_grid() -> np.ndarray:
    """The 256 x 8 IQ2_XXS grid, taken from gguf-py (the same table GGML and ds4 use)."""
    global _GRID
    if _GRID is None:
        gq.IQ2_XXS.init_grid()
        _GRID = np.asarray(gq.IQ2_XXS.grid, dtype=np.float64).reshape(256, 8)
    return _GRID


_IQ2_TOPS = (28.0, 36.0, 44.0)


def _iq2_search(a: np.ndarray, neg_odd: np.ndarray, flip_j: np.ndarray, amax: np.ndarray):
    """Grid points for every 8-group (a = |x|, [n_sub, 4, 8]) at the best of a few sub-scales.

    For sub-scale s the squared error of grid point g, less the constant sum a^2, is
    sum_j (-2 a_j) s g_j + s^2 |g|^2, plus 4 s a_f g_f when the group has an odd number of
    negatives and its smallest |x| (element f = flip_j) takes the forced sign. Both extra terms are
    linear in g, so after dividing by s one matrix product scores all 256 points:
    [a', s] @ [grid^T; |g|^2] with a' = -2a + 4 a_f e_f (odd groups only).
    Candidate scales map the sub-block's largest |x| to grid values around the top (43).
    Returns the grid indices [n_sub, 4].
    """
    grid = iq2xxs_grid().astype(np.float32)
    g9 = np.ascontiguousarray(np.vstack([grid.T, (grid * grid).sum(axis=1)[None, :]]))  # [9, 256]
    n_sub = a.shape[0]
    best_idx = np.zeros((n_sub, 4), dtype=np.int64)
    chunk = 2048  # sub-blocks per pass: [2048*4, 256] float32 scores
    for lo in range(0, n_sub, chunk):
        aa = a[lo : lo + chunk].reshape(-1, 8).astype(np.float32)
        n = aa.shape[0]
        rows = np.arange(n)
        fj = flip_j[lo : lo + chunk].reshape(-1)
        odd = neg_odd[lo : lo + chunk].reshape(-1)
        a9 = np.empty((n, 9), dtype=np.float32)
        a9[:, :8] = -2.0 * aa
        a9[rows, fj] += np.where(odd, 4.0 * aa[rows, fj], 0.0)
        a2 = (aa * aa).sum(axis=1)
        best_e = np.full(n // 4, np.inf, dtype=np.float32)
        cur = best_idx[lo : lo + chunk]
        for gtop in _IQ2_TOPS:
            s = np.repeat(amax[lo : lo + chunk] / gtop, 4).astype(np.float32)
            a9[:, 8] = s
            # [n, 256]: error / s, less a2 / s. einsum, not @: a K=9 product is memory bound
            # and multi-threaded BLAS only adds overhead here
            e = np.einsum("nk,km->nm", a9, g9)
            i = e.argmin(axis=1)
            err = (a2 + s * e[rows, i]).reshape(-1, 4).sum(axis=1)
            better = err < best_e
            best_e = np.where(better, err, best_e)
            cur[:] = np.where(better[:, None], i.reshape(-1, 4), cur)
    return best_idx


def quantize_iq2_xxs(x: np.ndarray) -> np.ndarray:
    blocks, shape = _blocks(x)
    nb = blocks.shape[0]
    xs = blocks.reshape(nb * 8, 4, 8).astype(np.float64)  # [sub-block, group, elem]
    grid = iq2xxs_grid()
    a_all = np.abs(xs)
    neg = xs < 0
    neg_odd = (neg.sum(axis=2) % 2) == 1  # [sub, group]
    flip_j = a_all.argmin(axis=2)  # element whose sign is forced when parity is odd
    n_sub = nb * 8
    amax = a_all.reshape(n_sub, 32).max(axis=1)
    best_idx = _iq2_search(a_all, neg_odd, flip_j, amax)

    # Signs: the sign of x, with the group's smallest-|x| element flipped when parity is odd.
    sign = np.where(neg, -1.0, 1.0)
    flip = np.zeros_like(neg)
    np.put_along_axis(flip, flip_j[..., None], neg_odd[..., None], axis=2)
    sign = np.where(flip, -sign, sign)
    gval = grid[best_idx]  # [sub, group, 8]
    # Least-squares sub-scale for the chosen grid points and signs.
    num = (xs * sign * gval).reshape(n_sub, 32).sum(axis=1)
    den = (gval * gval).reshape(n_sub, 32).sum(axis=1)
    s_opt = np.maximum(num / den, 0.0)

    # Block scale d and 4-bit sub-scales: s = d * (0.5 + ls) / 4.
    s_blk = s_opt.reshape(nb, 8)
    d = (s_blk.max(axis=1) * 4.0 / 15.5).astype(np.float16)
    d32 = d.astype(np.float64)
    safe = np.where(d32 > 0, d32, 1.0)
    ls = np.clip(np.rint(s_blk * 4.0 / safe[:, None] - 0.5), 0, 15).astype(np.uint32)

    # Sign bits: bit j set = negative; store the low 7 (bit 7 follows from parity).
    negbits = (sign < 0).astype(np.uint32)
    sbits = (negbits[..., :7] << np.arange(7, dtype=np.uint32)).sum(axis=2)  # [sub, group]
    aw = (best_idx.astype(np.uint32) << (8 * np.arange(4, dtype=np.uint32))).sum(axis=1)
    bw = (sbits << (7 * np.arange(4, dtype=np.uint32))).sum(axis=1) | (ls.reshape(-1) << 28)

    out = np.zeros((nb, 66), dtype=np.uint8)
    out[:, 0:2] = d.reshape(nb, 1).view(np.uint8)
    words = np.stack([aw, bw], axis=1).astype("<u4").reshape(nb, 16)
    out[:, 2:66] = words.view(np.uint8).reshape(nb, 64)
    return out.reshape(_out_shape(shape, 66))


# ---------------------------------------------------------------------------------------------
# Front door used by the generator.
# ---------------------------------------------------------------------------------------------

_OWN = {QT.Q2_K: quantize_q2_k, QT.Q4_K: quantize_q4_k, QT.IQ2_XXS: quantize_iq2_xxs}


def encode(x: np.ndarray, qtype: QT) -> np.ndarray:
    """Encode float data as `qtype`; returns what GGUFWriter.add_tensor takes (with raw_dtype)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if qtype == QT.F32:
        return x
    if qtype == QT.F16:
        return x.astype(np.float16)
    if qtype in (QT.BF16, QT.Q8_0):
        # gguf-py's own block encoder, applied to all blocks at once (gq.quantize would loop
        # over row groups in Python)
        cls = gq.Q8_0 if qtype == QT.Q8_0 else gq.BF16
        blocks = cls.quantize_blocks(x.reshape(-1, cls.block_size))
        return blocks.reshape(*x.shape[:-1], x.shape[-1] // cls.block_size * cls.type_size)
    if qtype in _OWN:
        return _OWN[qtype](x)
    raise ValueError(f"no encoder for {qtype.name}")


def decode(raw: np.ndarray, qtype: QT) -> np.ndarray:
    """gguf-py's dequantisation (the oracle), as float32 with the float shape."""
    return np.asarray(gq.dequantize(np.asarray(raw), qtype), dtype=np.float32)
