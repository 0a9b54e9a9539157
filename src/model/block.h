/*
 * block.h - the pieces of a DeepSeek V4 block shared by trunk layers and DSpark drafter stages
 * (dsv4-architecture.md §4, §5.1, §5.8): hyper-connection pre/post over a batch, the query
 * and KV projections, and the grouped low-rank output projection. All work on the rows of a
 * scratch (batch of n tokens), one row at a time where order matters.
 */
#ifndef DS4RT_BLOCK_H
#define DS4RT_BLOCK_H

#include "hparams.h"
#include "scratch.h"
#include "threadpool.h"
#include "weights.h"

/* s->x[t] = sum_h pre[h] X[t][h]; keeps post/comb in s for ds4rt_hc_post_batch. */
ds4rt_status ds4rt_hc_pre_batch(const ds4rt_hparams *hp, const ds4rt_hc_weights *w, ds4rt_pool *pool,
                                ds4rt_scratch *s, const float *X, int64_t n);

/* X_new[t] = post[t] (x) s->f[t] + comb[t]^T X_old[t]; X_new must not alias X_old. */
void ds4rt_hc_post_batch(const ds4rt_hparams *hp, const ds4rt_scratch *s, const float *X_old, float *X_new,
                         int64_t n);

/* HC head collapse of n rows of X into y[n][D] (before the final norm). */
ds4rt_status ds4rt_hc_head_batch(const ds4rt_hparams *hp, const ds4rt_hc_weights *head, ds4rt_pool *pool,
                                 ds4rt_scratch *s, const float *X, int64_t n, float *y);

/* From s->xn: s->qa = RMSNorm(W_qa xn, q_a_norm) and s->q = per-head RMS(W_qb qa), no RoPE. */
ds4rt_status ds4rt_attn_project_q(const ds4rt_hparams *hp, const ds4rt_attn_weights *w, ds4rt_pool *pool,
                                  ds4rt_scratch *s, int64_t n);

/* kv[n][d_h] = RMSNorm(W_kv x, kv_norm) for x = rows of `in` (s->xn, or DSpark's main_x). */
ds4rt_status ds4rt_attn_project_kv(const ds4rt_hparams *hp, const ds4rt_attn_weights *w, ds4rt_pool *pool,
                                   const float *in, int64_t n, float *kv);

/* s->f = W_ob (grouped W_oa (attention output in s->q)). */
ds4rt_status ds4rt_attn_grouped_output(const ds4rt_hparams *hp, const ds4rt_attn_weights *w, ds4rt_pool *pool,
                                       ds4rt_scratch *s, int64_t n);

#endif /* DS4RT_BLOCK_H */
