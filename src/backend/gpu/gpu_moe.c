/*
 * gpu_moe.c - the MoE sublayer on the GPU, composed from the expert-stack product of hip/mm.h
 * (expert ids read from device memory, so no host sees the routing) and the MoE pieces of
 * hip/ops.h (router, SwiGLU with clamp, slot-ordered combine). Every (row, slot) output is kept
 * apart and summed in slot order, as on the CPU (src/backend/cpu/cpu_moe.c), so a row's result
 * does not depend on the batch it is in.
 */
#include "gpu_ops.h"
#include "mm.h"
#include "ops.h"

/* Converts `rows` rows of `cols` floats for products with weights of `type` into the context's
 * activation scratch. */
static ds4rt_status convert(ds4rt_bctx *ctx, uint32_t type, ds4rt_df32 x, int64_t rows, int64_t cols, void **act) {
    uint64_t bytes;
    TRY(gpu_act(ctx, ds4rt_gk_act_bytes(type, cols, rows), act, &bytes));
    GK(ds4rt_gk_act_convert(type, DF(x), rows, cols, *act, (size_t)bytes, gstream(ctx)), "moe activations");
    return DS4RT_OK;
}

static ds4rt_status experts(ds4rt_bctx *ctx, const ds4rt_dweight3 *w, const void *act, int64_t slots, uint32_t x_div,
                            ds4rt_df32 y, const char *what) {
    ds4rt_gk_weight gw = gpu_weight(&w->first);
    GK(ds4rt_gk_matmul_experts_act(&gw, w->stride, w->count, DI(gctx(ctx)->ws.sel), slots, x_div, act, DF(y),
                                   gstream(ctx)),
       what);
    return DS4RT_OK;
}

/* Gate and up stacks one launch can take: the same type, shape, count and expert stride. */
static bool same_stacks(const ds4rt_dweight3 *a, const ds4rt_dweight3 *b) {
    return a->first.type == b->first.type && a->first.rows == b->first.rows && a->first.cols == b->first.cols &&
           a->first.row_bytes == b->first.row_bytes && a->first.layout == b->first.layout && a->count == b->count &&
           a->stride == b->stride;
}

ds4rt_status gpu_moe(ds4rt_bctx *ctx, ds4rt_dpass in, const ds4rt_hparams *hp, int64_t n, const ds4rt_moe_weights *w,
                     float clamp, float clamp_sh, ds4rt_df32 x, ds4rt_df32 f) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    const uint32_t k = hp->n_expert_used, D = hp->n_embd, FF = hp->expert_ff;
    const int64_t slots = n * k;

    /* the shared expert on a side branch, beside the routing and the routed experts (it reads
     * x and writes shg, shu and shy only; docs/GPU.md, "Branches") */
    if (hp->n_shared > 0) {
        const uint32_t Fs = hp->shared_ff;
        TRY(gpu_branch(ctx, DS4RT_BRANCH_SIDE));
        TRY(gpu_matmul(ctx, &w->gate_sh, x, n, ws->shg));
        TRY(gpu_matmul(ctx, &w->up_sh, x, n, ws->shu));
        GK(ds4rt_gk_swiglu(n, Fs, DF(ws->shg), Fs, DF(ws->shu), Fs, clamp_sh, NULL, DF(ws->shg), Fs, gstream(ctx)),
           "moe shared swiglu");
        TRY(gpu_matmul(ctx, &w->down_sh, ws->shg, n, ws->shy));
        TRY(gpu_branch(ctx, DS4RT_BRANCH_MAIN));
    }

    /* router: logits, then ids and weights on the device */
    void *s = gstream(ctx);
    TRY(gpu_matmul(ctx, &w->gate_inp, x, n, ws->router));
    ds4rt_gk_moe_dims md = {.n_expert = hp->n_expert, .n_used = k, .expert_norm = hp->expert_norm,
                            .expert_scale = hp->expert_scale};
    GK(ds4rt_gk_moe_route(&md, n, DF(ws->router), DF(w->bias), DI(w->tid2eid), DPASS(in), DI(ws->sel), DF(ws->selw),
                          s),
       "moe router");

    /* routed experts: slot i*k + j reads row i; gate and up share one conversion when paired
     * alike, and then one launch (docs/GPU.md, "Merged launches") */
    void *act;
    TRY(convert(ctx, w->gate_exps.first.type, x, n, D, &act));
    if (gctx(ctx)->merges && same_stacks(&w->gate_exps, &w->up_exps)) {
        ds4rt_gk_weight gg = gpu_weight(&w->gate_exps.first), gu = gpu_weight(&w->up_exps.first);
        GK(ds4rt_gk_matmul_experts2_act(&gg, &gu, w->gate_exps.stride, w->gate_exps.count, DI(ws->sel), slots, k, act,
                                        DF(ws->eg), DF(ws->eu), s),
           "moe gate and up experts");
    } else {
        TRY(experts(ctx, &w->gate_exps, act, slots, k, ws->eg, "moe gate experts"));
        if (w->up_exps.first.type != w->gate_exps.first.type) TRY(convert(ctx, w->up_exps.first.type, x, n, D, &act));
        TRY(experts(ctx, &w->up_exps, act, slots, k, ws->eu, "moe up experts"));
    }
    if (gctx(ctx)->merges) { /* the SwiGLU computed inside the down product's conversion */
        uint64_t bytes;
        TRY(gpu_act(ctx, ds4rt_gk_act_bytes(w->down_exps.first.type, FF, slots), &act, &bytes));
        GK(ds4rt_gk_swiglu_act(w->down_exps.first.type, slots, FF, DF(ws->eg), DF(ws->eu), clamp, DF(ws->selw), act,
                               (size_t)bytes, s),
           "moe swiglu and down activations");
    } else {
        GK(ds4rt_gk_swiglu(slots, FF, DF(ws->eg), FF, DF(ws->eu), FF, clamp, DF(ws->selw), DF(ws->eg), FF, s),
           "moe swiglu");
        TRY(convert(ctx, w->down_exps.first.type, ws->eg, slots, FF, &act));
    }
    TRY(experts(ctx, &w->down_exps, act, slots, 1, ws->yslot, "moe down experts"));

    TRY(gpu_branch(ctx, DS4RT_BRANCH_JOIN));
    GK(ds4rt_gk_moe_combine(n, k, D, DF(ws->yslot), hp->n_shared > 0 ? DF(ws->shy) : NULL, DF(f), s), "moe combine");
    return DS4RT_OK;
}
