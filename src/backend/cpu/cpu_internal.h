/*
 * cpu_internal.h - the CPU backend's context and the one place where its views become host
 * pointers. Only src/backend/cpu/ includes this.
 */
#ifndef DS4RT_CPU_INTERNAL_H
#define DS4RT_CPU_INTERNAL_H

#include <string.h>

#include "backend_impl.h"
#include "cpu_workspace.h"
#include "internal.h"
#include "matmul.h"
#include "threadpool.h"

/* The RoPE angles of one (rope, position): every layer of a pass rotates the same positions
 * with the same few ropes, and the angles (a pow, sin and cos per pair) cost more than the
 * rotations, so cpu_rope keeps the last CPU_ROPE_SLOTS it computed (cpu_rows.c). */
#define CPU_ROPE_SLOTS 32
#define CPU_ROPE_PAIRS 64 /* ropes of more pairs are not kept */
typedef struct cpu_rope_angles {
    ds4rt_rope r;
    int64_t pos;
    bool used;
    double cs[CPU_ROPE_PAIRS], sn[CPU_ROPE_PAIRS];
} cpu_rope_angles;

/* The lazy snapshot of one compressor state (cpu_compressor.c): comp_snapshot copies nothing;
 * the first push of a pass into a frontier slot saves that slot first, and a rollback restores
 * only the saved slots. A decode writes one slot of 128 in a ratio-128 frontier, so copying the
 * whole frontier before every pass (1 MB on the default model) cost more than the pass's pushes. */
typedef struct cpu_comp_saved {
    const float *kv;  /* the frontier it belongs to (the key) */
    uint32_t rows;
    uint8_t *saved;   /* [rows]: 1 if the slot's state at the snapshot is in snap_kv/snap_score */
} cpu_comp_saved;

typedef struct cpu_ctx {
    ds4rt_bctx base;     /* first: the composition sees only this */
    ds4rt_pool *pool;
    cpu_workspace ws;
    cpu_rope_angles rope[CPU_ROPE_SLOTS];
    uint32_t rope_next; /* the slot to replace next */
    double marks[DS4RT_MARK_SLOTS]; /* stage-timer marks: host clock, ms */
    uint32_t marked;                /* bit per slot that holds a mark */
    cpu_comp_saved *comp;           /* one per compressor state snapshotted in this context */
    uint32_t n_comp, cap_comp;
} cpu_ctx;

static inline cpu_ctx *cpu(ds4rt_bctx *ctx) { return (cpu_ctx *)ctx; }

/* On the CPU every buffer is host memory. */
static inline float *F(ds4rt_df32 t) { return t.buf ? (float *)t.buf->ptr + t.off : NULL; }
static inline int32_t *I(ds4rt_di32 t) { return t.buf ? (int32_t *)t.buf->ptr + t.off : NULL; }
static inline const uint8_t *B(ds4rt_dbytes t) { return t.buf ? (const uint8_t *)t.buf->ptr + t.off : NULL; }

static inline int64_t pass_pos0(ds4rt_dpass p) {
    int64_t v;
    memcpy(&v, p.buf->ptr, 8);
    return v;
}
static inline int64_t pass_base(ds4rt_dpass p) {
    int64_t v;
    memcpy(&v, (const uint8_t *)p.buf->ptr + 8, 8);
    return v;
}
static inline const int32_t *pass_tokens(ds4rt_dpass p) {
    return (const int32_t *)((const uint8_t *)p.buf->ptr + DS4RT_PASS_HEADER_BYTES);
}

/* The quant layer's view of a weight. */
static inline ds4rt_weight cpu_weight(const ds4rt_dweight *w) {
    return (ds4rt_weight){.type = w->type, .data = B(w->data), .rows = w->rows, .cols = w->cols,
                          .row_bytes = w->row_bytes, .layout = w->layout};
}

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

/* ds4rt_rms_norm_rows over the pool, in groups of 4 rows (cpu_rows.c): a row's bits never
 * depend on the split. */
void cpu_norm_rows(cpu_ctx *c, const float *x, int64_t rows, int64_t stride, int64_t n, const float *w, float eps,
                   float *out);

