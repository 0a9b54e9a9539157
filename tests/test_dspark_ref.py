"""The float64 DSpark reference (tests/reference/dspark_ref.py): support-file metadata and
validation, the per-stage rings, the reference alignment of drafter and verifier
(docs/DSPARK_REFERENCE.md, steps 1 and 2), the stage and head math against independent restatements,
and greedy speculative decoding equal to plain decoding token for token."""

import math

import numpy as np
import pytest
from dspark_helpers import (
    context_row_restated,
    forced_generate,
    make_models,
    rope_restated,
    target_captures,
    tiny_pair,
)
from reference import dspark_ref as D
from reference import dspark_tiny as DT
from reference import dsv4_ref as R

PROMPT = [0, 17, 300, 45, 9, 511, 128]


@pytest.fixture(scope="module")
def models():
    return make_models()


def _session(m, dr, prompt=PROMPT, **kw):
    s = D.SpeculativeSession(m, dr, **kw)
    s.prefill(prompt)
    return s


# --- metadata (docs/DSPARK.md "Support file layout") -------------------------------------------
def _fields(spelling="bare", **over):
    hp, _, dp, _ = tiny_pair()
    f = DT.support_metadata(dp, spelling)
    fmt = DT.SPELLINGS[spelling]
    for k, v in over.items():
        f[fmt.format(k)] = v
    return f


def _read(fields, n_layer=4, n_vocab=512):
    return D.read_support_metadata(fields, 3, n_layer, n_vocab)


@pytest.mark.parametrize("spelling", ["dotted", "underscore", "bare"])
def test_three_key_spellings_load(tmp_path, spelling):
    hp, w, dp, sw = tiny_pair()
    path = tmp_path / "support.gguf"
    DT.write_support_gguf(path, dp, sw, spelling=spelling)
    got, weights = D.load_support(path, hp)
    assert got == dp
    assert set(got.keys.values()) == {DT.SPELLINGS[spelling].format(k) for k in D.METADATA_KEYS}
    assert all(np.array_equal(weights[k], sw[k]) for k in sw)


def test_spelling_precedence():
    """The first hit among deepseek4.dspark.<k>, deepseek4.dspark_<k>, dspark.<k> wins."""
    f = {**_fields("bare", block_size=3), **_fields("underscore", block_size=4)}
    assert _read(f).block_size == 4
    f.update(_fields("dotted", block_size=2))
    got = _read(f)
    assert got.block_size == 2 and got.keys["block_size"] == "deepseek4.dspark.block_size"
    assert _read({**_fields("bare"), "deepseek4.dspark.markov_rank": 7}).markov_rank == 7


@pytest.mark.parametrize("spelling", ["dotted", "underscore", "bare"])
@pytest.mark.parametrize(
    "ids, why",
    [
        ([1, 2, 4], "out of range"),
        ([0, 1, 2, 3, 4], "out of range"),
        ([1, 3, 2], "not strictly increasing"),
        ([2, 2, 3], "not strictly increasing"),
        ([-1, 2, 3], "negative"),
        ([], "empty"),
        (list(range(9)), "at most 8"),
    ],
)
def test_bad_target_layer_ids_rejected(spelling, ids, why):
    key = DT.SPELLINGS[spelling].format("target_layer_ids")
    with pytest.raises(D.SupportError, match=why) as e:
        _read(_fields(spelling, target_layer_ids=ids), n_layer=4 if len(ids) < 9 else 20)
    assert key in str(e.value)


def test_bad_target_layer_ids_in_a_file(tmp_path):
    """The same checks through a real GGUF, target ids stored as INT32 (allowed)."""
    hp, w, dp, sw = tiny_pair()
    m = R.Model(hp, w)
    for ids, why in (([1, 2, 4], "out of range"), ([3, 2, 1], "increasing"), ([-2, 1], "neg")):
        path = tmp_path / f"bad{len(ids)}{ids[0]}.gguf"
        bad = D.DSparkParams(dp.block_size, dp.markov_rank, dp.noise_token_id, ids, 3)
        DT.write_support_gguf(path, bad, sw, spelling="underscore", ids_type="INT32")
        with pytest.raises(D.SupportError, match=why) as e:
            D.Drafter.from_gguf(path, m)
        assert "deepseek4.dspark_target_layer_ids" in str(e.value)


