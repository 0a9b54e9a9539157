"""Builds the C test programs of tests/meson.build in a build directory of their own and says
where they are. The build uses the same GPU option as the installed package (from
ds4rt.build_info()), so a GPU test program exercises the kernels the package was built with.

    build_dir = meson_programs.build()          # configured once per option set, then cached
    exe = build_dir / "gpu_test_matmul"

Environment: DS4RT_NV_ARCH (gpu=cuda, default sm_90), DS4RT_HIPCPU_INCLUDE (gpu=hipcpu, the
HIP-CPU include directory), DS4RT_TEST_BUILD_ROOT (default <repo>/build-tests).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import ds4rt

ROOT = Path(__file__).resolve().parent.parent


class MesonUnavailable(RuntimeError):
    pass


def installed_gpu_option() -> str:
    m = re.search(r"gpu=(\w+)", ds4rt.build_info())
    return m.group(1) if m else "none"


def _options(extra: dict[str, str] | None) -> dict[str, str]:
    opts = {"test_programs": "true", "gpu": installed_gpu_option()}
    if opts["gpu"] == "cuda":
        opts["nv_arch"] = os.environ.get("DS4RT_NV_ARCH", "sm_90")
    if opts["gpu"] == "hipcpu":
        inc = os.environ.get("DS4RT_HIPCPU_INCLUDE")
        if not inc:
            raise MesonUnavailable("gpu=hipcpu: set DS4RT_HIPCPU_INCLUDE (HIP-CPU include dir)")
        opts["hipcpu_include"] = inc
    opts.update(extra or {})
    return opts


def build(extra: dict[str, str] | None = None, targets: list[str] | None = None) -> Path:
    """Configures (once) and compiles the test programs; returns the build directory."""
    meson = shutil.which("meson")
    if meson is None:
        raise MesonUnavailable("meson is not installed")
    opts = _options(extra)
    key = hashlib.sha256(repr(sorted(opts.items())).encode()).hexdigest()[:12]
    root = Path(os.environ.get("DS4RT_TEST_BUILD_ROOT", ROOT / "build-tests"))
    bdir = root / key
    if not (bdir / "build.ninja").exists():
        args = [meson, "setup", str(bdir), str(ROOT)] + [f"-D{k}={v}" for k, v in opts.items()]
        subprocess.run(args, check=True, capture_output=True, text=True)
    subprocess.run(
        [meson, "compile", "-C", str(bdir), *(targets or [])],
        check=True,
        capture_output=True,
        text=True,
    )
    return bdir
