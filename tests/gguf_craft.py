"""Hand-built GGUF images for reader tests: every field is under the test's control, so files
can be made valid in ways gguf-py's writer does not produce (v2, nested arrays, n_dims 0) and
broken in every way a hostile file could be. Offsets of each record are kept so tests can check
that error messages point at the right byte.

Layout (GGUF v2/v3): magic, version u32, n_tensors u64, n_kv u64, kv records, tensor infos,
padding to the alignment, tensor data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = range(10)
UINT64, INT64, FLOAT64 = 10, 11, 12

SCALAR_FORMATS = {
    UINT8: "<B",
    INT8: "<b",
    UINT16: "<H",
    INT16: "<h",
    UINT32: "<I",
    INT32: "<i",
    FLOAT32: "<f",
    BOOL: "<?",
    UINT64: "<Q",
    INT64: "<q",
    FLOAT64: "<d",
}

# ggml tensor type ids and (block elements, block bytes) of the ones tests use.
F32, F16, Q4_0, Q8_0, Q2_K, IQ2_XXS, I32, BF16 = 0, 1, 2, 8, 10, 16, 26, 30
BLOCKS = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34), Q2_K: (256, 84)}
BLOCKS.update({IQ2_XXS: (256, 66), I32: (1, 4), BF16: (1, 2)})


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def gstr(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def value(vtype: int, v) -> bytes:
    """Encoded value (without its type field). Arrays: v = (elem_type, [elements])."""
    if vtype in SCALAR_FORMATS:
        return struct.pack(SCALAR_FORMATS[vtype], v)
    if vtype == STRING:
        return gstr(v)
    if vtype == ARRAY:
        elem_type, elems = v
        return u32(elem_type) + u64(len(elems)) + b"".join(value(elem_type, e) for e in elems)
    raise ValueError(vtype)


def nbytes_of(ttype: int, ne: list[int]) -> int:
    be, bb = BLOCKS[ttype]
    n = 1
    for d in ne:
        n *= d
    return n // be * bb


@dataclass
class Tensor:
    name: str | bytes
    ne: list[int]
    ttype: int = F32
    offset: int | None = None  # None: next aligned offset after the previous tensor
    data: bytes | None = None  # None: a deterministic pattern of the right size
    raw_info: bytes | None = None  # replaces the whole info record


@dataclass
class Image:
    """A GGUF file image and where its parts lie."""

    data: bytes
    kv_offsets: list[int]
    tensor_info_offsets: list[int]
    data_offset: int
    tensor_offsets: list[int] = field(default_factory=list)


def build(
    kvs: list[tuple[str | bytes, int, object]] | None = None,
    tensors: list[Tensor] | None = None,
    *,
    version: int = 3,
    magic: bytes = b"GGUF",
    alignment: int = 32,
    n_kv: int | None = None,
    n_tensors: int | None = None,
    raw_kvs: list[bytes] | None = None,
    tail_padding: bool = True,
    info_padding: bool = True,
    with_data: bool = True,
) -> Image:
    """A GGUF image. kvs: (key, type, value) records; raw_kvs: already encoded records appended
    after them. alignment is the padding used (add a general.alignment record yourself)."""
    kvs = kvs or []
    tensors = tensors or []
    records = [gstr(k) + u32(t) + value(t, v) for k, t, v in kvs] + list(raw_kvs or [])
    n_kv = len(records) if n_kv is None else n_kv
    n_tensors = len(tensors) if n_tensors is None else n_tensors
    out = bytearray(magic + u32(version) + u64(n_tensors) + u64(n_kv))
    kv_offsets = []
    for r in records:
        kv_offsets.append(len(out))
        out += r
    # Data layout first: offsets are needed in the infos.
    offsets, blobs, next_off = [], [], 0
    for t in tensors:
        nb = nbytes_of(t.ttype, t.ne) if t.ttype in BLOCKS else 0
        blob = t.data if t.data is not None else bytes((i * 7 + 3) & 0xFF for i in range(nb))
        off = next_off if t.offset is None else t.offset
        offsets.append(off)
        blobs.append(blob)
        next_off = max(next_off, off + len(blob))
        next_off += -next_off % alignment
    info_offsets = []
    for t, off in zip(tensors, offsets, strict=True):
        info_offsets.append(len(out))
        if t.raw_info is not None:
            out += t.raw_info
            continue
        out += gstr(t.name) + u32(len(t.ne)) + b"".join(u64(d) for d in t.ne)
        out += u32(t.ttype) + u64(off)
    data_offset = len(out) + (-len(out) % alignment)
    if info_padding:
        out += bytes(data_offset - len(out))
    section = bytearray()
    for off, blob in zip(offsets, blobs if with_data else [], strict=False):
        if off + len(blob) > len(section):
            section += bytes(off + len(blob) - len(section))
        section[off : off + len(blob)] = blob
    if tail_padding and with_data:
        section += bytes(-len(section) % alignment)
    out += section
    return Image(bytes(out), kv_offsets, info_offsets, data_offset, offsets)


def small_complete(alignment: int = 32) -> Image:
    """A small file using every structure the reader knows, whose last tensor ends exactly at
    the end of the file (so that cutting any byte off makes it invalid)."""
    kvs = [
        ("general.architecture", STRING, "deepseek4"),
        ("general.alignment", UINT32, alignment),
        ("u8", UINT8, 200),
        ("i16", INT16, -300),
        ("f64", FLOAT64, 0.25),
        ("flag", BOOL, True),
        ("tokens", ARRAY, (STRING, ["a", "", "héllo"])),
        ("ratios", ARRAY, (UINT32, [0, 4, 128])),
        ("nested", ARRAY, (ARRAY, [(INT8, [1, -2]), (STRING, ["x"]), (UINT8, [])])),
    ]
    tensors = [
        Tensor("w.q8", [64, 2], Q8_0),  # 136 bytes, padded to the alignment
        Tensor("w.f32", [8], F32),  # 32 bytes: ends at the end of the file for alignment <= 32
    ]
    return build(kvs, tensors, alignment=alignment)
