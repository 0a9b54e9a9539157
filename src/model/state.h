/*
 * state.h - the per-session state of the target model (docs/MODEL.md, "Per-session state") and
 * its speculative rollback. The tensors live in backend memory (category state); the counters
 * are the host's.
 *
 * Per layer: a raw KV ring (row of position p at p % raw_cap), compressed KV rows and the
 * compressor frontier (ratio != 0), indexer rows and frontier (ratio 4). Raw and compressed
 * rows are append-only and their counts follow from the position (floor(n_pos / R)), so
 * rolling back only restores counters - provided the ring holds at least window + max_batch
 * rows, so a batch never overwrites a row still inside the window. The frontiers are mutated
 * in place: a batch snapshots them first and journals each token's compressor inputs, and
 * rollback to any prefix k restores the snapshot and replays the journal's first k pushes (no
 * matmuls), which reproduces exactly the state a k-token batch would have left.
 */
#ifndef DS4RT_STATE_H
#define DS4RT_STATE_H

#include <stdint.h>

#include "backend.h"
#include "hparams.h"

typedef struct ds4rt_layer_state {
    ds4rt_df32 raw;           /* [raw_cap][d_h] */
    ds4rt_comp_state comp;    /* ratio != 0: rows of width d_h */
    ds4rt_comp_state icomp;   /* ratio == 4: indexer rows of width d_i */
} ds4rt_layer_state;

typedef struct ds4rt_kv_state {
    uint32_t n_layer;
    const uint32_t *ratio;    /* [n_layer] (the model's) */
    int64_t n_ctx;            /* maximum positions */
    uint32_t raw_cap;         /* window + max_batch */
    uint32_t max_batch;
    int64_t n_pos;            /* positions processed (committed + current batch) */
    int64_t batch_start;      /* n_pos before the last batch; rollback may not go below */
    int64_t batch_len;        /* tokens in the last batch */
    ds4rt_layer_state *layers;
    ds4rt_backend *be;
    ds4rt_dbuf *buf;          /* every layer's tensors */
    uint64_t bytes;           /* memory held */
} ds4rt_kv_state;

ds4rt_status ds4rt_kv_state_create(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch,
                                   ds4rt_kv_state *st);
void ds4rt_kv_state_free(ds4rt_kv_state *st);
/* The bytes ds4rt_kv_state_create allocates for these sizes (the same layout). */
uint64_t ds4rt_kv_state_bytes(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch);

/* What those bytes hold (the same layout, in bytes; the parts add up to the total): */
typedef struct ds4rt_kv_state_parts {
    uint64_t window;            /* raw KV rings: window + max_batch rows per layer */
    uint64_t frontiers;         /* attention compressors' frontiers, snapshots and journals */
    uint64_t compressed;        /* compressed KV rows (n_ctx / ratio + 2 per compressed layer) */
    uint64_t indexer_frontiers; /* the same for the indexer's compressors (ratio-4 layers) */
    uint64_t indexer;           /* indexer rows */
} ds4rt_kv_state_parts;

/* ds4rt_kv_state_bytes, and its split into *out. */
uint64_t ds4rt_kv_state_split(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch, ds4rt_kv_state_parts *out);
/* Back to an empty context. */
ds4rt_status ds4rt_kv_state_reset(ds4rt_bctx *ctx, ds4rt_kv_state *st);

/* Called before a batch of n tokens: snapshot frontiers and counters. */
ds4rt_status ds4rt_kv_state_begin_batch(ds4rt_bctx *ctx, ds4rt_kv_state *st, int64_t n);

#endif /* DS4RT_STATE_H */
