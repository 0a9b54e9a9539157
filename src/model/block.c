/* block.c - hyper-connections, projections and grouped output shared by layers and stages. */
#include "block.h"

#include <string.h>

#include "internal.h"
#include "ops.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

ds4rt_status ds4rt_hc_pre_batch(const ds4rt_hparams *hp, const ds4rt_hc_weights *w, ds4rt_pool *pool,
                                ds4rt_scratch *s, const float *X, int64_t n) {
    const uint32_t N = hp->hc, D = hp->n_embd;
    for (int64_t t = 0; t < n; t++)
        ds4rt_rms_norm(X + (size_t)t * hp->hc_dim, hp->hc_dim, NULL, hp->rms_eps, s->normed + (size_t)t * hp->hc_dim);
    TRY(ds4rt_matmul(pool, &w->fn, s->normed, n, s->mix));
    for (int64_t t = 0; t < n; t++) {
        ds4rt_hc_coefficients(s->mix + (size_t)t * hp->hc_mix, w->scale, w->base, N, hp->sinkhorn_iters, hp->hc_eps,
                              s->pre + (size_t)t * N, s->post + (size_t)t * N, s->comb + (size_t)t * N * N);
        ds4rt_hc_reduce(X + (size_t)t * hp->hc_dim, s->pre + (size_t)t * N, N, D, s->x + (size_t)t * D);
    }
    return DS4RT_OK;
}

void ds4rt_hc_post_batch(const ds4rt_hparams *hp, const ds4rt_scratch *s, const float *X_old, float *X_new,
                         int64_t n) {
    const uint32_t N = hp->hc, D = hp->n_embd;
    for (int64_t t = 0; t < n; t++)
        ds4rt_hc_expand(X_old + (size_t)t * hp->hc_dim, s->f + (size_t)t * D, s->post + (size_t)t * N,
                        s->comb + (size_t)t * N * N, N, D, X_new + (size_t)t * hp->hc_dim);
}

ds4rt_status ds4rt_hc_head_batch(const ds4rt_hparams *hp, const ds4rt_hc_weights *head, ds4rt_pool *pool,
                                 ds4rt_scratch *s, const float *X, int64_t n, float *y) {
    const uint32_t N = hp->hc, D = hp->n_embd;
    for (int64_t i = 0; i < n; i++)
        ds4rt_rms_norm(X + (size_t)i * hp->hc_dim, hp->hc_dim, NULL, hp->rms_eps, s->normed + (size_t)i * hp->hc_dim);
    TRY(ds4rt_matmul(pool, &head->fn, s->normed, n, s->mix));
    for (int64_t i = 0; i < n; i++) {
        float wts[DS4RT_MAX_HC];
        ds4rt_hc_head_weights(s->mix + (size_t)i * N, head->scale[0], head->base, N, hp->hc_eps, wts);
        ds4rt_hc_reduce(X + (size_t)i * hp->hc_dim, wts, N, D, y + (size_t)i * D);
    }
    return DS4RT_OK;
}

ds4rt_status ds4rt_attn_project_q(const ds4rt_hparams *hp, const ds4rt_attn_weights *w, ds4rt_pool *pool,
                                  ds4rt_scratch *s, int64_t n) {
    TRY(ds4rt_matmul(pool, &w->q_a, s->xn, n, s->qa));
    for (int64_t i = 0; i < n; i++)
        ds4rt_rms_norm(s->qa + i * hp->q_lora, hp->q_lora, w->q_a_norm, hp->rms_eps, s->qa + i * hp->q_lora);
    TRY(ds4rt_matmul(pool, &w->q_b, s->qa, n, s->q));
    for (int64_t i = 0; i < n; i++)
        for (uint32_t h = 0; h < hp->n_head; h++) {
            float *qh = s->q + (size_t)i * hp->q_dim + (size_t)h * hp->head_dim;
            ds4rt_rms_norm(qh, hp->head_dim, NULL, hp->rms_eps, qh);
        }
    return DS4RT_OK;
}

ds4rt_status ds4rt_attn_project_kv(const ds4rt_hparams *hp, const ds4rt_attn_weights *w, ds4rt_pool *pool,
                                   const float *in, int64_t n, float *kv) {
    TRY(ds4rt_matmul(pool, &w->kv, in, n, kv));
    for (int64_t i = 0; i < n; i++)
        ds4rt_rms_norm(kv + (size_t)i * hp->head_dim, hp->head_dim, w->kv_norm, hp->rms_eps, kv + (size_t)i * hp->head_dim);
    return DS4RT_OK;
}

ds4rt_status ds4rt_attn_grouped_output(const ds4rt_hparams *hp, const ds4rt_attn_weights *w, ds4rt_pool *pool,
                                       ds4rt_scratch *s, int64_t n) {
    /* group g reads heads [g*H/G, (g+1)*H/G): a contiguous slice of each output row */
    for (uint32_t g = 0; g < hp->o_groups; g++) {
        for (int64_t i = 0; i < n; i++)
            memcpy(s->og + (size_t)i * hp->group_dim, s->q + (size_t)i * hp->q_dim + (size_t)g * hp->group_dim,
                   hp->group_dim * sizeof(float));
        ds4rt_weight wg = w->out_a;
        wg.data = (const uint8_t *)w->out_a.data + (size_t)g * hp->o_lora * w->out_a.row_bytes;
        wg.rows = hp->o_lora;
        TRY(ds4rt_matmul(pool, &wg, s->og, n, s->olow));
        for (int64_t i = 0; i < n; i++)
            memcpy(s->low + (size_t)i * hp->o_low_dim + (size_t)g * hp->o_lora, s->olow + (size_t)i * hp->o_lora,
                   hp->o_lora * sizeof(float));
    }
    return ds4rt_matmul(pool, &w->out_b, s->low, n, s->f);
}
