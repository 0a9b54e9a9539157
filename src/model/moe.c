/* moe.c - routing and expert evaluation. Tokens are grouped per expert so each expert's
 * weights are read once per batch; every (token, slot) output is kept apart and summed in slot
 * order, so a token's result does not depend on the batch it is in. */
#include "moe.h"

#include <math.h>
#include <string.h>

#include "internal.h"
#include "ops.h"
#include "topk.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

static float sqrt_softplus(float x) {
    double sp = x > 20.0f ? (double)x : (x < -20.0f ? exp((double)x) : log1p(exp((double)x)));
    return (float)sqrt(sp);
}

static void swiglu(const float *g, const float *u, int64_t n, float c, float weight, float *h) {
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] < c ? g[i] : c;
        float ui = u[i] < -c ? -c : (u[i] > c ? c : u[i]);
        h[i] = ds4rt_silu(gi) * ui * weight;
    }
}

static void route(const ds4rt_hparams *hp, const ds4rt_moe_weights *w, ds4rt_scratch *s, const int32_t *tokens,
                  int64_t n) {
    const uint32_t E = hp->n_expert, k = hp->n_expert_used;
    float biased[4096];
    for (int64_t t = 0; t < n; t++) {
        float *prob = s->router + (size_t)t * E;
        for (uint32_t e = 0; e < E; e++) prob[e] = sqrt_softplus(prob[e]);
        int32_t *sel = s->sel + (size_t)t * k;
        if (w->tid2eid != NULL) {
            memcpy(sel, w->tid2eid + (size_t)tokens[t] * k, k * sizeof(int32_t));
        } else {
            for (uint32_t e = 0; e < E; e++) biased[e] = prob[e] + w->bias[e];
            ds4rt_topk_small(biased, E, k, sel);
        }
        float sum = 0.0f;
        for (uint32_t i = 0; i < k; i++) sum += prob[sel[i]];
        float norm = hp->expert_norm ? 1.0f / (sum > 6.103515625e-5f ? sum : 6.103515625e-5f) : 1.0f;
        for (uint32_t i = 0; i < k; i++) s->selw[(size_t)t * k + i] = prob[sel[i]] * norm * hp->expert_scale;
    }
}

ds4rt_status ds4rt_moe_sublayer(const ds4rt_hparams *hp, const ds4rt_moe_weights *w, float clamp,
                                float clamp_sh, ds4rt_pool *pool, ds4rt_scratch *s, const int32_t *tokens,
                                int64_t n) {
    const uint32_t E = hp->n_expert, k = hp->n_expert_used, D = hp->n_embd, F = hp->expert_ff;
    TRY(ds4rt_matmul(pool, &w->gate_inp, s->xn, n, s->router));
    route(hp, w, s, tokens, n);

    for (uint32_t e = 0; e < E; e++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n * k; i++)
            if ((uint32_t)s->sel[i] == e) s->etok[m++] = (int32_t)i;
        if (m == 0) continue;
        for (int64_t j = 0; j < m; j++)
            memcpy(s->ex + (size_t)j * D, s->xn + (size_t)(s->etok[j] / k) * D, D * sizeof(float));
        ds4rt_weight wg = ds4rt_weight3_at(&w->gate_exps, e), wu = ds4rt_weight3_at(&w->up_exps, e),
                     wd = ds4rt_weight3_at(&w->down_exps, e);
        TRY(ds4rt_matmul(pool, &wg, s->ex, m, s->eg));
        TRY(ds4rt_matmul(pool, &wu, s->ex, m, s->eu));
        for (int64_t j = 0; j < m; j++)
            swiglu(s->eg + (size_t)j * F, s->eu + (size_t)j * F, F, clamp, s->selw[s->etok[j]], s->eg + (size_t)j * F);
        TRY(ds4rt_matmul(pool, &wd, s->eg, m, s->ey));
        for (int64_t j = 0; j < m; j++)
            memcpy(s->yslot + (size_t)s->etok[j] * D, s->ey + (size_t)j * D, D * sizeof(float));
    }

    if (hp->n_shared > 0) {
        const uint32_t Fs = hp->shared_ff;
        TRY(ds4rt_matmul(pool, &w->gate_sh, s->xn, n, s->shg));
        TRY(ds4rt_matmul(pool, &w->up_sh, s->xn, n, s->shu));
        for (int64_t t = 0; t < n; t++)
            swiglu(s->shg + (size_t)t * Fs, s->shu + (size_t)t * Fs, Fs, clamp_sh, 1.0f, s->shg + (size_t)t * Fs);
        TRY(ds4rt_matmul(pool, &w->down_sh, s->shg, n, s->shy));
    }
    for (int64_t t = 0; t < n; t++) {
        float *f = s->f + (size_t)t * D;
        const float *y0 = s->yslot + (size_t)t * k * D;
        for (uint32_t d = 0; d < D; d++) {
            float acc = 0.0f;
            for (uint32_t i = 0; i < k; i++) acc += y0[(size_t)i * D + d];
            f[d] = hp->n_shared > 0 ? acc + s->shy[(size_t)t * D + d] : acc;
        }
    }
    return DS4RT_OK;
}
