"""DSpark support models: loading both layouts and every head dtype, validation against the
target, the load-time self-test, and the C drafter against the float64 NumPy reference
(tests/reference/dspark_ref.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from dspark_helpers import assert_stage_timers
from gguf import GGUFValueType as VT
from gguf_rewrite import rewrite
from reference import dspark_ref as DR
from reference import dsv4_ref as R
from tiny_models import ROOT
from tiny_models import model as tiny

import ds4rt
from ds4rt import gguf as ds4rt_gguf


@pytest.fixture(scope="module")
def fl(tmp_path_factory):
    return tiny(tmp_path_factory, "float")


def prompt_ids(n, vocab, seed):
    return [0] + np.random.default_rng(seed).integers(3, vocab, n - 1).tolist()


@pytest.mark.parametrize("head_dtype", ["f32", "f16", "bf16", "q8_0"])
def test_every_head_dtype_loads_and_proposes_every_cycle(tmp_path_factory, head_dtype):
    """ds4's BF16-head failure (docs/DSPARK.md): here every head dtype drafts."""
    r = tiny(tmp_path_factory, "float", head_dtype=head_dtype)
    m = ds4rt.Model(str(r.target))
    d = ds4rt.DSpark(m, str(r.support))
    assert d.info["tensor_types"].count(head_dtype.upper()) >= 2
    s = m.session(max_batch=16)
    s.generate(
        prompt_ids(12, m.n_vocab, 1),
        max_tokens=30,
        dspark=d,
        scheduler="always",
        confidence_threshold=0.0,
        stop_at_eos=False,
    )
    st = s.spec_stats()
    # every cycle but the tail ones proposed, with every stage timer running
    assert (
        st["proposed"] > 0
        and st["no_draft"] == st["tail_skips"] == st["no_draft_by_reason"]["tail"]
    )
    assert_stage_timers(st, d.info["n_stages"])


def test_quantised_support_model(tmp_path_factory):
    r = tiny(tmp_path_factory, "quant")
    m = ds4rt.Model(str(r.target))
    d = ds4rt.DSpark(m, str(r.support))
    assert d.info["n_stages"] == 3 and "experts=IQ2_XXS" in d.info["tensor_types"]
    toks = prompt_ids(10, m.n_vocab, 2)
    plain = m.session(max_batch=8).generate(toks, max_tokens=20, stop_at_eos=False).ids
    s = m.session(max_batch=8)
    got = s.generate(toks, max_tokens=20, dspark=d, scheduler="always", stop_at_eos=False)
    assert got.ids == plain
    assert s.spec_stats()["proposed"] > 0


@pytest.mark.parametrize("numerics", ["official", "llama.cpp"])
def test_proposals_match_the_float64_reference(fl, numerics):
    m = ds4rt.Model(str(fl.target), numerics=numerics)
    d = ds4rt.DSpark(m, str(fl.support))
    ref = R.Model.from_gguf(str(fl.target), simulate_quant=numerics == "official")
    drafter = DR.Drafter.from_gguf(str(fl.support), ref, window=d.info["window"])
    for seed in range(3):
        toks = prompt_ids(8 + 11 * seed, m.n_vocab, seed)  # shorter and longer than the window
        s = m.session(max_batch=16)
        d.attach(s)
        s.eval(toks)
        anchor = int(np.argmax(s.current_logits()))
        drafts, conf, logits = d.propose(s, anchor)
        rs = DR.SpeculativeSession(ref, drafter)
        rs.prefill(toks)
        want = drafter.propose(anchor, len(toks) - 1, state=rs.dstate)
        assert drafts == list(want.drafts)
        rel = np.linalg.norm(logits - want.corrected, axis=1) / np.linalg.norm(
            want.corrected, axis=1
        )
        # F16 experts meet F16 activations (the llama.cpp pairing), hence ~1e-4
        assert rel.max() < 1e-3, rel
        np.testing.assert_allclose(conf, want.confidence, atol=5e-4)


def test_llama_cpp_dflash_layout_loads_and_drafts_identically(fl, tmp_path):
    dflash = tmp_path / "draft.gguf"
    m = ds4rt.Model(str(fl.target))
    window = m.info["window"]  # ds4's layout carries no window; dflash stores the one we ask for
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "convert_dspark.py"),
            "to-dflash",
            str(fl.support),
            "--target",
            str(fl.target),
            "-o",
            str(dflash),
            "--window",
            str(window),
        ],
        check=True,
        capture_output=True,
    )
    a, b = ds4rt.DSpark(m, str(fl.support)), ds4rt.DSpark(m, str(dflash))
    assert a.info["window"] == b.info["window"] == window
    assert b.info["layout"] == "dflash" and b.info["target_layers"] == a.info["target_layers"]
    toks = prompt_ids(20, m.n_vocab, 4)
    out = []
    for d in (a, b):
        s = m.session(max_batch=16)
        d.attach(s)
        s.eval(toks)
        out.append(d.propose(s, 7))
    assert out[0][0] == out[1][0]
    assert np.array_equal(out[0][2], out[1][2])


