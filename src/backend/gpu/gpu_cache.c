/*
 * gpu_cache.c - the Q8->F16 expansion cache of the GPU backend (docs/CACHE.md): F16 copies of
 * selected Q8_0 matrices, expanded once on the device (hip/q8_expand.hip, bitwise the CPU
 * dequantiser rounded to F16), which every product of such a matrix then uses. Used for every
 * batch size alike, so batch invariance (and the greedy identity of speculation) holds with the
 * cache on; what changes with the policy is the arithmetic (F16 instead of Q8_0 products), never
 * anything a support model does. The policy (which matrices, the budget, what a failure drops)
 * is src/api/cache_policy.c's.
 */
#include <stdlib.h>

#include "gpu_internal.h"
#include "q8_expand.h"
#include "qtypes.h"

ds4rt_status gpu_cache_expand(ds4rt_backend *be, const ds4rt_dweight *w, uint64_t *bytes) {
    gpu_impl *g = gpu_be(be);
    *bytes = 0;
    const uint64_t blocks_per_row = (uint64_t)w->cols / 32;
    if (w->type != DS4RT_TYPE_Q8_0 || w->cols % 32 != 0 || w->row_bytes != blocks_per_row * 34)
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "the F16 cache expands contiguous Q8_0 matrices only");
    if (g->n_cache == g->cap_cache) {
        size_t cap = g->cap_cache ? 2 * g->cap_cache : 64;
        gpu_cache_entry *p = realloc(g->cache, cap * sizeof *p);
        if (p == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "cache table");
        g->cache = p;
        g->cap_cache = cap;
    }
    const uint64_t f16_bytes = (uint64_t)w->rows * (uint64_t)w->cols * 2;
    ds4rt_dbuf *f;
    ds4rt_status st = gpu_alloc(be, DS4RT_MEM_WEIGHTS, f16_bytes, &f);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "Q8_0->F16 cache");
    int gs = ds4rt_gk_q8_0_to_f16(DB(w->data), (size_t)(blocks_per_row * (uint64_t)w->rows), (uint16_t *)f->ptr,
                                  g->load_stream);
    if (gs == DS4RT_GK_OK) gs = ds4rt_gk_stream_sync(g->load_stream);
    if (gs != DS4RT_GK_OK) {
        gpu_release(be, f);
        return gpu_check(gs, "Q8_0->F16 expansion");
    }
    g->cache[g->n_cache++] = (gpu_cache_entry){.src = DB(w->data), .rows = w->rows, .cols = w->cols,
                                               .row_bytes = w->row_bytes, .f16 = f};
    *bytes = f16_bytes;
    return DS4RT_OK;
}

uint64_t gpu_cache_hits(const ds4rt_backend *be) { return atomic_load(&gpu_be(be)->cache_hits); }

/* The cached F16 copy of w, if any, without counting a hit. */
static bool cache_lookup(ds4rt_backend *be, const ds4rt_dweight *w, ds4rt_dweight *f16) {
    gpu_impl *g = gpu_be(be);
    if (w->type != DS4RT_TYPE_Q8_0 || g->n_cache == 0) return false;
    const uint8_t *p = DB(w->data);
    for (size_t i = 0; i < g->n_cache; i++) {
        const gpu_cache_entry *e = &g->cache[i];
        /* the matrix, or a block of its rows (grouped_out multiplies row slices) */
        if (p < e->src || p >= e->src + (uint64_t)e->rows * e->row_bytes || w->cols != e->cols ||
            w->row_bytes != e->row_bytes)
            continue;
        uint64_t off = (uint64_t)(p - e->src);
        if (off % e->row_bytes != 0 || (int64_t)(off / e->row_bytes) + w->rows > e->rows) continue;
        *f16 = (ds4rt_dweight){.type = DS4RT_TYPE_F16,
                               .data = {e->f16, off / e->row_bytes * (uint64_t)e->cols * 2},
                               .rows = w->rows,
                               .cols = w->cols,
                               .row_bytes = (uint64_t)e->cols * 2};
        return true;
    }
    return false;
}

bool gpu_cache_find(ds4rt_backend *be, const ds4rt_dweight *w, ds4rt_dweight *f16) {
    if (!cache_lookup(be, w, f16)) return false;
    atomic_fetch_add(&gpu_be(be)->cache_hits, 1);
    return true;
}

bool gpu_cache_holds(ds4rt_backend *be, const ds4rt_dweight *w) {
    ds4rt_dweight f16;
    return cache_lookup(be, w, &f16);
}

void gpu_cache_free(ds4rt_backend *be) {
    gpu_impl *g = gpu_be(be);
    for (size_t i = 0; i < g->n_cache; i++) gpu_release(be, g->cache[i].f16);
    free(g->cache);
    g->cache = NULL;
    g->n_cache = g->cap_cache = 0;
}
