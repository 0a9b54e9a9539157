"""The PyTorch drafter (tools/train/drafter.py) against the float64 DSpark reference.

The reference streams: target positions 0..p one at a time, context rows committed into rings,
then one proposal after the anchor at p+1. The PyTorch drafter evaluates the blocks of many
anchors of one sequence at once. In float64 both give the same pre-norm hidden, base logits,
Markov-corrected logits, confidences and greedy drafts. Skipped without torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from reference import dspark_ref as D
from reference import dspark_tiny, tiny
from reference import dsv4_ref as R

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools" / "train"))

import drafter as TD  # noqa: E402

import model as TM  # noqa: E402

HP = tiny.tiny_float_hparams()
DP = dspark_tiny.tiny_dspark_params(HP)
WINDOW = 16  # the target's window: rows before it must not count
ANCHORS = (3, 20, 33)  # last committed positions p (p = 33 has a full window)


@pytest.fixture(scope="module")
def pair():
    tw = tiny.random_weights(HP, seed=0)
    sw = dspark_tiny.random_support_weights(HP, DP, seed=1)
    return tw, sw


def _tokens(n, seed=5):
    rng = np.random.default_rng(seed)
    return [0] + [int(t) for t in rng.integers(0, HP.n_vocab - 8, n - 1)]


def _shape():
    return TM.Shape.from_hparams(HP, markov_rank=DP.markov_rank, block_size=DP.block_size)


def test_support_shapes_are_the_reference_layout():
    got = TD.support_shapes(_shape())
    want = D.support_shapes(HP, DP)
    assert got == {k: tuple(v) for k, v in want.items()}


@pytest.mark.parametrize("simulate_quant", [True, False])
def test_blocks_heads_and_greedy_drafts_equal_the_reference(pair, simulate_quant):
    tw, sw = pair
    toks = _tokens(max(ANCHORS) + 2 + DP.block_size)
    target = R.Model(HP, tw, simulate_quant=simulate_quant)
    ref = D.Drafter(target, DP, sw, window=WINDOW)
    st = ref.new_state()
    want = {}
    for pos, t in enumerate(toks[: max(ANCHORS) + 1]):
        _, info = target.forward_token(t, capture_layers=DP.target_layer_ids)
        ref.commit(st, pos, info["capture"])
        if pos in ANCHORS:
            want[pos] = ref.propose(toks[pos + 1], pos, state=st)

    sh = _shape()
    tt = TM.Target(sh, dtype=torch.float64, simulate_quant=simulate_quant)
    tt.load_numpy(tw)
    dr = TD.Drafter(
        sh, tt, DP.noise_token_id, window=WINDOW, dtype=torch.float64, simulate_quant=simulate_quant
    )
    dr.load_numpy(sw)
    x = torch.tensor([toks])
    anchors = torch.tensor([list(ANCHORS)])
    with torch.no_grad():
        _, caps = tt(x, capture_layers=DP.target_layer_ids)
        h, U = dr.blocks([caps[il] for il in DP.target_layer_ids], x, anchors)
        drafts, cor_g, conf_g = dr.greedy(h, U, x.gather(1, anchors + 1))
    for a, p in enumerate(ANCHORS):
        w = want[p]
        assert np.abs(h[0, a].numpy() - w.h).max() <= 1e-9 * np.abs(w.h).max()
        assert np.abs(U[0, a].numpy() - w.base_logits).max() <= 1e-9 * np.abs(w.base_logits).max()
        assert drafts[0, a].tolist() == w.drafts
        np.testing.assert_allclose(cor_g[0, a].numpy(), w.corrected, rtol=0, atol=1e-9)
        np.testing.assert_allclose(conf_g[0, a].numpy(), w.conf_logits, rtol=0, atol=1e-9)
        # teacher-forced heads with the reference's predecessors give the same numbers
        prev = torch.tensor([[w.prev]])
        cor, conf = dr.heads(h[:, a : a + 1], U[:, a : a + 1], prev)
        np.testing.assert_allclose(cor[0, 0].detach().numpy(), w.corrected, rtol=0, atol=1e-9)
        np.testing.assert_allclose(conf[0, 0].detach().numpy(), w.conf_logits, rtol=0, atol=1e-9)


def test_rows_outside_the_window_do_not_matter(pair):
    """The block after p sees exactly the context rows of positions p-3..p (window 4): a
    captured row outside changes nothing, one inside changes the base logits."""
    tw, sw = pair
    sh = _shape()
    tt = TM.Target(sh, dtype=torch.float64)
    tt.load_numpy(tw)
    dr = TD.Drafter(sh, tt, DP.noise_token_id, window=4, dtype=torch.float64)
    dr.load_numpy(sw)
    toks = _tokens(40)
    p = 30

    x = torch.tensor([toks])
    with torch.no_grad():
        _, caps = tt(x, capture_layers=DP.target_layer_ids)
        c = [caps[il].clone() for il in DP.target_layer_ids]
        ref = dr.blocks(c, x, torch.tensor([[p]]))[1]
        for q, changes in ((p - 4, False), (p - 3, True), (p + 1, False)):
            c2 = [t.clone() for t in c]
            c2[0][0, q] += 1.0
            out = dr.blocks(c2, x, torch.tensor([[p]]))[1]
            assert (not torch.equal(out, ref)) == changes, q


def test_training_labels_follow_the_targets_chain():
    """tools/train/train_drafter.py: slot i's label is t[p+1+i] and counts only while the
    window continues the target's chain (x[p+2+k] = t[p+1+k] for k < i) and no label so far is
    EOS; the decoder's cycles jump by the accepted drafts + 1."""
    import train_drafter as TR

    eos, Bk = 1, 4
    t = torch.tensor([[10, 11, 12, 13, 14, 15, 16, 17, 18, 19]])  # argmax after position j
    x = torch.tensor([[5, 6, 11, 12, 99, 14, 1, 16, 17, 18]])  # x[j+1] = t[j] except at 4 and 6
    t[0, 5] = eos  # the target ends the document after position 5
    pool = TR.Pool(x, torch.tensor([1]), torch.tensor([10]), [], None, t)
    y, valid = TR.labels(pool, torch.tensor([0]), torch.tensor([[0, 2]]), Bk, eos)
    assert y.tolist() == [[[11, 12, 13, 14], [13, 14, 1, 16]]]
    # anchor 0: x[2] = t[1], x[3] = t[2], x[4] = 99 != t[3]: slots 0..2 count, slot 3 not
    # anchor 2: x[4] != t[3] already: only slot 0
    assert valid.tolist() == [[[True, True, True, False], [True, False, False, False]]]
    t2 = torch.tensor([[10, 11, 12, 13, 14, 15, 16, 17, 18, 19]])
    x2 = torch.tensor([[5, 10, 11, 12, 13, 14, 15, 16, 17, 18]])
    t2[0, 3] = eos
    x2[0, 4] = eos
    pool2 = TR.Pool(x2, torch.tensor([1]), torch.tensor([4]), [], None, t2)
    _, valid2 = TR.labels(pool2, torch.tensor([0]), torch.tensor([[0]]), Bk, eos)
    assert valid2.tolist() == [[[True, True, True, False]]]  # the EOS label counts, nothing after
    # anchors p = 3, 6, 8 accept 2, 1 and 4 drafts; the next anchor, 13, is past the last
    assert TR.cycles_of(np.array([2, 0, 0, 1, 0, 4, 0]), 3, 9) == (3, 7)
