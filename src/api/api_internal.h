/* api_internal.h - the objects behind the public model/session handles. */
#ifndef DS4RT_API_INTERNAL_H
#define DS4RT_API_INTERNAL_H

#include <stdbool.h>

#include "backend.h"
#include "backend_choice.h"
#include "cache_policy.h"
#include "ds4rt.h"
#include "dspark.h"
#include "state.h"
#include "target.h"

#define DS4RT_HANDLE_ERROR_CAP 512

/* Memory figures of a model (ds4rt_model_info documents each), measured at load. */
typedef struct ds4rt_model_memory {
    uint64_t weight_bytes, weight_owned_bytes;
    uint64_t state_fixed_bytes, state_bytes_per_1k;
    uint64_t scratch_bytes;
    uint64_t graph_bytes;
} ds4rt_model_memory;

struct ds4rt_model {
    ds4rt_gguf *gguf;
    ds4rt_backend *be;          /* opened at load; every op the model needs was checked on it */
    ds4rt_target target;
    ds4rt_tokenizer *tokenizer; /* NULL if the file carries no tokenizer */
    ds4rt_cache_state cache;    /* Q8->F16 expansion: decided at load, by the host's policy only */
    ds4rt_model_params params;
    ds4rt_backend_choice backend;
    ds4rt_model_memory mem;
    int32_t bos_id, eos_id;
};

/* The struct versioning rule (abi.h) on the input structs other files read, then each
 * field's domain (DS4RT_ERR_INVALID_ARGUMENT naming the field); NULL in gives the defaults. */
ds4rt_status ds4rt_sampler_params_read(const ds4rt_sampler_params *in, ds4rt_sampler_params *out);
ds4rt_status ds4rt_scheduler_params_read(const ds4rt_scheduler_params *in, ds4rt_scheduler_params *out);
/* out->scheduler then points at *scheduler, the scheduler parameters read under the rule. */
ds4rt_status ds4rt_spec_params_read(const ds4rt_spec_params *in, ds4rt_spec_params *out,
                                    ds4rt_scheduler_params *scheduler);

/* Zeros speculative statistics and sets their size member (an abi.h defaults function). */
void ds4rt_spec_stats_clear(void *stats);

/* The default session parameters. */
ds4rt_session_params ds4rt_session_params_defaults(void);

/* Threads a session of this model computes with. */
int ds4rt_model_threads(const ds4rt_model *m);

/* Fills m->mem from what binding accounted and from the session layouts (model_memory.c). */
ds4rt_status ds4rt_model_measure_memory(ds4rt_model *m, const ds4rt_bind_account *bound);

struct ds4rt_session {
    ds4rt_model *model;
    ds4rt_session_params params;
    ds4rt_bctx *ctx;            /* the session's backend execution context */
    ds4rt_kv_state st;
    ds4rt_pass_bufs pb;
    /* logits of the last pass: rows [pass_from, pass_n) of the pass are stored */
    float *pass_logits;        /* [max_batch][V] */
    int64_t pass_from, pass_n;
    float *prev_logits;        /* current logits before the last pass */
    bool prev_valid;
    const float *cur;          /* current logits or NULL */
    /* capture */
    uint32_t *cap_layers;
    uint32_t n_cap;
    float *cap_rows;           /* host [n_cap][max_batch][D], read back after each pass */
    ds4rt_dbuf *cap_dev;       /* the same in backend memory */
    ds4rt_capture capture;
    ds4rt_trace_fn trace;
    void *trace_user;
    float *trace_buf;          /* host [max_batch][N*D] */
    int32_t *tokens;           /* [n_ctx] the ids in context */
    /* DSpark drafter attached by the first speculative generation with a support model: every
     * pass then also captures the drafter's target layers and appends context rows */
    const ds4rt_dspark *drafter_for;
    ds4rt_drafter drafter;
    ds4rt_capture dcap;        /* written by the pass straight into the drafter's input */
    ds4rt_spec_stats stats;    /* cumulative over speculative generations */
    struct ds4rt_sched_memory *host_sched; /* what the adaptive scheduler learned with the last
                                  host drafter (scheduler.h); NULL until one ran */
    double last_snapshot_ms, last_upload_ms, last_layers_ms, last_head_ms, last_read_ms; /* stage timers of the last pass */
    bool last_recorded;        /* the last pass was recorded as a graph (ds4rt_forward_args) */
    char error[DS4RT_HANDLE_ERROR_CAP];
};

/* The session's own buffers besides state and scratch: the logits of a pass, the current
 * logits before it, the ids in context (sizes in bytes; session_create allocates these). */
typedef struct ds4rt_session_buffers {
    size_t pass_logits, prev_logits, tokens;
} ds4rt_session_buffers;

ds4rt_session_buffers ds4rt_session_buffer_sizes(const ds4rt_hparams *hp, const ds4rt_session_params *p);

/* Speculative generation (speculative.c); params->spec is set. */
ds4rt_status ds4rt_generate_speculative(ds4rt_session *s, const int32_t *prompt, size_t n_prompt,
                                        const ds4rt_generate_params *params, int32_t *out, size_t cap,
                                        size_t *n_out);

/* Attaches a drafter for `d` (a no-op if attached); rows start at the current position. */
ds4rt_status ds4rt_session_attach_drafter(ds4rt_session *s, const ds4rt_dspark *d);

/* Records the thread's last error in the session and returns `st`. */
ds4rt_status ds4rt_session_error(ds4rt_session *s, ds4rt_status st);

/* Whether n tokens are ids of the vocabulary and fit the context (nothing changes). */
ds4rt_status ds4rt_session_check_tokens(const ds4rt_session *s, const int32_t *tokens, size_t n);

/* One forward pass of n <= max_batch tokens; all_logits: keep every row's logits. */
ds4rt_status ds4rt_session_pass(ds4rt_session *s, const int32_t *tokens, int64_t n, bool all_logits);

#endif /* DS4RT_API_INTERNAL_H */
