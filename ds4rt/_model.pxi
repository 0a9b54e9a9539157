# Model, session and sampler bindings (included from _core.pyx).
#
# Lifetimes: a session and a support model keep their model alive (a Python reference), a session
# keeps alive the support model attached to it; close() frees at once what nothing open depends on
# (docs/API.md, "Models and sessions"). A session serves one call at a time: every entry point takes
# the session's busy flag while holding the GIL, so a second thread, or a callback of the running
# call, gets BusyError instead of a corrupted heap.

cimport cython
from libc.stdint cimport INT32_MAX, INT32_MIN, int32_t, int64_t, uint32_t, uint64_t
from cpython.exc cimport PyErr_CheckSignals
from libc.string cimport memcpy

import weakref

from ds4rt.errors import BusyError


cdef extern from "ds4rt.h":
    ctypedef struct ds4rt_model:
        pass
    ctypedef struct ds4rt_session:
        pass
    ctypedef struct ds4rt_sampler:
        pass
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
        int32_t load
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


_NUMERICS = {"official": DS4RT_NUMERICS_OFFICIAL, "llama.cpp": DS4RT_NUMERICS_LLAMACPP}
_CACHE = {"auto": DS4RT_CACHE_AUTO, "off": DS4RT_CACHE_OFF, "on": DS4RT_CACHE_ON}
_CACHE_NAMES = {v: k for k, v in _CACHE.items()}
_LOADS = {"map": DS4RT_LOAD_MAP, "copy": DS4RT_LOAD_COPY}
_BACKENDS = {"auto": DS4RT_BACKEND_AUTO, "cpu": DS4RT_BACKEND_CPU, "cuda": DS4RT_BACKEND_CUDA,
             "hip": DS4RT_BACKEND_HIP}


cdef class _LoadProgress:
    """The Python callable of one load's progress callback, and what it raised."""
    cdef object fn
    cdef object error
    cdef bint check_signals

    def __cinit__(self, fn, bint check_signals):
        self.fn = fn
        self.error = None
        self.check_signals = check_signals


cdef void _progress_trampoline(void *user, uint64_t done, uint64_t total) noexcept with gil:
    cdef _LoadProgress lp = <_LoadProgress>user
    if lp.error is not None:
        return
    try:
        if lp.fn is not None:
            lp.fn(done, total)
        if lp.check_signals:
            PyErr_CheckSignals()  # Ctrl-C: the load runs to its end, then is undone
    except BaseException as e:  # noqa: B036 - must not propagate through C
        lp.error = e


