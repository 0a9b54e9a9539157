/* hparams.c - reading and validating deepseek4 hyperparameters (docs/MODEL.md, "Hyperparameters"). */
#include "hparams.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define ARCH "deepseek4."

static ds4rt_status get_u32(const ds4rt_gguf *g, const char *key, bool required, uint32_t dflt,
                            uint32_t *out) {
    char full[128];
    snprintf(full, sizeof full, ARCH "%s", key);
    ds4rt_status st = ds4rt_gguf_get_u32(g, full, out);
    if (st == DS4RT_ERR_NOT_FOUND && !required) {
        *out = dflt;
        return DS4RT_OK;
    }
    if (st == DS4RT_ERR_NOT_FOUND) return ds4rt_fail(st, "required key %s is missing", full);
    return st;
}

static ds4rt_status get_f32(const ds4rt_gguf *g, const char *key, float dflt, float *out) {
    char full[128];
    snprintf(full, sizeof full, ARCH "%s", key);
    ds4rt_status st = ds4rt_gguf_get_f32(g, full, out);
    if (st == DS4RT_ERR_NOT_FOUND) {
        *out = dflt;
        return DS4RT_OK;
    }
    if (st == DS4RT_OK && !isfinite(*out)) return ds4rt_fail(DS4RT_ERR_FORMAT, "%s is not finite", full);
    return st;
}

/* A per-layer float: an array of >= n_layer numbers, or one scalar for every layer. */
static ds4rt_status get_layer_floats(const ds4rt_gguf *g, const char *key, uint32_t n_layer,
                                     const float *fallback, float dflt, float *out) {
    char full[128];
    snprintf(full, sizeof full, ARCH "%s", key);
    const ds4rt_gguf_kv *kv = ds4rt_gguf_find_kv(g, full);
    if (kv == NULL) {
        for (uint32_t l = 0; l < n_layer; l++) out[l] = fallback ? fallback[l] : dflt;
        return DS4RT_OK;
    }
    if (kv->type != DS4RT_GGUF_ARRAY) {
        float v;
        ds4rt_status st = ds4rt_gguf_get_f32(g, full, &v);
        if (st != DS4RT_OK) return st;
        for (uint32_t l = 0; l < n_layer; l++) out[l] = v;
        return DS4RT_OK;
    }
    if (kv->array_len < n_layer)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s has %llu entries, fewer than block_count %u", full,
                          (unsigned long long)kv->array_len, n_layer);
    for (uint32_t l = 0; l < n_layer; l++) {
        double v;
        ds4rt_status st = ds4rt_gguf_array_f64(kv, l, &v);
        if (st != DS4RT_OK) return ds4rt_fail_context(st, "%s[%u]", full, l);
        if (!isfinite(v) || v <= 0) return ds4rt_fail(DS4RT_ERR_FORMAT, "%s[%u] = %g must be > 0", full, l, v);
        out[l] = (float)v;
    }
    return DS4RT_OK;
}

static ds4rt_status get_ratios(const ds4rt_gguf *g, uint32_t n_layer, uint32_t *out) {
    const char *full = ARCH "attention.compress_ratios";
    const ds4rt_gguf_kv *kv = ds4rt_gguf_find_kv(g, full);
    if (kv == NULL) return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "required key %s is missing", full);
    if (kv->type != DS4RT_GGUF_ARRAY)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s must be an array of integers", full);
    if (kv->array_len < n_layer)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s has %llu entries, fewer than block_count %u", full,
                          (unsigned long long)kv->array_len, n_layer);
    for (uint32_t l = 0; l < n_layer; l++) {
        int64_t v;
        ds4rt_status st = ds4rt_gguf_array_int(kv, l, &v);
        if (st != DS4RT_OK) return ds4rt_fail_context(st, "%s[%u]", full, l);
        if (v < 0 || v == 1 || v > 4096)
            return ds4rt_fail(DS4RT_ERR_FORMAT, "%s[%u] = %lld: a ratio must be 0 or in [2, 4096]",
                              full, l, (long long)v);
        out[l] = (uint32_t)v;
    }
    return DS4RT_OK;
}

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) return ds4rt_fail(DS4RT_ERR_FORMAT, __VA_ARGS__);        \
    } while (0)

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

