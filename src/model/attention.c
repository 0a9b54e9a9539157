/*
 * attention.c - the attention sublayer of a target layer for a batch of tokens
 * (dsv4-architecture.md §5): batched projections, then per token in position order the raw
 * window push, compressor and indexer steps, sparse attention with sinks, and finally the
 * batched grouped low-rank output projection.
 */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "block.h"
#include "compressor.h"
#include "internal.h"
#include "topk.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

/* ---- attention with sinks over an explicit key list, parallel over heads ----------------- */

typedef struct head_job {
    const float *q;            /* [H][d]; may alias out (a head's scores are done before its
                                  output is written) */
    const float *const *keys;  /* n_keys rows of d floats (K = V) */
    int64_t n_keys;
    const float *sinks;        /* [H] */
    float scale;
    uint32_t d;
    float *out;                /* [H][d] */
    float *scores;             /* [threads][max_keys] */
    int64_t max_keys;
} head_job;

static void attend_heads(void *ctx, int64_t begin, int64_t end, int thread) {
    const head_job *j = ctx;
    float *sc = j->scores + (size_t)thread * j->max_keys;
    for (int64_t h = begin; h < end; h++) {
        const float *q = j->q + (size_t)h * j->d;
        float mx = j->sinks[h];
        for (int64_t k = 0; k < j->n_keys; k++) {
            const float *key = j->keys[k];
            float dot = 0.0f;
            for (uint32_t i = 0; i < j->d; i++) dot += q[i] * key[i];
            sc[k] = dot * j->scale;
            if (sc[k] > mx) mx = sc[k];
        }
        double den = exp((double)j->sinks[h] - mx);
        for (int64_t k = 0; k < j->n_keys; k++) {
            sc[k] = expf(sc[k] - mx);
            den += sc[k];
        }
        float *o = j->out + (size_t)h * j->d;
        for (uint32_t i = 0; i < j->d; i++) o[i] = 0.0f;
        for (int64_t k = 0; k < j->n_keys; k++) {
            const float *v = j->keys[k];
            float w = sc[k];
            for (uint32_t i = 0; i < j->d; i++) o[i] += w * v[i];
        }
        float inv = (float)(1.0 / den);
        for (uint32_t i = 0; i < j->d; i++) o[i] *= inv;
    }
}

void ds4rt_attend(ds4rt_pool *pool, ds4rt_scratch *s, const float *q, uint32_t n_head, uint32_t d,
                  const float *const *keys, int64_t n_keys, const float *sinks, float *out) {
    head_job j = {.q = q, .keys = keys, .n_keys = n_keys, .sinks = sinks, .scale = (float)(1.0 / sqrt((double)d)),
                  .d = d, .out = out, .scores = s->att_scores, .max_keys = s->max_keys};
    ds4rt_pool_parallel_for(pool, n_head, 1, attend_heads, &j);
}

/* ---- indexer scores over the visible indexer rows, parallel over rows -------------------- */

typedef struct index_job {
    const float *qi;    /* [Hi][d_i] */
    const float *w;     /* [Hi] */
    const float *rows;  /* [n][d_i] */
    uint32_t heads, dim;
    float *scores;
} index_job;

static void index_rows(void *ctx, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const index_job *j = ctx;
    for (int64_t c = begin; c < end; c++) {
        const float *k = j->rows + (size_t)c * j->dim;
        float s = 0.0f;
        for (uint32_t h = 0; h < j->heads; h++) {
            const float *q = j->qi + (size_t)h * j->dim;
            float dot = 0.0f;
            for (uint32_t i = 0; i < j->dim; i++) dot += q[i] * k[i];
            s += j->w[h] * (dot > 0.0f ? dot : 0.0f);
        }
        j->scores[c] = s;
    }
}

/* The attention and indexer compressors of layer l (zeroed when the layer has none). */
static void layer_compressors(const ds4rt_target *t, uint32_t l, ds4rt_compressor *attn, ds4rt_compressor *index) {
    const ds4rt_hparams *hp = &t->hp;
    const ds4rt_attn_weights *w = &t->layers[l].attn;
    const uint32_t R = hp->ratio[l];
    memset(attn, 0, sizeof *attn);
    memset(index, 0, sizeof *index);
    if (R != 0)
        *attn = (ds4rt_compressor){.ratio = R, .dim = hp->head_dim, .d_nope = hp->d_nope, .ape = w->c_ape,
                                   .norm = w->c_norm, .rms_eps = hp->rms_eps, .rope = &t->rope_comp,
                                   .post = t->sim_fp8 ? DS4RT_COMP_POST_FP8 : DS4RT_COMP_POST_NONE};
    if (R == 4)
        *index = (ds4rt_compressor){.ratio = 4, .dim = hp->idx_dim, .d_nope = 0, .ape = w->ic_ape, .norm = w->ic_norm,
                                    .rms_eps = hp->rms_eps, .rope = &t->rope_comp,
                                    .post = t->sim_fp4 ? DS4RT_COMP_POST_HADAMARD_FP4 : DS4RT_COMP_POST_HADAMARD};
}

