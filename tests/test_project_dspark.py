"""tools/project_dspark.py: the byte model and the speed-up arithmetic behind docs/PERFORMANCE.md's
"DSpark on the real model, projected", checked against a hand count on a small tensor table, a
Monte-Carlo count of distinct experts, and ds4rt's measured acceptance counters."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "project_dspark", os.path.join(ROOT, "tools", "project_dspark.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _table():
    # two layers of 8 experts; layer 0 is a hash layer, layer 1 has a compressor
    t = [
        {"name": "token_embd.weight", "ne": [16, 100], "nbytes": 3200},
        {"name": "output.weight", "ne": [16, 100], "nbytes": 1700},
        {"name": "blk.0.attn_q_a.weight", "ne": [16, 16], "nbytes": 500},
        {"name": "blk.0.ffn_gate_tid2eid.weight", "ne": [2, 100], "nbytes": 800},
        {"name": "blk.1.attn_q_a.weight", "ne": [16, 16], "nbytes": 500},
        {"name": "blk.1.attn_compressor_kv.weight", "ne": [16, 16], "nbytes": 70},
    ]
    for layer in (0, 1):
        for kind, per in (("gate", 10), ("up", 10), ("down", 12)):
            t.append(
                {"name": f"blk.{layer}.ffn_{kind}_exps.weight", "ne": [16, 8, 8], "nbytes": 8 * per}
            )
    return t


def test_byte_model_counts_what_a_pass_reads(tool):
    bm = tool.byte_model(_table())
    assert bm["once"] == 1700 + 500 + 500 + 70  # head and the non-expert weights
    assert bm["per_token"] == 3200 // 100 + 800 // 100  # an embedding row and a hash-table row
    assert bm["expert_bytes"] == [32, 32] and bm["n_expert"] == 8 and bm["layers"] == 2
    assert bm["dense_layer"] == {"non_expert": 500, "per_expert": 32}
    # one token, k = 2 of 8 experts: both layers read two experts
    assert tool.pass_bytes(bm, 1, 2) == pytest.approx(2770 + 40 + 2 * 2 * 32)
    # the proposal: 3 stages of a dense layer over 5 rows, the head, a 100 x 4 F16 Markov pair
    d5 = tool.distinct_experts(5, 8, 2)
    want = 3 * (500 + d5 * 32) + 1700 + 2 * 100 * 4 * 2
    assert tool.proposal_bytes(bm, 3, 5, 2, 4) == pytest.approx(want)


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_distinct_experts_match_a_simulation(tool, n):
    rng = np.random.default_rng(n)
    e, k, trials = 256, 6, 4000
    counts = [
        len({int(x) for _ in range(n) for x in rng.choice(e, size=k, replace=False)})
        for _ in range(trials)
    ]
    assert tool.distinct_experts(n, e, k) == pytest.approx(np.mean(counts), rel=0.01)


def test_committed_tokens_match_ds4rt_counters(tool):
    ev = json.loads(open(os.path.join(ROOT, "docs", "bench", "default_model_eval.json")).read())
    a = ev["acceptance"]["always_threshold0"]
    # ds4rt's own count includes cycles cut short by the EOS or the tail rule, hence the slack
    got = tool.committed(a["conditional_acceptance_at"], 5)
    assert got == pytest.approx(a["committed_per_cycle"], rel=0.02)


def test_speedup_arithmetic(tool):
    accept = [0.5, 0.5, 0.5]
    free = {n: 1.0 for n in range(1, 5)}  # verify as cheap as a decode, a free proposal
    s = tool.scenario(free, 0.0, accept)
    assert [r["speedup"] for r in s["rows"]] == pytest.approx([1.0, 1.5, 1.75, 1.875])
    assert s["best_draft_len"] == 3
    linear = {n: float(n) for n in range(1, 5)}  # verify(n) = n decodes: drafting never pays
    s = tool.scenario(linear, 0.1, accept)
    assert s["best_draft_len"] == 0 and all(r["speedup"] < 1 for r in s["rows"][1:])
    # the break-even constant acceptance for verify(2) = 1.2 decodes and no proposal cost:
    # (1 + a) / 1.2 = 1 at a = 0.2 (longer drafts need more)
    cheap = {n: 1.0 + 0.2 * (n - 1) for n in range(1, 5)}
    assert tool.flat_acceptance_for(1.0, cheap, 0.0, 3) == pytest.approx(0.2, abs=1e-6)
