#!/usr/bin/env bash
# A/B of the expert-stack product forms on the GPU machine, in one device call (docs/GPU.md,
# "Matrix products": DS4RT_GPU_QS_IQ2=old|new, DS4RT_GPU_QS_Q2K=1|old|0). Every setting runs in
# a fresh process, the settings alternated round by round; results as JSON under $OUT.
#
#   OUT=DIR bash tools/gpu_kernel_ab.sh            # from the repository root, on the device
#   tools/gpu_kernel_ab.sh base REV                # here: .big/base.tar.xz, then on the device
#   STEPS="build base e2e" E2E_SETTINGS="new: base:PYTHONPATH=/tmp/ds4rt-kernel-ab/basesite" \
#     OUT=DIR bash tools/gpu_kernel_ab.sh          # this tree against REV, alternated
#
# Carry the ignored folders .trainwhl (the build tools as wheels, .trainwhl/build/*.whl, and the
# gguf wheel) and .big (big4.plan.json, for the end-to-end step). Steps (STEPS, default
# "build test mm e2e"; each later step needs "build"):
#   build  ds4rt with -Dgpu=cuda installed into $WORK/site (as tools/gpu_detached.sh does);
#   test   tests/test_gpu_mm.py (bitwise against the CPU, every form: the test runs test_mm
#          under each setting) -> $OUT/pytest-mm.log; it builds test_mm in $WORK/build-tests;
#   mm     bench_mm of the IQ2_XXS gate/up shape (256 experts of 2048 x 4096) and the Q2_K down
#          shape (4096 x 2048), n = 1, 2, 4, 8, k = 6, ROUNDS rounds (default 2) of the settings
#          -> $OUT/mm_<setting>_r<round>.json (each JSON's "forms" says what ran);
#   base   with .big/base.tar.xz (made here by `tools/gpu_kernel_ab.sh base REV`: REV's tree by
#          `git archive`, without the embedded GGUFs, which are copied from this checkout on the
#          device): that build installed into $WORK/basesite beside the tree's, so an e2e
#          setting "base:PYTHONPATH=$WORK/basesite" measures the earlier build in the same call
#          (a kernel change end to end; docs/PERFORMANCE.md "Branches and shorter chains");
#   e2e    when .big/big4.plan.json is there: the 4-layer real-width file
#          (tools/make_big_model.py fill), then tools/bench_gpu.py decode and verify 2, 4, 8
#          (graphs on, cache off) per setting, E2E_ROUNDS rounds (default 1)
#          -> $OUT/e2e_<setting>_r<round>.json ("device" carries the forms line).
# Budget: about 5 minutes with the defaults (two builds ~3 min, the rest ~2); each step checks
# DEADLINE_S (default 540 s from the start) and is skipped when less than its share is left.
set -uo pipefail
if [ "${1:-}" = base ]; then # here, not on the device: the tarball of an earlier revision
  rev=${2:?usage: tools/gpu_kernel_ab.sh base REV}
  mkdir -p .big
  git archive --format=tar "$rev" | tar --delete ds4rt/data/default-target.gguf ds4rt/data/default-support.gguf |
    xz -6 >.big/base.tar.xz && echo ".big/base.tar.xz: $rev ($(git rev-parse --short "$rev"))"
  exit $?
fi
OUT=${OUT:?set OUT to the folder for the results}
ROOT=$(pwd)
WORK=${WORK:-/tmp/ds4rt-kernel-ab}
STEPS=${STEPS:-build test mm e2e}
ROUNDS=${ROUNDS:-2}
E2E_ROUNDS=${E2E_ROUNDS:-1}
DEADLINE_S=${DEADLINE_S:-540}
jobs=$(nproc)
t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0))s] $*" | tee -a "$OUT/ab.log"; }
left() { echo $((DEADLINE_S - ($(date +%s) - t0))); }
want() { [[ " $STEPS " == *" $1 "* ]]; }
mkdir -p "$OUT" "$WORK"
: >"$OUT/ab.log"

# settings: name, then the environment (the unset knobs are removed from the environment; an
# empty one is the library's defaults). MM_SETTINGS / E2E_SETTINGS (space-separated) replace them.
SETTINGS_MM=("default:"
             "iq2new_q2k0:DS4RT_GPU_QS_IQ2=new,DS4RT_GPU_QS_Q2K=0"
             "iq2old_q2kold:DS4RT_GPU_QS_IQ2=old,DS4RT_GPU_QS_Q2K=old")
SETTINGS_E2E=("default:" "q2k_mmq:DS4RT_GPU_QS_Q2K=0")
[ -z "${MM_SETTINGS:-}" ] || read -r -a SETTINGS_MM <<<"$MM_SETTINGS"
[ -z "${E2E_SETTINGS:-}" ] || read -r -a SETTINGS_E2E <<<"$E2E_SETTINGS"
# runs "$@" with setting $1's environment
with_setting() {
  local spec=$1
  shift
  local -a envs=()
  [ -z "${spec#*:}" ] || IFS=, read -r -a envs <<<"${spec#*:}"
  env -u DS4RT_GPU_QS_IQ2 -u DS4RT_GPU_QS_Q2K -u DS4RT_GPU_QS_MINB ${envs[@]+"${envs[@]}"} "$@"
}

