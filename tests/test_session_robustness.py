"""The C-side session defects of issue 13, each with the test that failed before its fix:

- a stop (on_token returning false, a stop string, an exception, Ctrl-C) that lands inside a
  block of accepted drafts kept the rest of the block in the context and evaluated the last
  returned token twice; now the context is exactly prompt + the returned ids, and going on
  gives what an uninterrupted run gives;
- reset() then truncate(0) restored the compressor frontiers of the context before the reset
  (wrong logits, then a heap overflow in the compressor push);
- the library's inputs are checked before anything changes: an invalid sampler, scheduler,
  max_tokens, prompt or drafter is refused with DS4RT_ERR_INVALID_ARGUMENT (or OUT_OF_RANGE,
  MISMATCH) naming the problem, and the session's position and logits are as before. These go
  through cffi, so the Python binding's own checks do not hide the library's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ds4rt
from ds4rt import StopReason

PROMPT = [0, 5, 9]
N = 40  # tokens of the uninterrupted reference runs


@pytest.fixture(scope="module")
def model():
    return ds4rt.Model.default()


@pytest.fixture(scope="module")
def dspark(model):
    return ds4rt.DSpark.default(model)


def context_is(model, session, ids) -> bool:
    """The session's context is exactly `ids`: its position and its logits are a fresh
    session's after evaluating them."""
    ref = model.session(n_ctx=session.n_ctx, max_batch=session.max_batch)
    ref.eval(ids)
    return session.position == len(ids) and np.array_equal(
        session.current_logits(), ref.current_logits()
    )


@pytest.fixture(scope="module")
def greedy_ref(model):
    return model.session(n_ctx=256).generate(PROMPT, max_tokens=N, stop_at_eos=False).ids


def oracle_drafter(full):
    """A host drafter that proposes the uninterrupted greedy continuation: every draft is
    accepted, so a stop lands inside an accepted block whenever it is not at a block's end."""

    def draft(ctx, k):
        i = len(ctx) - len(PROMPT)  # the anchor is full[i - 1]
        return list(full[i : i + k])

    return draft


STOPPERS = ["false", "raise", "stop_string"]
FIXTURES = [HealthCheck.function_scoped_fixture]


@settings(max_examples=12, deadline=None, suppress_health_check=FIXTURES)
@given(
    k=st.integers(1, N - 1),
    how=st.sampled_from(STOPPERS),
    drafter=st.sampled_from(["oracle", "dspark"]),
)
def test_a_stop_inside_accepted_drafts_keeps_exactly_the_returned_ids(
    model, dspark, greedy_ref, k, how, drafter
):
    """Before: a stop at the j-th accepted draft of a block left drafts j+1.. in the context and
    evaluated d_j a second time after them (position and logits wrong, and the continuation
    differed from an uninterrupted run)."""
    s = model.session(n_ctx=256)
    spec = {"draft": oracle_drafter(greedy_ref)} if drafter == "oracle" else {"dspark": dspark}
    seen: list[int] = []

    def on_token(t):
        seen.append(t)
        if len(seen) == k:
            if how == "raise":
                raise RuntimeError("host stop")
            return False
        return True

    kwargs = dict(max_tokens=N, stop_at_eos=False, scheduler="always", **spec)
    if how == "stop_string":
        text = model.tokenizer.decode(greedy_ref[:k]) if model.tokenizer else None
        if not text:
            pytest.skip("no tokenizer text to stop on")
        # the text of the first k tokens ends generation once complete: at token <= k
        r = s.generate(PROMPT, stop=[text], **kwargs)
        assert r.stop_reason == StopReason.STOP_STRING
        assert r.ids == greedy_ref[: len(r.ids)] and len(r.ids) <= k
    elif how == "raise":
        with pytest.raises(RuntimeError, match="host stop"):
            s.generate(PROMPT, on_token=on_token, **kwargs)
        r = s.last_result
        assert r.ids == greedy_ref[:k]
    else:
        r = s.generate(PROMPT, on_token=on_token, **kwargs)
        assert r.stop_reason == StopReason.CALLBACK and r.ids == greedy_ref[:k]
    assert context_is(model, s, PROMPT + r.ids)
    # going on gives the uninterrupted run's next tokens
    rest = s.generate([], max_tokens=N - len(r.ids), stop_at_eos=False).ids
    assert r.ids + rest == greedy_ref


