#!/usr/bin/env bash
# One call on the GPU machine (docs/MODELS.md, "Retraining the drafter"): retrain the DSpark
# support model against the shipped target (ds4rt/data/default-target.gguf), then measure its
# acceptance in ds4rt itself — the CPU backend, built on the machine's CPU while the GPU trains —
# next to the shipped support model's, on the same held-out prompts.
#
# Run from the repository root. Reads .traindata/{drafter.u16,val.u16,vocab.json,prompts.json}
# (made on the development machine by tools/train/prepare_data.py) and the wheels in .trainwhl/
# (gguf, meson, meson-python, pyproject-metadata; .trainwhl/opt/ a pure-Python Cython, used only
# where the machine has no Cython 3). Writes into $OUT:
#   support.gguf     the retrained support model
#   metrics.json     the training metrics, ds4rt's acceptance of the new support model (and of
#                    the shipped one with BASELINE=1) under "ds4rt", sha256 of support.gguf
#   train.log        every JSON log line of the training
#   build.log        ds4rt's build (the acceptance step says so when the build failed)
#
#   BUDGET_S=290 tools/train/device_drafter.sh        # ~6 min on the H200 machine
# BASELINE=1 measures the shipped support model in ds4rt too (another ~40 s).
# DEVICE=cpu with small DRAFTER_ARGS / EVAL_LIMIT runs the same path on a CPU (the check).
set -euo pipefail
OUT=${OUT:-/tmp/ds4rt-drafter-out}
DEVICE=${DEVICE:-cuda}
BUDGET_S=${BUDGET_S:-290}
BASELINE=${BASELINE:-0}
DRAFTER_ARGS=${DRAFTER_ARGS:-}
EVAL_TOKENS=${EVAL_TOKENS:-96}
EVAL_LIMIT=${EVAL_LIMIT:-0}
WORKERS=${WORKERS:-$(($(nproc) > 3 ? $(nproc) - 2 : 1))}
RUN=${RUN:-.trainrun/drafter}
SITE=${SITE:-/tmp/ds4rt-site}
BUILD=${BUILD:-/tmp/ds4rt-build}
TARGET=ds4rt/data/default-target.gguf
SHIPPED=ds4rt/data/default-support.gguf
mkdir -p "$OUT" "$RUN"
rm -f "$RUN"/accept_*.json
export PYTHONUNBUFFERED=1
started=$(date +%s)

# 1. the carried wheels
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" .trainwhl/*.whl
if ! python3 -c 'import sys, Cython; sys.exit(int(Cython.__version__.split(".")[0]) < 3)' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .trainwhl/opt/*.whl
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"

# 2. ds4rt for the acceptance step, built in the background (CPU) while the GPU trains;
#    nothing is built where ds4rt is importable already (the development machine's check;
#    FORCE_BUILD=1 builds anyway)
ds4rt_path=""
if [ "${FORCE_BUILD:-0}" != 1 ] && (cd / && python3 -c "import ds4rt") 2>/dev/null; then
  echo "ds4rt already installed: $(cd / && python3 -c 'import ds4rt; print(ds4rt.__file__)')" >"$OUT/build.log"
  echo 0 >"$RUN/build.rc"
else
  ds4rt_path="$RUN/ds4rt-py"
  rm -rf "$ds4rt_path" "$RUN/build.rc"
  (
    rc=0
    nice -n5 python3 -m pip install --no-build-isolation --no-deps --no-index \
      --target "$ds4rt_path" -Cbuild-dir="$BUILD" . >"$OUT/build.log" 2>&1 || rc=$?
    echo "$rc" >"$RUN/build.rc"
  ) &
fi

# 3. training (the GPU)
python3 tools/train/train_drafter.py --target "$TARGET" --data .traindata --out "$RUN" \
  --budget-s "$BUDGET_S" --device "$DEVICE" $DRAFTER_ARGS 2>&1 | tee "$OUT/train.log"
cp "$RUN/support.gguf" "$OUT/support.gguf"
trained=$(date +%s)

# 4. acceptance in ds4rt: the new and the shipped support model, same prompts and settings
wait
build_rc=$(cat "$RUN/build.rc")
if [ "$build_rc" = 0 ]; then
  which_list="new"
  [ "$BASELINE" = 1 ] && which_list="new shipped"
  for which in $which_list; do
    support="$OUT/support.gguf"
    [ "$which" = shipped ] && support="$SHIPPED"
    rc=0
    PYTHONPATH="${ds4rt_path:+$ds4rt_path:}$PYTHONPATH" python3 tools/train/accept_ds4rt.py \
      --target "$TARGET" --support "$support" --prompts .traindata/prompts.json \
      --tokens "$EVAL_TOKENS" --workers "$WORKERS" --limit "$EVAL_LIMIT" \
      >"$RUN/accept_$which.json" 2>>"$OUT/build.log" || rc=$?
    [ "$rc" = 0 ] || echo "{\"error\": \"accept_ds4rt.py exited $rc (see build.log)\"}" >"$RUN/accept_$which.json"
  done
else
  echo "ds4rt build failed (exit $build_rc): acceptance not measured in ds4rt, see build.log" >&2
fi

# 5. metrics.json
python3 - "$RUN" "$OUT" "$build_rc" "$started" "$trained" <<'EOF'
import hashlib, json, sys, time
from pathlib import Path
run, out, build_rc, started, trained = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], *map(int, sys.argv[4:])
doc = {"drafter": json.loads((run / "metrics.json").read_text())}
if build_rc == "0":
    doc["ds4rt"] = {w: json.loads((run / f"accept_{w}.json").read_text())
                    for w in ("new", "shipped") if (run / f"accept_{w}.json").exists()}
else:
    doc["ds4rt"] = {"error": f"ds4rt build failed (exit {build_rc}), see build.log"}
doc["drafter_call_seconds"] = {"training": trained - started, "total": int(time.time()) - started}
doc["sha256"] = {"support.gguf": hashlib.sha256((out / "support.gguf").read_bytes()).hexdigest()}
(out / "metrics.json").write_text(json.dumps(doc, indent=1) + "\n")
for w, r in doc["ds4rt"].items():
    if isinstance(r, dict) and "always_threshold0" in r:
        a, d = r["always_threshold0"], r["defaults"]
        print(f"ds4rt {w}: committed/cycle {a['committed_per_cycle']:.3f} (always, threshold 0), "
              f"{d['committed_per_cycle']:.3f} (defaults)")
EOF
ls -la "$OUT"
