"""The struct versioning rule (docs/API.md, "Struct versioning") at every entry point that
initialises, reads or fills a sized struct, driven through cffi with raw buffers of any size:
an older (smaller) struct gets defaults for what it lacks, a newer (larger) one is accepted only
with zeros where the library knows nothing, an output is filled up to the caller's size and not
a byte further."""

from __future__ import annotations

import pytest

pytest.importorskip("cffi")

import abi_cffi as A  # noqa: E402

import ds4rt  # noqa: E402

new, old, lib = A.new, A.old, A.lib

# (struct, its *_init call, the 1.0 layout is a prefix of today's)
INITS = [
    ("ds4rt_model_params", "ds4rt_model_params_init"),
    ("ds4rt_session_params", "ds4rt_session_params_init"),
    ("ds4rt_sampler_params", "ds4rt_sampler_params_init"),
    ("ds4rt_dspark_params", "ds4rt_dspark_params_init"),
    ("ds4rt_scheduler_params", "ds4rt_scheduler_params_init"),
    ("ds4rt_spec_params", "ds4rt_spec_params_init"),
    ("ds4rt_generate_params", "ds4rt_generate_params_init"),
    ("ds4rt_tokenizer_arrays", "ds4rt_tokenizer_arrays_init"),
    ("ds4rt_chat_options", "ds4rt_chat_options_init"),
]

TRANSLATED = {"ds4rt_spec_params", "ds4rt_generate_params"}  # 1.0 layouts changed in place


def init(name: str, size: int, fill: int = 0x5A) -> A.Raw:
    raw = A.Raw(name, size, fill=fill)
    st = getattr(lib, dict(INITS)[name])(raw.ptr, size)
    assert st == lib.DS4RT_OK, A.last_error()
    return raw


@pytest.mark.parametrize("name,fn", INITS)
def test_init_fills_exactly_the_callers_size(name, fn):
    size = new.sizeof(name)
    full = init(name, size)
    assert full.size_member() == size and full.guard_intact()
    bigger = init(name, size + 40)
    assert bigger.size_member() == size + 40 and bigger.guard_intact()
    assert bigger.bytes()[size:] == bytes(40)
    assert bigger.bytes()[8:size] == full.bytes()[8:]
    old_size = old.sizeof(name)
    v10 = init(name, old_size)
    assert v10.size_member() == old_size and v10.guard_intact()
    if name not in TRANSLATED:
        assert v10.bytes()[8:] == full.bytes()[8:old_size]
    for bad in (0, 7, 10**6):
        raw = A.Raw(name, 16)
        assert getattr(lib, fn)(raw.ptr, bad) == lib.DS4RT_ERR_INVALID_ARGUMENT
        assert "no layout of this struct" in A.last_error()


# ---- readers: the library reads a caller's input struct --------------------------------------


@pytest.fixture(scope="module")
def env():
    out = new.new("ds4rt_model **")
    assert lib.ds4rt_model_load(ds4rt.data.default_target().encode(), new.NULL, out) == 0
    model = out[0]
    sess = new.new("ds4rt_session **")
    assert lib.ds4rt_session_create(model, new.NULL, sess) == 0
    dsp = new.new("ds4rt_dspark **")
    path = ds4rt.data.default_support().encode()
    assert lib.ds4rt_dspark_load(model, path, new.NULL, dsp) == 0
    yield {"model": model, "session": sess[0], "dspark": dsp[0]}
    lib.ds4rt_dspark_free(dsp[0])
    lib.ds4rt_session_free(sess[0])
    lib.ds4rt_model_free(model)


def _generate(env, params, spec=None) -> int:
    lib.ds4rt_session_reset(env["session"])
    prompt = new.new("int32_t[]", [1, 2, 3])
    out = new.new("int32_t[]", 8)
    n = new.new("size_t *")
    return lib.ds4rt_generate(env["session"], prompt, 3, params, out, 8, n)


def _gen_params(max_tokens=4):
    p = init("ds4rt_generate_params", new.sizeof("ds4rt_generate_params"))
    p.ptr.max_tokens = max_tokens
    return p


def call_model(env, raw):
    out = new.new("ds4rt_model **")
    st = lib.ds4rt_model_load(ds4rt.data.default_target().encode(), raw.ptr, out)
    if st == 0:
        lib.ds4rt_model_free(out[0])
    return st


