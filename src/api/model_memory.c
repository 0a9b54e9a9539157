/*
 * model_memory.c - the memory figures of ds4rt_model_info, measured rather than estimated: the
 * weights from what binding accounted, the per-session figures by building the state and the
 * scratch of a default session: the state from its layout (ds4rt_kv_state_bytes, the one
 * definition), the scratch by building a default session's pass buffers on the model's backend
 * once at load and reading the backend's accounting.
 *
 * The memory plan (ds4rt_model_memory_plan) gives the same figures, and their split, from a
 * file's header alone: the target and the support model are bound dry (weights.h: every check
 * but the data's, every byte accounted, nothing read), and the same functions then measure the
 * state, the scratch and the drafter's buffers on a CPU backend.
 */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "api_internal.h"
#include "gguf/gguf_copy.h"
#include "internal.h"
#include "threadpool.h"

int ds4rt_model_threads(const ds4rt_model *m) {
    return m->params.n_threads > 0 ? m->params.n_threads : ds4rt_cpu_count();
}

/* The state grows linearly in n_ctx (compressed rows: n_ctx / ratio + 2 per layer), so two
 * sizes give its fixed part and its slope exactly. */
static void state_slope(const ds4rt_hparams *hp, uint32_t max_batch, uint64_t *fixed, uint64_t *per_1k) {
    const uint64_t b1 = ds4rt_kv_state_bytes(hp, 1024, max_batch), b2 = ds4rt_kv_state_bytes(hp, 2048, max_batch);
    *per_1k = b2 - b1;
    *fixed = b1 - *per_1k;
}

/* The backend's scratch bytes of one session's pass buffers and op workspaces, as the backend
 * accounts them, built in `ctx` (kept in *pb when pb is not NULL, else freed). */
static ds4rt_status pass_scratch_bytes(ds4rt_bctx *ctx, const ds4rt_target *t, const ds4rt_session_params *sp,
                                       ds4rt_pass_bufs *keep, uint64_t *out) {
    uint64_t before = ds4rt_backend_bytes(ctx->be, DS4RT_MEM_SCRATCH);
    ds4rt_pass_bufs pb;
    ds4rt_status st = ds4rt_pass_bufs_create(t, ctx, sp->max_batch, sp->n_ctx, &pb);
    if (st != DS4RT_OK) return st;
    *out = ds4rt_backend_bytes(ctx->be, DS4RT_MEM_SCRATCH) - before;
    if (keep != NULL) *keep = pb;
    else ds4rt_pass_bufs_free(&pb);
    return DS4RT_OK;
}

/* Scratch of a session: the pass buffers plus the session's logit and token buffers. */
static uint64_t session_scratch(const ds4rt_hparams *hp, const ds4rt_session_params *sp, uint64_t pass) {
    ds4rt_session_buffers buf = ds4rt_session_buffer_sizes(hp, sp);
    return pass + buf.pass_logits + buf.prev_logits + buf.tokens;
}

ds4rt_status ds4rt_model_measure_memory(ds4rt_model *m, const ds4rt_bind_account *bound) {
    const ds4rt_hparams *hp = &m->target.hp;
    ds4rt_model_memory *mem = &m->mem;
    mem->weight_bytes = bound->mapped_bytes + bound->owned_bytes;
    /* DS4RT_LOAD_COPY: the "mapped" views point into the model's own copy of the file */
    mem->weight_owned_bytes = m->params.load == DS4RT_LOAD_COPY ? mem->weight_bytes : bound->owned_bytes;
    mem->graph_bytes = 0; /* the CPU backend compiles nothing */

    ds4rt_session_params sp = ds4rt_session_params_defaults();
    state_slope(hp, sp.max_batch, &mem->state_fixed_bytes, &mem->state_bytes_per_1k);

    ds4rt_bctx *ctx;
    ds4rt_status st = ds4rt_backend_get_ops(m->be)->ctx_create(m->be, ds4rt_model_threads(m), &ctx);
    uint64_t scratch = 0;
    if (st == DS4RT_OK) {
        st = pass_scratch_bytes(ctx, &m->target, &sp, NULL, &scratch);
        ctx->ops->ctx_free(ctx);
    }
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "measuring the session scratch");
    mem->scratch_bytes = session_scratch(hp, &sp, scratch);
    return DS4RT_OK;
}

/* ---- the memory plan ----------------------------------------------------------------------- */

static void memory_params_defaults(void *out) {
    ds4rt_memory_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->n_ctx = 4096;
    p->max_batch = 32;
    p->numerics = DS4RT_NUMERICS_OFFICIAL;
}

static const ds4rt_struct_desc MEMORY_PARAMS = {
    .name = "ds4rt_memory_params",
    .size = sizeof(ds4rt_memory_params),
    .min_size = sizeof(ds4rt_memory_params),
    .defaults = memory_params_defaults,
};

static const ds4rt_struct_desc MEMORY_PLAN = {
    .name = "ds4rt_memory_plan",
    .size = sizeof(ds4rt_memory_plan),
    .min_size = sizeof(ds4rt_memory_plan),
};