/* ops, one file per family */
ds4rt_status cpu_get_rows(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_di32 ids, int64_t n, uint32_t copies,
                          ds4rt_df32 out);
ds4rt_status cpu_rms_norm(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_df32 w, float eps,
                          ds4rt_df32 out);
/* The angles of rope r at pos (*ci, *si) for a split to read: from the kept slots (filled here
 * if needed, so call it on the thread that issues the op), or computed into cs / sn for a rope
 * of more pairs than a slot keeps (cpu_rows.c). */
void cpu_rope_angles_for(cpu_ctx *c, const ds4rt_rope *r, int64_t pos, double *cs, double *sn, const double **ci,
                         const double **si);
ds4rt_status cpu_norm_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, ds4rt_df32 w,
                           float eps, const ds4rt_rope *r, ds4rt_df32 x);
ds4rt_status cpu_rope(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_rope *r,
                      int sign, ds4rt_df32 x);
ds4rt_status cpu_fp8_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x);
ds4rt_status cpu_fp4_round(ds4rt_bctx *ctx, int64_t rows, uint32_t stride, uint32_t width, ds4rt_df32 x);
ds4rt_status cpu_hadamard(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x);
ds4rt_status cpu_capture(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 dst,
                         uint64_t dst_stride);
ds4rt_status cpu_argmax(ds4rt_bctx *ctx, int64_t rows, uint32_t width, ds4rt_df32 x, ds4rt_di32 ids);
ds4rt_status cpu_add(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 a, ds4rt_df32 b, ds4rt_df32 out);
ds4rt_status cpu_nonfinite(ds4rt_bctx *ctx, int64_t count, ds4rt_df32 x, ds4rt_di32 out);
ds4rt_status cpu_dspark_confidence(ds4rt_bctx *ctx, uint32_t d, uint32_t r, ds4rt_df32 proj, ds4rt_df32 h,
                                   ds4rt_df32 state, ds4rt_df32 out);

ds4rt_status cpu_hc_pre(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *w,
                        ds4rt_df32 norm, ds4rt_df32 X, ds4rt_df32 xn, ds4rt_df32 post, ds4rt_df32 comb);
ds4rt_status cpu_hc_post(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 X, ds4rt_df32 f,
                         ds4rt_df32 post, ds4rt_df32 comb, ds4rt_df32 X_out);
ds4rt_status cpu_hc_head(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_hc_weights *head,
                         ds4rt_df32 X, ds4rt_df32 y);

ds4rt_status cpu_matmul(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_df32 x, int64_t n, ds4rt_df32 y);
ds4rt_status cpu_grouped_out(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_dweight *out_a,
                             const ds4rt_dweight *out_b, ds4rt_df32 o, ds4rt_df32 f);

ds4rt_status cpu_kv_store(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t dim, ds4rt_df32 src, ds4rt_df32 ring,
                          uint32_t ring_cap);
ds4rt_status cpu_comp_reset(ds4rt_bctx *ctx, const ds4rt_comp_state *cs);
void cpu_comp_saved_free(cpu_ctx *c);
ds4rt_status cpu_comp_snapshot(ds4rt_bctx *ctx, const ds4rt_comp_state *cs);
ds4rt_status cpu_comp_update(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, const ds4rt_comp_desc *c,
                             const ds4rt_comp_state *cs, ds4rt_df32 u, ds4rt_df32 g);
ds4rt_status cpu_comp_rollback(ds4rt_bctx *ctx, const ds4rt_comp_desc *c, const ds4rt_comp_state *cs,
                               int64_t batch_start, int64_t keep);
ds4rt_status cpu_indexer_topk(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, ds4rt_df32 iq,
                              ds4rt_df32 iw, ds4rt_df32 rows, ds4rt_di32 sel, ds4rt_di32 n_sel);
ds4rt_status cpu_attention(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t n, uint32_t heads, uint32_t dim,
                           const ds4rt_attn_keys *k, ds4rt_df32 sinks, ds4rt_df32 q, ds4rt_df32 out,
                           const ds4rt_rope *unrope);
ds4rt_status cpu_moe(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, const ds4rt_moe_weights *w,
                     float clamp, float clamp_sh, ds4rt_df32 x, ds4rt_df32 f);

#endif /* DS4RT_CPU_INTERNAL_H */
