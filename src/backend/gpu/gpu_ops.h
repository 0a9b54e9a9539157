/*
 * gpu_ops.h - the GPU backend's op entries (one file per family, like the CPU backend's) and
 * what the compiled-in kernels cover. Only src/backend/gpu/ includes this.
 */
#ifndef DS4RT_GPU_OPS_H
#define DS4RT_GPU_OPS_H

#include "gpu_internal.h"

/* Whether this build has the kernels of `op` (the table's answer before the weight type). */
bool gpu_op_present(ds4rt_op op);
/* Weight types the matmul kernels (and so hc_pre, hc_head, grouped_out, moe) and the row
 * gather compute with. */
bool gpu_matmul_type(uint32_t type);
bool gpu_get_rows_type(uint32_t type);
bool gpu_hc_float_type(uint32_t type); /* hc_pre / hc_head's fn */

/* Per family (defined where the family's kernels are in the build): the weight types its
 * kernels take and the kernel scratch its ops need (gpu_caps.c takes the largest). */
bool gpu_mm_type(uint32_t type);
bool gpu_mm_rows_type(uint32_t type);
uint64_t gpu_mm_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim);
uint64_t gpu_attn_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim);
uint32_t gpu_attn_max_head_dim(void);
bool gpu_hc_type(uint32_t type);
uint64_t gpu_ops_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim);

/* A backend weight as the matmul launchers take it (gpu_matmul.c). */
struct ds4rt_gk_weight;
struct ds4rt_gk_weight gpu_weight(const ds4rt_dweight *w);

/* An op without a kernel in this build: DS4RT_ERR_BACKEND naming it (supports() said no). */
ds4rt_status gpu_absent(ds4rt_op op);

ds4rt_status gpu_get_rows(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_di32 ids, int64_t n, uint32_t copies,
                          ds4rt_df32 out);
ds4rt_status gpu_rms_norm(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_df32 w, float eps,
                          ds4rt_df32 out);
ds4rt_status gpu_norm_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, ds4rt_df32 w,
                           float eps, const ds4rt_rope *r, ds4rt_df32 x);
ds4rt_status gpu_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_rope *r,
                      int sign, ds4rt_df32 x);
ds4rt_status gpu_fp8_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x);
ds4rt_status gpu_fp4_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x);
ds4rt_status gpu_hadamard(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x);
ds4rt_status gpu_capture(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 dst,
                         uint64_t dst_stride);
ds4rt_status gpu_argmax(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_di32 ids);
ds4rt_status gpu_add(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 a, ds4rt_df32 b, ds4rt_df32 out);
ds4rt_status gpu_nonfinite(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 x, ds4rt_di32 out);
ds4rt_status gpu_dspark_confidence(ds4rt_bctx *ctx, uint32_t d, uint32_t r, ds4rt_df32 proj, ds4rt_df32 h,
                                   ds4rt_df32 state, ds4rt_df32 out);
ds4rt_status gpu_hc_pre(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *w,
                        ds4rt_df32 norm, ds4rt_df32 X, ds4rt_df32 xn, ds4rt_df32 post, ds4rt_df32 comb);
ds4rt_status gpu_hc_post(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 f,
                         ds4rt_df32 post, ds4rt_df32 comb, ds4rt_df32 X_out);
ds4rt_status gpu_hc_head(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *head,
                         ds4rt_df32 X, ds4rt_df32 y);
ds4rt_status gpu_matmul(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_df32 x, int64_t n, ds4rt_df32 y);
ds4rt_status gpu_grouped_out(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_dweight *out_a,
                             const ds4rt_dweight *out_b, ds4rt_df32 o, ds4rt_df32 f);
ds4rt_status gpu_kv_store(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t dim, ds4rt_df32 src, ds4rt_df32 ring,
                          uint32_t ring_cap);
ds4rt_status gpu_comp_reset(ds4rt_bctx *ctx, const ds4rt_comp_state *cs);
ds4rt_status gpu_comp_snapshot(ds4rt_bctx *ctx, const ds4rt_comp_state *cs);
ds4rt_status gpu_comp_update(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, const ds4rt_comp_desc *c,
                             const ds4rt_comp_state *cs, ds4rt_df32 u, ds4rt_df32 g);
ds4rt_status gpu_comp_rollback(ds4rt_bctx *ctx, const ds4rt_comp_desc *c, const ds4rt_comp_state *cs,
                               int64_t batch_start, int64_t keep);
ds4rt_status gpu_indexer_topk(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 iq,
                              ds4rt_df32 iw, ds4rt_df32 rows, ds4rt_di32 sel, ds4rt_di32 n_sel);
ds4rt_status gpu_attention(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                           const ds4rt_attn_keys *k, ds4rt_df32 sinks, ds4rt_df32 q, ds4rt_df32 out,
                           const ds4rt_rope *unrope);
ds4rt_status gpu_moe(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, const ds4rt_moe_weights *w,
                     float clamp, float clamp_sh, ds4rt_df32 x, ds4rt_df32 f);

#endif /* DS4RT_GPU_OPS_H */
