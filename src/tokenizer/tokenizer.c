/*
 * tokenizer.c - building a tokenizer from arrays (token strings, types, merges, BOS/EOS) and
 * the lookups on it. Everything the encoder needs is derived here once: the string -> id
 * table, each byte's one-character token, the merge table (pair -> rank, result), the two
 * added-token tries, and every token's decoded bytes.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "bytelevel.h"
#include "hash.h"
#include "tokenizer_internal.h"
#include "utf8.h"

static void arrays_defaults(void *out) {
    ds4rt_tokenizer_arrays *a = out;
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->bos_id = -1;
    a->eos_id = -1;
}

/* The versioning rule of abi.h. */
static const ds4rt_struct_desc TOKENIZER_ARRAYS = {
    .name = "ds4rt_tokenizer_arrays",
    .size = sizeof(ds4rt_tokenizer_arrays),
    .min_size = sizeof(ds4rt_tokenizer_arrays_1_0),
    .defaults = arrays_defaults,
};

DS4RT_API ds4rt_status ds4rt_tokenizer_arrays_init(ds4rt_tokenizer_arrays *arrays, size_t size) {
    return ds4rt_struct_init(&TOKENIZER_ARRAYS, arrays, size);
}

static size_t token_len(const ds4rt_tokenizer *tok, int32_t id) {
    return (size_t)(tok->text_off[id + 1] - tok->text_off[id] - 1); /* arena keeps a NUL */
}

static const char *token_text(const ds4rt_tokenizer *tok, int32_t id) {
    return tok->text + tok->text_off[id];
}

int32_t ds4rt_tok_lookup(const ds4rt_tokenizer *tok, const char *s, size_t n) {
    uint64_t h = ds4rt_hash_bytes(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & tok->map_mask;; i = (i + 1) & tok->map_mask) {
        int32_t id = tok->map_ids[i];
        if (id < 0) return -1;
        if (tok->map_hash[i] == tag && token_len(tok, id) == n &&
            memcmp(token_text(tok, id), s, n) == 0)
            return id;
    }
}

DS4RT_API void ds4rt_tokenizer_free(ds4rt_tokenizer *tok) {
    if (!tok) return;
    free(tok->text);
    free(tok->text_off);
    free(tok->type);
    free(tok->bytes);
    free(tok->bytes_off);
    free(tok->map_ids);
    free(tok->map_hash);
    ds4rt_merge_map_free(&tok->merges);
    ds4rt_added_trie_free(&tok->added[0]);
    ds4rt_added_trie_free(&tok->added[1]);
    free(tok);
}

static size_t str_len(const char *const *strs, const uint32_t *lens, size_t i) {
    return lens ? lens[i] : strlen(strs[i]);
}

static ds4rt_status copy_tokens(ds4rt_tokenizer *tok, const ds4rt_tokenizer_arrays *a) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < a->n_tokens; i++) {
        if (!a->tokens[i]) return ds4rt_fail(DS4RT_ERR_FORMAT, "token %u is NULL", i);
        total += str_len(a->tokens, a->token_lens, i) + 1;
    }
    if (total > SIZE_MAX / 2) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "token strings too long");
    tok->text = malloc((size_t)total ? (size_t)total : 1);
    tok->text_off = malloc(((size_t)a->n_tokens + 1) * sizeof *tok->text_off);
    tok->type = malloc(a->n_tokens);
    if (!tok->text || !tok->text_off || !tok->type)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "vocabulary of %u tokens", a->n_tokens);
    uint64_t off = 0;
    for (uint32_t i = 0; i < a->n_tokens; i++) {
        size_t n = str_len(a->tokens, a->token_lens, i);
        tok->text_off[i] = off;
        memcpy(tok->text + off, a->tokens[i], n);
        tok->text[off + n] = '\0';
        off += n + 1;
        int32_t type = a->token_types ? a->token_types[i] : DS4RT_TOKEN_NORMAL;
        if (type < DS4RT_TOKEN_UNDEFINED || type > DS4RT_TOKEN_BYTE)
            return ds4rt_fail(DS4RT_ERR_FORMAT, "token %u has unknown type %d", i, type);
        tok->type[i] = (uint8_t)type;
    }
    tok->text_off[a->n_tokens] = off;
    return DS4RT_OK;
}

