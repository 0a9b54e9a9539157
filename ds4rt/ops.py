"""CPU tensor ops of libds4rt with NumPy in and out: dequantisation of GGUF tensor data and the
quantised matrix product the CPU backend runs, plus the choice of CPU kernel path.

    from ds4rt import ops
    w = ops.dequantize(raw, "Q4_K", 4096)             # float32[4096], bit-exact with gguf-py
    y = ops.matmul(raw_w, "IQ2_XXS", rows, cols, x)   # x[n_tok, cols] -> y[n_tok, rows]
    ops.isa()                                         # "avx2", "avx512", "avx512-vbmi", ...

Types are given as ggml names ("Q8_0") or ids (8). See docs/QUANTS.md for the formats, how the
activations are rounded, and the results' exactness.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import _core
from .enums import QType

#: Raw tensor bytes: bytes-like, or a numpy array whose memory is the data.
RawBytes = bytes | bytearray | memoryview | npt.NDArray[Any]
_F32 = npt.NDArray[np.float32]

__all__ = [
    "COMPUTE_TYPES",
    "TYPE_IDS",
    "activation_block",
    "available_isas",
    "dequantize",
    "isa",
    "matmul",
    "quantize_activation",
    "random_weights",
    "row_bytes",
    "set_isa",
    "type_id",
]

# ggml type names -> ids (ds4rt_qtype, from the header through ds4rt.enums).
TYPE_IDS = {t.name: int(t) for t in QType if t is not QType.COUNT}

# The types the CPU backend dequantises and multiplies with.
COMPUTE_TYPES = (
    "F32",
    "F16",
    "BF16",
    "Q8_0",
    "Q4_0",
    "MXFP4",
    "Q2_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "IQ2_XXS",
)

# Activation type paired with each weight type, and its block size (1 = float values).
_ACT_BLOCK = {"Q8_0": 32, "Q4_0": 32, "MXFP4": 32, "F32": 1, "F16": 1, "BF16": 1}

# Every CPU path ds4rt knows by name (which are usable depends on the build and the CPU).
ALL_ISAS = ("scalar", "avx2", "avx512", "avx512-vnni", "avx512-vbmi", "neon", "neon-dotprod")


def type_id(qtype: str | int) -> int:
    """The ggml type id of a name ("Q8_0") or id."""
    if isinstance(qtype, str):
        try:
            return TYPE_IDS[qtype.upper()]
        except KeyError:
            raise ValueError(f"unknown tensor type {qtype!r}") from None
    return int(qtype)


def _name(qtype: str | int) -> str:
    tid = type_id(qtype)
    for k, v in TYPE_IDS.items():
        if v == tid:
            return k
    return str(tid)


def row_bytes(qtype: str | int, n: int) -> int:
    """Bytes of n elements of qtype (n must be a whole number of blocks)."""
    return int(_core.quant_row_bytes(type_id(qtype), int(n)))


def dequantize(raw: RawBytes, qtype: str | int, n: int) -> _F32:
    """The first n elements of raw GGUF tensor bytes of qtype, as float32[n] (bit-exact with
    gguf.quants.dequantize)."""
    return _core.quant_dequantize(_as_bytes(raw), type_id(qtype), int(n))


def matmul(
    raw_weight: RawBytes,
    qtype: str | int,
    rows: int,
    cols: int,
    x: npt.ArrayLike,
    n_threads: int = 0,
) -> _F32:
    """y = x @ W.T for W[rows][cols] given as raw GGUF bytes of qtype and x[n_tok][cols]
    (a 1-D x is one token and gives a 1-D y). n_threads <= 0: one thread per available CPU."""
    xa = np.asarray(x, dtype=np.float32)
    one = xa.ndim == 1
    if one:
        xa = xa[None, :]
    y = _core.quant_matmul(
        _as_bytes(raw_weight), type_id(qtype), int(rows), int(cols), xa, int(n_threads)
    )
    return y[0] if one else y


def activation_block(qtype: str | int) -> int:
    """Block size of the activation type paired with weight type qtype (32 for Q8_0, 256 for
    Q8_K, 1 for float activations)."""
    return _ACT_BLOCK.get(_name(qtype), 256)


def quantize_activation(
    qtype: str | int, x: npt.ArrayLike
) -> tuple[npt.NDArray[np.int8] | None, _F32]:
    """x (float32[n]) rounded as the matmul rounds it for weights of qtype.

    Integer pairs (Q8_0, Q8_K): returns (q int8[n], scales float32[n // block]) with
    x ~ scales[i // block] * q[i]. Float pairs (F32/F16/BF16): returns (None, values float32[n])."""
    tid = type_id(qtype)
    q, s = _core.quant_activation(tid, x)
    blk = activation_block(tid)
    if blk == 1:
        return None, s
    return q, s[: len(q) // blk]


def isa() -> str:
    """The CPU kernel path in use."""
    return _core.cpu_isa()


def available_isas() -> list[str]:
    """The CPU paths this build and CPU can run."""
    return [n for n in ALL_ISAS if _core.cpu_isa_supported(n)]


def set_isa(name: str) -> None:
    """Switches the CPU kernel path ("auto" for the default). Raises UnsupportedError if this CPU
    cannot run it."""
    _core.cpu_isa_set(name)


# Byte offsets of the f16 scales in each block (d, and dmin where the format has one), the
# block size in bytes, and the block size in elements.
_SCALE_FIELDS = {
    "Q8_0": ((0,), 34, 32),
    "Q4_0": ((0,), 18, 32),
    "Q2_K": ((80, 82), 84, 256),
    "Q4_K": ((0, 2), 144, 256),
    "Q5_K": ((0, 2), 176, 256),
    "Q6_K": ((208,), 210, 256),
    "IQ2_XXS": ((0,), 66, 256),
}


def random_weights(
    qtype: str | int, rows: int, cols: int, seed: int = 0, scale: float = 0.01
) -> bytes:
    """Raw GGUF bytes of a random W[rows][cols] of qtype, for tests and benchmarks: float types
    hold N(0, 1) values; block types hold random bytes with finite positive f16 scales around
    `scale` (MXFP4: exponents near 2^-5), so every code path of a format is exercised."""
    name = _name(qtype)
    rng = np.random.default_rng(seed)
    n = int(rows) * int(cols)
    if name in ("F32", "F16", "BF16"):
        x = rng.standard_normal(n).astype(np.float32)
        if name == "F32":
            return x.tobytes()
        if name == "F16":
            return x.astype(np.float16).tobytes()
        return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    nbytes = row_bytes(name, cols) * int(rows)
    if name == "MXFP4":
        raw = rng.integers(0, 256, size=(nbytes // 17, 17), dtype=np.uint8)
        raw[:, 0] = rng.integers(118, 130, size=raw.shape[0])
        return raw.tobytes()
    if name not in _SCALE_FIELDS:
        raise ValueError(f"random_weights: no generator for {name}")
    offs, bsz, _ = _SCALE_FIELDS[name]
    raw = rng.integers(0, 256, size=(nbytes // bsz, bsz), dtype=np.uint8)
    for off in offs:
        d = np.asarray(scale * (0.2 + rng.random(raw.shape[0])), dtype=np.float16)
        raw[:, off : off + 2] = d.view(np.uint8).reshape(-1, 2)
    return raw.tobytes()


def _as_bytes(raw: RawBytes) -> Any:
    if isinstance(raw, np.ndarray):
        return np.ascontiguousarray(raw).view(np.uint8).ravel()
    return raw
