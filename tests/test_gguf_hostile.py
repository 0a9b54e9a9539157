"""The GGUF reader on malformed and hostile files: every failure is a clean exception of the
right class whose message names the offending key or tensor and a byte offset."""

from __future__ import annotations

import os
import re
import struct

import gguf_craft as gc
import pytest

from ds4rt import errors
from ds4rt import gguf as dg

U64_MAX = 2**64 - 1


def open_image(data: bytes, tmp_path=None):
    """Opens from memory, and also from a file when tmp_path is given; both must agree."""
    with dg.GGUFFile(data=data) as f:
        mem = (f.version, f.data_offset, f.metadata, f.tensors)
    if tmp_path is not None:
        p = tmp_path / "f.gguf"
        p.write_bytes(data)
        with dg.GGUFFile(p) as f:
            assert (f.version, f.data_offset, f.metadata, f.tensors) == mem
    return mem


def fails(data: bytes, exc=errors.FormatError, *patterns: str) -> str:
    with pytest.raises(exc) as ei:
        dg.GGUFFile(data=data)
    msg = str(ei.value)
    for p in patterns:
        assert re.search(p, msg), f"{p!r} not in {msg!r}"
    return msg


def patch(data: bytes, at: int, raw: bytes) -> bytes:
    return data[:at] + raw + data[at + len(raw) :]


# --- truncation ---------------------------------------------------------------------------


def test_truncation_at_every_byte(tmp_path):
    img = gc.small_complete()
    open_image(img.data, tmp_path)  # the full file is valid
    path = tmp_path / "cut.gguf"
    for n in range(len(img.data)):
        cut = img.data[:n]
        with pytest.raises(errors.FormatError) as ei:
            dg.GGUFFile(data=cut)
        assert str(ei.value), n
        path.write_bytes(cut)
        with pytest.raises(errors.FormatError) as ef:
            dg.GGUFFile(path)
        assert str(ef.value).startswith(str(path) + ": ")
        # The same check fails on the file as on the memory image.
        assert str(ef.value)[len(str(path)) + 2 :] == str(ei.value)[len("<memory>: ") :]


def test_truncation_messages_point_at_the_record():
    img = gc.small_complete()
    k = img.kv_offsets[6]  # "tokens": string array
    fails(img.data[: k + 20], errors.FormatError, r"metadata key 'tokens' \(record 6 at byte ")
    t = img.tensor_info_offsets[1]
    fails(img.data[: t + 20], errors.FormatError, r"tensor 'w.f32' \(record 1 at byte \d+\)")
    fails(img.data[:-1], errors.FormatError, r"tensor 'w.f32'.*runs past the end of the file")


# --- header -------------------------------------------------------------------------------


def test_bad_magic_and_empty():
    img = gc.small_complete()
    fails(b"GGML" + img.data[4:], errors.FormatError, "bad magic", "byte 0", "not a GGUF file")
    fails(b"", errors.FormatError, "too short")
    fails(b"GGU", errors.FormatError, "3 bytes")


def test_empty_file_directory_and_missing_file(tmp_path):
    p = tmp_path / "empty.gguf"
    p.write_bytes(b"")
    with pytest.raises(errors.FormatError, match="file is 0 bytes long"):
        dg.GGUFFile(p)
    with pytest.raises(errors.FileIOError, match="not a regular file"):
        dg.GGUFFile(tmp_path)
    with pytest.raises(errors.FileIOError, match="cannot open: No such file"):
        dg.GGUFFile(tmp_path / "missing.gguf")


@pytest.mark.parametrize("version", [0, 1, 4, 0x7FFFFFFF])
def test_unsupported_versions(version):
    img = gc.build([("k", gc.UINT8, 1)], version=version)
    msg = fails(img.data, errors.UnsupportedError, f"version {version}", "byte 4")
    if version == 1:
        assert "32-bit" in msg


def test_big_endian_file():
    img = gc.small_complete()
    fails(patch(img.data, 4, struct.pack(">I", 3)), errors.UnsupportedError, "big-endian")


def test_huge_counts_rejected_before_allocation():
    img = gc.build([("k", gc.UINT8, 1)], [gc.Tensor("t", [4], gc.F32)])
    fails(
        patch(img.data, 16, gc.u64(U64_MAX)),
        errors.FormatError,
        "n_kv = 18446744073709551615",
        "byte 16",
        "cannot fit",
    )
    fails(
        patch(img.data, 8, gc.u64(2**62)),
        errors.FormatError,
        "n_tensors = 4611686018427387904",
        "byte 8",
        "cannot fit",
    )
    # A count that fits the file before the metadata but not after it.
    n = (len(img.data) - 24) // 24
    fails(patch(img.data, 8, gc.u64(n)), errors.FormatError, "left after the metadata")


