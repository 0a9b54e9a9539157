/*
 * activations.h - the tensors that flow between ops in one pass of a DeepSeek V4 block stack
 * (backend memory, category scratch), sized once for `cap` rows so the hot path never
 * allocates. Op-internal temporaries are the backend context's own.
 */
#ifndef DS4RT_ACTIVATIONS_H
#define DS4RT_ACTIVATIONS_H

#include "backend.h"

typedef struct ds4rt_acts {
    int64_t cap;            /* rows */
    ds4rt_backend *be;
    ds4rt_dbuf *buf;        /* one buffer; the views below */
    ds4rt_dbuf *in_buf;     /* the pass input block */
    ds4rt_dpass in;
    /* hyper-connections */
    ds4rt_df32 X, X2;       /* [cap][N*D] state before / after a sublayer */
    ds4rt_df32 xn;          /* [cap][D] normed sublayer input */
    ds4rt_df32 post, comb;  /* [cap][N], [cap][N*N] */
    ds4rt_df32 f;           /* [cap][D] sublayer output */
    /* attention */
    ds4rt_df32 qa;          /* [cap][Rq] */
    ds4rt_df32 q;           /* [cap][H*d_h], then the attention output in place */
    ds4rt_df32 kv;          /* [cap][d_h] */
    ds4rt_df32 cu, cg;      /* [cap][2*d_h] compressor projections */
    ds4rt_df32 iu, ig;      /* [cap][2*d_i] indexer compressor projections */
    ds4rt_df32 iq;          /* [cap][Hi*d_i] */
    ds4rt_df32 iw;          /* [cap][Hi] */
    ds4rt_di32 sel;         /* [cap][K_i] compressed rows chosen by the indexer */
    ds4rt_di32 n_sel;       /* [cap] */
} ds4rt_acts;

/* `pass_tokens`: ids the input block holds (>= cap). */
ds4rt_status ds4rt_acts_create(ds4rt_backend *be, const ds4rt_hparams *hp, int64_t cap, int64_t pass_tokens,
                               ds4rt_acts *a);
void ds4rt_acts_free(ds4rt_acts *a);

/* Carves `count` floats (ints) from a running offset of a buffer: views, 16-float aligned. */
static inline ds4rt_df32 ds4rt_carve_f32(ds4rt_dbuf *b, uint64_t *off, uint64_t count) {
    ds4rt_df32 v = {b, *off};
    *off += (count + 15) & ~(uint64_t)15;
    return v;
}
static inline ds4rt_di32 ds4rt_carve_i32(ds4rt_dbuf *b, uint64_t *off, uint64_t count) {
    ds4rt_di32 v = {b, *off};
    *off += (count + 15) & ~(uint64_t)15;
    return v;
}

#endif /* DS4RT_ACTIVATIONS_H */
