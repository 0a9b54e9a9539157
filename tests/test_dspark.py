"""DSpark support models: loading both layouts and every head dtype, validation against the
target, the load-time self-test, and the C drafter against the float64 NumPy reference
(tests/reference/dspark_ref.py)."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys

import numpy as np
import pytest
from dspark_helpers import assert_stage_timers
from gguf import GGUFValueType as VT
from gguf_rewrite import rewrite
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
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


# ---- the acceptance prior (docs/DSPARK.md, "Scheduler") --------------------------------------

PRIOR = "ds4rt.dspark.acceptance_prior"
# tools/sched_model.py's launch-bound GPU-like costs in decode units: verify(n) = 1.0 + 0.035 n,
# a proposal about one decode
GPU_LIKE = ds4rt.SchedulerOptions(
    measured_costs=False, verify_cost_base=1.0, verify_cost_per_token=0.035, propose_cost=1.0
)


def _prior_tool():
    sys.path.insert(0, str(ROOT / "tools" / "train"))
    try:
        import acceptance_prior
    finally:
        sys.path.pop(0)
    return acceptance_prior


def with_prior(fl, tmp_path, values, name="prior.gguf") -> str:
    out = tmp_path / name
    _prior_tool().rewrite(fl.support, out, list(values))
    return str(out)


@pytest.mark.parametrize(
    ("value", "pattern"),
    [
        (([0.7, 0.6], VT.ARRAY, VT.FLOAT64), "must be an array of FLOAT32"),
        (([1, 0], VT.ARRAY, VT.UINT32), "must be an array of FLOAT32"),
        ((0.7, VT.FLOAT32), "must be an array of FLOAT32"),
        (("0.7", VT.STRING), "must be an array of FLOAT32"),
        (
            ([0.7, float("nan")], VT.ARRAY, VT.FLOAT32),
            r"\[1\] = nan: an acceptance must be in \[0, 1\]",
        ),
        (([float("inf")], VT.ARRAY, VT.FLOAT32), r"\[0\] = inf"),
        (([0.7, -0.1], VT.ARRAY, VT.FLOAT32), r"\[1\] = -0\.1"),
        (([1.5], VT.ARRAY, VT.FLOAT32), r"\[0\] = 1\.5"),
        (([0.5] * 17, VT.ARRAY, VT.FLOAT32), "has 17 values: more than the block size"),
    ],
)
def test_a_malformed_acceptance_prior_is_refused_naming_it(fl, tmp_path, value, pattern):
    m = ds4rt.Model(str(fl.target))
    path = broken_support(fl, tmp_path, set_keys={PRIOR: value})
    with pytest.raises(ds4rt.errors.FormatError, match=re.escape(PRIOR) + ".*" + pattern):
        ds4rt.DSpark(m, path)


def test_a_prior_of_the_wrong_length_is_refused(fl, tmp_path):
    m = ds4rt.Model(str(fl.target))
    bare = ds4rt.DSpark(m, str(fl.support)).info
    block = bare["block_size"]
    assert bare["acceptance_prior"] == []  # the seed file has no prior
    ds4rt.DSpark(m, with_prior(fl, tmp_path, [0.5] * block))
    with pytest.raises(ds4rt.errors.FormatError, match=re.escape(PRIOR) + " is empty"):
        ds4rt.DSpark(m, with_prior(fl, tmp_path, [], "empty.gguf"))
    with pytest.raises(ds4rt.errors.FormatError, match=f"has {block + 1} values"):
        ds4rt.DSpark(m, with_prior(fl, tmp_path, [0.5] * (block + 1), "long.gguf"))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.floats(0.0, 1.0, width=32), min_size=1, max_size=5)
    | st.lists(
        st.floats(width=32, allow_nan=True, allow_infinity=True) | st.floats(0.0, 1.0, width=32),
        max_size=20,
    )
)
def test_any_prior_loads_exactly_when_valid_and_starts_the_estimates(fl, tmp_path, values):
    """Arbitrary float32 arrays (NaN, infinities, negative zero, any length): a support model
    loads iff its prior is 1..block_size values in [0, 1], and then a fresh scheduler's first
    plan uses exactly those values per position (the uninformed 0.5 after them)."""
    m = _model(fl)
    block = ds4rt.DSpark(m, str(fl.support)).info["block_size"]
    out = tmp_path / f"prior{next(_SEQ)}.gguf"  # a new file: a loaded one stays mapped
    _prior_tool().rewrite(fl.support, out, values)
    valid = 1 <= len(values) <= block and all(0.0 <= v <= 1.0 for v in values)
    event("loads" if valid else "refused")
    if not valid:
        with pytest.raises(ds4rt.errors.FormatError, match=re.escape(PRIOR)):
            ds4rt.DSpark(m, str(out))
        return
    d = ds4rt.DSpark(m, str(out))
    want = [float(np.float32(v)) for v in values]
    assert d.info["acceptance_prior"] == want  # what the library loaded (ds4rt_dspark_info)
    events = []
    m.session(max_batch=16).generate(
        [0, 5, 9], max_tokens=2, dspark=d, scheduler=GPU_LIKE, on_schedule=events.append
    )
    acc = events[0]["acceptance"]
    assert acc[: len(values)] == want
    assert all(a == 0.5 for a in acc[len(values) :])


_MODELS: dict = {}
_SEQ = itertools.count()


def _model(fl):
    if fl.target not in _MODELS:
        _MODELS[fl.target] = ds4rt.Model(str(fl.target))
    return _MODELS[fl.target]


def test_with_a_prior_one_missed_probe_does_not_silence_the_drafter(fl, tmp_path):
    """The cold start: under GPU-like costs a fresh scheduler whose warm-up probe misses stops
    drafting (the uninformed 0.5 per position); with a prior of 0.8 it drafts on, until its
    own misses (the tiny pair's drafter is random) outweigh the prior within tens of cycles.
    Without the key the schedule is the uninformed one, cycle for cycle."""
    m = _model(fl)
    toks = prompt_ids(9, m.n_vocab, 31)
    want = m.session(max_batch=16).generate(toks, max_tokens=120, stop_at_eos=False).ids
    runs = {}
    for name, path in (
        ("none", str(fl.support)),
        ("removed", str(tmp_path / "removed.gguf")),
        ("prior", with_prior(fl, tmp_path, [0.8] * 5)),
    ):
        if name == "removed":
            _prior_tool().rewrite(with_prior(fl, tmp_path, [0.8] * 5, "p2.gguf"), path, None)
        events = []
        got = (
            m.session(max_batch=16)
            .generate(
                toks,
                max_tokens=120,
                dspark=ds4rt.DSpark(m, path),
                scheduler=GPU_LIKE,
                confidence_threshold=0.0,
                stop_at_eos=False,
                on_schedule=events.append,
            )
            .ids
        )
        assert got == want
        runs[name] = events
    for events in runs.values():
        assert events[0]["probe"] and events[0]["planned"] == 2 and events[0]["accepted"] == 0
    assert runs["none"][1]["planned"] == 0  # one miss and the uninformed scheduler stops
    assert runs["prior"][1]["planned"] > 0  # the prior keeps it drafting
    run = next(i for i, e in enumerate(runs["prior"][1:], 1) if e["planned"] == 0) - 1
    assert 1 <= run < 30  # drafted from cycle 1 on, until the evidence outweighed the prior
    assert all(e["probe"] for e in runs["prior"][60:] if e["planned"] > 0)  # then probes only
    strip = ("cost_decode", "propose_ms", "verify_ms")
    assert [{k: v for k, v in e.items() if k not in strip} for e in runs["none"]] == [
        {k: v for k, v in e.items() if k not in strip} for e in runs["removed"]
    ]