# --- metadata -----------------------------------------------------------------------------


def test_key_length_beyond_file():
    img = gc.build([("k", gc.UINT8, 1), ("second", gc.UINT8, 2)])
    k = img.kv_offsets[1]
    fails(
        patch(img.data, k, gc.u64(10_000)),
        errors.FormatError,
        f"metadata record 1 at byte {k}",
        "key length 10000 runs past the end",
    )
    fails(
        patch(img.data, k, gc.u64(U64_MAX)), errors.FormatError, "key length 18446744073709551615"
    )


def test_string_length_overflow():
    img = gc.build([("general.name", gc.STRING, "abc"), ("z", gc.UINT8, 1)])
    k = img.kv_offsets[0]
    at = k + 8 + len("general.name") + 4
    for bad in (U64_MAX, 2**63, 1000):
        fails(
            patch(img.data, at, gc.u64(bad)),
            errors.FormatError,
            rf"metadata key 'general.name' \(record 0 at byte {k}\)",
            f"string value at byte {at} runs past the end",
        )


def test_unknown_value_types():
    img = gc.build([("ok", gc.UINT8, 1), ("bad.type", gc.UINT8, 1)])
    k = img.kv_offsets[1]
    at = k + 8 + len("bad.type")
    fails(
        patch(img.data, at, gc.u32(13)),
        errors.FormatError,
        rf"metadata key 'bad.type' \(record 1 at byte {k}\)",
        f"unknown value type 13 at byte {at}",
    )
    img = gc.build([("arr", gc.ARRAY, (gc.UINT8, [1, 2]))])
    k = img.kv_offsets[0]
    at = k + 8 + 3 + 4
    fails(
        patch(img.data, at, gc.u32(0xFFFFFFFF)),
        errors.FormatError,
        "'arr'",
        f"array at byte {at} has unknown element type 4294967295",
    )


def test_array_counts_that_cannot_fit():
    for elem_type, elems, min_bytes in (
        (gc.UINT64, [1], 8),
        (gc.STRING, ["a"], 8),
        (gc.ARRAY, [(gc.UINT8, [1])], 12),
    ):
        img = gc.build([("arr", gc.ARRAY, (elem_type, elems))])
        at = img.kv_offsets[0] + 8 + 3 + 4
        for bad in (U64_MAX, 2**61, 10_000):
            fails(
                patch(img.data, at + 4, gc.u64(bad)),
                errors.FormatError,
                "'arr'",
                f"array at byte {at} declares {bad} ",
                f"each takes at least {min_bytes}",
            )


def test_string_array_element_length():
    img = gc.build([("toks", gc.ARRAY, (gc.STRING, ["a", "b", "c"]))])
    first = img.kv_offsets[0] + 8 + 4 + 4 + 12
    second = first + 9
    fails(
        patch(img.data, second, gc.u64(2**64 - 5)),
        errors.FormatError,
        "'toks'",
        f"string element 1 of the array at byte {first - 12}: length at byte {second}",
    )


def test_duplicate_key():
    img = gc.build([("a", gc.UINT8, 1), ("b", gc.UINT8, 1), ("a", gc.UINT32, 7)])
    k0, k2 = img.kv_offsets[0], img.kv_offsets[2]
    fails(
        img.data,
        errors.FormatError,
        rf"metadata key 'a' \(record 2 at byte {k2}\) is a duplicate of record 0 at byte {k0}",
    )


def test_nested_arrays_accepted_and_shown():
    deep = (gc.UINT16, [7])
    for _ in range(14):
        deep = (gc.ARRAY, [deep])
    img = gc.build(
        [
            ("n", gc.ARRAY, (gc.ARRAY, [(gc.STRING, ["a", "bc"]), (gc.ARRAY, [(gc.INT8, [-1])])])),
            ("deep", gc.ARRAY, deep),
            ("empty", gc.ARRAY, (gc.ARRAY, [])),
        ]
    )
    _, _, md, _ = open_image(img.data)
    assert md["n"] == [["a", "bc"], [[-1]]]
    want = [7]
    for _ in range(14):
        want = [want]
    assert md["deep"] == want
    assert md["empty"] == []
    with dg.GGUFFile(data=img.data) as f:
        assert f.metadata_types["n"] == "ARRAY[ARRAY[STRING]]"
        assert f._h.array_sub("n", [1, 0]) == [-1]


