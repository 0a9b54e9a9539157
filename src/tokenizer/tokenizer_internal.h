/*
 * tokenizer_internal.h - the tokenizer object and the interfaces between its parts:
 *   vocabulary + lookups (tokenizer.c), added-token matching (added_tokens.c), the DeepSeek V4
 *   pre-tokenizer (pretokenize.c), the BPE merge engine (bpe.c), the per-call piece cache
 *   (piece_cache.c), encoding (encode.c), decoding (decode.c, detok_stream.c) and the chat
 *   template (chat.c).
 */
#ifndef DS4RT_TOK_INTERNAL_H
#define DS4RT_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* A growable array of token ids. */
typedef struct ds4rt_idvec {
    int32_t *v;
    size_t len, cap;
} ds4rt_idvec;

ds4rt_status ds4rt_idvec_reserve(ds4rt_idvec *vec, size_t extra);
static inline ds4rt_status ds4rt_idvec_push(ds4rt_idvec *vec, int32_t id) {
    if (vec->len == vec->cap) {
        ds4rt_status st = ds4rt_idvec_reserve(vec, 1);
        if (st != DS4RT_OK) return st;
    }
    vec->v[vec->len++] = id;
    return DS4RT_OK;
}
void ds4rt_idvec_free(ds4rt_idvec *vec);

/* Merge pair (left id, right id) -> rank and resulting id; open addressing. */
typedef struct ds4rt_merge_slot {
    uint64_t key; /* (left << 32) | right; UINT64_MAX when empty */
    uint32_t rank;
    int32_t new_id;
} ds4rt_merge_slot;

typedef struct ds4rt_merge_map {
    ds4rt_merge_slot *slots;
    size_t mask;
} ds4rt_merge_map;

