/*
 * support.c - loading a DSpark support model and validating it against its target
 * (docs/DSPARK.md, "Support models"). Every problem is an error that names the key or tensor;
 * DSpark never starts half-broken (ds4's counters-then-silent-no_draft failure).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dspark.h"
#include "gguf/gguf_copy.h"
#include "internal.h"
#include "qtypes.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

/* ---- tensor names of the two layouts ------------------------------------------------------ */

typedef enum role {
    ROLE_MAIN_PROJ,
    ROLE_MAIN_NORM,
    ROLE_FINAL_NORM,
    ROLE_HC_HEAD, /* prefix of fn/scale/base */
    ROLE_MARKOV_W1,
    ROLE_MARKOV_W2,
    ROLE_CONF_PROJ
} role;

static void role_name(const struct ds4rt_dspark *d, role r, char *buf, size_t n) {
    unsigned last = d->n_stages - 1;
    bool ds4 = d->layout == DS4RT_DSPARK_LAYOUT_DS4;
    switch (r) {
    case ROLE_MAIN_PROJ: snprintf(buf, n, ds4 ? "mtp.0.main_proj.weight" : "fc.weight"); break;
    case ROLE_MAIN_NORM: snprintf(buf, n, ds4 ? "mtp.0.main_norm.weight" : "enc.output_norm.weight"); break;
    case ROLE_FINAL_NORM:
        if (ds4) snprintf(buf, n, "mtp.%u.norm.weight", last);
        else snprintf(buf, n, "output_norm.weight");
        break;
    case ROLE_HC_HEAD:
        if (ds4) snprintf(buf, n, "mtp.%u.hc_head_", last);
        else snprintf(buf, n, "output_hc_");
        break;
    case ROLE_MARKOV_W1:
        if (ds4) snprintf(buf, n, "mtp.%u.markov_head.markov_w1.weight", last);
        else snprintf(buf, n, "markov_w1.weight");
        break;
    case ROLE_MARKOV_W2:
        if (ds4) snprintf(buf, n, "mtp.%u.markov_head.markov_w2.weight", last);
        else snprintf(buf, n, "markov_w2.weight");
        break;
    case ROLE_CONF_PROJ:
        if (ds4) snprintf(buf, n, "mtp.%u.confidence_head.proj.weight", last);
        else snprintf(buf, n, "conf_proj.weight");
        break;
    }
}

/* ---- metadata ------------------------------------------------------------------------------ */

static const char *const SPELLINGS[] = {"deepseek4.dspark.%s", "deepseek4.dspark_%s", "dspark.%s"};

/* The first of the three spellings present (docs/DSPARK.md, "Support models"), or NULL. */
static const ds4rt_gguf_kv *find_key(const ds4rt_gguf *g, const char *k, char *used, size_t n) {
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(SPELLINGS); i++) {
        snprintf(used, n, SPELLINGS[i], k);
        const ds4rt_gguf_kv *kv = ds4rt_gguf_find_kv(g, used);
        if (kv != NULL) return kv;
    }
    snprintf(used, n, "dspark.%s", k);
    return NULL;
}

static ds4rt_status scalar_u32(const ds4rt_gguf *g, const ds4rt_gguf_kv *kv, const char *key, uint32_t *out) {
    if (kv == NULL)
        return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "DSpark metadata %s is missing (also looked for the "
                                               "deepseek4.dspark. and deepseek4.dspark_ spellings)", key);
    return ds4rt_gguf_get_u32(g, key, out);
}

static ds4rt_status read_layer_ids(const ds4rt_gguf_kv *kv, const char *key, int offset, struct ds4rt_dspark *d) {
    if (kv == NULL) return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "DSpark metadata %s is missing", key);
    if (kv->type != DS4RT_GGUF_ARRAY) return ds4rt_fail(DS4RT_ERR_FORMAT, "%s must be an array of layer ids", key);
    if (kv->array_len == 0) return ds4rt_fail(DS4RT_ERR_FORMAT, "%s is empty", key);
    if (kv->array_len > DS4RT_DSPARK_MAX_TARGET_LAYERS)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s has %llu entries (at most %d)", key,
                          (unsigned long long)kv->array_len, DS4RT_DSPARK_MAX_TARGET_LAYERS);
    const uint32_t L = d->target->hp.n_layer;
    d->n_tgt = (uint32_t)kv->array_len;
    for (uint32_t i = 0; i < d->n_tgt; i++) {
        int64_t v;
        TRY(ds4rt_gguf_array_int(kv, i, &v));
        v -= offset; /* dflash stores layer inputs: ds4's output ids + 1 (docs/DSPARK.md) */
        if (v < 0) return ds4rt_fail(DS4RT_ERR_FORMAT, "%s[%u] is negative", key, i);
        if (v >= L)
            return ds4rt_fail(DS4RT_ERR_MISMATCH, "%s[%u] = %lld: layer out of range (the target has %u layers)", key, i,
                              (long long)(v + offset), L);
        if (i > 0 && (uint32_t)v <= d->tgt_layers[i - 1])
            return ds4rt_fail(DS4RT_ERR_FORMAT, "%s is not strictly increasing at entry %u", key, i);
        d->tgt_layers[i] = (uint32_t)v;
    }
    return DS4RT_OK;
}