def test_nesting_too_deep():
    deep = (gc.UINT8, [1])
    for _ in range(16):
        deep = (gc.ARRAY, [deep])
    fails(
        gc.build([("deep", gc.ARRAY, deep)]).data,
        errors.FormatError,
        "'deep'",
        "nested deeper than 16 levels",
    )


def test_alignment_key():
    for t, v, why in (
        (gc.INT32, 32, "has type INT32; it must be UINT32"),
        (gc.UINT64, 32, "has type UINT64"),
        (gc.UINT32, 0, "is 0; it must be a non-zero power of two"),
        (gc.UINT32, 48, "is 48"),
    ):
        img = gc.build([("general.alignment", t, v)], [gc.Tensor("t", [8], gc.F32)])
        fails(img.data, errors.FormatError, "'general.alignment'", f"byte {img.kv_offsets[0]}", why)


# --- tensor infos --------------------------------------------------------------------------


def info(name, ne, ttype, offset, n_dims=None):
    n_dims = len(ne) if n_dims is None else n_dims
    dims = b"".join(gc.u64(d) for d in ne)
    return gc.gstr(name) + gc.u32(n_dims) + dims + gc.u32(ttype) + gc.u64(offset)


def bad_tensor(raw_info: bytes, *patterns: str, exc=errors.FormatError):
    img = gc.build(
        [("k", gc.UINT8, 1)],
        [gc.Tensor("good", [8], gc.F32), gc.Tensor("bad", [8], gc.F32, raw_info=raw_info)],
    )
    at = img.tensor_info_offsets[1]
    return fails(img.data, exc, rf"tensor 'bad' \(record 1 at byte {at}\)", *patterns)


def test_too_many_dims():
    bad_tensor(info("bad", [1, 1, 1, 1, 8], gc.F32, 32), "n_dims at byte .* is 5; at most 4")
    bad_tensor(info("bad", [], gc.F32, 32, n_dims=0xFFFFFFFF), "is 4294967295")


def test_dimension_values():
    bad_tensor(info("bad", [8, 0], gc.F32, 32), r"ne\[1\] at byte \d+ is 0")
    bad_tensor(info("bad", [2**63], gc.F32, 32), r"ne\[0\] at byte \d+ is 9223372036854775808")
    bad_tensor(info("bad", [2**32, 2**32], gc.F32, 32), "element count .* overflows int64")
    bad_tensor(info("bad", [2**62, 2], gc.F32, 32), "element count .* overflows int64")
    # Element count fits int64, byte size does not.
    bad_tensor(info("bad", [2**62], gc.F32, 32), "byte size of .* overflows")
    bad_tensor(
        info("bad", [48, 2], gc.Q8_0, 32),
        r"ne\[0\] = 48 is not a multiple of the Q8_0 block size \(32",
    )


def test_unknown_tensor_type():
    for t in (4, 31, 42, 0xFFFFFFFF):
        bad_tensor(
            info("bad", [8], t, 32),
            f"unknown tensor type id {t} at byte \\d+",
            exc=errors.UnsupportedError,
        )


def test_duplicate_tensor_name():
    img = gc.build(
        [], [gc.Tensor("w", [8], gc.F32), gc.Tensor("x", [8], gc.F32), gc.Tensor("w", [8], gc.F32)]
    )
    t0, t2 = img.tensor_info_offsets[0], img.tensor_info_offsets[2]
    fails(
        img.data,
        errors.FormatError,
        rf"tensor 'w' \(record 2 at byte {t2}\): duplicate name; first defined by record 0 at "
        rf"byte {t0}",
    )


def test_misaligned_offset():
    bad_tensor(info("bad", [8], gc.F32, 33), "data offset 33 is not a multiple of the alignment 32")
    img = gc.build(
        [("general.alignment", gc.UINT32, 64)],
        [gc.Tensor("a", [8], gc.F32), gc.Tensor("b", [8], gc.F32, offset=32)],
        alignment=64,
    )
    fails(img.data, errors.FormatError, r"tensor 'b' \(record 1", "alignment 64")


