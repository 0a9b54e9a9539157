"""The C ABI from outside Python: a C host program and the cffi binding."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ds4rt


def test_c_example_host(c_programs):
    """bindings/example.c, built by Meson against the installed package (found through
    pkg-config, as a user's build would), prints the build line."""
    exe = c_programs("native").path("example")
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
