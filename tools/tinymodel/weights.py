"""Deterministic random values for a tensor table entry.

Each tensor draws from its own PCG64 stream seeded by (seed, crc32(name)), so a tensor's values do
not depend on which other tensors exist or in which order they are drawn, and the same seed gives
the same bytes on every machine (NumPy's PCG64 and SeedSequence are platform independent).
"""

from __future__ import annotations

import zlib

import numpy as np

from .layout import TensorSpec


def rng_for(seed: int, name: str) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([seed, zlib.crc32(name.encode("utf-8"))]))


def draw(spec: TensorSpec, seed: int) -> np.ndarray:
    """Values in NumPy order (the reverse of spec.ne): float32, or int32 for tid2eid."""
    shape = tuple(reversed(spec.ne))
    rng = rng_for(seed, spec.name)
    init = spec.init
    if init.kind == "normal":
        x = rng.standard_normal(shape, dtype=np.float32)
        x *= np.float32(init.b)
        x += np.float32(init.a)
        return x
    if init.kind == "uniform":
        return rng.uniform(init.a, init.b, size=shape).astype(np.float32)
    if init.kind == "tid2eid":
        # ne = [k, V]: row t lists k distinct expert ids < E for token id t.
        n_vocab, k = shape
        n_expert = int(init.a)
        ids = np.argsort(rng.random((n_vocab, n_expert)), axis=1, kind="stable")[:, :k]
        return np.ascontiguousarray(ids, dtype=np.int32)
    raise ValueError(f"unknown init {init.kind!r} for {spec.name}")
