# Model, session and sampler bindings (included from _core.pyx).

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef extern from "ds4rt.h":
    ctypedef struct ds4rt_model:
        pass
    ctypedef struct ds4rt_session:
        pass
    ctypedef struct ds4rt_sampler:
        pass
    ctypedef enum ds4rt_numerics:
        DS4RT_NUMERICS_OFFICIAL
        DS4RT_NUMERICS_LLAMACPP
    ctypedef enum ds4rt_cache_policy:
        DS4RT_CACHE_AUTO
        DS4RT_CACHE_OFF
        DS4RT_CACHE_ON
    ctypedef enum ds4rt_backend_kind:
        DS4RT_BACKEND_AUTO
        DS4RT_BACKEND_CPU
        DS4RT_BACKEND_CUDA
        DS4RT_BACKEND_HIP
    ctypedef void (*ds4rt_progress_fn)(void *user, uint64_t done_bytes,
                                       uint64_t total_bytes) noexcept
    ctypedef struct ds4rt_model_params:
        size_t size
        int32_t n_threads
        ds4rt_numerics numerics
        ds4rt_cache_policy cache_policy
        uint64_t cache_budget_bytes
        int32_t backend
        int32_t device
        ds4rt_progress_fn progress
        void *progress_user
    ctypedef struct ds4rt_model_info:
        size_t size
        uint32_t n_layer
        uint32_t n_embd
        uint32_t n_vocab
        uint32_t n_head
        uint32_t head_dim
        uint32_t n_expert
        uint32_t n_expert_used
        uint32_t window
        uint32_t n_hc
        int32_t bos_id
        int32_t eos_id
        ds4rt_numerics numerics
        int32_t n_threads
        uint64_t file_bytes
        ds4rt_cache_policy cache_requested
        int32_t cache_active
        uint64_t cache_bytes
        uint64_t cache_hits
        uint64_t cache_fallbacks
        char cache_reason[160]
        char backend[32]
        int32_t backend_kind
        int32_t device
        uint64_t weight_bytes
        uint64_t weight_owned_bytes
        uint64_t state_fixed_bytes
        uint64_t state_bytes_per_1k
        uint64_t scratch_bytes
        uint64_t graph_bytes
    ctypedef struct ds4rt_session_params:
        size_t size
        int64_t n_ctx
        uint32_t max_batch
    ctypedef struct ds4rt_sampler_params:
        size_t size
        float temperature
        int32_t top_k
        float top_p
        float min_p
        uint64_t seed
    ctypedef int (*ds4rt_token_fn)(void *user, int32_t token) noexcept
    ctypedef struct ds4rt_generate_params:
        size_t size
        int32_t max_tokens
        int32_t stop_at_eos
        const ds4rt_sampler_params *sampler
        ds4rt_token_fn on_token
        void *user
        const void *spec
    ctypedef void (*ds4rt_trace_fn)(void *user, uint32_t layer, uint32_t stage, int64_t pos,
                                    const float *data, int64_t n) noexcept

    ds4rt_model_params ds4rt_model_default_params()
    ds4rt_status ds4rt_model_load(const char *path, const ds4rt_model_params *params,
                                  ds4rt_model **out) nogil
    void ds4rt_model_free(ds4rt_model *model)
    ds4rt_status ds4rt_model_get_info(const ds4rt_model *model, ds4rt_model_info *out)
    const ds4rt_tokenizer *ds4rt_model_tokenizer(const ds4rt_model *model)
    ds4rt_session_params ds4rt_session_default_params()
    ds4rt_status ds4rt_session_create(ds4rt_model *model, const ds4rt_session_params *params,
                                      ds4rt_session **out) nogil
    void ds4rt_session_free(ds4rt_session *session)
    void ds4rt_session_reset(ds4rt_session *session)
    int64_t ds4rt_session_position(const ds4rt_session *session)
    ds4rt_status ds4rt_session_eval(ds4rt_session *session, const int32_t *tokens, size_t n,
                                    float *logits) nogil
    const float *ds4rt_session_logits(const ds4rt_session *session)
    ds4rt_status ds4rt_session_truncate(ds4rt_session *session, int64_t n_tokens) nogil
    ds4rt_status ds4rt_session_set_capture(ds4rt_session *session, const uint32_t *layers, size_t n)
    ds4rt_status ds4rt_session_get_capture(const ds4rt_session *session, uint32_t slot,
                                           const float **rows, int64_t *first_pos, int64_t *n_rows)
    ds4rt_status ds4rt_session_set_trace(ds4rt_session *session, ds4rt_trace_fn fn, void *user)
    ds4rt_sampler_params ds4rt_sampler_default_params()
    ds4rt_status ds4rt_sampler_create(const ds4rt_sampler_params *params, uint32_t n_vocab,
                                      ds4rt_sampler **out)
    void ds4rt_sampler_free(ds4rt_sampler *sampler)
    ds4rt_status ds4rt_sampler_sample(ds4rt_sampler *sampler, const float *logits, int32_t *token)
    ds4rt_status ds4rt_sampler_probs(ds4rt_sampler *sampler, const float *logits, float *probs)
    ds4rt_generate_params ds4rt_generate_default_params()
    ds4rt_status ds4rt_generate(ds4rt_session *session, const int32_t *prompt, size_t n_prompt,
                                const ds4rt_generate_params *params, int32_t *out, size_t cap,
                                size_t *n_out) nogil