def call_session(env, raw):
    out = new.new("ds4rt_session **")
    st = lib.ds4rt_session_create(env["model"], raw.ptr, out)
    if st == 0:
        lib.ds4rt_session_free(out[0])
    return st


def call_sampler(env, raw):
    out = new.new("ds4rt_sampler **")
    st = lib.ds4rt_sampler_create(raw.ptr, 100, out)
    if st == 0:
        lib.ds4rt_sampler_free(out[0])
    return st


def call_dspark(env, raw):
    out = new.new("ds4rt_dspark **")
    raw.ptr.self_test = 0
    st = lib.ds4rt_dspark_load(env["model"], ds4rt.data.default_support().encode(), raw.ptr, out)
    if st == 0:
        lib.ds4rt_dspark_free(out[0])
    return st


def call_generate(env, raw):
    raw.ptr.max_tokens = 4
    return _generate(env, raw.ptr)


def call_spec(env, raw):
    raw.ptr.dspark = env["dspark"]
    gp = _gen_params()
    gp.ptr.spec = raw.ptr
    return _generate(env, gp.ptr)


def call_arrays(env, raw):
    keep = [new.new("char[]", c.encode()) for c in "abc"]
    tokens = new.new("const char *[]", keep)
    raw.ptr.n_tokens = 3
    raw.ptr.tokens = tokens
    out = new.new("ds4rt_tokenizer **")
    st = lib.ds4rt_tokenizer_from_arrays(raw.ptr, out)
    if st == 0:
        lib.ds4rt_tokenizer_free(out[0])
    return st


def call_chat(env, raw):
    msg = new.new("ds4rt_chat_message *")
    text = new.new("char[]", b"hi")
    msg.role, msg.content, msg.content_len = lib.DS4RT_ROLE_USER, text, 2
    n = new.new("size_t *")
    return lib.ds4rt_chat_render(msg, 1, raw.ptr, new.NULL, 0, n)


def call_stats_format(env, raw):
    needed = new.new("size_t *")
    return lib.ds4rt_spec_stats_format(raw.ptr, 1, new.NULL, 0, needed)


READERS = [
    ("ds4rt_model_params", call_model),
    ("ds4rt_session_params", call_session),
    ("ds4rt_sampler_params", call_sampler),
    ("ds4rt_dspark_params", call_dspark),
    ("ds4rt_generate_params", call_generate),
    ("ds4rt_spec_params", call_spec),
    ("ds4rt_tokenizer_arrays", call_arrays),
    ("ds4rt_chat_options", call_chat),
    ("ds4rt_spec_stats", call_stats_format),
]


def made(name: str, size: int) -> A.Raw:
    if name == "ds4rt_spec_stats":  # an output struct read back by the formatter
        raw = A.Raw(name, size)
        raw.set_size(size)
        return raw
    return init(name, size, fill=0)


@pytest.mark.parametrize("name,call", READERS)
def test_reader_applies_the_rule(env, name, call):
    size = new.sizeof(name)
    assert call(env, made(name, size)) == lib.DS4RT_OK, A.last_error()
    assert call(env, made(name, old.sizeof(name))) == lib.DS4RT_OK, A.last_error()
    # (+40: +24 would give 72 bytes of generate params, the size that identifies their 1.0
    # layout; no later layout may take it, see src/api/generate.c)
    newer = made(name, size + 40)
    assert call(env, newer) == lib.DS4RT_OK, A.last_error()  # zeros beyond: accepted
    newer = made(name, size + 40)
    newer.buf[size + 17] = 1
    assert call(env, newer) == lib.DS4RT_ERR_UNSUPPORTED
    msg = A.last_error()
    assert "the library is older than the header" in msg and f"byte {size + 17}" in msg
    broken = made(name, size)
    broken.set_size(3)
    assert call(env, broken) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert f"{name}.size is 3" in A.last_error()


