"""Q8_0 weights repacked into the X8 and R16 layouts at load on the avx512-vnni path
(docs/QUANTS.md, "The Q8_0 X8 layout", "The Q8_0 R16 layout"): the model's logits are bitwise
those of the file layout (the avx512 path), for prompt, decode and verify-sized passes and with
the path forced to another one after the load; the copy is counted as owned weight memory, and
the memory plan predicts it."""

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
m = ds4rt.Model(sys.argv[3] or data.default_target(), n_threads=2)
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


def _run(tmp_path, name, isa, after="", target=""):
    out = tmp_path / f"{name}.npy"
    r = subprocess.run(
        [sys.executable, "-c", RUN, str(out), after, target],
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
    if ops.isa() not in ("avx512-vnni", "avx512-vbmi"):  # the paths that repack Q8_0
        pytest.skip(f"the active path is {ops.isa()}")
    plan = memory_plan(data.default_target())
    with ds4rt.Model(data.default_target()) as m:
        mem = m.info["memory"]
    assert plan["weights"]["owned"] == mem["weights_owned"]
    assert plan["weights"]["total"] == mem["weights"]


def test_r16_group_windows_give_the_file_layouts_logits(tmp_path, tmp_path_factory):
    """A tiny model whose grouped output projection has 8 rows a group (attn_output_a: 4 groups
    of 8 rows of 384 columns, R16 panels of 16): each group's product takes the panels that hold
    its rows and keeps its own (src/backend/cpu/cpu_matmul.c)."""
    import dataclasses

    import tiny_models  # noqa: F401  (puts tools/ on sys.path)
    import tinymodel
    from tinymodel import configs

    cfg = dataclasses.replace(configs.QUANT, name="quant-r16-window", G=4, Ro=8)
    target = str(tinymodel.generate(tmp_path_factory.mktemp("r16win"), config=cfg).target)
    want, _ = _run(tmp_path, "file", "avx512", target=target)
    got, _ = _run(tmp_path, "r16", "avx512-vnni", target=target)
    assert np.array_equal(want, got)
