"""cffi views of the installed library for ABI tests: `new` is today's header (with the library),
`old` the frozen 1.0 header (tests/abi/ds4rt_1_0.h), for its struct layouts only. Structs are
built in raw buffers, so a test can hand the library any size and see every byte it writes."""

from __future__ import annotations

import os
import sys

import cffi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bindings"))
try:
    import ds4rt_cffi
finally:
    sys.path.pop(0)

new, lib = ds4rt_cffi.ffi, ds4rt_cffi.lib
old = cffi.FFI()
old.cdef(ds4rt_cffi.header_declarations(os.path.join(ROOT, "tests", "abi", "ds4rt_1_0.h")))

GUARD = 32  # bytes after a struct that the library must never touch
FILL = 0xA5


class Raw:
    """A struct of `size` bytes (followed by GUARD guard bytes) seen as type `name`."""

    def __init__(self, name: str, size: int, fill: int = 0):
        self.name, self.size = name, size
        self.buf = new.new("unsigned char[]", size + GUARD)
        for i in range(size + GUARD):
            self.buf[i] = fill if i < size else FILL
        self.ptr = new.cast(f"{name} *", self.buf)

    def bytes(self) -> bytes:
        return bytes(self.buf[0 : self.size])

    def guard_intact(self) -> bool:
        return all(self.buf[self.size + i] == FILL for i in range(GUARD))

    def size_member(self) -> int:
        return new.cast("size_t *", self.buf)[0]

    def set_size(self, n: int) -> None:
        new.cast("size_t *", self.buf)[0] = n


def last_error() -> str:
    return new.string(lib.ds4rt_last_error()).decode()


def status_name(st: int) -> str:
    return new.string(lib.ds4rt_status_name(st)).decode()