site=$WORK/site
export PATH="$site/bin:/usr/local/cuda/bin:$PATH" PYTHONPATH="$site"
export DS4RT_NV_ARCH=sm_90 DS4RT_TEST_BUILD_DIR=$WORK/build-tests MAKEFLAGS=-j$jobs

if want build; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
    .trainwhl/build/*.whl .trainwhl/gguf-*.whl >"$OUT/install.log" 2>&1
  python3 -m pip install --no-index --no-deps --no-build-isolation --target "$site" \
    -Cbuild-dir="$WORK/build-cuda" -Csetup-args=-Dgpu=cuda -Csetup-args=-Dnv_arch=sm_90 \
    -Ccompile-args=-j"$jobs" "$ROOT" >>"$OUT/install.log" 2>&1
  rc=$?
  say "ds4rt CUDA build: exit $rc"
  [ $rc = 0 ] || exit 3
  (cd /tmp && python3 -c "import ds4rt; print(ds4rt.build_info())") | tee -a "$OUT/ab.log"
fi

if want base; then
  if [ ! -f .big/base.tar.xz ]; then
    say "base: no .big/base.tar.xz carried, skipped"
  else
    rm -rf "$WORK/base" && mkdir -p "$WORK/base" && tar -C "$WORK/base" -xJf .big/base.tar.xz &&
      cp ds4rt/data/*.gguf "$WORK/base/ds4rt/data/" &&
      python3 -m pip install --no-index --no-deps --no-build-isolation --target "$WORK/basesite" \
        -Cbuild-dir="$WORK/build-base" -Csetup-args=-Dgpu=cuda -Csetup-args=-Dnv_arch=sm_90 \
        -Ccompile-args=-j"$jobs" "$WORK/base" >>"$OUT/install.log" 2>&1
    say "base build (PYTHONPATH=$WORK/basesite): exit $?"
  fi
fi

if want test; then
  timeout $(($(left) > 300 ? 300 : $(left))) python3 -m pytest -q -rs -p no:cacheprovider \
    tests/test_gpu_mm.py >"$OUT/pytest-mm.log" 2>&1
  say "tests/test_gpu_mm.py: exit $? ($(tail -n 1 "$OUT/pytest-mm.log"))"
fi

# the test programs' build of the installed package (tests/meson_programs.py), bench_mm in it
bench_mm=
if want mm; then
  bench_mm=$(cd tests && python3 -c "import meson_programs as m; print(m.programs('gpu').path('bench_mm'))" \
    2>>"$OUT/ab.log" | tail -n 1)
  [ -x "$bench_mm" ] || { say "bench_mm not built"; bench_mm=; }
fi
if [ -n "$bench_mm" ]; then
  for r in $(seq 1 "$ROUNDS"); do
    for s in "${SETTINGS_MM[@]}"; do
      [ "$(left)" -gt 150 ] || { say "mm: deadline, stopping"; break 2; }
      name=${s%%:*}
      with_setting "$s" "$bench_mm" --types IQ2_XXS --ns 1,2,4,8 --k 6 \
        >"$OUT/mm_${name}_iq2_r$r.json" 2>>"$OUT/ab.log"
      with_setting "$s" "$bench_mm" --types Q2_K --ns 1,2,4,8 --k 6 --erows 4096 --ecols 2048 \
        >"$OUT/mm_${name}_q2k_r$r.json" 2>>"$OUT/ab.log"
      say "mm $name round $r: $(python3 - "$OUT/mm_${name}_iq2_r$r.json" "$OUT/mm_${name}_q2k_r$r.json" <<'EOF'
import json, sys
out = []
for p in sys.argv[1:]:
    try:
        d = json.load(open(p))
    except Exception as e:  # noqa: BLE001
        out.append(f"{p}: {e}")
        continue
    out.append(" ".join(f"{x['type']} n={x['n']} {x['us']:.1f}us" for x in d["results"]
                        if x["op"] == "experts"))
print("; ".join(out))
EOF
)"
    done
  done
fi

if want e2e; then
  if [ ! -f .big/big4.plan.json ]; then
    say "e2e: no .big/big4.plan.json carried, skipped"
  elif [ "$(left)" -lt 120 ]; then
    say "e2e: deadline, skipped"
  else
    [ -f /tmp/big4.gguf ] || python3 tools/make_big_model.py fill --plan .big/big4.plan.json \
      --out /tmp/big4.gguf >>"$OUT/ab.log" 2>&1
    say "big4 file: $(ls -la /tmp/big4.gguf 2>&1)"
    for r in $(seq 1 "$E2E_ROUNDS"); do
      for s in "${SETTINGS_E2E[@]}"; do
        [ "$(left)" -gt 45 ] || { say "e2e: deadline, stopping"; break 2; }
        name=${s%%:*}
        with_setting "$s" python3 tools/bench_gpu.py --target /tmp/big4.gguf --backends cuda \
          --cache off --graphs 1 --sizes 1,2,4,8 --prefill 16 --repeats 3 --budget-s 8 \
          --out "$OUT/e2e_${name}_r$r.json" >/dev/null 2>>"$OUT/ab.log"
        say "e2e $name round $r: exit $? $(python3 - "$OUT/e2e_${name}_r$r.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["results"][0]
    print("us per pass:", " ".join(f"n={v['n']} {v['us_per_pass']:.0f}" for v in r["verify"]))
except Exception as e:  # noqa: BLE001
    print(e)
EOF
)"
      done
    done
  fi
fi
say "done"
