/* cpu_hc.c - hyper-connection pre (norm, mixing product, Sinkhorn, reduce, sublayer norm),
 * post and head on the CPU. */
#include "cpu_internal.h"
#include "cpu_math.h"

ds4rt_status cpu_hc_pre(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *w,
                        ds4rt_df32 norm, ds4rt_df32 X, ds4rt_df32 xn, ds4rt_df32 post, ds4rt_df32 comb) {
    cpu_ctx *c = cpu(ctx);
    const uint32_t N = hp->hc, D = hp->n_embd;
    const float *Xp = F(X);
    float *normed = c->ws.normed, *mix = c->ws.mix, *xp = F(xn), *postp = F(post), *combp = F(comb);
    float pre[DS4RT_MAX_HC];
    ds4rt_rms_norm_rows(Xp, n, hp->hc_dim, hp->hc_dim, NULL, hp->rms_eps, normed);
    ds4rt_weight fn = cpu_weight(&w->fn);
    TRY(ds4rt_matmul(c->pool, &fn, normed, n, mix));
    for (int64_t t = 0; t < n; t++) {
        ds4rt_hc_coefficients(mix + (size_t)t * hp->hc_mix, F(w->scale), F(w->base), N, hp->sinkhorn_iters,
                              hp->hc_eps, pre, postp + (size_t)t * N, combp + (size_t)t * N * N);
        ds4rt_hc_reduce(Xp + (size_t)t * hp->hc_dim, pre, N, D, xp + (size_t)t * D);
    }
    ds4rt_rms_norm_rows(xp, n, D, D, F(norm), hp->rms_eps, xp); /* in place: the same bits as out of place */
    return DS4RT_OK;
}

ds4rt_status cpu_hc_post(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 f,
                         ds4rt_df32 post, ds4rt_df32 comb, ds4rt_df32 X_out) {
    (void)ctx;
    const uint32_t N = hp->hc, D = hp->n_embd;
    for (int64_t t = 0; t < n; t++)
        ds4rt_hc_expand(F(X) + (size_t)t * hp->hc_dim, F(f) + (size_t)t * D, F(post) + (size_t)t * N,
                        F(comb) + (size_t)t * N * N, N, D, F(X_out) + (size_t)t * hp->hc_dim);
    return DS4RT_OK;
}

ds4rt_status cpu_hc_head(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *head,
                         ds4rt_df32 X, ds4rt_df32 y) {
    cpu_ctx *c = cpu(ctx);
    const uint32_t N = hp->hc, D = hp->n_embd;
    const float *Xp = F(X);
    ds4rt_rms_norm_rows(Xp, n, hp->hc_dim, hp->hc_dim, NULL, hp->rms_eps, c->ws.normed);
    ds4rt_weight fn = cpu_weight(&head->fn);
    TRY(ds4rt_matmul(c->pool, &fn, c->ws.normed, n, c->ws.mix));
    for (int64_t i = 0; i < n; i++) {
        float wts[DS4RT_MAX_HC];
        ds4rt_hc_head_weights(c->ws.mix + (size_t)i * N, F(head->scale)[0], F(head->base), N, hp->hc_eps, wts);
        ds4rt_hc_reduce(Xp + (size_t)i * hp->hc_dim, wts, N, D, F(y) + (size_t)i * D);
    }
    return DS4RT_OK;
}
