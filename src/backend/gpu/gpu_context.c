/*
 * gpu_context.c - the GPU backend's execution contexts: a created stream per session (never the
 * null stream, which HIP-CPU may reorder), the ops' device workspaces sized by ctx_reserve, and
 * the copies the composition may make (the pass block in, ids and logits rows out).
 */
#include <stdlib.h>

#include "gpu_internal.h"

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

ds4rt_status gpu_ctx_create(ds4rt_backend *be, int n_threads, ds4rt_bctx **out) {
    (void)n_threads; /* the device has its own parallelism */
    *out = NULL;
    gpu_ctx *c = calloc(1, sizeof *c);
    if (c == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "execution context");
    c->base.ops = &ds4rt_gpu_ops;
    c->base.be = be;
    int st = ds4rt_gk_stream_create(&c->stream);
    if (st != DS4RT_GK_OK) {
        free(c);
        return gpu_check(st, "context stream");
    }
    gpu_graphs_init(c);
    /* DS4RT_GPU_SIDE=0 keeps hc_pre's Sinkhorn inside hc_pre_finish (docs/GPU.md, "The side
     * branch"); both give the same bits */
    const char *side = getenv("DS4RT_GPU_SIDE");
    c->side_sinkhorn = side == NULL || strcmp(side, "0") != 0;
    /* DS4RT_GPU_BRANCH=0 runs the op table's side branches in issue order on one stream (the
     * same kernels, so the same bits; docs/GPU.md, "Branches") */
    const char *branch = getenv("DS4RT_GPU_BRANCH");
    c->branches = branch == NULL || strcmp(branch, "0") != 0;
    /* DS4RT_GPU_MERGE=0 issues every kernel of an op on its own: the MoE's gate and up products
     * as two launches, its SwiGLU apart from the down product's conversion (docs/GPU.md,
     * "Merged launches"); both give the same bits */
    const char *merge = getenv("DS4RT_GPU_MERGE");
    c->merges = merge == NULL || strcmp(merge, "0") != 0;
    *out = &c->base;
    return DS4RT_OK;
}

/* Carves `count` floats (or int32s) from the workspace buffer, 256-byte aligned; with buf NULL
 * it only counts. Offsets are in elements of 4 bytes. */
static ds4rt_df32 carve(ds4rt_dbuf *buf, uint64_t *off, uint64_t count) {
    ds4rt_df32 v = {buf, *off};
    *off += ((count ? count : 1) + 63) & ~(uint64_t)63;
    return v;
}

static uint64_t layout(gpu_workspace *ws, ds4rt_dbuf *buf, const ds4rt_hparams *hp, const ds4rt_limits *lim) {
    const uint64_t rows = (uint64_t)lim->max_rows, D = hp->n_embd, k = hp->n_expert_used;
    uint64_t off = 0;
    ws->og = carve(buf, &off, rows * hp->group_dim);
    ws->olow = carve(buf, &off, rows * hp->o_lora);
    ws->low = carve(buf, &off, rows * hp->o_low_dim);
    ws->router = carve(buf, &off, rows * hp->n_expert);
    ds4rt_df32 sel = carve(buf, &off, rows * k);
    ws->sel = (ds4rt_di32){sel.buf, sel.off};
    ws->selw = carve(buf, &off, rows * k);
    ws->eg = carve(buf, &off, rows * k * hp->expert_ff);
    ws->eu = carve(buf, &off, rows * k * hp->expert_ff);
    ws->yslot = carve(buf, &off, rows * k * D);
    ws->shg = carve(buf, &off, rows * hp->shared_ff);
    ws->shu = carve(buf, &off, rows * hp->shared_ff);
    ws->shy = carve(buf, &off, rows * D);
    /* zero as allocated; every attention call leaves them zero (hip/attn.h) */
    ds4rt_df32 tk = carve(buf, &off, rows * hp->n_head);
    ws->tickets = (ds4rt_di32){tk.buf, tk.off};
    ws->n_tickets = rows * hp->n_head;
    ws->kscratch_bytes = gpu_kernel_scratch_bytes(hp, lim);
    ds4rt_df32 ks = carve(buf, &off, (ws->kscratch_bytes + 3) / 4);
    ws->kscratch = buf ? (void *)DF(ks) : NULL;
    return off * 4;
}

/* Grows *buf to at least `need` bytes (doubling), once nothing issued may still read it: both
 * streams are drained without joining, so an open branch stays open. */
static ds4rt_status act_grow(ds4rt_bctx *ctx, ds4rt_dbuf **buf, uint64_t need) {
    gpu_ctx *c = gctx(ctx);
    if (*buf != NULL && (*buf)->bytes >= need) return DS4RT_OK;
    if (c->recording) /* sized by ctx_reserve, so a recorded pass never gets here */
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "activation scratch of %llu bytes needed inside a recorded pass",
                          (unsigned long long)need);
    GK(ds4rt_gk_stream_sync(c->stream), "synchronize");
    if (c->side != NULL) GK(ds4rt_gk_stream_sync(c->side), "synchronize");
    ds4rt_dbuf *b;
    uint64_t want = need > 2 * (*buf ? (*buf)->bytes : 0) ? need : 2 * (*buf)->bytes;
    ds4rt_status st = gpu_alloc(ctx->be, DS4RT_MEM_SCRATCH, want, &b);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "activation scratch of the GPU products");
    if (*buf != NULL) gpu_release(ctx->be, *buf);
    *buf = b;
    return DS4RT_OK;
}

