"""Sublayer primitives of the float64 reference against hand-computed values, loop-form
re-statements of the formulas in docs/MODEL.md, and mathematical properties."""

import math

import numpy as np
import pytest
from reference import dsv4_ref as R
from reference import lowp, tiny


def _sig(x):
    return 1.0 / (1.0 + math.exp(-x))


# --- norms ------------------------------------------------------------------------------------
def test_rms_norm_by_hand():
    eps = 1e-6
    y = R.rms_norm(np.array([3.0, 4.0]), np.array([1.0, 2.0]), eps)
    r = math.sqrt(12.5 + eps)
    np.testing.assert_allclose(y, [3 / r, 8 / r], rtol=1e-15)
    np.testing.assert_allclose(R.rms_norm(np.array([[3.0, 4.0]]), None, eps), [[3 / r, 4 / r]])


# --- hyper-connections (docs/MODEL.md "Hyper-connections") -----------------------------------
def test_sinkhorn_by_hand_one_iteration():
    c0 = np.array([[0.0, math.log(3.0)], [math.log(2.0), math.log(2.0)]])
    eps = 1e-6
    # row softmax: [[1/4, 3/4], [1/2, 1/2]] + eps; then one column normalisation
    c = np.array([[0.25, 0.75], [0.5, 0.5]]) + eps
    c = c / (c.sum(axis=0) + eps)
    np.testing.assert_allclose(R.sinkhorn(c0, 1, eps), c, rtol=1e-15)
    # a second iteration: row normalise then column normalise
    c = c / (c.sum(axis=1, keepdims=True) + eps)
    c = c / (c.sum(axis=0) + eps)
    np.testing.assert_allclose(R.sinkhorn(c0, 2, eps), c, rtol=1e-15)


def test_sinkhorn_is_doubly_stochastic_after_20_iterations():
    rng = np.random.default_rng(0)
    for _ in range(100):
        c = R.sinkhorn(rng.standard_normal((4, 4)), 20, 1e-6)
        assert np.all(c > 0)
        np.testing.assert_allclose(c.sum(axis=0), 1.0, atol=2e-6)  # columns were last
        np.testing.assert_allclose(c.sum(axis=1), 1.0, atol=1e-4)


def _hc_pre_loops(X, fn, scale, base, eps_n, eps_hc, iters):
    """HC pre written out with explicit loops."""
    N, D = X.shape
    flat = [X[h, j] for h in range(N) for j in range(D)]
    r = math.sqrt(sum(v * v for v in flat) / len(flat) + eps_n)
    m = [sum(fn[i, q] * flat[q] / r for q in range(N * D)) for i in range(fn.shape[0])]
    pre = [_sig(scale[0] * m[i] + base[i]) + eps_hc for i in range(N)]
    post = [2 * _sig(scale[1] * m[N + i] + base[N + i]) for i in range(N)]
    c0 = np.array(
        [
            [scale[2] * m[2 * N + a * N + b] + base[2 * N + a * N + b] for b in range(N)]
            for a in range(N)
        ]
    )
    x = [sum(pre[h] * X[h, j] for h in range(N)) for j in range(D)]
    return np.array(x), np.array(pre), np.array(post), R.sinkhorn(c0, iters, eps_hc)


def test_hc_pre_matches_loop_form():
    rng = np.random.default_rng(1)
    N, D = 3, 5
    X = rng.standard_normal((N, D))
    fn = rng.standard_normal(((2 + N) * N, N * D))
    scale, base = rng.uniform(0.5, 1.5, 3), rng.standard_normal((2 + N) * N)
    got = R.hc_pre(X, fn, scale, base, norm_eps=1e-6, hc_eps=1e-6, iters=20)
    want = _hc_pre_loops(X, fn, scale, base, 1e-6, 1e-6, 20)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_hc_post_uses_the_transpose():
    rng = np.random.default_rng(2)
    N, D = 4, 6
    X, f = rng.standard_normal((N, D)), rng.standard_normal(D)
    post = rng.uniform(0, 2, N)
    comb = rng.uniform(0, 1, (N, N))  # deliberately not symmetric
    want = np.array([post[j] * f + sum(comb[i, j] * X[i] for i in range(N)) for j in range(N)])
    np.testing.assert_allclose(R.hc_post(f, X, post, comb), want, rtol=1e-14)
    assert not np.allclose(R.hc_post(f, X, post, comb.T), want)


def test_hc_head_matches_loop_form():
    rng = np.random.default_rng(3)
    N, D = 4, 3
    X = rng.standard_normal((N, D))
    fn, scale, base = rng.standard_normal((N, N * D)), np.array([0.7]), rng.standard_normal(N)
    r = math.sqrt(np.mean(X.reshape(-1) ** 2) + 1e-6)
    m = fn @ X.reshape(-1) / r
    w = [_sig(0.7 * m[h] + base[h]) + 1e-6 for h in range(N)]
    want = sum(w[h] * X[h] for h in range(N))
    np.testing.assert_allclose(
        R.hc_head(X, fn, scale, base, norm_eps=1e-6, hc_eps=1e-6), want, rtol=1e-13
    )


