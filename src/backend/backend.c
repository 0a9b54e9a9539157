/*
 * backend.c - the registry of compiled-in backends, backend selection at model load, the
 * capability check that names what is missing, and small helpers over the op table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "internal.h"
#include "qtypes.h"

/* CPU first; GPU backends register here when their op table is compiled in. */
static const ds4rt_backend_entry *const REGISTRY[] = {
    &ds4rt_cpu_backend_entry,
#ifdef DS4RT_CUDA_BACKEND_TABLE
    &ds4rt_cuda_backend_entry,
#endif
#ifdef DS4RT_HIP_BACKEND_TABLE
    &ds4rt_hip_backend_entry,
#endif
};

size_t ds4rt_backend_registry(const ds4rt_backend_entry *const **out) {
    *out = REGISTRY;
    return DS4RT_ARRAY_LEN(REGISTRY);
}

const ds4rt_backend_entry *ds4rt_backend_find(ds4rt_bkind kind) {
    for (size_t i = 0; i < DS4RT_ARRAY_LEN(REGISTRY); i++)
        if (REGISTRY[i]->kind == kind) return REGISTRY[i];
    return NULL;
}

static const char *kind_name(ds4rt_bkind k) {
    switch (k) {
    case DS4RT_BKIND_AUTO: return "auto";
    case DS4RT_BKIND_CPU: return "cpu";
    case DS4RT_BKIND_CUDA: return "cuda";
    case DS4RT_BKIND_HIP: return "hip";
    }
    return "?";
}

ds4rt_status ds4rt_backend_open(ds4rt_bkind kind, int device, int n_threads, ds4rt_backend **out) {
    *out = NULL;
    const ds4rt_backend_entry *e = NULL;
    if (kind == DS4RT_BKIND_AUTO) {
        /* the first GPU backend that sees a device, else the CPU */
        for (size_t i = 0; i < DS4RT_ARRAY_LEN(REGISTRY) && e == NULL; i++)
            if (REGISTRY[i]->kind != DS4RT_BKIND_CPU && !REGISTRY[i]->explicit_only &&
                REGISTRY[i]->device_count() > device)
                e = REGISTRY[i];
        if (e == NULL) e = ds4rt_backend_find(DS4RT_BKIND_CPU);
    } else {
        if ((unsigned)kind > DS4RT_BKIND_HIP)
            return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "unknown backend kind %d", (int)kind);
        e = ds4rt_backend_find(kind);
        if (e == NULL)
            return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s is not compiled into this build of ds4rt",
                              kind_name(kind));
        int nd = e->device_count();
        if (device < 0 || device >= nd)
            return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s: device %d does not exist (%d visible)", e->name, device,
                              nd);
    }
    ds4rt_status st = e->create(kind == DS4RT_BKIND_AUTO && e->kind == DS4RT_BKIND_CPU ? 0 : device, n_threads, out);
    if (st != DS4RT_OK) return st;
    if ((*out)->ops->version != DS4RT_BACKEND_OPS_VERSION) {
        uint32_t v = (*out)->ops->version;
        ds4rt_backend_close(*out);
        *out = NULL;
        return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s implements op table version %u, this build needs %u", e->name,
                          v, DS4RT_BACKEND_OPS_VERSION);
    }
    (*out)->entry = e;
    return DS4RT_OK;
}

void ds4rt_backend_close(ds4rt_backend *be) {
    if (be == NULL) return;
    if (be->close != NULL) be->close(be);
    free(be->impl);
    free(be);
}

const ds4rt_backend_ops *ds4rt_backend_get_ops(const ds4rt_backend *be) { return be->ops; }
const char *ds4rt_backend_name(const ds4rt_backend *be) { return be->entry ? be->entry->name : "?"; }

uint64_t ds4rt_backend_bytes(const ds4rt_backend *be, ds4rt_mem_kind kind) {
    return atomic_load(&((ds4rt_backend *)be)->bytes[kind]);
}

