/* cpu_matmul.c - matrix products on the CPU (src/quant's batch-invariant kernels) and the
 * grouped low-rank output projection. */
#include "cpu_internal.h"
#include "repack.h"

ds4rt_status cpu_matmul(ds4rt_bctx *ctx, const ds4rt_dweight *w, ds4rt_df32 x, int64_t n, ds4rt_df32 y) {
    ds4rt_weight hw = cpu_weight(w);
    return ds4rt_matmul(cpu(ctx)->pool, &hw, F(x), n, F(y));
}

ds4rt_status cpu_grouped_out(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n, const ds4rt_dweight *out_a,
                             const ds4rt_dweight *out_b, ds4rt_df32 o, ds4rt_df32 f) {
    cpu_ctx *c = cpu(ctx);
    const float *op = F(o);
    /* a matrix in panels of rows (R16) is multiplied in whole panels: group g's rows are then
     * a window of the panels that hold them (every row's bits are its own, whatever the rows
     * computed beside it) */
    const int64_t panel = out_a->layout == DS4RT_LAYOUT_Q8_0_R16 ? DS4RT_R16_ROWS : 1;
    /* group g reads heads [g*H/G, (g+1)*H/G): a contiguous slice of each output row */
    for (uint32_t g = 0; g < hp->o_groups; g++) {
        for (int64_t i = 0; i < n; i++)
            memcpy(c->ws.og + (size_t)i * hp->group_dim, op + (size_t)i * hp->q_dim + (size_t)g * hp->group_dim,
                   hp->group_dim * sizeof(float));
        const int64_t r0 = (int64_t)g * hp->o_lora, a0 = r0 / panel * panel;
        const int64_t a1 = (r0 + hp->o_lora + panel - 1) / panel * panel, m = a1 - a0;
        ds4rt_weight wg = cpu_weight(out_a);
        wg.data = (const uint8_t *)wg.data + (size_t)a0 * out_a->row_bytes;
        wg.rows = m;
        TRY(ds4rt_matmul(c->pool, &wg, c->ws.og, n, c->ws.olow));
        for (int64_t i = 0; i < n; i++)
            memcpy(c->ws.low + (size_t)i * hp->o_low_dim + (size_t)g * hp->o_lora,
                   c->ws.olow + (size_t)i * m + (r0 - a0), hp->o_lora * sizeof(float));
    }
    ds4rt_weight wb = cpu_weight(out_b);
    return ds4rt_matmul(c->pool, &wb, c->ws.low, n, F(f));
}
