/* weights.c - binding and checking tensors (dsv4-architecture.md §3). */
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "qtypes.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

void ds4rt_arena_free(ds4rt_weight_arena *a) {
    for (size_t i = 0; i < a->n; i++) free(a->ptrs[i]);
    free(a->ptrs);
    memset(a, 0, sizeof *a);
}

static void *arena_alloc(ds4rt_weight_arena *a, size_t bytes) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **p = realloc(a->ptrs, cap * sizeof *p);
        if (p == NULL) return NULL;
        a->ptrs = p;
        a->cap = cap;
    }
    void *m = malloc(bytes ? bytes : 1);
    if (m != NULL) a->ptrs[a->n++] = m;
    return m;
}

static ds4rt_status find(ds4rt_binder *b, const char *name, const ds4rt_gguf_tensor **out) {
    *out = ds4rt_gguf_find_tensor(b->g, name);
    if (*out == NULL) return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "tensor %s is missing", name);
    if (b->account != NULL) {
        b->account->seen_bytes += (*out)->nbytes;
        if (b->account->on_tensor != NULL) b->account->on_tensor(b->account->user, b->account->seen_bytes);
    }
    return DS4RT_OK;
}

/* A tensor bound as a view: the forward pass reads it from the mapping. */
static void account_view(ds4rt_binder *b, const ds4rt_gguf_tensor *t) {
    if (b->account != NULL) b->account->mapped_bytes += t->nbytes;
}

static const char *type_name(uint32_t type) {
    const ds4rt_type_info *t = ds4rt_type_lookup(type);
    return t ? t->name : "?";
}

static ds4rt_status check_type(const char *name, const ds4rt_gguf_tensor *t) {
    if (!ds4rt_type_is_computable(t->type))
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "tensor %s has type %s, which the CPU backend does not compute with",
                          name, type_name(t->type));
    return DS4RT_OK;
}

static void shape_str(const ds4rt_gguf_tensor *t, char *buf, size_t n) {
    int k = snprintf(buf, n, "[");
    for (uint32_t d = 0; d < t->n_dims && k > 0 && (size_t)k < n; d++)
        k += snprintf(buf + k, n - (size_t)k, d ? ", %lld" : "%lld", (long long)t->ne[d]);
    if (k > 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, "]");
}

static ds4rt_status shape_error(const char *name, const ds4rt_gguf_tensor *t, const char *want) {
    char got[96];
    shape_str(t, got, sizeof got);
    return ds4rt_fail(DS4RT_ERR_FORMAT, "tensor %s has shape %s, expected %s", name, got, want);
}

ds4rt_status ds4rt_bind_matrix(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                               bool flatten, ds4rt_weight *out) {
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    int64_t trailing = 1;
    for (uint32_t d = 1; d < DS4RT_MAX_DIMS; d++) trailing *= t->ne[d];
    bool ok = t->ne[0] == cols &&
              (flatten ? trailing == rows : (t->ne[1] == rows && t->ne[2] == 1 && t->ne[3] == 1));
    if (!ok) {
        char want[64];
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)cols, (long long)rows);
        return shape_error(name, t, want);
    }
    TRY(check_type(name, t));
    uint64_t row_bytes;
    TRY(ds4rt_type_row_bytes(t->type, cols, &row_bytes));
    *out = (ds4rt_weight){.type = t->type, .data = t->data, .rows = rows, .cols = cols, .row_bytes = row_bytes};
    account_view(b, t);
    return DS4RT_OK;
}

ds4rt_status ds4rt_bind_matrices(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                                 uint32_t count, ds4rt_weight3 *out) {
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != count || t->ne[3] != 1) {
        char want[80];
        snprintf(want, sizeof want, "[%lld, %lld, %u]", (long long)cols, (long long)rows, count);
        return shape_error(name, t, want);
    }
    TRY(check_type(name, t));
    uint64_t row_bytes;
    TRY(ds4rt_type_row_bytes(t->type, cols, &row_bytes));
    out->first = (ds4rt_weight){.type = t->type, .data = t->data, .rows = rows, .cols = cols, .row_bytes = row_bytes};
    out->count = count;
    out->stride = row_bytes * (uint64_t)rows;
    account_view(b, t);
    return DS4RT_OK;
}

static ds4rt_status to_f32(ds4rt_binder *b, const char *name, const ds4rt_gguf_tensor *t, int64_t n,
                           float **out) {
    float *v = arena_alloc(b->arena, (size_t)n * sizeof(float));
    if (v == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "tensor %s: %lld floats", name, (long long)n);
    ds4rt_status st = ds4rt_dequantize_row(t->type, t->data, n, v);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "tensor %s", name);
    if (b->account != NULL) b->account->owned_bytes += (uint64_t)n * sizeof(float);
    *out = v;
    return DS4RT_OK;
}

