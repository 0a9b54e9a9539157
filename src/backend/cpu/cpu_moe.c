/* cpu_moe.c - MoE routing and expert evaluation on the CPU. Rows are grouped per expert so
 * each expert's weights are read once per batch; every (row, slot) output is kept apart and
 * summed in slot order, so a row's result does not depend on the batch it is in. The experts'
 * products run as batches (ds4rt_matmul_batch), each row's arithmetic that of a lone product. */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_math.h"
#include "topk.h"

static float sqrt_softplus(float x) {
    double sp = x > 20.0f ? (double)x : (x < -20.0f ? exp((double)x) : log1p(exp((double)x)));
    return (float)sqrt(sp);
}

/* h = silu(min(g, c)) * clamp(u, -c, c) * weight, with silu(x) = x / (1 + expf(-x)) as
 * ds4rt_silu computes it; the expf of a chunk at once (ds4rt_expf_rows). h may alias g. */
static void swiglu(const float *g, const float *u, int64_t n, float c, float weight, float *h) {
    enum { CHUNK = 64 };
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        float gc[CHUNK], e[CHUNK];
        for (int64_t i = 0; i < m; i++) {
            gc[i] = g[i0 + i] < c ? g[i0 + i] : c;
            e[i] = -gc[i];
        }
        ds4rt_expf_rows(e, m);
        for (int64_t i = 0; i < m; i++) {
            float ui = u[i0 + i] < -c ? -c : (u[i0 + i] > c ? c : u[i0 + i]);
            h[i0 + i] = gc[i] / (1.0f + e[i]) * ui * weight;
        }
    }
}

/* SwiGLU of rows [0, n_exp) of the gathered expert rows (from row `first`) and then of the n_sh
 * shared-expert rows, split over the pool: rows are independent, so the split changes no bit. */
typedef struct {
    const cpu_workspace *s;
    int64_t first, n_exp;
    uint32_t FF, Fs;
    float clamp, clamp_sh;
} swiglu_job;

static void swiglu_rows(void *vj, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const swiglu_job *j = vj;
    const cpu_workspace *s = j->s;
    for (int64_t r = r0; r < r1; r++) {
        if (r < j->n_exp) {
            const int64_t e = j->first + r;
            float *g = s->eg + (size_t)e * j->FF;
            swiglu(g, s->eu + (size_t)e * j->FF, j->FF, j->clamp, s->selw[s->etok[e]], g);
        } else {
            const int64_t t = r - j->n_exp;
            float *g = s->shg + (size_t)t * j->Fs;
            swiglu(g, s->shu + (size_t)t * j->Fs, j->Fs, j->clamp_sh, 1.0f, g);
        }
    }
}

static void route(const ds4rt_hparams *hp, const ds4rt_moe_weights *w, cpu_workspace *s, const int32_t *tokens,
                  int64_t n) {
    const int32_t *tid2eid = I(w->tid2eid);
    const float *bias = F(w->bias);
    const uint32_t E = hp->n_expert, k = hp->n_expert_used;
    float biased[4096];
    for (int64_t t = 0; t < n; t++) {
        float *prob = s->router + (size_t)t * E;
        for (uint32_t e = 0; e < E; e++) prob[e] = sqrt_softplus(prob[e]);
        int32_t *sel = s->sel + (size_t)t * k;
        if (tid2eid != NULL) {
            memcpy(sel, tid2eid + (size_t)tokens[t] * k, k * sizeof(int32_t));
        } else {
            for (uint32_t e = 0; e < E; e++) biased[e] = prob[e] + bias[e];
            ds4rt_topk_small(biased, E, k, sel);
        }
        float sum = 0.0f;
        for (uint32_t i = 0; i < k; i++) sum += prob[sel[i]];
        float norm = hp->expert_norm ? 1.0f / (sum > 6.103515625e-5f ? sum : 6.103515625e-5f) : 1.0f;
        for (uint32_t i = 0; i < k; i++) s->selw[(size_t)t * k + i] = prob[sel[i]] * norm * hp->expert_scale;
    }
}

