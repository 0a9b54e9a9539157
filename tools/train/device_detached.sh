#!/usr/bin/env bash
# The whole training (tools/train/device_run.sh: target, then drafter) as one detached job on
# the GPU machine, so that it can run longer than one device call (10 minutes): `start`
# launches it in its own process session (it outlives the call) and `wait` calls, made
# back to back while the machine stays warm, follow it and collect its files (docs/MODELS.md,
# "Training").
#
#   tools/train/device_detached.sh start [WAIT_S]   # copy, launch, then follow for WAIT_S
#   tools/train/device_detached.sh wait  [WAIT_S]   # follow; once it ended, its files go to $OUT
#
# Run from the repository root. `start` reads $DATA (default .traindata/: train.u16, or
# train.u16.xz to travel under the 64 MiB a call may carry; val.u16, vocab.json, prompts.json,
# meta.json) and .trainwhl/ (the gguf wheel), copies them with tools/ into $WORK, and passes STEPS, BUDGET_TARGET_S,
# BUDGET_DRAFTER_S, TARGET_ARGS, DRAFTER_ARGS and TARGET through to device_run.sh. The job works only
# in $WORK, so the working tree that each call re-sends cannot change under it.
#
# With MEASURE=1 the job also builds ds4rt with the CUDA backend from a copy of the checkout
# (on the CPU, while the GPU trains; the build tools come as wheels in .trainwhl/build/) and,
# once both models are trained, measures the new pair in ds4rt (tools/train/eval_ds4rt.py):
# DSpark acceptance on the held-out prompts, and plain / DSpark-adaptive / DSpark-always speed
# on the GPU backend and on the CPU backend with all cores: eval_cuda.json, eval_cpu.json
# (EVAL_BACKENDS="cuda cpu" by default; name one to measure only there).
set -euo pipefail
WORK=${WORK:-/tmp/ds4rt-detached}
DATA=${DATA:-.traindata}
verb=${1:?usage: device_detached.sh start|wait [WAIT_S]}
wait_s=${2:-540}

