/* session_api.c - sessions: evaluation, logits, truncation (rollback), capture, trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "api_internal.h"
#include "internal.h"
#include "scheduler.h"

ds4rt_status ds4rt_session_error(ds4rt_session *s, ds4rt_status st) {
    if (st != DS4RT_OK && s != NULL) ds4rt_copy_last_error(s->error, sizeof s->error);
    return st;
}

static void session_params_defaults(void *out) {
    ds4rt_session_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->n_ctx = 4096;
    p->max_batch = 32;
}

static const ds4rt_struct_desc SESSION_PARAMS = {
    .name = "ds4rt_session_params",
    .size = sizeof(ds4rt_session_params),
    .min_size = sizeof(ds4rt_session_params_1_0),
    .defaults = session_params_defaults,
};

ds4rt_session_params ds4rt_session_params_defaults(void) {
    ds4rt_session_params p;
    session_params_defaults(&p);
    return p;
}

DS4RT_API ds4rt_status ds4rt_session_params_init(ds4rt_session_params *params, size_t size) {
    return ds4rt_struct_init(&SESSION_PARAMS, params, size);
}

ds4rt_session_buffers ds4rt_session_buffer_sizes(const ds4rt_hparams *hp, const ds4rt_session_params *p) {
    return (ds4rt_session_buffers){.pass_logits = (size_t)p->max_batch * hp->n_vocab * sizeof(float),
                                   .prev_logits = (size_t)hp->n_vocab * sizeof(float),
                                   .tokens = (size_t)p->n_ctx * sizeof(int32_t)};
}

DS4RT_API ds4rt_status ds4rt_session_create(ds4rt_model *m, const ds4rt_session_params *params, ds4rt_session **out) {
    if (m == NULL || out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_create: NULL argument");
    *out = NULL;
    ds4rt_session_params p;
    ds4rt_status rst = ds4rt_struct_read(&SESSION_PARAMS, params, &p);
    if (rst != DS4RT_OK) return ds4rt_fail_context(rst, "session_create");
    if (p.n_ctx < 1 || p.n_ctx > ((int64_t)1 << 31))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_create: n_ctx %lld outside [1, 2^31]", (long long)p.n_ctx);
    if (p.max_batch < 1 || p.max_batch > 4096)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_create: max_batch %u outside [1, 4096]", p.max_batch);
    const ds4rt_hparams *hp = &m->target.hp;
    ds4rt_session *s = calloc(1, sizeof *s);
    if (s == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "session");
    s->model = m;
    s->params = p;
    ds4rt_spec_stats_clear(&s->stats);
    const ds4rt_backend_ops *ops = ds4rt_backend_get_ops(m->be);
    ds4rt_status st = ops->ctx_create(m->be, m->params.n_threads, &s->ctx);
    if (st == DS4RT_OK) st = ds4rt_kv_state_create(s->ctx, hp, p.n_ctx, p.max_batch, &s->st);
    if (st == DS4RT_OK) st = ds4rt_pass_bufs_create(&m->target, s->ctx, p.max_batch, p.n_ctx, &s->pb);
    if (st == DS4RT_OK) {
        ds4rt_session_buffers sz = ds4rt_session_buffer_sizes(hp, &p);
        s->pass_logits = malloc(sz.pass_logits);
        s->prev_logits = malloc(sz.prev_logits);
        s->tokens = malloc(sz.tokens);
        if (s->pass_logits == NULL || s->prev_logits == NULL || s->tokens == NULL)
            st = ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "logit buffers for batches of %u", p.max_batch);
    }
    if (st != DS4RT_OK) {
        ds4rt_session_free(s);
        return st;
    }
    *out = s;
    return DS4RT_OK;
}

DS4RT_API void ds4rt_session_free(ds4rt_session *s) {
    if (s == NULL) return;
    if (s->drafter_for != NULL) ds4rt_drafter_free(&s->drafter);
    ds4rt_kv_state_free(&s->st);
    ds4rt_pass_bufs_free(&s->pb);
    if (s->cap_dev != NULL) ds4rt_backend_get_ops(s->model->be)->release(s->model->be, s->cap_dev);
    if (s->ctx != NULL) s->ctx->ops->ctx_free(s->ctx);
    free(s->pass_logits);
    free(s->prev_logits);
    free(s->cap_layers);
    free(s->cap_rows);
    free(s->trace_buf);
    free(s->tokens);
    ds4rt_sched_memory_free(s->host_sched);
    free(s);
}

DS4RT_API void ds4rt_session_reset(ds4rt_session *s) {
    if (s == NULL) return;
    ds4rt_kv_state_reset(s->ctx, &s->st);
    if (s->drafter_for != NULL) ds4rt_drafter_reset(&s->drafter);
    s->cur = NULL;
    s->prev_valid = false;
    s->pass_from = s->pass_n = 0;
}

DS4RT_API int64_t ds4rt_session_position(const ds4rt_session *s) { return s ? s->st.n_pos : 0; }

DS4RT_API const char *ds4rt_session_last_error(const ds4rt_session *s) { return s ? s->error : ""; }

DS4RT_API const float *ds4rt_session_logits(const ds4rt_session *s) { return s ? s->cur : NULL; }

ds4rt_status ds4rt_session_pass(ds4rt_session *s, const int32_t *tokens, int64_t n, bool all_logits) {
    const ds4rt_hparams *hp = &s->model->target.hp;
    const uint32_t V = hp->n_vocab;
    if (s->cur != NULL) memcpy(s->prev_logits, s->cur, V * sizeof(float));
    bool prev_valid = s->cur != NULL;
    ds4rt_forward_args a = {.tokens = tokens,
                            .n = n,
                            .logits = s->pass_logits,
                            .logits_from = all_logits ? 0 : n - 1,
                            .capture = s->n_cap ? &s->capture : NULL,
                            .capture2 = s->drafter_for ? &s->dcap : NULL,
                            .trace = s->trace,
                            .trace_user = s->trace_user,
                            .trace_buf = s->trace_buf};
    int64_t first = s->st.n_pos;
    ds4rt_status st = ds4rt_target_forward(&s->model->target, &s->pb, &s->st, &a);
    if (st != DS4RT_OK) return st; /* the forward pass undid itself */
    if (s->n_cap) /* the host asked for capture rows: read them back */
        for (uint32_t i = 0; i < s->n_cap; i++) {
            ds4rt_df32 rows = ds4rt_f32_at(s->capture.rows, i * s->capture.slot_stride);
            st = ds4rt_download_f32(s->ctx, rows, (uint64_t)n * hp->n_embd, s->cap_rows + i * s->capture.slot_stride);
            if (st != DS4RT_OK) return st;
        }
    s->last_snapshot_ms = a.ms_snapshot;
    s->last_layers_ms = a.ms_layers;
    s->last_head_ms = a.ms_head;
    s->last_upload_ms = a.ms_upload;
    s->last_read_ms = a.ms_read;
    s->last_recorded = a.recorded;
    memcpy(s->tokens + first, tokens, (size_t)n * sizeof(int32_t));
    if (s->drafter_for != NULL) {
        double fusion_ms = 0.0, rows_ms = 0.0;
        st = ds4rt_drafter_commit(&s->drafter, s->pb.acts.in, first, n, &fusion_ms, &rows_ms);
        s->stats.prop_stage0 += fusion_ms;
        s->stats.prop_cache += rows_ms;
        if (st != DS4RT_OK) { /* the target pass stands; only the drafter is out of step */
            ds4rt_drafter_restart(&s->drafter, first + n);
            s->stats.errors++; /* counted, and the reason kept as the session's last error */
            ds4rt_copy_last_error(s->error, sizeof s->error);
        }
    }
    s->prev_valid = prev_valid;
    s->pass_from = a.logits_from;
    s->pass_n = n;
    s->cur = s->pass_logits + (size_t)(n - 1 - a.logits_from) * V;
    return DS4RT_OK;
}

