/*
 * forward.c - the target's forward pass over a batch (dsv4-architecture.md §8), layer-major:
 * every matrix product runs once for the whole batch (batch-invariant kernels), every
 * order-dependent step runs token by token in position order.
 */
#include <string.h>

#include "attention.h"
#include "block.h"
#include "ds4rt.h"
#include "internal.h"
#include "moe.h"
#include "target.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

static void trace_rows(const ds4rt_forward_args *a, uint32_t layer, uint32_t stage, int64_t pos0, const float *rows,
                       int64_t n, int64_t width) {
    if (a->trace == NULL) return;
    for (int64_t i = 0; i < n; i++) a->trace(a->trace_user, layer, stage, pos0 + i, rows + (size_t)i * width, width);
}

static void capture_layer(const ds4rt_hparams *hp, const ds4rt_capture *c, uint32_t l, const float *X, int64_t n) {
    if (c == NULL) return;
    for (uint32_t slot = 0; slot < c->n_layers; slot++) {
        if (c->layers[slot] != l) continue;
        const uint32_t N = hp->hc, D = hp->n_embd;
        for (int64_t t = 0; t < n; t++) {
            float *row = c->rows + (size_t)slot * c->stride + (size_t)t * D;
            const float *Xt = X + (size_t)t * hp->hc_dim;
            for (uint32_t d = 0; d < D; d++) {
                float acc = 0.0f;
                for (uint32_t h = 0; h < N; h++) acc += Xt[(size_t)h * D + d];
                row[d] = acc / (float)N;
            }
        }
    }
}

static ds4rt_status run_pass(const ds4rt_target *t, ds4rt_pool *pool, ds4rt_kv_state *st, ds4rt_scratch *s,
                             ds4rt_forward_args *a);

ds4rt_status ds4rt_target_forward(const ds4rt_target *t, ds4rt_pool *pool, ds4rt_kv_state *st,
                                  ds4rt_scratch *s, ds4rt_forward_args *a) {
    const ds4rt_hparams *hp = &t->hp;
    const int64_t n = a->n, pos0 = st->n_pos;
    if (n < 1 || n > (int64_t)st->max_batch || n > s->cap)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "batch of %lld tokens; this session takes 1..%u per pass",
                          (long long)n, st->max_batch);
    if (pos0 + n > st->n_ctx)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "context full: %lld + %lld tokens exceed the session's n_ctx %lld",
                          (long long)pos0, (long long)n, (long long)st->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (a->tokens[i] < 0 || (uint32_t)a->tokens[i] >= hp->n_vocab)
            return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "token id %d at batch index %lld is outside [0, %u)",
                              a->tokens[i], (long long)i, hp->n_vocab);
    if (a->logits_from < 0 || a->logits_from > n)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "logits_from %lld outside [0, %lld]", (long long)a->logits_from,
                          (long long)n);

    double t0 = ds4rt_now_ms();
    ds4rt_kv_state_begin_batch(st, n);
    a->ms_snapshot = ds4rt_now_ms() - t0;
    ds4rt_status status = run_pass(t, pool, st, s, a);
    if (status != DS4RT_OK) {
        /* leave the state as it was before the pass */
        st->n_pos = pos0;
        ds4rt_target_rollback(t, st, s, 0);
    }
    return status;
}