/* Stage count: 1 + the highest stage index in a tensor name ("mtp.N." / "blk.N."). */
static ds4rt_status count_stages(struct ds4rt_dspark *d) {
    const char *prefix = d->layout == DS4RT_DSPARK_LAYOUT_DS4 ? "mtp." : "blk.";
    size_t plen = strlen(prefix);
    int64_t top = -1;
    for (uint64_t i = 0; i < ds4rt_gguf_tensor_count(d->gguf); i++) {
        const ds4rt_gguf_tensor *t = ds4rt_gguf_tensor_at(d->gguf, i);
        if (t->name.len <= plen || memcmp(t->name.data, prefix, plen) != 0) continue;
        int64_t v = 0;
        uint64_t j = plen;
        while (j < t->name.len && t->name.data[j] >= '0' && t->name.data[j] <= '9' && v < 1000)
            v = v * 10 + (t->name.data[j++] - '0');
        if (j > plen && j < t->name.len && t->name.data[j] == '.' && v > top) top = v;
    }
    if (top < 0) return ds4rt_fail(DS4RT_ERR_FORMAT, "no %sN. stage tensors: not a DSpark support model", prefix);
    if (top + 1 > DS4RT_DSPARK_MAX_STAGES)
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "%lld stages (tensor %s%lld.*): at most %d", (long long)(top + 1),
                          prefix, (long long)top, DS4RT_DSPARK_MAX_STAGES);
    d->n_stages = (uint32_t)(top + 1);
    return DS4RT_OK;
}

static ds4rt_status read_metadata(struct ds4rt_dspark *d) {
    const ds4rt_gguf *g = d->gguf;
    const ds4rt_hparams *hp = &d->target->hp;
    char key[96];
    if (d->layout == DS4RT_DSPARK_LAYOUT_DS4) {
        TRY(scalar_u32(g, find_key(g, "block_size", key, sizeof key), key, &d->block_size));
        if (d->block_size < 1 || d->block_size > DS4RT_DSPARK_MAX_BLOCK)
            return ds4rt_fail(DS4RT_ERR_FORMAT, "%s = %u: must be in 1..%d", key, d->block_size, DS4RT_DSPARK_MAX_BLOCK);
        TRY(scalar_u32(g, find_key(g, "markov_rank", key, sizeof key), key, &d->markov_rank));
        TRY(scalar_u32(g, find_key(g, "noise_token_id", key, sizeof key), key, &d->noise_token));
        if (d->noise_token >= hp->n_vocab)
            return ds4rt_fail(DS4RT_ERR_MISMATCH, "%s = %u: outside the target vocabulary (V = %u)", key,
                              d->noise_token, hp->n_vocab);
        const ds4rt_gguf_kv *ids = find_key(g, "target_layer_ids", key, sizeof key);
        TRY(read_layer_ids(ids, key, 0, d));
    } else {
        ds4rt_status st = ds4rt_gguf_get_u32(g, "dflash.block_size", &d->block_size);
        if (st == DS4RT_ERR_NOT_FOUND)
            return ds4rt_fail(st, "dflash.block_size is missing (a DSpark draft needs it)");
        TRY(st);
        if (d->block_size < 1 || d->block_size > DS4RT_DSPARK_MAX_BLOCK)
            return ds4rt_fail(DS4RT_ERR_FORMAT, "dflash.block_size = %u: must be in 1..%d", d->block_size,
                              DS4RT_DSPARK_MAX_BLOCK);
        uint32_t noise;
        if (ds4rt_gguf_get_u32(g, "tokenizer.ggml.mask_token_id", &noise) != DS4RT_OK)
            return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "tokenizer.ggml.mask_token_id (the noise token) is missing");
        if (noise >= hp->n_vocab)
            return ds4rt_fail(DS4RT_ERR_MISMATCH, "tokenizer.ggml.mask_token_id = %u: outside the target vocabulary "
                                                  "(V = %u)", noise, hp->n_vocab);
        d->noise_token = noise;
        int causal = 0;
        const ds4rt_gguf_kv *ckv = ds4rt_gguf_find_kv(g, "dflash.attention.causal");
        if (ckv != NULL && ckv->type == DS4RT_GGUF_STRING)
            causal = ckv->str.len == 4 && memcmp(ckv->str.data, "true", 4) == 0;
        else if (ckv != NULL)
            TRY(ds4rt_gguf_get_bool(g, "dflash.attention.causal", &causal));
        if (causal)
            return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "dflash.attention.causal is true: DSpark blocks are non-causal");
        TRY(read_layer_ids(ds4rt_gguf_find_kv(g, "dflash.target_layers"), "dflash.target_layers", 1, d));
        const ds4rt_gguf_tensor *w1 = ds4rt_gguf_find_tensor(g, "markov_w1.weight");
        if (w1 == NULL) return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "tensor markov_w1.weight is missing (not a DSpark draft)");
        d->markov_rank = (uint32_t)w1->ne[0];
        const char *unsupported[] = {"fc.scale", "markov_w2.scale", "conf_proj.bias", "d2t"};
        for (size_t i = 0; i < DS4RT_ARRAY_LEN(unsupported); i++)
            if (ds4rt_gguf_find_tensor(g, unsupported[i]) != NULL)
                return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "tensor %s: draft scales, biases and reduced draft "
                                                         "vocabularies are not supported", unsupported[i]);
    }
    if (d->markov_rank < 1 || d->markov_rank > 65536)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "DSpark markov_rank %u out of range", d->markov_rank);
    return DS4RT_OK;
}

