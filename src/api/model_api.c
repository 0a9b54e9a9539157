/* model_api.c - loading a deepseek4 model (public API). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "gguf/gguf_copy.h"
#include "api_internal.h"
#include "internal.h"
#include "threadpool.h"

static void model_params_defaults(void *out) {
    ds4rt_model_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->n_threads = 0;
    p->numerics = DS4RT_NUMERICS_OFFICIAL;
    p->cache_policy = DS4RT_CACHE_AUTO;
    p->cache_budget_bytes = 0;
    p->backend = DS4RT_BACKEND_AUTO;
    p->device = 0;
    p->load = DS4RT_LOAD_MAP;
}

static const ds4rt_struct_desc MODEL_PARAMS = {
    .name = "ds4rt_model_params",
    .size = sizeof(ds4rt_model_params),
    .min_size = sizeof(ds4rt_model_params_1_0),
    .defaults = model_params_defaults,
};
_Static_assert(offsetof(ds4rt_model_params, backend) >= sizeof(ds4rt_model_params_1_0),
               "1.1 fields start after the 1.0 layout");

static const ds4rt_struct_desc MODEL_INFO = {
    .name = "ds4rt_model_info",
    .size = sizeof(ds4rt_model_info),
    .min_size = offsetof(ds4rt_model_info, backend), /* the 1.0 layout */
};

DS4RT_API ds4rt_status ds4rt_model_params_init(ds4rt_model_params *params, size_t size) {
    return ds4rt_struct_init(&MODEL_PARAMS, params, size);
}

static int32_t optional_id(const ds4rt_gguf *g, const char *key) {
    uint32_t v;
    return ds4rt_gguf_get_u32(g, key, &v) == DS4RT_OK && v <= INT32_MAX ? (int32_t)v : -1;
}

/* Load progress: the tensor data of the file, reported as the binder reaches each tensor. */
typedef struct load_progress {
    ds4rt_progress_fn fn;
    void *user;
    uint64_t total, done;
    uint64_t calls;
} load_progress;

static void report(load_progress *lp, uint64_t done) {
    if (lp->fn == NULL) return;
    if (done > lp->total) done = lp->total;
    if (done < lp->done) done = lp->done; /* never backwards */
    if (lp->calls > 0 && done == lp->done) return;
    lp->done = done;
    lp->calls++;
    lp->fn(lp->user, done, lp->total);
}

static void on_tensor_bound(void *user, uint64_t seen_bytes) { report(user, seen_bytes); }

static uint64_t tensor_data_bytes(const ds4rt_gguf *g) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < ds4rt_gguf_tensor_count(g); i++) total += ds4rt_gguf_tensor_at(g, i)->nbytes;
    return total;
}

