/*
 * added_tokens.c - finds added tokens (<｜User｜>, <think>, ...) in text the way tokenizers'
 * AddedVocabulary does with its Aho-Corasick automaton in LeftmostLongest mode: the match
 * that starts leftmost wins, and among those starting there the longest. Matches do not
 * overlap; the search resumes after each match. Walking a byte trie from every candidate
 * start gives the same matches; the walk is bounded by the longest token, so the cost is
 * linear in the text.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

ds4rt_status ds4rt_added_trie_init(ds4rt_added_trie *t) {
    memset(t, 0, sizeof *t);
    t->cap_nodes = 64;
    t->terminal = malloc(t->cap_nodes * sizeof *t->terminal);
    t->edge_mask = 127;
    t->edge_key = calloc(t->edge_mask + 1, sizeof *t->edge_key);
    t->edge_child = malloc((t->edge_mask + 1) * sizeof *t->edge_child);
    if (!t->terminal || !t->edge_key || !t->edge_child) {
        ds4rt_added_trie_free(t);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "added-token trie");
    }
    t->terminal[0] = -1;
    t->n_nodes = 1;
    return DS4RT_OK;
}

void ds4rt_added_trie_free(ds4rt_added_trie *t) {
    free(t->terminal);
    free(t->edge_key);
    free(t->edge_child);
    memset(t, 0, sizeof *t);
}

static inline size_t edge_slot(uint64_t key, size_t mask) {
    return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 24) & mask;
}

/* Child of node along byte b, or 0 (the root is never a child). */
static inline uint32_t child_of(const ds4rt_added_trie *t, uint32_t node, uint8_t b) {
    uint64_t key = (((uint64_t)node << 8) | b) + 1;
    for (size_t i = edge_slot(key, t->edge_mask);; i = (i + 1) & t->edge_mask) {
        if (t->edge_key[i] == key) return t->edge_child[i];
        if (t->edge_key[i] == 0) return 0;
    }
}

static int grow_edges(ds4rt_added_trie *t) {
    size_t cap = (t->edge_mask + 1) * 2;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *kids = malloc(cap * sizeof *kids);
    if (!keys || !kids) {
        free(keys);
        free(kids);
        return 0;
    }
    for (size_t i = 0; i <= t->edge_mask; i++) {
        if (!t->edge_key[i]) continue;
        size_t j = edge_slot(t->edge_key[i], cap - 1);
        while (keys[j]) j = (j + 1) & (cap - 1);
        keys[j] = t->edge_key[i];
        kids[j] = t->edge_child[i];
    }
    free(t->edge_key);
    free(t->edge_child);
    t->edge_key = keys;
    t->edge_child = kids;
    t->edge_mask = cap - 1;
    return 1;
}

ds4rt_status ds4rt_added_trie_insert(ds4rt_added_trie *t, const uint8_t *s, size_t n,
                                     int32_t id) {
    if (n == 0) return ds4rt_fail(DS4RT_ERR_FORMAT, "added token %d is empty", id);
    uint32_t node = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t next = child_of(t, node, s[k]);
        if (next == 0) {
            if (t->n_nodes == t->cap_nodes) {
                int32_t *p = realloc(t->terminal, 2 * t->cap_nodes * sizeof *p);
                if (!p) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "added-token trie");
                t->terminal = p;
                t->cap_nodes *= 2;
            }
            if (2 * (t->n_edges + 1) > t->edge_mask + 1 && !grow_edges(t))
                return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "added-token trie");
            if (t->n_nodes > UINT32_MAX - 1)
                return ds4rt_fail(DS4RT_ERR_FORMAT, "added tokens too long in total");
            next = (uint32_t)t->n_nodes++;
            t->terminal[next] = -1;
            uint64_t key = (((uint64_t)node << 8) | s[k]) + 1;
            size_t i = edge_slot(key, t->edge_mask);
            while (t->edge_key[i]) i = (i + 1) & t->edge_mask;
            t->edge_key[i] = key;
            t->edge_child[i] = next;
            t->n_edges++;
        }
        node = next;
    }
    /* The same string twice: the lower id keeps it (callers insert in id order). */
    if (t->terminal[node] < 0) {
        t->terminal[node] = id;
        t->n_tokens++;
    }
    t->first_byte[s[0]] = 1;
    return DS4RT_OK;
}

int ds4rt_added_trie_find(const ds4rt_added_trie *t, const uint8_t *text, size_t from, size_t n,
                          size_t *begin, size_t *end, int32_t *id) {
    if (t->n_tokens == 0) return 0;
    for (size_t p = from; p < n; p++) {
        if (!t->first_byte[text[p]]) continue;
        uint32_t node = 0;
        int32_t best = -1;
        size_t best_end = 0;
        for (size_t q = p; q < n; q++) {
            node = child_of(t, node, text[q]);
            if (node == 0) break;
            if (t->terminal[node] >= 0) {
                best = t->terminal[node];
                best_end = q + 1;
            }
        }
        if (best >= 0) {
            *begin = p;
            *end = best_end;
            *id = best;
            return 1;
        }
    }
    return 0;
}
