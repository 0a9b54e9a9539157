"""Shared helpers of the tests/test_quant_*.py files: random weight blocks with chosen scale
values, and independent float64 / NumPy references."""

from __future__ import annotations

import numpy as np

from ds4rt import ops

BLOCK_TYPES = ("Q8_0", "Q4_0", "MXFP4", "Q2_K", "Q4_K", "Q5_K", "Q6_K", "IQ2_XXS")
FLOAT_TYPES = ("F32", "F16", "BF16")

# Byte offsets of the f16 scale fields of each block type, and the block size in bytes.
F16_FIELDS = {
    "Q8_0": ((0,), 34),
    "Q4_0": ((0,), 18),
    "Q2_K": ((80, 82), 84),
    "Q4_K": ((0, 2), 144),
    "Q5_K": ((0, 2), 176),
    "Q6_K": ((208,), 210),
    "IQ2_XXS": ((0,), 66),
}

# Finite f16 edge values for scales: zeros, the smallest subnormal, the largest subnormal, the
# smallest normal, the largest finite, negatives and ordinary values.
F16_EDGES = np.array(
    [0.0, -0.0, 2.0**-24, -(2.0**-24), 1023 * 2.0**-24, 2.0**-14, 65504.0, -65504.0, 1.0, -0.5],
    dtype=np.float16,
)


def random_blocks(
    name: str, n_blocks: int, rng: np.random.Generator, edges: bool = True
) -> np.ndarray:
    """(n_blocks, block_bytes) uint8: random bytes with finite f16 scales; with `edges`, the
    first blocks carry F16_EDGES as scales (MXFP4: every exponent byte 0..255 appears)."""
    if name == "MXFP4":
        raw = rng.integers(0, 256, size=(n_blocks, 17), dtype=np.uint8)
        if edges:
            k = min(n_blocks, 256)
            raw[:k, 0] = np.arange(k, dtype=np.uint8)
        return raw
    offs, bsz = F16_FIELDS[name]
    raw = rng.integers(0, 256, size=(n_blocks, bsz), dtype=np.uint8)
    for off in offs:
        d = (rng.standard_normal(n_blocks) * 0.02).astype(np.float16)
        if edges:
            k = min(n_blocks, len(F16_EDGES))
            d[:k] = np.roll(F16_EDGES, off)[:k]
        raw[:, off : off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return raw


def random_matrix(name: str, rows: int, cols: int, seed: int, scale: float = 0.02) -> bytes:
    """Raw bytes of W[rows][cols] with moderate finite scales (no edge values), for products."""
    if name in FLOAT_TYPES:
        return ops.random_weights(name, rows, cols, seed=seed)
    rng = np.random.default_rng(seed)
    blk = 32 if name in ("Q8_0", "Q4_0", "MXFP4") else 256
    raw = random_blocks(name, rows * cols // blk, rng, edges=False)
    if name == "MXFP4":
        raw[:, 0] = rng.integers(118, 130, size=raw.shape[0])
    else:
        for off in F16_FIELDS[name][0]:
            d = (scale * (0.2 + rng.random(raw.shape[0]))).astype(np.float16)
            raw[:, off : off + 2] = d.view(np.uint8).reshape(-1, 2)
    return raw.tobytes()


def dequant_matrix(raw: bytes, name: str, rows: int, cols: int) -> np.ndarray:
    return ops.dequantize(raw, name, rows * cols).reshape(rows, cols).astype(np.float64)


def rounded_activations(name: str, x: np.ndarray) -> np.ndarray:
    """float64 values of the activations exactly as the kernels see them."""
    out = np.empty(x.shape, dtype=np.float64)
    blk = ops.activation_block(name)
    for t in range(x.shape[0]):
        q, s = ops.quantize_activation(name, x[t])
        if q is None:
            out[t] = s
        else:
            out[t] = q.astype(np.float64) * np.repeat(s.astype(np.float64), blk)
    return out


def activation_error_bound(name: str, x: np.ndarray) -> np.ndarray:
    """Per-element bound on |rounded x - x|: half a quantisation step (d/2 of the block) for
    Q8_0/Q8_K, half an ulp of f16 (2^-11 relative, 2^-25 absolute below the normal range) or of
    bf16 (2^-8 relative) for float pairs, 0 for F32."""
    x = x.astype(np.float64)
    if name == "F32":
        return np.zeros_like(x)
    if name == "F16":
        return np.maximum(np.abs(x) * 2.0**-11, 2.0**-25)
    if name == "BF16":
        return np.abs(x) * 2.0**-8
    blk = ops.activation_block(name)
    amax = np.abs(x).reshape(x.shape[0], -1, blk).max(axis=-1)
    return np.repeat(amax / 127.0 / 2.0, blk, axis=-1) * (1 + 1e-6)