static ds4rt_status build_map(ds4rt_tokenizer *tok) {
    size_t cap = ds4rt_table_capacity(tok->n_tokens);
    tok->map_ids = cap ? malloc(cap * sizeof *tok->map_ids) : NULL;
    tok->map_hash = cap ? malloc(cap * sizeof *tok->map_hash) : NULL;
    if (!tok->map_ids || !tok->map_hash)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "token table of %u entries", tok->n_tokens);
    tok->map_mask = cap - 1;
    for (size_t i = 0; i < cap; i++) tok->map_ids[i] = -1;
    for (uint32_t id = 0; id < tok->n_tokens; id++) {
        size_t n = token_len(tok, (int32_t)id);
        const char *s = token_text(tok, (int32_t)id);
        uint64_t h = ds4rt_hash_bytes(s, n);
        uint32_t tag = (uint32_t)(h >> 32);
        size_t i = (size_t)h & tok->map_mask;
        int dup = 0;
        for (; tok->map_ids[i] >= 0; i = (i + 1) & tok->map_mask) {
            int32_t other = tok->map_ids[i];
            if (tok->map_hash[i] == tag && token_len(tok, other) == n &&
                memcmp(token_text(tok, other), s, n) == 0) {
                dup = 1; /* the same string again: lookups keep the lower id */
                break;
            }
        }
        if (dup) continue;
        tok->map_ids[i] = (int32_t)id;
        tok->map_hash[i] = tag;
    }
    return DS4RT_OK;
}

static ds4rt_status build_merges(ds4rt_tokenizer *tok, const ds4rt_tokenizer_arrays *a) {
    ds4rt_status st = ds4rt_merge_map_init(&tok->merges, a->n_merges);
    if (st != DS4RT_OK) return st;
    char *joined = NULL;
    size_t joined_cap = 0;
    for (uint32_t r = 0; r < a->n_merges; r++) {
        if (!a->merges[r]) {
            st = ds4rt_fail(DS4RT_ERR_FORMAT, "merge %u is NULL", r);
            break;
        }
        const char *m = a->merges[r];
        size_t n = str_len(a->merges, a->merge_lens, r);
        /* "left right": the separator is the first space after the first byte. */
        const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
        if (!sp) {
            st = ds4rt_fail(DS4RT_ERR_FORMAT, "merge %u (\"%.*s\") has no space separator", r,
                            (int)(n < 64 ? n : 64), m);
            break;
        }
        size_t nl = (size_t)(sp - m), nr = n - nl - 1;
        int32_t left = ds4rt_tok_lookup(tok, m, nl);
        int32_t right = ds4rt_tok_lookup(tok, sp + 1, nr);
        if (nl + nr > joined_cap) {
            joined_cap = 2 * (nl + nr) + 16;
            char *p = realloc(joined, joined_cap);
            if (!p) {
                st = ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "merge buffer");
                break;
            }
            joined = p;
        }
        memcpy(joined, m, nl);
        memcpy(joined + nl, sp + 1, nr);
        int32_t merged = ds4rt_tok_lookup(tok, joined, nl + nr);
        if (left < 0 || right < 0 || merged < 0) {
            st = ds4rt_fail(DS4RT_ERR_FORMAT, "merge %u (\"%.*s\"): %s is not a token", r,
                            (int)(n < 64 ? n : 64), m,
                            left < 0 ? "the left part" : right < 0 ? "the right part" : "the result");
            break;
        }
        ds4rt_merge_map_put(&tok->merges, left, right, r, merged);
    }
    free(joined);
    return st;
}