ds4rt_status gpu_act(ds4rt_bctx *ctx, uint64_t need, void **ptr, uint64_t *bytes) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    ds4rt_dbuf **buf = gctx(ctx)->on_side ? &ws->side_act : &ws->act;
    TRY(act_grow(ctx, buf, need));
    *ptr = (*buf)->ptr;
    *bytes = (*buf)->bytes;
    return DS4RT_OK;
}

ds4rt_status gpu_ctx_reserve(ds4rt_bctx *ctx, const ds4rt_hparams *hp, const ds4rt_limits *want) {
    gpu_workspace *ws = &gctx(ctx)->ws;
    ds4rt_limits lim = {.max_rows = max64(ws->lim.max_rows, want->max_rows),
                        .max_keys = max64(ws->lim.max_keys, want->max_keys),
                        .max_comp = max64(ws->lim.max_comp, want->max_comp)};
    gpu_workspace next = {.lim = lim};
    uint64_t bytes = layout(&next, NULL, hp, &lim);
    if (ws->buf != NULL && bytes <= ws->bytes && lim.max_rows == ws->lim.max_rows &&
        lim.max_keys == ws->lim.max_keys && lim.max_comp == ws->lim.max_comp)
        return DS4RT_OK;
    /* nothing may still read the old workspace */
    TRY(gpu_synchronize(ctx));
    ds4rt_dbuf *buf;
    ds4rt_status st = gpu_alloc(ctx->be, DS4RT_MEM_SCRATCH, bytes, &buf);
    if (st != DS4RT_OK)
        return ds4rt_fail_context(st, "GPU op workspaces for %lld rows", (long long)lim.max_rows);
    if (ws->buf != NULL) gpu_release(ctx->be, ws->buf);
    layout(&next, buf, hp, &lim);
    next.buf = buf;
    next.bytes = bytes;
    next.act = ws->act;
    next.side_act = ws->side_act;
    *ws = next;
    /* the products' activations for the largest batch, now rather than mid-pass; the side
     * branch's too where branches run there */
    uint64_t need = gpu_mm_act_bytes(hp, &lim);
    if (need == 0) return DS4RT_OK;
    TRY(act_grow(ctx, &ws->act, need));
    return gctx(ctx)->branches ? act_grow(ctx, &ws->side_act, need) : DS4RT_OK;
}

void gpu_ctx_free(ds4rt_bctx *ctx) {
    if (ctx == NULL) return;
    gpu_ctx *c = gctx(ctx);
    (void)gpu_side_join(ctx);
    (void)ds4rt_gk_stream_sync(c->stream);
    gpu_graphs_free(c);
    for (uint32_t i = 0; i < DS4RT_MARK_SLOTS; i++) ds4rt_gk_event_destroy(c->marks[i]);
    if (c->ws.buf != NULL) gpu_release(ctx->be, c->ws.buf);
    if (c->ws.act != NULL) gpu_release(ctx->be, c->ws.act);
    if (c->ws.side_act != NULL) gpu_release(ctx->be, c->ws.side_act);
    ds4rt_gk_stream_destroy(c->stream);
    ds4rt_gk_stream_destroy(c->side);
    ds4rt_gk_event_destroy(c->fork_ev);
    ds4rt_gk_event_destroy(c->join_ev);
    free(c);
}

ds4rt_status gpu_side_fork(ds4rt_bctx *ctx, void **side) {
    gpu_ctx *c = gctx(ctx);
    *side = NULL;
    if (c->on_side) return ds4rt_fail(DS4RT_ERR_INTERNAL, "a side branch forked inside a side branch");
    if (c->side == NULL) { /* all three or none, so a failed first fork can be retried */
        void *s = NULL, *f = NULL, *j = NULL;
        int st = ds4rt_gk_stream_create(&s);
        if (st == DS4RT_GK_OK) st = ds4rt_gk_event_create(&f);
        if (st == DS4RT_GK_OK) st = ds4rt_gk_event_create(&j);
        if (st != DS4RT_GK_OK) {
            ds4rt_gk_stream_destroy(s);
            ds4rt_gk_event_destroy(f);
            ds4rt_gk_event_destroy(j);
            return gpu_check(st, "side stream");
        }
        c->side = s, c->fork_ev = f, c->join_ev = j;
    }
    GK(ds4rt_gk_event_record(c->fork_ev, c->stream), "side fork");
    GK(ds4rt_gk_stream_wait_event(c->side, c->fork_ev), "side fork");
    *side = c->side;
    return DS4RT_OK;
}

