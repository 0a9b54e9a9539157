"""The PyTorch training model (tools/train/) against the float64 reference (tests/reference).

The PyTorch model evaluates whole sequences at once (masks instead of streaming state); the
reference runs one token at a time. In float64 both must give the same logits and DSpark
captures up to rounding, with ds4rt's official numerics (FP8 KV, FP4 indexer) and without.
Skipped without torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from reference import dsv4_ref as R
from reference import lowp, tiny

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "train"))

import numerics as TN  # noqa: E402

import model as TM  # noqa: E402

HP = tiny.tiny_float_hparams()
N_TOK = 200  # > 4 * K_i (indexer selection), >= 128 (one ratio-128 row)


@pytest.fixture(scope="module")
def weights():
    return tiny.random_weights(HP, seed=0)


def _tokens(n, seed=3):
    rng = np.random.default_rng(seed)
    return [0] + [int(t) for t in rng.integers(0, HP.n_vocab, n - 1)]


def _torch_model(weights, simulate_quant=True, dtype=torch.float64):
    m = TM.Target(TM.Shape.from_hparams(HP), dtype=dtype, simulate_quant=simulate_quant)
    m.load_numpy(weights)
    return m


@pytest.mark.parametrize(("simulate_quant", "dense"), [(True, False), (False, False), (True, True)])
def test_logits_and_captures_equal_the_reference(weights, simulate_quant, dense, monkeypatch):
    monkeypatch.setattr(TM, "DENSE_EXPERTS", dense)
    toks = _tokens(N_TOK)
    ref = R.Model(HP, weights, simulate_quant=simulate_quant)
    want, caps = [], []
    for t in toks:
        lg, info = ref.forward_token(t, capture_layers=(1, 2, 3))
        want.append(lg)
        caps.append(info["capture"])
    want = np.array(want)
    assert [ls.n_comp for ls in ref.state.layers] == [0, 50, 1, 50]  # the paths are exercised
    m = _torch_model(weights, simulate_quant)
    with torch.no_grad():
        got, gcaps = m(torch.tensor([toks]), capture_layers=(1, 2, 3))
    got = got[0].numpy()
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-9 * scale
    assert (got.argmax(-1) == want.argmax(-1)).all()
    for il in (1, 2, 3):
        ref_cap = np.array([c[il] for c in caps])
        assert np.abs(gcaps[il][0].numpy() - ref_cap).max() <= 1e-9 * np.abs(ref_cap).max()


def test_the_simulations_matter(weights):
    """Official numerics change the logits (so the test above checks them)."""
    toks = torch.tensor([_tokens(64)])
    with torch.no_grad():
        a = _torch_model(weights, True)(toks)
        b = _torch_model(weights, False)(toks)
    assert (a - b).abs().max() > 1e-6


def test_roundtrips_equal_lowp_including_ties():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128)) * np.exp(rng.uniform(-8, 8, (64, 1)))
    # exact ties: midpoints of the grids at scale 1 (amax pinned by the last element)
    x[0, :8] = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -1.25]
    x[0, 31] = 6.0
    x[1, :6] = [1.0625, 1.1875, 17.0, 208.0, 2.0**-10, 3 * 2.0**-10]
    x[1, 63] = 448.0
    xt = torch.tensor(x)
    np.testing.assert_array_equal(
        TN.blockwise_roundtrip(xt, 64, 448.0, 1e-4, TN.E4M3).numpy(), lowp.fp8_roundtrip(x)
    )
    np.testing.assert_array_equal(
        TN.blockwise_roundtrip(xt, 32, 6.0, 6.0 * 2.0**-126, TN.E2M1).numpy(),
        lowp.fp4_roundtrip(x),
    )
    np.testing.assert_allclose(
        (xt[:, :64] @ TN.hadamard_matrix(64, torch.float64)).numpy(), lowp.hadamard(x[:, :64])
    )


def test_straight_through_gradients_and_training_terms(weights):
    """A float32 training step: finite loss and gradients; the simulations pass gradients
    straight through; the indexer learns only from its auxiliary loss."""
    m = _torch_model(weights, True, torch.float32)
    toks = torch.tensor([_tokens(96), _tokens(96, seed=4)])
    aux = {}
    logits = m(toks, aux=aux)
    ce = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, HP.n_vocab), toks[:, 1:].reshape(-1)
    )
    assert torch.isfinite(ce) and len(aux["indexer_kl"]) == 2 and set(aux["loads"]) == {1, 2, 3}
    ce.backward()
    kv = m.w("blk.1.attn_kv.weight").grad
    assert kv is not None and torch.isfinite(kv).all() and kv.abs().sum() > 0
    assert m.w("blk.1.indexer.attn_q_b.weight").grad is None  # no gradient through the top-k
    m.zero_grad()
    sum(aux["indexer_kl"]).backward()
    g = m.w("blk.1.indexer.attn_q_b.weight").grad
    assert g is not None and g.abs().sum() > 0
    assert m.w("blk.1.attn_kv.weight").grad is None  # the indexer loss leaves the model alone
    x = torch.linspace(-3, 3, 64, requires_grad=True)
    TN.fp8_st(x).sum().backward()
    assert torch.equal(x.grad, torch.ones(64))


def test_router_bias_balancing_moves_against_the_load(weights):
    m = _torch_model(weights, True, torch.float32)
    load = torch.tensor([10.0, 0, 0, 0, 0, 0, 0, 6.0])
    before = m.w("blk.2.exp_probs_b.bias").clone()
    TM.update_router_bias(m, {2: load}, {2: "blk.2.exp_probs_b.bias"}, 0.01)
    step = m.w("blk.2.exp_probs_b.bias") - before
    assert step[0] < 0 and step[7] < 0 and (step[1:7] > 0).all()


def test_shapes_are_the_reference_shapes():
    sh = TM.Shape.from_hparams(HP)
    want = R.expected_shapes(HP)
    got = TM.target_shapes(sh)
    assert set(got) == set(want)
    for name, shape in want.items():
        assert tuple(got[name]) == tuple(shape), name
