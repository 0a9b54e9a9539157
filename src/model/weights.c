/* weights.c - binding and checking tensors (docs/MODEL.md, "Tensors"). */
#include "weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "matmul.h" /* host dequantisation of the small vectors at bind time */
#include "qtypes.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

ds4rt_status ds4rt_arena_init(ds4rt_weight_arena *a, ds4rt_backend *be, const ds4rt_gguf *g, bool dry) {
    memset(a, 0, sizeof *a);
    a->be = be;
    a->dry = dry;
    if (dry) return DS4RT_OK; /* nothing mapped: views stay "no tensor" */
    /* the data section: from the first tensor's address back to its offset, to the file end */
    if (ds4rt_gguf_tensor_count(g) == 0) return DS4RT_OK;
    const ds4rt_gguf_tensor *t0 = ds4rt_gguf_tensor_at(g, 0);
    a->map_base = (const uint8_t *)t0->data - t0->offset;
    a->map_bytes = ds4rt_gguf_file_size(g) - ds4rt_gguf_data_offset(g);
    return ds4rt_backend_get_ops(be)->map_weights(be, a->map_base, a->map_bytes, &a->mapping);
}

void ds4rt_arena_free(ds4rt_weight_arena *a) {
    if (a->be != NULL) {
        const ds4rt_backend_ops *ops = ds4rt_backend_get_ops(a->be);
        for (size_t i = 0; i < a->n; i++) ops->release(a->be, a->bufs[i]);
        if (a->mapping != NULL) ops->release(a->be, a->mapping);
    }
    free(a->bufs);
    memset(a, 0, sizeof *a);
}

static ds4rt_status arena_keep(ds4rt_weight_arena *a, ds4rt_dbuf *buf) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        ds4rt_dbuf **p = realloc(a->bufs, cap * sizeof *p);
        if (p == NULL) {
            ds4rt_backend_get_ops(a->be)->release(a->be, buf);
            return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "weight list");
        }
        a->bufs = p;
        a->cap = cap;
    }
    a->bufs[a->n++] = buf;
    return DS4RT_OK;
}

/* A view of the tensor's bytes inside the mapped data section. */
static ds4rt_dbytes mapped(const ds4rt_binder *b, const ds4rt_gguf_tensor *t) {
    if (b->arena->dry) return (ds4rt_dbytes){NULL, 0};
    return (ds4rt_dbytes){b->arena->mapping, (uint64_t)((const uint8_t *)t->data - b->arena->map_base)};
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
static void account_held(ds4rt_binder *b, const char *name, uint64_t bytes) {
    if (b->account != NULL && b->account->on_weight != NULL) b->account->on_weight(b->account->weight_user, name, bytes);
}

static void account_view(ds4rt_binder *b, const char *name, const ds4rt_gguf_tensor *t) {
    if (b->account != NULL) b->account->mapped_bytes += t->nbytes;
    account_held(b, name, t->nbytes);
}

static const char *type_name(uint32_t type) {
    const ds4rt_type_info *t = ds4rt_type_lookup(type);
    return t ? t->name : "?";
}

/* A type no part of ds4rt computes with is the file's problem (UNSUPPORTED); a type the
 * chosen backend lacks an op for is the backend's (BACKEND, naming both). */
static ds4rt_status check_type(const ds4rt_binder *b, const char *name, const ds4rt_gguf_tensor *t, ds4rt_op op) {
    if (!ds4rt_type_is_computable(t->type))
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "tensor %s has type %s, which ds4rt does not compute with", name,
                          type_name(t->type));
    char what[200];
    snprintf(what, sizeof what, "tensor %s", name);
    return ds4rt_backend_require(b->arena->be, op, t->type, what);
}

static ds4rt_status check_computable(const char *name, const ds4rt_gguf_tensor *t) {
    if (!ds4rt_type_is_computable(t->type))
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "tensor %s has type %s, which ds4rt does not compute with", name,
                          type_name(t->type));
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

