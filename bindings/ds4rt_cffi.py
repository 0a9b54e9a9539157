"""cffi binding of libds4rt in ABI mode: no compiler needed at install time.

    from ds4rt_cffi import ffi, lib   # (with bindings/ on sys.path)
    print(ffi.string(lib.ds4rt_version()).decode())

The declarations come from the installed header (``ds4rt.get_include()``): preprocessor lines
(but integer ``#define``s, which cdef reads), the ``DS4RT_API`` prefix and the ``extern "C"``
braces are stripped, since cffi's cdef runs no preprocessor; so are the header-inline default
initialisers (function bodies cdef cannot declare): fill structs with the
``ds4rt_*_init(p, ffi.sizeof(p[0]))`` calls they wrap.
``load(path)`` accepts another header/library pair (e.g. a C build tree).
"""

from __future__ import annotations

import os
import re

import cffi

ffi = cffi.FFI()


def header_declarations(header_path: str) -> str:
    """The header's declarations in a form cffi's cdef accepts."""
    text = open(header_path, encoding="utf-8").read()
    text = re.sub(
        r"^#if [^\n]*ds4rt:inline-defaults.*?^#endif /\* ds4rt:inline-defaults \*/$",
        "",
        text,
        flags=re.S | re.M,
    )
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if re.fullmatch(r"#\s*define\s+DS4RT_\w+\s+\d+", s):  # array sizes: cffi knows these
            lines.append(s)
            continue
        if s.startswith("#") or s in ('extern "C" {', '} /* extern "C" */', "}"):
            continue
        lines.append(line)
    text = "\n".join(lines)
    text = re.sub(r"\bDS4RT_API\s+", "", text)
    return text


def load(header_path: str | None = None, library_path: str | None = None):
    import ds4rt

    header_path = header_path or os.path.join(ds4rt.get_include(), "ds4rt.h")
    library_path = library_path or os.path.join(ds4rt.get_library_dir(), "libds4rt.so.1")
    ffi.cdef(header_declarations(header_path))
    return ffi.dlopen(library_path)


lib = load()


def load_testing():
    """(ffi, lib) that also declare the test hooks of src/ds4rt_testing.h (single CPU ops, the
    kernel path choice, single GPU kernels): the library exports them, the installed header
    does not; only a source tree has this header."""
    import ds4rt

    testing = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    own = cffi.FFI()
    own.cdef(
        header_declarations(os.path.join(ds4rt.get_include(), "ds4rt.h"))
        + header_declarations(os.path.join(testing, "ds4rt_testing.h"))
    )
    return own, own.dlopen(os.path.join(ds4rt.get_library_dir(), "libds4rt.so.1"))
