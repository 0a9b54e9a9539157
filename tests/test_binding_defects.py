"""The Python binding defects of issue 13, each with the test that failed before its fix:
a session keeps its DSpark alive, a host drafter's probabilities are checked against its ids,
ids never wrap, scheduler options and argument types are checked, one session refuses a
second concurrent call, and an exception in on_stats or a host drafter stops generation at
once with the tokens kept (and the context exactly prompt + those tokens)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ds4rt
from ds4rt import BusyError, SchedulerOptions, StopReason


@pytest.fixture(scope="module")
def model():
    return ds4rt.Model.default()


@pytest.fixture(scope="module")
def dspark(model):
    return ds4rt.DSpark.default(model)


PROMPT = [0, 5, 9, 100, 7]


def assert_context(session, model, ids):
    ref = model.session(n_ctx=session.n_ctx, max_batch=session.max_batch)
    ref.eval(ids)
    assert session.position == len(ids)
    assert np.array_equal(session.current_logits(), ref.current_logits())


def run_python(code: str) -> subprocess.CompletedProcess:
    # outside the source tree, whose ds4rt/ has no compiled extension
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tempfile.gettempdir(),
    )


def test_a_session_keeps_its_dspark_alive():
    """Before: the temporary DSpark was freed after the call while the session's drafter still
    read its weights on every pass; the next call crashed (SIGSEGV). In a child process, so a
    crash fails this test instead of ending the test run."""
    r = run_python(
        """
        import gc, ds4rt
        m = ds4rt.Model.default()
        s = m.session()
        a = s.generate([0, 5, 9], max_tokens=8, dspark=ds4rt.DSpark.default(m))
        gc.collect()
        b = s.generate([7], max_tokens=8)
        c = s.generate([3], max_tokens=8, draft=lambda ctx, k: [1] * k)
        gc.collect()
        s.eval([4, 4])
        print("ok", len(a.ids), len(b.ids), len(c.ids))
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok", "8", "8", "8"]


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_a_drafter_with_fewer_probability_rows_than_ids_is_an_error(model, temperature):
    """Before: the binding copied len(ids) rows out of a shorter array (a heap over-read)."""
    V = model.n_vocab

    def short(ctx, k):
        return [1, 2, 3][:k], np.full((1, V), 1.0 / V, dtype=np.float32)

    s = model.session()
    with pytest.raises(ValueError, match=rf"shape \(1, {V}\) for 3 ids"):
        s.generate(
            PROMPT, max_tokens=30, temperature=temperature, seed=1, draft=short, scheduler="always"
        )
    r = s.last_result
    assert r is not None and r.stop_reason is StopReason.ERROR and 0 < len(r.ids) < 30
    assert_context(s, model, PROMPT + r.ids)
    for bad in (np.ones((3, V - 1)), np.ones(3 * V), np.array([["x"] * V] * 3)):
        with pytest.raises((ValueError, TypeError)):
            model.session().generate(
                PROMPT,
                max_tokens=5,
                draft=lambda c, k, b=bad: ([1, 2, 3][:k], b),
                scheduler="always",
            )
    with pytest.raises(ValueError, match="more than max_draft"):
        model.session().generate(
            PROMPT, max_tokens=5, draft=lambda c, k: [1] * (k + 1), scheduler="always"
        )


@pytest.mark.parametrize(
    "ids",
    [
        np.array([0, 2**32 + 5], dtype=np.int64),  # wrapped to 5 before
        np.array([0, -(2**31) - 1], dtype=np.int64),
        np.array([0, 2**32 - 1], dtype=np.uint32),
        [0, 2**32 + 5],
        [0, 2**70],
    ],
)
def test_ids_outside_int32_do_not_wrap(model, ids):
    s = model.session()
    with pytest.raises(OverflowError, match=r"\[1\].*32-bit"):
        s.eval(ids)
    with pytest.raises(OverflowError):
        s.generate(ids, max_tokens=2)
    with pytest.raises(OverflowError):
        model.tokenizer.decode(ids)
    assert s.position == 0


@pytest.mark.parametrize(
    "ids", [[0, 1.5], np.array([0.0, 1.0]), [True, 3], np.array([True]), ["1"], "0,1", b"\x00"]
)
def test_ids_of_other_types_are_a_type_error(model, ids):
    s = model.session()
    with pytest.raises(TypeError):
        s.eval(ids)
    with pytest.raises(TypeError):
        s.logits(ids)
    assert s.position == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), max_size=6), st.sampled_from(["i8", "i4", "u8"]))
def test_id_conversion_is_exact_or_refused(values, dtype):
    arr = np.array(values, dtype=np.int64)
    if dtype == "u8":
        arr = arr[arr >= 0].astype(np.uint64)
    elif dtype == "i4":
        arr = arr[(arr >= -(2**31)) & (arr < 2**31)].astype(np.int32)
    try:
        got = ds4rt._core.token_ids(arr)
    except OverflowError:
        assert any(not -(2**31) <= int(v) < 2**31 for v in arr)
    else:
        assert got.dtype == np.int32 and got.tolist() == [int(v) for v in arr]


def test_scheduler_options_are_checked_before_generation(model, dspark):
    s = model.session()
    for kw in ({"probe_min": -1}, {"probe_max": -4}, {"warmup_cycles": -3}):
        with pytest.raises(ValueError):
            s.generate(PROMPT, max_tokens=4, dspark=dspark, scheduler=SchedulerOptions(**kw))
    with pytest.raises(TypeError):  # the old dict spelling is not taken silently
        s.generate(PROMPT, max_tokens=4, dspark=dspark, scheduler_options={"probe_min": -1})
    assert s.position == 0