/* ---- the sublayer ------------------------------------------------------------------------- */

ds4rt_status ds4rt_attention_sublayer(const ds4rt_target *t, uint32_t l, ds4rt_pool *pool, ds4rt_kv_state *st,
                                      ds4rt_scratch *s, int64_t n, int64_t pos0) {
    const ds4rt_hparams *hp = &t->hp;
    const ds4rt_attn_weights *w = &t->layers[l].attn;
    ds4rt_layer_state *ls = &st->layers[l];
    const uint32_t R = hp->ratio[l];
    const uint32_t dh = hp->head_dim, di = hp->idx_dim, H = hp->n_head;
    const ds4rt_rope *rope = R == 0 ? &t->rope_dense : &t->rope_comp;
    const uint32_t half = hp->rope_dim / 2;

    /* batched projections */
    TRY(ds4rt_attn_project_q(hp, w, pool, s, n));
    TRY(ds4rt_attn_project_kv(hp, w, pool, s->xn, n, s->kv));
    if (R != 0) {
        TRY(ds4rt_matmul(pool, &w->c_kv, s->xn, n, s->cu));
        TRY(ds4rt_matmul(pool, &w->c_gate, s->xn, n, s->cg));
    }
    if (R == 4) {
        TRY(ds4rt_matmul(pool, &w->ic_kv, s->xn, n, s->iu));
        TRY(ds4rt_matmul(pool, &w->ic_gate, s->xn, n, s->ig));
        TRY(ds4rt_matmul(pool, &w->i_qb, s->qa, n, s->iq));
        TRY(ds4rt_matmul(pool, &w->i_proj, s->xn, n, s->iw));
    }

    /* per-token row work that does not depend on other tokens */
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = pos0 + i;
        double *cs = s->rope_cs + (size_t)i * 2 * half, *sn = cs + half;
        ds4rt_rope_angles(rope, pos, cs, sn);
        float *q = s->q + (size_t)i * hp->q_dim;
        for (uint32_t h = 0; h < H; h++) ds4rt_rope_apply(q + (size_t)h * dh, dh, rope, cs, sn, +1);
        float *kv = s->kv + (size_t)i * dh;
        ds4rt_rope_apply(kv, dh, rope, cs, sn, +1);
        if (t->sim_fp8) ds4rt_fp8_roundtrip(kv, hp->d_nope);
        if (R == 4) {
            float *iq = s->iq + (size_t)i * hp->idx_q_dim;
            for (uint32_t h = 0; h < hp->idx_heads; h++) {
                float *v = iq + (size_t)h * di;
                ds4rt_rope_apply(v, di, rope, cs, sn, +1);
                ds4rt_hadamard(v, di);
                if (t->sim_fp4) ds4rt_fp4_roundtrip(v, di);
            }
            float iscale = (float)(1.0 / sqrt((double)di * hp->idx_heads));
            for (uint32_t h = 0; h < hp->idx_heads; h++) s->iw[(size_t)i * hp->idx_heads + h] *= iscale;
        }
    }

    ds4rt_compressor attn_comp, index_comp;
    layer_compressors(t, l, &attn_comp, &index_comp);

    /* sequential part: each token sees the rows of the tokens before it */
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = pos0 + i;
        int64_t bi = pos - st->batch_start; /* journal index */
        memcpy(ds4rt_raw_row(st, ls, dh, pos), s->kv + (size_t)i * dh, dh * sizeof(float));
        if (R != 0) {
            const float *u = s->cu + (size_t)i * ls->cf.width, *g = s->cg + (size_t)i * ls->cf.width;
            float *jr = ls->journal_c + (size_t)bi * 2 * ls->cf.width;
            memcpy(jr, u, ls->cf.width * sizeof(float));
            memcpy(jr + ls->cf.width, g, ls->cf.width * sizeof(float));
            ds4rt_compressor_push(&attn_comp, &ls->cf, u, g, pos, ls->comp, &ls->n_comp, s->comp_tmp);
        }
        int64_t n_sel = 0;
        if (R == 4) {
            const float *u = s->iu + (size_t)i * ls->icf.width, *g = s->ig + (size_t)i * ls->icf.width;
            float *jr = ls->journal_i + (size_t)bi * 2 * ls->icf.width;
            memcpy(jr, u, ls->icf.width * sizeof(float));
            memcpy(jr + ls->icf.width, g, ls->icf.width * sizeof(float));
            ds4rt_compressor_push(&index_comp, &ls->icf, u, g, pos, ls->icomp, &ls->n_icomp, s->comp_tmp);
            int64_t n_vis = ls->n_icomp;
            if (n_vis <= (int64_t)hp->idx_topk) {
                for (int64_t c = 0; c < n_vis; c++) s->isel[c] = (int32_t)c;
                n_sel = n_vis;
            } else {
                index_job ij = {.qi = s->iq + (size_t)i * hp->idx_q_dim, .w = s->iw + (size_t)i * hp->idx_heads,
                                .rows = ls->icomp, .heads = hp->idx_heads, .dim = di, .scores = s->iscores};
                ds4rt_pool_parallel_for(pool, n_vis, 256, index_rows, &ij);
                n_sel = ds4rt_topk_indices(s->iscores, n_vis, hp->idx_topk, s->iscores_tmp, s->isel);
            }
        }

        /* keys: the raw window, then the visible compressed rows */
        int64_t nk = 0;
        int64_t first = pos - hp->window + 1 < 0 ? 0 : pos - hp->window + 1;
        for (int64_t p = first; p <= pos; p++) s->att_keys[nk++] = ds4rt_raw_row(st, ls, dh, p);
        if (R == 4) {
            for (int64_t c = 0; c < n_sel; c++) s->att_keys[nk++] = ls->comp + (size_t)s->isel[c] * dh;
        } else if (R != 0) {
            for (uint32_t c = 0; c < ls->n_comp; c++) s->att_keys[nk++] = ls->comp + (size_t)c * dh;
        }
        float *q = s->q + (size_t)i * hp->q_dim; /* the output overwrites q, head by head */
        ds4rt_attend(pool, s, q, H, dh, s->att_keys, nk, w->sinks, q);
        double *cs = s->rope_cs + (size_t)i * 2 * half, *sn = cs + half;
        for (uint32_t h = 0; h < H; h++) ds4rt_rope_apply(q + (size_t)h * dh, dh, rope, cs, sn, -1);
    }

    return ds4rt_attn_grouped_output(hp, w, pool, s, n);
}