# --- RoPE (docs/MODEL.md "RoPE") -------------------------------------------------------------
REAL = R.HParams()
TINY = tiny.tiny_float_hparams()


def test_yarn_range_real_model():
    rp = R.rope_params(REAL, 2)  # a compressed layer
    assert rp.yarn and rp.base == 160000.0 and rp.factor == 16.0
    assert abs(R.yarn_corr_dim(64, 160000.0, 65536, 32.0) - 15.45) < 0.01
    assert abs(R.yarn_corr_dim(64, 160000.0, 65536, 1.0) - 24.71) < 0.01
    assert R.yarn_range(rp) == (15, 25)
    assert not R.rope_params(REAL, 0).yarn and R.rope_params(REAL, 0).base == 10000.0


def test_yarn_range_tiny_config():
    assert R.yarn_range(R.rope_params(TINY, 1)) == (3, 7)  # docs/REFERENCE.md
    assert R.yarn_range(R.rope_params(TINY, 2)) == (3, 7)


def test_yarn_frequency_blend():
    rp = R.rope_params(REAL, 2)
    k = np.arange(32)
    w_ext = 160000.0 ** (-2.0 * k / 64)
    w = R.rope_freqs(rp)
    np.testing.assert_allclose(w[:16], w_ext[:16], rtol=1e-15)  # k <= lo: unchanged
    np.testing.assert_allclose(w[25:], w_ext[25:] / 16, rtol=1e-15)  # k >= hi: interpolated
    g = 1 - (20 - 15) / (25 - 15)  # k = 20, inside the ramp
    np.testing.assert_allclose(w[20], w_ext[20] / 16 * (1 - g) + w_ext[20] * g, rtol=1e-15)
    np.testing.assert_allclose(R.rope_freqs(R.rope_params(REAL, 0)), 10000.0 ** (-2.0 * k / 64))


def test_rope_by_hand():
    rp = R.RopeParams(n_rot=4, base=100.0)
    x = np.array([5.0, 7.0, 1.0, 0.0, 0.0, 1.0])  # nope dims [5, 7]; pairs (1, 0), (0, 1)
    y = R.rope(x, 3, rp)
    t0, t1 = 3.0, 3.0 * 100.0 ** (-2 / 4)
    np.testing.assert_allclose(
        y, [5.0, 7.0, math.cos(t0), math.sin(t0), -math.sin(t1), math.cos(t1)], rtol=1e-15
    )
    np.testing.assert_array_equal(R.rope(x, 0, rp), x)


@pytest.mark.parametrize("layer", [0, 1], ids=["dense", "yarn"])
def test_rope_inverse_and_relative_position(layer):
    rp = R.rope_params(TINY, layer)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 80))
    for p in (0, 1, 17, 299, 65535):
        y = R.rope(x, p, rp)
        np.testing.assert_array_equal(y[:, :64], x[:, :64])  # nope part untouched
        np.testing.assert_allclose(R.rope(y, p, rp, inverse=True), x, atol=1e-12)
    # rotations compose additively, so q·k depends only on the position difference
    np.testing.assert_allclose(R.rope(R.rope(x, 5, rp), 7, rp), R.rope(x, 12, rp), atol=1e-12)
    q, k = x[0], x[1]
    d1 = R.rope(q, 40, rp) @ R.rope(k, 30, rp)
    d2 = R.rope(q, 110, rp) @ R.rope(k, 100, rp)
    assert abs(d1 - d2) < 1e-11


# --- compressor (docs/MODEL.md "Compressors") ------------------------------------------------
@pytest.mark.parametrize("ratio,count", [(4, 75), (128, 2)])
def test_compressor_emission_positions(ratio, count):
    rng = np.random.default_rng(5)
    st = R.CompressorState(ratio, 3)
    c = 2 if ratio == 4 else 1
    emitted = []
    for p in range(300):
        z = R.compressor_step(st, rng.standard_normal(c * 3), rng.standard_normal(c * 3), p)
        if z is not None:
            emitted.append(p)
            assert z.shape == (3,)
    assert len(emitted) == count
    assert emitted == [b * ratio + ratio - 1 for b in range(count)]


