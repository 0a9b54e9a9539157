/*
 * gpu_memory.c - device buffers of the GPU backend, accounted by category (weights, state,
 * scratch, graphs). A failed device allocation is DS4RT_ERR_OUT_OF_MEMORY naming the category,
 * the size and the device, never a crash. Weights from the GGUF mapping are uploaded once; on a
 * unified-memory device they are viewed in place instead of copied (docs/GPU.md), and where the
 * runtime cannot view them the upload happens with the reason recorded and counted.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_internal.h"

static const char *const KIND_NAMES[DS4RT_MEM_COUNT] = {"weights", "state", "scratch", "graphs"};

const char *gpu_mem_kind_name(ds4rt_mem_kind kind) {
    return (unsigned)kind < DS4RT_MEM_COUNT ? KIND_NAMES[kind] : "?";
}

ds4rt_status gpu_check(int gk_status, const char *op) {
    if (gk_status == DS4RT_GK_OK) return DS4RT_OK;
    ds4rt_status st = gk_status == DS4RT_GK_ERR_OUT_OF_MEMORY ? DS4RT_ERR_OUT_OF_MEMORY
                      : gk_status == DS4RT_GK_ERR_ARGUMENT    ? DS4RT_ERR_INTERNAL
                                                              : DS4RT_ERR_BACKEND;
    return ds4rt_fail(st, "gpu %s: %s", op, ds4rt_gk_last_error());
}

static ds4rt_status new_buf(ds4rt_backend *be, ds4rt_mem_kind kind, void *ptr, uint64_t bytes, bool owned,
                            ds4rt_dbuf **out) {
    ds4rt_dbuf *b = malloc(sizeof *b);
    if (b == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "buffer record");
    *b = (ds4rt_dbuf){.be = be, .ptr = ptr, .bytes = bytes, .kind = kind, .owned = owned};
    ds4rt_backend_account(be, kind, (int64_t)bytes);
    *out = b;
    return DS4RT_OK;
}

/* Device memory of `bytes` (at least 256 so every buffer has an address), zero-filled. */
static ds4rt_status device_alloc(ds4rt_backend *be, ds4rt_mem_kind kind, uint64_t bytes, void **ptr) {
    *ptr = NULL;
    uint64_t rounded = (bytes + 255) & ~(uint64_t)255;
    if (rounded == 0) rounded = 256;
    int st = rounded > SIZE_MAX ? DS4RT_GK_ERR_OUT_OF_MEMORY : ds4rt_gk_malloc(ptr, (size_t)rounded);
    if (st != DS4RT_GK_OK) {
        ds4rt_status s = st == DS4RT_GK_ERR_OUT_OF_MEMORY ? DS4RT_ERR_OUT_OF_MEMORY : DS4RT_ERR_BACKEND;
        return ds4rt_fail(s, "%s: %llu bytes of device memory on %s: %s", KIND_NAMES[kind], (unsigned long long)bytes,
                          gpu_be(be)->device_name, ds4rt_gk_last_error());
    }
    void *stream = gpu_be(be)->load_stream;
    st = ds4rt_gk_memset(*ptr, 0, (size_t)rounded, stream);
    if (st == DS4RT_GK_OK) st = ds4rt_gk_stream_sync(stream);
    if (st != DS4RT_GK_OK) {
        ds4rt_gk_free(*ptr);
        *ptr = NULL;
        return gpu_check(st, "zero-fill");
    }
    return DS4RT_OK;
}

ds4rt_status gpu_alloc(ds4rt_backend *be, ds4rt_mem_kind kind, uint64_t bytes, ds4rt_dbuf **out) {
    *out = NULL;
    if ((unsigned)kind >= DS4RT_MEM_COUNT) return ds4rt_fail(DS4RT_ERR_INTERNAL, "memory kind %d", (int)kind);
    void *p;
    TRY(device_alloc(be, kind, bytes, &p));
    ds4rt_status st = new_buf(be, kind, p, bytes, true, out);
    if (st != DS4RT_OK) ds4rt_gk_free(p);
    return st;
}

ds4rt_status gpu_upload_weights(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out) {
    TRY(gpu_alloc(be, DS4RT_MEM_WEIGHTS, bytes, out));
    void *stream = gpu_be(be)->load_stream;
    int st = ds4rt_gk_memcpy_h2d((*out)->ptr, host, (size_t)bytes, stream);
    if (st == DS4RT_GK_OK) st = ds4rt_gk_stream_sync(stream);
    if (st != DS4RT_GK_OK) {
        gpu_release(be, *out);
        *out = NULL;
        return gpu_check(st, "weight upload");
    }
    return DS4RT_OK;
}

ds4rt_status gpu_map_weights(ds4rt_backend *be, const void *host, uint64_t bytes, ds4rt_dbuf **out) {
    gpu_impl *g = gpu_be(be);
    *out = NULL;
    if (g->integrated) {
        /* unified memory: the device reads the mapping itself; no second copy */
        void *d = NULL;
        int st = ds4rt_gk_host_view(host, (size_t)bytes, &d);
        if (st == DS4RT_GK_OK) {
            ds4rt_status s = new_buf(be, DS4RT_MEM_WEIGHTS, d, bytes, false, out);
            if (s != DS4RT_OK) {
                ds4rt_gk_host_unview(host);
                return s;
            }
            (*out)->host = host;
            g->weight_views++;
            return DS4RT_OK;
        }
        /* counted and kept with its reason (model info), then the ordinary upload */
        g->weight_view_fallbacks++;
        snprintf(g->weight_view_reason, sizeof g->weight_view_reason, "unified-memory view refused, copied: %s",
                 ds4rt_gk_last_error());
    }
    return gpu_upload_weights(be, host, bytes, out);
}

void gpu_release(ds4rt_backend *be, ds4rt_dbuf *b) {
    if (b == NULL) return;
    ds4rt_backend_account(be, b->kind, -(int64_t)b->bytes);
    if (b->owned)
        ds4rt_gk_free(b->ptr);
    else
        ds4rt_gk_host_unview(b->host);
    free(b);
}
