# Generation, plain and speculative (included from _core.pyx after _dspark.pxi); the public
# API is ds4rt/generation.py and Session.generate/stream.
#
# One call holds the session's busy flag throughout. The prompt is evaluated here in passes of
# max_batch tokens with the GIL released, checking for signals and for a stop request between
# passes; then ds4rt_generate runs with the GIL released and an empty prompt. Its token
# callback takes the GIL for each token: it hands the token to the Python handler (text, stop
# strings, the user's callback), then checks for signals (Ctrl-C) and for a stop request from
# another thread (a stream being closed). A callback that raises stops generation at the next
# token and its exception is re-raised once the C call has returned, with the tokens kept.

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

import time

from ds4rt.errors import InvalidArgumentError, OutOfRangeError


cdef extern from "ds4rt.h":
    ctypedef int (*ds4rt_token_fn)(void *user, int32_t token) noexcept
    ctypedef int32_t (*ds4rt_draft_fn)(void *user, const int32_t *context, size_t n_context,
                                       int32_t max_draft, int32_t *draft, float *probs,
                                       uint32_t n_vocab, int32_t *have_probs) noexcept
    ctypedef void (*ds4rt_stats_fn)(void *user, const ds4rt_spec_stats *stats, int final) noexcept
    ctypedef struct ds4rt_schedule_event:
        size_t size
        uint64_t cycle
        int64_t position
        int32_t mode
        int32_t max_draft
        int32_t planned
        int32_t probe
        int32_t proposed
        int32_t verified
        int32_t accepted
        int32_t reason
        int32_t probe_gap
        int32_t recalled
        double cost_decode
        double cost_propose
        double cost_verify
        double expected_tokens
        double rate_plan
        double rate_skip
        double acceptance[16]
        double propose_ms
        double verify_ms
        uint64_t drafter_rows
    ctypedef void (*ds4rt_schedule_fn)(void *user, const ds4rt_schedule_event *event) noexcept
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
    ctypedef struct ds4rt_spec_params:
        size_t size
        ds4rt_dspark *dspark
        ds4rt_draft_fn draft_fn
        void *draft_user
        float confidence_threshold
        const ds4rt_scheduler_params *scheduler
        ds4rt_stats_fn on_stats
        void *stats_user
        ds4rt_schedule_fn on_schedule
        void *schedule_user
    ctypedef struct ds4rt_generate_params:
        size_t size
        int32_t max_tokens
        int32_t stop_at_eos
        const ds4rt_sampler_params *sampler
        ds4rt_token_fn on_token
        void *user
        const void *spec
    ds4rt_scheduler_params ds4rt_scheduler_default_params()
    ds4rt_spec_params ds4rt_spec_default_params()
    ds4rt_generate_params ds4rt_generate_default_params()
    ds4rt_status ds4rt_generate(ds4rt_session *session, const int32_t *prompt, size_t n_prompt,
                                const ds4rt_generate_params *params, int32_t *out, size_t cap,
                                size_t *n_out) nogil


# Drafts a host drafter may propose per cycle: the C library's largest block (DSpark block
# sizes are 1..16, ds4rt.h "DSpark support models").
HOST_DRAFT_MAX_BLOCK = 16

# The scheduler's integer and float fields, in ds4rt_scheduler_params order.
_SCHED_INT_FIELDS = ("max_draft", "warmup_cycles", "probe_min", "probe_max")
_SCHED_FLOAT_FIELDS = ("history_decay", "confidence_weight", "verify_cost_base",
                       "verify_cost_per_token", "propose_cost")


def generation_defaults():
    """The C defaults of generation, speculative decoding and the scheduler, as dicts."""
    cdef ds4rt_generate_params g = ds4rt_generate_default_params()
    cdef ds4rt_spec_params sp = ds4rt_spec_default_params()
    cdef ds4rt_scheduler_params sc = ds4rt_scheduler_default_params()
    return {
        "max_tokens": g.max_tokens,
        "stop_at_eos": bool(g.stop_at_eos),
        "confidence_threshold": sp.confidence_threshold,
        "scheduler": {
            "mode": int(sc.mode), "max_draft": sc.max_draft, "warmup_cycles": sc.warmup_cycles,
            "probe_min": sc.probe_min, "probe_max": sc.probe_max,
            "history_decay": sc.history_decay, "confidence_weight": sc.confidence_weight,
            "measured_costs": bool(sc.measured_costs), "verify_cost_base": sc.verify_cost_base,
            "verify_cost_per_token": sc.verify_cost_per_token, "propose_cost": sc.propose_cost,
        },
    }


