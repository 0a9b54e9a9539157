# DSpark support models and speculative generation (included from _core.pyx after _model.pxi).

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset


cdef extern from "ds4rt.h":
    ctypedef struct ds4rt_dspark:
        pass
    ctypedef struct ds4rt_dspark_params:
        size_t size
        uint32_t window
        int32_t self_test
    ctypedef struct ds4rt_dspark_info:
        size_t size
        int32_t layout
        uint32_t n_stages
        uint32_t block_size
        uint32_t markov_rank
        uint32_t noise_token
        uint32_t window
        uint32_t n_target_layers
        uint32_t target_layers[8]
        char tensor_types[160]
    ctypedef int32_t (*ds4rt_draft_fn)(void *user, const int32_t *context, size_t n_context,
                                       int32_t max_draft, int32_t *draft, float *probs,
                                       uint32_t n_vocab, int32_t *have_probs) noexcept
    ctypedef enum ds4rt_scheduler_mode:
        DS4RT_SCHEDULER_ADAPTIVE
        DS4RT_SCHEDULER_ALWAYS
        DS4RT_SCHEDULER_OFF
    ctypedef struct ds4rt_scheduler_params:
        size_t size
        ds4rt_scheduler_mode mode
        int32_t max_draft
        int32_t warmup_cycles
        int32_t probe_min
        int32_t probe_max
        float history_decay
        float confidence_weight
        int32_t measured_costs
        float verify_cost_base
        float verify_cost_per_token
        float propose_cost
    ctypedef struct ds4rt_spec_stats:
        size_t size
        uint64_t cycles
    ctypedef void (*ds4rt_stats_fn)(void *user, const ds4rt_spec_stats *stats, int final) noexcept
    ctypedef struct ds4rt_spec_params:
        size_t size
        ds4rt_dspark *dspark
        ds4rt_draft_fn draft_fn
        void *draft_user
        float confidence_threshold
        const ds4rt_scheduler_params *scheduler
        ds4rt_stats_fn on_stats
        void *stats_user
    ds4rt_dspark_params ds4rt_dspark_default_params()
    ds4rt_status ds4rt_dspark_load(const ds4rt_model *target, const char *path,
                                   const ds4rt_dspark_params *params, ds4rt_dspark **out) nogil
    void ds4rt_dspark_free(ds4rt_dspark *dspark)
    ds4rt_status ds4rt_dspark_get_info(const ds4rt_dspark *dspark, ds4rt_dspark_info *out)
    ds4rt_status ds4rt_session_attach_dspark(ds4rt_session *session, const ds4rt_dspark *dspark)
    ds4rt_status ds4rt_dspark_propose(ds4rt_session *session, const ds4rt_dspark *dspark,
                                      int32_t anchor, int32_t max_draft, float threshold,
                                      int32_t *tokens, int32_t *n_tokens, float *conf,
                                      int32_t *n_conf, float *logits) nogil
    ds4rt_scheduler_params ds4rt_scheduler_default_params()
    ds4rt_spec_params ds4rt_spec_default_params()
    ds4rt_status ds4rt_session_spec_stats(const ds4rt_session *session, ds4rt_spec_stats *out)
    void ds4rt_session_reset_spec_stats(ds4rt_session *session)
    ds4rt_status ds4rt_spec_stats_format(const ds4rt_spec_stats *stats, int json, char *buf,
                                         size_t cap, size_t *needed)


_SCHEDULERS = {
    "adaptive": DS4RT_SCHEDULER_ADAPTIVE,
    "always": DS4RT_SCHEDULER_ALWAYS,
    "off": DS4RT_SCHEDULER_OFF,
}


