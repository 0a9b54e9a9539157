/*
 * decode.c - ids -> bytes. BPE tokens give the bytes their byte-level characters stand for;
 * added tokens give their text as stored (tokenizers' ByteLevel decoder, which falls back to a
 * token's own UTF-8 when one of its characters is outside the byte alphabet, gives the same).
 * Each token's bytes are computed once when the tokenizer is built.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "utf8.h"

static const uint8_t REPLACEMENT[3] = {0xEF, 0xBF, 0xBD}; /* U+FFFD */

size_t ds4rt_utf8_sanitize(ds4rt_bytebuf *dst, const uint8_t *src, size_t n, int final,
                           ds4rt_status *st) {
    *st = DS4RT_OK;
    size_t i = 0;
    while (i < n) {
        size_t run = ds4rt_utf8_valid_prefix(src + i, n - i);
        if (run && (*st = ds4rt_bytebuf_append(dst, src + i, run)) != DS4RT_OK) return 0;
        i += run;
        if (i >= n) break;
        size_t len;
        uint32_t cp;
        ds4rt_utf8_kind kind = ds4rt_utf8_next(src + i, n - i, &len, &cp);
        if (kind == DS4RT_UTF8_TRUNCATED && !final) return n - i;
        if ((*st = ds4rt_bytebuf_append(dst, REPLACEMENT, 3)) != DS4RT_OK) return 0;
        i += len;
    }
    return 0;
}

/* Appends the bytes of ids[0..n) to buf, checking every id. */
static ds4rt_status decode_ids(const ds4rt_tokenizer *tok, const int32_t *ids, size_t n,
                              uint32_t flags, ds4rt_bytebuf *buf) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (uint32_t)id >= tok->n_tokens)
            return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE,
                              "token id %d at index %zu is outside the vocabulary [0, %u)", id, i,
                              tok->n_tokens);
        if ((flags & DS4RT_DETOKENIZE_SKIP_CONTROL) && tok->type[id] == DS4RT_TOKEN_CONTROL)
            continue;
        size_t len;
        const uint8_t *b = ds4rt_tok_bytes(tok, id, &len);
        ds4rt_status st = ds4rt_bytebuf_append(buf, b, len);
        if (st != DS4RT_OK) return st;
    }
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_detokenize(const ds4rt_tokenizer *tok, const int32_t *ids, size_t n,
                                        uint32_t flags, char *out, size_t cap, size_t *out_len) {
    if (!tok || !out_len)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_detokenize: NULL argument");
    *out_len = 0;
    if (!ids && n) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_detokenize: NULL ids");
    if (flags & ~(uint32_t)(DS4RT_DETOKENIZE_SKIP_CONTROL | DS4RT_DETOKENIZE_REPLACE_INVALID))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_detokenize: unknown flags 0x%x",
                          flags);
    ds4rt_bytebuf raw = {0}, clean = {0};
    ds4rt_status st = decode_ids(tok, ids, n, flags, &raw);
    ds4rt_bytebuf *res = &raw;
    if (st == DS4RT_OK && (flags & DS4RT_DETOKENIZE_REPLACE_INVALID)) {
        (void)ds4rt_utf8_sanitize(&clean, raw.p, raw.len, 1, &st);
        res = &clean;
    }
    if (st == DS4RT_OK)
        st = ds4rt_tok_copy_out(res->p, res->len, 1, out, cap, out_len, 1, "ds4rt_detokenize");
    ds4rt_bytebuf_free(&raw);
    ds4rt_bytebuf_free(&clean);
    return st;
}