DS4RT_API ds4rt_status ds4rt_memory_params_init(ds4rt_memory_params *params, size_t size) {
    return ds4rt_struct_init(&MEMORY_PARAMS, params, size);
}

static const char *const KIND_NAMES[DS4RT_WEIGHT_KIND_COUNT] = {
    [DS4RT_WEIGHT_EMBEDDING] = "embedding",   [DS4RT_WEIGHT_HEAD] = "head",
    [DS4RT_WEIGHT_ATTENTION] = "attention",   [DS4RT_WEIGHT_COMPRESSOR] = "compressors",
    [DS4RT_WEIGHT_INDEXER] = "indexer",       [DS4RT_WEIGHT_ROUTER] = "router",
    [DS4RT_WEIGHT_EXPERTS] = "experts",       [DS4RT_WEIGHT_SHARED_EXPERTS] = "shared_experts",
    [DS4RT_WEIGHT_HYPER] = "hyper_connections", [DS4RT_WEIGHT_NORMS] = "norms",
};

DS4RT_API const char *ds4rt_weight_kind_name(uint32_t kind) {
    return kind < DS4RT_WEIGHT_KIND_COUNT ? KIND_NAMES[kind] : NULL;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The kind of a target tensor, by its name (docs/MODEL.md, "Tensors"). */
static ds4rt_weight_kind weight_kind(const char *name) {
    if (has_suffix(name, "norm.weight")) return DS4RT_WEIGHT_NORMS;
    if (strcmp(name, "token_embd.weight") == 0) return DS4RT_WEIGHT_EMBEDDING;
    if (has_prefix(name, "output")) return DS4RT_WEIGHT_HEAD; /* output.weight, output_hc_* */
    const char *t = name; /* the name inside the layer: after "blk.N." */
    if (has_prefix(name, "blk.")) {
        size_t i = 4;
        while (name[i] >= '0' && name[i] <= '9') i++;
        if (name[i] == '.') t = name + i + 1;
    }
    if (has_prefix(t, "indexer")) return DS4RT_WEIGHT_INDEXER;
    if (has_prefix(t, "attn_compressor_")) return DS4RT_WEIGHT_COMPRESSOR;
    if (has_prefix(t, "hc_")) return DS4RT_WEIGHT_HYPER;
    if (has_prefix(t, "ffn_gate_inp") || has_prefix(t, "exp_probs_b") || has_prefix(t, "ffn_gate_tid2eid"))
        return DS4RT_WEIGHT_ROUTER;
    if (strstr(t, "_shexp") != NULL) return DS4RT_WEIGHT_SHARED_EXPERTS;
    if (strstr(t, "_exps") != NULL) return DS4RT_WEIGHT_EXPERTS;
    return DS4RT_WEIGHT_ATTENTION; /* attn_q_a, attn_q_b, attn_kv, attn_output_a/_b, attn_sinks */
}

static void count_kind(void *user, const char *name, uint64_t bytes) {
    ((uint64_t *)user)[weight_kind(name)] += bytes;
}

/* The drafter's figures: its weights bound dry, its session buffers built in `ctx` beside the
 * target's (so what they add to the workspaces is what a session with a drafter adds). */
static ds4rt_status plan_drafter(const ds4rt_memory_params *p, const ds4rt_target *t, ds4rt_bctx *ctx,
                                 ds4rt_memory_plan *plan) {
    struct ds4rt_dspark *d = calloc(1, sizeof *d);
    if (d == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "DSpark support model");
    d->target = t;
    ds4rt_dspark_params dp;
    ds4rt_dspark_params_init(&dp, sizeof dp);
    dp.window = p->dspark_window;
    dp.self_test = 0;
    ds4rt_bind_account acc = {0};
    ds4rt_status st = ds4rt_dspark_bind_dry(d, p->support, &dp, &acc);
    if (st == DS4RT_OK) {
        plan->drafter_weight_bytes = acc.mapped_bytes + acc.owned_bytes;
        const uint64_t s0 = ds4rt_backend_bytes(ctx->be, DS4RT_MEM_STATE), c0 = ds4rt_backend_bytes(ctx->be, DS4RT_MEM_SCRATCH);
        ds4rt_drafter dr;
        st = ds4rt_drafter_create(d, ctx, p->max_batch, &dr);
        if (st == DS4RT_OK) {
            plan->drafter_state_bytes = ds4rt_backend_bytes(ctx->be, DS4RT_MEM_STATE) - s0;
            plan->drafter_scratch_bytes = ds4rt_backend_bytes(ctx->be, DS4RT_MEM_SCRATCH) - c0;
            ds4rt_drafter_free(&dr);
        }
    }
    if (st != DS4RT_OK) st = ds4rt_fail_context(st, "DSpark support %s", p->support);
    ds4rt_dspark_release(d);
    free(d);
    return st;
}

static ds4rt_status plan_session(const ds4rt_memory_params *p, ds4rt_backend *be, const ds4rt_target *t,
                                 ds4rt_memory_plan *plan) {
    const ds4rt_hparams *hp = &t->hp;
    ds4rt_kv_state_parts at, k1, k2;
    plan->state_bytes = ds4rt_kv_state_split(hp, p->n_ctx, p->max_batch, &at);
    ds4rt_kv_state_split(hp, 1024, p->max_batch, &k1);
    ds4rt_kv_state_split(hp, 2048, p->max_batch, &k2);
    state_slope(hp, p->max_batch, &plan->state_fixed_bytes, &plan->state_bytes_per_1k);
    plan->state_window_bytes = at.window;
    plan->state_frontier_bytes = at.frontiers + at.indexer_frontiers;
    plan->state_compressed_bytes = at.compressed;
    plan->state_indexer_bytes = at.indexer;
    plan->state_compressed_per_1k = k2.compressed - k1.compressed;
    plan->state_indexer_per_1k = k2.indexer - k1.indexer;

    ds4rt_bctx *ctx;
    const int threads = p->n_threads > 0 ? p->n_threads : ds4rt_cpu_count();
    ds4rt_status st = ds4rt_backend_get_ops(be)->ctx_create(be, threads, &ctx);
    if (st != DS4RT_OK) return st;
    const ds4rt_session_params sp = {.size = sizeof sp, .n_ctx = p->n_ctx, .max_batch = p->max_batch};
    ds4rt_pass_bufs pb;
    uint64_t pass = 0;
    st = pass_scratch_bytes(ctx, t, &sp, &pb, &pass);
    if (st == DS4RT_OK) {
        plan->scratch_bytes = session_scratch(hp, &sp, pass);
        if (p->support != NULL) st = plan_drafter(p, t, ctx, plan);
        ds4rt_pass_bufs_free(&pb);
    } else {
        st = ds4rt_fail_context(st, "measuring the session scratch");
    }
    ctx->ops->ctx_free(ctx);
    return st;
}

DS4RT_API ds4rt_status ds4rt_model_memory_plan(const char *path, const ds4rt_memory_params *params,
                                               ds4rt_memory_plan *out) {
    if (path == NULL || out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_memory_plan: NULL argument");
    ds4rt_memory_params p;
    ds4rt_status st = ds4rt_struct_read(&MEMORY_PARAMS, params, &p);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "model_memory_plan");
    if (p.n_ctx < 1 || p.n_ctx > ((int64_t)1 << 31))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_memory_plan: n_ctx %lld outside [1, 2^31]",
                          (long long)p.n_ctx);
    if (p.max_batch < 1 || p.max_batch > 4096)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_memory_plan: max_batch %u outside [1, 4096]",
                          p.max_batch);
    if (p.numerics != DS4RT_NUMERICS_OFFICIAL && p.numerics != DS4RT_NUMERICS_LLAMACPP)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_memory_plan: unknown numerics %d", (int)p.numerics);
    if (p.dspark_window > 65536)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_memory_plan: dspark_window %u > 65536", p.dspark_window);

    ds4rt_memory_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.size = sizeof plan;
    plan.n_ctx = p.n_ctx;
    plan.max_batch = p.max_batch;
    ds4rt_backend *be = NULL;
    ds4rt_gguf *g = NULL;
    ds4rt_target t;
    memset(&t, 0, sizeof t);
    bool bound = false;
    st = ds4rt_backend_open(DS4RT_BKIND_CPU, 0, p.n_threads, &be);
    if (st == DS4RT_OK) st = ds4rt_gguf_open_header(path, &g);
    if (st == DS4RT_OK) {
        plan.file_bytes = ds4rt_gguf_file_size(g);
        for (uint64_t i = 0; i < ds4rt_gguf_tensor_count(g); i++) plan.data_bytes += ds4rt_gguf_tensor_at(g, i)->nbytes;
        ds4rt_bind_account acc = {.on_weight = count_kind, .weight_user = plan.weight_kind_bytes};
        st = ds4rt_target_bind_dry(g, p.numerics == DS4RT_NUMERICS_OFFICIAL, be, &acc, &t);
        bound = st == DS4RT_OK;
        plan.weight_bytes = acc.mapped_bytes + acc.owned_bytes;
        plan.weight_owned_bytes = acc.owned_bytes;
    }
    if (st == DS4RT_OK) {
        plan.n_layer = t.hp.n_layer;
        st = plan_session(&p, be, &t, &plan);
    }
    ds4rt_cache_plan_bytes cache;
    if (st == DS4RT_OK) st = ds4rt_cache_plan(&t, p.cache_budget_bytes, &cache);
    if (st == DS4RT_OK) {
        plan.cache_matrices = cache.matrices;
        plan.cache_q8_bytes = cache.q8_bytes;
        plan.cache_on_bytes = cache.f16_bytes;
        plan.cache_budget_bytes = cache.f16_budget_bytes;
    }
    if (bound) ds4rt_target_free(&t);
    ds4rt_gguf_close(g);
    if (be != NULL) ds4rt_backend_close(be);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "memory plan of %s", path);
    st = ds4rt_struct_write(&MEMORY_PLAN, &plan, out);
    return st == DS4RT_OK ? st : ds4rt_fail_context(st, "model_memory_plan");
}