static const char *const OP_NAMES[DS4RT_OP_COUNT] = {
    [DS4RT_OP_GET_ROWS] = "get_rows",       [DS4RT_OP_HC_PRE] = "hc_pre",
    [DS4RT_OP_HC_POST] = "hc_post",         [DS4RT_OP_HC_HEAD] = "hc_head",
    [DS4RT_OP_RMS_NORM] = "rms_norm",       [DS4RT_OP_MATMUL] = "matmul",
    [DS4RT_OP_ROPE] = "rope",               [DS4RT_OP_FP8_ROUND] = "fp8_round",
    [DS4RT_OP_FP4_ROUND] = "fp4_round",     [DS4RT_OP_HADAMARD] = "hadamard",
    [DS4RT_OP_KV_STORE] = "kv_store",       [DS4RT_OP_COMPRESSOR] = "compressor",
    [DS4RT_OP_INDEXER_TOPK] = "indexer_topk", [DS4RT_OP_ATTENTION] = "attention",
    [DS4RT_OP_GROUPED_OUT] = "grouped_out", [DS4RT_OP_MOE] = "moe",
    [DS4RT_OP_CAPTURE] = "capture",         [DS4RT_OP_ARGMAX] = "argmax",
    [DS4RT_OP_ADD] = "add",                 [DS4RT_OP_NONFINITE] = "nonfinite",
    [DS4RT_OP_DSPARK_CONFIDENCE] = "dspark_confidence", [DS4RT_OP_NORM_ROPE] = "norm_rope",
};

bool ds4rt_backend_has_cache(const ds4rt_backend *be) { return be->cache_expand != NULL; }
bool ds4rt_backend_unified(const ds4rt_backend *be) { return be->unified; }

ds4rt_status ds4rt_backend_cache_expand(ds4rt_backend *be, const ds4rt_dweight *w, uint64_t *bytes) {
    *bytes = 0;
    if (be->cache_expand == NULL)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s has no Q8_0->F16 cache", ds4rt_backend_name(be));
    return be->cache_expand(be, w, bytes);
}

uint64_t ds4rt_backend_cache_hits(const ds4rt_backend *be) { return be->cache_hits ? be->cache_hits(be) : 0; }

const char *ds4rt_op_name(ds4rt_op op) { return (unsigned)op < DS4RT_OP_COUNT ? OP_NAMES[op] : "?"; }

ds4rt_status ds4rt_backend_require(const ds4rt_backend *be, ds4rt_op op, uint32_t type, const char *what) {
    if (be->ops->supports(be, op, type)) return DS4RT_OK;
    const ds4rt_type_info *t = ds4rt_type_lookup(type);
    return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s lacks op %s for type %s (needed by %s)", ds4rt_backend_name(be),
                      ds4rt_op_name(op), t ? t->name : "?", what);
}

ds4rt_status ds4rt_backend_require_head_dim(const ds4rt_backend *be, uint32_t head_dim, const char *what) {
    if (be->max_head_dim == 0 || head_dim <= be->max_head_dim) return DS4RT_OK;
    return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s lacks attention for heads of %u dims (at most %u; needed by %s)",
                      ds4rt_backend_name(be), head_dim, be->max_head_dim, what);
}

ds4rt_status ds4rt_pass_upload(ds4rt_bctx *ctx, ds4rt_dpass in, int64_t pos0, int64_t base, const int32_t *tokens,
                               int64_t n) {
    /* one host image, one upload: a captured graph replays with new contents */
    uint8_t img[DS4RT_PASS_HEADER_BYTES + 4 * 64];
    uint8_t *p = img;
    uint64_t bytes = ds4rt_pass_bytes(n);
    if (bytes > sizeof img && (p = malloc(bytes)) == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "pass block");
    memcpy(p, &pos0, 8);
    memcpy(p + 8, &base, 8);
    if (n > 0) memcpy(p + DS4RT_PASS_HEADER_BYTES, tokens, (size_t)n * 4);
    ds4rt_status st = ctx->ops->upload(ctx, in.buf, 0, p, DS4RT_PASS_HEADER_BYTES + 4 * (uint64_t)(n > 0 ? n : 0));
    if (p != img) free(p);
    return st;
}

ds4rt_status ds4rt_download_f32(ds4rt_bctx *ctx, ds4rt_df32 src, uint64_t count, float *dst) {
    return ctx->ops->download(ctx, src.buf, src.off * 4, dst, count * 4);
}

ds4rt_status ds4rt_download_i32(ds4rt_bctx *ctx, ds4rt_di32 src, uint64_t count, int32_t *dst) {
    return ctx->ops->download(ctx, src.buf, src.off * 4, dst, count * 4);
}

ds4rt_status ds4rt_clock_start(ds4rt_stage_clock *c, ds4rt_bctx *ctx) {
    c->ctx = ctx;
    c->slot = 0;
    return ctx->ops->mark(ctx, 0);
}

ds4rt_status ds4rt_clock_lap(ds4rt_stage_clock *c, double *ms) {
    const uint32_t next = c->slot ^ 1u;
    ds4rt_status st = c->ctx->ops->mark(c->ctx, next);
    if (st == DS4RT_OK) st = c->ctx->ops->mark_ms(c->ctx, c->slot, next, ms);
    c->slot = next;
    return st;
}