def test_fields_a_1_0_caller_lacks_get_their_defaults(env):
    """A 1.0 model params struct (no backend, device, progress) loads on the AUTO backend; the
    bytes after it in the caller's memory, whatever they hold, are never read."""
    raw = A.Raw("ds4rt_model_params", old.sizeof("ds4rt_model_params"), fill=0)
    v10 = old.cast("ds4rt_model_params *", int(new.cast("uintptr_t", raw.buf)))
    v10.size = old.sizeof("ds4rt_model_params")
    v10.n_threads = 3
    v10.numerics = lib.DS4RT_NUMERICS_LLAMACPP
    for i in range(raw.size, raw.size + A.GUARD):
        raw.buf[i] = 0xFF  # would be a bad backend, device and progress pointer if read
    out = new.new("ds4rt_model **")
    assert lib.ds4rt_model_load(ds4rt.data.default_target().encode(), raw.ptr, out) == 0
    info = A.Raw("ds4rt_model_info", new.sizeof("ds4rt_model_info"))
    info.set_size(info.size)
    assert lib.ds4rt_model_get_info(out[0], info.ptr) == 0
    assert info.ptr.n_threads == 3 and info.ptr.numerics == lib.DS4RT_NUMERICS_LLAMACPP
    assert new.string(info.ptr.backend) == b"cpu"
    lib.ds4rt_model_free(out[0])


# ---- outputs: the library fills a caller's struct ------------------------------------------


def fill_model_info(env, raw):
    return lib.ds4rt_model_get_info(env["model"], raw.ptr)


def fill_dspark_info(env, raw):
    return lib.ds4rt_dspark_get_info(env["dspark"], raw.ptr)


def fill_stats(env, raw):
    return lib.ds4rt_session_spec_stats(env["session"], raw.ptr)


OUTPUTS = [
    ("ds4rt_model_info", fill_model_info),
    ("ds4rt_dspark_info", fill_dspark_info),
    ("ds4rt_spec_stats", fill_stats),
]


@pytest.mark.parametrize("name,fill", OUTPUTS)
def test_output_is_filled_up_to_the_callers_size(env, name, fill):
    size, old_size = new.sizeof(name), old.sizeof(name)
    full = A.Raw(name, size, fill=0x77)
    full.set_size(size)
    assert fill(env, full) == 0 and full.guard_intact() and full.size_member() == size
    v10 = A.Raw(name, old_size, fill=0x77)
    v10.set_size(old_size)
    assert fill(env, v10) == 0 and v10.guard_intact() and v10.size_member() == old_size
    assert v10.bytes()[8:] == full.bytes()[8:old_size]
    bigger = A.Raw(name, size + 40, fill=0x77)
    bigger.set_size(size + 40)
    assert fill(env, bigger) == 0 and bigger.guard_intact()
    assert bigger.size_member() == size  # what the library filled
    assert bigger.bytes()[8:size] == full.bytes()[8:] and bigger.bytes()[size:] == bytes(40)
    unset = A.Raw(name, size, fill=0)
    assert fill(env, unset) == lib.DS4RT_ERR_INVALID_ARGUMENT
    assert "set it to sizeof the struct" in A.last_error()


# ---- layouts that changed in place: 1.0 embedded sampler and scheduler parameters ------------


def old_view(raw: A.Raw, name: str):
    return old.cast(f"{name} *", int(new.cast("uintptr_t", raw.buf)))


def test_1_0_initialisers_fill_the_embedded_structs():
    g = init("ds4rt_generate_params", old.sizeof("ds4rt_generate_params"))
    v = old_view(g, "ds4rt_generate_params")
    assert v.max_tokens == 128 and v.stop_at_eos == 1 and v.spec == old.NULL
    assert v.sampler.size == old.sizeof("ds4rt_sampler_params") and v.sampler.top_p == 1.0
    s = init("ds4rt_spec_params", old.sizeof("ds4rt_spec_params"))
    v = old_view(s, "ds4rt_spec_params")
    assert abs(v.confidence_threshold - 0.5) < 1e-7
    assert v.scheduler.size == old.sizeof("ds4rt_scheduler_params")
    # the library's current defaults (probe_max 256 since 1.3; the 1.0 library gave 64)
    assert v.scheduler.probe_max == 256 and v.scheduler.mode == lib.DS4RT_SCHEDULER_ADAPTIVE
    assert v.scheduler.warmup_cycles == 1


