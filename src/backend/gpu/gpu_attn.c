/*
 * gpu_attn.c - the attention-side ops of the GPU backend over hip/attn.h's launchers: norms,
 * RoPE, the FP8/FP4 simulations, the Hadamard rotation, the raw KV ring, the compressors, the
 * lightning indexer and attention with sinks. Each op translates views into device addresses
 * and enqueues one launcher on the context's stream; dynamic values stay in the pass block.
 */
#include "attn.h"
#include "gpu_ops.h"

static ds4rt_gk_rope_params grope(const ds4rt_rope *r) {
    return (ds4rt_gk_rope_params){.n_rot = r->n_rot, .base = r->base, .yarn = r->yarn, .yarn_scale = r->yarn_scale,
                           .yarn_lo = r->yarn_lo, .yarn_hi = r->yarn_hi};
}

ds4rt_status gpu_rms_norm(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_df32 w, float eps,
                          ds4rt_df32 out) {
    GK(ds4rt_gk_rms_norm(rows, width, DF(x), DF(w), eps, DF(out), gstream(ctx)), "rms_norm");
    return DS4RT_OK;
}

ds4rt_status gpu_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_rope *r,
                      int sign, ds4rt_df32 x) {
    ds4rt_gk_rope_params gr = grope(r);
    GK(ds4rt_gk_rope(DPASS(in), n, heads, dim, &gr, sign, DF(x), gstream(ctx)), "rope");
    return DS4RT_OK;
}

ds4rt_status gpu_norm_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, ds4rt_df32 w,
                           float eps, const ds4rt_rope *r, ds4rt_df32 x) {
    ds4rt_gk_rope_params gr = grope(r);
    GK(ds4rt_gk_norm_rope(DPASS(in), n, heads, dim, DF(w), eps, &gr, DF(x), gstream(ctx)), "norm_rope");
    return DS4RT_OK;
}

ds4rt_status gpu_fp8_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x) {
    GK(ds4rt_gk_fp8_round(rows, stride, width, DF(x), gstream(ctx)), "fp8_round");
    return DS4RT_OK;
}

ds4rt_status gpu_fp4_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x) {
    GK(ds4rt_gk_fp4_round(rows, stride, width, DF(x), gstream(ctx)), "fp4_round");
    return DS4RT_OK;
}

ds4rt_status gpu_hadamard(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x) {
    GK(ds4rt_gk_hadamard(rows, width, DF(x), gstream(ctx)), "hadamard");
    return DS4RT_OK;
}

ds4rt_status gpu_kv_store(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t dim, ds4rt_df32 src, ds4rt_df32 ring,
                          uint32_t ring_cap) {
    GK(ds4rt_gk_kv_store(DPASS(in), n, dim, DF(src), DF(ring), ring_cap, gstream(ctx)), "kv_store");
    return DS4RT_OK;
}

/* ---- compressors ---------------------------------------------------------------------------- */

static ds4rt_gk_comp_state gstate(const ds4rt_comp_state *cs) {
    return (ds4rt_gk_comp_state){.d_kv = DF(cs->kv), .d_score = DF(cs->score), .d_snap_kv = DF(cs->snap_kv),
                                 .d_snap_score = DF(cs->snap_score), .d_journal = DF(cs->journal),
                                 .d_out = DF(cs->out), .rows = cs->rows, .width = cs->width, .cap = cs->cap};
}

static ds4rt_gk_comp_desc gdesc(const ds4rt_comp_desc *c) {
    return (ds4rt_gk_comp_desc){.ratio = c->ratio, .dim = c->dim, .d_nope = c->d_nope, .d_ape = DF(c->ape),
                                .d_norm = DF(c->norm), .rms_eps = c->rms_eps, .rope = grope(&c->rope),
                                .post = (int)c->post};
}

ds4rt_status gpu_comp_reset(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    ds4rt_gk_comp_state s = gstate(cs);
    GK(ds4rt_gk_comp_reset(&s, gstream(ctx)), "comp_reset");
    return DS4RT_OK;
}

ds4rt_status gpu_comp_snapshot(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    ds4rt_gk_comp_state s = gstate(cs);
    GK(ds4rt_gk_comp_snapshot(&s, gstream(ctx)), "comp_snapshot");
    return DS4RT_OK;
}

ds4rt_status gpu_comp_update(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, const ds4rt_comp_desc *c,
                             const ds4rt_comp_state *cs, ds4rt_df32 u, ds4rt_df32 g) {
    ds4rt_gk_comp_state s = gstate(cs);
    ds4rt_gk_comp_desc d = gdesc(c);
    GK(ds4rt_gk_comp_update(DPASS(in), n, &d, &s, DF(u), DF(g), gstream(ctx)), "comp_update");
    return DS4RT_OK;
}

ds4rt_status gpu_comp_rollback(ds4rt_bctx *ctx, const ds4rt_comp_desc *c, const ds4rt_comp_state *cs,
                               int64_t batch_start, int64_t keep) {
    ds4rt_gk_comp_state s = gstate(cs);
    ds4rt_gk_comp_desc d = gdesc(c);
    GK(ds4rt_gk_comp_rollback(&d, &s, batch_start, keep, gstream(ctx)), "comp_rollback");
    return DS4RT_OK;
}

/* ---- indexer and attention -------------------------------------------------------------------- */

ds4rt_status gpu_indexer_topk(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 iq,
                              ds4rt_df32 iw, ds4rt_df32 rows, ds4rt_di32 sel, ds4rt_di32 n_sel) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    GK(ds4rt_gk_indexer_topk(DPASS(in), n, hp->idx_heads, hp->idx_dim, hp->idx_topk, ws->lim.max_comp, DF(iq),
                             DF(iw), DF(rows), DI(sel), DI(n_sel), ws->kscratch, (size_t)ws->kscratch_bytes,
                             gstream(ctx)),
       "indexer_topk");
    return DS4RT_OK;
}

ds4rt_status gpu_attention(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                           const ds4rt_attn_keys *k, ds4rt_df32 sinks, ds4rt_df32 q, ds4rt_df32 out,
                           const ds4rt_rope *unrope) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    ds4rt_gk_attn_keys gk = {.d_ring = DF(k->ring), .ring_cap = k->ring_cap, .window = k->window, .block = k->block,
                             .d_block_rows = DF(k->block_rows), .comp_ratio = k->comp_ratio, .d_comp = DF(k->comp),
                             .d_sel = DI(k->sel), .d_n_sel = DI(k->n_sel), .sel_stride = k->sel_stride};
    if ((uint64_t)n * heads > ws->n_tickets)
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "attention of %lld rows x %u heads over a workspace reserved for %llu",
                          (long long)n, heads, (unsigned long long)ws->n_tickets);
    const ds4rt_gk_rope_params gr = unrope != NULL ? grope(unrope) : (ds4rt_gk_rope_params){0};
    GK(ds4rt_gk_attention(DPASS(in), n, heads, dim, &gk, DF(sinks), DF(q), DF(out), unrope != NULL ? &gr : NULL,
                          ws->kscratch, (size_t)ws->kscratch_bytes, (uint32_t *)(void *)DI(ws->tickets), gstream(ctx)),
       "attention");
    return DS4RT_OK;
}

uint32_t gpu_attn_max_head_dim(void) { return ds4rt_gk_attention_max_dim(); }

uint64_t gpu_attn_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim) {
    uint64_t a = ds4rt_gk_attention_scratch_bytes(lim->max_rows, hp->n_head, hp->head_dim);
    uint64_t b = ds4rt_gk_indexer_topk_scratch_bytes(lim->max_rows, lim->max_comp);
    return a > b ? a : b;
}