@pytest.mark.parametrize(
    "over, match",
    [
        ({"block_size": 0}, "block_size = 0"),
        ({"block_size": 17}, "block_size = 17"),
        ({"markov_rank": 0}, "markov_rank = 0"),
        ({"noise_token_id": 512}, "noise_token_id = 512"),
        ({"block_size": 2.0}, "expected an integer"),
    ],
)
def test_other_metadata_rejected(over, match):
    with pytest.raises(D.SupportError, match=match):
        _read(_fields("bare", **over))


def test_missing_key_names_all_spellings():
    f = _fields("bare")
    del f["dspark.noise_token_id"]
    with pytest.raises(D.SupportError, match="deepseek4.dspark_noise_token_id"):
        _read(f)


def test_tensor_table_checked():
    hp, w, dp, sw = tiny_pair()
    m = R.Model(hp, w)
    bad = dict(sw)
    del bad["mtp.1.attn_kv.weight"]
    with pytest.raises(D.SupportError, match="missing mtp.1.attn_kv.weight"):
        D.Drafter(m, dp, bad)
    bad = {**sw, "mtp.1.ffn_gate_tid2eid.weight": np.zeros((512, 2))}
    with pytest.raises(D.SupportError, match="unexpected tensor mtp.1.ffn_gate_tid2eid"):
        D.Drafter(m, dp, bad)
    wrong_rank = D.DSparkParams(5, 16, dp.noise_token_id, dp.target_layer_ids, 3)
    with pytest.raises(D.SupportError, match="markov_w1.weight: shape"):
        D.Drafter(m, wrong_rank, sw)


def test_stage_count_from_tensor_names(tmp_path):
    hp, w, _, _ = tiny_pair()
    dp2 = DT.tiny_dspark_params(hp, n_stages=2, target_layer_ids=(2, 3))
    sw2 = DT.random_support_weights(hp, dp2, 5)
    path = tmp_path / "two.gguf"
    DT.write_support_gguf(path, dp2, sw2)
    dr = D.Drafter.from_gguf(path, R.Model(hp, w))
    assert dr.dp.n_stages == 2 and dr.stages.hp.n_layer == 2
    assert D.stage_count_from_names(["mtp.0.a", "mtp.4.b", "x"]) == 5
    with pytest.raises(D.SupportError, match="at most 8"):
        D.stage_count_from_names(["mtp.8.norm.weight"])
    with pytest.raises(D.SupportError, match="not a DSpark support file"):
        D.stage_count_from_names(["blk.0.attn_kv.weight"])


def test_gguf_drafter_equals_in_memory(tmp_path, models):
    m, dr = models
    path = tmp_path / "support.gguf"
    DT.write_support_gguf(path, dr.dp, tiny_pair()[3])
    dr2 = D.Drafter.from_gguf(path, m)
    s = _session(m, dr)
    a = dr.propose(s.anchor, s.p, state=s.dstate)
    b = dr2.propose(s.anchor, s.p, state=s.dstate)
    assert np.array_equal(a.base_logits, b.base_logits) and a.drafts == b.drafts


# --- rings (docs/DSPARK_REFERENCE.md, steps 1 and 7) -------------------------------------------
def test_ring_slots_window_and_crop():
    r = D.StageRing(window=4, capacity=6, width=1)
    for q in range(9):
        r.append(q, [q])
    assert r.start == 3 and r.end == 9
    assert list(r.window_positions()) == [5, 6, 7, 8]
    assert r.window_rows()[:, 0].tolist() == [5, 6, 7, 8]
    assert [r.slot(q) for q in range(3, 9)] == [3, 4, 5, 0, 1, 2]
    r.crop_to(7)  # keeps 3..6: the window of 7 is 3..6
    assert list(r.window_positions()) == [3, 4, 5, 6]
    with pytest.raises(D.RingError, match="overwritten"):
        r.crop_to(6)  # would need position 2
    with pytest.raises(D.RingError, match="only reaches"):
        r.crop_to(8)
    with pytest.raises(D.RingError, match="ends at 7"):
        r.append(8, [8])
    r.append(7, [70])  # re-appending after a crop overwrites the slot
    assert r.window_rows()[:, 0].tolist() == [4, 5, 6, 70]
    fresh = D.StageRing(window=4, capacity=6, width=1, base=10)
    fresh.append(10, [1])
    assert list(fresh.window_positions()) == [10]  # positions before base never existed
    with pytest.raises(D.RingError, match="ends at 11"):
        fresh.append(12, [1])


