"""The C ABI from outside Python: a C host program and the cffi binding."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import ds4rt


def build_c_host(repo_root: str, tmp_path, source: str = "bindings/example.c") -> str:
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    exe = str(tmp_path / "host")
    libdir = ds4rt.get_library_dir()
    subprocess.run(
        [
            cc,
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            os.path.join(repo_root, source),
            "-I",
            ds4rt.get_include(),
            "-L",
            libdir,
            "-lds4rt",
            f"-Wl,-rpath,{libdir}",
            "-o",
            exe,
        ],
        check=True,
    )
    return exe


def test_c_example_host(repo_root, tmp_path):
    exe = build_c_host(repo_root, tmp_path)
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ds4rt.build_info()


def test_cffi_binding(repo_root):
    pytest.importorskip("cffi")
    sys.path.insert(0, os.path.join(repo_root, "bindings"))
    try:
        import ds4rt_cffi
    finally:
        sys.path.pop(0)
    lib, ffi = ds4rt_cffi.lib, ds4rt_cffi.ffi
    assert lib.ds4rt_api_version() == ds4rt.api_version()
    assert ffi.string(lib.ds4rt_version()).decode() == ds4rt.version()
    assert lib.ds4rt_status_name(lib.DS4RT_ERR_FORMAT) == lib.ds4rt_status_name(3)
    assert ffi.string(lib.ds4rt_status_name(3)) == b"DS4RT_ERR_FORMAT"