ds4rt_status gpu_side_done(ds4rt_bctx *ctx) {
    gpu_ctx *c = gctx(ctx);
    GK(ds4rt_gk_event_record(c->join_ev, c->side), "side join");
    c->side_pending = true;
    return DS4RT_OK;
}

ds4rt_status gpu_side_join(ds4rt_bctx *ctx) {
    gpu_ctx *c = gctx(ctx);
    if (c->on_side) { /* an op failed inside a branch: close it so that the join covers it */
        c->on_side = false;
        TRY(gpu_side_done(ctx));
    }
    if (!c->side_pending) return DS4RT_OK;
    c->side_pending = false;
    GK(ds4rt_gk_stream_wait_event(c->stream, c->join_ev), "side join");
    return DS4RT_OK;
}

ds4rt_status gpu_branch(ds4rt_bctx *ctx, ds4rt_branch which) {
    gpu_ctx *c = gctx(ctx);
    if (!c->branches) return DS4RT_OK;
    void *side;
    switch (which) {
    case DS4RT_BRANCH_SIDE:
        TRY(gpu_side_fork(ctx, &side));
        c->on_side = true;
        return DS4RT_OK;
    case DS4RT_BRANCH_MAIN:
        if (!c->on_side) return ds4rt_fail(DS4RT_ERR_INTERNAL, "branch MAIN without a side branch open");
        c->on_side = false;
        return gpu_side_done(ctx);
    case DS4RT_BRANCH_JOIN:
        if (c->on_side) return ds4rt_fail(DS4RT_ERR_INTERNAL, "branch JOIN inside the side branch");
        return gpu_side_join(ctx);
    }
    return ds4rt_fail(DS4RT_ERR_INTERNAL, "branch %d", (int)which);
}

int gpu_ctx_threads(const ds4rt_bctx *ctx) {
    (void)ctx;
    return 1;
}

static ds4rt_status bounds(const ds4rt_dbuf *b, uint64_t off, uint64_t bytes, const char *what) {
    if (b == NULL || off > b->bytes || bytes > b->bytes - off)
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "%s of %llu bytes at %llu outside a buffer of %llu", what,
                          (unsigned long long)bytes, (unsigned long long)off,
                          (unsigned long long)(b ? b->bytes : 0));
    return DS4RT_OK;
}

ds4rt_status gpu_upload(ds4rt_bctx *ctx, ds4rt_dbuf *dst, uint64_t off, const void *src, uint64_t bytes) {
    TRY(bounds(dst, off, bytes, "upload"));
    if (bytes == 0) return DS4RT_OK;
    /* the source may be the caller's stack (the pass block image): wait until it is read */
    GK(ds4rt_gk_memcpy_h2d((uint8_t *)dst->ptr + off, src, (size_t)bytes, gstream(ctx)), "upload");
    return gpu_synchronize(ctx);
}

ds4rt_status gpu_download(ds4rt_bctx *ctx, ds4rt_dbuf *src, uint64_t off, void *dst, uint64_t bytes) {
    TRY(bounds(src, off, bytes, "download"));
    if (bytes == 0) return DS4RT_OK;
    GK(ds4rt_gk_memcpy_d2h(dst, (const uint8_t *)src->ptr + off, (size_t)bytes, gstream(ctx)), "download");
    return gpu_synchronize(ctx);
}

ds4rt_status gpu_synchronize(ds4rt_bctx *ctx) {
    TRY(gpu_side_join(ctx));
    GK(ds4rt_gk_stream_sync(gstream(ctx)), "synchronize");
    return DS4RT_OK;
}

/* Stage timers: an event recorded on the context's stream completes when every op issued
 * before it has, so the time between two is the device's time for the ops between them. */
ds4rt_status gpu_mark(ds4rt_bctx *ctx, uint32_t slot) {
    gpu_ctx *c = gctx(ctx);
    if (slot >= DS4RT_MARK_SLOTS) return ds4rt_fail(DS4RT_ERR_INTERNAL, "mark slot %u of %u", slot, DS4RT_MARK_SLOTS);
    if (c->recording) return ds4rt_fail(DS4RT_ERR_INTERNAL, "stage-timer mark inside a recorded pass");
    TRY(gpu_side_join(ctx));
    if (c->marks[slot] == NULL) GK(ds4rt_gk_event_create(&c->marks[slot]), "stage-timer event");
    GK(ds4rt_gk_event_record(c->marks[slot], c->stream), "stage-timer mark");
    c->marked |= 1u << slot;
    return DS4RT_OK;
}

ds4rt_status gpu_mark_ms(ds4rt_bctx *ctx, uint32_t from, uint32_t to, double *ms) {
    gpu_ctx *c = gctx(ctx);
    if (from >= DS4RT_MARK_SLOTS || to >= DS4RT_MARK_SLOTS || !(c->marked >> from & 1u) || !(c->marked >> to & 1u))
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "stage timer between marks %u and %u, not both made", from, to);
    float f = 0.0f;
    GK(ds4rt_gk_event_elapsed_ms(c->marks[from], c->marks[to], &f), "stage timer");
    *ms = f;
    return DS4RT_OK;
}
