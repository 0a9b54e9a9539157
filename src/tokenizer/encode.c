/*
 * encode.c - text -> ids, in tokenizers' order: invalid UTF-8 read as U+FFFD; added tokens
 * split out in two passes (tokens not "normalized" first, over the whole text; then the
 * "normalized" ones, over each stretch left); each remaining stretch pre-tokenized; each piece
 * encoded by BPE through the per-call piece cache.
 */
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "tokenizer_internal.h"
#include "utf8.h"

/* Longest piece worth caching; longer ones are rare and rarely repeat. */
#define CACHE_PIECE_MAX 256

typedef struct encode_ctx {
    const ds4rt_tokenizer *tok;
    uint32_t flags;
    ds4rt_idvec *out;         /* encode mode */
    ds4rt_bpe_scratch scratch;
    ds4rt_piece_cache *cache;
    size_t *ends;             /* split mode: piece end offsets */
    size_t n_ends, cap_ends;
    int split_only;
} encode_ctx;

static ds4rt_status record_end(encode_ctx *c, size_t end) {
    if (c->n_ends == c->cap_ends) {
        size_t cap = c->cap_ends ? 2 * c->cap_ends : 256;
        size_t *p = realloc(c->ends, cap * sizeof *p);
        if (!p) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "piece list of %zu entries", cap);
        c->ends = p;
        c->cap_ends = cap;
    }
    c->ends[c->n_ends++] = end;
    return DS4RT_OK;
}

static ds4rt_status on_piece(void *vctx, const uint8_t *s, size_t b, size_t e) {
    encode_ctx *c = vctx;
    if (c->split_only) return record_end(c, e);
    const uint8_t *p = s + b;
    size_t n = e - b;
    if (n == 1 && c->tok->byte_token[p[0]] >= 0) /* most common piece: one byte */
        return ds4rt_idvec_push(c->out, c->tok->byte_token[p[0]]);
    if (n > CACHE_PIECE_MAX || c->cache == NULL)
        return ds4rt_bpe_encode_piece(c->tok, &c->scratch, p, n, c->out);
    uint64_t h = ds4rt_hash_bytes(p, n);
    size_t n_ids;
    const int32_t *hit = ds4rt_piece_cache_get(c->cache, p, n, h, &n_ids);
    if (hit) {
        ds4rt_status st = ds4rt_idvec_reserve(c->out, n_ids);
        if (st != DS4RT_OK) return st;
        memcpy(c->out->v + c->out->len, hit, n_ids * sizeof(int32_t));
        c->out->len += n_ids;
        return DS4RT_OK;
    }
    size_t start = c->out->len;
    ds4rt_status st = ds4rt_bpe_encode_piece(c->tok, &c->scratch, p, n, c->out);
    if (st != DS4RT_OK) return st;
    ds4rt_piece_cache_put(c->cache, p, n, h, c->out->v + start, c->out->len - start);
    return DS4RT_OK;
}

static ds4rt_status emit_added(encode_ctx *c, int32_t id, size_t end) {
    if (c->split_only) return record_end(c, end);
    return ds4rt_idvec_push(c->out, id);
}

static int added_enabled(const ds4rt_tokenizer *tok, uint32_t flags, int32_t id) {
    if (tok->type[id] == DS4RT_TOKEN_CONTROL) return (flags & DS4RT_TOKENIZE_PARSE_CONTROL) != 0;
    return (flags & DS4RT_TOKENIZE_PARSE_USER_DEFINED) != 0;
}

/* One pass of added-token splitting over s[b..e): matches of enabled tokens become tokens,
 * the stretches between them go to `next` (the second pass, or the pre-tokenizer). A match of
 * a token not enabled stays text, and the search resumes after it, as tokenizers does for
 * special tokens when encode_special_tokens is set. */
typedef ds4rt_status (*stretch_fn)(encode_ctx *c, const uint8_t *s, size_t b, size_t e);

static ds4rt_status added_pass(encode_ctx *c, const ds4rt_added_trie *trie, const uint8_t *s,
                               size_t b, size_t e, stretch_fn next) {
    size_t pos = b, gap = b, mb, me;
    int32_t id;
    ds4rt_status st;
    while (ds4rt_added_trie_find(trie, s, pos, e, &mb, &me, &id)) {
        pos = me;
        if (!added_enabled(c->tok, c->flags, id)) continue;
        if (gap < mb && (st = next(c, s, gap, mb)) != DS4RT_OK) return st;
        if ((st = emit_added(c, id, me)) != DS4RT_OK) return st;
        gap = me;
    }
    if (gap < e) return next(c, s, gap, e);
    return DS4RT_OK;
}

static ds4rt_status stretch_text(encode_ctx *c, const uint8_t *s, size_t b, size_t e) {
    return ds4rt_pretokenize(s, b, e, on_piece, c);
}

