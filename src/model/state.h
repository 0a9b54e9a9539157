/*
 * state.h - the per-session state of the target model (dsv4-architecture.md §11) and its
 * speculative rollback.
 *
 * Per layer: a raw KV ring (row of position p at p % raw_cap), compressed KV rows and the
 * compressor frontier (ratio != 0), indexer rows and frontier (ratio 4). Raw and compressed
 * rows are append-only, so rolling back only restores counters - provided the ring holds at
 * least window + max_batch rows, so a batch never overwrites a row still inside the window.
 * The frontiers are mutated in place: a batch snapshots them first and journals each token's
 * compressor inputs, and rollback to any prefix k restores the snapshot and replays the
 * journal's first k pushes (no matmuls), which reproduces exactly the state a k-token batch
 * would have left.
 */
#ifndef DS4RT_STATE_H
#define DS4RT_STATE_H

#include <stdint.h>

#include "ds4rt.h"
#include "hparams.h"

typedef struct ds4rt_frontier {
    float *kv;        /* [coff*R][coff*d] */
    float *score;     /* [coff*R][coff*d]; -inf where empty */
    uint32_t rows;    /* coff*R */
    uint32_t width;   /* coff*d */
} ds4rt_frontier;

typedef struct ds4rt_layer_state {
    float *raw;               /* [raw_cap][d_h] */
    /* ratio != 0 */
    float *comp;              /* [comp_cap][d_h] */
    uint32_t n_comp;
    ds4rt_frontier cf;
    /* ratio == 4 */
    float *icomp;             /* [comp_cap][d_i] */
    uint32_t n_icomp;
    ds4rt_frontier icf;
    /* snapshot before the current batch */
    uint32_t snap_n_comp, snap_n_icomp;
    float *snap_cf_kv, *snap_cf_score, *snap_icf_kv, *snap_icf_score;
    /* journal of the current batch: per token, the compressor inputs (u | g), width 2*cf.width
     * and 2*icf.width */
    float *journal_c, *journal_i;
    uint32_t comp_cap;
} ds4rt_layer_state;

typedef struct ds4rt_kv_state {
    uint32_t n_layer;
    int64_t n_ctx;            /* maximum positions */
    uint32_t raw_cap;         /* window + max_batch */
    uint32_t max_batch;
    int64_t n_pos;            /* positions processed (committed + current batch) */
    int64_t batch_start;      /* n_pos before the last batch; rollback may not go below */
    int64_t batch_len;        /* tokens in the last batch */
    ds4rt_layer_state *layers;
    uint64_t bytes;           /* memory held */
} ds4rt_kv_state;

ds4rt_status ds4rt_kv_state_create(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch,
                                   ds4rt_kv_state *st);
void ds4rt_kv_state_free(ds4rt_kv_state *st);
/* Back to an empty context. */
void ds4rt_kv_state_reset(ds4rt_kv_state *st);

/* Called before a batch of n tokens: snapshot frontiers and counters. */
void ds4rt_kv_state_begin_batch(ds4rt_kv_state *st, int64_t n);

static inline float *ds4rt_raw_row(const ds4rt_kv_state *st, const ds4rt_layer_state *ls,
                                   uint32_t head_dim, int64_t pos) {
    return ls->raw + (size_t)(pos % st->raw_cap) * head_dim;
}

#endif /* DS4RT_STATE_H */
