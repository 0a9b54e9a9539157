"""Session.generate / Session.stream: the result object, text or id prompts, options, stop
reasons and stop strings, seeds, streaming. After every stop the session's context must be
exactly what it held before + the prompt + result.ids (checked against a fresh evaluation)."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ds4rt
from ds4rt import GenerationOptions, SchedulerOptions, StopReason
from ds4rt.generation import GenerationKwargs, _StopMatcher


@pytest.fixture(scope="module")
def model():
    return ds4rt.Model.default()


@pytest.fixture(scope="module")
def dspark(model):
    return ds4rt.DSpark.default(model)


def assert_context(session, model, ids):
    """The session holds exactly `ids`: same length, same logits as evaluating them anew."""
    ref = model.session(n_ctx=session.n_ctx)
    ref.eval(ids)
    assert session.position == len(ids)
    assert np.array_equal(session.current_logits(), ref.current_logits())


PROMPT = [0, 5, 9, 100, 7]


def test_the_result_object(model):
    s = model.session()
    r = s.generate(PROMPT, max_tokens=12)
    assert isinstance(r, ds4rt.GenerationResult)
    assert str(r) == r.text == model.detokenize(r.ids, skip_special=True)
    assert len(r.ids) == 12 and r.stop_reason is StopReason.MAX_TOKENS and r.stop_string is None
    assert r.prompt_ids == PROMPT and r.spec_stats is None and isinstance(r.seed, int)
    t = r.timings
    assert t.prompt_tokens == len(PROMPT) and t.generated_tokens == 12
    assert t.prompt_seconds > 0 and t.generation_seconds > 0
    assert t.prompt_tokens_per_second > 0 and t.generation_tokens_per_second > 0
    assert "prefill: 5 tokens" in t.line() and "decode: 12 tokens" in t.line()
    assert s.last_result is r
    assert_context(s, model, PROMPT + r.ids)


def test_text_and_id_prompts(model):
    a = model.session().generate("Hello <｜User｜>", max_tokens=8)
    ids = [model.bos_id] + model.tokenize("Hello <｜User｜>", special=True)
    assert a.prompt_ids == ids  # BOS once, markers read as their tokens
    assert model.session().generate(ids, max_tokens=8).ids == a.ids
    assert model.session().generate(np.array(ids, dtype=np.int64), max_tokens=8).ids == a.ids
    s = model.session()
    s.eval([0, 3])
    assert s.generate("Hi", max_tokens=1).prompt_ids == model.tokenize("Hi")  # no BOS midway


def test_options_object_and_keyword_overrides(model):
    opts = GenerationOptions(max_tokens=6, temperature=0.9, top_k=20, seed=3)
    a = model.session().generate(PROMPT, opts)
    b = model.session().generate(PROMPT, max_tokens=6, temperature=0.9, top_k=20, seed=3)
    assert a.ids == b.ids and a.seed == b.seed == 3
    c = model.session().generate(PROMPT, opts, max_tokens=3)
    assert c.ids == a.ids[:3]  # the same seed draws the same first tokens
    with pytest.raises(TypeError):
        model.session().generate(PROMPT, opts, max_tokns=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        model.session().generate(PROMPT, {"max_tokens": 3})  # type: ignore[arg-type]


def test_keyword_types_match_the_options_dataclass():
    fields = {f.name for f in dataclasses.fields(GenerationOptions)}
    assert set(typing.get_type_hints(GenerationKwargs)) == fields


def test_seeds(model):
    a = model.session().generate(PROMPT, max_tokens=10, temperature=1.0, seed=None)
    b = model.session().generate(PROMPT, max_tokens=10, temperature=1.0, seed=-1)
    assert a.seed != b.seed  # both random (2^-64 to collide)
    again = model.session().generate(PROMPT, max_tokens=10, temperature=1.0, seed=a.seed)
    assert again.ids == a.ids  # the recorded seed reproduces the run
    assert model.session().generate(PROMPT, max_tokens=4, seed=2**64 - 1).seed == 2**64 - 1


@pytest.mark.parametrize(
    "kw,error",
    [
        ({"max_tokens": "5"}, TypeError),
        ({"max_tokens": 1.5}, TypeError),
        ({"max_tokens": True}, TypeError),
        ({"max_tokens": -2}, ValueError),
        ({"max_tokens": 2**31}, ValueError),
        ({"temperature": float("nan")}, ValueError),
        ({"temperature": "hot"}, TypeError),
        ({"top_k": 2**40}, ValueError),
        ({"top_p": 0.0}, ValueError),
        ({"min_p": 1.5}, ValueError),
        ({"seed": -2}, ValueError),
        ({"seed": 2**64}, ValueError),
        ({"seed": 1.0}, TypeError),
        ({"stop_at_eos": "no"}, TypeError),
        ({"stop": b"x"}, TypeError),
        ({"stop": [""]}, ValueError),
        ({"stop": [3]}, TypeError),
        ({"skip_special": 1}, TypeError),
        ({"confidence_threshold": 1.5}, ValueError),
        ({"scheduler": "sometimes"}, ValueError),
        ({"scheduler": 7}, ValueError),
    ],
)
def test_bad_options_are_refused_before_anything_runs(model, kw, error):
    with pytest.raises(error):
        GenerationOptions(**kw)
    s = model.session()
    with pytest.raises(error):
        s.generate(PROMPT, **kw)
    assert s.position == 0  # nothing was evaluated


@pytest.mark.parametrize(
    "kw",
    [
        {"probe_min": -1},
        {"probe_min": 0},
        {"probe_max": -5},
        {"probe_min": 8, "probe_max": 4},
        {"probe_max": 2**31 - 1},
        {"warmup_cycles": -1},
        {"max_draft": -1},
        {"max_draft": 2**31},
        {"history_decay": 1.5},
        {"confidence_weight": -0.1},
        {"verify_cost_base": float("inf")},
        {"verify_cost_base": 0.0, "verify_cost_per_token": 0.0},
        {"propose_cost": -1.0},
    ],
)
def test_scheduler_options_are_validated(kw):
    with pytest.raises(ValueError):
        SchedulerOptions(**kw)


def test_scheduler_option_types_are_checked():
    for kw in ({"max_draft": 2.0}, {"measured_costs": 1}, {"history_decay": "0.5"}):
        with pytest.raises(TypeError):
            SchedulerOptions(**kw)


def test_stop_reasons(model, tmp_path):
    # on_token returning False: stops after that token
    seen = []
    s = model.session()
    r = s.generate(PROMPT, max_tokens=20, on_token=lambda t: seen.append(t) or len(seen) < 3)
    assert r.stop_reason is StopReason.CALLBACK and r.ids == seen and len(seen) == 3
    assert_context(s, model, PROMPT + r.ids)
    # a full context: the limit is the room left, every returned token is in the context
    s = model.session(n_ctx=20)
    r = s.generate(PROMPT, max_tokens=None, stop_at_eos=False)
    assert r.stop_reason is StopReason.CONTEXT_FULL and len(r.ids) == 15
    assert_context(s, model, PROMPT + r.ids)
    s = model.session(n_ctx=20)
    r = s.generate(PROMPT, max_tokens=100, stop_at_eos=False)
    assert r.stop_reason is StopReason.CONTEXT_FULL and len(r.ids) == 15
    assert s.generate([], max_tokens=5).stop_reason is StopReason.CONTEXT_FULL
    # EOS: make a token of the greedy continuation the model's EOS
    from gguf import GGUFValueType as VT
    from gguf_rewrite import rewrite

    cont = model.session().generate(PROMPT, max_tokens=12, stop_at_eos=False).ids
    path = tmp_path / "eos.gguf"
    rewrite(
        ds4rt.data.default_target(),
        str(path),
        set_keys={"tokenizer.ggml.eos_token_id": (cont[6], VT.UINT32)},
    )
    m = ds4rt.Model(path)
    s = m.session()
    r = s.generate(PROMPT, max_tokens=12)
    assert r.stop_reason is StopReason.EOS and r.ids == cont[: cont.index(cont[6]) + 1]
    assert_context(s, m, PROMPT + r.ids)


def _greedy_text(model, n=60):
    r = model.session().generate(PROMPT, max_tokens=n, stop_at_eos=False, skip_special=True)
    return r


def _pieces_per_token(model, ids):
    dec = model.tokenizer.stream(skip_special=True)
    return [dec.push(t) for t in ids]


@pytest.mark.parametrize("speculative", [False, True])
def test_stop_strings_cut_the_text_and_keep_the_context(model, dspark, speculative):
    full = _greedy_text(model)
    pieces = _pieces_per_token(model, full.ids)
    # a stop string that spans a token boundary somewhere in the middle of the text
    k = next(i for i in range(10, len(pieces)) if len(pieces[i]) >= 2 and len(pieces[i + 1]) >= 1)
    start = sum(len(p) for p in pieces[:k]) + len(pieces[k]) - 1
    stop = full.text[start : start + 2]
    first = full.text.index(stop)
    kw = {"dspark": dspark, "scheduler": "always"} if speculative else {}
    s = model.session(max_batch=16)
    r = s.generate(PROMPT, max_tokens=60, stop_at_eos=False, stop=["never-there", stop], **kw)
    assert r.stop_reason is StopReason.STOP_STRING and r.stop_string == stop
    assert r.text == full.text[:first]
    # generation ends with the token that completes the stop string; the ids before it match
    n = len(r.ids)
    assert r.ids == full.ids[:n]
    assert len("".join(pieces[: n - 1])) < first + len(stop) <= len("".join(pieces[:n]))
    assert_context(s, model, PROMPT + r.ids)
    # streamed, the pieces never show part of the stop string
    s = model.session(max_batch=16)
    stream = s.stream(PROMPT, max_tokens=60, stop_at_eos=False, stop=[stop], **kw)
    got = list(stream)
    assert "".join(p.text for p in got) == r.text and sum((p.ids for p in got), []) == r.ids
    assert stream.result is not None and stream.result.stop_reason is StopReason.STOP_STRING


def _reference_cut(text, stops):
    """Where a stop string first appears as text grows: the earliest end, then earliest start."""
    best = None
    for s in stops:
        i = text.find(s)
        if i >= 0 and (best is None or (i + len(s), i) < (best[0] + len(best[1]), best[0])):
            best = (i, s)
    return (text, None) if best is None else (text[: best[0]], best[1])


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="abc\n", max_size=40),
    stops=st.lists(st.text(alphabet="abc\n", min_size=1, max_size=4), min_size=1, max_size=3),
    cuts=st.lists(st.integers(0, 40), max_size=10),
)
def test_stop_matcher_never_hands_out_a_partial_stop_string(text, stops, cuts):
    chunks, last = [], 0
    for c in sorted(cuts) + [len(text)]:
        chunks.append(text[last : max(last, c)])
        last = max(last, c)
    m = _StopMatcher(stops)
    out, hit = "", None
    want_text, want_stop = _reference_cut(text, stops)
    for chunk in chunks:
        safe, hit = m.feed(chunk)
        out += safe
        assert want_text.startswith(out)  # nothing handed out is ever taken back
        if hit is not None:
            break
    if hit is None:
        out += m.flush()
    assert (out, hit) == (want_text, want_stop)


def test_stream_yields_pieces_as_they_come(model, dspark):
    plain = model.session().generate(PROMPT, max_tokens=30, stop_at_eos=False)
    for kw in ({}, {"dspark": dspark}):
        s = model.session(max_batch=16)
        with s.stream(PROMPT, max_tokens=30, stop_at_eos=False, **kw) as stream:
            pieces = list(stream)
        assert all(isinstance(p, ds4rt.Piece) for p in pieces)
        assert "".join(map(str, pieces)) == plain.text
        assert sum((p.ids for p in pieces), []) == plain.ids
        assert stream.result is not None and stream.result.ids == plain.ids
        assert_context(s, model, PROMPT + plain.ids)


def test_leaving_a_stream_early_stops_generation_and_frees_the_session(model):
    s = model.session()
    stream = s.stream(PROMPT, max_tokens=2000, stop_at_eos=False)
    for i, _ in enumerate(stream):
        if i == 2:
            break
    stream.close()
    r = stream.result
    assert r is not None and r.stop_reason is StopReason.INTERRUPTED and len(r.ids) < 2000
    assert_context(s, model, PROMPT + r.ids)
    assert len(s.generate([3], max_tokens=2).ids) == 2  # free again


def test_dropping_a_stream_stops_it(model):
    s = model.session()
    stream = s.stream(PROMPT, max_tokens=2000, stop_at_eos=False)
    next(stream)
    del stream  # the worker stops and is joined
    r = s.last_result
    assert r is not None and r.stop_reason is StopReason.INTERRUPTED
    assert s.generate([3], max_tokens=1).ids


def test_speculative_results_carry_this_generations_statistics(model, dspark):
    s = model.session(max_batch=16)
    a = s.generate(PROMPT, max_tokens=20, dspark=dspark, scheduler="always", stop_at_eos=False)
    b = s.generate([4], max_tokens=15, dspark=dspark, scheduler="always", stop_at_eos=False)
    total = s.spec_stats()
    assert a.spec_stats is not None and b.spec_stats is not None
    assert a.spec_stats["tokens"] == 20 and b.spec_stats["tokens"] == 15
    assert a.spec_stats["cycles"] + b.spec_stats["cycles"] == total["cycles"]
    assert a.spec_stats["proposed"] + b.spec_stats["proposed"] == total["proposed"]
    hist = np.add(a.spec_stats["draft_len_hist"], b.spec_stats["draft_len_hist"])
    assert hist.tolist() == total["draft_len_hist"]
    for sp in (a.spec_stats, b.spec_stats):  # the derived fields come from this share's counters
        verified = sp["full"] + sp["partial"] + sp["miss_first"]
        assert verified == sp["cycles"] - sp["no_draft"] > 0
        assert sp["committed_per_verify"] == round((sp["accepted_draft"] + verified) / verified, 3)
        assert sp["avg_accept"] == round(sp["accepted_draft"] / sp["cycles"], 3)


def test_stop_strings_need_a_tokenizer(model, tmp_path):
    from gguf import GGUFReader
    from gguf_rewrite import rewrite

    src = ds4rt.data.default_target()
    keys = tuple(k for k in GGUFReader(src).fields if k.startswith("tokenizer."))
    path = tmp_path / "notok.gguf"
    rewrite(src, str(path), drop_keys=keys)
    m = ds4rt.Model(path)
    assert m.tokenizer is None
    r = m.session().generate(PROMPT, max_tokens=3)
    assert r.text == "" and len(r.ids) == 3
    with pytest.raises(ds4rt.errors.StateError, match="stop strings need"):
        m.session().generate(PROMPT, max_tokens=3, stop=["x"])
    with pytest.raises(ds4rt.errors.StateError, match="no tokenizer"):
        m.session().generate("text", max_tokens=3)
