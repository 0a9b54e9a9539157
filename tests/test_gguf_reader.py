"""The GGUF reader on valid files, compared field by field with gguf-py's GGUFReader (an
independent implementation) on files written by gguf-py's GGUFWriter, plus hand-built files
for what the writer cannot produce (v2, n_dims 0, nested arrays of every kind)."""

from __future__ import annotations

import math

import gguf_craft as gc
import numpy as np
import pytest

from ds4rt import errors
from ds4rt import gguf as dg

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as QT  # noqa: E402
from gguf import GGUFValueType as VT  # noqa: E402
from gguf import quants  # noqa: E402

RNG = np.random.default_rng(1234)

# (key, value type, value) for every scalar type, at and near their limits.
SCALARS = [
    ("s.u8", VT.UINT8, 255),
    ("s.i8", VT.INT8, -128),
    ("s.u16", VT.UINT16, 65535),
    ("s.i16", VT.INT16, -32768),
    ("s.u32", VT.UINT32, 4294967295),
    ("s.i32", VT.INT32, -2147483648),
    ("s.f32", VT.FLOAT32, 1e-6),
    ("s.bool", VT.BOOL, True),
    ("s.bool_false", VT.BOOL, False),
    ("s.str", VT.STRING, "DeepSeek V4 Flash — ünïcödé ✓"),
    ("s.u64", VT.UINT64, 2**64 - 1),
    ("s.i64", VT.INT64, -(2**63)),
    ("s.f64", VT.FLOAT64, -1.0 / 3.0),
    ("s.f32_inf", VT.FLOAT32, float("inf")),
]

ARRAYS = [
    ("a.u8", VT.UINT8, [0, 1, 255]),
    ("a.i8", VT.INT8, [-128, 0, 127]),
    ("a.u16", VT.UINT16, [0, 65535]),
    ("a.i16", VT.INT16, [-32768, 32767, 5]),
    ("a.u32", VT.UINT32, [0, 4, 128, 4294967295]),
    ("a.i32", VT.INT32, [-1, 0, 2147483647]),
    ("a.f32", VT.FLOAT32, [10.0, 0.5, -2.25, 1e-6]),
    ("a.bool", VT.BOOL, [True, False, True]),
    ("a.u64", VT.UINT64, [0, 2**64 - 1]),
    ("a.i64", VT.INT64, [-(2**63), 2**63 - 1]),
    ("a.f64", VT.FLOAT64, [1e300, -0.0, 3.5]),
    ("a.str", VT.STRING, ["Ġthe", "", "<｜begin▁of▁sentence｜>", "a b", "\n"]),
]

TENSOR_TYPES_QUANTIZABLE = [QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.TQ1_0, QT.MXFP4]
# Types gguf-py cannot quantise: written as random bytes of the right size.
TENSOR_TYPES_RAW = [QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.IQ2_XXS, QT.IQ2_XS]
TENSOR_TYPES_RAW += [QT.IQ3_XXS, QT.IQ1_S, QT.IQ4_NL, QT.IQ3_S, QT.IQ2_S, QT.IQ4_XS, QT.IQ1_M]
TENSOR_TYPES_RAW += [QT.TQ2_0, QT.NVFP4, QT.Q8_1, QT.Q8_K, QT.Q1_0]


