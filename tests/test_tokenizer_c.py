"""The tokenizer's C API from C: tests/tokenizer_check.c built against the sources with
AddressSanitizer + UBSan (edge cases and random inputs must not touch bad memory), and against
the installed header and library; and the cffi binding calling it."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest
from _tok_support import ROOT

import ds4rt


def _cc():
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    return cc


def test_c_api_under_sanitizers(tmp_path):
    cc = _cc()
    sources = [s for s in glob.glob(os.path.join(ROOT, "src/tokenizer/*.c")) if "gguf" not in s]
    exe = str(tmp_path / "check_asan")
    cmd = [cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"]
    cmd += ["-DDS4RT_BUILDING", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    cmd += ["-I", os.path.join(ROOT, "include"), "-I", os.path.join(ROOT, "src")]
    cmd += ["-I", os.path.join(ROOT, "src/core")]
    cmd += [os.path.join(ROOT, "tests/tokenizer_check.c"), *sources]
    cmd += [os.path.join(ROOT, "src/core/error.c"), "-o", exe]
    built = subprocess.run(cmd, capture_output=True, text=True)
    if built.returncode != 0 and "sanitize" in built.stderr:
        pytest.skip(f"sanitizers unavailable: {built.stderr[:200]}")
    assert built.returncode == 0, built.stderr
    run = subprocess.run([exe, "5000"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_c_api_against_installed_library(tmp_path):
    cc = _cc()
    exe = str(tmp_path / "check")
    libdir = ds4rt.get_library_dir()
    cmd = [cc, "-std=c11", "-Wall", "-Wextra", "-Werror"]
    cmd += [os.path.join(ROOT, "tests/tokenizer_check.c"), "-I", ds4rt.get_include()]
    cmd += ["-L", libdir, "-lds4rt", f"-Wl,-rpath,{libdir}", "-o", exe]
    subprocess.run(cmd, check=True)
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
