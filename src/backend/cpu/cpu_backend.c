/*
 * cpu_backend.c - the CPU backend's table: host buffers, contexts (a thread pool and the ops'
 * workspaces), the capability answer, and the op entries (implemented in cpu_*.c).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "internal.h"
#include "qtypes.h"
#include "repack.h"

/* ---- capability ---------------------------------------------------------------------------- */

static bool cpu_supports(const ds4rt_backend *be, ds4rt_op op, uint32_t type) {
    (void)be;
    if ((unsigned)op >= DS4RT_OP_COUNT) return false;
    switch (op) {
    /* ops that read a weight matrix: every type the quant kernels compute with */
    case DS4RT_OP_GET_ROWS:
    case DS4RT_OP_HC_PRE:
    case DS4RT_OP_HC_HEAD:
    case DS4RT_OP_MATMUL:
    case DS4RT_OP_GROUPED_OUT:
    case DS4RT_OP_MOE: return ds4rt_type_is_computable(type) != 0;
    /* ops on f32 activations only */
    default: return type == DS4RT_TYPE_F32;
    }
}

/* ---- memory -------------------------------------------------------------------------------- */

static ds4rt_status new_buf(ds4rt_backend *be, ds4rt_mem_kind kind, void *ptr, uint64_t bytes, bool owned,
                            ds4rt_dbuf **out) {
    ds4rt_dbuf *b = malloc(sizeof *b);
    if (b == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "buffer record");
    *b = (ds4rt_dbuf){.be = be, .ptr = ptr, .bytes = bytes, .kind = kind, .owned = owned};
    ds4rt_backend_account(be, kind, (int64_t)bytes);
    *out = b;
    return DS4RT_OK;
}

static const char *const KIND_NAMES[DS4RT_MEM_COUNT] = {"weights", "state", "scratch", "graphs"};

static ds4rt_status cpu_alloc(ds4rt_backend *be, ds4rt_mem_kind kind, uint64_t bytes, ds4rt_dbuf **out) {
    *out = NULL;
    /* 64-byte aligned, zero-filled; never a zero-size allocation */
    uint64_t rounded = (bytes + 63) & ~(uint64_t)63;
    void *p = rounded > SIZE_MAX ? NULL : aligned_alloc(64, rounded ? (size_t)rounded : 64);
    if (p == NULL)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "%s: %llu bytes of host memory", KIND_NAMES[kind],
                          (unsigned long long)bytes);
    memset(p, 0, rounded ? (size_t)rounded : 64);
    ds4rt_status st = new_buf(be, kind, p, bytes, true, out);
    if (st != DS4RT_OK) free(p);
    return st;
}

static ds4rt_status cpu_map_weights(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out) {
    /* the CPU computes straight from the mapping: a view, no copy */
    return new_buf(be, DS4RT_MEM_WEIGHTS, (void *)host, bytes, false, out);
}

static ds4rt_status cpu_upload_weights(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out) {
    TRY(cpu_alloc(be, DS4RT_MEM_WEIGHTS, bytes, out));
    if (bytes) memcpy((*out)->ptr, host, (size_t)bytes);
    return DS4RT_OK;
}

/* Q8_0 matrices in the layout the active kernel path multiplies fastest (repack.h): a copy of
 * the same size as the file's bytes, made once here. */