def test_overlap_pooling_first_block_by_hand():
    """b = 0: the previous block is the -inf/0 initial state, so only the second halves of the
    block's own rows are pooled."""
    st = R.CompressorState(4, 1)  # d = 1: features [u_first_half, u_second_half]
    u = np.array([[10.0, 1.0], [20.0, 2.0], [30.0, 3.0], [40.0, 4.0]])
    g = np.array([[0.0, 0.0], [0.0, math.log(2.0)], [0.0, math.log(3.0)], [0.0, math.log(4.0)]])
    for p in range(3):
        assert R.compressor_step(st, u[p], g[p], p) is None
    z = R.compressor_step(st, u[3], g[3], 3)
    np.testing.assert_allclose(z, [(1 * 1 + 2 * 2 + 3 * 3 + 4 * 4) / 10.0], rtol=1e-15)
    # b = 1: candidates are block 0's first halves and block 1's second halves
    u1 = np.array([[0.0, 5.0], [0.0, 6.0], [0.0, 7.0], [0.0, 8.0]])
    g1 = np.zeros((4, 2))
    for p in range(4, 7):
        assert R.compressor_step(st, u1[p - 4], g1[p - 4], p) is None
    z = R.compressor_step(st, u1[3], g1[3], 7)
    np.testing.assert_allclose(z, [(10 + 20 + 30 + 40 + 5 + 6 + 7 + 8) / 8.0], rtol=1e-15)


def _batched_pool(U, G, ratio, d):
    """The compressor restated per block over the whole sequence (as the official prefill does)."""
    rows = []
    for b in range(len(U) // ratio):
        cur = slice(b * ratio, (b + 1) * ratio)
        if ratio == 4:
            if b == 0:
                vals, sc = U[cur, d:], G[cur, d:]
            else:
                prev = slice((b - 1) * ratio, b * ratio)
                vals = np.concatenate([U[prev, :d], U[cur, d:]])
                sc = np.concatenate([G[prev, :d], G[cur, d:]])
        else:
            vals, sc = U[cur], G[cur]
        w = np.exp(sc - sc.max(axis=0))
        rows.append((w * vals).sum(axis=0) / w.sum(axis=0))
    return np.array(rows)


@pytest.mark.parametrize("ratio", [4, 128])
def test_streaming_compressor_equals_batched_pooling(ratio):
    rng = np.random.default_rng(6)
    d, c, n = 5, (2 if ratio == 4 else 1), 300
    U, G = rng.standard_normal((n, c * d)), 2 * rng.standard_normal((n, c * d))
    st = R.CompressorState(ratio, d)
    got = [z for p in range(n) if (z := R.compressor_step(st, U[p], G[p], p)) is not None]
    np.testing.assert_allclose(np.array(got), _batched_pool(U, G, ratio, d), rtol=1e-12, atol=1e-15)


def test_compressor_inputs_add_ape_by_position():
    rng = np.random.default_rng(7)
    xn, wk, wg, ape = (rng.standard_normal(s) for s in ((6,), (4, 6), (4, 6), (4, 4)))
    u, g = R.compressor_inputs(xn, wk, wg, ape, 10)
    np.testing.assert_allclose(u, wk @ xn)
    np.testing.assert_allclose(g, wg @ xn + ape[10 % 4])


# --- indexer (docs/MODEL.md "Indexer") -------------------------------------------------------
def test_indexer_scores_by_hand():
    qi = np.array([[1.0, 0.0], [0.0, 1.0]])
    w = np.array([2.0, 3.0])
    keys = np.array([[1.0, 1.0], [-1.0, 2.0], [-1.0, -1.0]])
    # row 0: 2*1 + 3*1 = 5; row 1: 2*relu(-1) + 3*2 = 6; row 2: 0
    np.testing.assert_allclose(R.indexer_scores(qi, w, keys), [5.0, 6.0, 0.0])
    assert R.indexer_scores(qi, w, np.zeros((0, 2))).shape == (0,)


def test_indexer_select():
    s = np.array([1.0, 5.0, 3.0, 5.0, 2.0, 3.0])
    np.testing.assert_array_equal(R.indexer_select(s, 6), np.arange(6))
    np.testing.assert_array_equal(R.indexer_select(s, 10), np.arange(6))
    np.testing.assert_array_equal(R.indexer_select(s, 3), [1, 2, 3])  # tie 3.0: lower index
    np.testing.assert_array_equal(R.indexer_select(s, 1), [1])


def test_indexer_qat_switch():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 32))
    y = R.indexer_qat(x, simulate_quant=True)
    np.testing.assert_allclose(R.indexer_qat(x, simulate_quant=False), lowp.hadamard(x))
    np.testing.assert_array_equal(y, lowp.fp4_roundtrip(lowp.hadamard(x)))


# --- attention (docs/MODEL.md "Attention") ---------------------------------------------------
def test_attention_single_key_by_hand():
    q = np.array([[1.0, 2.0]])
    k = np.array([[3.0, 1.0]])
    z = 0.5 * 5.0
    o = R.attention_with_sinks(q, k, np.array([1.0]), 0.5)
    np.testing.assert_allclose(o, k * math.exp(z) / (math.exp(1.0) + math.exp(z)), rtol=1e-15)
    # a sink of -inf is plain softmax attention: one key -> the key itself
    np.testing.assert_allclose(R.attention_with_sinks(q, k, np.array([-np.inf]), 0.5), k)