static bool is_pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

static ds4rt_status read_all(const ds4rt_gguf *g, ds4rt_hparams *hp) {
    ds4rt_str arch;
    if (ds4rt_gguf_get_str(g, "general.architecture", &arch) != DS4RT_OK)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "general.architecture is missing");
    if (arch.len != 9 || memcmp(arch.data, "deepseek4", 9) != 0)
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "general.architecture is '%.*s', expected 'deepseek4'",
                          (int)(arch.len > 64 ? 64 : arch.len), arch.data);

    TRY(get_u32(g, "block_count", true, 0, &hp->n_layer));
    CHECK(hp->n_layer >= 1 && hp->n_layer <= DS4RT_MAX_LAYERS, "block_count %u out of range [1, %d]",
          hp->n_layer, DS4RT_MAX_LAYERS);
    TRY(get_u32(g, "embedding_length", true, 0, &hp->n_embd));
    TRY(get_u32(g, "attention.head_count", true, 0, &hp->n_head));
    uint32_t n_head_kv, value_len;
    TRY(get_u32(g, "attention.head_count_kv", false, 1, &n_head_kv));
    CHECK(n_head_kv == 1, ARCH "attention.head_count_kv = %u: DeepSeek V4 has one shared KV head", n_head_kv);
    TRY(get_u32(g, "attention.key_length", true, 0, &hp->head_dim));
    TRY(get_u32(g, "attention.value_length", false, hp->head_dim, &value_len));
    CHECK(value_len == hp->head_dim, "value_length %u != key_length %u (K and V share one row)", value_len,
          hp->head_dim);
    TRY(get_u32(g, "rope.dimension_count", true, 0, &hp->rope_dim));
    TRY(get_u32(g, "attention.q_lora_rank", true, 0, &hp->q_lora));
    TRY(get_u32(g, "attention.output_lora_rank", true, 0, &hp->o_lora));
    TRY(get_u32(g, "attention.output_group_count", true, 0, &hp->o_groups));
    TRY(get_u32(g, "attention.sliding_window", true, 0, &hp->window));

    TRY(get_u32(g, "expert_count", true, 0, &hp->n_expert));
    TRY(get_u32(g, "expert_used_count", true, 0, &hp->n_expert_used));
    TRY(get_u32(g, "expert_feed_forward_length", true, 0, &hp->expert_ff));
    TRY(get_u32(g, "expert_shared_count", false, 1, &hp->n_shared));
    TRY(get_u32(g, "hash_layer_count", false, 0, &hp->n_hash));
    uint32_t groups, groups_used, gating;
    TRY(get_u32(g, "expert_group_count", false, 0, &groups));
    TRY(get_u32(g, "expert_group_used_count", false, 0, &groups_used));
    CHECK(groups == 0 && groups_used == 0, "group-limited routing (expert_group_count %u) is not DeepSeek V4's",
          groups);
    TRY(get_u32(g, "expert_gating_func", false, 4, &gating));
    if (gating != 4)
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, ARCH "expert_gating_func = %u; only 4 (sqrt-softplus) is DeepSeek V4's",
                          gating);
    TRY(get_f32(g, "expert_weights_scale", 1.5f, &hp->expert_scale));
    {
        int b = 1;
        ds4rt_status st = ds4rt_gguf_get_bool(g, ARCH "expert_weights_norm", &b);
        if (st != DS4RT_OK && st != DS4RT_ERR_NOT_FOUND) return st;
        hp->expert_norm = b != 0;
    }

    TRY(get_u32(g, "hyper_connection.count", true, 0, &hp->hc));
    TRY(get_u32(g, "hyper_connection.sinkhorn_iterations", false, 20, &hp->sinkhorn_iters));
    TRY(get_f32(g, "hyper_connection.epsilon", 1e-6f, &hp->hc_eps));
    TRY(get_f32(g, "attention.layer_norm_rms_epsilon", 1e-6f, &hp->rms_eps));

    TRY(get_f32(g, "rope.freq_base", 10000.0f, &hp->rope_base));
    TRY(get_f32(g, "attention.compress_rope_freq_base", 160000.0f, &hp->compress_rope_base));
    TRY(get_f32(g, "rope.scaling.factor", 16.0f, &hp->yarn_factor));
    TRY(get_f32(g, "rope.scaling.yarn_beta_fast", 32.0f, &hp->yarn_beta_fast));
    TRY(get_f32(g, "rope.scaling.yarn_beta_slow", 1.0f, &hp->yarn_beta_slow));
    {
        ds4rt_status st = ds4rt_gguf_get_u64(g, ARCH "rope.scaling.original_context_length", &hp->yarn_orig_ctx);
        if (st == DS4RT_ERR_NOT_FOUND) hp->yarn_orig_ctx = 65536;
        else if (st != DS4RT_OK) return st;
        st = ds4rt_gguf_get_u64(g, ARCH "context_length", &hp->train_ctx);
        if (st == DS4RT_ERR_NOT_FOUND) hp->train_ctx = 0;
        else if (st != DS4RT_OK) return st;
    }

    hp->ratio = calloc(hp->n_layer, sizeof *hp->ratio);
    hp->clamp_exp = calloc(hp->n_layer, sizeof *hp->clamp_exp);
    hp->clamp_shexp = calloc(hp->n_layer, sizeof *hp->clamp_shexp);
    if (!hp->ratio || !hp->clamp_exp || !hp->clamp_shexp)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "hyperparameter arrays");
    TRY(get_ratios(g, hp->n_layer, hp->ratio));
    TRY(get_layer_floats(g, "swiglu_clamp_exp", hp->n_layer, NULL, 10.0f, hp->clamp_exp));
    TRY(get_layer_floats(g, "swiglu_clamp_shexp", hp->n_layer, hp->clamp_exp, 0.0f, hp->clamp_shexp));

    hp->any_indexer = false;
    for (uint32_t l = 0; l < hp->n_layer; l++) hp->any_indexer |= hp->ratio[l] == 4;
    if (hp->any_indexer) {
        TRY(get_u32(g, "attention.indexer.head_count", true, 0, &hp->idx_heads));
        TRY(get_u32(g, "attention.indexer.key_length", true, 0, &hp->idx_dim));
        TRY(get_u32(g, "attention.indexer.top_k", true, 0, &hp->idx_topk));
    } else {
        TRY(get_u32(g, "attention.indexer.head_count", false, 0, &hp->idx_heads));
        TRY(get_u32(g, "attention.indexer.key_length", false, 0, &hp->idx_dim));
        TRY(get_u32(g, "attention.indexer.top_k", false, 0, &hp->idx_topk));
    }

    /* vocabulary: the explicit key, else the tokenizer's token count */
    {
        ds4rt_status st = ds4rt_gguf_get_u32(g, ARCH "vocab_size", &hp->n_vocab);
        if (st == DS4RT_ERR_NOT_FOUND) {
            const ds4rt_gguf_kv *tok = ds4rt_gguf_find_kv(g, "tokenizer.ggml.tokens");
            if (tok == NULL || tok->type != DS4RT_GGUF_ARRAY)
                return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "neither " ARCH "vocab_size nor tokenizer.ggml.tokens is present");
            if (tok->array_len > UINT32_MAX) return ds4rt_fail(DS4RT_ERR_FORMAT, "tokenizer.ggml.tokens too long");
            hp->n_vocab = (uint32_t)tok->array_len;
        } else if (st != DS4RT_OK) {
            return st;
        }
    }
    return DS4RT_OK;
}