ds4rt_status cpu_moe(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, const ds4rt_moe_weights *w,
                     float clamp, float clamp_sh, ds4rt_df32 x, ds4rt_df32 out) {
    cpu_ctx *c = cpu(ctx);
    cpu_workspace *s = &c->ws;
    ds4rt_pool *pool = c->pool;
    const float *xn = F(x);
    float *f = F(out);
    const uint32_t E = hp->n_expert, k = hp->n_expert_used, D = hp->n_embd, FF = hp->expert_ff;
    ds4rt_weight gate_inp = cpu_weight(&w->gate_inp);
    TRY(ds4rt_matmul(pool, &gate_inp, xn, n, s->router));
    route(hp, w, s, pass_tokens(in), n);

    /* experts in waves of at most half a batch of jobs each: gate and up of every expert of the
     * wave (and of the shared expert) in one dispatch, then every down in another, so all threads
     * work on all experts at once instead of idling at the end of each small product */
    const int per_wave = DS4RT_MATMUL_MAX_JOBS / 2 - 1;
    ds4rt_matmul_job jobs[DS4RT_MATMUL_MAX_JOBS];
    uint32_t ewave[DS4RT_MATMUL_MAX_JOBS];
    int64_t eoff[DS4RT_MATMUL_MAX_JOBS], ecount[DS4RT_MATMUL_MAX_JOBS];
    int64_t off = 0; /* gathered rows so far (ordered by expert, then by row*k + slot) */
    bool shared_todo = hp->n_shared > 0;
    const uint32_t Fs = hp->shared_ff;
    uint32_t e = 0;
    while (e < E || shared_todo) {
        int nw = 0;
        const int64_t wave0 = off;
        for (; e < E && nw < per_wave; e++) {
            int64_t m = 0;
            for (int64_t i = 0; i < n * k; i++)
                if ((uint32_t)s->sel[i] == e) s->etok[off + m++] = (int32_t)i;
            if (m == 0) continue;
            for (int64_t j = 0; j < m; j++)
                memcpy(s->ex + (size_t)(off + j) * D, xn + (size_t)(s->etok[off + j] / k) * D, D * sizeof(float));
            ewave[nw] = e;
            eoff[nw] = off;
            ecount[nw] = m;
            nw++;
            off += m;
        }
        int nj = 0;
        for (int i = 0; i < nw; i++) {
            ds4rt_dweight dg = ds4rt_dweight3_at(&w->gate_exps, ewave[i]), du = ds4rt_dweight3_at(&w->up_exps, ewave[i]);
            const float *xe = s->ex + (size_t)eoff[i] * D;
            jobs[nj++] = (ds4rt_matmul_job){cpu_weight(&dg), xe, ecount[i], s->eg + (size_t)eoff[i] * FF};
            jobs[nj++] = (ds4rt_matmul_job){cpu_weight(&du), xe, ecount[i], s->eu + (size_t)eoff[i] * FF};
        }
        const bool shared_now = shared_todo && e == E;
        if (shared_now) {
            jobs[nj++] = (ds4rt_matmul_job){cpu_weight(&w->gate_sh), xn, n, s->shg};
            jobs[nj++] = (ds4rt_matmul_job){cpu_weight(&w->up_sh), xn, n, s->shu};
        }
        TRY(ds4rt_matmul_batch(pool, jobs, nj));
        swiglu_job sj = {.s = s, .first = wave0, .n_exp = off - wave0, .FF = FF, .Fs = Fs, .clamp = clamp,
                         .clamp_sh = clamp_sh};
        ds4rt_pool_parallel_for(pool, sj.n_exp + (shared_now ? n : 0), 2, swiglu_rows, &sj);
        nj = 0;
        for (int i = 0; i < nw; i++) {
            ds4rt_dweight dd = ds4rt_dweight3_at(&w->down_exps, ewave[i]);
            jobs[nj++] = (ds4rt_matmul_job){cpu_weight(&dd), s->eg + (size_t)eoff[i] * FF, ecount[i],
                                            s->ey + (size_t)eoff[i] * D};
        }
        if (shared_now) {
            jobs[nj++] = (ds4rt_matmul_job){cpu_weight(&w->down_sh), s->shg, n, s->shy};
            shared_todo = false;
        }
        TRY(ds4rt_matmul_batch(pool, jobs, nj));
        for (int64_t j = wave0; j < off; j++)
            memcpy(s->yslot + (size_t)s->etok[j] * D, s->ey + (size_t)j * D, D * sizeof(float));
    }

    for (int64_t t = 0; t < n; t++) {
        float *ft = f + (size_t)t * D;
        const float *y0 = s->yslot + (size_t)t * k * D;
        for (uint32_t d = 0; d < D; d++) {
            float acc = 0.0f;
            for (uint32_t i = 0; i < k; i++) acc += y0[(size_t)i * D + d];
            ft[d] = hp->n_shared > 0 ? acc + s->shy[(size_t)t * D + d] : acc;
        }
    }
    return DS4RT_OK;
}
