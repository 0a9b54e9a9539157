/* model_api.c - loading a deepseek4 model (public API). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "internal.h"
#include "threadpool.h"

DS4RT_API ds4rt_model_params ds4rt_model_default_params(void) {
    ds4rt_model_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.n_threads = 0;
    p.numerics = DS4RT_NUMERICS_OFFICIAL;
    p.cache_policy = DS4RT_CACHE_AUTO;
    p.cache_budget_bytes = 0;
    return p;
}

static int32_t optional_id(const ds4rt_gguf *g, const char *key) {
    uint32_t v;
    return ds4rt_gguf_get_u32(g, key, &v) == DS4RT_OK && v <= INT32_MAX ? (int32_t)v : -1;
}

DS4RT_API ds4rt_status ds4rt_model_load(const char *path, const ds4rt_model_params *params, ds4rt_model **out) {
    if (out == NULL || path == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: NULL argument");
    *out = NULL;
    ds4rt_model_params p = ds4rt_model_default_params();
    if (params != NULL) {
        if (params->size < sizeof p)
            return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: params.size %zu is smaller than %zu",
                              params->size, sizeof p);
        p = *params;
        p.size = sizeof p;
    }
    if (p.numerics != DS4RT_NUMERICS_OFFICIAL && p.numerics != DS4RT_NUMERICS_LLAMACPP)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: unknown numerics %d", (int)p.numerics);
    if ((unsigned)p.cache_policy > DS4RT_CACHE_ON)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: unknown cache policy %d", (int)p.cache_policy);
    ds4rt_model *m = calloc(1, sizeof *m);
    if (m == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "model");
    m->params = p;
    /* the backend first: binding checks every op and type the model needs against it */
    ds4rt_status st = ds4rt_backend_open(DS4RT_BKIND_AUTO, 0, p.n_threads, &m->backend);
    if (st == DS4RT_OK) st = ds4rt_gguf_open(path, &m->gguf);
    if (st == DS4RT_OK)
        st = ds4rt_target_bind(m->gguf, p.numerics == DS4RT_NUMERICS_OFFICIAL, m->backend, &m->target);
    /* a file with tokenizer metadata must have a valid tokenizer; a file without any is used
     * with token ids only */
    if (st == DS4RT_OK && ds4rt_gguf_find_kv(m->gguf, "tokenizer.ggml.tokens") != NULL) {
        st = ds4rt_tokenizer_from_gguf(m->gguf, &m->tokenizer);
        if (st == DS4RT_OK && ds4rt_tokenizer_n_tokens(m->tokenizer) > m->target.hp.n_vocab)
            st = ds4rt_fail(DS4RT_ERR_MISMATCH, "the tokenizer has %u tokens, the model's vocabulary %u",
                            ds4rt_tokenizer_n_tokens(m->tokenizer), m->target.hp.n_vocab);
    }
    if (st != DS4RT_OK) {
        ds4rt_model_free(m);
        return ds4rt_fail_context(st, "%s", path);
    }
    ds4rt_cache_resolve_cpu(p.cache_policy, p.cache_budget_bytes, &m->cache);
    m->bos_id = optional_id(m->gguf, "tokenizer.ggml.bos_token_id");
    m->eos_id = optional_id(m->gguf, "tokenizer.ggml.eos_token_id");
    *out = m;
    return DS4RT_OK;
}

DS4RT_API void ds4rt_model_free(ds4rt_model *m) {
    if (m == NULL) return;
    ds4rt_tokenizer_free(m->tokenizer);
    ds4rt_target_free(&m->target);
    ds4rt_gguf_close(m->gguf);
    ds4rt_backend_close(m->backend);
    free(m);
}

DS4RT_API ds4rt_status ds4rt_model_get_info(const ds4rt_model *m, ds4rt_model_info *out) {
    if (m == NULL || out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_get_info: NULL argument");
    size_t size = out->size;
    if (size < sizeof *out)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_get_info: info.size %zu is smaller than %zu", size,
                          sizeof *out);
    const ds4rt_hparams *hp = &m->target.hp;
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    out->n_layer = hp->n_layer;
    out->n_embd = hp->n_embd;
    out->n_vocab = hp->n_vocab;
    out->n_head = hp->n_head;
    out->head_dim = hp->head_dim;
    out->n_expert = hp->n_expert;
    out->n_expert_used = hp->n_expert_used;
    out->window = hp->window;
    out->n_hc = hp->hc;
    out->bos_id = m->bos_id;
    out->eos_id = m->eos_id;
    out->numerics = m->params.numerics;
    out->n_threads = m->params.n_threads > 0 ? m->params.n_threads : ds4rt_cpu_count();
    out->file_bytes = ds4rt_gguf_file_size(m->gguf);
    out->cache_requested = m->cache.requested;
    out->cache_active = m->cache.active;
    out->cache_bytes = m->cache.bytes;
    out->cache_hits = m->cache.hits;
    out->cache_fallbacks = m->cache.fallbacks;
    snprintf(out->cache_reason, sizeof out->cache_reason, "%s", m->cache.reason);
    return DS4RT_OK;
}

DS4RT_API const ds4rt_tokenizer *ds4rt_model_tokenizer(const ds4rt_model *m) { return m ? m->tokenizer : NULL; }
