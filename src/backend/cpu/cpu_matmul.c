/* cpu_matmul.c - matrix products on the CPU (src/quant's batch-invariant kernels) and the
 * grouped low-rank output projection. */
#include "cpu_internal.h"

ds4rt_status cpu_matmul(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_df32 x, int64_t n, ds4rt_df32 y) {
    ds4rt_weight hw = cpu_weight(w);
    return ds4rt_matmul(cpu(ctx)->pool, &hw, F(x), n, F(y));
}

ds4rt_status cpu_grouped_out(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_dweight *out_a,
                             const ds4rt_dweight *out_b, ds4rt_df32 o, ds4rt_df32 f) {
    cpu_ctx *c = cpu(ctx);
    const float *op = F(o);
    /* group g reads heads [g*H/G, (g+1)*H/G): a contiguous slice of each output row */
    for (uint32_t g = 0; g < hp->o_groups; g++) {
        for (int64_t i = 0; i < n; i++)
            memcpy(c->ws.og + (size_t)i * hp->group_dim, op + (size_t)i * hp->q_dim + (size_t)g * hp->group_dim,
                   hp->group_dim * sizeof(float));
        ds4rt_weight wg = cpu_weight(out_a);
        wg.data = (const uint8_t *)wg.data + (size_t)g * hp->o_lora * out_a->row_bytes;
        wg.rows = hp->o_lora;
        TRY(ds4rt_matmul(c->pool, &wg, c->ws.og, n, c->ws.olow));
        for (int64_t i = 0; i < n; i++)
            memcpy(c->ws.low + (size_t)i * hp->o_low_dim + (size_t)g * hp->o_lora, c->ws.olow + (size_t)i * hp->o_lora,
                   hp->o_lora * sizeof(float));
    }
    ds4rt_weight wb = cpu_weight(out_b);
    return ds4rt_matmul(c->pool, &wb, c->ws.low, n, F(f));
}