static ds4rt_status validate(ds4rt_hparams *hp) {
    CHECK(hp->n_embd >= 1 && hp->n_embd <= 65536, "embedding_length %u out of range", hp->n_embd);
    CHECK(hp->n_vocab >= 1 && hp->n_vocab <= (1u << 24), "vocab_size %u out of range", hp->n_vocab);
    CHECK(hp->n_head >= 1 && hp->n_head <= 1024, "head_count %u out of range", hp->n_head);
    CHECK(hp->head_dim >= 2 && hp->head_dim <= 4096, "key_length %u out of range", hp->head_dim);
    CHECK(hp->rope_dim % 2 == 0 && hp->rope_dim <= hp->head_dim, "rope.dimension_count %u must be even and <= key_length %u",
          hp->rope_dim, hp->head_dim);
    CHECK(hp->o_groups >= 1 && hp->n_head % hp->o_groups == 0, "output_group_count %u must divide head_count %u",
          hp->o_groups, hp->n_head);
    CHECK(hp->q_lora >= 1 && hp->q_lora <= 65536, "q_lora_rank %u out of range", hp->q_lora);
    CHECK(hp->o_lora >= 1 && hp->o_lora <= 65536, "output_lora_rank %u out of range", hp->o_lora);
    CHECK(hp->window >= 1 && hp->window <= 65536, "sliding_window %u out of range", hp->window);
    CHECK(hp->n_expert >= 1 && hp->n_expert <= 4096, "expert_count %u out of range", hp->n_expert);
    CHECK(hp->n_expert_used >= 1 && hp->n_expert_used <= hp->n_expert && hp->n_expert_used <= 64,
          "expert_used_count %u must be in [1, min(expert_count %u, 64)]", hp->n_expert_used, hp->n_expert);
    CHECK(hp->expert_ff >= 1 && hp->expert_ff <= 65536, "expert_feed_forward_length %u out of range", hp->expert_ff);
    CHECK(hp->n_shared <= 64, "expert_shared_count %u out of range", hp->n_shared);
    CHECK(hp->n_hash <= hp->n_layer, "hash_layer_count %u exceeds block_count %u", hp->n_hash, hp->n_layer);
    CHECK(hp->hc >= 1 && hp->hc <= DS4RT_MAX_HC, "hyper_connection.count %u out of range [1, %d]", hp->hc, DS4RT_MAX_HC);
    CHECK(hp->sinkhorn_iters >= 1 && hp->sinkhorn_iters <= 1000, "sinkhorn_iterations %u out of range",
          hp->sinkhorn_iters);
    CHECK(hp->rms_eps > 0 && hp->hc_eps >= 0, "epsilons must be positive");
    CHECK(hp->rope_base > 1 && hp->compress_rope_base > 1, "RoPE bases must be > 1");
    CHECK(hp->yarn_factor >= 1, "rope.scaling.factor %g must be >= 1", (double)hp->yarn_factor);
    CHECK(hp->yarn_orig_ctx >= 1, "rope.scaling.original_context_length must be >= 1");
    if (hp->any_indexer) {
        CHECK(hp->idx_heads >= 1 && hp->idx_heads <= 1024, "indexer.head_count %u out of range", hp->idx_heads);
        CHECK(is_pow2(hp->idx_dim) && hp->idx_dim % 32 == 0 && hp->idx_dim <= 4096,
              "indexer.key_length %u must be a power of two and a multiple of 32", hp->idx_dim);
        CHECK(hp->rope_dim <= hp->idx_dim, "rope.dimension_count %u exceeds indexer.key_length %u", hp->rope_dim,
              hp->idx_dim);
        CHECK(hp->idx_topk >= 1, "indexer.top_k must be >= 1");
    }
    hp->d_nope = hp->head_dim - hp->rope_dim;
    hp->q_dim = hp->n_head * hp->head_dim;
    hp->group_dim = (hp->n_head / hp->o_groups) * hp->head_dim;
    hp->o_low_dim = hp->o_groups * hp->o_lora;
    hp->hc_dim = hp->hc * hp->n_embd;
    hp->hc_mix = (2 + hp->hc) * hp->hc;
    hp->idx_q_dim = hp->idx_heads * hp->idx_dim;
    hp->shared_ff = hp->expert_ff * hp->n_shared;
    return DS4RT_OK;
}

ds4rt_status ds4rt_hparams_load(const ds4rt_gguf *g, ds4rt_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    ds4rt_status st = read_all(g, hp);
    if (st == DS4RT_OK) st = validate(hp);
    if (st != DS4RT_OK) {
        ds4rt_hparams_free(hp);
        return ds4rt_fail_context(st, "hyperparameters");
    }
    return DS4RT_OK;
}

void ds4rt_hparams_free(ds4rt_hparams *hp) {
    free(hp->ratio);
    free(hp->clamp_exp);
    free(hp->clamp_shexp);
    hp->ratio = NULL;
    hp->clamp_exp = hp->clamp_shexp = NULL;
}
