#!/usr/bin/env python3
"""Step 4: make the device's files the embedded default pair.

    python tools/train/ship.py DIR [DIR2]

DIR (and DIR2, for a run in two calls) hold what tools/train/device_run.sh left in $OUT:
target.gguf.part* (or target.gguf), support.gguf, metrics.json. The target is reassembled, every
file is checked against the sha256 the device computed, ds4rt must load the pair (the DSpark
loader's self-test included), and then the files are copied to ds4rt/data/default-target.gguf
and default-support.gguf, their sums to ds4rt/data/SHA256SUMS and the device metrics to
docs/bench/default_model_training.json.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "ds4rt" / "data"


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def main(argv=None) -> int:
    dirs = [Path(a) for a in (argv if argv is not None else sys.argv[1:])]
    if not dirs:
        raise SystemExit(__doc__)
    metrics, sums = {}, {}
    for d in dirs:
        m = json.loads((d / "metrics.json").read_text())
        sums.update(m.pop("sha256", {}))
        metrics.update(m)
    tmp = Path(tempfile.mkdtemp())
    target = support = None
    for d in dirs:
        parts = sorted(d.glob("target.gguf.part*"))
        if parts:
            target = tmp / "target.gguf"
            with open(target, "wb") as f:
                for p in parts:
                    f.write(p.read_bytes())
        elif (d / "target.gguf").exists():
            target = d / "target.gguf"
        if (d / "support.gguf").exists():
            support = d / "support.gguf"
    if target is None or support is None:
        raise SystemExit("need target.gguf(.part*) and support.gguf")
    for name, p in (("target.gguf", target), ("support.gguf", support)):
        if name in sums and sums[name] != sha256(p):
            raise SystemExit(f"{name}: sha256 differs from the device's")
    import ds4rt

    model = ds4rt.Model(str(target))
    ds4rt.DSpark(model, str(support))  # loads, validates and self-tests the drafter
    shutil.copyfile(target, DATA / "default-target.gguf")
    shutil.copyfile(support, DATA / "default-support.gguf")
    lines = [f"{sha256(DATA / n)}  {n}" for n in ("default-target.gguf", "default-support.gguf")]
    (DATA / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    out = ROOT / "docs" / "bench" / "default_model_training.json"
    out.write_text(json.dumps(metrics, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
