"""tools/profile_gpu_kernels.py summarize on a small Nsight Compute CSV (the format `ncu --csv`
writes, with its own lines and the program's output in between): kernels grouped by name with
their launches, time and bytes, and the pass in launch order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "profile_gpu_kernels.py"
HEAD = '"ID","Process ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'


def _row(launch: int, kernel: str, metric: str, unit: str, value: str) -> str:
    return f'"{launch}","7","{kernel}","{metric}","{unit}","{value}"'


def test_summarize_groups_kernels_and_keeps_launch_order(tmp_path):
    rows = []
    # launch ids out of order and above 9, so the order is numeric, not textual
    for launch, kernel, us, mb in [
        (10, "mm_qt_kernel(mm_args)", "2,000", "3.5"),
        (2, "hc_pre1_kernel(args)", "1500", "0.25"),
        (9, "mm_qt_kernel(mm_args)", "1000", "1.5"),
    ]:
        rows.append(_row(launch, kernel, "gpu__time_duration.sum", "nsecond", us))
        rows.append(_row(launch, kernel, "dram__bytes_read.sum", "Mbyte", mb))
        rows.append(_row(launch, kernel, "dram__bytes_write.sum", "byte", "0"))
    csv = tmp_path / "prof.csv"
    csv.write_text("==PROF== Connected\nprogram output\n" + HEAD + "\n" + "\n".join(rows) + "\n")
    out = tmp_path / "k.json"
    r = subprocess.run(
        [sys.executable, str(TOOL), "summarize", str(csv), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("3 launches, 4.5 us of device time"), r.stdout
    d = json.loads(out.read_text())
    assert d["launches"] == 3 and d["device_us"] == 4.5
    first = d["kernels"][0]
    assert first["kernel"] == "mm_qt_kernel" and first["launches"] == 2 and first["us"] == 3.0
    assert first["read_MB"] == 5.0 and first["GBps"] == round(5e6 / 3e3, 1)
    assert d["sequence"] == [
        ["hc_pre1_kernel", 1.5, 0.25],
        ["mm_qt_kernel", 1.0, 1.5],
        ["mm_qt_kernel", 2.0, 3.5],
    ]