static ds4rt_status cpu_prepare_weight(ds4rt_backend *be, ds4rt_dweight *w, uint32_t count, uint64_t stride, bool dry,
                                       ds4rt_dbuf **owned, uint64_t *bytes) {
    *owned = NULL;
    *bytes = 0;
    const uint32_t layout = ds4rt_cpu_preferred_layout(w->type, w->rows, w->cols); /* FILE, Q8_0_X8 or R16 */
    if (layout == DS4RT_LAYOUT_FILE || count == 0) return DS4RT_OK;
    const uint64_t one = (uint64_t)w->rows * w->row_bytes, span = (uint64_t)(count - 1) * stride + one;
    if (!dry) {
        ds4rt_dbuf *buf;
        TRY(cpu_alloc(be, DS4RT_MEM_WEIGHTS, span, &buf));
        for (uint32_t e = 0; e < count; e++)
            ds4rt_repack(layout, B(w->data) + (uint64_t)e * stride, (uint8_t *)buf->ptr + (uint64_t)e * stride,
                         w->rows, w->cols, w->row_bytes);
        w->data = (ds4rt_dbytes){buf, 0};
        *owned = buf;
    }
    w->layout = layout;
    *bytes = span;
    return DS4RT_OK;
}

static void cpu_release(ds4rt_backend *be, ds4rt_dbuf *b) {
    if (b == NULL) return;
    ds4rt_backend_account(be, b->kind, -(int64_t)b->bytes);
    if (b->owned) free(b->ptr);
    free(b);
}

/* ---- contexts ------------------------------------------------------------------------------ */

static const ds4rt_backend_ops CPU_OPS;

static ds4rt_status cpu_ctx_create(ds4rt_backend *be, int n_threads, ds4rt_bctx **out) {
    *out = NULL;
    cpu_ctx *c = calloc(1, sizeof *c);
    if (c == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "execution context");
    c->base.ops = &CPU_OPS;
    c->base.be = be;
    ds4rt_status st = ds4rt_pool_create(n_threads, &c->pool);
    if (st != DS4RT_OK) {
        free(c);
        return st;
    }
    *out = &c->base;
    return DS4RT_OK;
}

static ds4rt_status cpu_ctx_reserve(ds4rt_bctx *ctx, const ds4rt_hparams *hp, const ds4rt_limits *lim) {
    cpu_ctx *c = cpu(ctx);
    uint64_t before = c->ws.bytes;
    ds4rt_status st = cpu_workspace_reserve(&c->ws, hp, lim, ds4rt_pool_threads(c->pool));
    ds4rt_backend_account(ctx->be, DS4RT_MEM_SCRATCH, (int64_t)c->ws.bytes - (int64_t)before);
    return st;
}

static void cpu_ctx_free(ds4rt_bctx *ctx) {
    if (ctx == NULL) return;
    cpu_ctx *c = cpu(ctx);
    ds4rt_backend_account(ctx->be, DS4RT_MEM_SCRATCH, -(int64_t)c->ws.bytes);
    cpu_workspace_free(&c->ws);
    cpu_comp_saved_free(c);
    ds4rt_pool_destroy(c->pool);
    free(c);
}

static int cpu_ctx_threads(const ds4rt_bctx *ctx) { return ds4rt_pool_threads(((const cpu_ctx *)ctx)->pool); }

static ds4rt_status bounds(const ds4rt_dbuf *b, uint64_t off, uint64_t bytes, const char *what) {
    if (b == NULL || off > b->bytes || bytes > b->bytes - off)
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "%s of %llu bytes at %llu outside a buffer of %llu", what,
                          (unsigned long long)bytes, (unsigned long long)off,
                          (unsigned long long)(b ? b->bytes : 0));
    return DS4RT_OK;
}

static ds4rt_status cpu_upload(ds4rt_bctx *ctx, ds4rt_dbuf *dst, uint64_t off, const void *src, uint64_t bytes) {
    (void)ctx;
    TRY(bounds(dst, off, bytes, "upload"));
    if (bytes) memcpy((uint8_t *)dst->ptr + off, src, (size_t)bytes);
    return DS4RT_OK;
}

static ds4rt_status cpu_download(ds4rt_bctx *ctx, ds4rt_dbuf *src, uint64_t off, void *dst, uint64_t bytes) {
    (void)ctx;
    TRY(bounds(src, off, bytes, "download"));
    if (bytes) memcpy(dst, (const uint8_t *)src->ptr + off, (size_t)bytes);
    return DS4RT_OK;
}