def test_default_capacity_allows_verify_rollback(models):
    m, dr = models
    st = dr.new_state()
    r = st.rings[0]
    assert r.capacity == dr.window + dr.block_size + 1
    for q in range(r.capacity + 3):
        r.append(q, np.zeros(m.hp.head_dim))
    end = r.end
    r.crop_to(end - dr.block_size - 1)  # a whole rejected verify pass
    with pytest.raises(D.RingError):
        r.crop_to(r.end - 1)


# --- alignment (docs/DSPARK_REFERENCE.md, steps 1 and 2) ---------------------------------------
def test_reference_alignment(models):
    m, dr = models
    s = _session(m, dr)
    p, a = s.p, s.anchor
    assert p == len(PROMPT) - 1 and all(r.end == p + 1 for r in s.dstate.rings)
    before = [r.window_rows() for r in s.dstate.rings]
    prop = dr.propose(a, p, state=s.dstate)
    B = dr.block_size
    assert prop.ids == [a] + [dr.dp.noise_token_id] * (B - 1)
    np.testing.assert_array_equal(prop.positions, np.arange(p + 1, p + B + 1))
    for t in prop.stages:
        np.testing.assert_array_equal(t["positions"], np.arange(p + 1, p + B + 1))
        np.testing.assert_array_equal(t["ctx_positions"], np.arange(0, p + 1))
    # proposing writes nothing: block rows never enter the rings
    for r, b in zip(s.dstate.rings, before, strict=True):
        assert r.end == p + 1 and np.array_equal(r.window_rows(), b)
    # the anchor's own row is not in the context: another anchor sees the same rings
    other = dr.propose((a + 1) % 512, p, state=s.dstate)
    for t, u in zip(prop.stages, other.stages, strict=True):
        assert np.array_equal(t["ctx_rows"], u["ctx_rows"])
    with pytest.raises(D.RingError, match="end at p"):
        dr.propose(a, p + 1, state=s.dstate)
    with pytest.raises(D.RingError, match="end at p"):
        dr.propose(a, p - 1, state=s.dstate)


def test_rings_hold_exactly_the_committed_rows(models):
    """After a run with accepts and rejects, every stage ring holds, for each committed position
    q of its window, kv_norm_s(wkv_s(main_x(q))) recomputed from a fresh target run: no block
    rows, no rejected rows, nothing from the anchor before it was committed."""
    m, dr = models
    out, s = forced_generate(m, dr, PROMPT, 14, pattern=[2, 0, 5, 1])
    assert {c.n_accepted for c in s.cycles} >= {0, 1, 2}
    committed = PROMPT + out[:-1]  # everything but the pending anchor
    assert s.p == len(committed) - 1
    caps, _ = target_captures(m, committed, dr.capture_layers)
    for st, ring in enumerate(s.dstate.rings):
        assert ring.end == s.p + 1
        for q in ring.window_positions():
            want = context_row_restated(dr, st, caps[q], q)
            np.testing.assert_allclose(ring.rows[ring.slot(q)], want, rtol=0, atol=1e-12)