static ds4rt_status build_added(ds4rt_tokenizer *tok, const ds4rt_tokenizer_arrays *a) {
    ds4rt_status st;
    if ((st = ds4rt_added_trie_init(&tok->added[0])) != DS4RT_OK) return st;
    if ((st = ds4rt_added_trie_init(&tok->added[1])) != DS4RT_OK) return st;
    uint8_t *second = calloc(tok->n_tokens, 1);
    if (!second) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "added-token flags");
    for (uint32_t k = 0; k < a->n_normalized_ids && st == DS4RT_OK; k++) {
        int32_t id = a->normalized_ids[k];
        if (id < 0 || (uint32_t)id >= tok->n_tokens || !ds4rt_tok_is_added(tok, id))
            st = ds4rt_fail(DS4RT_ERR_FORMAT,
                            "normalized_ids[%u] = %d is not a CONTROL or USER_DEFINED token", k, id);
        else
            second[id] = 1;
    }
    for (uint32_t id = 0; id < tok->n_tokens && st == DS4RT_OK; id++) {
        if (!ds4rt_tok_is_added(tok, (int32_t)id)) continue;
        st = ds4rt_added_trie_insert(&tok->added[second[id]],
                                     (const uint8_t *)token_text(tok, (int32_t)id),
                                     token_len(tok, (int32_t)id), (int32_t)id);
    }
    free(second);
    return st;
}

/* Bytes a token stands for: byte-level characters mapped back to bytes; for added tokens, or
 * a token holding any character outside the byte alphabet, the stored text itself. */
static ds4rt_status build_bytes(ds4rt_tokenizer *tok) {
    size_t total = (size_t)tok->text_off[tok->n_tokens];
    tok->bytes = malloc(total ? total : 1);
    tok->bytes_off = malloc(((size_t)tok->n_tokens + 1) * sizeof *tok->bytes_off);
    if (!tok->bytes || !tok->bytes_off)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "decoded token bytes");
    uint64_t off = 0;
    for (uint32_t id = 0; id < tok->n_tokens; id++) {
        const uint8_t *s = (const uint8_t *)token_text(tok, (int32_t)id);
        size_t n = token_len(tok, (int32_t)id);
        tok->bytes_off[id] = off;
        size_t k = 0, written = 0;
        int raw = ds4rt_tok_is_added(tok, (int32_t)id);
        while (!raw && k < n) {
            size_t len;
            uint32_t cp;
            int b;
            if (ds4rt_utf8_next(s + k, n - k, &len, &cp) != DS4RT_UTF8_VALID ||
                (b = ds4rt_bytelevel_byte(cp)) < 0) {
                raw = 1;
                break;
            }
            tok->bytes[off + written++] = (uint8_t)b;
            k += len;
        }
        if (raw) {
            memcpy(tok->bytes + off, s, n);
            written = n;
        }
        off += written;
        if (written > tok->max_token_bytes) tok->max_token_bytes = written;
    }
    tok->bytes_off[tok->n_tokens] = off;
    return DS4RT_OK;
}

static void find_byte_tokens(ds4rt_tokenizer *tok) {
    for (int b = 0; b < 256; b++) {
        uint8_t buf[4];
        size_t n = ds4rt_utf8_encode(ds4rt_bytelevel_cp((uint8_t)b), buf);
        tok->byte_token[b] = ds4rt_tok_lookup(tok, (const char *)buf, n);
    }
}

static ds4rt_status check_pre(const char *pre) {
    if (!pre || !strcmp(pre, "joyai-llm") || !strcmp(pre, "deepseek-v3")) return DS4RT_OK;
    return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                      "pre-tokenizer \"%s\" is not supported (ds4rt implements \"joyai-llm\", the "
                      "DeepSeek V3/V4 one)",
                      pre);
}