cdef class _GenRun:
    """The state one generation shares with its C callbacks.

    handler.push(token) -> bool records a token and runs the user's callbacks (False: stop);
    handler.record(token) only records it (after a stop was requested). `cancel` may be set
    from another thread; `error` is the first exception a callback raised (or Ctrl-C's
    KeyboardInterrupt)."""
    cdef object handler
    cdef object draft
    cdef object on_stats
    cdef object on_schedule
    cdef public object error
    cdef public bint cancel
    cdef bint check_signals
    cdef uint32_t n_vocab
    cdef _Session session

    def __cinit__(self, handler, draft=None, on_stats=None, bint check_signals=True,
                  on_schedule=None):
        self.handler = handler
        self.draft = draft
        self.on_stats = on_stats
        self.on_schedule = on_schedule
        self.check_signals = check_signals
        self.error = None
        self.cancel = False

    cdef bint stopping(self):
        return (self.error is not None or self.cancel
                or (self.session is not None and self.session._trace_error is not None))

    cdef void poll_signals(self):
        """Ctrl-C (and any other signal handler) runs here, between passes and tokens."""
        if not self.check_signals or self.error is not None:
            return
        try:
            PyErr_CheckSignals()
        except BaseException as e:  # noqa: B036 - KeyboardInterrupt is the point
            self.error = e


cdef int _token_trampoline(void *user, int32_t token) noexcept with gil:
    cdef _GenRun run = <_GenRun>user
    # a pending Ctrl-C is taken here, before any Python code runs (which it would otherwise
    # interrupt at its first line, before the token is recorded)
    run.poll_signals()
    if run.stopping():
        try:
            run.handler.record(token)
        except BaseException as e:  # noqa: B036 - must not propagate through C
            if run.error is None:
                run.error = e
        return 0
    try:
        go = run.handler.push(token)
    except BaseException as e:  # noqa: B036
        if run.error is None:
            run.error = e
        return 0
    return 0 if (not go or run.stopping()) else 1


cdef class _DraftKey:
    """What a host drafter's generations give C as draft_user: one object per (session, drafter),
    so the scheduler's memory, which C keys on that pointer (src/api/speculative.c), recognises
    the drafter of an earlier generation. `run` is the generation now using it."""
    cdef object draft
    cdef _GenRun run

    def __cinit__(self, draft):
        self.draft = draft


cdef bint _same_drafter(a, b):
    """The same callable: the same object, or bound methods of one function on one object
    (`obj.draft` makes a new bound method object at every access)."""
    if a is b:
        return True
    return (inspect.ismethod(a) and inspect.ismethod(b) and a.__self__ is b.__self__
            and a.__func__ is b.__func__)


cdef _DraftKey _draft_key(_Session s, draft):
    """The session's key for `draft`: the last one if it is for the same drafter, else a new one
    (made while the old one is alive, so its address cannot be the old key's)."""
    cdef _DraftKey old = s._draft_key
    if old is not None and _same_drafter(old.draft, draft):
        return old
    cdef _DraftKey key = _DraftKey(draft)
    s._draft_key = key
    return key


cdef int32_t _draft_trampoline(void *user, const int32_t *context, size_t n_context,
                               int32_t max_draft, int32_t *draft, float *probs,
                               uint32_t n_vocab, int32_t *have_probs) noexcept with gil:
    cdef _GenRun run = (<_DraftKey>user).run
    cdef int32_t[::1] cv
    cdef int32_t[::1] iv
    cdef float[:, ::1] pv
    cdef size_t k
    if run.stopping():
        return 0
    try:
        ctx = np.empty(n_context, dtype=np.int32)
        if n_context:
            cv = ctx
            memcpy(&cv[0], context, n_context * sizeof(int32_t))
        got = run.draft(ctx, max_draft)
        dist = None
        if isinstance(got, tuple):
            if len(got) != 2:
                raise TypeError("a drafter returns ids, or a tuple (ids, probs)")
            got, dist = got
        ids = token_ids(got, "drafter ids")
        k = ids.shape[0]
        if k > <size_t>max_draft:
            raise ValueError(f"the drafter returned {k} ids, more than max_draft = {max_draft}")
        if dist is not None:
            arr = np.asarray(dist)
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"drafter probabilities must be numbers, not {arr.dtype}")
            if arr.ndim != 2 or arr.shape[0] != k or arr.shape[1] != n_vocab:
                raise ValueError(f"the drafter returned probabilities of shape {arr.shape} for "
                                 f"{k} ids; expected ({k}, {n_vocab}): one row per draft id")
        if k:
            iv = ids
            memcpy(draft, &iv[0], k * sizeof(int32_t))
            if dist is not None and probs != NULL:
                pv = np.ascontiguousarray(arr, dtype=np.float32)
                memcpy(probs, &pv[0, 0], k * n_vocab * sizeof(float))
                have_probs[0] = 1
        return <int32_t>k
    except BaseException as e:  # noqa: B036 - must not propagate through C
        if run.error is None:
            run.error = e
        return -1