/* The backend's layout for a matrix bound for a product (backend.h, prepare_weight): the view
 * is replaced by the backend's own copy, which the account then holds instead of the view. */
static ds4rt_status prepare(ds4rt_binder *b, const ds4rt_gguf_tensor *t, uint32_t count, uint64_t stride,
                            ds4rt_dweight *w) {
    const ds4rt_backend_ops *ops = ds4rt_backend_get_ops(b->arena->be);
    if (ops->prepare_weight == NULL) return DS4RT_OK;
    ds4rt_dbuf *owned = NULL;
    uint64_t bytes = 0;
    TRY(ops->prepare_weight(b->arena->be, w, count, stride, b->arena->dry, &owned, &bytes));
    if (owned != NULL) TRY(arena_keep(b->arena, owned));
    if (bytes != 0 && b->account != NULL) {
        b->account->mapped_bytes -= t->nbytes;
        b->account->owned_bytes += bytes;
    }
    return DS4RT_OK;
}

ds4rt_status ds4rt_bind_matrix(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                               bool flatten, ds4rt_op op, ds4rt_dweight *out) {
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
    TRY(check_type(b, name, t, op));
    uint64_t row_bytes;
    TRY(ds4rt_type_row_bytes(t->type, cols, &row_bytes));
    *out = (ds4rt_dweight){.type = t->type, .data = mapped(b, t), .rows = rows, .cols = cols, .row_bytes = row_bytes};
    account_view(b, name, t);
    return op == DS4RT_OP_GET_ROWS ? DS4RT_OK : prepare(b, t, 1, 0, out);
}

ds4rt_status ds4rt_bind_matrices(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                                 uint32_t count, ds4rt_dweight3 *out) {
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != count || t->ne[3] != 1) {
        char want[80];
        snprintf(want, sizeof want, "[%lld, %lld, %u]", (long long)cols, (long long)rows, count);
        return shape_error(name, t, want);
    }
    TRY(check_type(b, name, t, DS4RT_OP_MOE));
    uint64_t row_bytes;
    TRY(ds4rt_type_row_bytes(t->type, cols, &row_bytes));
    out->first = (ds4rt_dweight){.type = t->type, .data = mapped(b, t), .rows = rows, .cols = cols, .row_bytes = row_bytes};
    out->count = count;
    out->stride = row_bytes * (uint64_t)rows;
    account_view(b, name, t);
    return prepare(b, t, count, out->stride, &out->first);
}

/* Converted to f32 on the host, then uploaded (the host copy is freed). */
static ds4rt_status to_f32(ds4rt_binder *b, const char *name, const ds4rt_gguf_tensor *t, int64_t n,
                           ds4rt_df32 *out) {
    if (b->arena->dry) { /* the copy a load would make, counted, not made */
        if (b->account != NULL) b->account->owned_bytes += (uint64_t)n * sizeof(float);
        account_held(b, name, (uint64_t)n * sizeof(float));
        *out = (ds4rt_df32){NULL, 0};
        return DS4RT_OK;
    }
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (v == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "tensor %s: %lld floats", name, (long long)n);
    ds4rt_status st = ds4rt_dequantize_row(t->type, t->data, n, v);
    if (st != DS4RT_OK) {
        free(v);
        return ds4rt_fail_context(st, "tensor %s", name);
    }
    ds4rt_dbuf *buf;
    ds4rt_backend *be = b->arena->be;
    st = ds4rt_backend_get_ops(be)->upload_weights(be, v, (uint64_t)n * sizeof(float), &buf);
    free(v);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "tensor %s", name);
    if (b->account != NULL) b->account->owned_bytes += (uint64_t)n * sizeof(float);
    account_held(b, name, (uint64_t)n * sizeof(float));
    TRY(arena_keep(b->arena, buf));
    *out = ds4rt_f32(buf);
    return DS4RT_OK;
}

