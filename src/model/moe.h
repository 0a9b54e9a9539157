/* moe.h - the mixture-of-experts FFN sublayer (dsv4-architecture.md §6). */
#ifndef DS4RT_MOE_H
#define DS4RT_MOE_H

#include "hparams.h"
#include "scratch.h"
#include "threadpool.h"
#include "weights.h"

/* Input s->xn [n][D] (ffn_norm output) and the tokens' ids (used by hash-routed blocks);
 * output s->f [n][D]. Routed experts: sqrt-softplus router, biased top-k (or the token's
 * tid2eid row), normalised and scaled weights applied before the down projection; plus the
 * shared expert. `clamp`/`clamp_sh` are the SwiGLU limits of this block. */
ds4rt_status ds4rt_moe_sublayer(const ds4rt_hparams *hp, const ds4rt_moe_weights *w, float clamp,
                                float clamp_sh, ds4rt_pool *pool, ds4rt_scratch *s, const int32_t *tokens,
                                int64_t n);

#endif /* DS4RT_MOE_H */