@settings(max_examples=6, deadline=None, suppress_health_check=FIXTURES)
@given(k=st.integers(1, N - 1), seed=st.integers(0, 2**32))
def test_a_sampled_speculative_stop_keeps_exactly_the_returned_ids(model, dspark, k, seed):
    """The same for rejection sampling: the ids are the uninterrupted run's first k (the same
    draws up to the stop) and the context holds exactly them."""
    kwargs = dict(max_tokens=N, stop_at_eos=False, temperature=0.9, seed=seed, dspark=dspark)
    kwargs["scheduler"] = "always"
    full = model.session(n_ctx=256).generate(PROMPT, **kwargs).ids
    s = model.session(n_ctx=256)
    seen: list[int] = []
    r = s.generate(PROMPT, on_token=lambda t: seen.append(t) or len(seen) < k, **kwargs)
    assert r.ids == full[:k]
    assert context_is(model, s, PROMPT + r.ids)


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURES)
@given(n_before=st.integers(1, 150), n_after=st.integers(1, 60), seed=st.integers(0, 2**32))
def test_reset_then_truncate_to_zero_is_an_empty_context(model, n_before, n_after, seed):
    """Before: truncate(0) after reset() rolled the compressors back to their snapshot of the
    last pass before the reset (wrong whenever that pass did not start at 0: more than
    max_batch tokens before the reset); the next evaluations gave wrong logits (and, under
    ASan, a heap-buffer-overflow in the compressor push)."""
    rng = np.random.default_rng(seed)
    before, after = (rng.integers(3, model.n_vocab, n).tolist() for n in (n_before, n_after))
    s = model.session(n_ctx=256)
    s.eval(before)
    s.reset()
    s.truncate(0)
    assert s.position == 0
    s.eval(after)
    assert context_is(model, s, after)


# ---- the library's own input checks, through cffi ------------------------------------------

A = pytest.importorskip("abi_cffi", reason="cffi (pip install cffi) reaches the C API directly")
ffi, lib = A.new, A.lib


@pytest.fixture(scope="module")
def capi():
    out = ffi.new("ds4rt_model **")
    assert lib.ds4rt_model_load(ds4rt.data.default_target().encode(), ffi.NULL, out) == 0
    m = out[0]
    dsp = ffi.new("ds4rt_dspark **")
    assert lib.ds4rt_dspark_load(m, ds4rt.data.default_support().encode(), ffi.NULL, dsp) == 0
    other = ffi.new("ds4rt_model **")
    assert lib.ds4rt_model_load(ds4rt.data.default_target().encode(), ffi.NULL, other) == 0
    dsp_other = ffi.new("ds4rt_dspark **")
    path = ds4rt.data.default_support().encode()
    assert lib.ds4rt_dspark_load(other[0], path, ffi.NULL, dsp_other) == 0
    yield {"model": m, "dspark": dsp[0], "dspark_other": dsp_other[0]}
    lib.ds4rt_dspark_free(dsp_other[0])
    lib.ds4rt_model_free(other[0])
    lib.ds4rt_dspark_free(dsp[0])
    lib.ds4rt_model_free(m)


def _session(capi, max_batch=32):
    p = ffi.new("ds4rt_session_params *")
    assert lib.ds4rt_session_params_init(p, ffi.sizeof(p[0])) == 0
    p.n_ctx, p.max_batch = 128, max_batch
    out = ffi.new("ds4rt_session **")
    assert lib.ds4rt_session_create(capi["model"], p, out) == 0
    return ffi.gc(out[0], lib.ds4rt_session_free)


def _logits(s, V):
    ptr = lib.ds4rt_session_logits(s)
    return None if ptr == ffi.NULL else np.frombuffer(ffi.buffer(ptr, 4 * V), np.float32).copy()


def _params(**fields):
    """generate, sampler, scheduler and spec params with `fields` set (prefix sampler_,
    sched_, spec_ for the inner structs); the cdata objects are kept alive together."""
    keep = {}
    for name, t in (("gen", "ds4rt_generate_params"), ("sampler", "ds4rt_sampler_params")):
        keep[name] = ffi.new(f"{t} *")
        init = lib.ds4rt_generate_params_init if name == "gen" else lib.ds4rt_sampler_params_init
        assert init(keep[name], ffi.sizeof(keep[name][0])) == 0
    keep["sched"] = ffi.new("ds4rt_scheduler_params *")
    assert lib.ds4rt_scheduler_params_init(keep["sched"], ffi.sizeof(keep["sched"][0])) == 0
    keep["spec"] = ffi.new("ds4rt_spec_params *")
    assert lib.ds4rt_spec_params_init(keep["spec"], ffi.sizeof(keep["spec"][0])) == 0
    keep["gen"].sampler = keep["sampler"]
    keep["spec"].scheduler = keep["sched"]
    for k, v in fields.items():
        part, _, field = k.partition("_")
        setattr(keep[part], field, v)
    return keep