def test_offset_past_the_end():
    bad_tensor(info("bad", [8], gc.F32, 4096), r"data \[4096, \+32 bytes\)", "runs past the end")
    bad_tensor(info("bad", [8], gc.F32, 2**64 - 32), "runs past the end")
    bad_tensor(info("bad", [2**40], gc.F32, 32), "runs past the end")


def test_data_section_starting_past_the_end():
    img = gc.build([], [gc.Tensor("t", [1], gc.F32)], alignment=32)
    cut = img.data[: img.data_offset - 1]  # the padding after the infos is incomplete
    fails(cut, errors.FormatError, "the data section would start at byte")


def test_overlapping_tensors():
    img = gc.build(
        [],
        [
            gc.Tensor("a", [16], gc.F32, offset=0),
            gc.Tensor("b", [8], gc.F32, offset=32),
            gc.Tensor("c", [8], gc.F32, offset=128),
        ],
    )
    fails(
        img.data,
        errors.FormatError,
        "tensor data overlaps",
        rf"'a' \(record 0 at byte {img.tensor_info_offsets[0]}\) occupies bytes \[0, 64\)",
        rf"'b' \(record 1 at byte {img.tensor_info_offsets[1]}\) starts at 32",
    )
    # Same start.
    img = gc.build(
        [], [gc.Tensor("a", [8], gc.F32, offset=0), gc.Tensor("b", [8], gc.F32, offset=0)]
    )
    fails(img.data, errors.FormatError, "overlaps")
    # Touching is fine, and file order need not be data order.
    img = gc.build(
        [], [gc.Tensor("a", [8], gc.F32, offset=32), gc.Tensor("b", [8], gc.F32, offset=0)]
    )
    _, _, _, tensors = open_image(img.data)
    assert [t["offset"] for t in tensors] == [32, 0]


def test_hostile_names_are_escaped_in_messages():
    img = gc.build(raw_kvs=[gc.gstr(b"k\x00\n\xff") + gc.u32(99) + b"\x00"])
    msg = fails(img.data, errors.FormatError, r"metadata key 'k\\x00\\x0a\\xff'")
    assert "\n" not in msg
    long_name = "x" * 5000
    img = gc.build(raw_kvs=[gc.gstr(long_name) + gc.u32(99) + b"\x00"])
    msg = fails(img.data, errors.FormatError, r"'x+\.\.\.'")
    assert len(msg) < 1024


# --- large sparse file ----------------------------------------------------------------------


def _max_rss_bytes() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_sparse_40_gib_file_opens_without_reading_data(tmp_path):
    """A 40 GiB file whose data is a hole: opening maps it and validates the header only.
    The resident set must not grow by the data size, and tensor views must point at the
    right bytes (checked at marker bytes written at both ends)."""
    size = 40 << 30
    ne0, rows = 4096, 9_700_000  # Q8_0: 4352 bytes a row, 39.3 GiB in all
    big = gc.Tensor("big.q8", [ne0, rows], gc.Q8_0, offset=0, data=b"")
    tail = gc.Tensor("tail", [8], gc.F32, offset=gc.nbytes_of(gc.Q8_0, [ne0, rows]), data=b"")
    img = gc.build([("general.architecture", gc.STRING, "deepseek4")], [big, tail], with_data=False)
    header = img.data
    path = tmp_path / "sparse.gguf"
    try:
        with open(path, "wb") as fh:
            fh.write(header)
            fh.truncate(size)
            fh.seek(img.data_offset)
            fh.write(b"\xab\xcd")  # first bytes of big.q8
            end = img.data_offset + tail.offset + 32
            fh.seek(end - 4)
            fh.write(b"\x11\x22\x33\x44")  # last bytes of tail
    except OSError as e:
        pytest.skip(f"cannot make a 40 GiB sparse file here: {e}")
    if os.stat(path).st_blocks * 512 > (64 << 20):
        pytest.skip("the filesystem does not keep the file sparse")
    rss0 = _max_rss_bytes()
    with dg.GGUFFile(path) as f:
        assert f.file_size == size
        t_big, t_tail = f.tensors
        assert t_big["nbytes"] == gc.nbytes_of(gc.Q8_0, [ne0, rows]) > (39 << 30)
        v = f.tensor_data("big.q8")
        assert v.size == t_big["nbytes"]
        assert bytes(v[:2]) == b"\xab\xcd"
        w = f.tensor_data("tail")
        assert bytes(w[-4:]) == b"\x11\x22\x33\x44"
        del v, w
    assert _max_rss_bytes() - rss0 < (256 << 20)
