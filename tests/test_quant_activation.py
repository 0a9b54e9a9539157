"""Activation rounding (the vec_dot pairing of llama.cpp, numerics of ds4): checked bit for bit
against independent NumPy implementations of the documented rules."""

from __future__ import annotations

import numpy as np
import pytest

from ds4rt import errors, ops

PAIRS = {
    "F32": "F32",
    "F16": "F16",
    "BF16": "BF16",
    "Q8_0": "Q8_0",
    "Q4_0": "Q8_0",
    "MXFP4": "Q8_0",
    "Q2_K": "Q8_K",
    "Q4_K": "Q8_K",
    "Q5_K": "Q8_K",
    "Q6_K": "Q8_K",
    "IQ2_XXS": "Q8_K",
}


def ref_q8_0(x: np.ndarray):
    """Per 32: d = amax/127 (f32), q = round-half-even(x * (1/d)), q = 0 when d = 0."""
    xb = x.astype(np.float32).reshape(-1, 32)
    d = (np.abs(xb).max(axis=1) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(xb * inv[:, None]), -127, 127).astype(np.int8)
    return q.ravel(), d


def ref_q8_K(x: np.ndarray):
    """Per 256: m = first element of largest |x|, iscale = -127/m, q = rne(iscale*x),
    d = 1/iscale."""
    xb = x.astype(np.float32).reshape(-1, 256)
    q = np.zeros(xb.shape, dtype=np.int8)
    d = np.zeros(xb.shape[0], dtype=np.float32)
    for b in range(xb.shape[0]):
        i = int(np.argmax(np.abs(xb[b])))  # first occurrence, like the strict > scan
        m = xb[b, i]
        if m == 0:
            continue
        iscale = np.float32(-127) / m
        q[b] = np.clip(np.rint(iscale * xb[b]), -127, 127).astype(np.int8)
        d[b] = np.float32(1) / iscale
    return q.ravel(), d


def ref_bf16_round(x: np.ndarray) -> np.ndarray:
    from gguf import GGMLQuantizationType as G
    from gguf import quants

    u16 = quants.quantize(x.astype(np.float32), G.BF16).view(np.uint16)
    return (u16.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("weight_type", sorted(PAIRS))
def test_activation_rounding_matches_reference(weight_type):
    rng = np.random.default_rng(7)
    n = 1024
    x = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 30.0], size=n)).astype(np.float32)
    x[256:512] = 0.0  # an all-zero block
    x[600] = -x[600:604].max() * 3  # a negative maximum
    q, s = ops.quantize_activation(weight_type, x)
    kind = PAIRS[weight_type]
    if kind == "F32":
        assert q is None and np.array_equal(s.view(np.uint32), x.view(np.uint32))
    elif kind == "F16":
        assert q is None and np.array_equal(s, x.astype(np.float16).astype(np.float32))
    elif kind == "BF16":
        pytest.importorskip("gguf")
        assert q is None and np.array_equal(s.view(np.uint32), ref_bf16_round(x).view(np.uint32))
    else:
        rq, rd = (ref_q8_0 if kind == "Q8_0" else ref_q8_K)(x)
        assert np.array_equal(q, rq)
        assert np.array_equal(s.view(np.uint32), rd.view(np.uint32))
        assert ops.activation_block(weight_type) == (32 if kind == "Q8_0" else 256)


def test_ties_round_to_even():
    # amax 127 gives d = 1 and 1/d = 1, so x * (1/d) lands exactly on the halves
    x = np.zeros(32, dtype=np.float32)
    x[:9] = [127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, -3.5]
    q, d = ops.quantize_activation("Q8_0", x)
    assert d[0] == 1.0
    assert q[:9].tolist() == [127, 0, 2, 2, 0, -2, -2, 126, -4]
    # Q8_K: a maximum of -127 gives iscale = -127/-127 = 1
    xk = np.zeros(256, dtype=np.float32)
    xk[:6] = [-127, 0.5, 1.5, -2.5, 3.5, 4.5]
    qk, dk = ops.quantize_activation("Q4_K", xk)
    assert dk[0] == 1.0
    assert qk[:6].tolist() == [-127, 0, 2, -2, 4, 4]


