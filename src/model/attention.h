/* attention.h - the attention sublayer of target layers (dsv4-architecture.md §5). */
#ifndef DS4RT_ATTENTION_H
#define DS4RT_ATTENTION_H

#include "target.h"

/* Input s->xn [n][D] (attn_norm output) for positions pos0..pos0+n-1; output s->f [n][D].
 * Appends the tokens' KV rows and compressor/indexer steps to layer l's state. */
ds4rt_status ds4rt_attention_sublayer(const ds4rt_target *t, uint32_t l, ds4rt_pool *pool, ds4rt_kv_state *st,
                                      ds4rt_scratch *s, int64_t n, int64_t pos0);

/* Restores layer l's frontiers to the batch snapshot and replays the first `keep` journaled
 * compressor pushes. */
ds4rt_status ds4rt_attention_rollback(const ds4rt_target *t, uint32_t l, ds4rt_kv_state *st, ds4rt_scratch *s,
                                      int64_t keep);

/* Attention with per-head sinks over an explicit key list (K = V rows of d floats), in
 * parallel over heads; out may alias q. */
void ds4rt_attend(ds4rt_pool *pool, ds4rt_scratch *s, const float *q, uint32_t n_head, uint32_t d,
                  const float *const *keys, int64_t n_keys, const float *sinks, float *out);

#endif /* DS4RT_ATTENTION_H */
