/*
 * gpu_absent.c - the op entries whose kernels are not in this build yet. supports() says no
 * for each (gpu_op_present), so a model needing one is refused at load naming the op; called
 * anyway (a test harness, a bug), each returns DS4RT_ERR_BACKEND naming itself. Each family's
 * entries leave this file when its kernels are in the build (meson.build defines
 * DS4RT_GPU_HAVE_<FAMILY> when hip/<family>.hip is in gpu_kernel_files).
 */
#include "gpu_ops.h"

ds4rt_status gpu_absent(ds4rt_op op) {
    return ds4rt_fail(DS4RT_ERR_BACKEND, "the GPU backend has no kernel for op %s in this build", ds4rt_op_name(op));
}

#ifndef DS4RT_GPU_HAVE_ATTN /* hip/attn.hip */

ds4rt_status gpu_rms_norm(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_df32 w, float eps,
                          ds4rt_df32 out) {
    (void)ctx; (void)rows; (void)width; (void)x; (void)w; (void)eps; (void)out;
    return gpu_absent(DS4RT_OP_RMS_NORM);
}

ds4rt_status gpu_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_rope *r,
                      int sign, ds4rt_df32 x) {
    (void)ctx; (void)in; (void)n; (void)heads; (void)dim; (void)r; (void)sign; (void)x;
    return gpu_absent(DS4RT_OP_ROPE);
}

ds4rt_status gpu_norm_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, ds4rt_df32 w,
                           float eps, const ds4rt_rope *r, ds4rt_df32 x) {
    (void)ctx; (void)in; (void)n; (void)heads; (void)dim; (void)w; (void)eps; (void)r; (void)x;
    return gpu_absent(DS4RT_OP_NORM_ROPE);
}

ds4rt_status gpu_fp8_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x) {
    (void)ctx; (void)rows; (void)stride; (void)width; (void)x;
    return gpu_absent(DS4RT_OP_FP8_ROUND);
}

ds4rt_status gpu_fp4_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x) {
    (void)ctx; (void)rows; (void)stride; (void)width; (void)x;
    return gpu_absent(DS4RT_OP_FP4_ROUND);
}

ds4rt_status gpu_hadamard(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x) {
    (void)ctx; (void)rows; (void)width; (void)x;
    return gpu_absent(DS4RT_OP_HADAMARD);
}

ds4rt_status gpu_kv_store(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t dim, ds4rt_df32 src, ds4rt_df32 ring,
                          uint32_t ring_cap) {
    (void)ctx; (void)in; (void)n; (void)dim; (void)src; (void)ring; (void)ring_cap;
    return gpu_absent(DS4RT_OP_KV_STORE);
}

ds4rt_status gpu_comp_reset(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    (void)ctx; (void)cs;
    return gpu_absent(DS4RT_OP_COMPRESSOR);
}

ds4rt_status gpu_comp_snapshot(ds4rt_bctx *ctx, const ds4rt_comp_state *cs) {
    (void)ctx; (void)cs;
    return gpu_absent(DS4RT_OP_COMPRESSOR);
}

ds4rt_status gpu_comp_update(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, const ds4rt_comp_desc *c,
                             const ds4rt_comp_state *cs, ds4rt_df32 u, ds4rt_df32 g) {
    (void)ctx; (void)in; (void)n; (void)c; (void)cs; (void)u; (void)g;
    return gpu_absent(DS4RT_OP_COMPRESSOR);
}

ds4rt_status gpu_comp_rollback(ds4rt_bctx *ctx, const ds4rt_comp_desc *c, const ds4rt_comp_state *cs,
                               int64_t batch_start, int64_t keep) {
    (void)ctx; (void)c; (void)cs; (void)batch_start; (void)keep;
    return gpu_absent(DS4RT_OP_COMPRESSOR);
}

ds4rt_status gpu_indexer_topk(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 iq,
                              ds4rt_df32 iw, ds4rt_df32 rows, ds4rt_di32 sel, ds4rt_di32 n_sel) {
    (void)ctx; (void)in; (void)hp; (void)n; (void)iq; (void)iw; (void)rows; (void)sel; (void)n_sel;
    return gpu_absent(DS4RT_OP_INDEXER_TOPK);
}