def test_attention_matches_loop_form():
    rng = np.random.default_rng(9)
    H, n, d = 3, 7, 8
    q, keys, sinks = (
        rng.standard_normal((H, d)),
        rng.standard_normal((n, d)),
        rng.standard_normal(H),
    )
    tau = 1 / math.sqrt(d)
    want = []
    for h in range(H):
        z = [tau * (q[h] @ keys[j]) for j in range(n)]
        den = math.exp(sinks[h]) + sum(math.exp(v) for v in z)
        want.append(sum(math.exp(z[j]) * keys[j] for j in range(n)) / den)
    np.testing.assert_allclose(R.attention_with_sinks(q, keys, sinks, tau), want, rtol=1e-13)
    # large logits do not overflow (max subtraction)
    o = R.attention_with_sinks(q * 1e3, keys, sinks, tau)
    assert np.all(np.isfinite(o))


# --- MoE (docs/MODEL.md "MoE") ---------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_model():
    hp = tiny.tiny_float_hparams()
    return R.Model(hp, tiny.random_weights(hp, seed=11))


def test_hash_routing_uses_tid2eid(tiny_model):
    m = tiny_model
    xn = np.random.default_rng(10).standard_normal(m.hp.n_embd)
    table = m.w["blk.0.ffn_gate_tid2eid.weight"]
    for tok in (0, 7, 311):
        sel, wsel, prob = m.route(0, xn, tok)
        np.testing.assert_array_equal(sel, table[tok])
        np.testing.assert_allclose(wsel, 1.5 * prob[sel] / prob[sel].sum(), rtol=1e-15)
    # same input, other token ids -> other experts (the id, not the activation, routes)
    assert len({tuple(m.route(0, xn, t)[0]) for t in range(20)}) > 1


def test_biased_topk_routing(tiny_model):
    m = tiny_model
    rng = np.random.default_rng(12)
    xn = rng.standard_normal(m.hp.n_embd)
    sel, wsel, prob = m.route(1, xn, 5)
    bias = m.w["blk.1.exp_probs_b.bias"]
    np.testing.assert_allclose(
        prob, np.sqrt(np.log1p(np.exp(m.w["blk.1.ffn_gate_inp.weight"] @ xn)))
    )
    np.testing.assert_array_equal(sel, np.argsort(-(prob + bias), kind="stable")[:2])
    np.testing.assert_allclose(wsel.sum(), 1.5, rtol=1e-15)
    np.testing.assert_allclose(wsel, 1.5 * prob[sel] / prob[sel].sum(), rtol=1e-15)  # no bias
    # token id plays no role outside hash layers
    np.testing.assert_array_equal(m.route(1, xn, 400)[0], sel)


def test_topk_ties_prefer_lower_index():
    np.testing.assert_array_equal(R.topk_stable([1.0, 3.0, 2.0, 3.0, 2.0], 3), [1, 3, 2])


def test_swiglu_clamp():
    g = np.array([20.0, -20.0, 1.0, 12.0])
    u = np.array([1.0, 1.0, -30.0, 5.0])
    want = R.silu(np.array([10.0, -20.0, 1.0, 10.0])) * np.array([1.0, 1.0, -10.0, 5.0])
    np.testing.assert_allclose(R.Model.swiglu(g, u, 10.0), want)
    np.testing.assert_allclose(R.Model.swiglu(g, u, 0.0), R.silu(g) * u)  # 0 = no clamp


def test_moe_matches_loop_form(tiny_model):
    m = tiny_model
    rng = np.random.default_rng(13)
    xn = 3 * rng.standard_normal(m.hp.n_embd)
    for il, tok in ((0, 9), (2, 9)):
        sel, wsel, _ = m.route(il, xn, tok)
        want = np.zeros(m.hp.n_embd)
        for e, we in zip(sel, wsel, strict=True):
            g = np.minimum(m.lw(il, "ffn_gate_exps.weight")[e] @ xn, 10)
            u = np.clip(m.lw(il, "ffn_up_exps.weight")[e] @ xn, -10, 10)
            want += m.lw(il, "ffn_down_exps.weight")[e] @ (g / (1 + np.exp(-g)) * u * we)
        g = np.minimum(m.lw(il, "ffn_gate_shexp.weight") @ xn, 10)
        u = np.clip(m.lw(il, "ffn_up_shexp.weight") @ xn, -10, 10)
        want += m.lw(il, "ffn_down_shexp.weight") @ (g / (1 + np.exp(-g)) * u)
        np.testing.assert_allclose(m.moe_sublayer(il, xn, tok), want, rtol=1e-12, atol=1e-15)
