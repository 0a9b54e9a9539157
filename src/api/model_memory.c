/*
 * model_memory.c - the memory figures of ds4rt_model_info, measured rather than estimated: the
 * weights from what binding accounted, the per-session figures by building the state and the
 * scratch of a default session once at load (their constructors count what they allocate, so
 * the layouts have one definition) and freeing them again. The buffers are calloc'ed and
 * mostly untouched, so the measurement costs address space, not resident memory.
 */
#include "api_internal.h"
#include "internal.h"

int ds4rt_model_threads(const ds4rt_model *m) {
    return m->params.n_threads > 0 ? m->params.n_threads : ds4rt_cpu_count();
}

static ds4rt_status state_bytes(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch, uint64_t *out) {
    ds4rt_kv_state st;
    ds4rt_status rc = ds4rt_kv_state_create(hp, n_ctx, max_batch, &st);
    if (rc != DS4RT_OK) return rc;
    *out = st.bytes;
    ds4rt_kv_state_free(&st);
    return DS4RT_OK;
}

ds4rt_status ds4rt_model_measure_memory(ds4rt_model *m, const ds4rt_bind_account *bound) {
    const ds4rt_hparams *hp = &m->target.hp;
    ds4rt_model_memory *mem = &m->mem;
    mem->weight_owned_bytes = bound->owned_bytes;
    mem->weight_bytes = bound->mapped_bytes + bound->owned_bytes;
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

    ds4rt_scratch scratch;
    st = ds4rt_scratch_create(hp, sp.max_batch, sp.n_ctx, ds4rt_model_threads(m), 0, &scratch);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "measuring the session scratch");
    ds4rt_session_buffers buf = ds4rt_session_buffer_sizes(hp, &sp);
    mem->scratch_bytes = scratch.bytes + buf.pass_logits + buf.prev_logits + buf.tokens;
    ds4rt_scratch_free(&scratch);
    return DS4RT_OK;
}