ds4rt_status ds4rt_bind_vector(ds4rt_binder *b, const char *name, int64_t n, ds4rt_df32 *out) {
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    int64_t total = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    if (total != n) {
        char want[48];
        snprintf(want, sizeof want, "%lld elements", (long long)n);
        return shape_error(name, t, want);
    }
    TRY(check_computable(name, t));
    return to_f32(b, name, t, n, out);
}

ds4rt_status ds4rt_bind_table(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                              ds4rt_df32 *out) {
    const ds4rt_gguf_tensor *t;
    TRY(find(b, name, &t));
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1) {
        char want[64];
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)cols, (long long)rows);
        return shape_error(name, t, want);
    }
    TRY(check_computable(name, t));
    return to_f32(b, name, t, cols * rows, out);
}

ds4rt_status ds4rt_bind_hc(ds4rt_binder *b, const char *prefix, uint32_t out_rows, uint32_t n_scale,
                           ds4rt_hc_weights *out) {
    char name[160];
    snprintf(name, sizeof name, "%sfn.weight", prefix);
    TRY(ds4rt_bind_matrix(b, name, b->hp->hc_dim, out_rows, false, out_rows == b->hp->hc ? DS4RT_OP_HC_HEAD : DS4RT_OP_HC_PRE,
                          &out->fn));
    snprintf(name, sizeof name, "%sscale.weight", prefix);
    TRY(ds4rt_bind_vector(b, name, n_scale, &out->scale));
    snprintf(name, sizeof name, "%sbase.weight", prefix);
    return ds4rt_bind_vector(b, name, out_rows, &out->base);
}

