/* api_internal.h - the objects behind the public model/session handles. */
#ifndef DS4RT_API_INTERNAL_H
#define DS4RT_API_INTERNAL_H

#include <stdbool.h>

#include "ds4rt.h"
#include "scratch.h"
#include "state.h"
#include "target.h"
#include "threadpool.h"

#define DS4RT_HANDLE_ERROR_CAP 512

struct ds4rt_model {
    ds4rt_gguf *gguf;
    ds4rt_target target;
    ds4rt_tokenizer *tokenizer; /* NULL if the file carries no tokenizer */
    ds4rt_model_params params;
    int32_t bos_id, eos_id;
};

struct ds4rt_session {
    ds4rt_model *model;
    ds4rt_session_params params;
    ds4rt_pool *pool;
    ds4rt_kv_state st;
    ds4rt_scratch scratch;
    /* logits of the last pass: rows [pass_from, pass_n) of the pass are stored */
    float *pass_logits;        /* [max_batch][V] */
    int64_t pass_from, pass_n;
    float *prev_logits;        /* current logits before the last pass */
    bool prev_valid;
    const float *cur;          /* current logits or NULL */
    /* capture */
    uint32_t *cap_layers;
    uint32_t n_cap;
    float *cap_rows;           /* [n_cap][max_batch][D] */
    ds4rt_capture capture;
    ds4rt_trace_fn trace;
    void *trace_user;
    char error[DS4RT_HANDLE_ERROR_CAP];
};

/* Records the thread's last error in the session and returns `st`. */
ds4rt_status ds4rt_session_error(ds4rt_session *s, ds4rt_status st);

/* One forward pass of n <= max_batch tokens; all_logits: keep every row's logits. */
ds4rt_status ds4rt_session_pass(ds4rt_session *s, const int32_t *tokens, int64_t n, bool all_logits);

#endif /* DS4RT_API_INTERNAL_H */
