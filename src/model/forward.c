/*
 * forward.c - the target's forward pass over a batch (docs/MODEL.md, "Batches"), composed
 * against the backend table: one upload of the pass block, the embedding, the layers (each a
 * ds4rt_block_forward), HC head, final norm and output head, then one download of the
 * requested logits rows. Rollback restores the compressor frontiers on the backend.
 */
#include <string.h>

#include "block.h"
#include "ds4rt.h"
#include "internal.h"
#include "target.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

ds4rt_status ds4rt_pass_bufs_create(const ds4rt_target *t, ds4rt_bctx *ctx, int64_t max_batch, int64_t n_ctx,
                                    ds4rt_pass_bufs *pb) {
    const ds4rt_hparams *hp = &t->hp;
    memset(pb, 0, sizeof *pb);
    pb->ctx = ctx;
    int64_t max_comp = 1;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (hp->ratio[l] != 0 && n_ctx / hp->ratio[l] + 2 > max_comp) max_comp = n_ctx / hp->ratio[l] + 2;
    ds4rt_limits lim = {.max_rows = max_batch, .max_keys = hp->window + max_comp, .max_comp = max_comp};
    TRY(ctx->ops->ctx_reserve(ctx, hp, &lim));
    TRY(ds4rt_acts_create(ctx->be, hp, max_batch, max_batch, &pb->acts));
    uint64_t off = 0;
    ds4rt_carve_f32(NULL, &off, (uint64_t)max_batch * hp->n_embd);
    ds4rt_carve_f32(NULL, &off, (uint64_t)max_batch * hp->n_vocab);
    ds4rt_carve_i32(NULL, &off, 1);
    ds4rt_status st = ctx->ops->alloc(ctx->be, DS4RT_MEM_SCRATCH, off * 4, &pb->head_buf);
    if (st != DS4RT_OK) {
        ds4rt_pass_bufs_free(pb);
        return ds4rt_fail_context(st, "output head buffers");
    }
    off = 0;
    pb->hy = ds4rt_carve_f32(pb->head_buf, &off, (uint64_t)max_batch * hp->n_embd);
    pb->logits = ds4rt_carve_f32(pb->head_buf, &off, (uint64_t)max_batch * hp->n_vocab);
    pb->bad = ds4rt_carve_i32(pb->head_buf, &off, 1);
    return DS4RT_OK;
}

void ds4rt_pass_bufs_free(ds4rt_pass_bufs *pb) {
    if (pb->ctx != NULL && pb->head_buf != NULL) pb->ctx->ops->release(pb->ctx->be, pb->head_buf);
    ds4rt_acts_free(&pb->acts);
    memset(pb, 0, sizeof *pb);
}

/* ---- trace: a debugging path, so it may read rows back mid-pass ------------------------------- */

typedef struct trace_ctx {
    ds4rt_forward_args *a;
    ds4rt_bctx *ctx;
    uint32_t layer;
    int64_t pos0;
} trace_ctx;

static ds4rt_status trace_rows(void *user, uint32_t stage, ds4rt_df32 rows, int64_t n, int64_t width) {
    trace_ctx *tc = user;
    ds4rt_forward_args *a = tc->a;
    TRY(ds4rt_download_f32(tc->ctx, rows, (uint64_t)(n * width), a->trace_buf));
    for (int64_t i = 0; i < n; i++)
        a->trace(a->trace_user, tc->layer, stage, tc->pos0 + i, a->trace_buf + (size_t)i * width, width);
    return DS4RT_OK;
}

static ds4rt_status capture_layer(ds4rt_bctx *ctx, const ds4rt_hparams *hp, const ds4rt_capture *c, uint32_t l,
                                  ds4rt_df32 X, int64_t n) {
    if (c == NULL) return DS4RT_OK;
    for (uint32_t slot = 0; slot < c->n_layers; slot++)
        if (c->layers[slot] == l)
            TRY(ctx->ops->capture(ctx, hp, n, X, ds4rt_f32_at(c->rows, slot * c->slot_stride), c->row_stride));
    return DS4RT_OK;
}

/* ---- the pass --------------------------------------------------------------------------------- */

static ds4rt_status run_pass(const ds4rt_target *t, ds4rt_pass_bufs *pb, ds4rt_kv_state *st, ds4rt_forward_args *a,
                             ds4rt_stage_clock *clk);