ds4rt_status ds4rt_bind_vector(ds4rt_binder *b, const char *name, int64_t n, float **out) {
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    int64_t total = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (total != n) {
        char want[48];
        snprintf(want, sizeof want, "%lld elements", (long long)n);
        return shape_error(name, t, want);
    }
    TRY(check_type(name, t));
    return to_f32(b, name, t, n, out);
}

ds4rt_status ds4rt_bind_table(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                              float **out) {
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1) {
        char want[64];
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)cols, (long long)rows);
        return shape_error(name, t, want);
    }
    TRY(check_type(name, t));
    return to_f32(b, name, t, cols * rows, out);
}

ds4rt_status ds4rt_bind_hc(ds4rt_binder *b, const char *prefix, uint32_t out_rows, uint32_t n_scale,
                           ds4rt_hc_weights *out) {
    char name[160];
    snprintf(name, sizeof name, "%sfn.weight", prefix);
    TRY(ds4rt_bind_matrix(b, name, b->hp->hc_dim, out_rows, false, &out->fn));
    snprintf(name, sizeof name, "%sscale.weight", prefix);
    TRY(ds4rt_bind_vector(b, name, n_scale, &out->scale));
    snprintf(name, sizeof name, "%sbase.weight", prefix);
    return ds4rt_bind_vector(b, name, out_rows, &out->base);
}

static ds4rt_status bind_tid2eid(ds4rt_binder *b, const char *name, const int32_t **out) {
    const ds4rt_hparams *hp = b->hp;
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    if (t->type != DS4RT_TYPE_I32)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "tensor %s has type %s, expected I32 expert ids", name,
                          type_name(t->type));
    if (t->ne[0] != hp->n_expert_used || t->ne[1] != hp->n_vocab || t->ne[2] != 1 || t->ne[3] != 1) {
        char want[64];
        snprintf(want, sizeof want, "[%u, %u]", hp->n_expert_used, hp->n_vocab);
        return shape_error(name, t, want);
    }
    const uint8_t *p = t->data;
    uint64_t n = (uint64_t)hp->n_expert_used * hp->n_vocab;
    for (uint64_t i = 0; i < n; i++) {
        int32_t e;
        memcpy(&e, p + 4 * i, 4);
        if (e < 0 || (uint32_t)e >= hp->n_expert)
            return ds4rt_fail(DS4RT_ERR_FORMAT, "tensor %s: token %llu routes to expert %d, outside [0, %u)", name,
                              (unsigned long long)(i / hp->n_expert_used), e, hp->n_expert);
    }
    if (((uintptr_t)t->data & 3) != 0)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "tensor %s is not 4-byte aligned", name);
    *out = (const int32_t *)t->data;
    account_view(b, t);
    return DS4RT_OK;
}

#define NAME(suffix) (snprintf(name, sizeof name, "%s" suffix, prefix), name)

