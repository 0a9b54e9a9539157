/*
 * gpu_matmul.c - matrix products and row gathers of the GPU backend over hip/mm.h (bitwise the
 * CPU backend's: same activation conversion, same summation order, docs/QUANTS.md), and the
 * grouped low-rank output projection: one grouped launch for a few tokens, else composed from
 * the products with 2-D device copies.
 */
#include "gpu_ops.h"
#include "mm.h"

bool gpu_mm_type(uint32_t type) { return ds4rt_gk_mm_supports(type) != 0; }
bool gpu_mm_rows_type(uint32_t type) { return ds4rt_gk_mm_supports(type) != 0; }

ds4rt_gk_weight gpu_weight(const ds4rt_dweight *w) {
    return (ds4rt_gk_weight){.type = w->type, .d_data = DB(w->data), .rows = w->rows, .cols = w->cols,
                             .row_bytes = w->row_bytes};
}

/* The largest activation scratch a context's products need: every weight type, inputs up to
 * the widest row a product of this model reads, up to max_rows rows (k slots per row for the
 * experts). A product that would need more (a shape outside these) grows it: see gpu_act(). */
uint64_t gpu_mm_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim) {
    static const uint32_t TYPES[] = {DS4RT_TYPE_F32,  DS4RT_TYPE_F16,  DS4RT_TYPE_BF16, DS4RT_TYPE_Q8_0,
                                     DS4RT_TYPE_Q4_0, DS4RT_TYPE_MXFP4, DS4RT_TYPE_Q2_K, DS4RT_TYPE_Q4_K,
                                     DS4RT_TYPE_Q5_K, DS4RT_TYPE_Q6_K, DS4RT_TYPE_IQ2_XXS};
    int64_t cols = hp->n_embd;
    const int64_t widths[] = {hp->q_lora, hp->q_dim, hp->group_dim, hp->o_low_dim, hp->expert_ff, hp->shared_ff};
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(widths); i++)
        if (widths[i] > cols) cols = widths[i];
    const int64_t rows = lim->max_rows * (hp->n_expert_used > 0 ? hp->n_expert_used : 1);
    uint64_t best = 0;
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(TYPES); i++) {
        if (!ds4rt_gk_mm_supports(TYPES[i])) continue;
        uint64_t b = ds4rt_gk_matmul_scratch_bytes(TYPES[i], cols, rows);
        if (b > best) best = b;
    }
    return best;
}

ds4rt_status gpu_matmul(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_df32 x, int64_t n, ds4rt_df32 y) {
    ds4rt_dweight f16;
    if (gpu_cache_find(ctx->be, w, &f16)) w = &f16; /* the expansion cache's copy, at every n */
    ds4rt_gk_weight gw = gpu_weight(w);
    void *scratch;
    uint64_t bytes;
    TRY(gpu_act(ctx, ds4rt_gk_matmul_scratch_bytes(w->type, w->cols, n), &scratch, &bytes));
    if (!gctx(ctx)->merges && gpu_hc_type(w->type)) { /* DS4RT_GPU_MERGE=0: float x converted apart */
        GK(ds4rt_gk_act_convert(w->type, DF(x), n, w->cols, scratch, (size_t)bytes, gstream(ctx)), "matmul act");
        GK(ds4rt_gk_matmul_act(&gw, scratch, n, DF(y), gstream(ctx)), "matmul");
        return DS4RT_OK;
    }
    GK(ds4rt_gk_matmul(&gw, DF(x), n, DF(y), scratch, (size_t)bytes, gstream(ctx)), "matmul");
    return DS4RT_OK;
}

ds4rt_status gpu_get_rows(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_di32 ids, int64_t n, uint32_t copies,
                          ds4rt_df32 out) {
    ds4rt_gk_weight gw = gpu_weight(w);
    GK(ds4rt_gk_get_rows(&gw, DI(ids), n, copies, DF(out), gstream(ctx)), "get_rows");
    return DS4RT_OK;
}

ds4rt_status gpu_grouped_out(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_dweight *out_a,
                             const ds4rt_dweight *out_b, ds4rt_df32 o, ds4rt_df32 f) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    void *s = gstream(ctx);
    const size_t gd = hp->group_dim, ro = hp->o_lora;
    ds4rt_gk_weight ga = gpu_weight(out_a);
    if (ds4rt_gk_matmul_grouped_supported(&ga, hp->o_groups, n) && ga.rows == (int64_t)(hp->o_groups * ro) &&
        ga.cols == (int64_t)gd && (int64_t)(gd * hp->o_groups) == hp->q_dim && !gpu_cache_holds(ctx->be, out_a)) {
        /* decode and short verify: o converted once, one launch for every group (the gathers,
         * conversions and scatters below cost ~8 small launches per group) */
        if (gctx(ctx)->merges && ds4rt_gk_matmul_grouped_fused_supported(&ga, hp->o_groups, n)) {
            /* a decode: each thread block converts its group's activations (one launch) */
            GK(ds4rt_gk_matmul_grouped_fused(&ga, hp->o_groups, DF(o), n, DF(ws->low), s), "grouped_out");
            return gpu_matmul(ctx, out_b, ws->low, n, f);
        }
        void *act;
        uint64_t bytes;
        TRY(gpu_act(ctx, ds4rt_gk_act_bytes(out_a->type, hp->q_dim, n), &act, &bytes));
        GK(ds4rt_gk_act_convert(out_a->type, DF(o), n, hp->q_dim, act, (size_t)bytes, s), "grouped_out act");
        GK(ds4rt_gk_matmul_grouped_act(&ga, hp->o_groups, act, n, DF(ws->low), s), "grouped_out");
        return gpu_matmul(ctx, out_b, ws->low, n, f);
    }
    /* group g reads heads [g*H/G, (g+1)*H/G): a contiguous slice of each output row */
    for (uint32_t g = 0; g < hp->o_groups; g++) {
        GK(ds4rt_gk_memcpy2d_d2d(DF(ws->og), gd * 4, DF(o) + g * gd, (size_t)hp->q_dim * 4, gd * 4, (size_t)n, s),
           "grouped_out gather");
        ds4rt_dweight wg = *out_a;
        wg.data.off += (uint64_t)g * ro * out_a->row_bytes;
        wg.rows = (int64_t)ro;
        TRY(gpu_matmul(ctx, &wg, ws->og, n, ws->olow));
        GK(ds4rt_gk_memcpy2d_d2d(DF(ws->low) + g * ro, (size_t)hp->o_low_dim * 4, DF(ws->olow), ro * 4, ro * 4,
                                 (size_t)n, s),
           "grouped_out scatter");
    }
    return gpu_matmul(ctx, out_b, ws->low, n, f);
}