/* The optional acceptance prior (docs/DSPARK.md, "Scheduler"): the drafter's measured
 * conditional acceptance per block position, a FLOAT32 array of 1..block_size values in [0, 1].
 * One spelling, ds4rt's own namespace, in either layout. Absent: the scheduler starts
 * uninformed. */
#define PRIOR_KEY "ds4rt.dspark.acceptance_prior"

static ds4rt_status read_prior(struct ds4rt_dspark *d) {
    const ds4rt_gguf_kv *kv = ds4rt_gguf_find_kv(d->gguf, PRIOR_KEY);
    d->n_prior = 0;
    if (kv == NULL) return DS4RT_OK;
    if (kv->type != DS4RT_GGUF_ARRAY || kv->array_type != DS4RT_GGUF_FLOAT32)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s must be an array of FLOAT32 (the acceptance per draft position)",
                          PRIOR_KEY);
    if (kv->array_len == 0) return ds4rt_fail(DS4RT_ERR_FORMAT, "%s is empty", PRIOR_KEY);
    if (kv->array_len > d->block_size)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s has %llu values: more than the block size %u", PRIOR_KEY,
                          (unsigned long long)kv->array_len, d->block_size);
    for (uint32_t i = 0; i < (uint32_t)kv->array_len; i++) {
        double v;
        TRY(ds4rt_gguf_array_f64(kv, i, &v));
        if (!(v >= 0.0 && v <= 1.0)) /* NaN and infinities included */
            return ds4rt_fail(DS4RT_ERR_FORMAT, "%s[%u] = %g: an acceptance must be in [0, 1]", PRIOR_KEY, i, v);
        d->acceptance_prior[i] = (float)v;
    }
    d->n_prior = (uint32_t)kv->array_len;
    return DS4RT_OK;
}

/* ---- binding ------------------------------------------------------------------------------ */

static void describe_type(struct ds4rt_dspark *d, const char *label, const ds4rt_dweight *w) {
    size_t used = strlen(d->tensor_types);
    const ds4rt_type_info *t = ds4rt_type_lookup(w->type);
    snprintf(d->tensor_types + used, sizeof d->tensor_types - used, "%s%s=%s", used ? " " : "", label,
             t ? t->name : "?");
}