cdef void _stats_trampoline(void *user, const ds4rt_spec_stats *stats, int final) noexcept with gil:
    cdef _GenRun run = <_GenRun>user
    if run.error is not None:
        return
    try:
        run.on_stats(_stats_bytes(stats), bool(final))
    except BaseException as e:  # noqa: B036
        run.error = e


_NO_DRAFT_REASONS = ("scheduler", "tail", "confidence", "not_ready", "op_unavailable", "no_room",
                     "error", "scheduler_off", "empty")


cdef void _schedule_trampoline(void *user, const ds4rt_schedule_event *e) noexcept with gil:
    cdef _GenRun run = <_GenRun>user
    if run.error is not None:
        return
    try:
        run.on_schedule({
            "cycle": e.cycle, "position": e.position,
            "mode": ("adaptive", "always", "off")[e.mode], "max_draft": e.max_draft,
            "planned": e.planned, "probe": bool(e.probe), "proposed": e.proposed,
            "verified": e.verified, "accepted": e.accepted,
            "reason": None if e.reason < 0 else _NO_DRAFT_REASONS[e.reason],
            "probe_gap": e.probe_gap, "recalled": bool(e.recalled),
            "cost_decode": e.cost_decode, "cost_propose": e.cost_propose,
            "cost_verify": e.cost_verify, "expected_tokens": e.expected_tokens,
            "rate_plan": e.rate_plan, "rate_skip": e.rate_skip,
            "acceptance": [e.acceptance[i] for i in range(16)],
            "propose_ms": e.propose_ms, "verify_ms": e.verify_ms,
            "drafter_rows": e.drafter_rows,
        })
    except BaseException as ex:  # noqa: B036
        run.error = ex


cdef object _status_error(ds4rt_status st):
    """The exception check() would raise for st (None for DS4RT_OK), without raising."""
    try:
        check(st)
    except Ds4rtError as e:
        return e
    return None


cdef int _validate_prompt(_Session s, int32_t[::1] pv) except -1:
    """What ds4rt_session_eval checks, done for the whole prompt before its first pass, so a
    bad prompt leaves the session as it was although it is evaluated in several calls."""
    cdef size_t i, n = pv.shape[0]
    for i in range(n):
        if pv[i] < 0 or pv[i] >= s.n_vocab:
            raise OutOfRangeError(f"token id {pv[i]} at index {i} is outside the vocabulary "
                                  f"[0, {s.n_vocab})")
    cdef int64_t pos = ds4rt_session_position(s.ptr)
    if <int64_t>n > s.n_ctx - pos:
        raise OutOfRangeError(f"{n} tokens do not fit: {pos} of n_ctx {s.n_ctx} already used")
    return 0


cdef _fill_scheduler(ds4rt_scheduler_params *sc, dict opts):
    sc.mode = <ds4rt_scheduler_mode><int>opts["mode"]
    sc.max_draft = opts["max_draft"]
    sc.warmup_cycles = opts["warmup_cycles"]
    sc.probe_min = opts["probe_min"]
    sc.probe_max = opts["probe_max"]
    sc.history_decay = opts["history_decay"]
    sc.confidence_weight = opts["confidence_weight"]
    sc.measured_costs = 1 if opts["measured_costs"] else 0
    sc.verify_cost_base = opts["verify_cost_base"]
    sc.verify_cost_per_token = opts["verify_cost_per_token"]
    sc.propose_cost = opts["propose_cost"]


