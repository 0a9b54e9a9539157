/*
 * model_memory.c - the memory figures of ds4rt_model_info, measured rather than estimated: the
 * weights from what binding accounted, the per-session figures by building the state and the
 * scratch of a default session: the state from its layout (ds4rt_kv_state_bytes, the one
 * definition), the scratch by building a default session's pass buffers on the model's backend
 * once at load and reading the backend's accounting.
 */
#include "api_internal.h"
#include "internal.h"
#include "threadpool.h"

int ds4rt_model_threads(const ds4rt_model *m) {
    return m->params.n_threads > 0 ? m->params.n_threads : ds4rt_cpu_count();
}

static ds4rt_status state_bytes(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch, uint64_t *out) {
    *out = ds4rt_kv_state_bytes(hp, n_ctx, max_batch);
    return DS4RT_OK;
}

/* The backend's scratch bytes of one default session's pass buffers and op workspaces, as the
 * backend accounts them. */
static ds4rt_status pass_scratch_bytes(ds4rt_model *m, const ds4rt_session_params *sp, uint64_t *out) {
    ds4rt_bctx *ctx;
    ds4rt_status st = ds4rt_backend_get_ops(m->be)->ctx_create(m->be, ds4rt_model_threads(m), &ctx);
    if (st != DS4RT_OK) return st;
    uint64_t before = ds4rt_backend_bytes(m->be, DS4RT_MEM_SCRATCH);
    ds4rt_pass_bufs pb;
    st = ds4rt_pass_bufs_create(&m->target, ctx, sp->max_batch, sp->n_ctx, &pb);
    if (st == DS4RT_OK) {
        *out = ds4rt_backend_bytes(m->be, DS4RT_MEM_SCRATCH) - before;
        ds4rt_pass_bufs_free(&pb);
    }
    ctx->ops->ctx_free(ctx);
    return st;
}

ds4rt_status ds4rt_model_measure_memory(ds4rt_model *m, const ds4rt_bind_account *bound) {
    const ds4rt_hparams *hp = &m->target.hp;
    ds4rt_model_memory *mem = &m->mem;
    mem->weight_bytes = bound->mapped_bytes + bound->owned_bytes;
    /* DS4RT_LOAD_COPY: the "mapped" views point into the model's own copy of the file */
    mem->weight_owned_bytes = m->params.load == DS4RT_LOAD_COPY ? mem->weight_bytes : bound->owned_bytes;
    mem->graph_bytes = 0; /* the CPU backend compiles nothing */

    /* the state grows linearly in n_ctx (compressed rows: n_ctx / ratio + 2 per layer), so two
     * sizes give its fixed part and its slope exactly */
    ds4rt_session_params sp = ds4rt_session_params_defaults();
    uint64_t b1, b2;
    ds4rt_status st = state_bytes(hp, 1024, sp.max_batch, &b1);
    if (st == DS4RT_OK) st = state_bytes(hp, 2048, sp.max_batch, &b2);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "measuring the session state");
    mem->state_bytes_per_1k = b2 - b1;
    mem->state_fixed_bytes = b1 - mem->state_bytes_per_1k;

    uint64_t scratch;
    st = pass_scratch_bytes(m, &sp, &scratch);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "measuring the session scratch");
    ds4rt_session_buffers buf = ds4rt_session_buffer_sizes(hp, &sp);
    mem->scratch_bytes = scratch + buf.pass_logits + buf.prev_logits + buf.tokens;
    return DS4RT_OK;
}