cdef class _DSpark:
    cdef ds4rt_dspark *ptr
    cdef public _Model model

    def __cinit__(self, _Model model, path, uint32_t window=0, bint self_test=True):
        cdef ds4rt_dspark_params p = ds4rt_dspark_default_params()
        p.window = window
        p.self_test = self_test
        b = os.fsencode(path)
        cdef const char *cpath = b
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_dspark_load(model.ptr, cpath, &p, &self.ptr)
        check(st)
        self.model = model

    def __dealloc__(self):
        if self.ptr != NULL:
            ds4rt_dspark_free(self.ptr)
            self.ptr = NULL

    def info(self):
        cdef ds4rt_dspark_info info
        info.size = sizeof(ds4rt_dspark_info)
        check(ds4rt_dspark_get_info(self.ptr, &info))
        return {
            "layout": "ds4" if info.layout == 0 else "dflash",
            "n_stages": info.n_stages,
            "block_size": info.block_size,
            "markov_rank": info.markov_rank,
            "noise_token": info.noise_token,
            "window": info.window,
            "target_layers": [info.target_layers[i] for i in range(info.n_target_layers)],
            "tensor_types": info.tensor_types.decode(),
        }


def _attach(_Session s, _DSpark d):
    check(ds4rt_session_attach_dspark(s.ptr, d.ptr))


def _propose(_Session s, _DSpark d, int32_t anchor, int32_t max_draft, float threshold):
    """(drafts, confidences, corrected logits [n, V]) of one DSpark proposal."""
    B = d.info()["block_size"]
    V = s.n_vocab
    toks = np.zeros(B, dtype=np.int32)
    conf = np.zeros(B, dtype=np.float32)
    logits = np.zeros((B, V), dtype=np.float32)
    cdef int32_t[::1] tv = toks
    cdef float[::1] cv = conf
    cdef float[:, ::1] lv = logits
    cdef int32_t n = 0, nc = 0
    cdef ds4rt_status st
    with nogil:
        st = ds4rt_dspark_propose(s.ptr, d.ptr, anchor, max_draft, threshold, &tv[0], &n, &cv[0],
                                  &nc, &lv[0, 0])
    check(st)
    return toks[:n].tolist(), conf[:nc].copy(), logits[:n].copy()


def _stats_format(bytes raw, bint json_mode):
    """Formats a raw ds4rt_spec_stats (bytes) as ds4's line or JSON text."""
    cdef const ds4rt_spec_stats *stp = <const ds4rt_spec_stats *><const char *>raw
    cdef size_t needed = 0
    check(ds4rt_spec_stats_format(stp, json_mode, NULL, 0, &needed))
    buf = bytearray(needed)
    cdef char *bp = buf
    check(ds4rt_spec_stats_format(stp, json_mode, bp, needed, &needed))
    return bytes(buf[: needed - 1]).decode()


cdef bytes _stats_bytes(const ds4rt_spec_stats *st):
    return (<const char *>st)[: sizeof(ds4rt_spec_stats)]


cdef class _SpecRun:
    """Holds the Python callables of one speculative generation for the C trampolines."""
    cdef object draft
    cdef object on_stats
    cdef object error

    def __cinit__(self, draft, on_stats):
        self.draft = draft
        self.on_stats = on_stats
        self.error = None


cdef int32_t _draft_trampoline(void *user, const int32_t *context, size_t n_context,
                               int32_t max_draft, int32_t *draft, float *probs,
                               uint32_t n_vocab, int32_t *have_probs) noexcept with gil:
    cdef _SpecRun run = <_SpecRun>user
    cdef int32_t i
    cdef float[:, ::1] pv
    cdef int32_t[::1] cv
    try:
        ctx = np.empty(n_context, dtype=np.int32)
        if n_context:
            cv = ctx
            memcpy(&cv[0], context, n_context * sizeof(int32_t))
        got = run.draft(ctx, max_draft)
        dist = None
        if isinstance(got, tuple):
            got, dist = got
        ids = [int(t) for t in got][:max_draft]
        for i in range(len(ids)):
            draft[i] = ids[i]
        if dist is not None and probs != NULL and ids:
            arr = np.ascontiguousarray(dist, dtype=np.float32).reshape(-1, n_vocab)[: len(ids)]
            pv = arr
            memcpy(probs, &pv[0, 0], len(ids) * n_vocab * sizeof(float))
            have_probs[0] = 1
        return len(ids)
    except BaseException as e:  # noqa: B036 - must not propagate through C
        if run.error is None:
            run.error = e
        return -1


