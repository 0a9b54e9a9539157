"""The GGUF reader through the public C ABI (cffi binding of the installed libds4rt), checked
against gguf-py: what a C host embedding ds4rt sees."""

from __future__ import annotations

import os
import sys

import gguf_craft as gc
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("cffi")


@pytest.fixture(scope="module")
def capi(repo_root):
    sys.path.insert(0, os.path.join(repo_root, "bindings"))
    try:
        import ds4rt_cffi
    finally:
        sys.path.pop(0)
    return ds4rt_cffi.ffi, ds4rt_cffi.lib


def test_c_api_walk_matches_gguf_py(capi, tmp_path):
    ffi, lib = capi
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), arch="deepseek4")
    w.add_uint32("deepseek4.block_count", 43)
    w.add_array("deepseek4.attention.compress_ratios", [0, 0, 4, 128])
    w.add_token_list(["<s>", "Ġa", "b"])
    w.add_array("nested", [[1, 2], [3]])
    x = np.arange(256, dtype=np.float32).reshape(4, 64)
    w.add_tensor("output_norm.weight", x[0])
    w.add_tensor("token_embd.weight", x.astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    ref = gguf.GGUFReader(str(path))

    g = ffi.new("ds4rt_gguf **")
    assert lib.ds4rt_gguf_open(str(path).encode(), g) == lib.DS4RT_OK
    g = g[0]
    try:
        assert lib.ds4rt_gguf_version(g) == 3
        assert lib.ds4rt_gguf_data_offset(g) == ref.data_offset
        assert lib.ds4rt_gguf_kv_count(g) == len(ref.fields) - 3  # minus GGUF.* pseudo fields
        u = ffi.new("uint32_t *")
        assert lib.ds4rt_gguf_get_u32(g, b"deepseek4.block_count", u) == lib.DS4RT_OK
        assert u[0] == 43
        assert lib.ds4rt_gguf_get_u32(g, b"missing", u) == lib.DS4RT_ERR_NOT_FOUND
        assert b"'missing' not found" in ffi.string(lib.ds4rt_last_error())

        kv = lib.ds4rt_gguf_find_kv(g, b"tokenizer.ggml.tokens")
        assert kv.type == lib.DS4RT_GGUF_ARRAY and kv.array_type == lib.DS4RT_GGUF_STRING
        assert kv.file_offset == ref.fields["tokenizer.ggml.tokens"].offset
        s = ffi.new("ds4rt_str *")
        toks = []
        for i in range(kv.array_len):
            assert lib.ds4rt_gguf_array_str(kv, i, s) == lib.DS4RT_OK
            toks.append(ffi.unpack(s.data, s.len).decode())
        assert toks == ref.fields["tokenizer.ggml.tokens"].contents()
        assert lib.ds4rt_gguf_array_str(kv, 3, s) == lib.DS4RT_ERR_OUT_OF_RANGE

        kv = lib.ds4rt_gguf_find_kv(g, b"nested")
        sub = ffi.new("ds4rt_gguf_kv *")
        v = ffi.new("int64_t *")
        assert lib.ds4rt_gguf_array_int(kv, 0, v) == lib.DS4RT_ERR_FORMAT
        assert lib.ds4rt_gguf_array_sub(kv, 1, sub) == lib.DS4RT_OK
        assert sub.array_len == 1 and lib.ds4rt_gguf_array_int(sub, 0, v) == lib.DS4RT_OK
        assert v[0] == 3
        assert ffi.string(lib.ds4rt_gguf_type_name(sub.array_type)) == b"INT32"

        assert lib.ds4rt_gguf_tensor_count(g) == len(ref.tensors)
        for i, rt in enumerate(ref.tensors):
            t = lib.ds4rt_gguf_find_tensor(g, rt.name.encode())
            assert t == lib.ds4rt_gguf_tensor_at(g, i)
            assert list(t.ne)[: t.n_dims] == [int(d) for d in rt.shape]
            assert t.nbytes == rt.n_bytes
            assert bytes(ffi.buffer(t.data, t.nbytes)) == rt.data.tobytes()
        assert lib.ds4rt_gguf_find_tensor(g, b"nope") == ffi.NULL
        assert lib.ds4rt_gguf_tensor_at(g, len(ref.tensors)) == ffi.NULL
    finally:
        lib.ds4rt_gguf_close(g)


def test_c_api_failures(capi):
    ffi, lib = capi
    g = ffi.new("ds4rt_gguf **")
    img = gc.small_complete().data
    assert lib.ds4rt_gguf_open_memory(img, len(img) - 1, g) == lib.DS4RT_ERR_FORMAT
    assert g[0] == ffi.NULL
    assert b"runs past the end" in ffi.string(lib.ds4rt_last_error())
    assert lib.ds4rt_gguf_open(ffi.NULL, g) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert lib.ds4rt_gguf_open(b"/nonexistent/x.gguf", g) == lib.DS4RT_ERR_IO
    assert lib.ds4rt_gguf_open_memory(img, len(img), ffi.NULL) == lib.DS4RT_ERR_INVALID_ARGUMENT
    lib.ds4rt_gguf_close(ffi.NULL)  # a no-op
    assert lib.ds4rt_gguf_kv_count(ffi.NULL) == 0
    assert lib.ds4rt_gguf_find_kv(ffi.NULL, b"k") == ffi.NULL
    assert lib.ds4rt_gguf_type_name(13) == ffi.NULL
