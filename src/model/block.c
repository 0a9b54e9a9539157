/*
 * block.c - the DeepSeek V4 block as a composition of backend ops: the same code for trunk
 * layers and DSpark stages. Every op runs once for the whole batch; ops whose results depend on
 * earlier rows (the ring store, compressors, the indexer, attention) process their rows in
 * position order inside the op.
 */
#include "block.h"

#include "internal.h"

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

static ds4rt_status trace(const ds4rt_block_run *r, uint32_t stage, ds4rt_df32 rows, int64_t width) {
    return r->trace ? r->trace(r->trace_user, stage, rows, r->n, width) : DS4RT_OK;
}

ds4rt_status ds4rt_block_kv_rows(ds4rt_bctx *ctx, const ds4rt_hparams *hp, ds4rt_dpass in, int64_t n,
                                 const ds4rt_attn_weights *w, const ds4rt_rope *rope, bool sim_fp8, ds4rt_df32 x,
                                 ds4rt_df32 kv) {
    const ds4rt_backend_ops *o = ctx->ops;
    TRY(o->matmul(ctx, &w->kv, x, n, kv));
    TRY(o->norm_rope(ctx, in, n, 1, hp->head_dim, w->kv_norm, hp->rms_eps, rope, kv));
    if (sim_fp8) TRY(o->fp8_round(ctx, n, hp->head_dim, hp->d_nope, kv));
    return DS4RT_OK;
}

/* A branch point, where the backend has branches (their rules: backend.h). */
static ds4rt_status branch(ds4rt_bctx *ctx, ds4rt_branch which) {
    return ctx->ops->branch != NULL ? ctx->ops->branch(ctx, which) : DS4RT_OK;
}

/* Input a->xn (the normed sublayer input); output a->f. The key side (this block's KV rows,
 * their ring store, the compressors' updates) reads only xn and the layer's own state, and
 * the query side (queries, the indexer's queries and weights) writes nothing the key side
 * reads or writes, so the key side is a side branch that a backend may run beside the
 * queries; both meet before the indexer's top-k, which reads the index compressor's rows. */