def test_block_attention_restated(models):
    """Stage 0 attention of every block row, restated: q and K/V of the block rows at
    p+1..p+B, keys = window rows then all B block rows (non-causal), sinks, inverse RoPE."""
    m, dr = models
    s = _session(m, dr)
    prop = dr.propose(s.anchor, s.p, state=s.dstate)
    t = prop.stages[0]
    hp, w = dr.hp, dr.w
    eps = hp.rms_eps

    def norm(x, g=1.0):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g

    keys = list(t["ctx_rows"])
    qs = []
    for i, xn in enumerate(t["attn_xn"]):
        pos = s.p + 1 + i
        qr = norm(w["mtp.0.attn_q_a.weight"] @ xn, w["mtp.0.attn_q_a_norm.weight"])
        q = norm((w["mtp.0.attn_q_b.weight"] @ qr).reshape(hp.n_head, hp.head_dim))
        qs.append(rope_restated(q, pos, hp.n_rot, hp.rope_base))
        kv = norm(w["mtp.0.attn_kv.weight"] @ xn, w["mtp.0.attn_kv_a_norm.weight"])
        kv = rope_restated(kv, pos, hp.n_rot, hp.rope_base)
        kv[: hp.d_nope] = R.fp8_roundtrip(kv[: hp.d_nope])
        keys.append(kv)
    keys = np.array(keys)
    sinks = w["mtp.0.attn_sinks.weight"]
    for i, q in enumerate(qs):
        o = np.zeros((hp.n_head, hp.head_dim))
        for h in range(hp.n_head):
            z = keys @ q[h] / math.sqrt(hp.head_dim)
            e = np.exp(z - z.max())
            o[h] = e @ keys / (e.sum() + np.exp(sinks[h] - z.max()))
        o = rope_restated(o, -(s.p + 1 + i), hp.n_rot, hp.rope_base)  # inverse rotation
        np.testing.assert_allclose(t["attn_o"][i], o, rtol=1e-10, atol=1e-12)
    assert len(keys) == s.p + 1 + dr.block_size


def test_block_is_non_causal(models):
    """Slot 0 sees the later block rows: a shorter block changes slot 0's output."""
    m, dr = models
    s = _session(m, dr)
    full = dr.block_forward(s.anchor, s.p, s.dstate)
    one = dr.block_forward(s.anchor, s.p, s.dstate, block_size=1)
    assert not np.allclose(full[2][0], one[2][0])
    with pytest.raises(ValueError, match="trained block"):
        dr.block_forward(s.anchor, s.p, s.dstate, block_size=dr.block_size + 1)


def test_window_bounds_visibility():
    """With a 4-row window only positions p-3..p are visible: changing an older stored row
    changes nothing, changing a visible one changes the block."""
    m, dr = make_models(window=4)
    s = _session(m, dr)
    p = s.p
    base = dr.block_forward(s.anchor, p, s.dstate)
    assert len(base[5][0]["ctx_rows"]) == 4
    old = s.dstate.copy()
    ring = old.rings[1]
    assert ring.start <= p - 4  # the older row is still stored
    ring.rows[ring.slot(p - 4)] += 1.0
    assert np.array_equal(dr.block_forward(s.anchor, p, old)[4], base[4])
    ring.rows[ring.slot(p - 3)] += 1.0
    assert not np.allclose(dr.block_forward(s.anchor, p, old)[4], base[4])


def test_heads_restated(models):
    """U_i = output·RMSNorm(h_i, norm); corrected_i = U_i + W2·W1[prev_i] with prev_0 = anchor
    and prev_i = d_i; c_i = σ(proj·[h_i ; W1[prev_i]]) on the pre-norm h_i; greedy argmax."""
    m, dr = models
    s = _session(m, dr)
    prop = dr.propose(s.anchor, s.p, state=s.dstate)
    hp, w = dr.hp, dr.w
    last = f"mtp.{dr.dp.n_stages - 1}."
    w1 = w[last + "markov_head.markov_w1.weight"]
    w2 = w[last + "markov_head.markov_w2.weight"]
    proj = w[last + "confidence_head.proj.weight"][0]
    hn = prop.h / np.sqrt(np.mean(prop.h**2, axis=1, keepdims=True) + hp.rms_eps)
    hn = hn * w[last + "norm.weight"]
    # a restated product sums in another order (BLAS blocking varies by machine): a logit near 0
    # carries the rounding of its larger terms, so the slack is relative to the row's scale
    want = hn @ m.w["output.weight"].T
    np.testing.assert_allclose(prop.base_logits, want, rtol=1e-12, atol=1e-13 * np.abs(want).max())
    prev = [s.anchor] + prop.drafts[:-1]
    assert prop.prev == prev
    for i, pv in enumerate(prev):
        corr = prop.base_logits[i] + w2 @ w1[pv]
        np.testing.assert_allclose(prop.corrected[i], corr, rtol=1e-12, atol=1e-12)
        assert prop.drafts[i] == int(np.argmax(corr))
        c = 1 / (1 + np.exp(-(proj @ np.concatenate([prop.h[i], w1[pv]]))))
        assert prop.confidence[i] == pytest.approx(c, rel=1e-12)
        c_post = proj @ np.concatenate([prop.hn[i], w1[pv]])
        assert abs(c_post - prop.conf_logits[i]) > 1e-6  # the post-norm row (ds4) differs
    # h is the hc_head collapse of the last stage output, before norm
    X = prop.stages[-1]["hc_out"]
    y = R.hc_head(
        X[0],
        w[last + "hc_head_fn.weight"],
        w[last + "hc_head_scale.weight"],
        w[last + "hc_head_base.weight"],
        norm_eps=hp.rms_eps,
        hc_eps=hp.hc_eps,
    )
    np.testing.assert_array_equal(prop.h[0], y)