DS4RT_API ds4rt_status ds4rt_model_load(const char *path, const ds4rt_model_params *params, ds4rt_model **out) {
    if (out == NULL || path == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: NULL argument");
    *out = NULL;
    ds4rt_model_params p;
    ds4rt_status st = ds4rt_struct_read(&MODEL_PARAMS, params, &p);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "model_load");
    if (p.numerics != DS4RT_NUMERICS_OFFICIAL && p.numerics != DS4RT_NUMERICS_LLAMACPP)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: unknown numerics %d", (int)p.numerics);
    if (p.load != DS4RT_LOAD_MAP && p.load != DS4RT_LOAD_COPY)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: unknown load mode %d", (int)p.load);
    if ((unsigned)p.cache_policy > DS4RT_CACHE_ON)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: unknown cache policy %d", (int)p.cache_policy);
    ds4rt_backend_choice backend;
    st = ds4rt_backend_choose(p.backend, p.device, &backend);
    if (st != DS4RT_OK) return st;
    ds4rt_model *m = calloc(1, sizeof *m);
    if (m == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "model");
    m->params = p;
    m->backend = backend;
    load_progress lp = {.fn = p.progress, .user = p.progress_user};
    ds4rt_bind_account account = {.on_tensor = on_tensor_bound, .user = &lp};
    /* the backend first: binding checks every op and type the model needs against it */
    st = ds4rt_backend_open_choice(&backend, p.n_threads, &m->be);
    if (st == DS4RT_OK)
        st = p.load == DS4RT_LOAD_COPY ? ds4rt_gguf_open_copy(path, &m->gguf) : ds4rt_gguf_open(path, &m->gguf);
    if (st == DS4RT_OK) {
        lp.total = tensor_data_bytes(m->gguf);
        report(&lp, 0);
        st = ds4rt_target_bind(m->gguf, p.numerics == DS4RT_NUMERICS_OFFICIAL, m->be, &account, &m->target);
    }
    /* a file with tokenizer metadata must have a valid tokenizer; a file without any is used
     * with token ids only */
    if (st == DS4RT_OK && ds4rt_gguf_find_kv(m->gguf, "tokenizer.ggml.tokens") != NULL) {
        st = ds4rt_tokenizer_from_gguf(m->gguf, &m->tokenizer);
        if (st == DS4RT_OK && ds4rt_tokenizer_n_tokens(m->tokenizer) > m->target.hp.n_vocab)
            st = ds4rt_fail(DS4RT_ERR_MISMATCH, "the tokenizer has %u tokens, the model's vocabulary %u",
                            ds4rt_tokenizer_n_tokens(m->tokenizer), m->target.hp.n_vocab);
    }
    if (st == DS4RT_OK) st = ds4rt_model_measure_memory(m, &account);
    if (st != DS4RT_OK) {
        ds4rt_model_free(m);
        return ds4rt_fail_context(st, "%s", path);
    }
    ds4rt_cache_apply(&m->target, p.cache_policy, p.cache_budget_bytes, &m->cache);
    m->bos_id = optional_id(m->gguf, "tokenizer.ggml.bos_token_id");
    m->eos_id = optional_id(m->gguf, "tokenizer.ggml.eos_token_id");
    report(&lp, lp.total); /* tensors the model does not use are skipped, not loaded */
    *out = m;
    return DS4RT_OK;
}

DS4RT_API void ds4rt_model_free(ds4rt_model *m) {
    if (m == NULL) return;
    ds4rt_tokenizer_free(m->tokenizer);
    ds4rt_target_free(&m->target);
    ds4rt_gguf_close(m->gguf);
    ds4rt_backend_close(m->be);
    free(m);
}

DS4RT_API ds4rt_status ds4rt_model_get_info(const ds4rt_model *m, ds4rt_model_info *out) {
    if (m == NULL || out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_get_info: NULL argument");
    const ds4rt_hparams *hp = &m->target.hp;
    ds4rt_model_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    info.n_layer = hp->n_layer;
    info.n_embd = hp->n_embd;
    info.n_vocab = hp->n_vocab;
    info.n_head = hp->n_head;
    info.head_dim = hp->head_dim;
    info.n_expert = hp->n_expert;
    info.n_expert_used = hp->n_expert_used;
    info.window = hp->window;
    info.n_hc = hp->hc;
    info.bos_id = m->bos_id;
    info.eos_id = m->eos_id;
    info.numerics = m->params.numerics;
    info.n_threads = ds4rt_model_threads(m);
    info.file_bytes = ds4rt_gguf_file_size(m->gguf);
    info.cache_requested = m->cache.requested;
    info.cache_active = m->cache.active;
    info.cache_bytes = m->cache.bytes;
    info.cache_hits = m->cache.hits + ds4rt_backend_cache_hits(m->be);
    info.cache_fallbacks = m->cache.fallbacks;
    snprintf(info.cache_reason, sizeof info.cache_reason, "%s", m->cache.reason);
    snprintf(info.backend, sizeof info.backend, "%s", m->backend.name);
    info.backend_kind = m->backend.kind;
    info.device = m->backend.device;
    info.weight_bytes = m->mem.weight_bytes;
    info.weight_owned_bytes = m->mem.weight_owned_bytes;
    info.state_fixed_bytes = m->mem.state_fixed_bytes;
    info.state_bytes_per_1k = m->mem.state_bytes_per_1k;
    info.scratch_bytes = m->mem.scratch_bytes;
    info.graph_bytes = m->mem.graph_bytes;
    ds4rt_status st = ds4rt_struct_write(&MODEL_INFO, &info, out);
    return st == DS4RT_OK ? st : ds4rt_fail_context(st, "model_get_info");
}

DS4RT_API const ds4rt_tokenizer *ds4rt_model_tokenizer(const ds4rt_model *m) { return m ? m->tokenizer : NULL; }
