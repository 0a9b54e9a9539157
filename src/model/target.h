/*
 * target.h - the DeepSeek V4 target model: weights bound on a backend plus the forward pass over
 * a batch of tokens (layer-major, composed against the backend table), rollback, capture of
 * DSpark hidden rows, and a trace hook for per-sublayer verification.
 */
#ifndef DS4RT_TARGET_H
#define DS4RT_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include "activations.h"
#include "backend.h"
#include "ds4rt.h"
#include "hparams.h"
#include "state.h"
#include "weights.h"

typedef struct ds4rt_target {
    ds4rt_hparams hp;
    ds4rt_backend *be;
    ds4rt_dweight tok_embd;     /* [V][D] */
    ds4rt_hc_weights hc_head;   /* fn [N][N*D], scale [1], base [N] */
    ds4rt_df32 out_norm;        /* [D] */
    ds4rt_dweight output;       /* [V][D] */
    ds4rt_block_weights *layers;
    ds4rt_block_kind *kinds;
    ds4rt_comp_desc *attn_comp, *index_comp; /* [n_layer]; ratio 0 where the layer has none */
    ds4rt_rope rope_dense, rope_comp;
    bool sim_fp8;               /* official numerics: FP8 round trip of KV rows */
    bool sim_fp4;               /* official numerics: FP4 round trip of indexer q/k */
    ds4rt_weight_arena arena;
} ds4rt_target;

/* RoPE of dense layers (rope.freq_base, no YaRN; DSpark stages use it too) and of compressed
 * layers (compress_rope_freq_base with YaRN). */
ds4rt_rope ds4rt_rope_dense(const ds4rt_hparams *hp);
ds4rt_rope ds4rt_rope_compressed(const ds4rt_hparams *hp);

/* Binds every target tensor on `be`, checking every op the pass needs against the backend;
 * `official` selects the quantisation-aware simulations. `account` (or NULL) receives what was
 * bound and is told after each tensor. */
ds4rt_status ds4rt_target_bind(const ds4rt_gguf *g, bool official, ds4rt_backend *be, ds4rt_bind_account *account,
                               ds4rt_target *t);
/* The same binding for a memory plan (ds4rt_arena_init's `dry`): every check but the data's,
 * every byte accounted, nothing mapped or read; g may be opened with ds4rt_gguf_open_header.
 * The target only describes the model (shapes, types, hparams): it must never run a pass. */
ds4rt_status ds4rt_target_bind_dry(const ds4rt_gguf *g, bool official, ds4rt_backend *be, ds4rt_bind_account *account,
                                   ds4rt_target *t);
void ds4rt_target_free(ds4rt_target *t);

/* Where a trace event comes from (see ds4rt.h: ds4rt_trace_stage). */
typedef void (*ds4rt_trace_cb)(void *user, uint32_t layer, uint32_t stage, int64_t pos,
                               const float *data, int64_t n);

/* Rows of selected layers' output HC state, reduced to the mean of the N streams (DSpark's
 * capture, docs/DSPARK.md "The drafter"): row t of slot s at rows + s * slot_stride +
 * t * row_stride, in backend memory. */
typedef struct ds4rt_capture {
    const uint32_t *layers;     /* ascending layer ids */
    uint32_t n_layers;
    ds4rt_df32 rows;
    uint64_t slot_stride, row_stride;
} ds4rt_capture;

/* A session's working set for the pass: the backend context, the activations and the
 * target's own tensors. */
typedef struct ds4rt_pass_bufs {
    ds4rt_bctx *ctx;
    ds4rt_acts acts;            /* cap = max_batch */
    ds4rt_dbuf *head_buf;
    ds4rt_df32 hy;              /* [max_batch][D] */
    ds4rt_df32 logits;          /* [max_batch][V] */
    ds4rt_di32 bad;             /* [1] non-finite logits of the pass */
} ds4rt_pass_bufs;

ds4rt_status ds4rt_pass_bufs_create(const ds4rt_target *t, ds4rt_bctx *ctx, int64_t max_batch, int64_t n_ctx,
                                    ds4rt_pass_bufs *pb);
void ds4rt_pass_bufs_free(ds4rt_pass_bufs *pb);

typedef struct ds4rt_forward_args {
    const int32_t *tokens;      /* n tokens at positions st->n_pos ... */
    int64_t n;
    float *logits;              /* host [n - logits_from][V] or NULL */
    int64_t logits_from;        /* first batch row whose logits are wanted */
    ds4rt_capture *capture;     /* or NULL */
    ds4rt_capture *capture2;    /* a second, independent capture (the session's drafter), or NULL */
    ds4rt_trace_cb trace;       /* or NULL */
    void *trace_user;
    float *trace_buf;           /* host rows for the trace: [max_batch][N*D] */
    /* out: backend time in ms (device events on a GPU, backend.h "stage timers") of the
     * frontier snapshot, the input upload, the layers, the output head and the logits read-back */
    double ms_snapshot, ms_upload, ms_layers, ms_head, ms_read;
    /* out: the backend recorded the layers as a graph on this pass (the first pass of its
     * shape in the context): its time includes the recording, so it is not a cost sample */
    bool recorded;
} ds4rt_forward_args;

/* Runs n <= st->max_batch tokens through the model, appending them to the state. Each
 * token's results are bitwise those of feeding the tokens one at a time. */
ds4rt_status ds4rt_target_forward(const ds4rt_target *t, ds4rt_pass_bufs *pb, ds4rt_kv_state *st,
                                  ds4rt_forward_args *a);

/* Keeps only the first `keep` tokens of the last batch (0 <= keep <= batch length): the state
 * becomes exactly what processing those tokens alone would have left. */
ds4rt_status ds4rt_target_rollback(const ds4rt_target *t, ds4rt_bctx *ctx, ds4rt_kv_state *st, int64_t keep);

#endif /* DS4RT_TARGET_H */