static ds4rt_status bind_attention(ds4rt_binder *b, const char *prefix, ds4rt_block_kind kind,
                                   ds4rt_attn_weights *a) {
    const ds4rt_hparams *hp = b->hp;
    char name[160];
    TRY(ds4rt_bind_vector(b, NAME("attn_norm.weight"), hp->n_embd, &a->norm));
    TRY(ds4rt_bind_matrix(b, NAME("attn_q_a.weight"), hp->n_embd, hp->q_lora, false, &a->q_a));
    TRY(ds4rt_bind_vector(b, NAME("attn_q_a_norm.weight"), hp->q_lora, &a->q_a_norm));
    TRY(ds4rt_bind_matrix(b, NAME("attn_q_b.weight"), hp->q_lora, hp->q_dim, false, &a->q_b));
    TRY(ds4rt_bind_matrix(b, NAME("attn_kv.weight"), hp->n_embd, hp->head_dim, false, &a->kv));
    TRY(ds4rt_bind_vector(b, NAME("attn_kv_a_norm.weight"), hp->head_dim, &a->kv_norm));
    TRY(ds4rt_bind_vector(b, NAME("attn_sinks.weight"), hp->n_head, &a->sinks));
    TRY(ds4rt_bind_matrix(b, NAME("attn_output_a.weight"), hp->group_dim, hp->o_low_dim, true, &a->out_a));
    TRY(ds4rt_bind_matrix(b, NAME("attn_output_b.weight"), hp->o_low_dim, hp->n_embd, false, &a->out_b));
    if (kind.ratio != 0) {
        uint32_t width = ds4rt_coff(kind.ratio) * hp->head_dim;
        TRY(ds4rt_bind_matrix(b, NAME("attn_compressor_kv.weight"), hp->n_embd, width, false, &a->c_kv));
        TRY(ds4rt_bind_matrix(b, NAME("attn_compressor_gate.weight"), hp->n_embd, width, false, &a->c_gate));
        TRY(ds4rt_bind_table(b, NAME("attn_compressor_ape.weight"), width, kind.ratio, &a->c_ape));
        TRY(ds4rt_bind_vector(b, NAME("attn_compressor_norm.weight"), hp->head_dim, &a->c_norm));
    }
    if (kind.ratio == 4) {
        uint32_t width = 2 * hp->idx_dim;
        TRY(ds4rt_bind_matrix(b, NAME("indexer.attn_q_b.weight"), hp->q_lora, hp->idx_q_dim, false, &a->i_qb));
        TRY(ds4rt_bind_matrix(b, NAME("indexer.proj.weight"), hp->n_embd, hp->idx_heads, false, &a->i_proj));
        TRY(ds4rt_bind_matrix(b, NAME("indexer_compressor_kv.weight"), hp->n_embd, width, false, &a->ic_kv));
        TRY(ds4rt_bind_matrix(b, NAME("indexer_compressor_gate.weight"), hp->n_embd, width, false, &a->ic_gate));
        TRY(ds4rt_bind_table(b, NAME("indexer_compressor_ape.weight"), width, 4, &a->ic_ape));
        TRY(ds4rt_bind_vector(b, NAME("indexer_compressor_norm.weight"), hp->idx_dim, &a->ic_norm));
    }
    return DS4RT_OK;
}

static ds4rt_status bind_moe(ds4rt_binder *b, const char *prefix, ds4rt_block_kind kind, ds4rt_moe_weights *m) {
    const ds4rt_hparams *hp = b->hp;
    char name[160];
    TRY(ds4rt_bind_vector(b, NAME("ffn_norm.weight"), hp->n_embd, &m->norm));
    TRY(ds4rt_bind_matrix(b, NAME("ffn_gate_inp.weight"), hp->n_embd, hp->n_expert, false, &m->gate_inp));
    if (kind.hash) {
        TRY(bind_tid2eid(b, NAME("ffn_gate_tid2eid.weight"), &m->tid2eid));
        m->bias = NULL;
    } else {
        TRY(ds4rt_bind_vector(b, NAME("exp_probs_b.bias"), hp->n_expert, &m->bias));
        m->tid2eid = NULL;
    }
    TRY(ds4rt_bind_matrices(b, NAME("ffn_gate_exps.weight"), hp->n_embd, hp->expert_ff, hp->n_expert, &m->gate_exps));
    TRY(ds4rt_bind_matrices(b, NAME("ffn_up_exps.weight"), hp->n_embd, hp->expert_ff, hp->n_expert, &m->up_exps));
    TRY(ds4rt_bind_matrices(b, NAME("ffn_down_exps.weight"), hp->expert_ff, hp->n_embd, hp->n_expert, &m->down_exps));
    if (hp->n_shared > 0) {
        TRY(ds4rt_bind_matrix(b, NAME("ffn_gate_shexp.weight"), hp->n_embd, hp->shared_ff, false, &m->gate_sh));
        TRY(ds4rt_bind_matrix(b, NAME("ffn_up_shexp.weight"), hp->n_embd, hp->shared_ff, false, &m->up_sh));
        TRY(ds4rt_bind_matrix(b, NAME("ffn_down_shexp.weight"), hp->shared_ff, hp->n_embd, false, &m->down_sh));
    }
    return DS4RT_OK;
}

ds4rt_status ds4rt_bind_block(ds4rt_binder *b, const char *prefix, ds4rt_block_kind kind,
                              ds4rt_block_weights *out) {
    const ds4rt_hparams *hp = b->hp;
    char name[160];
    memset(out, 0, sizeof *out);
    TRY(ds4rt_bind_hc(b, NAME("hc_attn_"), hp->hc_mix, 3, &out->hc_attn));
    TRY(ds4rt_bind_hc(b, NAME("hc_ffn_"), hp->hc_mix, 3, &out->hc_ffn));
    TRY(bind_attention(b, prefix, kind, &out->attn));
    return bind_moe(b, prefix, kind, &out->moe);
}