static ds4rt_status attention(const ds4rt_block_run *r, const ds4rt_attn_weights *w, const ds4rt_block_keys *k) {
    ds4rt_bctx *ctx = r->ctx;
    const ds4rt_backend_ops *o = ctx->ops;
    const ds4rt_hparams *hp = r->hp;
    ds4rt_acts *a = r->a;
    const int64_t n = r->n;
    const uint32_t dh = hp->head_dim, H = hp->n_head;
    const bool trunk = k->layer != NULL, compressed = trunk && k->ratio != 0, indexed = trunk && k->ratio == 4;
    ds4rt_layer_state *ls = k->layer;

    /* the key side: this block's KV rows; for a trunk layer their ring store and the
     * compressors (the attention's and the indexer's) */
    TRY(branch(ctx, DS4RT_BRANCH_SIDE));
    TRY(ds4rt_block_kv_rows(ctx, hp, a->in, n, w, k->rope, k->sim_fp8, a->xn, a->kv));
    if (trunk) TRY(o->kv_store(ctx, a->in, n, dh, a->kv, ls->raw, k->raw_cap));
    if (compressed) {
        TRY(o->matmul(ctx, &w->c_kv, a->xn, n, a->cu));
        TRY(o->matmul(ctx, &w->c_gate, a->xn, n, a->cg));
        TRY(o->comp_update(ctx, a->in, n, k->attn_comp, &ls->comp, a->cu, a->cg));
    }
    if (indexed) {
        TRY(o->matmul(ctx, &w->ic_kv, a->xn, n, a->iu));
        TRY(o->matmul(ctx, &w->ic_gate, a->xn, n, a->ig));
        TRY(o->comp_update(ctx, a->in, n, k->index_comp, &ls->icomp, a->iu, a->ig));
    }
    TRY(branch(ctx, DS4RT_BRANCH_MAIN));

    /* queries: q = per-head RMS(W_qb RMSNorm(W_qa xn, q_a_norm)), RoPE at each row's position */
    TRY(o->matmul(ctx, &w->q_a, a->xn, n, a->qa));
    TRY(o->rms_norm(ctx, n, hp->q_lora, a->qa, w->q_a_norm, hp->rms_eps, a->qa));
    TRY(o->matmul(ctx, &w->q_b, a->qa, n, a->q));
    TRY(o->norm_rope(ctx, a->in, n, H, dh, (ds4rt_df32){0}, hp->rms_eps, k->rope, a->q));
    if (indexed) {
        /* the lightning indexer's queries and head weights */
        const uint32_t di = hp->idx_dim;
        TRY(o->matmul(ctx, &w->i_qb, a->qa, n, a->iq));
        TRY(o->matmul(ctx, &w->i_proj, a->xn, n, a->iw));
        TRY(o->rope(ctx, a->in, n, hp->idx_heads, di, k->rope, +1, a->iq));
        TRY(o->hadamard(ctx, n * hp->idx_heads, di, a->iq));
        if (k->sim_fp4) TRY(o->fp4_round(ctx, n * hp->idx_heads, di, di, a->iq));
    }
    TRY(branch(ctx, DS4RT_BRANCH_JOIN));

    ds4rt_attn_keys keys = {0};
    if (trunk) {
        keys = (ds4rt_attn_keys){.ring = ls->raw, .ring_cap = k->raw_cap, .window = hp->window};
        if (compressed) {
            keys.comp_ratio = k->ratio;
            keys.comp = ls->comp.out;
        }
        if (indexed) {
            /* the lightning indexer picks which compressed rows each row attends to */
            TRY(o->indexer_topk(ctx, a->in, hp, n, a->iq, a->iw, ls->icomp.out, a->sel, a->n_sel));
            keys.sel = a->sel;
            keys.n_sel = a->n_sel;
            keys.sel_stride = hp->idx_topk;
        }
    } else {
        keys = (ds4rt_attn_keys){.ring = k->ring, .ring_cap = k->ring_cap, .window = k->window, .block = true,
                                 .block_rows = a->kv};
    }
    /* the output overwrites q, its RoPE undone at the same positions */
    TRY(o->attention(ctx, a->in, n, H, dh, &keys, w->sinks, a->q, a->q, k->rope));
    return o->grouped_out(ctx, hp, n, &w->out_a, &w->out_b, a->q, a->f);
}

static void swap(ds4rt_acts *a) {
    ds4rt_df32 t = a->X;
    a->X = a->X2;
    a->X2 = t;
}

ds4rt_status ds4rt_block_forward(const ds4rt_block_run *r, const ds4rt_block_weights *w, const ds4rt_block_keys *k,
                                 float clamp, float clamp_sh) {
    ds4rt_bctx *ctx = r->ctx;
    const ds4rt_backend_ops *o = ctx->ops;
    const ds4rt_hparams *hp = r->hp;
    ds4rt_acts *a = r->a;
    const int64_t n = r->n;

    TRY(o->hc_pre(ctx, hp, n, &w->hc_attn, w->attn.norm, a->X, a->xn, a->post, a->comb));
    TRY(trace(r, DS4RT_TRACE_ATTN_IN, a->xn, hp->n_embd));
    TRY(attention(r, &w->attn, k));
    TRY(trace(r, DS4RT_TRACE_ATTN_OUT, a->f, hp->n_embd));
    TRY(o->hc_post(ctx, hp, n, a->X, a->f, a->post, a->comb, a->X2));
    swap(a);
    TRY(trace(r, DS4RT_TRACE_ATTN_HC, a->X, hp->hc_dim));

    TRY(o->hc_pre(ctx, hp, n, &w->hc_ffn, w->moe.norm, a->X, a->xn, a->post, a->comb));
    TRY(trace(r, DS4RT_TRACE_FFN_IN, a->xn, hp->n_embd));
    TRY(o->moe(ctx, a->in, hp, n, &w->moe, clamp, clamp_sh, a->xn, a->f));
    TRY(trace(r, DS4RT_TRACE_FFN_OUT, a->f, hp->n_embd));
    TRY(o->hc_post(ctx, hp, n, a->X, a->f, a->post, a->comb, a->X2));
    swap(a);
    return DS4RT_OK;
}