DS4RT_API ds4rt_status ds4rt_tokenizer_from_arrays(const ds4rt_tokenizer_arrays *arrays,
                                                   ds4rt_tokenizer **out) {
    if (!out) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_tokenizer_from_arrays: NULL out");
    *out = NULL;
    if (!arrays)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_tokenizer_from_arrays: NULL arrays");
    ds4rt_tokenizer_arrays a;
    ds4rt_status rst = ds4rt_struct_read(&TOKENIZER_ARRAYS, arrays, &a);
    if (rst != DS4RT_OK) return rst;
    if (a.n_tokens == 0 || a.n_tokens > INT32_MAX || !a.tokens)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "a vocabulary needs 1..2^31-1 tokens (%u)",
                          a.n_tokens);
    if (a.n_merges && !a.merges)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%u merges but a NULL merges array",
                          a.n_merges);
    if (a.n_normalized_ids && !a.normalized_ids)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "NULL normalized_ids");
    if (a.bos_id < -1 || a.bos_id >= (int64_t)a.n_tokens || a.eos_id < -1 ||
        a.eos_id >= (int64_t)a.n_tokens)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "BOS %d / EOS %d outside the vocabulary [0, %u)",
                          a.bos_id, a.eos_id, a.n_tokens);
    ds4rt_status st = check_pre(a.pre);
    if (st != DS4RT_OK) return st;

    ds4rt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "tokenizer");
    tok->n_tokens = a.n_tokens;
    tok->n_merges = a.n_merges;
    tok->bos_id = a.bos_id;
    tok->eos_id = a.eos_id;
    snprintf(tok->pre, sizeof tok->pre, "%s", a.pre ? a.pre : "joyai-llm");
    if ((st = copy_tokens(tok, &a)) == DS4RT_OK && (st = build_map(tok)) == DS4RT_OK &&
        (st = build_merges(tok, &a)) == DS4RT_OK && (st = build_added(tok, &a)) == DS4RT_OK)
        st = build_bytes(tok);
    if (st != DS4RT_OK) {
        ds4rt_tokenizer_free(tok);
        return st;
    }
    find_byte_tokens(tok);
    *out = tok;
    return DS4RT_OK;
}

DS4RT_API uint32_t ds4rt_tokenizer_n_tokens(const ds4rt_tokenizer *tok) {
    return tok ? tok->n_tokens : 0;
}
DS4RT_API uint32_t ds4rt_tokenizer_n_merges(const ds4rt_tokenizer *tok) {
    return tok ? tok->n_merges : 0;
}
DS4RT_API int32_t ds4rt_tokenizer_bos(const ds4rt_tokenizer *tok) { return tok ? tok->bos_id : -1; }
DS4RT_API int32_t ds4rt_tokenizer_eos(const ds4rt_tokenizer *tok) { return tok ? tok->eos_id : -1; }
DS4RT_API size_t ds4rt_tokenizer_max_token_bytes(const ds4rt_tokenizer *tok) {
    return tok ? tok->max_token_bytes : 0;
}

DS4RT_API ds4rt_status ds4rt_tokenizer_token(const ds4rt_tokenizer *tok, int32_t id,
                                             const char **text, size_t *len, int32_t *type) {
    if (!tok) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_tokenizer_token: NULL tok");
    if (id < 0 || (uint32_t)id >= tok->n_tokens)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "token id %d is outside the vocabulary [0, %u)",
                          id, tok->n_tokens);
    if (text) *text = token_text(tok, id);
    if (len) *len = token_len(tok, id);
    if (type) *type = tok->type[id];
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_tokenizer_find(const ds4rt_tokenizer *tok, const char *text,
                                            size_t len, int32_t *id) {
    if (!tok || !id || (!text && len))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_tokenizer_find: NULL argument");
    *id = ds4rt_tok_lookup(tok, text ? text : "", len);
    if (*id < 0)
        return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "no token \"%.*s\"", (int)(len < 80 ? len : 80),
                          text);
    return DS4RT_OK;
}