def test_q8_K_takes_the_first_of_equal_magnitudes():
    x = np.zeros(256, dtype=np.float32)
    x[10], x[20] = 2.0, -2.0
    q, d = ops.quantize_activation("Q2_K", x)
    assert q[10] == -127 and q[20] == 127
    assert d[0] == np.float32(1) / (np.float32(-127) / np.float32(2))  # m = +2 (the first)
    x[10], x[20] = -2.0, 2.0
    q, d = ops.quantize_activation("Q2_K", x)
    assert q[10] == -127 and q[20] == 127
    assert d[0] == np.float32(1) / (np.float32(-127) / np.float32(-2))  # m = -2 (the first)


def test_activation_errors():
    with pytest.raises(errors.InvalidArgumentError, match="multiple"):
        ops.quantize_activation("Q4_K", np.zeros(128, dtype=np.float32))
    with pytest.raises(errors.UnsupportedError):
        ops.quantize_activation("IQ3_S", np.zeros(256, dtype=np.float32))


SPECIAL = np.array(
    [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        127.0,
        -127.0,
        126.5,
        1e-45,
        -1e-45,
        6e-8,
        3e-8,
        2.98e-8,
        65504.0,
        65520.0,
        -65520.0,
        1e30,
        -1e30,
        np.inf,
        -np.inf,
        np.nan,
        4194304.5,
        8388607.0,
        1.0 / 3.0,
    ],
    dtype=np.float32,
)


@pytest.fixture
def restore_isa():
    before = ops.isa()
    yield
    ops.set_isa(before)


@pytest.mark.parametrize("weight_type", ["F16", "Q8_0", "Q2_K", "BF16", "F32"])
def test_every_isa_path_converts_like_scalar(weight_type, restore_isa):
    """The SIMD conversions (ds4rt_cpu_kernels.act_row) give the portable code's bits on inputs
    built to hit its corner cases: ties, equal magnitudes of both signs, NaN, inf, subnormals,
    values near the F16 and rounding limits, all-zero blocks."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    others = [i for i in ops.available_isas() if i != "scalar"]
    if not others:
        pytest.skip("only the scalar path runs on this machine")
    n = 512 + 32  # two Q8_K blocks (cut to a multiple of the block below) and a ragged F16 tail

    @settings(max_examples=60, deadline=None)
    @given(
        st.integers(0, 2**32 - 1),
        st.floats(0.0, 1.0),
        st.sampled_from([1e-6, 1.0, 1e3]),
        st.booleans(),
    )
    def check(seed, p_special, scale, halves):
        rng = np.random.default_rng(seed)
        if halves:  # amax 127 per block: x * (1/d) lands on halves and on equal magnitudes
            x = rng.integers(-254, 255, n).astype(np.float32) / np.float32(2)
            x[::32] = np.float32(127) * rng.choice([-1, 1], n // 32 + 1)[: len(x[::32])]
        else:
            x = (rng.standard_normal(n) * scale).astype(np.float32)
        special = rng.random(n) < p_special * 0.3
        x = np.where(special, rng.choice(SPECIAL, n), x).astype(np.float32)
        x[256:288] = 0.0  # an all-zero Q8_0 block
        blk = ops.activation_block(weight_type)
        x = x[: len(x) // blk * blk] if blk > 1 else x[: n - 3]
        ops.set_isa("scalar")
        want = ops.quantize_activation(weight_type, x)
        for isa in others:
            ops.set_isa(isa)
            got = ops.quantize_activation(weight_type, x)
            for w, g in zip(want, got, strict=True):
                if w is None:
                    assert g is None
                else:
                    assert np.array_equal(w.view(np.uint8), g.view(np.uint8)), isa

    check()