ds4rt_status gpu_attention(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                           const ds4rt_attn_keys *k, ds4rt_df32 sinks, ds4rt_df32 q, ds4rt_df32 out,
                           const ds4rt_rope *unrope) {
    (void)ctx; (void)in; (void)n; (void)heads; (void)dim; (void)k; (void)sinks; (void)q; (void)out;
    (void)unrope;
    return gpu_absent(DS4RT_OP_ATTENTION);
}
#endif

#ifndef DS4RT_GPU_HAVE_MM /* hip/mm.hip */

ds4rt_status gpu_get_rows(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_di32 ids, int64_t n, uint32_t copies,
                          ds4rt_df32 out) {
    (void)ctx; (void)w; (void)ids; (void)n; (void)copies; (void)out;
    return gpu_absent(DS4RT_OP_GET_ROWS);
}

ds4rt_status gpu_matmul(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_df32 x, int64_t n, ds4rt_df32 y) {
    (void)ctx; (void)w; (void)x; (void)n; (void)y;
    return gpu_absent(DS4RT_OP_MATMUL);
}

ds4rt_status gpu_grouped_out(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_dweight *out_a,
                             const ds4rt_dweight *out_b, ds4rt_df32 o, ds4rt_df32 f) {
    (void)ctx; (void)hp; (void)n; (void)out_a; (void)out_b; (void)o; (void)f;
    return gpu_absent(DS4RT_OP_GROUPED_OUT);
}
#endif

#ifndef DS4RT_GPU_HAVE_OPS /* hip/ops.hip */

ds4rt_status gpu_capture(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 dst,
                         uint64_t dst_stride) {
    (void)ctx; (void)hp; (void)n; (void)X; (void)dst; (void)dst_stride;
    return gpu_absent(DS4RT_OP_CAPTURE);
}

ds4rt_status gpu_argmax(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_di32 ids) {
    (void)ctx; (void)rows; (void)width; (void)x; (void)ids;
    return gpu_absent(DS4RT_OP_ARGMAX);
}

ds4rt_status gpu_add(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 a, ds4rt_df32 b, ds4rt_df32 out) {
    (void)ctx; (void)count; (void)a; (void)b; (void)out;
    return gpu_absent(DS4RT_OP_ADD);
}

ds4rt_status gpu_nonfinite(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 x, ds4rt_di32 out) {
    (void)ctx; (void)count; (void)x; (void)out;
    return gpu_absent(DS4RT_OP_NONFINITE);
}

ds4rt_status gpu_dspark_confidence(ds4rt_bctx *ctx, uint32_t d, uint32_t r, ds4rt_df32 proj, ds4rt_df32 h,
                                   ds4rt_df32 state, ds4rt_df32 out) {
    (void)ctx; (void)d; (void)r; (void)proj; (void)h; (void)state; (void)out;
    return gpu_absent(DS4RT_OP_DSPARK_CONFIDENCE);
}

ds4rt_status gpu_hc_pre(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *w,
                        ds4rt_df32 norm, ds4rt_df32 X, ds4rt_df32 xn, ds4rt_df32 post, ds4rt_df32 comb) {
    (void)ctx; (void)hp; (void)n; (void)w; (void)norm; (void)X; (void)xn; (void)post; (void)comb;
    return gpu_absent(DS4RT_OP_HC_PRE);
}

ds4rt_status gpu_hc_post(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 f,
                         ds4rt_df32 post, ds4rt_df32 comb, ds4rt_df32 X_out) {
    (void)ctx; (void)hp; (void)n; (void)X; (void)f; (void)post; (void)comb; (void)X_out;
    return gpu_absent(DS4RT_OP_HC_POST);
}

ds4rt_status gpu_hc_head(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *head,
                         ds4rt_df32 X, ds4rt_df32 y) {
    (void)ctx; (void)hp; (void)n; (void)head; (void)X; (void)y;
    return gpu_absent(DS4RT_OP_HC_HEAD);
}
#endif

#ifndef DS4RT_GPU_HAVE_MOE /* hip/mm.hip and hip/ops.hip */

ds4rt_status gpu_moe(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, const ds4rt_moe_weights *w,
                     float clamp, float clamp_sh, ds4rt_df32 x, ds4rt_df32 f) {
    (void)ctx; (void)in; (void)hp; (void)n; (void)w; (void)clamp; (void)clamp_sh; (void)x; (void)f;
    return gpu_absent(DS4RT_OP_MOE);
}
#endif
