"""The tokenizer's C API from C: tests/tokenizer_check.c (Meson-built, tests/meson.build) linked
with the tokenizer's sources under AddressSanitizer + UBSan (edge cases and random inputs must
not touch bad memory), and against the installed library; and the cffi binding calling it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from _tok_support import ROOT


def test_c_api_under_sanitizers(c_programs):
    """tokenizer_check.c linked with the tokenizer built from source under ASan + UBSan."""
    exe = c_programs("sanitize").path("tokenizer_check_src")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="halt_on_error=1")
    run = subprocess.run([exe, "5000"], capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_c_api_against_installed_library(c_programs):
    exe = c_programs("native").path("tokenizer_check")
    run = subprocess.run([exe, "500"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_cffi_tokenize():
    pytest.importorskip("cffi")
    sys.path.insert(0, os.path.join(ROOT, "bindings"))
    try:
        import ds4rt_cffi
    finally:
        sys.path.pop(0)
    lib, ffi = ds4rt_cffi.lib, ds4rt_cffi.ffi
    chars = [chr(c) for c in range(33, 127)] + [chr(0x120)]  # printable ASCII and "Ġ" (space)
    keep = [ffi.new("char[]", c.encode()) for c in chars]
    arrays = ffi.new("ds4rt_tokenizer_arrays *")
    assert lib.ds4rt_tokenizer_arrays_init(arrays, ffi.sizeof(arrays[0])) == lib.DS4RT_OK
    arrays.n_tokens = len(keep)
    tokens = ffi.new("const char *[]", keep)
    arrays.tokens = tokens
    tok = ffi.new("ds4rt_tokenizer **")
    assert lib.ds4rt_tokenizer_from_arrays(arrays, tok) == lib.DS4RT_OK
    text = b"hi there"
    n = ffi.new("size_t *")
    assert lib.ds4rt_tokenize(tok[0], text, len(text), 0, ffi.NULL, 0, n) == lib.DS4RT_OK
    ids = ffi.new("int32_t[]", n[0])
    assert lib.ds4rt_tokenize(tok[0], text, len(text), 0, ids, n[0], n) == lib.DS4RT_OK
    assert list(ids) == [ord("h") - 33, ord("i") - 33, 94, *[ord(c) - 33 for c in "there"]]
    out = ffi.new("char[]", 32)
    assert lib.ds4rt_detokenize(tok[0], ids, n[0], 0, out, 32, n) == lib.DS4RT_OK
    assert ffi.string(out) == text
    lib.ds4rt_tokenizer_free(tok[0])