static ds4rt_status stretch_second_pass(encode_ctx *c, const uint8_t *s, size_t b, size_t e) {
    return added_pass(c, &c->tok->added[1], s, b, e, stretch_text);
}

/* Runs the whole pipeline over text (made valid UTF-8 first) in either mode. On return
 * *work holds the substituted copy when the input was not valid UTF-8 (caller frees). */
static ds4rt_status run(encode_ctx *c, const char *text, size_t len, ds4rt_bytebuf *work) {
    const uint8_t *s = (const uint8_t *)text;
    size_t valid = ds4rt_utf8_valid_prefix(s, len);
    if (valid < len) {
        if (c->flags & DS4RT_TOKENIZE_STRICT_UTF8)
            return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                              "invalid UTF-8 at byte %zu (byte 0x%02x)", valid, s[valid]);
        ds4rt_status st = ds4rt_bytebuf_append(work, s, valid);
        if (st != DS4RT_OK) return st;
        (void)ds4rt_utf8_sanitize(work, s + valid, len - valid, 1, &st);
        if (st != DS4RT_OK) return st;
        s = work->p;
        len = work->len;
    }
    if (len > CACHE_PIECE_MAX && !c->split_only) {
        c->cache = ds4rt_piece_cache_new();
        if (!c->cache) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "piece cache");
    }
    if ((c->flags & DS4RT_TOKENIZE_PARSE_SPECIAL) == 0) return stretch_text(c, s, 0, len);
    return added_pass(c, &c->tok->added[0], s, 0, len, stretch_second_pass);
}

static void ctx_free(encode_ctx *c) {
    ds4rt_bpe_scratch_free(&c->scratch);
    ds4rt_piece_cache_free(c->cache);
    free(c->ends);
}

ds4rt_status ds4rt_tok_encode(const ds4rt_tokenizer *tok, const char *text, size_t len,
                              uint32_t flags, ds4rt_idvec *out) {
    encode_ctx c = {.tok = tok, .flags = flags, .out = out};
    ds4rt_bytebuf work = {0};
    ds4rt_status st = DS4RT_OK;
    if (flags & DS4RT_TOKENIZE_ADD_BOS) {
        if (tok->bos_id < 0) return ds4rt_fail(DS4RT_ERR_NOT_FOUND, "the vocabulary has no BOS");
        st = ds4rt_idvec_push(out, tok->bos_id);
    }
    if (st == DS4RT_OK) st = run(&c, text, len, &work);
    ctx_free(&c);
    ds4rt_bytebuf_free(&work);
    return st;
}

static ds4rt_status check_call(const ds4rt_tokenizer *tok, const char *text, size_t len,
                               uint32_t flags, const void *out, size_t *n_out, const char *fn) {
    if (!tok || !n_out) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
    *n_out = 0;
    if (!text && len) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%s: NULL text", fn);
    if (len > DS4RT_TOKENIZE_MAX_BYTES)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                          "%s: text of %zu bytes exceeds the limit of %u bytes", fn, len,
                          (unsigned)DS4RT_TOKENIZE_MAX_BYTES);
    if (flags & ~(uint32_t)(DS4RT_TOKENIZE_PARSE_SPECIAL | DS4RT_TOKENIZE_STRICT_UTF8 |
                            DS4RT_TOKENIZE_ADD_BOS))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn, flags);
    (void)out;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_tokenize(const ds4rt_tokenizer *tok, const char *text, size_t len,
                                      uint32_t flags, int32_t *ids, size_t cap, size_t *n_ids) {
    ds4rt_status st = check_call(tok, text, len, flags, ids, n_ids, "ds4rt_tokenize");
    if (st != DS4RT_OK) return st;
    ds4rt_idvec out = {0};
    st = ds4rt_tok_encode(tok, text, len, flags, &out);
    if (st == DS4RT_OK)
        st = ds4rt_tok_copy_out(out.v, out.len, sizeof(int32_t), ids, cap, n_ids, 0,
                                "ds4rt_tokenize");
    ds4rt_idvec_free(&out);
    return st;
}

DS4RT_API ds4rt_status ds4rt_tokenizer_split(const ds4rt_tokenizer *tok, const char *text,
                                             size_t len, uint32_t flags, size_t *ends, size_t cap,
                                             size_t *n_pieces) {
    ds4rt_status st = check_call(tok, text, len, flags, ends, n_pieces, "ds4rt_tokenizer_split");
    if (st != DS4RT_OK) return st;
    encode_ctx c = {.tok = tok, .flags = flags, .split_only = 1};
    ds4rt_bytebuf work = {0};
    st = run(&c, text, len, &work);
    if (st == DS4RT_OK)
        st = ds4rt_tok_copy_out(c.ends, c.n_ends, sizeof(size_t), ends, cap, n_pieces, 0,
                                "ds4rt_tokenizer_split");
    ctx_free(&c);
    ds4rt_bytebuf_free(&work);
    return st;
}