static ds4rt_status bind_tid2eid(ds4rt_binder *b, const char *name, ds4rt_di32 *out) {
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
    if (b->arena->dry) { /* a plan reads no data: the ids are checked when the model loads */
        *out = (ds4rt_di32){NULL, 0};
        account_view(b, name, t);
        return DS4RT_OK;
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
    ds4rt_dbytes at = mapped(b, t);
    if (at.off % 4 != 0) return ds4rt_fail(DS4RT_ERR_FORMAT, "tensor %s is not 4-byte aligned", name);
    *out = (ds4rt_di32){at.buf, at.off / 4};
    account_view(b, name, t);
    return DS4RT_OK;
}

#define NAME(suffix) (snprintf(name, sizeof name, "%s" suffix, prefix), name)

static ds4rt_status bind_attention(ds4rt_binder *b, const char *prefix, ds4rt_block_kind kind,
                                   ds4rt_attn_weights *a) {
    const ds4rt_hparams *hp = b->hp;
    char name[160];
    TRY(ds4rt_bind_vector(b, NAME("attn_norm.weight"), hp->n_embd, &a->norm));
    TRY(ds4rt_bind_matrix(b, NAME("attn_q_a.weight"), hp->n_embd, hp->q_lora, false, DS4RT_OP_MATMUL, &a->q_a));
    TRY(ds4rt_bind_vector(b, NAME("attn_q_a_norm.weight"), hp->q_lora, &a->q_a_norm));
    TRY(ds4rt_bind_matrix(b, NAME("attn_q_b.weight"), hp->q_lora, hp->q_dim, false, DS4RT_OP_MATMUL, &a->q_b));
    TRY(ds4rt_bind_matrix(b, NAME("attn_kv.weight"), hp->n_embd, hp->head_dim, false, DS4RT_OP_MATMUL, &a->kv));
    TRY(ds4rt_bind_vector(b, NAME("attn_kv_a_norm.weight"), hp->head_dim, &a->kv_norm));
    TRY(ds4rt_bind_vector(b, NAME("attn_sinks.weight"), hp->n_head, &a->sinks));
    TRY(ds4rt_bind_matrix(b, NAME("attn_output_a.weight"), hp->group_dim, hp->o_low_dim, true, DS4RT_OP_GROUPED_OUT, &a->out_a));
    TRY(ds4rt_bind_matrix(b, NAME("attn_output_b.weight"), hp->o_low_dim, hp->n_embd, false, DS4RT_OP_MATMUL, &a->out_b));
    if (kind.ratio != 0) {
        uint32_t width = ds4rt_coff(kind.ratio) * hp->head_dim;
        TRY(ds4rt_bind_matrix(b, NAME("attn_compressor_kv.weight"), hp->n_embd, width, false, DS4RT_OP_MATMUL, &a->c_kv));
        TRY(ds4rt_bind_matrix(b, NAME("attn_compressor_gate.weight"), hp->n_embd, width, false, DS4RT_OP_MATMUL, &a->c_gate));
        TRY(ds4rt_bind_table(b, NAME("attn_compressor_ape.weight"), width, kind.ratio, &a->c_ape));
        TRY(ds4rt_bind_vector(b, NAME("attn_compressor_norm.weight"), hp->head_dim, &a->c_norm));
    }
    if (kind.ratio == 4) {
        uint32_t width = 2 * hp->idx_dim;
        TRY(ds4rt_bind_matrix(b, NAME("indexer.attn_q_b.weight"), hp->q_lora, hp->idx_q_dim, false, DS4RT_OP_MATMUL, &a->i_qb));
        TRY(ds4rt_bind_matrix(b, NAME("indexer.proj.weight"), hp->n_embd, hp->idx_heads, false, DS4RT_OP_MATMUL, &a->i_proj));
        TRY(ds4rt_bind_matrix(b, NAME("indexer_compressor_kv.weight"), hp->n_embd, width, false, DS4RT_OP_MATMUL, &a->ic_kv));
        TRY(ds4rt_bind_matrix(b, NAME("indexer_compressor_gate.weight"), hp->n_embd, width, false, DS4RT_OP_MATMUL, &a->ic_gate));
        TRY(ds4rt_bind_table(b, NAME("indexer_compressor_ape.weight"), width, 4, &a->ic_ape));
        TRY(ds4rt_bind_vector(b, NAME("indexer_compressor_norm.weight"), hp->idx_dim, &a->ic_norm));
    }
    return DS4RT_OK;
}

static ds4rt_status bind_moe(ds4rt_binder *b, const char *prefix, ds4rt_block_kind kind, ds4rt_moe_weights *m) {
    const ds4rt_hparams *hp = b->hp;
    char name[160];
    TRY(ds4rt_bind_vector(b, NAME("ffn_norm.weight"), hp->n_embd, &m->norm));
    TRY(ds4rt_bind_matrix(b, NAME("ffn_gate_inp.weight"), hp->n_embd, hp->n_expert, false, DS4RT_OP_MOE, &m->gate_inp));
    if (kind.hash) {
        TRY(bind_tid2eid(b, NAME("ffn_gate_tid2eid.weight"), &m->tid2eid));
    } else {
        TRY(ds4rt_bind_vector(b, NAME("exp_probs_b.bias"), hp->n_expert, &m->bias));
    }
    TRY(ds4rt_bind_matrices(b, NAME("ffn_gate_exps.weight"), hp->n_embd, hp->expert_ff, hp->n_expert, &m->gate_exps));
    TRY(ds4rt_bind_matrices(b, NAME("ffn_up_exps.weight"), hp->n_embd, hp->expert_ff, hp->n_expert, &m->up_exps));
    TRY(ds4rt_bind_matrices(b, NAME("ffn_down_exps.weight"), hp->expert_ff, hp->n_embd, hp->n_expert, &m->down_exps));
    if (hp->n_shared > 0) {
        TRY(ds4rt_bind_matrix(b, NAME("ffn_gate_shexp.weight"), hp->n_embd, hp->shared_ff, false, DS4RT_OP_MOE, &m->gate_sh));
        TRY(ds4rt_bind_matrix(b, NAME("ffn_up_shexp.weight"), hp->n_embd, hp->shared_ff, false, DS4RT_OP_MOE, &m->up_sh));
        TRY(ds4rt_bind_matrix(b, NAME("ffn_down_shexp.weight"), hp->shared_ff, hp->n_embd, false, DS4RT_OP_MOE, &m->down_sh));
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
