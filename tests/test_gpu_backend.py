"""The GPU backend end to end (issues 9 and 10), against the CPU backend as the oracle.

Runs wherever the installed ds4rt has a GPU backend with a device: gpu=cuda / gpu=hip on a GPU,
or gpu=hipcpu (HIP-CPU runs the same kernels on host threads: slow, so the models are tiny and
the sequences short). Skips with the reason otherwise (CI, gpu=none).

What the GPU backend must give (docs/GPU.md, "The GPU backend"):
  * its ops conform to the CPU's (tests/backend_ops on the GPU backend);
  * a model loads on it exactly when it covers every op and type the model needs, and is
    refused naming what is missing otherwise;
  * teacher-forced logits within LOGIT_TOL of the CPU backend's (the tolerance below says why);
  * on the GPU itself, bit for bit: batch invariance, rollback at every keep length, greedy
    identity of speculation (host drafters, DSpark for every head dtype), logits and cache
    unchanged by loading a support model.
"""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest
from dspark_helpers import assert_stage_timers
from meson_programs import Unavailable, programs
from tiny_models import model as tiny
from tiny_models import tinymodel

import ds4rt

# Teacher-forced logits, GPU vs CPU backend: max |gpu - cpu| / (max |cpu| + 1) over a row.
# The matrix products, HC ops, routing and combine are bitwise the CPU's given the same inputs
# (hip/mm.h, hip/ops.h); attention sums its keys in a split order (hip/attn.h) and the device's
# float64 libm may differ in a last bit, so single ops differ by a few float ulps
# (tests/backend_ops accepts 1e-4 per op and measures ~1e-7).
#   float config (F32 matrices, F16 experts): the ulps stay ulps, except where an F16 expert's
#     activation rounding to half flips (measured up to 9e-6 under HIP-CPU). 1e-4.
#   quant config (Q8_0 / F16 / IQ2_XXS / Q2_K): every product quantises its activations (Q8_0
#     blocks: a step of 1/127 of the block's largest value); an ulp-sized difference that lands
#     on a rounding boundary moves that element by a whole step, ~1e-3 of a product's output,
#     and a few such flips per layer compound (measured 1e-2 at an attention output, 2e-3 to
#     3.3e-3 at the logits under HIP-CPU, where the layer inputs differed by 4e-8). 2e-2.
# A wrong kernel (a missed row, a wrong position, a swapped expert) moves logits by far more.
LOGIT_TOL = {"float": 1e-4, "quant": 2e-2}


def _gpu_backend():
    for b in ds4rt.backends():
        if b["name"] != "cpu" and b["n_devices"] > 0:
            return b
    return None


GPU = _gpu_backend()
pytestmark = pytest.mark.skipif(
    GPU is None,
    reason=f"no GPU backend with a device in this build ({ds4rt.build_info()})",
)
MISSING = sorted(op for op, types in (GPU["ops"].items() if GPU else ()) if not types)
needs_every_op = pytest.mark.skipif(
    bool(MISSING), reason=f"the GPU backend of this build lacks the kernels of {', '.join(MISSING)}"
)


def ids(n, seed, vocab=512):
    return [0] + np.random.default_rng(seed).integers(3, vocab, n - 1).tolist()


@pytest.fixture(scope="module")
def fl(tmp_path_factory):
    return tiny(tmp_path_factory, "float")


@pytest.fixture(scope="module")
def qu(tmp_path_factory):
    return tiny(tmp_path_factory, "quant")


@pytest.fixture(scope="module")
def gpu_fl(fl):
    return ds4rt.Model(str(fl.target), backend=GPU["name"])


def rel(a, b):
    return float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1.0))


