"""Q8_0 weights repacked into the X8 layout at load on the avx512-vnni path (docs/QUANTS.md,
"The Q8_0 X8 layout"): the model's logits are bitwise those of the file layout (the avx512 path),
for prompt, decode and verify-sized passes and with the path forced to another one after the
load; the copy is counted as owned weight memory, and the memory plan predicts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ds4rt
from ds4rt import data, ops
from ds4rt.memory import memory_plan

pytestmark = pytest.mark.skipif(
    "avx512-vnni" not in ops.available_isas(), reason="this CPU lacks AVX-512 VNNI"
)

RUN = r"""
import json, sys
import numpy as np
import ds4rt
from ds4rt import data, ops
m = ds4rt.Model(data.default_target(), n_threads=2)
after = sys.argv[2]
if after:
    ops.set_isa(after)  # a path forced after the load multiplies the weights as they were bound
s = m.session(n_ctx=512, max_batch=8)
rng = np.random.default_rng(7)
toks = rng.integers(3, m.n_vocab, 60).tolist()
rows = [s.logits(toks[:20])]
for t in toks[20:30]:
    rows.append(s.logits([t]))
for i in range(30, 60, 6):
    rows.append(s.logits(toks[i:i + 6]))
np.save(sys.argv[1], np.concatenate([np.atleast_2d(r) for r in rows]))
print(json.dumps({"isa": ops.isa(), "owned": m.info["memory"]["weights_owned"]}))
"""


def _run(tmp_path, name, isa, after=""):
    out = tmp_path / f"{name}.npy"
    r = subprocess.run(
        [sys.executable, "-c", RUN, str(out), after],
        env=dict(os.environ, DS4RT_CPU_ISA=isa),
        cwd=tmp_path,  # the installed ds4rt, not the source tree's
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return np.load(out), json.loads(r.stdout.strip().splitlines()[-1])


def test_repacked_weights_give_the_file_layouts_logits(tmp_path):
    want, plain = _run(tmp_path, "file", "avx512")
    got, packed = _run(tmp_path, "x8", "avx512-vnni")
    assert plain["isa"] == "avx512" and packed["isa"] == "avx512-vnni"
    assert packed["owned"] > plain["owned"]  # the X8 copies
    assert np.array_equal(want, got)
    # the portable X8 kernel of another path, forced after the load
    forced, info = _run(tmp_path, "x8_then_scalar", "avx512-vnni", after="scalar")
    assert info["isa"] == "scalar"
    assert np.array_equal(want, forced)


def test_the_memory_plan_counts_the_copies():
    if ops.isa() != "avx512-vnni":
        pytest.skip(f"the active path is {ops.isa()}")
    plan = memory_plan(data.default_target())
    with ds4rt.Model(data.default_target()) as m:
        mem = m.info["memory"]
    assert plan["weights"]["owned"] == mem["weights_owned"]
    assert plan["weights"]["total"] == mem["weights"]
