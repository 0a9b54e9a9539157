/*
 * drafter.c - DSpark's per-session drafter: context rows (fusion -> per-stage KV ring), the
 * stage chain over the block, the final head, and the lazy Markov/confidence heads
 * (dspark.md §2.3-§2.9 in DeepSeek's reference alignment; see dspark.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"
#include "block.h"
#include "dspark.h"
#include "internal.h"
#include "moe.h"
#include "sampling.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

static int64_t ring_cap(const ds4rt_drafter *dr) { return (int64_t)dr->d->window + dr->max_batch; }

static float *ring_row(const ds4rt_drafter *dr, uint32_t stage, int64_t pos) {
    const uint32_t dh = dr->d->target->hp.head_dim;
    int64_t cap = ring_cap(dr);
    return dr->ring + ((size_t)stage * cap + (size_t)(pos % cap)) * dh;
}

ds4rt_status ds4rt_drafter_create(const struct ds4rt_dspark *d, int64_t max_batch, int n_threads,
                                  ds4rt_drafter *dr) {
    memset(dr, 0, sizeof *dr);
    dr->d = d;
    dr->max_batch = max_batch;
    const ds4rt_hparams *hp = &d->target->hp;
    const int64_t B = d->block_size, D = hp->n_embd, V = hp->n_vocab, R = d->markov_rank;
    ds4rt_status st =
        ds4rt_scratch_create(hp, B, 1, n_threads, (int64_t)d->window + B, &dr->scratch);
    if (st != DS4RT_OK) return st;
    bool ok = true;
#define F(ptr, count) ok = ok && ((ptr) = calloc((size_t)(count), sizeof *(ptr))) != NULL
    F(dr->ring, (int64_t)d->n_stages * ring_cap(dr) * hp->head_dim);
    F(dr->cat, max_batch * d->n_tgt * D);
    F(dr->main_x, max_batch * D);
    F(dr->ctx_kv, max_batch * (int64_t)hp->head_dim);
    F(dr->X, B * (int64_t)hp->hc_dim);
    F(dr->X2, B * (int64_t)hp->hc_dim);
    F(dr->blk_kv, B * (int64_t)hp->head_dim);
    F(dr->h, B * D);
    F(dr->hn, B * D);
    F(dr->U, B * V);
    F(dr->corrected, B * V);
    F(dr->markov_state, R);
    F(dr->markov_bias, V);
    F(dr->conf_in, D + R);
    F(dr->keys, (int64_t)d->window + B);
#undef F
    if (!ok) {
        ds4rt_drafter_free(dr);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "DSpark drafter buffers");
    }
    return DS4RT_OK;
}

void ds4rt_drafter_free(ds4rt_drafter *dr) {
    ds4rt_scratch_free(&dr->scratch);
    void *ptrs[] = {dr->ring, dr->cat, dr->main_x, dr->ctx_kv, dr->X, dr->X2, dr->blk_kv, dr->h,
                    dr->hn, dr->U, dr->corrected, dr->markov_state, dr->markov_bias, dr->conf_in, (void *)dr->keys};
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(ptrs); i++) free(ptrs[i]);
    memset(dr, 0, sizeof *dr);
}

void ds4rt_drafter_reset(ds4rt_drafter *dr) { ds4rt_drafter_restart(dr, 0); }

void ds4rt_drafter_restart(ds4rt_drafter *dr, int64_t base) {
    dr->base = dr->end = dr->start = base;
}

/* ---- context rows -------------------------------------------------------------------------- */

