/* cpu_hc.c - hyper-connection pre (norm, mixing product, Sinkhorn, reduce, sublayer norm),
 * post and head on the CPU. */
#include "cpu_internal.h"
#include "cpu_math.h"

/* The per-token steps between the products, split over the pool by tokens: a token's result
 * is the same whichever thread computes it, and at 2 threads this work was a third of what the
 * calling thread did alone in a verify pass of the default model while the other one waited. */
typedef struct {
    const ds4rt_hparams *hp;
    const float *X, *mix, *scale, *base, *f;
    float *x, *post, *comb, *X_out;
} hc_job;

static void pre_tokens(void *vj, int64_t t0, int64_t t1, int thread) {
    (void)thread;
    const hc_job *j = vj;
    const ds4rt_hparams *hp = j->hp;
    const uint32_t N = hp->hc, D = hp->n_embd;
    float pre[DS4RT_MAX_HC];
    for (int64_t t = t0; t < t1; t++) {
        ds4rt_hc_coefficients(j->mix + (size_t)t * hp->hc_mix, j->scale, j->base, N, hp->sinkhorn_iters, hp->hc_eps,
                              pre, j->post + (size_t)t * N, j->comb + (size_t)t * N * N);
        ds4rt_hc_reduce(j->X + (size_t)t * hp->hc_dim, pre, N, D, j->x + (size_t)t * D);
    }
}

static void post_tokens(void *vj, int64_t t0, int64_t t1, int thread) {
    (void)thread;
    const hc_job *j = vj;
    const ds4rt_hparams *hp = j->hp;
    const uint32_t N = hp->hc, D = hp->n_embd;
    for (int64_t t = t0; t < t1; t++)
        ds4rt_hc_expand(j->X + (size_t)t * hp->hc_dim, j->f + (size_t)t * D, j->post + (size_t)t * N,
                        j->comb + (size_t)t * N * N, N, D, j->X_out + (size_t)t * hp->hc_dim);
}

ds4rt_status cpu_hc_pre(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *w,
                        ds4rt_df32 norm, ds4rt_df32 X, ds4rt_df32 xn, ds4rt_df32 post, ds4rt_df32 comb) {
    cpu_ctx *c = cpu(ctx);
    const uint32_t D = hp->n_embd;
    const float *Xp = F(X);
    float *normed = c->ws.normed, *mix = c->ws.mix, *xp = F(xn);
    cpu_norm_rows(c, Xp, n, hp->hc_dim, hp->hc_dim, NULL, hp->rms_eps, normed);
    ds4rt_weight fn = cpu_weight(&w->fn);
    TRY(ds4rt_matmul(c->pool, &fn, normed, n, mix));
    hc_job j = {.hp = hp, .X = Xp, .mix = mix, .scale = F(w->scale), .base = F(w->base), .x = xp,
                .post = F(post), .comb = F(comb)};
    ds4rt_pool_parallel_for(c->pool, n, 1, pre_tokens, &j);
    cpu_norm_rows(c, xp, n, D, D, F(norm), hp->rms_eps, xp); /* in place: the same bits as out of place */
    return DS4RT_OK;
}

ds4rt_status cpu_hc_post(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 f,
                         ds4rt_df32 post, ds4rt_df32 comb, ds4rt_df32 X_out) {
    hc_job j = {.hp = hp, .X = F(X), .f = F(f), .post = F(post), .comb = F(comb), .X_out = F(X_out)};
    ds4rt_pool_parallel_for(cpu(ctx)->pool, n, 1, post_tokens, &j);
    return DS4RT_OK;
}

ds4rt_status cpu_hc_head(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *head,
                         ds4rt_df32 X, ds4rt_df32 y) {
    cpu_ctx *c = cpu(ctx);
    const uint32_t N = hp->hc, D = hp->n_embd;
    const float *Xp = F(X);
    cpu_norm_rows(c, Xp, n, hp->hc_dim, hp->hc_dim, NULL, hp->rms_eps, c->ws.normed);
    ds4rt_weight fn = cpu_weight(&head->fn);
    TRY(ds4rt_matmul(c->pool, &fn, c->ws.normed, n, c->ws.mix));
    for (int64_t i = 0; i < n; i++) {
        float wts[DS4RT_MAX_HC];
        ds4rt_hc_head_weights(c->ws.mix + (size_t)i * N, F(head->scale)[0], F(head->base), N, hp->hc_eps, wts);
        ds4rt_hc_reduce(Xp + (size_t)i * hp->hc_dim, wts, N, D, F(y) + (size_t)i * D);
    }
    return DS4RT_OK;
}
