#!/usr/bin/env bash
# gpu_session.sh - one device call that measures what the last sessions built (docs/PERFORMANCE.md,
# "HC pre in one launch and the verify-side forms, without a device"): the CUDA build, the GPU
# suite's float, HC and end-to-end tests (test_gpu_backend's OFF_BY_DEFAULT runs every knob), an
# end-to-end A/B of the knobs on the 4-layer real-width file, the decode and verify(8) profiles, and, on the same
# machine's CPU, ds4rt against llama.cpp with and without the avx512-vbmi path. Each phase's
# results are packed into $OUT as soon as it ends (res_tests.tgz, res_e2e.tgz), so a call cut
# short still returns what it measured; log.txt has the summary lines.
#
#   run: bash tools/gpu_session.sh    carry: .trainwhl .big .peer/llama.cpp-0c1e570-cpu-cuda.tar.xz
#
# .big/big4.plan.json comes from tools/make_big_model.py, the llama.cpp tarball from
# tools/make_peer_tarball.sh. E2E_SETTINGS replaces the knobs' A/B list (tools/gpu_kernel_ab.sh's
# format). Budget: ~45 s build, up to 240 s tests, ~110 s A/B, ~70 s profiles, the rest (if 90 s
# are left) the CPU peer; a second call can run it alone (tools/bench_cpu_peer.py, as below).
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the results}
L=$OUT/log.txt
W=/tmp/ds4rt-kernel-ab
E2E_SETTINGS=${E2E_SETTINGS:-"default: fs1n16:DS4RT_GPU_FS1=16 hcrms:DS4RT_GPU_HC_RMS_IN_MIX=1 raw:DS4RT_GPU_RAW_FLOAT=1 pre1:DS4RT_GPU_HC_PRE1=1 pre1raw:DS4RT_GPU_HC_PRE1=1,DS4RT_GPU_RAW_FLOAT=1 qmrows:DS4RT_GPU_QM_MIN_ROWS=4096 all:DS4RT_GPU_HC_PRE1=1,DS4RT_GPU_RAW_FLOAT=1,DS4RT_GPU_QM_MIN_ROWS=4096,DS4RT_GPU_FS1=16"}
mkdir -p /tmp/peer "$OUT/r" "$OUT/e"

# llama.cpp's CPU llama-bench, built beside everything else (-DGGML_NATIVE=ON: this CPU)
tar -C /tmp/peer -xJf .peer/llama.cpp-*-cpu-cuda.tar.xz
(cd /tmp/peer && cmake -S llama.cpp -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
  -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF && nice -n 10 ninja -C build-cpu -j6 llama-bench
 echo $? >/tmp/peer/cpu.rc) >/tmp/peer/cpu.log 2>&1 &

STEPS=build OUT=$OUT/r bash tools/gpu_kernel_ab.sh | tee -a "$L"
export PATH=$W/site/bin:/usr/local/cuda/bin:$PATH PYTHONPATH=$W/site DS4RT_NV_ARCH=sm_90 \
  DS4RT_TEST_BUILD_DIR=$W/build-tests MAKEFLAGS=-j10
(python3 tools/make_big_model.py fill --plan .big/big4.plan.json --out /tmp/big4.tmp >"$OUT/r/fill.log" 2>&1 &&
  mv /tmp/big4.tmp /tmp/big4.gguf) &
P="python3 -m pytest -q -rs -p no:cacheprovider"
timeout 240 $P tests/test_gpu_mm.py tests/test_gpu_ops.py tests/test_gpu_backend.py \
  -k "F16 or F32 or BF16 or raw_float or several_tokens or default_reported or ops_match or hc_rms or one_launch or test_gpu_backend" \
  >"$OUT/r/pt.log" 2>&1
echo "tests: $? $(tail -1 "$OUT/r/pt.log") [$SECONDS s]" | tee -a "$L"
(cd "$OUT" && tar czf res_tests.tgz r && rm -rf r)

for _ in $(seq 1 120); do [ -f /tmp/big4.gguf ] && break; sleep 1; done
STEPS=e2e E2E_ROUNDS=3 DEADLINE_S=110 E2E_SETTINGS="$E2E_SETTINGS" OUT=$OUT/e bash tools/gpu_kernel_ab.sh | tee -a "$L"
(cd "$OUT" && tar czf res_e2e.tgz e)
for n in 1 8; do
  timeout 40 ncu --clock-control none --profile-from-start off --csv \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
    python3 tools/profile_gpu_kernels.py run --target /tmp/big4.gguf --n $n >"$OUT/e/prof$n.csv" 2>"$OUT/e/prof$n.err"
  python3 tools/profile_gpu_kernels.py summarize "$OUT/e/prof$n.csv" --json "$OUT/e/kern$n.json" >"$OUT/e/kern$n.txt"
  head -14 "$OUT/e/kern$n.txt" | tee -a "$L"
done
(cd "$OUT" && tar czf res_e2e.tgz e)

for _ in $(seq 1 40); do [ -f /tmp/peer/cpu.rc ] && break; sleep 2; done
lscpu | grep -i "model name\|^flags" | cut -c1-400 >"$OUT/e/cpu.txt"
left=$((570 - SECONDS))
if [ "$(cat /tmp/peer/cpu.rc 2>/dev/null)" = 0 ] && [ $left -gt 90 ]; then
  python3 tools/bench_cpu_peer.py --backend cpu --llama-bench /tmp/peer/build-cpu/bin/llama-bench \
    --files /tmp/big4.gguf --threads 16,8 --gen 16 --prompts 2,4,8,16,128 --reps 2 --rounds 2 \
    --budget-s $((left - 60)) --variant vnni:DS4RT_CPU_ISA=avx512-vnni --out "$OUT/e/cpu_peer.json" \
    >"$OUT/e/cpu_peer.log" 2>&1
  echo "cpu peer: $? [$SECONDS s]" | tee -a "$L"
  tail -25 "$OUT/e/cpu_peer.log" | tee -a "$L"
else
  echo "cpu peer skipped: build rc $(cat /tmp/peer/cpu.rc 2>/dev/null), $left s left" | tee -a "$L"
  tail -5 /tmp/peer/cpu.log | tee -a "$L"
fi
cd "$OUT" && tar czf res_e2e.tgz e && rm -rf e
echo "total $SECONDS s" | tee -a "$L"