ds4rt_status ds4rt_target_forward(const ds4rt_target *t, ds4rt_pass_bufs *pb, ds4rt_kv_state *st,
                                  ds4rt_forward_args *a) {
    const ds4rt_hparams *hp = &t->hp;
    const int64_t n = a->n, pos0 = st->n_pos;
    if (n < 1 || n > (int64_t)st->max_batch || n > pb->acts.cap)
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

    ds4rt_stage_clock clk;
    ds4rt_status status = ds4rt_clock_start(&clk, pb->ctx);
    if (status == DS4RT_OK) status = ds4rt_kv_state_begin_batch(pb->ctx, st, n);
    if (status == DS4RT_OK) status = ds4rt_clock_lap(&clk, &a->ms_snapshot);
    if (status == DS4RT_OK) status = run_pass(t, pb, st, a, &clk);
    if (status != DS4RT_OK) {
        /* leave the state as it was before the pass */
        st->n_pos = pos0;
        ds4rt_target_rollback(t, pb->ctx, st, 0);
    }
    return status;
}

/* The static shape of a pass, hashed (FNV-1a): what a captured graph of its layers depends on.
 * Positions and token ids are not in it (the ops read them from the pass block). */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t capture_key(uint64_t h, const ds4rt_capture *c) {
    if (c == NULL) return fnv(h, "-", 1);
    h = fnv(h, &c->rows, sizeof c->rows);
    h = fnv(h, &c->slot_stride, sizeof c->slot_stride);
    h = fnv(h, &c->row_stride, sizeof c->row_stride);
    return fnv(h, c->layers, c->n_layers * sizeof *c->layers);
}

static uint64_t pass_key(const ds4rt_target *t, const ds4rt_pass_bufs *pb, const ds4rt_kv_state *st,
                         const ds4rt_forward_args *a) {
    uint64_t h = 0xcbf29ce484222325ull;
    const void *ptrs[] = {t, pb, st};
    h = fnv(h, ptrs, sizeof ptrs);
    h = fnv(h, &a->n, sizeof a->n);
    h = capture_key(h, a->capture);
    return capture_key(h, a->capture2);
}

/* The embedding and the layers (everything between the pass block's upload and the head). */
static ds4rt_status run_layers(const ds4rt_target *t, ds4rt_pass_bufs *pb, ds4rt_kv_state *st,
                               ds4rt_forward_args *a) {
    const ds4rt_hparams *hp = &t->hp;
    ds4rt_bctx *ctx = pb->ctx;
    const ds4rt_backend_ops *o = ctx->ops;
    ds4rt_acts *acts = &pb->acts;
    const int64_t n = a->n, pos0 = st->n_pos;
    TRY(o->get_rows(ctx, &t->tok_embd, ds4rt_pass_tokens(acts->in), n, hp->hc, acts->X));

    trace_ctx tc = {.a = a, .ctx = ctx, .pos0 = pos0};
    ds4rt_block_run run = {.ctx = ctx, .hp = hp, .a = acts, .n = n, .trace = a->trace ? trace_rows : NULL,
                           .trace_user = &tc};
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        tc.layer = l;
        const uint32_t R = hp->ratio[l];
        ds4rt_block_keys keys = {.rope = R == 0 ? &t->rope_dense : &t->rope_comp, .sim_fp8 = t->sim_fp8,
                                 .sim_fp4 = t->sim_fp4, .layer = &st->layers[l], .raw_cap = st->raw_cap, .ratio = R,
                                 .attn_comp = &t->attn_comp[l], .index_comp = &t->index_comp[l]};
        if (a->trace) TRY(trace_rows(&tc, DS4RT_TRACE_LAYER_IN, acts->X, n, hp->hc_dim));
        TRY(ds4rt_block_forward(&run, &t->layers[l], &keys, hp->clamp_exp[l], hp->clamp_shexp[l]));
        if (a->trace) TRY(trace_rows(&tc, DS4RT_TRACE_LAYER_OUT, acts->X, n, hp->hc_dim));
        TRY(capture_layer(ctx, hp, a->capture, l, acts->X, n));
        TRY(capture_layer(ctx, hp, a->capture2, l, acts->X, n));
    }
    return DS4RT_OK;
}

