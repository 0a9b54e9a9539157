# DSpark support models, proposals and speculative statistics (included from _core.pyx after
# _model.pxi; speculative generation itself is in _generate.pxi).

cimport cython
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t


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
        uint32_t n_acceptance_prior
        float acceptance_prior[16]
    ctypedef struct ds4rt_spec_stats:
        size_t size
        uint64_t cycles
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
    ds4rt_status ds4rt_session_spec_stats(const ds4rt_session *session, ds4rt_spec_stats *out)
    void ds4rt_session_reset_spec_stats(ds4rt_session *session)
    ds4rt_status ds4rt_spec_stats_format(const ds4rt_spec_stats *stats, int json, char *buf,
                                         size_t cap, size_t *needed)


@cython.no_gc_clear
cdef class _DSpark:
    """A support model. close() makes it unusable at once; the C object is freed when no open
    session has it attached any more (the C session's drafter reads its weights)."""
    cdef ds4rt_dspark *ptr
    cdef public _Model model
    cdef public object path
    cdef readonly uint32_t block_size
    cdef int n_attached         # sessions that have it attached in C
    cdef bint closing
    cdef object __weakref__

    def __cinit__(self, _Model model, path, uint32_t window=0, bint self_test=True):
        cdef ds4rt_model *mp = model.live()
        cdef ds4rt_dspark_params p = ds4rt_dspark_default_params()
        p.window = window
        p.self_test = self_test
        b = os.fsencode(path)
        cdef const char *cpath = b
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_dspark_load(mp, cpath, &p, &self.ptr)
        check(st)
        self.model = model
        self.path = path
        self.block_size = self.info()["block_size"]
        model.dependents.add(self)

    def __dealloc__(self):
        if self.ptr != NULL:
            ds4rt_dspark_free(self.ptr)
            self.ptr = NULL

    cdef ds4rt_dspark *live(self) except NULL:
        if self.closing or self.ptr == NULL:
            raise ClosedError(f"the support model {self.path} is closed")
        return self.ptr

    cdef void detached(self):
        self.n_attached -= 1
        if self.closing and self.n_attached <= 0 and self.ptr != NULL:
            ds4rt_dspark_free(self.ptr)
            self.ptr = NULL

    @property
    def closed(self):
        return bool(self.closing)

    def close(self):
        """Unusable from now on; freed now, or when the last session using it lets go."""
        self.closing = True
        if self.n_attached <= 0 and self.ptr != NULL:
            ds4rt_dspark_free(self.ptr)
            self.ptr = NULL

    def info(self):
        cdef ds4rt_dspark_info info
        info.size = sizeof(ds4rt_dspark_info)
        check(ds4rt_dspark_get_info(self.live(), &info))
        return {
            "layout": "ds4" if info.layout == 0 else "dflash",
            "n_stages": info.n_stages,
            "block_size": info.block_size,
            "markov_rank": info.markov_rank,
            "noise_token": info.noise_token,
            "window": info.window,
            "target_layers": [info.target_layers[i] for i in range(info.n_target_layers)],
            "tensor_types": info.tensor_types.decode(),
            "acceptance_prior": [
                info.acceptance_prior[i] for i in range(info.n_acceptance_prior)
            ],
        }


def _attach(_Session s, _DSpark d):
    s.enter()
    try:
        s.attach(d)
    finally:
        s.leave()


def _propose(_Session s, _DSpark d, int32_t anchor, int32_t max_draft, float threshold):
    """(drafts, confidences, corrected logits [n, V]) of one DSpark proposal."""
    cdef uint32_t B = d.block_size
    cdef int V = s.n_vocab
    toks = np.zeros(B, dtype=np.int32)
    conf = np.zeros(B, dtype=np.float32)
    logits = np.zeros((B, V), dtype=np.float32)
    cdef int32_t[::1] tv = toks
    cdef float[::1] cv = conf
    cdef float[:, ::1] lv = logits
    cdef int32_t n = 0, nc = 0
    cdef ds4rt_status st
    cdef ds4rt_dspark *dp
    s.enter()
    try:
        s.attach(d)
        dp = d.live()
        with nogil:
            st = ds4rt_dspark_propose(s.ptr, dp, anchor, max_draft, threshold, &tv[0], &n,
                                      &cv[0], &nc, &lv[0, 0])
        check(st)
    finally:
        s.leave()
    return toks[:n].tolist(), conf[:nc].copy(), logits[:n].copy()


def _stats_format(bytes raw, bint json_mode):
    """Formats a raw ds4rt_spec_stats (bytes) as ds4's line or JSON text."""
    if len(raw) != sizeof(ds4rt_spec_stats):
        raise ValueError(f"raw statistics must be {sizeof(ds4rt_spec_stats)} bytes")
    cdef const ds4rt_spec_stats *stp = <const ds4rt_spec_stats *><const char *>raw
    cdef size_t needed = 0
    check(ds4rt_spec_stats_format(stp, json_mode, NULL, 0, &needed))
    buf = bytearray(needed)
    cdef char *bp = buf
    check(ds4rt_spec_stats_format(stp, json_mode, bp, needed, &needed))
    return bytes(buf[: needed - 1]).decode()


cdef bytes _stats_bytes(const ds4rt_spec_stats *st):
    return (<const char *>st)[: sizeof(ds4rt_spec_stats)]


def _session_stats(_Session s):
    cdef ds4rt_spec_stats st
    st.size = sizeof(ds4rt_spec_stats)
    s.enter()
    try:
        check(ds4rt_session_spec_stats(s.ptr, &st))
    finally:
        s.leave()
    return _stats_bytes(&st)


def _session_reset_stats(_Session s):
    s.enter()
    try:
        ds4rt_session_reset_spec_stats(s.ptr)
    finally:
        s.leave()