follow() {
  local until=$(($(date +%s) + wait_s))
  while [ ! -f "$WORK/rc" ] && [ "$(date +%s)" -lt "$until" ]; do sleep 5; done
  grep -E '"event": "(schedule|compiled|compile_failed|eval|eval set|pool|done)"|"step": [0-9]*[05]00,' \
    "$WORK/out/train.log" 2>/dev/null | cut -c1-600 | tail -n 30 || true
  tail -n 5 "$WORK/job.log" || true
  if [ -f "$WORK/rc" ]; then
    echo "job ended: exit $(cat "$WORK/rc")"
    if [ -n "${OUT:-}" ]; then
      # at most 8 files come back from a call: the models and metrics.json as they are (what
      # tools/train/ship.py reads), every log and measurement in one archive
      cp "$WORK"/out/*.gguf* "$WORK/out/metrics.json" "$OUT"/ 2>/dev/null || true
      cp "$WORK/job.log" "$WORK/out/"
      tar -C "$WORK/out" -czf "$OUT/logs.tar.gz" --exclude='*.gguf*' --exclude=metrics.json .
    fi
    ls -la "${OUT:-$WORK/out}"
    return "$(cat "$WORK/rc")"
  fi
  echo "job still running: call 'wait' again within the machine's warm time"
}

case "$verb" in
start)
  [ ! -e "$WORK" ] || { echo "$WORK exists: a job was started already" >&2; exit 2; }
  mkdir -p "$WORK/.traindata" "$WORK/out"
  cp -r tools "$WORK/tools"
  cp -r .trainwhl "$WORK/.trainwhl"
  # the shipped pair, for a drafter-only run (TARGET=data/default-target.gguf, and
  # DRAFTER_ARGS="--init-support data/default-support.gguf" to go on from the shipped drafter)
  mkdir -p "$WORK/data" && cp ds4rt/data/*.gguf "$WORK/data/"
  for f in val.u16 vocab.json prompts.json meta.json; do cp "$DATA/$f" "$WORK/.traindata/"; done
  # windows generated beforehand on a CPU (gen_windows.py; DRAFTER_ARGS="--gen-file .traindata/windows.npz")
  if [ -f "$DATA/windows.npz" ]; then cp "$DATA/windows.npz" "$WORK/.traindata/"; fi
  if [ -f "$DATA/train.u16" ]; then
    cp "$DATA/train.u16" "$WORK/.traindata/"
  else
    xz -dc "$DATA/train.u16.xz" >"$WORK/.traindata/train.u16"
  fi
  # the drafter's prompt source: the first 3 M tokens of the training stream (prepare_data.py)
  head -c 6000000 "$WORK/.traindata/train.u16" >"$WORK/.traindata/drafter.u16"
  if [ "${MEASURE:-0}" = 1 ]; then
    mkdir -p "$WORK/src" "$WORK/.trainwhl-build"
    tar --exclude=./.trainpack --exclude=./.trainwhl --exclude=./.traindata --exclude=./.git \
      --exclude='./build*' --exclude=./.venv -cf - . | tar -C "$WORK/src" -xf -
    cp .trainwhl/build/*.whl "$WORK/.trainwhl-build/"
  fi
  (
    cd "$WORK"
    export OUT="$WORK/out" RUN="$WORK/run" MEASURE="${MEASURE:-0}"
    setsid bash tools/train/device_detached.sh job </dev/null >job.log 2>&1 &
  )
  echo "started in $WORK"
  follow
  ;;
wait) follow ;;
job)
  # inside $WORK, detached: the build (MEASURE=1) beside the training, then the measurement
  site="$WORK/site" jobs=$(($(nproc) > 4 ? $(nproc) - 4 : 1))
  if [ "$MEASURE" = 1 ]; then
    (
      python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
        .trainwhl-build/*.whl &&
        PATH="$site/bin:/usr/local/cuda/bin:$PATH" PYTHONPATH="$site" nice -n5 python3 -m pip \
          install --no-index --no-deps --no-build-isolation --target "$WORK/ds4rt-py" \
          -Cbuild-dir="$WORK/build-cuda" -Csetup-args=-Dgpu=cuda -Csetup-args=-Dnv_arch=sm_90 \
          -Ccompile-args=-j"$jobs" "$WORK/src"
      echo $? >build.rc
    ) >out/build.log 2>&1 &
  fi
  rc=0
  bash tools/train/device_run.sh || rc=$?
  if [ "$MEASURE" = 1 ] && [ "$rc" = 0 ]; then
    wait
    if [ "$(cat build.rc)" = 0 ]; then
      export PYTHONPATH="$WORK/ds4rt-py"
      pair=(--target "${TARGET:-run/target/target.gguf}" --support out/support.gguf --data .traindata)
      skip=(tokenizer perplexity agreement samples)
      if [[ " ${EVAL_BACKENDS:-cuda cpu} " == *" cuda "* ]]; then
        python3 tools/train/eval_ds4rt.py "${pair[@]}" --backend cuda --threads "$(nproc)" \
          --workers "$jobs" --skip "${skip[@]}" >out/eval_cuda.json 2>>out/build.log || rc=$?
      fi
      if [[ " ${EVAL_BACKENDS:-cuda cpu} " == *" cpu "* ]]; then
        python3 tools/train/eval_ds4rt.py "${pair[@]}" --backend cpu --threads "$(nproc)" \
          --repeats 2 --skip "${skip[@]}" acceptance >out/eval_cpu.json 2>>out/build.log || rc=$?
      fi
    else
      echo "ds4rt's CUDA build failed: no measurement (out/build.log)"
      rc=3
    fi
  fi
  echo "$rc" >rc
  ;;
*) echo "unknown verb $verb" >&2; exit 2 ;;
esac
