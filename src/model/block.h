/*
 * block.h - ONE DeepSeek V4 block, composed against the backend table (docs/MODEL.md, "The
 * block"): hyper-connection pre, the attention sublayer, HC post, HC pre, the MoE sublayer, HC
 * post. Trunk layers and DSpark drafter stages both run through ds4rt_block_forward; they
 * differ only in where the attention sublayer's keys come from (ds4rt_block_keys).
 */
#ifndef DS4RT_BLOCK_H
#define DS4RT_BLOCK_H

#include <stdbool.h>

#include "activations.h"
#include "backend.h"
#include "hparams.h"
#include "state.h"
#include "weights.h"

/* Where a block's attention keys come from. */
typedef struct ds4rt_block_keys {
    const ds4rt_rope *rope;     /* the block's RoPE */
    bool sim_fp8, sim_fp4;      /* official numerics */
    /* trunk layer: its own rows go into `layer`'s raw ring (causal window), compressor and
     * indexer; keys = window + compressed rows (all, or the indexer's choice) */
    ds4rt_layer_state *layer;   /* NULL for a drafter stage */
    uint32_t raw_cap;
    uint32_t ratio;
    const ds4rt_comp_desc *attn_comp, *index_comp;
    /* drafter stage: keys = the `window` context rows before the block in `ring` (capacity
     * ring_cap), then every row of the block (non-causal) */
    ds4rt_df32 ring;
    uint32_t ring_cap;
    uint32_t window;
} ds4rt_block_keys;

/* Called with a tensor of the pass after each stage (docs: ds4rt_trace_stage), or NULL. */
typedef ds4rt_status (*ds4rt_block_trace)(void *user, uint32_t stage, ds4rt_df32 rows, int64_t n, int64_t width);

typedef struct ds4rt_block_run {
    ds4rt_bctx *ctx;
    const ds4rt_hparams *hp;
    ds4rt_acts *a;              /* input and output in a->X (a->X2 is clobbered) */
    int64_t n;
    ds4rt_block_trace trace;
    void *trace_user;
} ds4rt_block_run;

ds4rt_status ds4rt_block_forward(const ds4rt_block_run *r, const ds4rt_block_weights *w, const ds4rt_block_keys *k,
                                 float clamp, float clamp_sh);

/* The attention sublayer's KV row: kv[n][d_h] = RMSNorm(W_kv x, kv_norm), RoPE at pos0 + i,
 * FP8 round trip of the non-RoPE dims when `sim_fp8` (DSpark's context rows use it too). */
ds4rt_status ds4rt_block_kv_rows(ds4rt_bctx *ctx, const ds4rt_hparams *hp, ds4rt_dpass in, int64_t n,
                                 const ds4rt_attn_weights *w, const ds4rt_rope *rope, bool sim_fp8, ds4rt_df32 x,
                                 ds4rt_df32 kv);

#endif /* DS4RT_BLOCK_H */