ds4rt_status ds4rt_session_check_tokens(const ds4rt_session *s, const int32_t *tokens, size_t n) {
    if (n == 0) return DS4RT_OK;
    if (tokens == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "NULL tokens (n = %zu)", n);
    const uint32_t V = s->model->target.hp.n_vocab;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= V)
            return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "token id %d at index %zu is outside the vocabulary [0, %u)",
                              tokens[i], i, V);
    if (n > (uint64_t)(s->st.n_ctx - s->st.n_pos))
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "%zu tokens do not fit: %lld of n_ctx %lld already used", n,
                          (long long)s->st.n_pos, (long long)s->st.n_ctx);
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_session_eval(ds4rt_session *s, const int32_t *tokens, size_t n, float *logits) {
    if (s == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_eval: NULL session");
    ds4rt_status cst = ds4rt_session_check_tokens(s, tokens, n);
    if (cst != DS4RT_OK) return ds4rt_session_error(s, cst);
    if (n == 0) return DS4RT_OK;
    const ds4rt_hparams *hp = &s->model->target.hp;
    const int64_t B = s->st.max_batch;
    for (size_t off = 0; off < n; off += (size_t)B) {
        int64_t m = (int64_t)(n - off) < B ? (int64_t)(n - off) : B;
        ds4rt_status st = ds4rt_session_pass(s, tokens + off, m, logits != NULL);
        if (st != DS4RT_OK) return ds4rt_session_error(s, st);
        if (logits != NULL)
            memcpy(logits + off * hp->n_vocab, s->pass_logits, (size_t)m * hp->n_vocab * sizeof(float));
    }
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_session_truncate(ds4rt_session *s, int64_t n_tokens) {
    if (s == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_truncate: NULL session");
    int64_t start = s->st.batch_start;
    if (n_tokens < start || n_tokens > s->st.n_pos)
        return ds4rt_session_error(
            s, ds4rt_fail(DS4RT_ERR_STATE,
                          "truncate to %lld tokens: only positions within the last pass [%lld, %lld] can be kept",
                          (long long)n_tokens, (long long)start, (long long)s->st.n_pos));
    if (n_tokens == s->st.n_pos) return DS4RT_OK; /* nothing to drop */
    int64_t keep = n_tokens - start;
    ds4rt_status st = ds4rt_target_rollback(&s->model->target, s->ctx, &s->st, keep);
    if (st != DS4RT_OK) return ds4rt_session_error(s, st);
    /* the drafter's ring holds window + max_batch rows, so a crop within the last pass always
     * finds its rows; failing here would be a bug, not a condition to paper over */
    if (s->drafter_for != NULL && ds4rt_drafter_crop(&s->drafter, n_tokens) != DS4RT_OK)
        return ds4rt_session_error(s, ds4rt_fail_context(DS4RT_ERR_INTERNAL, "session_truncate"));
    const uint32_t V = s->model->target.hp.n_vocab;
    if (keep == 0) s->cur = s->prev_valid ? s->prev_logits : NULL;
    else if (keep - 1 >= s->pass_from) s->cur = s->pass_logits + (size_t)(keep - 1 - s->pass_from) * V;
    else s->cur = NULL;
    s->pass_n = keep;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_session_set_capture(ds4rt_session *s, const uint32_t *layers, size_t n) {
    if (s == NULL || (n > 0 && layers == NULL))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_set_capture: NULL argument");
    const ds4rt_hparams *hp = &s->model->target.hp;
    for (size_t i = 0; i < n; i++) {
        if (layers[i] >= hp->n_layer)
            return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "capture layer %u >= n_layer %u",
                                                     layers[i], hp->n_layer));
        if (i > 0 && layers[i] <= layers[i - 1])
            return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                                                     "capture layers must be strictly increasing"));
    }
    ds4rt_backend *be = s->model->be;
    free(s->cap_layers);
    free(s->cap_rows);
    if (s->cap_dev != NULL) ds4rt_backend_get_ops(be)->release(be, s->cap_dev);
    s->cap_layers = NULL;
    s->cap_rows = NULL;
    s->cap_dev = NULL;
    s->n_cap = 0;
    if (n == 0) return DS4RT_OK;
    size_t stride = (size_t)s->st.max_batch * hp->n_embd;
    s->cap_layers = malloc(n * sizeof *s->cap_layers);
    s->cap_rows = calloc(n * stride, sizeof(float));
    ds4rt_status st = DS4RT_OK;
    if (s->cap_layers == NULL || s->cap_rows == NULL) st = ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "capture buffers");
    if (st == DS4RT_OK)
        st = ds4rt_backend_get_ops(be)->alloc(be, DS4RT_MEM_SCRATCH, n * stride * sizeof(float), &s->cap_dev);
    if (st != DS4RT_OK) {
        free(s->cap_layers);
        free(s->cap_rows);
        s->cap_layers = NULL;
        s->cap_rows = NULL;
        s->cap_dev = NULL;
        return ds4rt_session_error(s, st);
    }
    memcpy(s->cap_layers, layers, n * sizeof *layers);
    s->n_cap = (uint32_t)n;
    s->capture = (ds4rt_capture){.layers = s->cap_layers, .n_layers = (uint32_t)n, .rows = ds4rt_f32(s->cap_dev),
                                 .slot_stride = stride, .row_stride = hp->n_embd};
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_session_get_capture(const ds4rt_session *s, uint32_t slot, const float **rows,
                                                 int64_t *first_pos, int64_t *n_rows) {
    if (s == NULL || rows == NULL || first_pos == NULL || n_rows == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_get_capture: NULL argument");
    if (slot >= s->n_cap)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "capture slot %u: %u layers are captured", slot, s->n_cap);
    *rows = s->cap_rows + (size_t)slot * s->capture.slot_stride;
    *first_pos = s->st.batch_start;
    *n_rows = s->st.n_pos - s->st.batch_start;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_session_set_trace(ds4rt_session *s, ds4rt_trace_fn fn, void *user) {
    if (s == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_set_trace: NULL session");
    if (fn != NULL && s->trace_buf == NULL) {
        const ds4rt_hparams *hp = &s->model->target.hp;
        s->trace_buf = malloc((size_t)s->st.max_batch * hp->hc_dim * sizeof(float));
        if (s->trace_buf == NULL) return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "trace buffer"));
    }
    s->trace = fn;
    s->trace_user = user;
    return DS4RT_OK;
}

ds4rt_status ds4rt_session_attach_drafter(ds4rt_session *s, const ds4rt_dspark *d) {
    if (s->drafter_for == d) return DS4RT_OK;
    if (d->model != s->model)
        return ds4rt_fail(DS4RT_ERR_MISMATCH, "the DSpark support model was loaded for another target model");
    if (s->drafter_for != NULL) {
        ds4rt_drafter_free(&s->drafter);
        s->drafter_for = NULL;
    }
    ds4rt_status st = ds4rt_drafter_create(d, s->ctx, s->st.max_batch, &s->drafter);
    if (st != DS4RT_OK) return st;
    ds4rt_drafter_restart(&s->drafter, s->st.n_pos);
    s->dcap = ds4rt_drafter_capture(&s->drafter);
    s->drafter_for = d;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_session_attach_dspark(ds4rt_session *s, const ds4rt_dspark *d) {
    if (s == NULL || d == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "session_attach_dspark: NULL argument");
    return ds4rt_session_error(s, ds4rt_session_attach_drafter(s, d));
}