BAD_SAMPLER = [("temperature", float("nan")), ("top_p", 0.0), ("top_p", float("inf")),
               ("min_p", 1.5), ("min_p", float("nan"))]  # fmt: skip
BAD_SCHEDULER = [
    ("mode", 7), ("max_draft", -1), ("warmup_cycles", -3), ("probe_min", -1),
    ("probe_max", 0), ("probe_max", 2**31 - 1), ("probe_min", 2**21),
    ("history_decay", 1.5), ("history_decay", float("nan")), ("confidence_weight", -0.1),
    ("verify_cost_base", -1.0), ("verify_cost_per_token", float("inf")),
    ("propose_cost", 1e9),
]  # fmt: skip


def _bad_cases():
    """(field, value, words of the message, speculative): scheduler and spec params are read by
    speculative generation only."""
    both = [("gen_max_tokens", -1, "max_tokens")]
    both += [(f"sampler_{f}", v, "sampler") for f, v in BAD_SAMPLER]
    spec = [(f"sched_{f}", v, "scheduler params") for f, v in BAD_SCHEDULER]
    spec += [("spec_confidence_threshold", 2.0, "confidence_threshold")]
    return [c + (False,) for c in both] + [c + (True,) for c in both + spec]


@pytest.mark.parametrize("field,value,message,speculative", _bad_cases())
def test_invalid_generation_params_are_refused_before_anything_changes(
    model, capi, field, value, message, speculative
):
    """Before: the prompt was evaluated first and an invalid sampler refused after it (the
    context had changed); scheduler fields other than mode were not checked at all (a probe
    limit near INT32_MAX overflowed a signed int when doubled)."""
    V = model.n_vocab
    s = _session(capi)
    first = ffi.new("int32_t[]", [0, 5, 9])
    assert lib.ds4rt_session_eval(s, first, 3, ffi.NULL) == 0
    before = _logits(s, V)
    keep = _params(**{field: value})
    if speculative:
        keep["spec"].dspark = capi["dspark"]
        keep["gen"].spec = keep["spec"]
    out, n = ffi.new("int32_t[]", 8), ffi.new("size_t *")
    prompt = ffi.new("int32_t[]", [7, 7, 7])
    st = lib.ds4rt_generate(s, prompt, 3, keep["gen"], out, 8, n)
    assert st == lib.DS4RT_ERR_INVALID_ARGUMENT, A.status_name(st)
    err = ffi.string(lib.ds4rt_session_last_error(s)).decode()
    assert message in err, err
    assert lib.ds4rt_session_position(s) == 3 and n[0] == 0
    assert np.array_equal(_logits(s, V), before)


@pytest.mark.parametrize(
    "case", ["token_negative", "token_vocab", "too_long", "max_batch", "other_model"]
)
def test_invalid_prompts_and_drafters_are_refused_before_anything_changes(capi, case):
    s = _session(capi, max_batch=4 if case == "max_batch" else 32)
    first = ffi.new("int32_t[]", [0, 5, 9])
    assert lib.ds4rt_session_eval(s, first, 3, ffi.NULL) == 0
    before = _logits(s, 4096)
    keep = _params()
    keep["spec"].dspark = capi["dspark_other" if case == "other_model" else "dspark"]
    keep["gen"].spec = keep["spec"]
    prompt = {"token_negative": [4, -1], "token_vocab": [4, 4096], "too_long": [4] * 126}.get(
        case, [4, 4]
    )
    p = ffi.new("int32_t[]", prompt)
    out, n = ffi.new("int32_t[]", 8), ffi.new("size_t *")
    st = lib.ds4rt_generate(s, p, len(prompt), keep["gen"], out, 8, n)
    expect = {
        "token_negative": lib.DS4RT_ERR_OUT_OF_RANGE,
        "token_vocab": lib.DS4RT_ERR_OUT_OF_RANGE,
        "too_long": lib.DS4RT_ERR_OUT_OF_RANGE,
        "max_batch": lib.DS4RT_ERR_INVALID_ARGUMENT,
        "other_model": lib.DS4RT_ERR_MISMATCH,
    }[case]
    assert st == expect, (A.status_name(st), ffi.string(lib.ds4rt_session_last_error(s)))
    assert lib.ds4rt_session_position(s) == 3 and n[0] == 0
    assert np.array_equal(_logits(s, 4096), before)
    # and the session goes on normally
    keep["spec"].dspark = capi["dspark"]
    if case != "max_batch":
        assert lib.ds4rt_generate(s, ffi.new("int32_t[]", [4]), 1, keep["gen"], out, 8, n) == 0
        assert n[0] == 8 and lib.ds4rt_session_position(s) == 3 + 1 + 8
