"""The package, the shared library and the public header as installed."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import ds4rt
from ds4rt import _core


def test_version_and_api():
    assert ds4rt.api_version() == 1
    assert ds4rt.__version__ == ds4rt.version()
    assert ds4rt.version() in ds4rt.build_info()


def test_installed_header_and_library():
    assert os.path.isfile(os.path.join(ds4rt.get_include(), "ds4rt.h"))
    assert os.path.isfile(os.path.join(ds4rt.get_library_dir(), "libds4rt.so"))


def test_only_ds4rt_symbols_exported():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not available")
    lib = os.path.join(ds4rt.get_library_dir(), "libds4rt.so")
    out = subprocess.run(
        [nm, "-D", "--defined-only", lib], capture_output=True, text=True, check=True
    ).stdout
    names = [ln.split()[-1] for ln in out.splitlines() if ln.strip()]
    assert names, "libds4rt exports nothing"
    leaked = [n for n in names if not n.startswith("ds4rt_")]
    assert leaked == []


def test_header_compiles_as_c99_and_cpp(tmp_path):
    src = tmp_path / "h.c"
    src.write_text(
        '#include "ds4rt.h"\n'
        "int main(void) { return ds4rt_api_version() == DS4RT_API_VERSION ? 0 : 1; }\n"
    )
    for compiler, std in (("cc", "-std=c99"), ("c++", "-std=c++11")):
        exe = shutil.which(compiler)
        if exe is None:
            pytest.skip(f"{compiler} not available")
        flags = ["-x", "c++"] if compiler == "c++" else []
        subprocess.run(
            [
                exe,
                *flags,
                std,
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                "-I",
                ds4rt.get_include(),
                "-c",
                str(src),
                "-o",
                str(tmp_path / "h.o"),
            ],
            check=True,
        )


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
