/*
 * tokenizer_gguf.c - a tokenizer from the tokenizer.* metadata of a GGUF file, through the
 * GGUF reader: the arrays are gathered (strings point into the mapping) and handed to
 * ds4rt_tokenizer_from_arrays, which copies what it keeps.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct gguf_arrays {
    const char **strs;
    uint32_t *lens;
} gguf_arrays;

static ds4rt_status read_strings(const ds4rt_gguf_kv *kv, const char *key, uint32_t *n,
                                 gguf_arrays *out) {
    if (kv->type != DS4RT_GGUF_ARRAY || kv->array_type != DS4RT_GGUF_STRING)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s is not an array of strings", key);
    if (kv->array_len > INT32_MAX)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s has %llu entries", key,
                          (unsigned long long)kv->array_len);
    *n = (uint32_t)kv->array_len;
    out->strs = malloc(((size_t)*n + 1) * sizeof *out->strs);
    out->lens = malloc(((size_t)*n + 1) * sizeof *out->lens);
    if (!out->strs || !out->lens) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "%s", key);
    for (uint32_t i = 0; i < *n; i++) {
        ds4rt_str s;
        ds4rt_status st = ds4rt_gguf_array_str(kv, i, &s);
        if (st != DS4RT_OK) return ds4rt_fail_context(st, "%s[%u]", key, i);
        if (s.len > UINT32_MAX)
            return ds4rt_fail(DS4RT_ERR_FORMAT, "%s[%u] is %llu bytes long", key, i,
                              (unsigned long long)s.len);
        out->strs[i] = s.data ? s.data : "";
        out->lens[i] = (uint32_t)s.len;
    }
    return DS4RT_OK;
}

static ds4rt_status read_ints(const ds4rt_gguf_kv *kv, const char *key, uint32_t want,
                              int32_t **out) {
    if (kv->type != DS4RT_GGUF_ARRAY)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s is not an array", key);
    if (want != UINT32_MAX && kv->array_len != want)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s has %llu entries, expected %u", key,
                          (unsigned long long)kv->array_len, want);
    if (kv->array_len > INT32_MAX)
        return ds4rt_fail(DS4RT_ERR_FORMAT, "%s has too many entries", key);
    *out = malloc(((size_t)kv->array_len + 1) * sizeof **out);
    if (!*out) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "%s", key);
    for (uint64_t i = 0; i < kv->array_len; i++) {
        int64_t v;
        ds4rt_status st = ds4rt_gguf_array_int(kv, i, &v);
        if (st != DS4RT_OK) return ds4rt_fail_context(st, "%s[%llu]", key, (unsigned long long)i);
        if (v < INT32_MIN || v > INT32_MAX)
            return ds4rt_fail(DS4RT_ERR_FORMAT, "%s[%llu] = %lld is out of range", key,
                              (unsigned long long)i, (long long)v);
        (*out)[i] = (int32_t)v;
    }
    return DS4RT_OK;
}

/* Optional token id key: -1 when absent. */
static ds4rt_status read_id(const ds4rt_gguf *g, const char *key, int32_t *id) {
    uint32_t v;
    *id = -1;
    ds4rt_status st = ds4rt_gguf_get_u32(g, key, &v);
    if (st == DS4RT_ERR_NOT_FOUND) return DS4RT_OK;
    if (st != DS4RT_OK) return st;
    if (v > INT32_MAX) return ds4rt_fail(DS4RT_ERR_FORMAT, "%s = %u is out of range", key, v);
    *id = (int32_t)v;
    return DS4RT_OK;
}

static ds4rt_status check_model(const ds4rt_gguf *g, char *pre, size_t pre_cap) {
    ds4rt_str s;
    ds4rt_status st = ds4rt_gguf_get_str(g, "tokenizer.ggml.model", &s);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "tokenizer.ggml.model");
    if (s.len != 4 || memcmp(s.data, "gpt2", 4) != 0)
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED,
                          "tokenizer.ggml.model is \"%.*s\"; ds4rt reads byte-level BPE (\"gpt2\")",
                          (int)(s.len < 64 ? s.len : 64), s.data);
    st = ds4rt_gguf_get_str(g, "tokenizer.ggml.pre", &s);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "tokenizer.ggml.pre");
    if (s.len >= pre_cap)
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "tokenizer.ggml.pre \"%.*s\" is not supported",
                          (int)(s.len < 64 ? s.len : 64), s.data);
    memcpy(pre, s.data, s.len);
    pre[s.len] = '\0';
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_tokenizer_from_gguf(const ds4rt_gguf *g, ds4rt_tokenizer **out) {
    if (!out) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_tokenizer_from_gguf: NULL out");
    *out = NULL;
    if (!g) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_tokenizer_from_gguf: NULL gguf");
    ds4rt_tokenizer_arrays a;
    (void)ds4rt_tokenizer_arrays_init(&a, sizeof a);
    gguf_arrays tokens = {0}, merges = {0};
    int32_t *types = NULL, *normalized = NULL;
    char pre[32];
    ds4rt_status st = check_model(g, pre, sizeof pre);
    const ds4rt_gguf_kv *kv;
    if (st == DS4RT_OK) {
        kv = ds4rt_gguf_find_kv(g, "tokenizer.ggml.tokens");
        st = kv ? read_strings(kv, "tokenizer.ggml.tokens", &a.n_tokens, &tokens)
                : ds4rt_fail(DS4RT_ERR_NOT_FOUND, "tokenizer.ggml.tokens is missing");
    }
    if (st == DS4RT_OK && (kv = ds4rt_gguf_find_kv(g, "tokenizer.ggml.token_type")))
        st = read_ints(kv, "tokenizer.ggml.token_type", a.n_tokens, &types);
    if (st == DS4RT_OK) {
        kv = ds4rt_gguf_find_kv(g, "tokenizer.ggml.merges");
        st = kv ? read_strings(kv, "tokenizer.ggml.merges", &a.n_merges, &merges)
                : ds4rt_fail(DS4RT_ERR_NOT_FOUND, "tokenizer.ggml.merges is missing");
    }
    if (st == DS4RT_OK && (kv = ds4rt_gguf_find_kv(g, "tokenizer.ds4rt.normalized_ids"))) {
        st = read_ints(kv, "tokenizer.ds4rt.normalized_ids", UINT32_MAX, &normalized);
        a.n_normalized_ids = (uint32_t)kv->array_len;
    }
    if (st == DS4RT_OK) st = read_id(g, "tokenizer.ggml.bos_token_id", &a.bos_id);
    if (st == DS4RT_OK) st = read_id(g, "tokenizer.ggml.eos_token_id", &a.eos_id);
    if (st == DS4RT_OK) {
        a.tokens = tokens.strs;
        a.token_lens = tokens.lens;
        a.token_types = types;
        a.merges = merges.strs;
        a.merge_lens = merges.lens;
        a.pre = pre;
        a.normalized_ids = normalized;
        st = ds4rt_tokenizer_from_arrays(&a, out);
    }
    free(tokens.strs);
    free(tokens.lens);
    free(merges.strs);
    free(merges.lens);
    free(types);
    free(normalized);
    return st;
}