def broken_support(fl, tmp_path, **edits) -> str:
    out = str(tmp_path / "support.gguf")
    rewrite(str(fl.support), out, **edits)
    return out


@pytest.mark.parametrize(
    ("edits", "error", "pattern"),
    [
        (
            {"set_keys": {"dspark.target_layer_ids": ([1, 2, 9], VT.ARRAY, VT.UINT32)}},
            ds4rt.errors.MismatchError,
            r"dspark\.target_layer_ids\[2\] = 9: layer out of range",
        ),
        (
            {"set_keys": {"dspark.target_layer_ids": ([2, 1, 3], VT.ARRAY, VT.UINT32)}},
            ds4rt.errors.FormatError,
            "not strictly increasing",
        ),
        (
            {"set_keys": {"dspark.noise_token_id": (512, VT.UINT32)}},
            ds4rt.errors.MismatchError,
            r"noise_token_id = 512: outside the target vocabulary",
        ),
        (
            {"set_keys": {"dspark.block_size": (17, VT.UINT32)}},
            ds4rt.errors.FormatError,
            "block_size = 17",
        ),
        (
            {"drop_keys": ("dspark.markov_rank",)},
            ds4rt.errors.NotFoundError,
            "dspark.markov_rank is missing",
        ),
        (
            {"drop_tensors": ("mtp.1.attn_kv.weight",)},
            ds4rt.errors.NotFoundError,
            r"stage 1: tensor mtp\.1\.attn_kv\.weight is missing",
        ),
        (
            {"set_keys": {"general.architecture": ("deepseek4", VT.STRING)}},
            ds4rt.errors.UnsupportedError,
            "a DSpark support model is",
        ),
    ],
)
def test_bad_support_models_are_refused_with_the_key_named(fl, tmp_path, edits, error, pattern):
    m = ds4rt.Model(str(fl.target))
    with pytest.raises(error, match=pattern):
        ds4rt.DSpark(m, broken_support(fl, tmp_path, **edits))


def test_the_three_key_spellings(fl, tmp_path):
    m = ds4rt.Model(str(fl.target))
    for spelling in ("deepseek4.dspark.{}", "deepseek4.dspark_{}"):
        keys = ("block_size", "markov_rank", "noise_token_id", "target_layer_ids")
        src = ds4rt_gguf.inspect(str(fl.support))["metadata"]
        sets = {}
        for k in keys:
            v = src[f"dspark.{k}"]
            sets[spelling.format(k)] = (
                (v, VT.ARRAY, VT.UINT32) if isinstance(v, list) else (v, VT.UINT32)
            )
        path = broken_support(
            fl, tmp_path, drop_keys=tuple(f"dspark.{k}" for k in keys), set_keys=sets
        )
        assert ds4rt.DSpark(m, path).info["block_size"] == src["dspark.block_size"]


def test_support_for_another_target_is_refused(tmp_path_factory, fl):
    other = tiny(tmp_path_factory, "quant")
    m = ds4rt.Model(str(other.target))
    with pytest.raises(ds4rt.errors.FormatError, match=r"mtp\.0\..*has shape"):
        ds4rt.DSpark(m, str(fl.support))


def test_self_test_names_the_failing_stage(fl, tmp_path):
    def poison(name, data, ttype, ne):
        if name == "mtp.1.attn_norm.weight":
            return np.full(ne[0], np.nan, dtype=np.float32), ttype, ne
        return None

    m = ds4rt.Model(str(fl.target))
    path = broken_support(fl, tmp_path, tensor_edit=poison)
    with pytest.raises(
        ds4rt.errors.BackendError, match="self-test: DSpark stage 1 produced non-finite values"
    ):
        ds4rt.DSpark(m, path)
    ds4rt.DSpark(m, path, self_test=False)  # loads when asked not to test


def test_loading_a_support_model_changes_nothing_about_the_target(fl):
    m = ds4rt.Model(str(fl.target))
    toks = prompt_ids(30, m.n_vocab, 9)
    before = m.session(max_batch=8).logits(toks)
    d = ds4rt.DSpark(m, str(fl.support))
    after = m.session(max_batch=8).logits(toks)
    s = m.session(max_batch=8)
    d.attach(s)
    attached = s.logits(toks)
    assert np.array_equal(before, after) and np.array_equal(before, attached)