static inline uint64_t ds4rt_merge_key(int32_t left, int32_t right) {
    return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

/* Trie of added-token strings for leftmost-longest matching. Edges live in a hash table keyed
 * by (node, byte). Node 0 is the root. */
typedef struct ds4rt_added_trie {
    int32_t *terminal;  /* per node: token id ending there, or -1 */
    size_t n_nodes, cap_nodes;
    uint64_t *edge_key; /* (node << 8 | byte) + 1; 0 when empty */
    uint32_t *edge_child;
    size_t edge_mask, n_edges;
    uint8_t first_byte[256]; /* nonzero if some token starts with that byte */
    size_t n_tokens;
} ds4rt_added_trie;

struct ds4rt_tokenizer {
    uint32_t n_tokens;
    uint32_t n_merges;
    int32_t bos_id, eos_id;
    char pre[32];

    /* Stored token strings, concatenated; token i is text[text_off[i] .. text_off[i+1]). */
    char *text;
    uint64_t *text_off;
    uint8_t *type; /* ds4rt_token_type per token */

    /* Decoded bytes per token (byte-level unmapped, or as stored for added tokens). */
    uint8_t *bytes;
    uint64_t *bytes_off;
    size_t max_token_bytes;

    /* Stored string -> lowest id with that string. */
    int32_t *map_ids;
    uint32_t *map_hash; /* upper hash bits of the slot's key, to skip most compares */
    size_t map_mask;

    int32_t byte_token[256]; /* id of the one-character token of each byte, -1 if missing */

    ds4rt_merge_map merges;

    /* Added tokens, split like tokenizers does: first pass over the raw text with the tokens
     * not "normalized", second pass over what is left with the "normalized" ones. */
    ds4rt_added_trie added[2];
};

/* ---- tokenizer.c ---- */
/* Lowest id whose stored string equals s[0..n), or -1. */
int32_t ds4rt_tok_lookup(const ds4rt_tokenizer *tok, const char *s, size_t n);

static inline int ds4rt_tok_is_added(const ds4rt_tokenizer *tok, int32_t id) {
    return tok->type[id] == DS4RT_TOKEN_CONTROL || tok->type[id] == DS4RT_TOKEN_USER_DEFINED;
}

/* ---- bpe.c ---- */
ds4rt_status ds4rt_merge_map_init(ds4rt_merge_map *map, size_t n);
void ds4rt_merge_map_free(ds4rt_merge_map *map);
/* Inserts or overwrites (a later duplicate merge wins, as in tokenizers). */
void ds4rt_merge_map_put(ds4rt_merge_map *map, int32_t left, int32_t right, uint32_t rank,
                         int32_t new_id);
static inline const ds4rt_merge_slot *ds4rt_merge_map_get(const ds4rt_merge_map *map,
                                                         int32_t left, int32_t right) {
    uint64_t key = ds4rt_merge_key(left, right);
    uint64_t h = key * UINT64_C(0x9E3779B97F4A7C15);
    size_t i = (size_t)(h >> 20) & map->mask;
    for (;;) {
        const ds4rt_merge_slot *s = &map->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & map->mask;
    }
}

/* Working memory of the merge engine, reused across pieces of one call. */
typedef struct ds4rt_bpe_scratch {
    struct ds4rt_bpe_symbol *sym;
    size_t sym_cap;
    uint64_t *heap;
    size_t heap_cap;
} ds4rt_bpe_scratch;

void ds4rt_bpe_scratch_free(ds4rt_bpe_scratch *scratch);

/* Appends the BPE ids of one pre-tokenized piece (raw UTF-8 bytes) to out. */
ds4rt_status ds4rt_bpe_encode_piece(const ds4rt_tokenizer *tok, ds4rt_bpe_scratch *scratch,
                                    const uint8_t *piece, size_t n, ds4rt_idvec *out);

/* ---- added_tokens.c ---- */
ds4rt_status ds4rt_added_trie_init(ds4rt_added_trie *trie);
void ds4rt_added_trie_free(ds4rt_added_trie *trie);
ds4rt_status ds4rt_added_trie_insert(ds4rt_added_trie *trie, const uint8_t *s, size_t n,
                                     int32_t id);
/* Leftmost-longest match in text[from..n): returns 1 and sets *begin, *end, *id, or 0. */
int ds4rt_added_trie_find(const ds4rt_added_trie *trie, const uint8_t *text, size_t from, size_t n,
                          size_t *begin, size_t *end, int32_t *id);

/* ---- pretokenize.c ---- */
/* Receives the pieces of a text, in order. A status other than DS4RT_OK stops the split. */
typedef ds4rt_status (*ds4rt_piece_fn)(void *ctx, const uint8_t *text, size_t begin, size_t end);

/* Splits valid UTF-8 text[begin..end) with the DeepSeek V4 pre-tokenizer (three isolated
 * regex splits, see pretokenize.c) and hands each piece to fn. */
ds4rt_status ds4rt_pretokenize(const uint8_t *text, size_t begin, size_t end, ds4rt_piece_fn fn,
                               void *ctx);

/* ---- piece_cache.c ---- */
typedef struct ds4rt_piece_cache ds4rt_piece_cache;
ds4rt_piece_cache *ds4rt_piece_cache_new(void);
void ds4rt_piece_cache_free(ds4rt_piece_cache *cache);
/* Ids cached for piece p[0..n), or NULL. */
const int32_t *ds4rt_piece_cache_get(const ds4rt_piece_cache *cache, const uint8_t *p, size_t n,
                                     uint64_t hash, size_t *n_ids);
/* Remembers ids for the piece; silently keeps nothing once the cache is full (a cache). */
void ds4rt_piece_cache_put(ds4rt_piece_cache *cache, const uint8_t *p, size_t n, uint64_t hash,
                           const int32_t *ids, size_t n_ids);

/* ---- encode.c ---- */
/* Encodes text (any bytes) into ids appended to out; the core of ds4rt_tokenize. */
ds4rt_status ds4rt_tok_encode(const ds4rt_tokenizer *tok, const char *text, size_t len,
                              uint32_t flags, ds4rt_idvec *out);

/* ---- decode.c ---- */
static inline const uint8_t *ds4rt_tok_bytes(const ds4rt_tokenizer *tok, int32_t id, size_t *n) {
    *n = (size_t)(tok->bytes_off[id + 1] - tok->bytes_off[id]);
    return tok->bytes + tok->bytes_off[id];
}

/* Appends to dst (growable) the bytes of src with each maximal invalid UTF-8 subpart replaced
 * by U+FFFD; `final` = 0 keeps a truncated tail unconsumed and returns its length. */
typedef struct ds4rt_bytebuf {
    uint8_t *p;
    size_t len, cap;
} ds4rt_bytebuf;
ds4rt_status ds4rt_bytebuf_append(ds4rt_bytebuf *b, const void *src, size_t n);
void ds4rt_bytebuf_free(ds4rt_bytebuf *b);
size_t ds4rt_utf8_sanitize(ds4rt_bytebuf *dst, const uint8_t *src, size_t n, int final,
                           ds4rt_status *st);

/* Copies n items of `size` bytes to a caller buffer under the two-call pattern. */
ds4rt_status ds4rt_tok_copy_out(const void *src, size_t n, size_t size, void *dst, size_t cap,
                                size_t *n_out, int nul_terminate, const char *what);

#endif /* DS4RT_TOK_INTERNAL_H */