def token_ids(tokens, str what="tokens"):
    """Token ids as a one-dimensional C-contiguous int32 array, never by wrapping: TypeError
    for anything but integers (text, floats, bools), OverflowError for a value outside int32,
    ValueError for more than one dimension. Ids inside int32 but outside the vocabulary are
    the C library's to refuse (OutOfRangeError naming the index)."""
    if isinstance(tokens, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be a sequence of token ids, not {type(tokens).__name__}")
    if isinstance(tokens, np.ndarray):
        arr = tokens
    else:
        try:
            items = list(tokens)
        except TypeError:
            raise TypeError(f"{what} must be a sequence of token ids, not "
                            f"{type(tokens).__name__}") from None
        for i, x in enumerate(items):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                raise TypeError(f"{what}[{i}] must be an int token id, not {type(x).__name__}")
        for i, x in enumerate(items):
            if not INT32_MIN <= x <= INT32_MAX:
                raise OverflowError(f"{what}[{i}] = {x} does not fit a 32-bit token id")
        return np.asarray(items, dtype=np.int32).reshape(-1)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.shape[0] == 0:
            return np.empty(0, dtype=np.int32)
        raise TypeError(f"{what} must hold integer token ids, not {arr.dtype}")
    if arr.dtype != np.int32 and arr.shape[0]:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < INT32_MIN or hi > INT32_MAX:
            i = int(np.argmax((arr < INT32_MIN) | (arr > INT32_MAX)))
            raise OverflowError(f"{what}[{i}] = {int(arr[i])} does not fit a 32-bit token id")
    return np.ascontiguousarray(arr, dtype=np.int32)


@cython.no_gc_clear
cdef class _Model:
    """A loaded target. Closing it closes its sessions and support models first."""
    cdef ds4rt_model *ptr
    cdef public object path
    cdef object dependents      # WeakSet of the _Session and _DSpark objects made from it
    cdef _Tokenizer tok         # the borrowed tokenizer handed out (closed with the model)
    cdef object __weakref__

    def __cinit__(self, path, str numerics="official", int32_t n_threads=0, str cache="auto",
                  uint64_t cache_budget=0, str backend="auto", int32_t device=0, progress=None,
                  bint check_signals=True, str load="map"):
        if numerics not in _NUMERICS:
            raise ValueError(f"numerics must be one of {sorted(_NUMERICS)}, not {numerics!r}")
        if cache not in _CACHE:
            raise ValueError(f"cache must be one of {sorted(_CACHE)}, not {cache!r}")
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {sorted(_BACKENDS)}, not {backend!r}")
        if load not in _LOADS:
            raise ValueError(f"load must be one of {sorted(_LOADS)}, not {load!r}")
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be callable, not {type(progress).__name__}")
        self.dependents = weakref.WeakSet()
        cdef ds4rt_model_params p = ds4rt_model_default_params()
        p.numerics = _NUMERICS[numerics]
        p.n_threads = n_threads
        p.cache_policy = _CACHE[cache]
        p.cache_budget_bytes = cache_budget
        p.backend = _BACKENDS[backend]
        p.device = device
        p.load = _LOADS[load]
        cdef _LoadProgress lp = _LoadProgress(progress, check_signals)
        if progress is not None or check_signals:
            p.progress = _progress_trampoline
            p.progress_user = <void *>lp
        b = os.fsencode(path)
        cdef const char *cpath = b
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_model_load(cpath, &p, &self.ptr)
        if lp.error is not None:  # the callback raised (or Ctrl-C): the load is not kept
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

    cdef ds4rt_model *live(self) except NULL:
        if self.ptr == NULL:
            raise ClosedError(f"the model {self.path} is closed")
        return self.ptr

    @property
    def closed(self):
        return self.ptr == NULL

    def close(self):
        """Closes every session and support model of this model, then frees it. Idempotent;
        BusyError (and nothing closed) while one of its sessions is inside a call."""
        if self.ptr == NULL:
            return
        deps = list(self.dependents)
        for d in deps:
            if isinstance(d, _Session) and (<_Session>d).busy:
                raise BusyError("cannot close the model: one of its sessions is inside a call")
        for d in deps:
            if isinstance(d, _Session):
                d.close()
        for d in deps:
            if not isinstance(d, _Session):
                d.close()
        if self.tok is not None:
            self.tok.ptr = NULL
        ds4rt_model_free(self.ptr)
        self.ptr = NULL

    def tokenizer(self):
        """The model's own tokenizer (borrowed: it keeps the model alive and is closed with
        it), or None."""
        if self.tok is not None:
            return self.tok
        cdef const ds4rt_tokenizer *tp = ds4rt_model_tokenizer(self.live())
        if tp == NULL:
            return None
        cdef _Tokenizer t = _Tokenizer.__new__(_Tokenizer)
        t.ptr = <ds4rt_tokenizer *>tp
        t.borrowed = True
        t.owner = self
        self.tok = t
        return t

    def info(self):
        cdef ds4rt_model_info info
        info.size = sizeof(ds4rt_model_info)
        check(ds4rt_model_get_info(self.live(), &info))
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
    if s._trace_error is not None:
        return
    arr = np.empty(n, dtype=np.float32)
    cdef float[::1] view = arr
    if n:
        memcpy(&view[0], data, n * sizeof(float))
    try:
        s._trace(layer, stage, pos, arr)
    except BaseException as e:  # noqa: B036 - must not propagate through C
        s._trace_error = e


@cython.no_gc_clear
cdef class _Session:
    """One context. enter()/leave() bracket every call (the busy flag, see the file comment)."""
    cdef ds4rt_session *ptr
    cdef public _Model model
    cdef readonly int n_vocab
    cdef readonly int n_embd
    cdef readonly int64_t n_ctx
    cdef readonly uint32_t max_batch
    cdef bint busy
    cdef object _trace
    cdef public object _trace_error
    cdef object dspark          # the _DSpark attached in C, kept alive while it is
    cdef public object _draft_key  # the host drafter's _DraftKey (_generate.pxi)
    cdef object __weakref__

    def __cinit__(self, _Model model, int64_t n_ctx=4096, uint32_t max_batch=32):
        cdef ds4rt_model *mp = model.live()
        cdef ds4rt_session_params p = ds4rt_session_default_params()
        p.n_ctx = n_ctx
        p.max_batch = max_batch
        cdef ds4rt_status st
        with nogil:
            st = ds4rt_session_create(mp, &p, &self.ptr)
        check(st)
        self.model = model
        info = model.info()
        self.n_vocab = info["n_vocab"]
        self.n_embd = info["n_embd"]
        self.n_ctx = n_ctx
        self.max_batch = max_batch
        model.dependents.add(self)

    def __dealloc__(self):
        if self.ptr != NULL:
            ds4rt_session_free(self.ptr)
            self.ptr = NULL
        self._release_dspark()

    cdef _release_dspark(self):
        if self.dspark is not None:
            (<_DSpark>self.dspark).detached()
            self.dspark = None

    cdef int enter(self) except -1:
        if self.ptr == NULL:
            raise ClosedError("the session is closed" if self.model is None or
                              self.model.ptr != NULL else "the session's model is closed")
        if self.busy:
            raise BusyError("the session is inside another call (from another thread, or from a "
                            "callback of that call); a session serves one call at a time")
        self.busy = True
        return 0

    cdef void leave(self):
        self.busy = False

    @property
    def closed(self):
        return self.ptr == NULL

    @property
    def in_call(self):
        return bool(self.busy)

    def close(self):
        """Frees the session (idempotent; BusyError while a call on it is running)."""
        if self.ptr == NULL:
            return
        if self.busy:
            raise BusyError("cannot close the session: a call on it is running")
        ds4rt_session_free(self.ptr)
        self.ptr = NULL
        self._trace = None
        self._release_dspark()

    cdef int attach(self, _DSpark d) except -1:
        """Attaches d in C (the caller holds the busy flag) and keeps it alive while attached."""
        if self.dspark is d:
            return 0
        check(ds4rt_session_attach_dspark(self.ptr, d.live()))
        self._release_dspark()
        d.n_attached += 1
        self.dspark = d
        return 0

    def eval(self, tokens, bint want_logits=False):
        toks_arr = token_ids(tokens)
        cdef int32_t[::1] toks = toks_arr
        cdef size_t n = toks.shape[0]
        self.enter()
        try:
            out = np.empty((n, self.n_vocab), dtype=np.float32) if want_logits else None
            return self._eval(toks, out)
        finally:
            self.leave()

    cdef object _eval(self, int32_t[::1] toks, object out):
        cdef size_t n = toks.shape[0]
        cdef float[:, ::1] ov
        cdef float *op = NULL
        if out is not None and n:
            ov = out
            op = &ov[0, 0]
        cdef const int32_t *tp = &toks[0] if n else NULL
        cdef ds4rt_status st
        self._trace_error = None
        with nogil:
            st = ds4rt_session_eval(self.ptr, tp, n, op)
        err = self._trace_error
        self._trace_error = None
        if err is not None:
            raise err
        check(st)
        return out

    def current_logits(self):
        cdef const float *p
        self.enter()
        try:
            p = ds4rt_session_logits(self.ptr)
            if p == NULL:
                return None
            out = np.empty(self.n_vocab, dtype=np.float32)
            out[:] = <float[:self.n_vocab]><float *>p
            return out
        finally:
            self.leave()

    @property
    def position(self):
        self.enter()
        pos = ds4rt_session_position(self.ptr)
        self.leave()
        return pos

    def reset(self):
        self.enter()
        try:
            ds4rt_session_reset(self.ptr)
        finally:
            self.leave()

    def truncate(self, int64_t n_tokens):
        cdef ds4rt_status st
        self.enter()
        try:
            with nogil:
                st = ds4rt_session_truncate(self.ptr, n_tokens)
            check(st)
        finally:
            self.leave()

    def set_capture(self, layers):
        arr = np.asarray(layers)
        if arr.size and arr.dtype.kind not in "iu":
            raise TypeError(f"capture layers must be integers, not {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() > 0xFFFFFFFF):
            raise OverflowError("capture layers must lie in [0, 2**32)")
        cdef uint32_t[::1] ls = np.ascontiguousarray(arr.reshape(-1), dtype=np.uint32)
        cdef size_t n = ls.shape[0]
        self.enter()
        try:
            check(ds4rt_session_set_capture(self.ptr, &ls[0] if n else NULL, n))
        finally:
            self.leave()

    def capture(self, uint32_t slot):
        cdef const float *rows
        cdef int64_t first, nrows
        self.enter()
        try:
            check(ds4rt_session_get_capture(self.ptr, slot, &rows, &first, &nrows))
            out = np.empty((nrows, self.n_embd), dtype=np.float32)
            if nrows:
                out[:, :] = <float[:nrows, :self.n_embd]><float *>rows
            return first, out
        finally:
            self.leave()

    def set_trace(self, fn):
        if fn is not None and not callable(fn):
            raise TypeError(f"the trace function must be callable, not {type(fn).__name__}")
        self.enter()
        try:
            self._trace = fn
            self._trace_error = None
            if fn is None:
                check(ds4rt_session_set_trace(self.ptr, NULL, NULL))
            else:
                check(ds4rt_session_set_trace(self.ptr, _trace_trampoline, <void *>self))
        finally:
            self.leave()


def sampler_defaults():
    """ds4rt_sampler_default_params() as a dict (the Python defaults are these)."""
    cdef ds4rt_sampler_params p = ds4rt_sampler_default_params()
    return {"temperature": p.temperature, "top_k": p.top_k, "top_p": p.top_p, "min_p": p.min_p,
            "seed": p.seed}


cdef class _Sampler:
    cdef ds4rt_sampler *ptr
    cdef int n_vocab

    def __cinit__(self, uint32_t n_vocab, float temperature=0.0, int32_t top_k=0,
                  float top_p=1.0, float min_p=0.0, uint64_t seed=0):
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

    cdef object _logits(self, logits):
        arr = np.asarray(logits)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"logits must be numbers, not {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float32).reshape(-1)
        if arr.shape[0] != self.n_vocab:
            raise ValueError(f"expected {self.n_vocab} logits, got {arr.shape[0]}")
        return arr

    def sample(self, logits):
        cdef float[::1] lv = self._logits(logits)
        cdef int32_t tok
        check(ds4rt_sampler_sample(self.ptr, &lv[0], &tok))
        return tok

    def probs(self, logits):
        cdef float[::1] lv = self._logits(logits)
        out = np.empty(self.n_vocab, dtype=np.float32)
        cdef float[::1] ov = out
        check(ds4rt_sampler_probs(self.ptr, &lv[0], &ov[0]))
        return out


cdef extern from "ds4rt.h":
    ctypedef struct ds4rt_memory_params:
        size_t size
        int64_t n_ctx
        uint32_t max_batch
        const char *support
        uint32_t dspark_window
        uint64_t cache_budget_bytes
        int32_t numerics
        int32_t n_threads
    ctypedef struct ds4rt_memory_plan:
        size_t size
        int64_t n_ctx
        uint32_t max_batch
        uint32_t n_layer
        uint64_t file_bytes
        uint64_t data_bytes
        uint64_t weight_bytes
        uint64_t weight_owned_bytes
        uint64_t weight_kind_bytes[16]
        uint64_t state_bytes
        uint64_t state_fixed_bytes
        uint64_t state_bytes_per_1k
        uint64_t state_window_bytes
        uint64_t state_frontier_bytes
        uint64_t state_compressed_bytes
        uint64_t state_indexer_bytes
        uint64_t state_compressed_per_1k
        uint64_t state_indexer_per_1k
        uint64_t scratch_bytes
        uint64_t drafter_weight_bytes
        uint64_t drafter_state_bytes
        uint64_t drafter_scratch_bytes
        uint64_t cache_matrices
        uint64_t cache_q8_bytes
        uint64_t cache_on_bytes
        uint64_t cache_budget_bytes
    ds4rt_memory_params ds4rt_memory_default_params()
    const char *ds4rt_weight_kind_name(uint32_t kind)
    ds4rt_status ds4rt_model_memory_plan(const char *path, const ds4rt_memory_params *params,
                                         ds4rt_memory_plan *out) nogil


def memory_plan(path, int64_t n_ctx=4096, uint32_t max_batch=32, support=None,
                uint32_t dspark_window=0, uint64_t cache_budget=0, str numerics="official",
                int32_t n_threads=0):
    """ds4rt_model_memory_plan as a dict (ds4rt.memory_plan documents it)."""
    if numerics not in _NUMERICS:
        raise ValueError(f"numerics must be one of {sorted(_NUMERICS)}, not {numerics!r}")
    cdef ds4rt_memory_params p = ds4rt_memory_default_params()
    p.n_ctx = n_ctx
    p.max_batch = max_batch
    p.dspark_window = dspark_window
    p.cache_budget_bytes = cache_budget
    p.numerics = _NUMERICS[numerics]
    p.n_threads = n_threads
    b = os.fsencode(path)
    sb = os.fsencode(support) if support is not None else None
    cdef const char *cpath = b
    p.support = <const char *>sb if sb is not None else NULL
    cdef ds4rt_memory_plan plan
    plan.size = sizeof(ds4rt_memory_plan)
    cdef ds4rt_status st
    with nogil:
        st = ds4rt_model_memory_plan(cpath, &p, &plan)
    check(st)
    cdef uint32_t k
    kinds = {}
    for k in range(<uint32_t>DS4RT_WEIGHT_KIND_COUNT):
        kinds[ds4rt_weight_kind_name(k).decode()] = plan.weight_kind_bytes[k]
    return {
        "n_ctx": plan.n_ctx, "max_batch": plan.max_batch, "n_layer": plan.n_layer,
        "file_bytes": plan.file_bytes, "data_bytes": plan.data_bytes,
        "weights": {"total": plan.weight_bytes, "owned": plan.weight_owned_bytes, "by_kind": kinds},
        "state": {
            "total": plan.state_bytes, "fixed": plan.state_fixed_bytes,
            "per_1k": plan.state_bytes_per_1k, "window": plan.state_window_bytes,
            "frontiers": plan.state_frontier_bytes, "compressed": plan.state_compressed_bytes,
            "indexer": plan.state_indexer_bytes,
            "compressed_per_1k": plan.state_compressed_per_1k,
            "indexer_per_1k": plan.state_indexer_per_1k,
        },
        "scratch": plan.scratch_bytes,
        "drafter": None if support is None else {
            "weights": plan.drafter_weight_bytes, "state": plan.drafter_state_bytes,
            "scratch": plan.drafter_scratch_bytes,
        },
        "cache": {
            "matrices": plan.cache_matrices, "q8_bytes": plan.cache_q8_bytes,
            "on": plan.cache_on_bytes, "on_within_budget": plan.cache_budget_bytes,
            "budget": cache_budget,
        },
    }
