/*
 * bpe.c - the merge table and the merge engine.
 *
 * A piece's bytes start as one symbol each (the id of the byte's one-character token). Then,
 * as in tokenizers' BPE (Word::merge_all), the adjacent pair with the lowest merge rank is
 * merged, ties going to the leftmost pair, until no adjacent pair has a merge. A min-heap keyed
 * (rank, position of the left symbol) holds candidate pairs; an entry is stale when its left
 * symbol was absorbed or its pair changed (a pair only changes by growing, so comparing the
 * rank of the current pair is enough). O(n log n) in the piece length.
 */
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "tokenizer_internal.h"

struct ds4rt_bpe_symbol {
    int32_t id; /* -1 once merged into its left neighbour */
    int32_t prev, next;
};

ds4rt_status ds4rt_merge_map_init(ds4rt_merge_map *map, size_t n) {
    size_t cap = ds4rt_table_capacity(n);
    if (cap == 0) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "merge table of %zu entries", n);
    map->slots = malloc(cap * sizeof *map->slots);
    if (!map->slots) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "merge table of %zu entries", n);
    for (size_t i = 0; i < cap; i++) map->slots[i].key = UINT64_MAX;
    map->mask = cap - 1;
    return DS4RT_OK;
}

void ds4rt_merge_map_free(ds4rt_merge_map *map) {
    free(map->slots);
    map->slots = NULL;
}

void ds4rt_merge_map_put(ds4rt_merge_map *map, int32_t left, int32_t right, uint32_t rank,
                         int32_t new_id) {
    uint64_t key = ds4rt_merge_key(left, right);
    uint64_t h = key * UINT64_C(0x9E3779B97F4A7C15);
    size_t i = (size_t)(h >> 20) & map->mask;
    while (map->slots[i].key != UINT64_MAX && map->slots[i].key != key) i = (i + 1) & map->mask;
    map->slots[i].key = key;
    map->slots[i].rank = rank;
    map->slots[i].new_id = new_id;
}

void ds4rt_bpe_scratch_free(ds4rt_bpe_scratch *scratch) {
    free(scratch->sym);
    free(scratch->heap);
    memset(scratch, 0, sizeof *scratch);
}

static ds4rt_status scratch_reserve(ds4rt_bpe_scratch *s, size_t n) {
    if (n > s->sym_cap) {
        size_t cap = n < 64 ? 64 : n;
        struct ds4rt_bpe_symbol *p = realloc(s->sym, cap * sizeof *p);
        if (!p) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "BPE symbols for a %zu-byte piece", n);
        s->sym = p;
        s->sym_cap = cap;
    }
    /* Initial pairs (n - 1) plus at most two new pairs per merge (n - 1 merges). */
    size_t heap_need = 3 * n;
    if (heap_need > s->heap_cap) {
        uint64_t *p = realloc(s->heap, heap_need * sizeof *p);
        if (!p) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "BPE queue for a %zu-byte piece", n);
        s->heap = p;
        s->heap_cap = heap_need;
    }
    return DS4RT_OK;
}

static inline void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h[parent] <= v) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = v;
}

static inline uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0];
    uint64_t v = h[--(*n)];
    size_t i = 0, size = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= size) break;
        if (c + 1 < size && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (size) h[i] = v;
    return top;
}

static inline void push_pair(const ds4rt_tokenizer *tok, ds4rt_bpe_scratch *s, size_t *n_heap,
                             int32_t left_pos) {
    const struct ds4rt_bpe_symbol *sym = s->sym;
    const ds4rt_merge_slot *m =
        ds4rt_merge_map_get(&tok->merges, sym[left_pos].id, sym[sym[left_pos].next].id);
    if (m) heap_push(s->heap, n_heap, ((uint64_t)m->rank << 32) | (uint32_t)left_pos);
}

ds4rt_status ds4rt_bpe_encode_piece(const ds4rt_tokenizer *tok, ds4rt_bpe_scratch *s,
                                    const uint8_t *piece, size_t n, ds4rt_idvec *out) {
    if (n > INT32_MAX)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "a %zu-byte piece is too long", n);
    ds4rt_status st = scratch_reserve(s, n);
    if (st != DS4RT_OK) return st;
    struct ds4rt_bpe_symbol *sym = s->sym;
    for (size_t k = 0; k < n; k++) {
        int32_t id = tok->byte_token[piece[k]];
        if (id < 0)
            return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                              "byte 0x%02x has no one-character token in this vocabulary",
                              piece[k]);
        sym[k].id = id;
        sym[k].prev = (int32_t)k - 1;
        sym[k].next = k + 1 < n ? (int32_t)k + 1 : -1;
    }

    size_t n_heap = 0;
    for (size_t k = 0; k + 1 < n; k++) push_pair(tok, s, &n_heap, (int32_t)k);

    while (n_heap) {
        uint64_t top = heap_pop(s->heap, &n_heap);
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t pos = (int32_t)(uint32_t)top;
        if (sym[pos].id < 0 || sym[pos].next < 0) continue;
        int32_t right = sym[pos].next;
        const ds4rt_merge_slot *m = ds4rt_merge_map_get(&tok->merges, sym[pos].id, sym[right].id);
        if (!m || m->rank != rank) continue; /* stale */
        sym[pos].id = m->new_id;
        sym[right].id = -1;
        sym[pos].next = sym[right].next;
        if (sym[right].next >= 0) sym[sym[right].next].prev = pos;
        if (sym[pos].prev >= 0) push_pair(tok, s, &n_heap, sym[pos].prev);
        if (sym[pos].next >= 0) push_pair(tok, s, &n_heap, pos);
    }

    for (int32_t k = 0; k >= 0; k = sym[k].next) {
        if ((st = ds4rt_idvec_push(out, sym[k].id)) != DS4RT_OK) return st;
    }
    return DS4RT_OK;
}