static ds4rt_status run_pass(const ds4rt_target *t, ds4rt_pool *pool, ds4rt_kv_state *st, ds4rt_scratch *s,
                             ds4rt_forward_args *a) {
    const ds4rt_hparams *hp = &t->hp;
    const int64_t n = a->n, pos0 = st->n_pos;
    const uint32_t N = hp->hc, D = hp->n_embd;
    float *X = s->X, *X2 = s->X2;
    double t_layers = ds4rt_now_ms();
    for (int64_t i = 0; i < n; i++) {
        float *x = s->x + (size_t)i * D;
        const uint8_t *row = (const uint8_t *)t->tok_embd.data + (size_t)a->tokens[i] * t->tok_embd.row_bytes;
        TRY(ds4rt_dequantize_row(t->tok_embd.type, row, D, x));
        for (uint32_t h = 0; h < N; h++) memcpy(X + (size_t)i * hp->hc_dim + (size_t)h * D, x, D * sizeof(float));
    }

    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const ds4rt_block_weights *bw = &t->layers[l];
        trace_rows(a, l, DS4RT_TRACE_LAYER_IN, pos0, X, n, hp->hc_dim);

        TRY(ds4rt_hc_pre_batch(hp, &bw->hc_attn, pool, s, X, n));
        for (int64_t i = 0; i < n; i++)
            ds4rt_rms_norm(s->x + (size_t)i * D, D, bw->attn.norm, hp->rms_eps, s->xn + (size_t)i * D);
        trace_rows(a, l, DS4RT_TRACE_ATTN_IN, pos0, s->xn, n, D);
        TRY(ds4rt_attention_sublayer(t, l, pool, st, s, n, pos0));
        trace_rows(a, l, DS4RT_TRACE_ATTN_OUT, pos0, s->f, n, D);
        ds4rt_hc_post_batch(hp, s, X, X2, n);
        float *tmp = X;
        X = X2;
        X2 = tmp;
        trace_rows(a, l, DS4RT_TRACE_ATTN_HC, pos0, X, n, hp->hc_dim);

        TRY(ds4rt_hc_pre_batch(hp, &bw->hc_ffn, pool, s, X, n));
        for (int64_t i = 0; i < n; i++)
            ds4rt_rms_norm(s->x + (size_t)i * D, D, bw->moe.norm, hp->rms_eps, s->xn + (size_t)i * D);
        trace_rows(a, l, DS4RT_TRACE_FFN_IN, pos0, s->xn, n, D);
        TRY(ds4rt_moe_sublayer(hp, &bw->moe, hp->clamp_exp[l], hp->clamp_shexp[l], pool, s, a->tokens, n));
        trace_rows(a, l, DS4RT_TRACE_FFN_OUT, pos0, s->f, n, D);
        ds4rt_hc_post_batch(hp, s, X, X2, n);
        tmp = X;
        X = X2;
        X2 = tmp;
        trace_rows(a, l, DS4RT_TRACE_LAYER_OUT, pos0, X, n, hp->hc_dim);
        capture_layer(hp, a->capture, l, X, n);
        capture_layer(hp, a->capture2, l, X, n);
    }
    st->n_pos = pos0 + n;
    double t_head = ds4rt_now_ms();
    a->ms_layers = t_head - t_layers;

    if (a->logits != NULL && a->logits_from < n) {
        const int64_t from = a->logits_from, m = n - from;
        TRY(ds4rt_hc_head_batch(hp, &t->hc_head, pool, s, X + (size_t)from * hp->hc_dim, m, s->hy));
        for (int64_t i = 0; i < m; i++) {
            float *y = s->hy + (size_t)i * D;
            trace_rows(a, hp->n_layer, DS4RT_TRACE_HEAD, pos0 + from + i, y, 1, D);
            ds4rt_rms_norm(y, D, t->out_norm, hp->rms_eps, y);
        }
        TRY(ds4rt_matmul(pool, &t->output, s->hy, m, a->logits));
    }
    a->ms_head = ds4rt_now_ms() - t_head;
    return DS4RT_OK;
}

ds4rt_status ds4rt_target_rollback(const ds4rt_target *t, ds4rt_kv_state *st, ds4rt_scratch *s, int64_t keep) {
    if (keep < 0 || keep > st->batch_len)
        return ds4rt_fail(DS4RT_ERR_STATE, "cannot keep %lld tokens of a last batch of %lld", (long long)keep,
                          (long long)st->batch_len);
    for (uint32_t l = 0; l < t->hp.n_layer; l++) TRY(ds4rt_attention_rollback(t, l, st, s, keep));
    st->n_pos = st->batch_start + keep;
    st->batch_len = keep;
    return DS4RT_OK;
}
