/* state.c - allocation, reset and batch snapshots of the target's per-session state. */
#include "state.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* State tensors are packed without padding: model info reports their bytes exactly as
 * docs/MODEL.md lays them out. */
static ds4rt_df32 carve(ds4rt_dbuf *b, uint64_t *off, uint64_t count) {
    ds4rt_df32 v = {b, *off};
    *off += count;
    return v;
}

/* One compressor's tensors carved from `b` (NULL: only counted); the floats of its frontier
 * (with snapshot and journal) and of its emitted rows are added to frontier[0] and rows[0]. */
static void comp_layout(ds4rt_dbuf *b, uint64_t *off, uint32_t rows, uint32_t width, uint32_t dim, uint32_t cap,
                        uint32_t max_batch, ds4rt_comp_state *cs, uint64_t *frontier, uint64_t *emitted) {
    const uint64_t n = (uint64_t)rows * width;
    const uint64_t start = *off;
    cs->kv = carve(b, off, n);
    cs->score = carve(b, off, n);
    cs->snap_kv = carve(b, off, n);
    cs->snap_score = carve(b, off, n);
    cs->journal = carve(b, off, (uint64_t)max_batch * 2 * width);
    *frontier += *off - start;
    cs->out = carve(b, off, (uint64_t)cap * dim);
    *emitted += (uint64_t)cap * dim;
    cs->rows = rows;
    cs->width = width;
    cs->cap = cap;
}

/* The state's tensors carved from `b` (NULL: only counted); returns the floats used and, if
 * `parts` is not NULL, adds their split to it (in floats). */
static uint64_t layout(ds4rt_dbuf *b, const ds4rt_hparams *hp, ds4rt_kv_state *st, ds4rt_kv_state_parts *parts) {
    ds4rt_kv_state_parts none;
    if (parts == NULL) parts = &none;
    uint64_t off = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        ds4rt_layer_state *ls = &st->layers[l];
        const uint32_t R = hp->ratio[l];
        ls->raw = carve(b, &off, (uint64_t)st->raw_cap * hp->head_dim);
        parts->window += (uint64_t)st->raw_cap * hp->head_dim;
        const uint32_t cap = R != 0 ? (uint32_t)(st->n_ctx / R + 2) : 0;
        if (R != 0) {
            uint32_t c = ds4rt_coff(R);
            comp_layout(b, &off, c * R, c * hp->head_dim, hp->head_dim, cap, st->max_batch, &ls->comp,
                        &parts->frontiers, &parts->compressed);
        }
        if (R == 4)
            comp_layout(b, &off, 2 * 4, 2 * hp->idx_dim, hp->idx_dim, cap, st->max_batch, &ls->icomp,
                        &parts->indexer_frontiers, &parts->indexer);
    }
    return off;
}

/* Floats of the state, layer by layer through the one layout; its split added to *parts. */
static uint64_t state_floats(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch, ds4rt_kv_state_parts *parts) {
    ds4rt_kv_state st = {.n_ctx = n_ctx, .max_batch = max_batch, .raw_cap = hp->window + max_batch};
    ds4rt_layer_state ls;
    uint64_t floats = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        ds4rt_hparams one = *hp;
        one.n_layer = 1;
        one.ratio = &hp->ratio[l];
        st.layers = &ls;
        floats += layout(NULL, &one, &st, parts);
    }
    return floats;
}

uint64_t ds4rt_kv_state_bytes(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch) {
    return state_floats(hp, n_ctx, max_batch, NULL) * 4;
}

uint64_t ds4rt_kv_state_split(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch, ds4rt_kv_state_parts *out) {
    ds4rt_kv_state_parts f = {0};
    uint64_t bytes = state_floats(hp, n_ctx, max_batch, &f) * 4;
    *out = (ds4rt_kv_state_parts){.window = f.window * 4,
                                  .frontiers = f.frontiers * 4,
                                  .compressed = f.compressed * 4,
                                  .indexer_frontiers = f.indexer_frontiers * 4,
                                  .indexer = f.indexer * 4};
    return bytes;
}

ds4rt_status ds4rt_kv_state_create(ds4rt_bctx *ctx, const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch,
                                   ds4rt_kv_state *st) {
    memset(st, 0, sizeof *st);
    st->n_layer = hp->n_layer;
    st->ratio = hp->ratio;
    st->n_ctx = n_ctx;
    st->max_batch = max_batch;
    st->raw_cap = hp->window + max_batch;
    st->be = ctx->be;
    st->layers = calloc(hp->n_layer, sizeof *st->layers);
    if (st->layers == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "session state");
    uint64_t floats = layout(NULL, hp, st, NULL);
    st->bytes = floats * 4;
    ds4rt_status status = ctx->ops->alloc(ctx->be, DS4RT_MEM_STATE, st->bytes, &st->buf);
    if (status != DS4RT_OK) {
        ds4rt_kv_state_free(st);
        return ds4rt_fail_context(status, "session state for a context of %lld tokens", (long long)n_ctx);
    }
    layout(st->buf, hp, st, NULL);
    status = ds4rt_kv_state_reset(ctx, st);
    if (status != DS4RT_OK) ds4rt_kv_state_free(st);
    return status;
}

void ds4rt_kv_state_free(ds4rt_kv_state *st) {
    if (st->buf != NULL) ds4rt_backend_get_ops(st->be)->release(st->be, st->buf);
    free(st->layers);
    memset(st, 0, sizeof *st);
}

#define TRY(expr)                                                             \
    do {                                                                      \
        ds4rt_status st_ = (expr);                                            \
        if (st_ != DS4RT_OK) return st_;                                      \
    } while (0)

ds4rt_status ds4rt_kv_state_reset(ds4rt_bctx *ctx, ds4rt_kv_state *st) {
    st->n_pos = 0;
    st->batch_start = 0;
    st->batch_len = 0;
    /* the snapshot is what a rollback restores: it must be the empty state too, or a rollback
     * of the empty "last batch" (truncate(0) after a reset) would bring back the frontiers of
     * the context before the reset (issue 13) */
    for (uint32_t l = 0; l < st->n_layer; l++) {
        if (st->ratio[l] != 0) {
            TRY(ctx->ops->comp_reset(ctx, &st->layers[l].comp));
            TRY(ctx->ops->comp_snapshot(ctx, &st->layers[l].comp));
        }
        if (st->ratio[l] == 4) {
            TRY(ctx->ops->comp_reset(ctx, &st->layers[l].icomp));
            TRY(ctx->ops->comp_snapshot(ctx, &st->layers[l].icomp));
        }
    }
    return DS4RT_OK;
}

ds4rt_status ds4rt_kv_state_begin_batch(ds4rt_bctx *ctx, ds4rt_kv_state *st, int64_t n) {
    st->batch_start = st->n_pos;
    st->batch_len = n;
    for (uint32_t l = 0; l < st->n_layer; l++) {
        if (st->ratio[l] != 0) TRY(ctx->ops->comp_snapshot(ctx, &st->layers[l].comp));
        if (st->ratio[l] == 4) TRY(ctx->ops->comp_snapshot(ctx, &st->layers[l].icomp));
    }
    return DS4RT_OK;
}