def _run(env, params) -> list[int]:
    lib.ds4rt_session_reset(env["session"])
    lib.ds4rt_session_reset_spec_stats(env["session"])
    prompt = new.new("int32_t[]", [1, 2, 3, 4])
    out = new.new("int32_t[]", 24)
    n = new.new("size_t *")
    st = lib.ds4rt_generate(env["session"], prompt, 4, params, out, 24, n)
    assert st == lib.DS4RT_OK, A.last_error()
    return list(out[0 : n[0]])


def _stats(env):
    raw = A.Raw("ds4rt_spec_stats", new.sizeof("ds4rt_spec_stats"))
    raw.set_size(raw.size)
    assert lib.ds4rt_session_spec_stats(env["session"], raw.ptr) == 0
    return raw


def test_1_0_generate_and_spec_layouts_are_translated(env):
    """The same request in the 1.0 layout (structs embedded by value) and in today's (pointers)
    gives the same tokens and the same statistics."""
    # today's layout: sampled (temperature 1, seed 7), DSpark with the scheduler off
    sampler = init("ds4rt_sampler_params", new.sizeof("ds4rt_sampler_params"))
    sampler.ptr.temperature, sampler.ptr.seed = 1.0, 7
    sched = init("ds4rt_scheduler_params", new.sizeof("ds4rt_scheduler_params"))
    sched.ptr.mode = lib.DS4RT_SCHEDULER_OFF
    spec = init("ds4rt_spec_params", new.sizeof("ds4rt_spec_params"))
    spec.ptr.dspark, spec.ptr.scheduler = env["dspark"], sched.ptr
    gen = _gen_params(max_tokens=20)
    gen.ptr.sampler, gen.ptr.spec = sampler.ptr, spec.ptr
    want = _run(env, gen.ptr)
    want_raw = _stats(env)
    want_stats = want_raw.ptr
    assert want_stats.cycles > 0
    off = want_stats.no_draft_by_reason[lib.DS4RT_NO_DRAFT_SCHEDULER_OFF]
    assert want_stats.no_draft == want_stats.cycles and off >= want_stats.cycles - 1  # - the tail
    # the 1.0 layout of both
    spec10 = init("ds4rt_spec_params", old.sizeof("ds4rt_spec_params"))
    v = old_view(spec10, "ds4rt_spec_params")
    v.dspark = old.cast("ds4rt_dspark *", int(new.cast("uintptr_t", env["dspark"])))
    v.scheduler.mode = lib.DS4RT_SCHEDULER_OFF
    gen10 = init("ds4rt_generate_params", old.sizeof("ds4rt_generate_params"))
    v = old_view(gen10, "ds4rt_generate_params")
    v.max_tokens, v.sampler.temperature, v.sampler.seed = 20, 1.0, 7
    v.spec = old.cast("ds4rt_spec_params *", int(new.cast("uintptr_t", spec10.buf)))
    got = _run(env, gen10.ptr)
    assert got == want
    got_raw = _stats(env)
    got_stats = got_raw.ptr
    assert got_stats.cycles == want_stats.cycles and got_stats.tokens == want_stats.tokens
    assert got_stats.no_draft_by_reason[lib.DS4RT_NO_DRAFT_SCHEDULER_OFF] == off
    # and a different seed in the 1.0 layout is read: other tokens
    v.sampler.seed = 8
    assert _run(env, gen10.ptr) != want


def test_reserved_statistics_stay_zero():
    """The ds4 fields ds4rt never produces (documented as reserved in ds4rt.h) and the no-draft
    reason that cannot occur (a missing op fails at load time) are 0 after drafting runs with
    DSpark and with a host drafter."""
    model = ds4rt.Model(ds4rt.data.default_target())
    dspark = ds4rt.DSpark(model, ds4rt.data.default_support())
    s = model.session()
    s.generate([1, 2, 3], max_tokens=24, dspark=dspark, scheduler="always", stop_at_eos=False)
    s.generate([4, 5], max_tokens=12, draft=lambda ctx, n: [7] * n, stop_at_eos=False)
    st = s.spec_stats()
    assert st["proposed"] > 0
    for name in ("verifier_unavailable", "prop_confidence"):
        assert st[name] == 0, name
    assert st["verify_fused_head"] == 0 and st["replay"] == 0
    assert st["no_draft_by_reason"]["op_unavailable"] == 0