ds4rt_status ds4rt_drafter_commit(ds4rt_drafter *dr, ds4rt_pool *pool, const float *const *capture, int64_t first,
                                  int64_t m, double *ms_fusion) {
    const struct ds4rt_dspark *d = dr->d;
    const ds4rt_hparams *hp = &d->target->hp;
    const uint32_t D = hp->n_embd, dh = hp->head_dim;
    if (first != dr->end)
        return ds4rt_fail(DS4RT_ERR_STATE, "DSpark context rows end at position %lld; cannot append position %lld",
                          (long long)dr->end, (long long)first);
    if (m < 0 || m > dr->max_batch)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "DSpark commit of %lld rows (at most %lld)", (long long)m,
                          (long long)dr->max_batch);
    /* rows that can still matter: the last ring_cap positions */
    int64_t skip = m > ring_cap(dr) ? m - ring_cap(dr) : 0, k = m - skip;
    for (int64_t r = 0; r < k; r++)
        for (uint32_t slot = 0; slot < d->n_tgt; slot++)
            memcpy(dr->cat + ((size_t)r * d->n_tgt + slot) * D, capture[slot] + (size_t)(skip + r) * D,
                   D * sizeof(float));
    double t0 = ds4rt_now_ms();
    TRY(ds4rt_matmul(pool, &d->main_proj, dr->cat, k, dr->main_x));
    for (int64_t r = 0; r < k; r++)
        ds4rt_rms_norm(dr->main_x + (size_t)r * D, D, d->main_norm, hp->rms_eps, dr->main_x + (size_t)r * D);
    *ms_fusion = ds4rt_now_ms() - t0;
    double cs[DS4RT_MAX_ROPE_PAIRS], sn[DS4RT_MAX_ROPE_PAIRS];
    for (uint32_t s = 0; s < d->n_stages; s++) {
        /* the context row never enters the residual stream: kv_norm_s(wkv_s(main_x)) only */
        TRY(ds4rt_attn_project_kv(hp, &d->stages[s].attn, pool, dr->main_x, k, dr->ctx_kv));
        for (int64_t r = 0; r < k; r++) {
            int64_t pos = first + skip + r;
            float *kv = dr->ctx_kv + (size_t)r * dh;
            ds4rt_rope_angles(&d->rope, pos, cs, sn);
            ds4rt_rope_apply(kv, dh, &d->rope, cs, sn, +1);
            if (d->sim_fp8) ds4rt_fp8_roundtrip(kv, hp->d_nope);
            memcpy(ring_row(dr, s, pos), kv, dh * sizeof(float));
        }
    }
    dr->end = first + m;
    if (dr->end - dr->start > ring_cap(dr)) dr->start = dr->end - ring_cap(dr);
    return DS4RT_OK;
}

ds4rt_status ds4rt_drafter_crop(ds4rt_drafter *dr, int64_t end) {
    if (end > dr->end) return ds4rt_fail(DS4RT_ERR_STATE, "DSpark crop to %lld: rows only reach %lld", (long long)end,
                                         (long long)dr->end);
    int64_t need = end - (int64_t)dr->d->window;
    if (need < dr->base) need = dr->base;
    if (need < dr->start)
        return ds4rt_fail(DS4RT_ERR_STATE, "DSpark crop to %lld: the row of position %lld was overwritten",
                          (long long)end, (long long)need);
    dr->end = end;
    if (dr->start > end) dr->start = end;
    return DS4RT_OK;
}

/* ---- one stage over the block --------------------------------------------------------------- */

static bool all_finite(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return false;
    return true;
}