static ds4rt_status run_pass(const ds4rt_target *t, ds4rt_pass_bufs *pb, ds4rt_kv_state *st, ds4rt_forward_args *a,
                             ds4rt_stage_clock *clk) {
    const ds4rt_hparams *hp = &t->hp;
    ds4rt_bctx *ctx = pb->ctx;
    const ds4rt_backend_ops *o = ctx->ops;
    ds4rt_acts *acts = &pb->acts;
    const int64_t n = a->n, pos0 = st->n_pos;
    const uint32_t D = hp->n_embd;
    /* the only host->backend copy of the pass: positions and token ids */
    TRY(ds4rt_pass_upload(ctx, acts->in, pos0, 0, a->tokens, n));
    TRY(ds4rt_clock_lap(clk, &a->ms_upload));
    /* the layers read nothing back: a backend may replay them as one captured graph (a traced
     * pass reads rows back, so it is never captured) */
    ds4rt_pass_how how = DS4RT_PASS_PLAIN;
    const bool graph = o->pass_begin != NULL && a->trace == NULL;
    if (graph) TRY(o->pass_begin(ctx, pass_key(t, pb, st, a), n, &how));
    a->recorded = how == DS4RT_PASS_RECORDED;
    ds4rt_status status = how == DS4RT_PASS_REPLAYED ? DS4RT_OK : run_layers(t, pb, st, a);
    if (graph) {
        ds4rt_status end = o->pass_end(ctx, status == DS4RT_OK);
        if (status == DS4RT_OK) status = end;
    }
    TRY(status);
    st->n_pos = pos0 + n;
    TRY(ds4rt_clock_lap(clk, &a->ms_layers)); /* waits for the layers, as a synchronize would */

    if (a->logits != NULL && a->logits_from < n) {
        const int64_t from = a->logits_from, m = n - from;
        TRY(o->hc_head(ctx, hp, m, &t->hc_head, ds4rt_f32_at(acts->X, (uint64_t)from * hp->hc_dim), pb->hy));
        if (a->trace) {
            trace_ctx tc = {.a = a, .ctx = ctx, .layer = hp->n_layer, .pos0 = pos0 + from};
            TRY(trace_rows(&tc, DS4RT_TRACE_HEAD, pb->hy, m, D));
        }
        TRY(o->rms_norm(ctx, m, D, pb->hy, t->out_norm, hp->rms_eps, pb->hy));
        TRY(o->matmul(ctx, &t->output, pb->hy, m, pb->logits));
        /* non-finite logits (NaN/Inf weights, an overflow) would be sampled as if they were
         * fine (argmax skips NaN): the pass fails instead, and is undone (issue 13) */
        int32_t bad = 0;
        TRY(o->nonfinite(ctx, m * (int64_t)hp->n_vocab, pb->logits, pb->bad));
        TRY(ds4rt_download_i32(ctx, pb->bad, 1, &bad));
        if (bad != 0)
            return ds4rt_fail(DS4RT_ERR_BACKEND,
                              "the target model's pass over positions %lld..%lld produced %d non-finite logits "
                              "in the rows of positions %lld..%lld (NaN/Inf in the target's weights, or an overflow)",
                              (long long)pos0, (long long)(pos0 + n - 1), bad, (long long)(pos0 + from),
                              (long long)(pos0 + n - 1));
        TRY(ds4rt_clock_lap(clk, &a->ms_head));
        /* the requested logits rows: the pass's only read-back */
        TRY(ds4rt_download_f32(ctx, pb->logits, (uint64_t)m * hp->n_vocab, a->logits));
        TRY(ds4rt_clock_lap(clk, &a->ms_read));
    }
    return DS4RT_OK;
}

ds4rt_status ds4rt_target_rollback(const ds4rt_target *t, ds4rt_bctx *ctx, ds4rt_kv_state *st, int64_t keep) {
    if (keep < 0 || keep > st->batch_len)
        return ds4rt_fail(DS4RT_ERR_STATE, "cannot keep %lld tokens of a last batch of %lld", (long long)keep,
                          (long long)st->batch_len);
    for (uint32_t l = 0; l < t->hp.n_layer; l++) {
        ds4rt_layer_state *ls = &st->layers[l];
        if (t->hp.ratio[l] != 0)
            TRY(ctx->ops->comp_rollback(ctx, &t->attn_comp[l], &ls->comp, st->batch_start, keep));
        if (t->hp.ratio[l] == 4)
            TRY(ctx->ops->comp_rollback(ctx, &t->index_comp[l], &ls->icomp, st->batch_start, keep));
    }
    st->n_pos = st->batch_start + keep;
    st->batch_len = keep;
    return DS4RT_OK;
}
