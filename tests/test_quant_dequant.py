"""Dequantisation: bit-exact against gguf-py 0.19.0 (the oracle) for every computable type, and
the generated lookup tables against gguf-py's own."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import numpy as np
import pytest
from quant_util import BLOCK_TYPES, random_blocks

import ds4rt
from ds4rt import errors, ops

gguf_quants = pytest.importorskip("gguf.quants")
from gguf import GGMLQuantizationType as G  # noqa: E402


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality of float32 arrays, NaN equal to any NaN."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    nan = np.isnan(a)
    if not np.array_equal(nan, np.isnan(b)):
        return False
    return np.array_equal(a[~nan].view(np.uint32), b[~nan].view(np.uint32))


@pytest.mark.parametrize("name", BLOCK_TYPES)
def test_block_types_bit_exact_vs_gguf(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    n_blocks = 300 if name == "MXFP4" else 64
    raw = random_blocks(name, n_blocks, rng)
    with np.errstate(over="ignore"):  # MXFP4: 2^127 * 12 overflows to inf, in gguf-py as here
        ref = gguf_quants.dequantize(raw, G[name]).ravel()
    n = ref.size
    ours = ops.dequantize(raw.tobytes(), name, n)
    assert ours.dtype == np.float32 and ours.shape == (n,)
    assert same_bits(ours, ref)
    assert np.isfinite(ours).all() or name == "MXFP4"  # MXFP4 e=255 times 12 overflows, as in gguf


def test_f16_every_bit_pattern():
    raw = np.arange(65536, dtype=np.uint16)
    ours = ops.dequantize(raw.tobytes(), "F16", 65536)
    assert same_bits(ours, gguf_quants.dequantize(raw.view(np.uint8), G.F16).ravel())


def test_bf16_every_bit_pattern():
    raw = np.arange(65536, dtype=np.uint16)
    ours = ops.dequantize(raw.tobytes(), "BF16", 65536)
    assert same_bits(ours, gguf_quants.dequantize(raw.view(np.uint8), G.BF16).ravel())


def test_f32_copies_bits():
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    x[:4] = [np.inf, -np.inf, 0.0, -0.0]
    assert same_bits(ops.dequantize(x.tobytes(), "F32", 1000), x)


def test_partial_row_is_dequantised_from_the_front():
    rng = np.random.default_rng(4)
    raw = random_blocks("Q4_K", 3, rng)
    full = ops.dequantize(raw.tobytes(), "Q4_K", 768)
    assert same_bits(ops.dequantize(raw.tobytes(), "Q4_K", 256), full[:256])


def test_dequantize_errors():
    with pytest.raises(errors.InvalidArgumentError, match="whole number of Q8_0 blocks"):
        ops.dequantize(bytes(34), "Q8_0", 33)
    with pytest.raises(errors.UnsupportedError, match="Q3_K"):
        ops.dequantize(bytes(110), "Q3_K", 256)
    with pytest.raises(errors.UnsupportedError, match="unknown tensor type id 99"):
        ops.dequantize(bytes(64), 99, 16)
    with pytest.raises(ValueError, match="too few"):
        ops.dequantize(bytes(33), "Q8_0", 32)
    assert ops.dequantize(b"", "Q8_0", 0).shape == (0,)


def test_null_pointers_through_the_c_abi(repo_root):
    pytest.importorskip("cffi")
    sys.path.insert(0, os.path.join(repo_root, "bindings"))
    try:
        import ds4rt_cffi
    finally:
        sys.path.pop(0)
    ffi, lib = ds4rt_cffi.load_testing()  # the CPU ops are test hooks (src/ds4rt_testing.h)
    out = ffi.new("float[32]")
    assert lib.ds4rt_dequantize(8, ffi.NULL, 32, out) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert b"NULL" in ffi.string(lib.ds4rt_last_error())
    src = ffi.new("unsigned char[34]")
    assert lib.ds4rt_dequantize(8, src, 32, ffi.NULL) == lib.DS4RT_ERR_INVALID_ARGUMENT
    y = ffi.new("float[4]")
    x = ffi.new("float[32]")
    assert lib.ds4rt_matmul_host(8, ffi.NULL, 4, 32, x, 1, y, 1) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert lib.ds4rt_matmul_host(8, src, 1, 32, ffi.NULL, 1, y, 1) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert lib.ds4rt_matmul_host(8, src, 1, 32, x, 1, ffi.NULL, 1) == lib.DS4RT_ERR_INVALID_ARGUMENT
    q = ffi.new("int8_t[32]")
    assert lib.ds4rt_quantize_activation(8, x, 32, ffi.NULL, out) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert lib.ds4rt_quantize_activation(8, x, 32, q, ffi.NULL) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert lib.ds4rt_cpu_isa_set(ffi.NULL) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert lib.ds4rt_cpu_isa_supported(ffi.NULL) == 0


def test_type_info_compute_flag_lists_exactly_the_computable_types(repo_root):
    pytest.importorskip("cffi")
    sys.path.insert(0, os.path.join(repo_root, "bindings"))
    try:
        import ds4rt_cffi
    finally:
        sys.path.pop(0)
    lib, ffi = ds4rt_cffi.lib, ds4rt_cffi.ffi
    info = ffi.new("ds4rt_type_info *")
    computable = set()
    for tid in range(64):
        if lib.ds4rt_type_get_info(tid, info) == lib.DS4RT_OK and info.compute:
            computable.add(ffi.string(info.name).decode())
    assert computable == set(ops.COMPUTE_TYPES)


def test_generated_tables_match_gguf(repo_root):
    """The committed header equals what the generator makes from gguf-py now."""
    gen = os.path.join(repo_root, "tools", "gen_quant_tables.py")
    r = subprocess.run([sys.executable, gen, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_iq2xxs_grid_values_in_header_match_gguf(repo_root):
    """Independent of the generator: parse the committed table and compare with gguf-py."""
    text = open(os.path.join(repo_root, "src", "quant", "quant_tables.h"), encoding="utf-8").read()
    body = text.split("ds4rt_iq2xxs_grid[256] = {", 1)[1].split("};", 1)[0]
    words = [
        int(w.strip().removesuffix("ull"), 16)
        for w in body.replace("\n", "").split(",")
        if w.strip()
    ]
    grid = np.array([[(w >> (8 * j)) & 0xFF for j in range(8)] for w in words], dtype=np.float32)
    gguf_quants.IQ2_XXS.init_grid()
    assert np.array_equal(grid, np.asarray(gguf_quants.IQ2_XXS.grid).reshape(256, 8))
    body = text.split("ds4rt_ksigns[128] = {", 1)[1].split("};", 1)[0]
    signs = bytes(int(v, 16) for v in body.replace("\n", "").split(",") if v.strip())
    assert signs == gguf_quants.IQ2_XXS.ksigns


def test_build_info_names_the_cpu_path():
    assert f"cpu={ops.isa()}" in ds4rt.build_info()