def test_confidence_cut(models):
    m, dr = models
    s = _session(m, dr)
    full = dr.propose(s.anchor, s.p, state=s.dstate)
    c = full.confidence
    i = int(np.argmin(c))
    thr = float(c[i]) + 1e-9  # cut at the first slot at or below the minimum
    first = int(np.argmax(c < thr))
    cut = dr.propose(s.anchor, s.p, threshold=thr, state=s.dstate)
    assert cut.cut == first and cut.drafts == full.drafts[:first]
    np.testing.assert_array_equal(cut.conf_logits, full.conf_logits[: first + 1])
    assert dr.propose(s.anchor, s.p, threshold=0.0, state=s.dstate).cut is None
    none = dr.propose(s.anchor, s.p, threshold=1.0, state=s.dstate)
    assert none.drafts == [] and none.cut == 0
    assert dr.propose(s.anchor, s.p, state=s.dstate, n_max=2).drafts == full.drafts[:2]


# --- greedy speculative decoding == plain decoding ----------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "prompt, n",
    [([0], 1), ([0], 9), (PROMPT, 6), ([0, 401, 33, 33, 33, 7, 250, 19, 90, 64, 2, 3], 23)],
)
def test_greedy_speculative_equals_plain(models, prompt, n):
    m, dr = models
    want = D.plain_generate(m, prompt, n)
    assert D.speculative_generate(m, dr, prompt, n) == want
    assert D.speculative_generate(m, dr, prompt, n, threshold=0.5) == want
    out, s = forced_generate(m, dr, prompt, n, pattern=[5, 0, 3, 1, 4, 2])
    assert out == want
    if n >= 20:
        assert {c.n_accepted for c in s.cycles} == set(range(6))


@pytest.mark.slow
def test_greedy_with_wrapping_rings_and_both_ring_modes():
    """A 4-row window (rings wrap every 10 positions) and 'speculative' ring mode (append the
    whole verify pass, crop back) give the plain output and identical rings; the target state
    after the run equals a fresh run over the committed tokens."""
    m, dr = make_models(window=4)
    prompt = [0, 5, 6, 7, 8, 9, 10, 11]
    want = D.plain_generate(m, prompt, 30)
    a, sa = forced_generate(m, dr, prompt, 30, pattern=[5, 2, 0, 4])
    b, sb = forced_generate(m, dr, prompt, 30, pattern=[5, 2, 0, 4], ring_mode="speculative")
    assert a == want and b == want
    for ra, rb in zip(sa.dstate.rings, sb.dstate.rings, strict=True):
        assert list(ra.window_positions()) == list(rb.window_positions())
        assert np.array_equal(ra.window_rows(), rb.window_rows())
    committed = prompt + a[:-1]
    _, fresh = target_captures(m, committed, dr.capture_layers)
    for la, lf in zip(sa.state.layers, fresh.layers, strict=True):
        for rows_a, rows_f in (
            (la.raw, lf.raw),
            (la.comp, lf.comp),
            (la.index_comp, lf.index_comp),
        ):
            assert len(rows_a) == len(rows_f)
            assert all(np.array_equal(x, y) for x, y in zip(rows_a, rows_f, strict=True))
        for cs, cf in ((la.comp_state, lf.comp_state), (la.index_state, lf.index_state)):
            if cs is not None:
                assert np.array_equal(cs.kv, cf.kv) and np.array_equal(cs.score, cf.score)
    assert sa.state.n_tokens == fresh.n_tokens == len(committed)


