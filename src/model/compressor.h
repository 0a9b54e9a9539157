/*
 * compressor.h - the streaming KV compressor of ratio-R layers (dsv4-architecture.md §5.5),
 * for both the attention compressor (row width d_h, FP8 post-processing) and the indexer
 * compressor (row width d_i, Hadamard + FP4 post-processing).
 */
#ifndef DS4RT_COMPRESSOR_H
#define DS4RT_COMPRESSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "ops.h"
#include "state.h"

#define DS4RT_COMPRESSOR_TMP(d, n_rot) ((size_t)(d) + 2 + 2 * (size_t)(n_rot))

typedef enum ds4rt_comp_post {
    DS4RT_COMP_POST_NONE = 0,     /* llama.cpp-compatible numerics */
    DS4RT_COMP_POST_FP8 = 1,      /* attention rows: FP8 round trip of dims [0, d_nope) */
    DS4RT_COMP_POST_HADAMARD_FP4 = 2, /* indexer rows: Hadamard, then FP4 round trip */
    DS4RT_COMP_POST_HADAMARD = 3  /* indexer rows without the FP4 simulation */
} ds4rt_comp_post;

typedef struct ds4rt_compressor {
    uint32_t ratio;               /* R */
    uint32_t dim;                 /* d: emitted row width */
    uint32_t d_nope;              /* FP8 applies to [0, d_nope) */
    const float *ape;             /* [R][coff*d] */
    const float *norm;            /* [d] */
    float rms_eps;
    const ds4rt_rope *rope;       /* compressed-layer RoPE */
    ds4rt_comp_post post;
} ds4rt_compressor;

/* Pushes token `pos`'s projections u, g (width coff*d each; ape not yet added) into the
 * frontier; when pos closes a block, pools it, post-processes the row and appends it at
 * rows[*n_rows] (incrementing *n_rows). Returns true if a row was emitted. `tmp` needs
 * DS4RT_COMPRESSOR_TMP(d, n_rot) floats, 8-byte aligned. */
bool ds4rt_compressor_push(const ds4rt_compressor *c, ds4rt_frontier *f, const float *u, const float *g,
                           int64_t pos, float *rows, uint32_t *n_rows, float *tmp);

#endif /* DS4RT_COMPRESSOR_H */