def _generate(_Session s, prompt, int64_t max_tokens, dict sampler, bint stop_at_eos,
              bint speculative, _DSpark dspark, float confidence_threshold, dict scheduler,
              _GenRun run):
    """Evaluates prompt, then generates. max_tokens < 0: until the context is full (it is
    clamped to the room left either way, so every returned token is in the context).

    Returns a dict: ids, n_prompt (tokens of the prompt evaluated), prefill_s, decode_s,
    clamped (the room left was the limit), stats_before/stats_after (raw ds4rt_spec_stats)
    and error (the exception to raise once the result is recorded, or None)."""
    prompt_arr = token_ids(prompt, "prompt")
    cdef int32_t[::1] pv = prompt_arr
    cdef size_t n = pv.shape[0]
    cdef size_t done = 0, m
    cdef ds4rt_status st = DS4RT_OK
    cdef ds4rt_spec_stats stats
    cdef ds4rt_generate_params p = ds4rt_generate_default_params()
    cdef ds4rt_sampler_params smp = ds4rt_sampler_default_params()
    cdef ds4rt_spec_params sp = ds4rt_spec_default_params()
    cdef ds4rt_scheduler_params sched = ds4rt_scheduler_default_params()
    cdef size_t n_out = 0
    cdef int64_t room, limit
    cdef int32_t[::1] ov
    cdef int32_t *op = NULL
    cdef uint32_t block
    cdef _DraftKey key = None
    s.enter()
    try:
        _validate_prompt(s, pv)
        if speculative:
            block = dspark.block_size if dspark is not None else HOST_DRAFT_MAX_BLOCK
            if 0 < scheduler["max_draft"] < block:
                block = scheduler["max_draft"]
            if block + 1 > s.max_batch:
                raise InvalidArgumentError(
                    f"the session's max_batch {s.max_batch} cannot hold a verify pass of "
                    f"{block} drafts + the anchor")
            if dspark is not None:
                s.attach(dspark)  # before the prompt, so the drafter sees all of it
        run.session = s
        stats.size = sizeof(ds4rt_spec_stats)
        check(ds4rt_session_spec_stats(s.ptr, &stats))
        stats_before = _stats_bytes(&stats)
        err = None
        t0 = time.perf_counter()
        while done < n and err is None:
            m = n - done if n - done < s.max_batch else s.max_batch
            with nogil:
                st = ds4rt_session_eval(s.ptr, &pv[done], m, NULL)
            err = _status_error(st)
            if err is None:
                done += m
                run.poll_signals()
                if s._trace_error is not None:
                    err = s._trace_error
                elif run.stopping():
                    break
        t1 = time.perf_counter()
        room = s.n_ctx - ds4rt_session_position(s.ptr)
        limit = room if (max_tokens < 0 or max_tokens > room) else max_tokens
        out = np.empty(limit if limit > 0 else 1, dtype=np.int32)
        if err is None and not run.stopping() and limit > 0:
            p.max_tokens = <int32_t>limit if limit < INT32_MAX else INT32_MAX
            p.stop_at_eos = stop_at_eos
            smp.temperature = sampler["temperature"]
            smp.top_k = sampler["top_k"]
            smp.top_p = sampler["top_p"]
            smp.min_p = sampler["min_p"]
            smp.seed = sampler["seed"]
            p.sampler = &smp
            p.on_token = _token_trampoline
            p.user = <void *>run
            if speculative:
                if dspark is not None:
                    sp.dspark = dspark.live()
                else:
                    key = _draft_key(s, run.draft)
                    key.run = run
                    sp.draft_fn = _draft_trampoline
                    sp.draft_user = <void *>key
                sp.confidence_threshold = confidence_threshold
                _fill_scheduler(&sched, scheduler)
                sp.scheduler = &sched
                if run.on_stats is not None:
                    sp.on_stats = _stats_trampoline
                    sp.stats_user = <void *>run
                if run.on_schedule is not None:
                    sp.on_schedule = _schedule_trampoline
                    sp.schedule_user = <void *>run
                p.spec = <const void *>&sp
            ov = out
            op = &ov[0]
            with nogil:
                st = ds4rt_generate(s.ptr, NULL, 0, &p, op, <size_t>p.max_tokens, &n_out)
            err = _status_error(st)
        t2 = time.perf_counter()
        if err is None:
            err = s._trace_error
        if err is None:
            err = run.error
        s._trace_error = None
        check(ds4rt_session_spec_stats(s.ptr, &stats))
        return {
            "ids": out[:n_out].tolist(),
            "n_prompt": done,
            "prefill_s": t1 - t0,
            "decode_s": t2 - t1,
            "limit": limit,
            "clamped": max_tokens < 0 or max_tokens > room,
            "position": ds4rt_session_position(s.ptr),
            "stats_before": stats_before,
            "stats_after": _stats_bytes(&stats),
            "error": err,
        }
    finally:
        if key is not None:
            key.run = None
        run.session = None
        s.leave()
