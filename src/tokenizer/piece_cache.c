/*
 * piece_cache.c - remembers the ids of pieces already encoded during one tokenize call, so
 * repeated words (most of any real text) skip the merge engine. Open addressing on the
 * piece's hash; keys and ids live in two growing arenas. It stops taking new entries at a
 * fixed size, which bounds its memory; lookups keep working.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define CACHE_MAX_ENTRIES (1u << 18)
#define CACHE_MAX_ARENA (UINT32_MAX / 2)

typedef struct cache_slot {
    uint64_t hash;
    uint32_t key_off, key_len; /* key_len 0: empty (pieces are never empty) */
    uint32_t ids_off, n_ids;
} cache_slot;

struct ds4rt_piece_cache {
    cache_slot *slots;
    size_t mask, used;
    uint8_t *keys;
    size_t keys_len, keys_cap;
    int32_t *ids;
    size_t ids_len, ids_cap;
    int full;
};

ds4rt_piece_cache *ds4rt_piece_cache_new(void) {
    ds4rt_piece_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->mask = 1023;
    c->slots = calloc(c->mask + 1, sizeof *c->slots);
    if (!c->slots) {
        free(c);
        return NULL;
    }
    return c;
}

void ds4rt_piece_cache_free(ds4rt_piece_cache *c) {
    if (!c) return;
    free(c->slots);
    free(c->keys);
    free(c->ids);
    free(c);
}

const int32_t *ds4rt_piece_cache_get(const ds4rt_piece_cache *c, const uint8_t *p, size_t n,
                                     uint64_t hash, size_t *n_ids) {
    size_t i = (size_t)hash & c->mask;
    for (;;) {
        const cache_slot *s = &c->slots[i];
        if (s->key_len == 0) return NULL;
        if (s->hash == hash && s->key_len == n && memcmp(c->keys + s->key_off, p, n) == 0) {
            *n_ids = s->n_ids;
            return c->ids + s->ids_off;
        }
        i = (i + 1) & c->mask;
    }
}

static int grow_table(ds4rt_piece_cache *c) {
    size_t cap = (c->mask + 1) * 2;
    cache_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return 0;
    for (size_t i = 0; i <= c->mask; i++) {
        if (c->slots[i].key_len == 0) continue;
        size_t j = (size_t)c->slots[i].hash & (cap - 1);
        while (slots[j].key_len) j = (j + 1) & (cap - 1);
        slots[j] = c->slots[i];
    }
    free(c->slots);
    c->slots = slots;
    c->mask = cap - 1;
    return 1;
}

/* Capacity (elements) that holds `need`, doubling from `cap`. */
static size_t grown(size_t cap, size_t need) {
    size_t c = cap ? cap : 4096;
    while (c < need) c *= 2;
    return c;
}

static int keys_fit(ds4rt_piece_cache *c, size_t need) {
    if (need <= c->keys_cap) return 1;
    size_t cap = grown(c->keys_cap, need);
    uint8_t *p = realloc(c->keys, cap);
    if (!p) return 0;
    c->keys = p;
    c->keys_cap = cap;
    return 1;
}

static int ids_fit(ds4rt_piece_cache *c, size_t need) {
    if (need <= c->ids_cap) return 1;
    size_t cap = grown(c->ids_cap, need);
    int32_t *p = realloc(c->ids, cap * sizeof *p);
    if (!p) return 0;
    c->ids = p;
    c->ids_cap = cap;
    return 1;
}

void ds4rt_piece_cache_put(ds4rt_piece_cache *c, const uint8_t *p, size_t n, uint64_t hash,
                           const int32_t *ids, size_t n_ids) {
    if (c->full || n == 0) return;
    if (c->used >= CACHE_MAX_ENTRIES || c->keys_len + n > CACHE_MAX_ARENA ||
        c->ids_len + n_ids > CACHE_MAX_ARENA) {
        c->full = 1;
        return;
    }
    if (2 * (c->used + 1) > c->mask + 1 && !grow_table(c)) {
        c->full = 1;
        return;
    }
    if (!keys_fit(c, c->keys_len + n) || !ids_fit(c, c->ids_len + n_ids)) {
        c->full = 1;
        return;
    }
    size_t i = (size_t)hash & c->mask;
    while (c->slots[i].key_len) i = (i + 1) & c->mask;
    cache_slot *s = &c->slots[i];
    s->hash = hash;
    s->key_off = (uint32_t)c->keys_len;
    s->key_len = (uint32_t)n;
    s->ids_off = (uint32_t)c->ids_len;
    s->n_ids = (uint32_t)n_ids;
    memcpy(c->keys + c->keys_len, p, n);
    memcpy(c->ids + c->ids_len, ids, n_ids * sizeof(int32_t));
    c->keys_len += n;
    c->ids_len += n_ids;
    c->used++;
}
