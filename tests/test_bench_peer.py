"""tools/bench_cpu_peer.py, the side-by-side benchmark against llama.cpp (docs/PERFORMANCE.md),
run against a stand-in llama-bench that records how it was called and reports fixed timings:
the rounds alternate, every test gets a median and a ratio, environment variants run as their
own processes, a partial report survives, and each backend passes llama-bench the flags of
its peer (CPU: no offload, no repacking; GPU: every layer offloaded, flash attention auto)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_models import model as tiny

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import bench_cpu_peer  # noqa: E402

FAKE = r"""#!PYTHON
import json, os, sys
a = sys.argv[1:]
with open(os.environ["FAKE_LLAMA_LOG"], "a") as f:
    f.write(json.dumps(a) + "\n")
p = [int(x) for x in a[a.index("-p") + 1].split(",") if int(x) > 0]
n = int(a[a.index("-n") + 1])
print("log line that is not json")
for k in p:  # 1 ms per token
    print(json.dumps({"n_prompt": k, "n_gen": 0, "samples_ns": [k * 1e6], "build_commit": "fake"}))
g = {"n_prompt": 0, "n_gen": n, "samples_ns": [n * 2e6, n * 2e6], "build_commit": "fake"}
print(json.dumps(g))
"""


@pytest.fixture
def fake_llama(tmp_path, monkeypatch):
    exe = tmp_path / "llama-bench"
    exe.write_text(FAKE.replace("PYTHON", sys.executable))
    exe.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_LLAMA_LOG", str(log))
    return exe, log


def test_cpu_run_alternates_and_reports(tmp_path_factory, tmp_path, fake_llama):
    exe, log = fake_llama
    target = tiny(tmp_path_factory, "quant").target
    out = tmp_path / "peer.json"
    cmd = [sys.executable, str(ROOT / "tools" / "bench_cpu_peer.py"), "--llama-bench", str(exe)]
    cmd += ["--files", str(target), "--threads", "1", "--gen", "2", "--prompts", "2,4"]
    cmd += ["--reps", "1", "--rounds", "2", "--budget-s", "600"]
    cmd += ["--variant", "scalar:DS4RT_CPU_ISA=scalar", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert rep["complete"] and rep["backend"] == "cpu" and rep["llama_build"] == "fake"
    (res,) = rep["results"]
    assert res["rounds"] == 2 and len(res["raw"]["llama.cpp"]) == 2
    ll = res["llama.cpp"]["tok_s_median"]
    assert ll == pytest.approx({"tg2": 500.0, "pp2": 1000.0, "pp4": 1000.0})
    d = res["ds4rt"]["tok_s_median"]
    assert set(d) == {"tg2", "pp2", "pp4"} and all(v > 0 for v in d.values())
    assert res["ratio_ds4rt_over_llama"] == pytest.approx({k: d[k] / ll[k] for k in ll})
    assert res["llama.cpp"]["pass_over_decode"]["pp4"] == pytest.approx(2.0)
    assert "ds4rt[scalar]" in res["variants"]
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(calls) == 2
    for c in calls:
        assert c[c.index("-ngl") + 1] == "0" and c[c.index("--repack") + 1] == "0"
        assert "-fa" not in c and c[c.index("-t") + 1] == "1"


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_a_gpu_run_offloads_every_layer(tmp_path, fake_llama, backend):
    exe, log = fake_llama
    a = argparse.Namespace(
        llama_bench=str(exe), backend=backend, reps=2, gen=128, prompts="2,8,512"
    )
    res = bench_cpu_peer.run_llama(str(tmp_path / "x.gguf"), 16, a)
    assert res["tok_s"] == pytest.approx(
        {"pp2": 1000.0, "pp8": 1000.0, "pp512": 1000.0, "tg128": 500.0}
    )
    (c,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert c[c.index("-ngl") + 1] == "99" and c[c.index("-fa") + 1] == "auto"
    assert "--repack" not in c
    assert os.path.basename(c[c.index("-m") + 1]) == "x.gguf"
