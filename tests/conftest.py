"""Shared pytest setup.

Tests run against the *installed* package (`pip install .`), never the source tree: the source
folder `ds4rt/` holds no compiled extension, so it is removed from sys.path here if pytest was
started in a way that put the repository root there (e.g. `python -m pytest`).
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != ROOT]

import pytest  # noqa: E402

import ds4rt  # noqa: E402

if os.path.dirname(os.path.abspath(ds4rt.__file__)) == os.path.join(ROOT, "ds4rt"):
    raise RuntimeError("tests must import the installed ds4rt; run `pip install .` first")


def _gpu_count() -> int:
    try:
        return ds4rt._core.gpu_device_count()
    except ds4rt.Ds4rtError:
        return 0


GPU_COUNT = _gpu_count()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU build of ds4rt and a visible GPU")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")


def pytest_collection_modifyitems(config, items):
    if GPU_COUNT > 0:
        return
    why = f"no GPU visible to this ds4rt build ({ds4rt.build_info()})"
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def repo_root() -> str:
    return ROOT


@pytest.fixture(scope="session")
def c_programs():
    """programs(config) -> the Meson build of tests/meson.build for `config` ("native",
    "sanitize", "aarch64"); .path(target) compiles a program and returns its path. A
    configuration this machine cannot build skips the test with the reason."""
    import meson_programs

    def get(config: str = "native") -> meson_programs.Programs:
        try:
            return meson_programs.programs(config)
        except meson_programs.Unavailable as e:
            pytest.skip(str(e))

    return get
