#!/usr/bin/env python3
"""Step 4: make the device's files the embedded default pair.

    python tools/train/ship.py DIR [DIR2] [--data-dir D] [--bench F] [--prior ACCEPTANCE.json]

DIR (and DIR2, for a run in two calls) hold what tools/train/device_run.sh left in $OUT:
target.gguf.part* (or target.gguf), support.gguf, metrics.json. The target is reassembled, every
file is checked against the sha256 the device computed, ds4rt must load the pair (the DSpark
loader's self-test included), and then the files are copied to ds4rt/data/default-target.gguf
and default-support.gguf, their sums to ds4rt/data/SHA256SUMS and the device metrics to
docs/bench/default_model_training.json (--data-dir and --bench name other places: the tests
ship a tiny pair into a temporary folder).

A support-only run (tools/train/device_drafter.sh) returns no target: then the shipped target
(already in the data folder) is paired with the new support model, and only the support entry
of the training metrics is replaced.

--prior writes the drafter's measured acceptance (the JSON of tools/train/accept_ds4rt.py or
eval_ds4rt.py, measured on this pair) into the installed support file as its acceptance prior
(ds4rt.dspark.acceptance_prior, tools/train/acceptance_prior.py; docs/DSPARK.md "Scheduler");
the device's file is checked against its sum before, and the installed one is what loads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
DATA = ROOT / "ds4rt" / "data"


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def install(
    dirs: list[Path], data: Path = DATA, bench: Path | None = None, prior: Path | None = None
) -> list[str]:
    """Check and install the files of `dirs` into `data` (the support file with the acceptance
    prior of the JSON `prior`, if given); returns the SHA256SUMS lines."""
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
    if support is None:
        raise SystemExit("need support.gguf")
    new_target = target is not None
    if not new_target:
        target = data / "default-target.gguf"
        if not target.exists():
            raise SystemExit("need target.gguf(.part*): no target is shipped yet")
    for name, p in (("target.gguf", target), ("support.gguf", support)):
        if name in sums and sums[name] != sha256(p):
            raise SystemExit(f"{name}: sha256 differs from the device's")
    if prior is not None:
        import acceptance_prior as prior_tool

        curve = prior_tool.prior_from_eval(support, json.loads(prior.read_text()))
        with_prior = tmp / "support.gguf"
        prior_tool.rewrite(support, with_prior, curve)
        support = with_prior
    import ds4rt

    model = ds4rt.Model(str(target))
    ds4rt.DSpark(model, str(support))  # loads, validates and self-tests the drafter
    data.mkdir(parents=True, exist_ok=True)
    if new_target:
        shutil.copyfile(target, data / "default-target.gguf")
    shutil.copyfile(support, data / "default-support.gguf")
    lines = [f"{sha256(data / n)}  {n}" for n in ("default-target.gguf", "default-support.gguf")]
    (data / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    if bench is not None:
        if not new_target and bench.exists():
            # a support-only run: the target's entry stays, the drafter's is the new one
            metrics = {**json.loads(bench.read_text()), **metrics}
        bench.parent.mkdir(parents=True, exist_ok=True)
        bench.write_text(json.dumps(metrics, indent=1) + "\n")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument(
        "--bench", type=Path, default=ROOT / "docs" / "bench" / "default_model_training.json"
    )
    ap.add_argument("--prior", type=Path, default=None, help="acceptance JSON (accept_ds4rt.py)")
    args = ap.parse_args(argv)
    print("\n".join(install(args.dirs, args.data_dir, args.bench, args.prior)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