ds4rt_status ds4rt_attention_rollback(const ds4rt_target *t, uint32_t l, ds4rt_kv_state *st, ds4rt_scratch *s,
                                      int64_t keep) {
    const ds4rt_hparams *hp = &t->hp;
    ds4rt_layer_state *ls = &st->layers[l];
    const uint32_t R = hp->ratio[l];
    if (R == 0) return DS4RT_OK;
    size_t cbytes = (size_t)ls->cf.rows * ls->cf.width * sizeof(float);
    memcpy(ls->cf.kv, ls->snap_cf_kv, cbytes);
    memcpy(ls->cf.score, ls->snap_cf_score, cbytes);
    ls->n_comp = ls->snap_n_comp;
    ds4rt_compressor attn_comp, index_comp;
    layer_compressors(t, l, &attn_comp, &index_comp);
    for (int64_t i = 0; i < keep; i++) {
        const float *jr = ls->journal_c + (size_t)i * 2 * ls->cf.width;
        ds4rt_compressor_push(&attn_comp, &ls->cf, jr, jr + ls->cf.width, st->batch_start + i, ls->comp, &ls->n_comp,
                              s->comp_tmp);
    }
    if (R == 4) {
        size_t ibytes = (size_t)ls->icf.rows * ls->icf.width * sizeof(float);
        memcpy(ls->icf.kv, ls->snap_icf_kv, ibytes);
        memcpy(ls->icf.score, ls->snap_icf_score, ibytes);
        ls->n_icomp = ls->snap_n_icomp;
        for (int64_t i = 0; i < keep; i++) {
            const float *jr = ls->journal_i + (size_t)i * 2 * ls->icf.width;
            ds4rt_compressor_push(&index_comp, &ls->icf, jr, jr + ls->icf.width, st->batch_start + i, ls->icomp,
                                  &ls->n_icomp, s->comp_tmp);
        }
    }
    return DS4RT_OK;
}