/* Every CPU op has finished when it returns. */
static ds4rt_status cpu_synchronize(ds4rt_bctx *ctx) {
    (void)ctx;
    return DS4RT_OK;
}

/* Stage timers: every CPU op has finished when it returns, so the host clock at a mark is the
 * moment the ops before it finished. */
static ds4rt_status cpu_mark(ds4rt_bctx *ctx, uint32_t slot) {
    if (slot >= DS4RT_MARK_SLOTS) return ds4rt_fail(DS4RT_ERR_INTERNAL, "mark slot %u of %u", slot, DS4RT_MARK_SLOTS);
    cpu(ctx)->marks[slot] = ds4rt_now_ms();
    cpu(ctx)->marked |= 1u << slot;
    return DS4RT_OK;
}

static ds4rt_status cpu_mark_ms(ds4rt_bctx *ctx, uint32_t from, uint32_t to, double *ms) {
    const cpu_ctx *c = cpu(ctx);
    if (from >= DS4RT_MARK_SLOTS || to >= DS4RT_MARK_SLOTS || !(c->marked >> from & 1u) || !(c->marked >> to & 1u))
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "stage timer between marks %u and %u, not both made", from, to);
    *ms = c->marks[to] - c->marks[from];
    return DS4RT_OK;
}

static const ds4rt_backend_ops CPU_OPS = {
    .version = DS4RT_BACKEND_OPS_VERSION,
    .supports = cpu_supports,
    .alloc = cpu_alloc,
    .map_weights = cpu_map_weights,
    .upload_weights = cpu_upload_weights,
    .prepare_weight = cpu_prepare_weight,
    .release = cpu_release,
    .ctx_create = cpu_ctx_create,
    .ctx_reserve = cpu_ctx_reserve,
    .ctx_free = cpu_ctx_free,
    .ctx_threads = cpu_ctx_threads,
    .upload = cpu_upload,
    .download = cpu_download,
    .synchronize = cpu_synchronize,
    .mark = cpu_mark,
    .mark_ms = cpu_mark_ms,
    .get_rows = cpu_get_rows,
    .hc_pre = cpu_hc_pre,
    .hc_post = cpu_hc_post,
    .hc_head = cpu_hc_head,
    .rms_norm = cpu_rms_norm,
    .matmul = cpu_matmul,
    .rope = cpu_rope,
    .norm_rope = cpu_norm_rope,
    .fp8_round = cpu_fp8_round,
    .fp4_round = cpu_fp4_round,
    .hadamard = cpu_hadamard,
    .kv_store = cpu_kv_store,
    .comp_reset = cpu_comp_reset,
    .comp_snapshot = cpu_comp_snapshot,
    .comp_update = cpu_comp_update,
    .comp_rollback = cpu_comp_rollback,
    .indexer_topk = cpu_indexer_topk,
    .attention = cpu_attention,
    .grouped_out = cpu_grouped_out,
    .moe = cpu_moe,
    .capture = cpu_capture,
    .argmax = cpu_argmax,
    .add = cpu_add,
    .nonfinite = cpu_nonfinite,
    .dspark_confidence = cpu_dspark_confidence,
};

/* ---- registry entry ------------------------------------------------------------------------ */

static int cpu_device_count(void) { return 1; }

static ds4rt_status cpu_create(int device, int n_threads, ds4rt_backend **out) {
    *out = NULL;
    if (device != 0) return ds4rt_fail(DS4RT_ERR_BACKEND, "backend cpu has one device (0), not %d", device);
    ds4rt_backend *be = calloc(1, sizeof *be);
    if (be == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "backend");
    be->ops = &CPU_OPS;
    be->device = 0;
    be->n_threads = n_threads;
    *out = be;
    return DS4RT_OK;
}

const ds4rt_backend_entry ds4rt_cpu_backend_entry = {
    .name = "cpu", .kind = DS4RT_BKIND_CPU, .device_count = cpu_device_count, .create = cpu_create};