static ds4rt_status stage_forward(ds4rt_drafter *dr, ds4rt_pool *pool, uint32_t s_idx, int64_t p, const int32_t *ids) {
    const struct ds4rt_dspark *d = dr->d;
    const ds4rt_hparams *hp = &d->target->hp;
    const ds4rt_block_weights *w = &d->stages[s_idx];
    ds4rt_scratch *sc = &dr->scratch;
    const int64_t B = d->block_size;
    const uint32_t D = hp->n_embd, dh = hp->head_dim, H = hp->n_head;
    double cs[DS4RT_MAX_ROPE_PAIRS], sn[DS4RT_MAX_ROPE_PAIRS];

    TRY(ds4rt_hc_pre_batch(hp, &w->hc_attn, pool, sc, dr->X, B));
    for (int64_t i = 0; i < B; i++)
        ds4rt_rms_norm(sc->x + (size_t)i * D, D, w->attn.norm, hp->rms_eps, sc->xn + (size_t)i * D);
    TRY(ds4rt_attn_project_q(hp, &w->attn, pool, sc, B));
    TRY(ds4rt_attn_project_kv(hp, &w->attn, pool, sc->xn, B, dr->blk_kv));
    for (int64_t i = 0; i < B; i++) {
        ds4rt_rope_angles(&d->rope, p + 1 + i, cs, sn);
        float *q = sc->q + (size_t)i * hp->q_dim;
        for (uint32_t h = 0; h < H; h++) ds4rt_rope_apply(q + (size_t)h * dh, dh, &d->rope, cs, sn, +1);
        float *kv = dr->blk_kv + (size_t)i * dh;
        ds4rt_rope_apply(kv, dh, &d->rope, cs, sn, +1);
        if (d->sim_fp8) ds4rt_fp8_roundtrip(kv, hp->d_nope);
    }
    /* keys: the window of context rows ending at p, then every block row (non-causal) */
    int64_t nk = 0, first = p + 1 - (int64_t)d->window;
    if (first < dr->base) first = dr->base;
    for (int64_t q = first; q <= p; q++) dr->keys[nk++] = ring_row(dr, s_idx, q);
    for (int64_t i = 0; i < B; i++) dr->keys[nk++] = dr->blk_kv + (size_t)i * dh;
    for (int64_t i = 0; i < B; i++) {
        float *q = sc->q + (size_t)i * hp->q_dim;
        ds4rt_attend(pool, sc, q, H, dh, dr->keys, nk, w->attn.sinks, q);
        ds4rt_rope_angles(&d->rope, p + 1 + i, cs, sn);
        for (uint32_t h = 0; h < H; h++) ds4rt_rope_apply(q + (size_t)h * dh, dh, &d->rope, cs, sn, -1);
    }
    TRY(ds4rt_attn_grouped_output(hp, &w->attn, pool, sc, B));
    ds4rt_hc_post_batch(hp, sc, dr->X, dr->X2, B);

    TRY(ds4rt_hc_pre_batch(hp, &w->hc_ffn, pool, sc, dr->X2, B));
    for (int64_t i = 0; i < B; i++)
        ds4rt_rms_norm(sc->x + (size_t)i * D, D, w->moe.norm, hp->rms_eps, sc->xn + (size_t)i * D);
    TRY(ds4rt_moe_sublayer(hp, &w->moe, d->clamp, d->clamp_sh, pool, sc, ids, B));
    ds4rt_hc_post_batch(hp, sc, dr->X2, dr->X, B);
    if (!all_finite(dr->X, B * (int64_t)hp->hc_dim))
        return ds4rt_fail(DS4RT_ERR_BACKEND, "DSpark stage %u produced non-finite values", s_idx);
    return DS4RT_OK;
}

/* ---- heads ----------------------------------------------------------------------------------- */

static ds4rt_status markov_row(const struct ds4rt_dspark *d, int32_t prev, float *state) {
    const uint8_t *row = (const uint8_t *)d->markov_w1.data + (size_t)prev * d->markov_w1.row_bytes;
    return ds4rt_dequantize_row(d->markov_w1.type, row, d->markov_rank, state);
}

static float confidence(const struct ds4rt_dspark *d, const float *h, const float *state) {
    const uint32_t D = d->target->hp.n_embd;
    double acc = 0.0;
    for (uint32_t i = 0; i < D; i++) acc += (double)d->conf_proj[i] * h[i];
    for (uint32_t i = 0; i < d->markov_rank; i++) acc += (double)d->conf_proj[D + i] * state[i];
    return (float)(1.0 / (1.0 + exp(-acc)));
}