_NUMERICS = {"official": DS4RT_NUMERICS_OFFICIAL, "llama.cpp": DS4RT_NUMERICS_LLAMACPP}
_CACHE = {"auto": DS4RT_CACHE_AUTO, "off": DS4RT_CACHE_OFF, "on": DS4RT_CACHE_ON}
_CACHE_NAMES = {v: k for k, v in _CACHE.items()}
_BACKENDS = {"auto": DS4RT_BACKEND_AUTO, "cpu": DS4RT_BACKEND_CPU, "cuda": DS4RT_BACKEND_CUDA,
             "hip": DS4RT_BACKEND_HIP}


cdef class _LoadProgress:
    """The Python callable of one load's progress callback, and what it raised."""
    cdef object fn
    cdef object error

    def __cinit__(self, fn):
        self.fn = fn
        self.error = None


cdef void _progress_trampoline(void *user, uint64_t done, uint64_t total) noexcept with gil:
    cdef _LoadProgress lp = <_LoadProgress>user
    if lp.error is not None:
        return
    try:
        lp.fn(done, total)
    except BaseException as e:  # noqa: B036 - must not propagate through C
        lp.error = e


cdef class _Model:
    cdef ds4rt_model *ptr
    cdef public object path

    def __cinit__(self, path, str numerics="official", int n_threads=0, str cache="auto",
                  uint64_t cache_budget=0, str backend="auto", int device=0, progress=None):
        if numerics not in _NUMERICS:
            raise ValueError(f"numerics must be one of {sorted(_NUMERICS)}, not {numerics!r}")
        if cache not in _CACHE:
            raise ValueError(f"cache must be one of {sorted(_CACHE)}, not {cache!r}")
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {sorted(_BACKENDS)}, not {backend!r}")
        cdef ds4rt_model_params p = ds4rt_model_default_params()
        p.numerics = _NUMERICS[numerics]
        p.n_threads = n_threads
        p.cache_policy = _CACHE[cache]
        p.cache_budget_bytes = cache_budget
        p.backend = _BACKENDS[backend]
        p.device = device
        cdef _LoadProgress lp = _LoadProgress(progress)
        if progress is not None:
            p.progress = _progress_trampoline
            p.progress_user = <void *>lp
        b = os.fsencode(path)
        cdef const char *cpath = b
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_model_load(cpath, &p, &self.ptr)
        if lp.error is not None:  # the callback raised: the load is not kept
            if self.ptr != NULL:
                ds4rt_model_free(self.ptr)
                self.ptr = NULL
            raise lp.error
        check(st)
        self.path = path

    def __dealloc__(self):
        if self.ptr != NULL:
            ds4rt_model_free(self.ptr)
            self.ptr = NULL

    def tokenizer(self):
        """The model's own tokenizer (borrowed; keeps the model alive), or None."""
        cdef const ds4rt_tokenizer *tp = ds4rt_model_tokenizer(self.ptr)
        if tp == NULL:
            return None
        cdef _Tokenizer t = _Tokenizer.__new__(_Tokenizer)
        t.ptr = <ds4rt_tokenizer *>tp
        t.borrowed = True
        t.owner = self
        return t

    def info(self):
        cdef ds4rt_model_info info
        info.size = sizeof(ds4rt_model_info)
        check(ds4rt_model_get_info(self.ptr, &info))
        return {
            "n_layer": info.n_layer, "n_embd": info.n_embd, "n_vocab": info.n_vocab,
            "n_head": info.n_head, "head_dim": info.head_dim, "n_expert": info.n_expert,
            "n_expert_used": info.n_expert_used, "window": info.window, "n_hc": info.n_hc,
            "bos_id": info.bos_id, "eos_id": info.eos_id,
            "numerics": "official" if info.numerics == DS4RT_NUMERICS_OFFICIAL else "llama.cpp",
            "n_threads": info.n_threads, "file_bytes": info.file_bytes,
            "cache": {
                "requested": _CACHE_NAMES[info.cache_requested], "active": bool(info.cache_active),
                "bytes": info.cache_bytes, "hits": info.cache_hits,
                "fallbacks": info.cache_fallbacks, "reason": info.cache_reason.decode(),
            },
            "backend": info.backend.decode(), "device": info.device,
            "memory": {
                "weights": info.weight_bytes, "weights_owned": info.weight_owned_bytes,
                "state_fixed": info.state_fixed_bytes, "state_per_1k": info.state_bytes_per_1k,
                "scratch": info.scratch_bytes, "graphs": info.graph_bytes,
            },
        }


cdef void _trace_trampoline(void *user, uint32_t layer, uint32_t stage, int64_t pos,
                            const float *data, int64_t n) noexcept with gil:
    cdef _Session s = <_Session>user
    arr = np.empty(n, dtype=np.float32)
    cdef float[::1] view = arr
    if n:
        memcpy(&view[0], data, n * sizeof(float))
    try:
        s._trace(layer, stage, pos, arr)
    except BaseException as e:  # noqa: B036 - must not propagate through C
        if s._trace_error is None:
            s._trace_error = e