# ---- ops and capabilities --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_gpu_ops_conform_to_the_cpu(seed):
    try:
        exe = programs("gpu").path("backend_ops")
    except Unavailable as e:
        pytest.skip(str(e))
    r = subprocess.run(
        [exe, "--backend", GPU["name"], "--seed", str(seed)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    failed = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert r.returncode == 0 and not failed, r.stdout[-6000:] + r.stderr
    ran = {line.split()[2] for line in r.stdout.splitlines() if line.startswith("ok")}
    # every op the backend says it runs was checked
    assert {op for op, types in GPU["ops"].items() if types} <= ran | {"matmul", "get_rows"}


@pytest.mark.parametrize("config", ["float", "quant"])
def test_a_model_loads_exactly_when_every_op_and_type_is_covered(tmp_path_factory, config):
    r = tiny(tmp_path_factory, config)
    try:
        m = ds4rt.Model(str(r.target), backend=GPU["name"])
    except ds4rt.errors.BackendError as e:
        # refused at load, naming an op (and its type) the capability table says is missing
        msg = str(e)
        named = [op for op in GPU["ops"] if f"lacks op {op} " in msg]
        assert named, msg
        t = msg.split(" for type ")[1].split()[0]
        assert t not in GPU["ops"][named[0]], msg
        return
    assert m.info["backend"] == GPU["name"] and m.info["device"] == 0
    mem = m.info["memory"]
    assert mem["weights"] > 0 and mem["scratch"] > 0 and mem["state_per_1k"] > 0


def test_heads_wider_than_the_attention_kernel_are_refused_at_load(tmp_path):
    # the attention kernel keeps a head's share per lane in registers (hip/attn.h): 1104 dims
    # (the float config's, widened; 1104 - 16 rope dims is a multiple of the FP8 blocks) is over
    # its 1024. The CPU takes the same file, so the refusal is the backend's limit, at load.
    cfg = dataclasses.replace(tinymodel.configs.CONFIGS["float"], name="wide-heads", d_h=1104)
    r = tinymodel.generate(tmp_path, config=cfg)
    ds4rt.Model(str(r.target), backend="cpu").close()
    wide = r"lacks attention for heads of 1104 dims \(at most 1024"
    with pytest.raises(ds4rt.errors.BackendError, match=wide):
        ds4rt.Model(str(r.target), backend=GPU["name"])


# ---- logits against the CPU backend ---------------------------------------------------------


@needs_every_op
@pytest.mark.parametrize("config", ["float", "quant"])
def test_teacher_forced_logits_match_the_cpu_backend(tmp_path_factory, config):
    r = tiny(tmp_path_factory, config)
    toks = ids(24, 5)
    cpu = ds4rt.Model(str(r.target), backend="cpu").session(max_batch=8)
    gpu = ds4rt.Model(str(r.target), backend=GPU["name"]).session(max_batch=8)
    # a prompt pass of 8, then single tokens and a batch of 5 (decode and verify shapes)
    for chunk in (toks[:8], *([t] for t in toks[8:16]), toks[16:21], toks[21:]):
        a, b = gpu.logits(chunk), cpu.logits(chunk)
        assert a.shape == b.shape
        assert all(rel(a[i], b[i]) <= LOGIT_TOL[config] for i in range(len(chunk))), [
            rel(a[i], b[i]) for i in range(len(chunk))
        ]


@needs_every_op
def test_greedy_text_equals_the_cpu_backend(fl):
    toks = ids(9, 2)
    cpu_m = ds4rt.Model(str(fl.target), backend="cpu")
    gpu_m = ds4rt.Model(str(fl.target), backend=GPU["name"])
    want = cpu_m.session().generate(toks, max_tokens=24, stop_at_eos=False).ids
    got = gpu_m.session().generate(toks, max_tokens=24, stop_at_eos=False).ids
    if got != want:
        # a token may differ only where the CPU's top two logits are within the tolerance
        i = next(j for j in range(len(want)) if got[j] != want[j])
        row = cpu_m.session().logits(toks + want[:i])[-1]
        top2 = np.sort(row)[-2:]
        assert top2[1] - top2[0] <= LOGIT_TOL["float"] * (np.max(np.abs(row)) + 1), (i, got, want)


# ---- on the GPU, bit for bit ------------------------------------------------------------------


@needs_every_op
def test_batch_invariance(gpu_fl):
    toks = ids(20, 7)
    one = gpu_fl.session(max_batch=17)
    alone = np.concatenate([one.logits([t]) for t in toks])
    rng = np.random.default_rng(3)
    s = gpu_fl.session(max_batch=17)
    rows, at = [], 0
    while at < len(toks):
        k = int(rng.integers(1, 18))
        rows.append(s.logits(toks[at : at + k]))
        at += k
    assert np.array_equal(np.concatenate(rows), alone)


@needs_every_op
def test_rollback_at_every_keep_length(gpu_fl):
    """A verify pass of a draft whose first `keep` tokens are right, rolled back to them, then
    continued: bitwise the logits of a run that never saw the wrong tail."""
    toks = ids(14, 8)
    prefix, batch = toks[:6], toks[6:]
    want = gpu_fl.session(max_batch=16).logits(toks)
    for keep in range(len(batch) + 1):
        s = gpu_fl.session(max_batch=16)
        s.eval(prefix)
        s.eval(batch[:keep] + [(t + 5) % 512 for t in batch[keep:]])
        s.truncate(len(prefix) + keep)
        if keep < len(batch):
            assert np.array_equal(s.logits(batch[keep:]), want[len(prefix) + keep :]), keep
        else:
            assert np.array_equal(s.current_logits(), want[-1]), keep


class Oracle:
    """Host drafter that knows the plain continuation: right, wrong, or right then wrong."""

    def __init__(self, full, mode, seed=0):
        self.full, self.mode = full, mode
        self.rng = np.random.default_rng(seed)

    def __call__(self, ctx, k):
        n = len(ctx)
        truth = [self.full[n + i] if n + i < len(self.full) else 3 for i in range(k)]
        if self.mode == "right":
            return truth
        if self.mode == "wrong":
            return [(t + 1) % 512 for t in truth]
        cut = int(self.rng.integers(0, k + 1))
        return truth[:cut] + [(t + 1) % 512 for t in truth[cut:]]


@needs_every_op
@pytest.mark.parametrize("mode", ["right", "wrong", "random"])
def test_host_drafter_speculation_is_greedy_identical(gpu_fl, mode):
    toks = ids(9, 3)
    want = gpu_fl.session(max_batch=17).generate(toks, max_tokens=30, stop_at_eos=False).ids
    s = gpu_fl.session(max_batch=17)  # a verify pass of up to 16 drafts + the anchor
    got = s.generate(
        toks, max_tokens=30, draft=Oracle(toks + want, mode), scheduler="always", stop_at_eos=False
    ).ids
    assert got == want
    st = s.spec_stats()
    if mode == "right":
        assert st["accepted_draft"] == st["proposed"] > 0
    if mode == "wrong":
        assert st["accepted_draft"] == 0 and st["proposed"] > 0


# ---- DSpark on the GPU (issue 10) ---------------------------------------------------------------


@needs_every_op
@pytest.mark.parametrize("head_dtype", ["f32", "f16", "bf16", "q8_0"])
def test_dspark_on_the_gpu_drafts_for_every_head_dtype(tmp_path_factory, head_dtype):
    """The seed's failure (proposed=0, every stage at 0 ms) as a test, on the GPU backend."""
    r = tiny(tmp_path_factory, "float", head_dtype=head_dtype)
    m = ds4rt.Model(str(r.target), backend=GPU["name"])
    d = ds4rt.DSpark(m, str(r.support))
    assert d.info["tensor_types"].count(head_dtype.upper()) >= 2
    toks = ids(12, 1)
    want = m.session(max_batch=16).generate(toks, max_tokens=24, stop_at_eos=False).ids
    s = m.session(max_batch=16)
    got = s.generate(
        toks,
        max_tokens=24,
        dspark=d,
        scheduler="always",
        confidence_threshold=0.0,
        stop_at_eos=False,
    ).ids
    assert got == want
    st = s.spec_stats()
    assert st["proposed"] > 0 and st["errors"] == 0
    assert_stage_timers(st, d.info["n_stages"])


# ---- the Q8->F16 expansion cache on the GPU (issue 10) --------------------------------------


@needs_every_op
def test_the_cache_expands_q8_0_matrices_and_is_used(qu):
    """on: the dense Q8_0 matrices and the head get F16 copies that the products use (hits),
    at every batch size alike (batch invariance holds with the cache on); auto and off expand
    nothing and say why."""
    on = ds4rt.Model(str(qu.target), backend=GPU["name"], cache="on")
    c = on.info["cache"]
    assert c["active"] and c["bytes"] > 0 and c["fallbacks"] == 0, c
    for policy in ("auto", "off"):
        c2 = ds4rt.Model(str(qu.target), backend=GPU["name"], cache=policy).info["cache"]
        assert not c2["active"] and c2["bytes"] == 0 and c2["reason"], c2
    toks = ids(12, 4)
    s = on.session(max_batch=8)
    batched = s.logits(toks[:6])
    assert on.info["cache"]["hits"] > 0
    one = on.session(max_batch=8)
    alone = np.concatenate([one.logits([t]) for t in toks[:6]])
    assert np.array_equal(batched, alone)
    # F16 products instead of Q8_0 ones: a different arithmetic, within the quant tolerance
    off = ds4rt.Model(str(qu.target), backend=GPU["name"], cache="off").session(max_batch=8)
    ref = off.logits(toks[:6])
    assert all(rel(batched[i], ref[i]) <= LOGIT_TOL["quant"] for i in range(6))


@needs_every_op
def test_the_cache_budget_and_its_fallbacks_are_counted(qu):
    full = ds4rt.Model(str(qu.target), backend=GPU["name"], cache="on").info["cache"]["bytes"]
    c = ds4rt.Model(str(qu.target), backend=GPU["name"], cache="on", cache_budget=full // 2).info[
        "cache"
    ]
    assert 0 < c["bytes"] <= full // 2 and c["fallbacks"] > 0, c
    assert "over the budget" in c["reason"], c


@needs_every_op
def test_support_model_changes_neither_cache_nor_logits(qu):
    """ds4's ROCm build switched the cache off when a support model loaded; here loading and
    attaching one changes neither the cache's bytes nor the target's logits."""
    m = ds4rt.Model(str(qu.target), backend=GPU["name"], cache="on")
    toks = ids(20, 9)
    cache_before = dict(m.info["cache"])
    assert cache_before["bytes"] > 0
    before = m.session(max_batch=8).logits(toks)
    d = ds4rt.DSpark(m, str(qu.support))
    s = m.session(max_batch=8)
    d.attach(s)
    attached = s.logits(toks)
    assert np.array_equal(before, attached)
    after = m.info["cache"]
    assert {k: v for k, v in after.items() if k != "hits"} == {
        k: v for k, v in cache_before.items() if k != "hits"
    }


# ---- graphs (on by default; DS4RT_GPU_GRAPHS=0 turns them off; not HIP-CPU) ----------------------

GRAPH_RUN = """
import json, sys
import numpy as np
import ds4rt
m = ds4rt.Model(sys.argv[1], backend=sys.argv[2])
toks = json.loads(sys.argv[3])
s = m.session(max_batch=17)
rows = [s.logits(toks[:7])]
for t in toks[7:15]:
    rows.append(s.logits([t]))          # decode steps: one graph, replayed at new positions
for i in range(15, len(toks), 5):
    rows.append(s.logits(toks[i:i + 5]))  # verify-sized passes
    s.truncate(s.position - 2)          # a partial accept, then the next pass
np.save(sys.argv[4], np.concatenate(rows))
"""


def _run_passes(qu, tmp_path, name, **env_vars):
    """GRAPH_RUN's logits in a fresh process (graphs and PDL are decided per process/context)."""
    import json
    import os
    import sys

    path = tmp_path / f"{name}.npy"
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            GRAPH_RUN,
            str(qu.target),
            GPU["name"],
            json.dumps(ids(40, 11)),
            str(path),
        ],
        env=dict(os.environ, **env_vars),
        cwd=tmp_path,  # the installed ds4rt, not the source tree's
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    return np.load(path)


@needs_every_op
@pytest.mark.skipif("gpu=hipcpu" in ds4rt.build_info(), reason="HIP-CPU has no graphs")
def test_captured_graphs_replay_bitwise(qu, tmp_path):
    """Decode and verify passes replayed from captured graphs give bitwise the logits of the
    plain passes, across positions (compressor emissions, window wrap) and rollbacks."""
    plain = _run_passes(qu, tmp_path, "g0", DS4RT_GPU_GRAPHS="0")
    assert np.array_equal(plain, _run_passes(qu, tmp_path, "g1", DS4RT_GPU_GRAPHS="1"))


@needs_every_op
def test_the_side_branch_sinkhorn_is_bitwise(qu, tmp_path):
    """hc_pre's Sinkhorn on the context's second stream (the default; docs/GPU.md, "The side
    branch") gives bitwise the logits of the Sinkhorn inside hc_pre_finish, plainly and from
    captured graphs: a branch joined too late (hc_post reading comb early) would show here."""
    want = _run_passes(qu, tmp_path, "s0", DS4RT_GPU_SIDE="0", DS4RT_GPU_GRAPHS="0")
    for graphs in ("0", "1"):
        got = _run_passes(qu, tmp_path, f"s1g{graphs}", DS4RT_GPU_SIDE="1", DS4RT_GPU_GRAPHS=graphs)
        assert np.array_equal(want, got), graphs


@needs_every_op
def test_branches_are_bitwise(qu, tmp_path):
    """The op table's side branches on the second stream (the default: the attention's key side
    beside its queries, the shared expert beside the routed experts; docs/GPU.md, "Branches")
    give bitwise the logits of every op in issue order on one stream (DS4RT_GPU_BRANCH=0),
    plainly and from captured graphs, with and without the Sinkhorn on the same side stream: a
    branch that read or wrote what the other side had not finished would show here."""
    want = _run_passes(qu, tmp_path, "b0", DS4RT_GPU_BRANCH="0", DS4RT_GPU_GRAPHS="0")
    for graphs, side in (("0", "1"), ("1", "1"), ("1", "0")):
        env = {"DS4RT_GPU_BRANCH": "1", "DS4RT_GPU_GRAPHS": graphs, "DS4RT_GPU_SIDE": side}
        got = _run_passes(qu, tmp_path, f"b1g{graphs}s{side}", **env)
        assert np.array_equal(want, got), (graphs, side)


# the forms that are off by default until a device has timed them (docs/GPU.md, "Merged
# launches" and "Matrix products"), alone and together
OFF_BY_DEFAULT = {
    "fs1": {"DS4RT_GPU_FS1": "16"},
    "hcrms": {"DS4RT_GPU_HC_RMS_IN_MIX": "1", "DS4RT_GPU_FS1": "16"},
    "pre1": {"DS4RT_GPU_HC_PRE1": "1"},
    "raw": {"DS4RT_GPU_RAW_FLOAT": "1"},
    "qmrows": {"DS4RT_GPU_QM_MIN_ROWS": "4096"},
    "stream": {"DS4RT_GPU_QT_STREAM": "4"},
    "all": {
        "DS4RT_GPU_FS1": "16",
        "DS4RT_GPU_HC_RMS_IN_MIX": "1",
        "DS4RT_GPU_HC_PRE1": "1",
        "DS4RT_GPU_RAW_FLOAT": "1",
        "DS4RT_GPU_QM_MIN_ROWS": "4096",
        "DS4RT_GPU_QT_STREAM": "4",
    },
}


@needs_every_op
@pytest.mark.parametrize("form", sorted(OFF_BY_DEFAULT))
def test_off_by_default_forms_are_bitwise(qu, tmp_path, form):
    """Each form that waits behind a knob gives bitwise the default's logits over decode steps,
    verify-sized passes and rollbacks, plainly and (where the build has graphs) from captured
    graphs with programmatic dependent launch: a merged kernel that read its inputs before its
    predecessor finished, or wrote a row of another batch size's bits, would show here."""
    want = _run_passes(qu, tmp_path, f"{form}-ref", DS4RT_GPU_GRAPHS="0")
    graphs = ("0",) if "gpu=hipcpu" in ds4rt.build_info() else ("0", "1")
    for g in graphs:
        got = _run_passes(qu, tmp_path, f"{form}-g{g}", DS4RT_GPU_GRAPHS=g, **OFF_BY_DEFAULT[form])
        assert np.array_equal(want, got), (form, g)


@needs_every_op
def test_programmatic_dependent_launch_is_bitwise(qu, tmp_path):
    """Kernels launched with programmatic dependent launch (DS4RT_GPU_PDL=1 where the device has
    it: docs/GPU.md) give bitwise the logits of plainly serialised launches, with and without
    graphs, and with PDL for decode passes only (DS4RT_GPU_PDL_MAX_N=1: the verify passes
    between them launch plainly): a kernel that touched anything but its weights before its
    predecessor finished would show here."""
    want = _run_passes(qu, tmp_path, "p0", DS4RT_GPU_PDL="0", DS4RT_GPU_GRAPHS="0")
    for graphs, max_n in (("0", ""), ("1", ""), ("1", "1")):
        got = _run_passes(
            qu,
            tmp_path,
            f"p1g{graphs}m{max_n}",
            DS4RT_GPU_PDL="1",
            DS4RT_GPU_GRAPHS=graphs,
            DS4RT_GPU_PDL_MAX_N=max_n,
        )
        assert np.array_equal(want, got), (graphs, max_n)