def test_seeding_only_the_last_window(models):
    """Committing only the last W prompt rows (rings reset at n-W) drafts exactly as committing
    them all: the drafter sees min(W, p+1) rows."""
    m, dr = make_models(window=4)
    s = _session(m, dr)
    n = len(PROMPT)
    caps, _ = target_captures(m, PROMPT, dr.capture_layers)
    st = dr.new_state(base=n - 4)
    for q in range(n - 4, n):
        dr.commit(st, q, caps[q])
    a = dr.propose(s.anchor, s.p, state=s.dstate)
    b = dr.propose(s.anchor, s.p, state=st)
    assert np.array_equal(a.base_logits, b.base_logits) and a.drafts == b.drafts


def test_stop_token(models):
    m, dr = models
    plain = D.plain_generate(m, PROMPT, 12)
    stop = plain[4]
    want = D.plain_generate(m, PROMPT, 12, stop_ids=[stop])
    assert want == plain[: plain.index(stop) + 1]
    got, _ = forced_generate(m, dr, PROMPT, 12, pattern=[5], stop_ids=[stop])
    assert got == want


def test_real_support_table():
    """support_shapes at the real dimensions is ds4's 81-tensor table (docs/TINY_MODELS.md,
    support tensors), written here in GGML ne order."""
    hp = R.HParams()
    dp = D.DSparkParams(5, 256, 128799, (40, 41, 42), 3)
    ne = {k: tuple(reversed(v)) for k, v in D.support_shapes(hp, dp).items()}
    assert len(ne) == 81
    assert sum(k.startswith("mtp.1.") for k in ne) == 24
    want = {
        "mtp.0.main_proj.weight": (12288, 4096),
        "mtp.0.main_norm.weight": (4096,),
        "mtp.1.hc_attn_fn.weight": (16384, 24),
        "mtp.1.attn_q_b.weight": (1024, 32768),
        "mtp.1.attn_kv.weight": (4096, 512),
        "mtp.1.attn_sinks.weight": (64,),
        "mtp.1.attn_output_a.weight": (4096, 8192),
        "mtp.1.attn_output_b.weight": (8192, 4096),
        "mtp.1.ffn_gate_inp.weight": (4096, 256),
        "mtp.1.exp_probs_b.bias": (256,),
        "mtp.1.ffn_gate_exps.weight": (4096, 2048, 256),
        "mtp.1.ffn_down_exps.weight": (2048, 4096, 256),
        "mtp.1.ffn_down_shexp.weight": (2048, 4096),
        "mtp.2.norm.weight": (4096,),
        "mtp.2.hc_head_fn.weight": (16384, 4),
        "mtp.2.hc_head_scale.weight": (1,),
        "mtp.2.markov_head.markov_w1.weight": (256, 129280),
        "mtp.2.markov_head.markov_w2.weight": (256, 129280),
        "mtp.2.confidence_head.proj.weight": (4352, 1),
    }
    for k, v in want.items():
        assert ne[k] == v, k
    assert not any("tid2eid" in k or "compressor" in k or "indexer" in k for k in ne)


def test_in_memory_params_checked(models):
    m, dr = models
    bad = D.DSparkParams(5, 32, dr.dp.noise_token_id, (2, 1, 3), 3)
    with pytest.raises(D.SupportError, match="dspark.target_layer_ids .* not strictly"):
        D.Drafter(m, bad, dr.w)
    bad = D.DSparkParams(5, 32, 512, (1, 2, 3), 3)
    with pytest.raises(D.SupportError, match="noise_token_id = 512"):
        D.Drafter(m, bad, dr.w)