static ds4rt_status bind_all(struct ds4rt_dspark *d, bool dry, ds4rt_bind_account *account) {
    const ds4rt_hparams *hp = &d->target->hp;
    TRY(ds4rt_arena_init(&d->arena, d->target->be, d->gguf, dry));
    ds4rt_binder b = {.g = d->gguf, .hp = hp, .arena = &d->arena, .account = account};
    char name[160];
    for (uint32_t s = 0; s < d->n_stages; s++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, d->layout == DS4RT_DSPARK_LAYOUT_DS4 ? "mtp.%u." : "blk.%u.", s);
        ds4rt_block_kind kind = {.ratio = 0, .hash = false}; /* never compressed, never hash-routed */
        ds4rt_status st = ds4rt_bind_block(&b, prefix, kind, &d->stages[s]);
        if (st != DS4RT_OK) return ds4rt_fail_context(st, "DSpark stage %u", s);
    }
    role_name(d, ROLE_MAIN_PROJ, name, sizeof name);
    TRY(ds4rt_bind_matrix(&b, name, (int64_t)d->n_tgt * hp->n_embd, hp->n_embd, false, DS4RT_OP_MATMUL, &d->main_proj));
    role_name(d, ROLE_MAIN_NORM, name, sizeof name);
    TRY(ds4rt_bind_vector(&b, name, hp->n_embd, &d->main_norm));
    role_name(d, ROLE_FINAL_NORM, name, sizeof name);
    TRY(ds4rt_bind_vector(&b, name, hp->n_embd, &d->final_norm));
    role_name(d, ROLE_HC_HEAD, name, sizeof name);
    TRY(ds4rt_bind_hc(&b, name, hp->hc, 1, &d->hc_head));
    role_name(d, ROLE_MARKOV_W1, name, sizeof name);
    TRY(ds4rt_bind_matrix(&b, name, d->markov_rank, hp->n_vocab, false, DS4RT_OP_GET_ROWS, &d->markov_w1));
    role_name(d, ROLE_MARKOV_W2, name, sizeof name);
    TRY(ds4rt_bind_matrix(&b, name, d->markov_rank, hp->n_vocab, false, DS4RT_OP_MATMUL, &d->markov_w2));
    role_name(d, ROLE_CONF_PROJ, name, sizeof name);
    TRY(ds4rt_bind_vector(&b, name, (int64_t)hp->n_embd + d->markov_rank, &d->conf_proj));
    describe_type(d, "main_proj", &d->main_proj);
    describe_type(d, "markov_w1", &d->markov_w1);
    describe_type(d, "markov_w2", &d->markov_w2);
    describe_type(d, "attn_q_b", &d->stages[0].attn.q_b);
    describe_type(d, "experts", &d->stages[0].moe.gate_exps.first);
    return DS4RT_OK;
}

/* ---- loading ------------------------------------------------------------------------------- */

static ds4rt_status dspark_bind(struct ds4rt_dspark *d, const char *path, const ds4rt_dspark_params *p, bool dry,
                                ds4rt_bind_account *account) {
    TRY(dry ? ds4rt_gguf_open_header(path, &d->gguf) : ds4rt_gguf_open(path, &d->gguf));
    ds4rt_str arch;
    if (ds4rt_gguf_get_str(d->gguf, "general.architecture", &arch) != DS4RT_OK)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "general.architecture is missing");
    if (arch.len == 16 && memcmp(arch.data, "deepseek4-dspark", 16) == 0) d->layout = DS4RT_DSPARK_LAYOUT_DS4;
    else if (arch.len == 6 && memcmp(arch.data, "dflash", 6) == 0) d->layout = DS4RT_DSPARK_LAYOUT_DFLASH;
    else
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                          "general.architecture is '%.*s': a DSpark support model is 'deepseek4-dspark' (ds4) or "
                          "'dflash' (llama.cpp)",
                          (int)(arch.len > 64 ? 64 : arch.len), arch.data);
    TRY(count_stages(d));
    TRY(read_metadata(d));
    TRY(read_prior(d));
    TRY(bind_all(d, dry, account));
    const ds4rt_hparams *hp = &d->target->hp;
    /* the context window: asked for, else a dflash draft's own, else the target's */
    uint32_t file_window = 0;
    if (d->layout == DS4RT_DSPARK_LAYOUT_DFLASH) {
        ds4rt_status st = ds4rt_gguf_get_u32(d->gguf, "dflash.attention.sliding_window", &file_window);
        if (st != DS4RT_OK && st != DS4RT_ERR_NOT_FOUND) return st;
    }
    d->window = p->window ? p->window : (file_window ? file_window : hp->window);
    d->clamp = hp->clamp_exp[hp->n_layer - 1];
    d->clamp_sh = hp->clamp_shexp[hp->n_layer - 1];
    d->rope = ds4rt_rope_dense(hp);
    d->sim_fp8 = d->target->sim_fp8;
    /* enabling DSpark on this backend: every drafter op must be there */
    return ds4rt_dspark_require_ops(d, d->target->be);
}

ds4rt_status ds4rt_dspark_bind(struct ds4rt_dspark *d, const char *path, const ds4rt_dspark_params *p) {
    return dspark_bind(d, path, p, false, NULL);
}

ds4rt_status ds4rt_dspark_bind_dry(struct ds4rt_dspark *d, const char *path, const ds4rt_dspark_params *p,
                                   ds4rt_bind_account *account) {
    return dspark_bind(d, path, p, true, account);
}

void ds4rt_dspark_release(struct ds4rt_dspark *d) {
    ds4rt_arena_free(&d->arena);
    ds4rt_gguf_close(d->gguf);
    d->gguf = NULL;
}