def write_gguf(path, alignment: int | None, with_tokens: int = 0) -> None:
    w = gguf.GGUFWriter(str(path), arch="deepseek4")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_name("tiny test model")
    for key, vt, v in SCALARS:
        w.add_key_value(key, v, vt)
    for key, vt, v in ARRAYS:
        w.add_key_value(key, v, VT.ARRAY, sub_type=vt)
    w.add_array("a.nested", [[1, 2], [3], [4, 5, 6]])
    w.add_array("a.nested_str", [["x", "y"], ["zz"]])
    if with_tokens:
        w.add_token_list([f"tok{i}" for i in range(with_tokens)])
    x = RNG.standard_normal((4, 256)).astype(np.float32)
    w.add_tensor("t.f32", x)
    w.add_tensor("t.f16", x.astype(np.float16))
    w.add_tensor("t.bf16", quants.quantize(x, QT.BF16), raw_dtype=QT.BF16)
    w.add_tensor("t.f64", x[:1].astype(np.float64))
    for i, dt in enumerate([np.int8, np.int16, np.int32, np.int64]):
        w.add_tensor(f"t.int{i}", RNG.integers(-100, 100, size=(3, 5)).astype(dt))
    w.add_tensor("t.3d", RNG.standard_normal((2, 3, 32)).astype(np.float32))
    w.add_tensor("t.4d", RNG.standard_normal((2, 1, 3, 32)).astype(np.float32))
    for qt in TENSOR_TYPES_QUANTIZABLE:
        w.add_tensor(f"t.{qt.name}", quants.quantize(x, qt), raw_dtype=qt)
    for qt in TENSOR_TYPES_RAW:
        block, size = gguf.GGML_QUANT_SIZES[qt]
        raw = RNG.integers(0, 256, size=(2, 512 // block * size), dtype=np.uint8)
        w.add_tensor(f"t.{qt.name}", raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def flatten(v):
    if isinstance(v, list):
        return [x for e in v for x in flatten(e)]
    return [v]


def same_value(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def compare_with_gguf_py(path) -> dict:
    info = dg.inspect(path)
    ref = gguf.GGUFReader(str(path))
    assert info["version"] == int(ref.fields["GGUF.version"].contents())
    assert info["alignment"] == ref.alignment
    assert info["data_offset"] == ref.data_offset
    assert info["file_size"] == path.stat().st_size
    ref_keys = [k for k in ref.fields if not k.startswith("GGUF.")]
    assert list(info["metadata"]) == ref_keys
    with dg.GGUFFile(path) as f:
        for key in ref_keys:
            field = ref.fields[key]
            got = info["metadata"][key]
            want = field.contents()
            label = "".join(f"{t.name}[" for t in field.types[:-1]) + field.types[-1].name
            label += "]" * (len(field.types) - 1)
            if len(field.types) > 2 and "ARRAY[ARRAY[" in info["metadata_types"][key]:
                # gguf-py flattens nested arrays and takes the element type of the first inner
                # array for all of them: compare the leaf count always, and the leaf values
                # when every inner array has the first one's element type.
                leaves = flatten(got)
                assert len(field.data) == len(leaves), key
                if len({type(x) for x in leaves}) == 1:
                    assert same_value(leaves, flatten(want)), key
                    assert info["metadata_types"][key] == label, key
            else:
                assert same_value(got, want), key
                assert info["metadata_types"][key] == label, key
            assert f.kv_record(key)["file_offset"] == field.offset, key
    assert len(info["tensors"]) == len(ref.tensors)
    with dg.GGUFFile(path) as f:
        for t, rt in zip(info["tensors"], ref.tensors, strict=True):
            assert t["name"] == rt.name
            assert t["type_id"] == int(rt.tensor_type)
            assert t["type"] == rt.tensor_type.name
            assert t["shape"] == [int(d) for d in rt.shape]
            assert t["nbytes"] == rt.n_bytes
            assert info["data_offset"] + t["offset"] == rt.data_offset
            raw = f.tensor_data(t["name"])
            assert raw.dtype == np.uint8 and raw.size == t["nbytes"]
            assert raw.tobytes() == np.ascontiguousarray(rt.data).tobytes()
    return info


@pytest.mark.parametrize("alignment", [None, 1, 8, 64, 256, 4096])
def test_matches_gguf_py(tmp_path, alignment):
    path = tmp_path / "m.gguf"
    write_gguf(path, alignment)
    info = compare_with_gguf_py(path)
    assert info["alignment"] == (alignment or 32)
    assert info["data_offset"] % info["alignment"] == 0
    md = info["metadata"]
    assert md["a.nested"] == [[1, 2], [3], [4, 5, 6]]
    assert md["a.nested_str"] == [["x", "y"], ["zz"]]
    assert info["metadata_types"]["a.nested"] == "ARRAY[ARRAY[INT32]]"
    assert md["s.u64"] == 2**64 - 1 and md["s.i64"] == -(2**63)
    assert md["s.f32"] == float(np.float32(1e-6))


def test_every_known_tensor_type_is_sized_like_gguf_py(tmp_path):
    """ds4rt's type table (names, block sizes) against gguf-py's, through real files."""
    path = tmp_path / "m.gguf"
    write_gguf(path, None)
    seen = {t["type"] for t in dg.inspect(path)["tensors"]}
    for qt in QT:
        assert dg.tensor_type_name(int(qt)) == qt.name
    assert seen == {qt.name for qt in QT}  # the test file holds every type gguf-py knows
    for unknown in (4, 5, 31, 32, 33, 36, 37, 38, 42, 1000):
        assert dg.tensor_type_name(unknown) is None


def test_large_string_array_and_typed_access(tmp_path):
    n = 129_280
    path = tmp_path / "tok.gguf"
    write_gguf(path, None, with_tokens=n)
    # The writer is the oracle here: GGUFReader needs seconds for an array this long.
    with dg.GGUFFile(path) as f:
        toks = f.metadata["tokenizer.ggml.tokens"]
        assert toks == [f"tok{i}" for i in range(n)]
        assert f._h.array_str("tokenizer.ggml.tokens", n - 1) == f"tok{n - 1}"
        assert f._h.array_str("tokenizer.ggml.tokens", 77) == "tok77"
        with pytest.raises(errors.OutOfRangeError, match="array element 129280"):
            f._h.array_str("tokenizer.ggml.tokens", n)
        with pytest.raises(errors.FormatError, match="expected an integer"):
            f._h.array_int("tokenizer.ggml.tokens", 0)


def test_typed_getters(tmp_path):
    path = tmp_path / "m.gguf"
    write_gguf(path, None)
    with dg.GGUFFile(path) as f:
        assert f.get_u32("s.u32") == 4294967295
        assert f.get_u32("s.u8") == 255
        with pytest.raises(errors.FormatError, match="does not fit in a u32"):
            f.get_u32("s.u64")
        with pytest.raises(errors.FormatError, match="-2147483648 does not fit"):
            f.get_u32("s.i32")
        with pytest.raises(errors.FormatError, match="has type FLOAT32; expected an integer"):
            f.get_u32("s.f32")
        with pytest.raises(errors.FormatError, match="'s.bool'"):
            f.get_u32("s.bool")
        assert f.get_u64("s.u64") == 2**64 - 1
        with pytest.raises(errors.FormatError, match="negative"):
            f.get_u64("s.i64")
        assert f.get_f32("s.f32") == pytest.approx(1e-6)
        assert f.get_f32("s.f64") == pytest.approx(-1.0 / 3.0)
        assert f.get_f32("s.i16") == -32768.0
        assert f.get_f32("s.f32_inf") == float("inf")
        with pytest.raises(errors.FormatError, match="expected a number"):
            f.get_f32("s.str")
        assert f.get_bool("s.bool") is True and f.get_bool("s.bool_false") is False
        with pytest.raises(errors.FormatError, match="expected BOOL"):
            f.get_bool("s.u8")
        assert f.get_str("general.architecture") == "deepseek4"
        with pytest.raises(errors.FormatError, match="expected STRING"):
            f.get_str("a.str")
        with pytest.raises(errors.NotFoundError, match="'no.such.key' not found"):
            f.get_u32("no.such.key")
        h = f._h
        assert [h.array_int("a.i64", i) for i in range(2)] == [-(2**63), 2**63 - 1]
        assert h.array_int("a.bool", 0) == 1 and h.array_int("a.bool", 1) == 0
        with pytest.raises(errors.FormatError, match="does not fit in an int64"):
            h.array_int("a.u64", 1)
        assert h.array_f64("a.f32", 2) == -2.25
        assert h.array_f64("a.u32", 3) == 4294967295.0
        with pytest.raises(errors.FormatError, match="expected a number"):
            h.array_f64("a.bool", 0)
        with pytest.raises(errors.FormatError, match="not an array"):
            h.array_int("s.u8", 0)
        with pytest.raises(errors.FormatError, match="nested array.*array_sub"):
            h.array_int("a.nested", 0)
        assert h.array_sub("a.nested", [2]) == [4, 5, 6]
        assert h.array_sub("a.nested_str", [1]) == ["zz"]
        with pytest.raises(errors.OutOfRangeError):
            h.array_sub("a.nested", [3])
        with pytest.raises(errors.FormatError, match="expected ARRAY"):
            h.array_sub("a.u8", [0])


def test_tensor_views_outlive_close(tmp_path):
    path = tmp_path / "m.gguf"
    write_gguf(path, None)
    f = dg.GGUFFile(path)
    want = f.tensor_data("t.f32").copy()
    view = f.tensor_data("t.f32")
    by_index = f.tensor_data(0)
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 1
    f.close()
    assert f.closed
    with pytest.raises(ValueError, match="closed"):
        f.tensor_data("t.f32")
    assert np.array_equal(view, want) and np.array_equal(by_index, want)
    del view, by_index  # the last views release the mapping
    with pytest.raises(errors.NotFoundError):
        dg.GGUFFile(path).tensor_data("nope")


def test_hand_built_v2_file():
    img = gc.build(
        [
            ("general.architecture", gc.STRING, "deepseek4"),
            ("deepseek4.block_count", gc.UINT32, 43),
            ("deepseek4.attention.compress_ratios", gc.ARRAY, (gc.INT32, [0, 0, 4, 128])),
        ],
        [gc.Tensor("output_norm.weight", [16], gc.F32), gc.Tensor("w", [32, 3], gc.Q8_0)],
        version=2,
    )
    f = dg.GGUFFile(data=img.data)
    assert f.version == 2
    assert f.get_u32("deepseek4.block_count") == 43
    assert f.metadata["deepseek4.attention.compress_ratios"] == [0, 0, 4, 128]
    assert f.data_offset == img.data_offset
    assert [t["shape"] for t in f.tensors] == [[16], [32, 3]]
    assert f.tensors[1]["nbytes"] == 3 * 34 and f.tensors[1]["offset"] == 64
    assert f.tensor_data("w").tobytes() == img.data[img.data_offset + 64 :][: 3 * 34]


def test_hand_built_matches_gguf_py_reader(tmp_path):
    """The crafted files are themselves checked against gguf-py, so they test the reader and
    not a shared misunderstanding."""
    img = gc.small_complete()
    path = tmp_path / "c.gguf"
    path.write_bytes(img.data)
    compare_with_gguf_py(path)
    md = dg.inspect(path)["metadata"]
    assert md["nested"] == [[1, -2], ["x"], []]
    assert md["tokens"] == ["a", "", "héllo"]


def test_scalar_tensor_n_dims_zero_and_no_tensors():
    img = gc.build([], [gc.Tensor("scalar", [], gc.F32)])
    with dg.GGUFFile(data=img.data) as f:
        (t,) = f.tensors
        assert t["shape"] == [] and t["nbytes"] == 4
    # A file without tensors may end before the data section's padding.
    img = gc.build([("k", gc.UINT8, 1)], [], info_padding=False)
    assert len(img.data) % 32 != 0
    with dg.GGUFFile(data=img.data) as f:
        assert f.tensors == [] and f.metadata == {"k": 1}
        assert f.data_offset == len(img.data) + (-len(img.data) % 32)


def test_trailing_padding_is_optional():
    """Only the tensor's own bytes must be inside the file, as in llama.cpp's loader."""
    img = gc.build([], [gc.Tensor("a", [3], gc.F32)], tail_padding=False)
    assert (len(img.data) - img.data_offset) == 12
    with dg.GGUFFile(data=img.data) as f:
        assert f.tensor_data("a").size == 12


def test_undecodable_strings_survive():
    img = gc.build([(b"k\xff", gc.STRING, b"v\xfe")], [gc.Tensor(b"t\x80", [1], gc.F32)])
    with dg.GGUFFile(data=img.data) as f:
        (key,) = f.metadata
        assert key.encode("utf-8", "surrogateescape") == b"k\xff"
        assert f.metadata[key].encode("utf-8", "surrogateescape") == b"v\xfe"
        name = f.tensors[0]["name"]
        assert f.tensor(name)["nbytes"] == 4


def test_bool_bytes_other_than_one_are_true():
    img = gc.build(raw_kvs=[gc.gstr("b") + gc.u32(gc.BOOL) + b"\x02"])
    with dg.GGUFFile(data=img.data) as f:
        assert f.metadata["b"] is True and f.get_bool("b") is True
