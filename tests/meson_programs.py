"""The C test programs of tests/meson.build, built by Meson for the tests that run them.

One build directory per configuration (native, sanitize, tsan, aarch64 cross), set up once and kept
between sessions under build-tests/ (DS4RT_TEST_BUILD_DIR overrides), keyed by the options and
by the installed package the hosts link, so a rebuild is incremental. `programs(config).path(t)`
compiles target t (and only what it needs) on first use and returns the executable's path.
Configurations the machine cannot build raise `Unavailable` with the reason, for a skip.

The `gpu` configuration builds the GPU test programs with the installed package's GPU option
(from ds4rt.build_info()): gpu=cuda takes DS4RT_NV_ARCH (default sm_90), gpu=hip DS4RT_HIP_ARCH,
gpu=hipcpu needs DS4RT_HIPCPU_INCLUDE (HIP-CPU's include directory; docs/GPU.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import ds4rt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = ["-Dtest_programs=true", "-Dpython=false", "-Dwerror=true", "-Dbuildtype=debugoptimized"]

CONFIGS = {
    "native": ["-Dtest_host_library=installed"],
    "sanitize": ["-Db_sanitize=address,undefined", "-Db_lundef=false"],
    "tsan": ["-Db_sanitize=thread", "-Db_lundef=false"],
    "aarch64": [
        "--cross-file",
        os.path.join(ROOT, "tests", "cross", "aarch64-linux-gnu.ini"),
    ],
}


class Unavailable(Exception):
    """A configuration or target this machine cannot build (the message says why)."""


def _gpu_options() -> list[str]:
    m = re.search(r"gpu=(\w+)", ds4rt.build_info())
    gpu = m.group(1) if m else "none"
    if gpu == "none":
        raise Unavailable("the installed ds4rt was built without a GPU backend (gpu=none)")
    opts = [f"-Dgpu={gpu}"]
    if gpu == "cuda":
        opts.append(f"-Dnv_arch={os.environ.get('DS4RT_NV_ARCH', 'sm_90')}")
    elif gpu == "hip" and os.environ.get("DS4RT_HIP_ARCH"):
        opts.append(f"-Dhip_arch={os.environ['DS4RT_HIP_ARCH']}")
    elif gpu == "hipcpu":
        inc = os.environ.get("DS4RT_HIPCPU_INCLUDE")
        if not inc:
            raise Unavailable("gpu=hipcpu: set DS4RT_HIPCPU_INCLUDE to HIP-CPU's include directory")
        opts.append(f"-Dhipcpu_include={inc}")
    return opts


def _tool(name: str) -> str:
    """meson and ninja from the running Python's environment first, then PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    found = here if os.access(here, os.X_OK) else shutil.which(name)
    if found is None:
        raise Unavailable(f"{name} not found (pip install meson ninja)")
    return found


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = os.pathsep.join(
        p for p in (ds4rt.get_pkgconfig_dir(), env.get("PKG_CONFIG_PATH", "")) if p
    )
    env["PATH"] = os.pathsep.join([os.path.dirname(_tool("ninja")), env.get("PATH", "")])
    return env


class Programs:
    def __init__(self, config: str):
        self.config = config
        self.options = BASE + (_gpu_options() if config == "gpu" else CONFIGS[config])
        key = json.dumps([self.options, ds4rt.get_pkgconfig_dir()]).encode()
        base = os.environ.get("DS4RT_TEST_BUILD_DIR") or os.path.join(ROOT, "build-tests")
        self.builddir = os.path.join(base, f"{config}-{hashlib.sha1(key).hexdigest()[:10]}")
        self._targets: dict[str, str] | None = None
        self._built: set[str] = set()

    def _run(self, args: list[str], what: str) -> None:
        r = subprocess.run(args, cwd=ROOT, env=_env(), capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{what} failed ({' '.join(args)}):\n{r.stdout[-6000:]}{r.stderr}")

    def setup(self) -> None:
        if self._targets is not None:
            return
        meson = _tool("meson")
        if not os.path.exists(os.path.join(self.builddir, "build.ninja")):
            self._run(
                [meson, "setup", self.builddir, *self.options], f"meson setup ({self.config})"
            )
        r = subprocess.run(
            [meson, "introspect", "--targets", self.builddir],
            env=_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        self._targets = {
            t["name"]: t["filename"][0] for t in json.loads(r.stdout) if t["type"] == "executable"
        }

    def path(self, target: str) -> str:
        self.setup()
        assert self._targets is not None
        if target not in self._targets:
            raise Unavailable(f"{target} is not defined in the {self.config} configuration")
        if target not in self._built:
            self._run(
                [_tool("meson"), "compile", "-C", self.builddir, target],
                f"meson compile {target} ({self.config})",
            )
            self._built.add(target)
        return self._targets[target]


_PROGRAMS: dict[str, Programs] = {}


def programs(config: str) -> Programs:
    """The build of `config`; Unavailable if this machine has not the tools it needs."""
    if config == "aarch64":
        missing = [t for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64") if not shutil.which(t)]
        if missing:
            raise Unavailable(
                f"needs {' and '.join(missing)} (apt-get install gcc-aarch64-linux-gnu qemu-user)"
            )
    if config not in _PROGRAMS:
        _PROGRAMS[config] = Programs(config)
    return _PROGRAMS[config]
