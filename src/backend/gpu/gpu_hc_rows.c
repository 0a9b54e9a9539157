/*
 * gpu_hc_rows.c - the hyper-connection and row ops of the GPU backend over hip/ops.h: HC pre
 * (with Sinkhorn), HC post, HC head, DSpark's capture, argmax, add, the non-finite count and
 * DSpark's confidence head.
 */
#include "gpu_ops.h"
#include "ops.h"

/* The HC mixing kernels take float fn matrices (the published files store them as F16). */
bool gpu_hc_type(uint32_t type) {
    return type == DS4RT_GK_TYPE_F32 || type == DS4RT_GK_TYPE_F16 || type == DS4RT_GK_TYPE_BF16;
}

static ds4rt_gk_hc_dims hc_dims(const ds4rt_hparams *hp) {
    return (ds4rt_gk_hc_dims){.n_hc = hp->hc, .d = hp->n_embd, .sinkhorn_iters = hp->sinkhorn_iters,
                              .hc_eps = hp->hc_eps, .rms_eps = hp->rms_eps};
}

uint64_t gpu_ops_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim) {
    return ds4rt_gk_hc_scratch_bytes(lim->max_rows, hp->hc, hp->n_embd);
}

ds4rt_status gpu_hc_pre(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *w,
                        ds4rt_df32 norm, ds4rt_df32 X, ds4rt_df32 xn, ds4rt_df32 post, ds4rt_df32 comb) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    ds4rt_gk_hc_dims d = hc_dims(hp);
    if (!gctx(ctx)->side_sinkhorn) {
        GK(ds4rt_gk_hc_pre(&d, n, w->fn.type, DB(w->fn.data), w->fn.row_bytes, DF(w->scale), DF(w->base), DF(norm),
                           DF(X), DF(xn), DF(post), DF(comb), ws->kscratch, (size_t)ws->kscratch_bytes, gstream(ctx)),
           "hc_pre");
        return DS4RT_OK;
    }
    GK(ds4rt_gk_hc_pre_raw(&d, n, w->fn.type, DB(w->fn.data), w->fn.row_bytes, DF(w->scale), DF(w->base), DF(norm),
                           DF(X), DF(xn), DF(post), DF(comb), ws->kscratch, (size_t)ws->kscratch_bytes, gstream(ctx)),
       "hc_pre");
    /* the Sinkhorn beside the sublayer: comb is read by hc_post only, which joins first */
    void *side;
    TRY(gpu_side_fork(ctx, &side));
    GK(ds4rt_gk_hc_sinkhorn(&d, n, DF(w->scale), DF(w->base), DF(comb), side), "hc_pre sinkhorn");
    return gpu_side_done(ctx);
}

ds4rt_status gpu_hc_post(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 f,
                         ds4rt_df32 post, ds4rt_df32 comb, ds4rt_df32 X_out) {
    ds4rt_gk_hc_dims d = hc_dims(hp);
    TRY(gpu_side_join(ctx)); /* hc_pre's Sinkhorn wrote comb */
    GK(ds4rt_gk_hc_post(&d, n, DF(X), DF(f), DF(post), DF(comb), DF(X_out), gstream(ctx)), "hc_post");
    return DS4RT_OK;
}

ds4rt_status gpu_hc_head(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *head,
                         ds4rt_df32 X, ds4rt_df32 y) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    ds4rt_gk_hc_dims d = hc_dims(hp);
    GK(ds4rt_gk_hc_head(&d, n, head->fn.type, DB(head->fn.data), head->fn.row_bytes, DF(head->scale),
                        DF(head->base), DF(X), DF(y), ws->kscratch, (size_t)ws->kscratch_bytes, gstream(ctx)),
       "hc_head");
    return DS4RT_OK;
}

ds4rt_status gpu_capture(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 dst,
                         uint64_t dst_stride) {
    GK(ds4rt_gk_capture(hp->hc, hp->n_embd, n, DF(X), DF(dst), dst_stride, gstream(ctx)), "capture");
    return DS4RT_OK;
}

ds4rt_status gpu_argmax(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_di32 ids) {
    GK(ds4rt_gk_argmax(rows, width, DF(x), DI(ids), gstream(ctx)), "argmax");
    return DS4RT_OK;
}

ds4rt_status gpu_add(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 a, ds4rt_df32 b, ds4rt_df32 out) {
    GK(ds4rt_gk_add(count, DF(a), DF(b), DF(out), gstream(ctx)), "add");
    return DS4RT_OK;
}

ds4rt_status gpu_nonfinite(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 x, ds4rt_di32 out) {
    GK(ds4rt_gk_nonfinite(count, DF(x), DI(out), gstream(ctx)), "nonfinite");
    return DS4RT_OK;
}

ds4rt_status gpu_dspark_confidence(ds4rt_bctx *ctx, uint32_t d, uint32_t r, ds4rt_df32 proj, ds4rt_df32 h,
                                   ds4rt_df32 state, ds4rt_df32 out) {
    GK(ds4rt_gk_dspark_confidence(d, r, DF(proj), DF(h), DF(state), DF(out), gstream(ctx)), "dspark_confidence");
    return DS4RT_OK;
}
