#!/usr/bin/env python3
"""Install llama.cpp b11739 (the `llama-cpp-py-sync==0.11739` CPU wheel) as a test oracle.

    python tools/oracle/setup_llama.py [--dir DIR] [--wheel FILE] [--force]

Idempotent. What it does (each step is printed):
  1. `pip install --no-deps --target DIR/site llama-cpp-py-sync==0.11739` (or the given wheel);
  2. on glibc < 2.38 (e.g. Debian 12): marks the GLIBC_2.38 version requirement weak in DIR's
     copies of the wheel's libraries (tools/oracle/elf_verneed.py) and builds
     tools/oracle/isoc23_shim.c (a Meson project: tools/oracle/meson.build) to
     DIR/libisoc23_shim.so, which defines the four __isoc23_* functions those libraries import
     (forwarded to the C99 versions; no numerical code changes);
  3. checks the result in a fresh interpreter (loads libllama and prints its system info);
  4. writes DIR/state.json, which tests/oracle/llama_oracle.py reads.

DIR defaults to $DS4RT_ORACLE_DIR, else <the running Python's sys.prefix>/ds4rt-oracle (inside the
virtual environment). See docs/ORACLES.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import elf_verneed  # noqa: E402

PACKAGE = "llama-cpp-py-sync"
VERSION = "0.11739"
LLAMA_COMMIT = "0ce8cd11416c8840498e6701bcbe39ad4b858c2b"
STATE_VERSION = 1


def default_dir() -> Path:
    env = os.environ.get("DS4RT_ORACLE_DIR")
    return Path(env) if env else Path(sys.prefix) / "ds4rt-oracle"


def glibc_version() -> tuple[int, int]:
    name, ver = platform.libc_ver()
    if name != "glibc" or not ver:
        return (0, 0)
    major, minor = ver.split(".")[:2]
    return int(major), int(minor)


def log(msg: str) -> None:
    print(f"[setup_llama] {msg}", flush=True)


CHECK = """
import ctypes, json, sys
state = json.load(open(sys.argv[1]))
sys.path.insert(0, state["site"])
if state.get("shim"):
    ctypes.CDLL(state["shim"], mode=ctypes.RTLD_GLOBAL)
from llama_cpp_py_sync import _cffi_bindings as b
lib = b.get_lib()
lib.llama_backend_init()
print(b.ffi.string(lib.llama_print_system_info()).decode())
"""


def install(target: Path, wheel: str | None) -> None:
    site = target / "site"
    if site.exists():
        shutil.rmtree(site)
    spec = wheel if wheel else f"{PACKAGE}=={VERSION}"
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), spec]
    log("running: " + " ".join(cmd))
    subprocess.run(cmd, check=True)


def patch_and_shim(target: Path) -> tuple[list[str], str | None]:
    pkg = target / "site" / "llama_cpp_py_sync"
    if glibc_version() >= (2, 38):
        log(f"glibc {'.'.join(map(str, glibc_version()))} >= 2.38: no patch or shim needed")
        return [], None
    patched = []
    for lib in sorted(pkg.glob("lib*.so*")):
        n = elf_verneed.mark_weak(lib, "GLIBC_2.38")
        if n:
            patched.append(lib.name)
            log(f"marked GLIBC_2.38 weak in {lib.name} ({n} entry)")
    # the shim is a Meson project of its own (tools/oracle/meson.build)
    meson = Path(sys.executable).parent / "meson"
    meson_cmd = str(meson) if meson.exists() else (shutil.which("meson") or "meson")
    build = target / "shim-build"
    shutil.rmtree(build, ignore_errors=True)
    for cmd in (
        [meson_cmd, "setup", str(build), str(HERE)],
        [meson_cmd, "compile", "-C", str(build)],
    ):
        log("running: " + " ".join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    shim = target / "libisoc23_shim.so"
    shutil.copyfile(build / "libisoc23_shim.so", shim)
    return patched, str(shim)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dir", type=Path, default=default_dir())
    ap.add_argument("--wheel", help="install this wheel file instead of downloading from PyPI")
    ap.add_argument("--force", action="store_true", help="reinstall even if already set up")
    args = ap.parse_args(argv)
    target = args.dir.resolve()
    state_file = target / "state.json"

    if state_file.exists() and not args.force:
        state = json.loads(state_file.read_text())
        ok = state.get("state_version") == STATE_VERSION and state.get("version") == VERSION
        ok = ok and Path(state["site"]).is_dir()
        ok = ok and (not state["shim"] or Path(state["shim"]).exists())
        if ok:
            commit = state["llama_commit"][:8]
            log(f"already set up in {target} (llama.cpp {commit}); --force redoes it")
            return 0
        log("existing state is stale; reinstalling")

    target.mkdir(parents=True, exist_ok=True)
    if state_file.exists():
        state_file.unlink()
    install(target, args.wheel)
    patched, shim = patch_and_shim(target)
    state = {
        "state_version": STATE_VERSION,
        "package": PACKAGE,
        "version": VERSION,
        "llama_commit": LLAMA_COMMIT,
        "site": str(target / "site"),
        "shim": shim,
        "patched": patched,
        "glibc": ".".join(map(str, glibc_version())),
    }
    tmp_state = target / "state.json.tmp"
    tmp_state.write_text(json.dumps(state, indent=1) + "\n")
    log("checking that libllama loads in a fresh interpreter")
    r = subprocess.run(
        [sys.executable, "-c", CHECK, str(tmp_state)], capture_output=True, text=True
    )
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit("libllama failed to load; see above")
    log("libllama loads: " + r.stdout.strip().splitlines()[-1])
    tmp_state.replace(state_file)
    log(f"done: {state_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
