/*
 * target.h - the DeepSeek V4 target model on the CPU backend: bound weights plus the forward
 * pass over a batch of tokens (layer-major), rollback, capture of DSpark hidden rows, and a
 * trace hook for per-sublayer verification.
 */
#ifndef DS4RT_TARGET_H
#define DS4RT_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include "ds4rt.h"
#include "hparams.h"
#include "ops.h"
#include "scratch.h"
#include "state.h"
#include "threadpool.h"
#include "weights.h"

typedef struct ds4rt_target {
    ds4rt_hparams hp;
    ds4rt_weight tok_embd;      /* [V][D] */
    ds4rt_hc_weights hc_head;   /* fn [N][N*D], scale [1], base [N] */
    float *out_norm;            /* [D] */
    ds4rt_weight output;        /* [V][D] */
    ds4rt_block_weights *layers;
    ds4rt_block_kind *kinds;
    ds4rt_rope rope_dense, rope_comp;
    bool sim_fp8;               /* official numerics: FP8 round trip of KV rows */
    bool sim_fp4;               /* official numerics: FP4 round trip of indexer q/k */
    ds4rt_weight_arena arena;
} ds4rt_target;

/* Binds every target tensor; `official` selects the quantisation-aware simulations. `account`
 * (or NULL) receives what was bound and is told after each tensor. */
ds4rt_status ds4rt_target_bind(const ds4rt_gguf *g, bool official, ds4rt_bind_account *account,
                               ds4rt_target *t);
void ds4rt_target_free(ds4rt_target *t);

/* Where a trace event comes from (see ds4rt.h: ds4rt_trace_stage). */
typedef void (*ds4rt_trace_cb)(void *user, uint32_t layer, uint32_t stage, int64_t pos,
                               const float *data, int64_t n);

/* Rows of selected layers' output HC state, reduced to the mean of the N streams (DSpark's
 * capture, dspark.md §2.3): out[slot][t][D] for the batch's tokens. */
typedef struct ds4rt_capture {
    const uint32_t *layers;     /* ascending layer ids */
    uint32_t n_layers;
    float *rows;                /* [n_layers][max_batch][D] */
    int64_t stride;             /* floats between slots (max_batch * D) */
} ds4rt_capture;

typedef struct ds4rt_forward_args {
    const int32_t *tokens;      /* n tokens at positions st->n_pos ... */
    int64_t n;
    float *logits;              /* [n - logits_from][V] or NULL */
    int64_t logits_from;        /* first batch row whose logits are wanted */
    ds4rt_capture *capture;     /* or NULL */
    ds4rt_capture *capture2;    /* a second, independent capture (the session's drafter), or NULL */
    ds4rt_trace_cb trace;       /* or NULL */
    void *trace_user;
    /* out: milliseconds spent in the frontier snapshot, the layers and the output head */
    double ms_snapshot, ms_layers, ms_head;
} ds4rt_forward_args;

/* Runs n <= st->max_batch tokens through the model, appending them to the state. Each
 * token's results are bitwise those of feeding the tokens one at a time. */
ds4rt_status ds4rt_target_forward(const ds4rt_target *t, ds4rt_pool *pool, ds4rt_kv_state *st,
                                  ds4rt_scratch *s, ds4rt_forward_args *a);

/* Keeps only the first `keep` tokens of the last batch (0 <= keep <= batch length): the state
 * becomes exactly what processing those tokens alone would have left. */
ds4rt_status ds4rt_target_rollback(const ds4rt_target *t, ds4rt_kv_state *st, ds4rt_scratch *s,
                                   int64_t keep);

#endif /* DS4RT_TARGET_H */
