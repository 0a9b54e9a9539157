#!/usr/bin/env bash
# One call on the GPU machine: train the target and/or the DSpark drafter (docs/MODELS.md).
# Run from the repository root. Reads .traindata/ (made here by tools/train/prepare_data.py)
# and the gguf wheel in .trainwhl/; writes at most 6 files into $OUT:
#   target.gguf.part00, target.gguf.part01   the target, split in 15 MiB pieces ($OUT's limit)
#   support.gguf                             the DSpark support model
#   train.log                                environment + every JSON log line
#   metrics.json                             both steps' metrics and the files' sha256
#
#   STEPS="target drafter" BUDGET_TARGET_S=300 BUDGET_DRAFTER_S=190 tools/train/device_run.sh
#   STEPS=target  BUDGET_TARGET_S=480  tools/train/device_run.sh      # call 1
#   STEPS=drafter BUDGET_DRAFTER_S=470 tools/train/device_run.sh      # call 2: reads the target
#                                      from .trainrun/call1/target.gguf.part* (call 1's $OUT),
#                                      or from $TARGET where that is set
# DEVICE=cpu with small TARGET_ARGS / DRAFTER_ARGS runs the same path on a CPU (the check).
set -euo pipefail
OUT=${OUT:-/tmp/ds4rt-train-out}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-"target drafter"}
BUDGET_TARGET_S=${BUDGET_TARGET_S:-300}
BUDGET_DRAFTER_S=${BUDGET_DRAFTER_S:-190}
TARGET_ARGS=${TARGET_ARGS:-}
DRAFTER_ARGS=${DRAFTER_ARGS:-}
RUN=${RUN:-.trainrun}
mkdir -p "$OUT" "$RUN"
export PYTHONUNBUFFERED=1
LOG="$OUT/train.log"
if ! python3 -c "import gguf" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/ds4rt-site .trainwhl/*.whl
  export PYTHONPATH=/tmp/ds4rt-site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 - >>"$LOG" 2>&1 <<'EOF'
import json, platform, torch, gguf, numpy
info = {"event": "env", "python": platform.python_version(), "torch": torch.__version__,
        "numpy": numpy.__version__, "cuda": torch.cuda.is_available(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
print(json.dumps(info))
EOF
target=""
for step in $STEPS; do
  case "$step" in
  target)
    python3 tools/train/train_target.py --data .traindata --out "$RUN/target" \
      --budget-s "$BUDGET_TARGET_S" --device "$DEVICE" $TARGET_ARGS 2>&1 | tee -a "$LOG"
    target="$RUN/target/target.gguf"
    split -b 15m -d "$target" "$OUT/target.gguf.part"
    ;;
  drafter)
    if [ -z "$target" ] && [ -n "${TARGET:-}" ]; then
      target="$TARGET" # an existing target, e.g. the shipped one: a drafter-only run
    elif [ -z "$target" ]; then
      target="$RUN/call1/target.gguf"
      [ -f "$target" ] || cat "$RUN"/call1/target.gguf.part* > "$target"
    fi
    python3 tools/train/train_drafter.py --target "$target" --data .traindata \
      --out "$RUN/drafter" --budget-s "$BUDGET_DRAFTER_S" --device "$DEVICE" $DRAFTER_ARGS \
      2>&1 | tee -a "$LOG"
    cp "$RUN/drafter/support.gguf" "$OUT/support.gguf"
    ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
python3 - "$RUN" "$OUT" "$target" <<'EOF'
import hashlib, json, sys
from pathlib import Path
run, out, target = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
doc = {}
for step in ("target", "drafter"):
    m = run / step / "metrics.json"
    if m.exists():
        doc[step] = json.loads(m.read_text())
files = {p.name: p for p in sorted(out.iterdir()) if p.name.endswith((".gguf",)) or ".part" in p.name}
if target:
    files["target.gguf"] = Path(target)
doc["sha256"] = {n: hashlib.sha256(p.read_bytes()).hexdigest() for n, p in files.items()}
(out / "metrics.json").write_text(json.dumps(doc, indent=1) + "\n")
print(json.dumps(doc["sha256"], indent=1))
EOF
ls -la "$OUT"