cdef void _stats_trampoline(void *user, const ds4rt_spec_stats *stats, int final) noexcept with gil:
    cdef _SpecRun run = <_SpecRun>user
    try:
        run.on_stats(_stats_bytes(stats), bool(final))
    except BaseException as e:  # noqa: B036
        if run.error is None:
            run.error = e


def _session_stats(_Session s):
    cdef ds4rt_spec_stats st
    st.size = sizeof(ds4rt_spec_stats)
    check(ds4rt_session_spec_stats(s.ptr, &st))
    return _stats_bytes(&st)


def _session_reset_stats(_Session s):
    ds4rt_session_reset_spec_stats(s.ptr)


def _generate(_Session s, prompt, int max_tokens, float temperature, int top_k, float top_p,
              float min_p, uint64_t seed, bint stop_at_eos, on_token, _DSpark dspark, draft,
              float confidence_threshold, str scheduler, dict sched_opts, on_stats):
    """ds4rt_generate: plain when neither dspark nor draft is given, else speculative."""
    cdef int32_t[::1] toks = np.ascontiguousarray(prompt, dtype=np.int32).ravel()
    cdef size_t n = toks.shape[0]
    cdef ds4rt_generate_params p = ds4rt_generate_default_params()
    cdef ds4rt_sampler_params smp = ds4rt_sampler_default_params()
    p.max_tokens = max_tokens
    p.stop_at_eos = stop_at_eos
    smp.temperature = temperature
    smp.top_k = top_k
    smp.top_p = top_p
    smp.min_p = min_p
    smp.seed = seed
    p.sampler = &smp
    s._trace_error = None
    if on_token is not None:
        s._on_token = on_token
        p.on_token = _token_trampoline
        p.user = <void *>s
    cdef ds4rt_spec_params sp = ds4rt_spec_default_params()
    cdef ds4rt_scheduler_params sched = ds4rt_scheduler_default_params()
    cdef _SpecRun run = _SpecRun(draft, on_stats)
    if dspark is not None or draft is not None:
        if scheduler not in _SCHEDULERS:
            raise ValueError(f"scheduler must be one of {sorted(_SCHEDULERS)}, not {scheduler!r}")
        if dspark is not None:
            sp.dspark = dspark.ptr
        else:
            sp.draft_fn = _draft_trampoline
            sp.draft_user = <void *>run
        sp.confidence_threshold = confidence_threshold
        sched.mode = _SCHEDULERS[scheduler]
        _apply_sched_opts(&sched, sched_opts)
        sp.scheduler = &sched
        if on_stats is not None:
            sp.on_stats = _stats_trampoline
            sp.stats_user = <void *>run
        p.spec = <const void *>&sp
    out = np.empty(max(max_tokens, 0), dtype=np.int32)
    cdef int32_t[::1] ov = out
    cdef size_t n_out = 0
    cdef const int32_t *tp = &toks[0] if n else NULL
    cdef int32_t *op = &ov[0] if max_tokens > 0 else NULL
    cdef ds4rt_status st
    with nogil:
        st = ds4rt_generate(s.ptr, tp, n, &p, op, max(max_tokens, 0), &n_out)
    s._on_token = None
    err = s._trace_error if s._trace_error is not None else run.error
    s._trace_error = None
    if err is not None:
        raise err
    check(st)
    return out[:n_out].tolist()


cdef _apply_sched_opts(ds4rt_scheduler_params *sc, dict opts):
    for k, v in opts.items():
        if k == "max_draft":
            sc.max_draft = v
        elif k == "warmup_cycles":
            sc.warmup_cycles = v
        elif k == "probe_min":
            sc.probe_min = v
        elif k == "probe_max":
            sc.probe_max = v
        elif k == "history_decay":
            sc.history_decay = v
        elif k == "confidence_weight":
            sc.confidence_weight = v
        elif k == "measured_costs":
            sc.measured_costs = 1 if v else 0
        elif k == "verify_cost_base":
            sc.verify_cost_base = v
        elif k == "verify_cost_per_token":
            sc.verify_cost_per_token = v
        elif k == "propose_cost":
            sc.propose_cost = v
        else:
            raise ValueError(f"unknown scheduler option {k!r}")