cdef int _token_trampoline(void *user, int32_t token) noexcept with gil:
    cdef _Session s = <_Session>user
    try:
        return 0 if s._on_token(token) is False else 1
    except BaseException as e:  # noqa: B036
        if s._trace_error is None:
            s._trace_error = e
        return 0


cdef class _Session:
    cdef ds4rt_session *ptr
    cdef public _Model model
    cdef public int n_vocab
    cdef object _trace
    cdef public object _trace_error
    cdef public object _on_token

    def __cinit__(self, _Model model, int64_t n_ctx=4096, uint32_t max_batch=32):
        cdef ds4rt_session_params p = ds4rt_session_default_params()
        p.n_ctx = n_ctx
        p.max_batch = max_batch
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_session_create(model.ptr, &p, &self.ptr)
        check(st)
        self.model = model
        self.n_vocab = model.info()["n_vocab"]

    def __dealloc__(self):
        if self.ptr != NULL:
            ds4rt_session_free(self.ptr)
            self.ptr = NULL

    cdef _raise_callback_error(self):
        err = self._trace_error
        self._trace_error = None
        if err is not None:
            raise err

    def eval(self, tokens, bint want_logits=False):
        cdef int32_t[::1] toks = np.ascontiguousarray(tokens, dtype=np.int32).ravel()
        cdef size_t n = toks.shape[0]
        out = np.empty((n, self.n_vocab), dtype=np.float32) if want_logits else None
        cdef float[:, ::1] ov
        cdef float *op = NULL
        if want_logits and n:
            ov = out
            op = &ov[0, 0]
        cdef const int32_t *tp = &toks[0] if n else NULL
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_session_eval(self.ptr, tp, n, op)
        self._raise_callback_error()
        check(st)
        return out

    def current_logits(self):
        cdef const float *p = ds4rt_session_logits(self.ptr)
        if p == NULL:
            return None
        out = np.empty(self.n_vocab, dtype=np.float32)
        cdef float[::1] ov = out
        memcpy(&ov[0], p, self.n_vocab * sizeof(float))
        return out

    @property
    def position(self):
        return ds4rt_session_position(self.ptr)

    def reset(self):
        ds4rt_session_reset(self.ptr)

    def truncate(self, int64_t n_tokens):
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_session_truncate(self.ptr, n_tokens)
        check(st)

    def set_capture(self, layers):
        cdef uint32_t[::1] ls = np.ascontiguousarray(layers, dtype=np.uint32).ravel()
        cdef size_t n = ls.shape[0]
        check(ds4rt_session_set_capture(self.ptr, &ls[0] if n else NULL, n))

    def capture(self, uint32_t slot):
        cdef const float *rows
        cdef int64_t first, nrows
        check(ds4rt_session_get_capture(self.ptr, slot, &rows, &first, &nrows))
        d = self.model.info()["n_embd"]
        out = np.empty((nrows, d), dtype=np.float32)
        cdef float[:, ::1] ov = out
        if nrows:
            memcpy(&ov[0, 0], rows, nrows * d * sizeof(float))
        return first, out

    def set_trace(self, fn):
        self._trace = fn
        self._trace_error = None
        if fn is None:
            check(ds4rt_session_set_trace(self.ptr, NULL, NULL))
        else:
            check(ds4rt_session_set_trace(self.ptr, _trace_trampoline, <void *>self))


cdef class _Sampler:
    cdef ds4rt_sampler *ptr
    cdef int n_vocab

    def __cinit__(self, uint32_t n_vocab, float temperature=0.0, int top_k=0, float top_p=1.0,
                  float min_p=0.0, uint64_t seed=0):
        cdef ds4rt_sampler_params p = ds4rt_sampler_default_params()
        p.temperature = temperature
        p.top_k = top_k
        p.top_p = top_p
        p.min_p = min_p
        p.seed = seed
        check(ds4rt_sampler_create(&p, n_vocab, &self.ptr))
        self.n_vocab = n_vocab

    def __dealloc__(self):
        if self.ptr != NULL:
            ds4rt_sampler_free(self.ptr)

    def sample(self, logits):
        cdef float[::1] lv = np.ascontiguousarray(logits, dtype=np.float32).ravel()
        if lv.shape[0] != self.n_vocab:
            raise ValueError(f"expected {self.n_vocab} logits, got {lv.shape[0]}")
        cdef int32_t tok
        check(ds4rt_sampler_sample(self.ptr, &lv[0], &tok))
        return tok

    def probs(self, logits):
        cdef float[::1] lv = np.ascontiguousarray(logits, dtype=np.float32).ravel()
        if lv.shape[0] != self.n_vocab:
            raise ValueError(f"expected {self.n_vocab} logits, got {lv.shape[0]}")
        out = np.empty(self.n_vocab, dtype=np.float32)
        cdef float[::1] ov = out
        check(ds4rt_sampler_probs(self.ptr, &lv[0], &ov[0]))
        return out
