/* gguf_index.c - hash index from key and tensor names to record numbers (open addressing,
 * linear probing, seeded FNV-1a with a final mix). The real model has ~1400 tensors, and
 * lookups by name happen for every tensor the model binds, so a linear scan is not enough. */
#include <stdlib.h>
#include <time.h>

#include "gguf_internal.h"

static uint64_t name_hash(uint64_t seed, const char *s, uint64_t len) {
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (uint64_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    /* Final avalanche so that the low bits used as the slot depend on every input byte. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static uint64_t fresh_seed(const void *salt) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    uint64_t s = (uint64_t)(uintptr_t)salt ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec;
    return name_hash(0x9e3779b97f4a7c15ull, (const char *)&s, sizeof s);
}

static bool same_name(ds4rt_str a, const char *s, uint64_t len) {
    return a.len == len && (len == 0 || memcmp(a.data, s, len) == 0);
}

ds4rt_str gguf_kv_name_at(const ds4rt_gguf *g, uint64_t i) { return g->kvs[i].key; }

ds4rt_str gguf_tensor_name_at(const ds4rt_gguf *g, uint64_t i) { return g->tensors[i].name; }

gguf_index_result gguf_index_build(gguf_name_index *ix, const ds4rt_gguf *g, uint64_t n,
                                   gguf_name_at_fn name_at, uint64_t *first, uint64_t *dup) {
    /* At most half full. n is bounded by the file size (every record was parsed), so the
     * doubling below cannot overflow before the allocation would fail anyway. */
    uint64_t cap = 8;
    while (cap < 2 * n) cap *= 2;
    if (cap > SIZE_MAX / sizeof(uint64_t)) return GGUF_INDEX_NO_MEMORY;
    ix->slots = calloc((size_t)cap, sizeof(uint64_t));
    if (ix->slots == NULL) return GGUF_INDEX_NO_MEMORY;
    ix->mask = cap - 1;
    ix->seed = fresh_seed(ix);
    for (uint64_t i = 0; i < n; i++) {
        ds4rt_str name = name_at(g, i);
        uint64_t slot = name_hash(ix->seed, name.data, name.len) & ix->mask;
        while (ix->slots[slot] != 0) {
            uint64_t other = ix->slots[slot] - 1;
            if (same_name(name_at(g, other), name.data, name.len)) {
                *first = other;
                *dup = i;
                return GGUF_INDEX_DUPLICATE;
            }
            slot = (slot + 1) & ix->mask;
        }
        ix->slots[slot] = i + 1;
    }
    return GGUF_INDEX_OK;
}

uint64_t gguf_index_find(const gguf_name_index *ix, const ds4rt_gguf *g, gguf_name_at_fn name_at,
                         const char *name, uint64_t len) {
    if (ix->slots == NULL) return UINT64_MAX;
    uint64_t slot = name_hash(ix->seed, name, len) & ix->mask;
    while (ix->slots[slot] != 0) {
        uint64_t i = ix->slots[slot] - 1;
        if (same_name(name_at(g, i), name, len)) return i;
        slot = (slot + 1) & ix->mask;
    }
    return UINT64_MAX;
}

void gguf_index_free(gguf_name_index *ix) {
    free(ix->slots);
    ix->slots = NULL;
}