ds4rt_status ds4rt_drafter_propose(ds4rt_drafter *dr, ds4rt_pool *pool, int32_t anchor, int32_t max_draft,
                                   float threshold, const ds4rt_sampler_params *sp, const double *u, float *work_val,
                                   int32_t *work_idx, ds4rt_proposal *out) {
    const struct ds4rt_dspark *d = dr->d;
    const ds4rt_target *t = d->target;
    const ds4rt_hparams *hp = &t->hp;
    const int64_t B = d->block_size;
    const uint32_t D = hp->n_embd, V = hp->n_vocab, N = hp->hc;
    memset(out, 0, sizeof *out);
    out->corrected = dr->corrected;
    if (dr->end < 1) return ds4rt_fail(DS4RT_ERR_STATE, "DSpark proposal without context rows");
    if (anchor < 0 || (uint32_t)anchor >= V)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "DSpark anchor %d outside the vocabulary", anchor);
    const int64_t p = dr->end - 1;
    if (max_draft > B) max_draft = (int32_t)B;

    double t0 = ds4rt_now_ms();
    int32_t ids[DS4RT_DSPARK_MAX_BLOCK];
    for (int64_t i = 0; i < B; i++) {
        ids[i] = i == 0 ? anchor : (int32_t)d->noise_token;
        float *x = dr->X + (size_t)i * hp->hc_dim;
        const uint8_t *row = (const uint8_t *)t->tok_embd.data + (size_t)ids[i] * t->tok_embd.row_bytes;
        TRY(ds4rt_dequantize_row(t->tok_embd.type, row, D, x));
        for (uint32_t h = 1; h < N; h++) memcpy(x + (size_t)h * D, x, D * sizeof(float));
    }
    double t1 = ds4rt_now_ms();
    out->ms_setup = t1 - t0;
    for (uint32_t s = 0; s < d->n_stages; s++) {
        double ts = ds4rt_now_ms();
        TRY(stage_forward(dr, pool, s, p, ids));
        out->ms_stage[s] = ds4rt_now_ms() - ts;
    }
    double t2 = ds4rt_now_ms();
    out->ms_chain = t2 - t1;
    TRY(ds4rt_hc_head_batch(hp, &d->hc_head, pool, &dr->scratch, dr->X, B, dr->h));
    for (int64_t i = 0; i < B; i++)
        ds4rt_rms_norm(dr->h + (size_t)i * D, D, d->final_norm, hp->rms_eps, dr->hn + (size_t)i * D);
    double t3 = ds4rt_now_ms();
    out->ms_hidden = t3 - t2;

    bool have_logits = false;
    int32_t prev = anchor;
    for (int32_t i = 0; i < max_draft; i++) {
        double tc = ds4rt_now_ms();
        TRY(markov_row(d, prev, dr->markov_state));
        float c = confidence(d, dr->h + (size_t)i * D, dr->markov_state);
        out->conf[out->n_conf++] = c;
        if (i == 0) out->ms_conf0 = ds4rt_now_ms() - tc;
        if (threshold > 0.0f && c < threshold) {
            out->cut = true;
            break;
        }
        if (!have_logits) { /* lazily: a cut at the first slot never pays for the head */
            double tl = ds4rt_now_ms();
            TRY(ds4rt_matmul(pool, &t->output, dr->hn, B, dr->U));
            out->ms_logits = ds4rt_now_ms() - tl;
            have_logits = true;
        }
        double tm = ds4rt_now_ms();
        TRY(ds4rt_matmul(pool, &d->markov_w2, dr->markov_state, 1, dr->markov_bias));
        float *z = dr->corrected + (size_t)i * V;
        const float *Ui = dr->U + (size_t)i * V;
        for (uint32_t v = 0; v < V; v++) z[v] = Ui[v] + dr->markov_bias[v];
        int32_t tok;
        if (sp == NULL || sp->temperature <= 0.0f) {
            tok = ds4rt_argmax(z, V);
        } else {
            ds4rt_sampling_probs(sp, z, V, work_val + V, work_idx, work_val);
            tok = ds4rt_sample_probs(work_val + V, V, u[i]);
        }
        out->tokens[out->n++] = tok;
        prev = tok;
        out->ms_markov += ds4rt_now_ms() - tm;
    }
    return DS4RT_OK;
}
