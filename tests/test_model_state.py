"""The target's state handling: batch invariance, rollback to any prefix of a pass, capture,
context and token limits (docs/MODEL.md)."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_models import model as tiny

import ds4rt


@pytest.fixture(scope="module")
def float_path(tmp_path_factory):
    return str(tiny(tmp_path_factory, "float").target)


@pytest.fixture(scope="module")
def quant_path(tmp_path_factory):
    return str(tiny(tmp_path_factory, "quant").target)


def tokens(n, vocab, seed=0):
    rng = np.random.default_rng(seed)
    return [0] + rng.integers(3, vocab, n - 1).tolist()


def one_at_a_time(m, toks, n_ctx=512):
    s = m.session(n_ctx=n_ctx, max_batch=1)
    return np.stack([s.logits([t])[0] for t in toks])


@pytest.mark.parametrize("numerics", ["official", "llama.cpp"])
def test_batch_rows_bitwise_equal_single_token_decode(float_path, numerics):
    m = ds4rt.Model(float_path, numerics=numerics)
    toks = tokens(70, m.n_vocab)  # > 4 * top_k: the indexer's selection is exercised
    want = one_at_a_time(m, toks)
    for max_batch in (2, 5, 16, 32):
        got = m.session(n_ctx=512, max_batch=max_batch).logits(toks)
        assert np.array_equal(got, want), f"max_batch={max_batch}"


def test_batch_invariance_quantised_config(quant_path):
    m = ds4rt.Model(quant_path)
    toks = tokens(40, m.n_vocab, seed=3)
    want = one_at_a_time(m, toks)
    got = m.session(n_ctx=512, max_batch=13).logits(toks)
    assert np.array_equal(got, want)


def test_thread_count_does_not_change_results(float_path):
    toks = tokens(40, 512, seed=5)
    a = ds4rt.Model(float_path, n_threads=1).session(max_batch=8).logits(toks)
    b = ds4rt.Model(float_path, n_threads=3).session(max_batch=8).logits(toks)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("path_fixture", ["float_path", "quant_path"])
def test_rollback_to_every_prefix_is_exact(request, path_fixture):
    """Evaluate a prefix, a 12-token pass, keep j of it, continue: every logit row equals the
    straight run's, for every j (the pass crosses compressor emissions of ratio-4 and
    ratio-128 layers)."""
    m = ds4rt.Model(request.getfixturevalue(path_fixture))
    toks = tokens(150, m.n_vocab, seed=7)
    full = m.session(n_ctx=512, max_batch=16).logits(toks)
    prefix = 121  # the pass covers positions 121..132: ratio 4 and 128 emit at 123, 127, 131
    for keep in (0, 1, 2, 3, 6, 7, 11, 12):
        s = m.session(n_ctx=512, max_batch=16)
        s.eval(toks[:prefix])
        rng = np.random.default_rng(keep)
        speculative = toks[prefix : prefix + keep] + rng.integers(3, m.n_vocab, 12 - keep).tolist()
        s.logits(speculative)  # a verify pass: every row's logits are kept
        s.truncate(prefix + keep)
        assert s.position == prefix + keep
        assert np.array_equal(s.current_logits(), full[prefix + keep - 1]), keep
        rest = s.logits(toks[prefix + keep :])
        assert np.array_equal(rest, full[prefix + keep :]), keep


def test_rollback_twice_within_one_pass(float_path):
    m = ds4rt.Model(float_path)
    toks = tokens(60, m.n_vocab, seed=2)
    full = m.session(max_batch=16).logits(toks)
    s = m.session(max_batch=16)
    s.eval(toks[:40])
    s.logits(toks[40:52])
    s.truncate(50)
    s.truncate(44)
    assert np.array_equal(s.logits(toks[44:]), full[44:])


def test_truncate_outside_last_pass_is_refused(float_path):
    m = ds4rt.Model(float_path)
    s = m.session(max_batch=8)
    s.eval(tokens(20, m.n_vocab))
    with pytest.raises(ds4rt.errors.StateError, match="last pass"):
        s.truncate(5)  # the last pass of the 20-token eval started at 16
    with pytest.raises(ds4rt.errors.StateError):
        s.truncate(21)
    assert s.position == 20


def test_truncate_into_prefill_row_without_logits(float_path):
    m = ds4rt.Model(float_path)
    s = m.session(max_batch=8)
    s.eval(tokens(8, m.n_vocab))
    s.truncate(5)  # prefill keeps only its last row's logits
    assert s.current_logits() is None
    with pytest.raises(ds4rt.errors.StateError, match="no logits"):
        s.generate([], max_tokens=1)
    s.truncate(5)  # the session itself is fine
    s.eval([7])
    assert s.current_logits() is not None


def test_context_overflow_and_bad_tokens_leave_the_session_unchanged(float_path):
    m = ds4rt.Model(float_path)
    s = m.session(n_ctx=20, max_batch=8)
    toks = tokens(20, m.n_vocab)
    s.eval(toks[:15])
    before = s.current_logits().copy()
    with pytest.raises(ds4rt.errors.OutOfRangeError, match="n_ctx 20"):
        s.eval(toks[:6])
    with pytest.raises(ds4rt.errors.OutOfRangeError, match="outside the vocabulary"):
        s.eval([5, m.n_vocab])
    with pytest.raises(ds4rt.errors.OutOfRangeError):
        s.eval([-1])
    assert s.position == 15
    assert np.array_equal(s.current_logits(), before)
    full = m.session(n_ctx=20, max_batch=8).logits(toks)
    assert np.array_equal(s.logits(toks[15:]), full[15:])


def test_capture_is_the_mean_of_the_layer_output_streams(float_path):
    m = ds4rt.Model(float_path)
    info = m.info
    toks = tokens(30, m.n_vocab)
    layers = [1, 3]
    s = m.session(max_batch=32)
    s.set_capture(layers)
    seen = {}
    s.set_trace(lambda layer, stage, pos, data: seen.__setitem__((layer, stage, pos), data))
    s.eval(toks)
    for slot, layer in enumerate(layers):
        first, rows = s.capture(slot)
        assert first == 0 and rows.shape == (30, info["n_embd"])
        for pos in range(30):
            streams = seen[(layer, "layer_out", pos)].reshape(info["n_hc"], info["n_embd"])
            np.testing.assert_allclose(rows[pos], streams.mean(axis=0), rtol=1e-6, atol=1e-6)
    # the same rows whatever the batch size
    s1 = m.session(max_batch=1)
    s1.set_capture(layers)
    for pos, t in enumerate(toks):
        s1.eval([t])
        assert np.array_equal(s1.capture(1)[1][0], s.capture(1)[1][pos])


def test_capture_arguments_are_checked(float_path):
    s = ds4rt.Model(float_path).session()
    with pytest.raises(ds4rt.errors.OutOfRangeError):
        s.set_capture([4])
    with pytest.raises(ds4rt.errors.InvalidArgumentError):
        s.set_capture([2, 1])
    with pytest.raises(ds4rt.errors.OutOfRangeError):
        s.capture(0)
