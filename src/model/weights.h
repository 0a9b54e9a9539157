/*
 * weights.h - binding GGUF tensors to the forward pass's weight slots, with shape and type
 * checks that name the tensor at fault (dsv4-architecture.md §3). Matrices stay in the mapped
 * file (views); small vectors are converted once to owned f32 arrays.
 *
 * The same block binder serves trunk layers ("blk.N.") and DSpark drafter stages ("mtp.N."),
 * which are DeepSeek V4 blocks without compressor, indexer or hash routing.
 */
#ifndef DS4RT_WEIGHTS_H
#define DS4RT_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "ds4rt.h"
#include "hparams.h"
#include "matmul.h"

/* A stack of equally shaped matrices (routed experts): matrix e starts at data + e*stride. */
typedef struct ds4rt_weight3 {
    ds4rt_weight first; /* matrix 0; rows/cols/row_bytes describe every matrix */
    uint32_t count;
    uint64_t stride;
} ds4rt_weight3;

static inline ds4rt_weight ds4rt_weight3_at(const ds4rt_weight3 *w, uint32_t e) {
    ds4rt_weight m = w->first;
    m.data = (const uint8_t *)w->first.data + (uint64_t)e * w->stride;
    return m;
}

/* Hyper-connection mixing: fn is [out rows][N*D]; scale has 3 (or 1 for a head), base `out`. */
typedef struct ds4rt_hc_weights {
    ds4rt_weight fn;
    float *scale;
    float *base;
} ds4rt_hc_weights;

typedef struct ds4rt_attn_weights {
    float *norm;                  /* attn_norm [D] */
    ds4rt_weight q_a, q_b, kv;    /* [Rq][D], [H*d_h][Rq], [d_h][D] */
    float *q_a_norm, *kv_norm;    /* [Rq], [d_h] */
    float *sinks;                 /* [H] */
    ds4rt_weight out_a, out_b;    /* [G*Ro][group_dim], [D][G*Ro] */
    /* compressor (ratio != 0) */
    ds4rt_weight c_kv, c_gate;    /* [coff*d_h][D] */
    float *c_ape;                 /* [ratio][coff*d_h] */
    float *c_norm;                /* [d_h] */
    /* indexer (ratio == 4) */
    ds4rt_weight i_qb, i_proj;    /* [Hi*d_i][Rq], [Hi][D] */
    ds4rt_weight ic_kv, ic_gate;  /* [2*d_i][D] */
    float *ic_ape;                /* [4][2*d_i] */
    float *ic_norm;               /* [d_i] */
} ds4rt_attn_weights;

typedef struct ds4rt_moe_weights {
    float *norm;                  /* ffn_norm [D] */
    ds4rt_weight gate_inp;        /* [E][D] router */
    float *bias;                  /* [E] selection bias; NULL on hash layers */
    const int32_t *tid2eid;       /* [V][k] on hash layers (validated < E), else NULL */
    ds4rt_weight3 gate_exps, up_exps, down_exps; /* [F][D] x E, [F][D] x E, [D][F] x E */
    ds4rt_weight gate_sh, up_sh, down_sh;         /* [F*ns][D], [F*ns][D], [D][F*ns] */
} ds4rt_moe_weights;

typedef struct ds4rt_block_weights {
    ds4rt_hc_weights hc_attn, hc_ffn;
    ds4rt_attn_weights attn;
    ds4rt_moe_weights moe;
} ds4rt_block_weights;

/* What a block holds besides the common parts. */
typedef struct ds4rt_block_kind {
    uint32_t ratio;  /* 0: window only; 4: overlapping compressor + indexer; else plain pooling */
    bool hash;       /* routed by token id through tid2eid */
} ds4rt_block_kind;

/* Owned f32 vectors made while binding; freed together. */
typedef struct ds4rt_weight_arena {
    void **ptrs;
    size_t n, cap;
} ds4rt_weight_arena;

void ds4rt_arena_free(ds4rt_weight_arena *a);

/* What a load bound (the model's memory figures) and a per-tensor hook (its progress). */
typedef struct ds4rt_bind_account {
    uint64_t mapped_bytes;   /* tensors the forward pass reads in place from the mapping */
    uint64_t owned_bytes;    /* f32 copies made in the arena */
    uint64_t seen_bytes;     /* file bytes of every tensor bound so far */
    void (*on_tensor)(void *user, uint64_t seen_bytes); /* after each tensor; may be NULL */
    void *user;
} ds4rt_bind_account;

/* Binding context: the file, the shapes, the arena for owned vectors, the account (or NULL). */
typedef struct ds4rt_binder {
    const ds4rt_gguf *g;
    const ds4rt_hparams *hp;
    ds4rt_weight_arena *arena;
    ds4rt_bind_account *account;
} ds4rt_binder;

/* Matrix `name` with ne0 == cols and ne1 == rows (trailing dims of 1 allowed; with
 * `flatten`, ne1*ne2*... == rows). Type must be one the CPU backend computes with. */
ds4rt_status ds4rt_bind_matrix(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                               bool flatten, ds4rt_weight *out);
/* Stack of `count` matrices: ne = [cols, rows, count]. */
ds4rt_status ds4rt_bind_matrices(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                                 uint32_t count, ds4rt_weight3 *out);
/* Vector (any shape) of exactly n elements of any computable type, converted to owned f32. */
ds4rt_status ds4rt_bind_vector(ds4rt_binder *b, const char *name, int64_t n, float **out);
/* Owned f32 copy of a 2-D tensor [rows][cols] of any computable type. */
ds4rt_status ds4rt_bind_table(ds4rt_binder *b, const char *name, int64_t cols, int64_t rows,
                              float **out);

/* Binds one DeepSeek V4 block whose tensor names start with `prefix` ("blk.3." / "mtp.0.").
 * `clamp` is unused here; routing tables are validated against E. */
ds4rt_status ds4rt_bind_block(ds4rt_binder *b, const char *prefix, ds4rt_block_kind kind,
                              ds4rt_block_weights *out);

/* HC mixing weights "<prefix>fn.weight", "<prefix>scale.weight", "<prefix>base.weight" with
 * `out_rows` outputs and `n_scale` scales. */
ds4rt_status ds4rt_bind_hc(ds4rt_binder *b, const char *prefix, uint32_t out_rows, uint32_t n_scale,
                           ds4rt_hc_weights *out);

#endif /* DS4RT_WEIGHTS_H */
