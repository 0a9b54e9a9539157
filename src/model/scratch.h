/*
 * scratch.h - activation buffers of one session's forward pass, sized once for max_batch
 * tokens so the hot path never allocates.
 */
#ifndef DS4RT_SCRATCH_H
#define DS4RT_SCRATCH_H

#include <stdint.h>

#include "ds4rt.h"
#include "hparams.h"

typedef struct ds4rt_scratch {
    int64_t cap;            /* tokens */
    int n_threads;
    int64_t max_keys;       /* keys one query can see */
    int64_t max_comp;       /* compressed rows one layer can hold */
    /* hyper-connections */
    float *X, *X2;          /* [cap][N*D] state before / after a sublayer */
    float *normed;          /* [cap][N*D] */
    float *mix;             /* [cap][hc_mix] */
    float *pre, *post, *comb; /* [cap][N], [cap][N], [cap][N*N] */
    float *x, *xn;          /* [cap][D] */
    float *f;               /* [cap][D] sublayer output */
    /* attention */
    float *qa;              /* [cap][Rq] */
    float *q;               /* [cap][H*d_h], then the attention output in place */
    float *kv;              /* [cap][d_h] */
    float *cu, *cg;         /* [cap][2*d_h] compressor projections */
    float *iu, *ig;         /* [cap][2*d_i] indexer compressor projections */
    float *iq;              /* [cap][Hi*d_i] */
    float *iw;              /* [cap][Hi] */
    float *og;              /* [cap][group_dim] gathered group input */
    float *olow;            /* [cap][Ro] one group's output */
    float *low;             /* [cap][G*Ro] */
    float *comp_tmp;        /* compressor scratch (8-byte aligned) */
    double *rope_cs;        /* [cap][2][n_rot/2]: cos, sin per token */
    float *iscores;         /* [max_comp] indexer scores of one token */
    int32_t *isel;          /* [max_comp] selected compressed rows */
    float *iscores_tmp;     /* [max_comp] */
    float *att_scores;      /* [threads][max_keys] */
    const float **att_keys; /* [max_keys] key row pointers of one token */
    /* MoE */
    float *router;          /* [cap][E] */
    int32_t *sel;           /* [cap][k] */
    float *selw;            /* [cap][k] */
    int32_t *etok;          /* [cap*k] (token*k + slot) entries routed to one expert */
    float *ex;              /* [cap*k][D] gathered inputs */
    float *eg, *eu;         /* [cap*k][F] */
    float *ey;              /* [cap*k][D] */
    float *yslot;           /* [cap][k][D] expert outputs per slot */
    float *shg, *shu;       /* [cap][F*ns] */
    float *shy;             /* [cap][D] */
    /* head */
    float *hy;              /* [cap][D] */
    uint64_t bytes;         /* memory held */
} ds4rt_scratch;

/* Buffers for batches of `cap` tokens in a context of n_ctx; attention scores for at least
 * `min_keys` keys per query (besides the target's window + compressed rows). */
ds4rt_status ds4rt_scratch_create(const ds4rt_hparams *hp, int64_t cap, int64_t n_ctx, int n_threads,
                                  int64_t min_keys, ds4rt_scratch *s);
void ds4rt_scratch_free(ds4rt_scratch *s);

#endif /* DS4RT_SCRATCH_H */
