"""The package, the shared library and the public header as installed: the soname and the link
name, the exported symbols, pkg-config, and the header on its own in C99 and C++."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import ds4rt
from ds4rt import _core

LIB = os.path.join(ds4rt.get_library_dir(), "libds4rt.so.1")


def test_version_and_api():
    assert ds4rt.api_version() == 1
    assert ds4rt.__version__ == ds4rt.version()
    assert ds4rt.version() in ds4rt.build_info()


def test_installed_header_library_and_link_name():
    assert os.path.isfile(os.path.join(ds4rt.get_include(), "ds4rt.h"))
    assert os.path.isfile(LIB)
    # the wheel's stand-in for the libds4rt.so symlink: a linker script naming the real library
    with open(os.path.join(ds4rt.get_library_dir(), "libds4rt.so"), encoding="utf-8") as f:
        assert "INPUT(libds4rt.so.1)" in f.read()


def test_soname_is_versioned():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf not available")
    out = subprocess.run([readelf, "-d", LIB], capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libds4rt.so.1]" in out


def exported_symbols(path: str) -> list[str]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    out = subprocess.run(
        [nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True
    ).stdout
    return [ln.split()[-1] for ln in out.splitlines() if ln.strip()]


def test_only_ds4rt_symbols_exported():
    names = exported_symbols(LIB)
    assert names, "libds4rt exports nothing"
    leaked = [n for n in names if not n.startswith("ds4rt_")]
    assert leaked == []


def test_pkg_config_finds_the_package():
    pkgconf = shutil.which("pkg-config")
    if pkgconf is None:
        pytest.skip("pkg-config not available")
    env = dict(os.environ, PKG_CONFIG_PATH=ds4rt.get_pkgconfig_dir())
    out = subprocess.run(
        [pkgconf, "--cflags", "--libs", "ds4rt"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    flags = out.stdout.split()
    inc = next(f[2:] for f in flags if f.startswith("-I"))
    lib = next(f[2:] for f in flags if f.startswith("-L"))
    assert os.path.samefile(inc, ds4rt.get_include())
    assert os.path.samefile(lib, ds4rt.get_library_dir())
    assert "-lds4rt" in flags and any(f.startswith("-Wl,-rpath,") for f in flags)
    version = subprocess.run(
        [pkgconf, "--modversion", "ds4rt"], env=env, capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == ds4rt.version()


@pytest.mark.parametrize("program", ["header_c99", "header_cxx"])
def test_header_compiles_links_and_runs_alone(c_programs, program):
    """Built by Meson against the installed package found through pkg-config: strict C99 /
    C++11, -pedantic, warnings as errors; the inline initialisers and the library agree."""
    exe = c_programs("native").path(program)
    subprocess.run([exe], check=True)


def test_gpu_entry_points_fail_cleanly_without_gpu():
    if "gpu=none" not in ds4rt.build_info():
        pytest.skip("GPU build")
    assert _core.gpu_device_count() == 0
    with pytest.raises(ds4rt.errors.BackendError, match="without a GPU backend"):
        _core.gpu_device_name(0)
    with pytest.raises(ds4rt.errors.BackendError):
        _core.gpu_expand_q8_0_f16(bytes(34))


@pytest.mark.gpu
def test_gpu_q8_0_expansion_matches_cpu_rounding():
    rng = np.random.default_rng(0)
    nb = 4099
    d = (rng.standard_normal(nb) * 0.01).astype(np.float16)
    q = rng.integers(-128, 128, size=(nb, 32), dtype=np.int8)
    blocks = np.zeros((nb, 34), dtype=np.uint8)
    blocks[:, :2] = d.view(np.uint8).reshape(nb, 2)
    blocks[:, 2:] = q.view(np.uint8)
    got = _core.gpu_expand_q8_0_f16(blocks.tobytes())
    want = (d.astype(np.float32)[:, None] * q.astype(np.float32)).astype(np.float16).ravel()
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
    assert _core.gpu_device_name(0).strip()


TEST_HOOKS = [
    "ds4rt_dequantize",
    "ds4rt_matmul_host",
    "ds4rt_quantize_activation",
    "ds4rt_cpu_isa",
    "ds4rt_cpu_isa_supported",
    "ds4rt_cpu_isa_set",
    "ds4rt_gpu_expand_q8_0_f16",
]


def test_public_header_carries_no_test_hooks(repo_root):
    """Single CPU ops, the kernel path choice and single GPU kernels are declared in the
    internal src/ds4rt_testing.h, not in the installed header; the library still exports them
    (for ds4rt.ops, the tests, and 1.0 binaries)."""
    import re

    public = open(os.path.join(ds4rt.get_include(), "ds4rt.h"), encoding="utf-8").read()
    testing = open(os.path.join(repo_root, "src", "ds4rt_testing.h"), encoding="utf-8").read()
    exported = set(exported_symbols(LIB))
    for name in TEST_HOOKS:
        assert not re.search(rf"\b{name}\s*\(", public), name
        assert re.search(rf"DS4RT_API [^;]*\b{name}\s*\(", testing), name
        assert name in exported
    assert not os.path.exists(os.path.join(ds4rt.get_include(), "ds4rt_testing.h"))