def test_wrong_argument_types_raise_type_error(model, dspark):
    cases = [
        lambda: ds4rt.Model(ds4rt.data.default_target(), n_threads="2"),
        lambda: ds4rt.Model(ds4rt.data.default_target(), numerics=1),
        lambda: model.session(n_ctx=4.5),
        lambda: model.session(n_ctx="64"),
        lambda: model.session().truncate("1"),
        lambda: model.session().set_capture(["a"]),
        lambda: model.session().set_trace(5),
        lambda: model.session().generate(PROMPT, max_tokens="3"),
        lambda: model.session().generate(PROMPT, on_token=5),
        lambda: model.session().generate(PROMPT, draft="drafter"),
        lambda: model.session().generate(PROMPT, dspark="support.gguf"),
        lambda: model.session().generate(3),
        lambda: ds4rt.Sampler(10, temperature="hot"),
        lambda: ds4rt.Sampler(10).sample(["a"] * 10),
        lambda: ds4rt.DSpark(model._m, ds4rt.data.default_support()),
        lambda: ds4rt.Session("model"),
        lambda: model.tokenizer.encode(5),
        lambda: model.tokenizer.encode_chat([{"role": "user", "content": 5}]),
    ]
    for i, case in enumerate(cases):
        with pytest.raises(TypeError):
            case()
            pytest.fail(f"case {i} did not raise")


def test_a_session_serves_one_call_at_a_time(model):
    """Before: two threads in one session corrupted its heap. Now the second call is refused
    while the first runs, whichever thread it comes from."""
    s = model.session()
    inside, tried = threading.Event(), threading.Event()
    errors = []

    def on_token(t):
        inside.set()
        tried.wait(30)  # hold the call open until the other thread has tried

    def other():
        inside.wait(30)
        for call in (
            lambda: s.eval([1]),
            lambda: s.generate([1], max_tokens=1),
            s.reset,
            lambda: s.truncate(0),
            s.current_logits,
            s.spec_stats,
            s.close,
            lambda: s.position,
        ):
            try:
                call()
                errors.append("no error")
            except BusyError as e:
                errors.append(str(e))
        tried.set()

    t = threading.Thread(target=other)
    t.start()
    r = s.generate(PROMPT, max_tokens=3, on_token=on_token)
    t.join()
    assert len(errors) == 8 and all("one call at a time" in e or "a call" in e for e in errors)
    assert len(r.ids) == 3
    assert_context(s, model, PROMPT + r.ids)
    # a callback calling back into its own session gets the same error, which stops the call
    s2 = model.session()
    with pytest.raises(BusyError):
        s2.generate(PROMPT, max_tokens=10, on_token=lambda t: s2.eval([1]))
    assert len(s2.last_result.ids) == 1


def test_concurrent_sessions_of_one_model_run_in_parallel(model):
    results = {}

    def work(i):
        results[i] = model.session().generate(PROMPT, max_tokens=20).ids

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({tuple(v) for v in results.values()}) == 1 and len(results) == 4


class Boom(Exception):
    pass


def test_an_exception_in_on_stats_stops_generation_at_once(model, dspark):
    """Before: generation ran on to max_tokens, then re-raised, and the tokens were lost."""
    calls = []

    def on_stats(stats, final):
        calls.append(stats["cycles"])
        if len(calls) == 2:
            raise Boom("stats")

    s = model.session(max_batch=16)
    with pytest.raises(Boom):
        s.generate(
            PROMPT,
            max_tokens=200,
            dspark=dspark,
            scheduler="always",
            stop_at_eos=False,
            on_stats=on_stats,
        )
    r = s.last_result
    assert r is not None and r.stop_reason is StopReason.ERROR
    assert 0 < len(r.ids) <= 2 * (dspark.block_size + 1)  # two cycles' worth, not 200
    assert calls[-1] == 2 or len(calls) == 2  # no further cycle reported
    assert_context(s, model, PROMPT + r.ids)
    assert s.generate([4], max_tokens=3).ids  # and the session goes on


def test_an_exception_in_a_host_drafter_stops_generation_at_once(model):
    n = []

    def drafter(ctx, k):
        n.append(len(ctx))
        if len(n) == 3:
            raise Boom("drafter")
        return [1] * k

    s = model.session()
    with pytest.raises(Boom):
        s.generate(PROMPT, max_tokens=200, draft=drafter, scheduler="always", stop_at_eos=False)
    r = s.last_result
    assert r is not None and len(n) == 3 and 0 < len(r.ids) < 40
    assert_context(s, model, PROMPT + r.ids)


def test_an_exception_in_on_token_or_a_trace_stops_generation_at_once(model):
    s = model.session()
    seen = []

    def on_token(t):
        seen.append(t)
        if len(seen) == 4:
            raise Boom("token")

    with pytest.raises(Boom):
        s.generate(PROMPT, max_tokens=100, on_token=on_token, stop_at_eos=False)
    assert s.last_result.ids == seen and len(seen) == 4
    assert_context(s, model, PROMPT + seen)
    s = model.session()
    s.set_trace(lambda layer, stage, pos, data: (_ for _ in ()).throw(Boom("trace")))
    with pytest.raises(Boom):
        s.generate(PROMPT, max_tokens=100, stop_at_eos=False)
    assert len(s.last_result.ids) <= 1
    s.set_trace(None)
