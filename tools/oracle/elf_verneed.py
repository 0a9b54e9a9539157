"""Mark a symbol-version requirement (e.g. GLIBC_2.38) weak in an ELF64 shared library.

An ELF file lists, in its `.gnu.version_r` section, the symbol versions it needs from each
library (Verneed entries with Vernaux children). The dynamic loader refuses to load the file when
a required version is missing, unless the Vernaux entry carries VER_FLG_WEAK; then it only
warns (with LD_DEBUG) and resolves the symbols by name from whatever object in the global scope
defines them. Only that one flags field is changed; no code or data is touched.
"""

from __future__ import annotations

import struct
from pathlib import Path

SHT_GNU_VERNEED = 0x6FFFFFFE
VER_FLG_WEAK = 0x2


def _cstr(buf: bytes, off: int) -> str:
    end = buf.index(b"\0", off)
    return buf[off:end].decode("ascii", "replace")


def version_requirements(data: bytes) -> list[tuple[str, str, int, int]]:
    """(library, version, flags, byte offset of the flags field) for every Vernaux entry."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    out = []
    for _name, sh_type, _f, _a, off, _size, link, info, _al, _es in sections:
        if sh_type != SHT_GNU_VERNEED:
            continue
        strtab = sections[link][4]
        vn = off
        for _ in range(info):
            _ver, cnt, file_, aux, nxt = struct.unpack_from("<HHIII", data, vn)
            lib = _cstr(data, strtab + file_)
            va = vn + aux
            for _ in range(cnt):
                _hash, flags, _other, name, vnext = struct.unpack_from("<IHHII", data, va)
                out.append((lib, _cstr(data, strtab + name), flags, va + 4))
                va += vnext
            vn += nxt
    return out


def mark_weak(path: str | Path, version: str) -> int:
    """Set VER_FLG_WEAK on every requirement of `version`; returns how many were changed."""
    p = Path(path)
    data = bytearray(p.read_bytes())
    changed = 0
    for _lib, name, flags, flags_off in version_requirements(bytes(data)):
        if name == version and not flags & VER_FLG_WEAK:
            struct.pack_into("<H", data, flags_off, flags | VER_FLG_WEAK)
            changed += 1
    if changed:
        p.write_bytes(bytes(data))
    return changed
