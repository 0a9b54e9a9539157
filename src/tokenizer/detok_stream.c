/*
 * detok_stream.c - streaming decoder. It keeps the (at most 3) bytes of an unfinished
 * character between pushes; everything before them has been handed out as valid UTF-8, with
 * U+FFFD for each maximal invalid subsequence. Because the maximal-subpart rule decides each
 * replacement from the bytes up to the point of failure only, handing text out as soon as it
 * is decided gives exactly the one-shot result.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

struct ds4rt_detok_stream {
    const ds4rt_tokenizer *tok;
    uint32_t flags;
    uint8_t pending[4];
    size_t n_pending;
    ds4rt_bytebuf in, out; /* scratch, reused */
};

DS4RT_API ds4rt_status ds4rt_detok_stream_create(const ds4rt_tokenizer *tok, uint32_t flags,
                                                 ds4rt_detok_stream **out) {
    if (!out) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_detok_stream_create: NULL out");
    *out = NULL;
    if (!tok) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_detok_stream_create: NULL tok");
    if (flags & ~(uint32_t)(DS4RT_DETOKENIZE_SKIP_CONTROL | DS4RT_DETOKENIZE_REPLACE_INVALID))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                          "ds4rt_detok_stream_create: unknown flags 0x%x", flags);
    ds4rt_detok_stream *s = calloc(1, sizeof *s);
    if (!s) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "streaming decoder");
    s->tok = tok;
    s->flags = flags;
    *out = s;
    return DS4RT_OK;
}

DS4RT_API void ds4rt_detok_stream_free(ds4rt_detok_stream *s) {
    if (!s) return;
    ds4rt_bytebuf_free(&s->in);
    ds4rt_bytebuf_free(&s->out);
    free(s);
}

DS4RT_API size_t ds4rt_detok_stream_pending(const ds4rt_detok_stream *s) {
    return s ? s->n_pending : 0;
}

/* Decodes pending + bytes into s->out; returns the new tail length (kept in s->in). */
static ds4rt_status advance(ds4rt_detok_stream *s, const uint8_t *bytes, size_t n, int final,
                            size_t *tail) {
    s->in.len = 0;
    s->out.len = 0;
    ds4rt_status st = ds4rt_bytebuf_append(&s->in, s->pending, s->n_pending);
    if (st == DS4RT_OK) st = ds4rt_bytebuf_append(&s->in, bytes, n);
    if (st != DS4RT_OK) return st;
    *tail = ds4rt_utf8_sanitize(&s->out, s->in.p, s->in.len, final, &st);
    return st;
}

static ds4rt_status hand_out(ds4rt_detok_stream *s, size_t tail, char *out, size_t cap,
                             size_t *out_len, const char *fn) {
    *out_len = s->out.len;
    if (s->out.len > cap || (s->out.len && !out))
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "%s: needs %zu bytes, the buffer holds %zu", fn,
                          s->out.len, out ? cap : 0);
    if (s->out.len) memcpy(out, s->out.p, s->out.len);
    if (out && s->out.len < cap) out[s->out.len] = '\0';
    /* Commit only now, so a call that failed for room leaves the stream as it was. */
    if (tail) memcpy(s->pending, s->in.p + s->in.len - tail, tail);
    s->n_pending = tail;
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_detok_stream_push(ds4rt_detok_stream *s, int32_t id, char *out,
                                               size_t cap, size_t *out_len) {
    if (!s || !out_len)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_detok_stream_push: NULL argument");
    *out_len = 0;
    const ds4rt_tokenizer *tok = s->tok;
    if (id < 0 || (uint32_t)id >= tok->n_tokens)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE,
                          "ds4rt_detok_stream_push: token id %d is outside the vocabulary [0, %u)",
                          id, tok->n_tokens);
    size_t n = 0;
    const uint8_t *bytes = ds4rt_tok_bytes(tok, id, &n);
    if ((s->flags & DS4RT_DETOKENIZE_SKIP_CONTROL) && tok->type[id] == DS4RT_TOKEN_CONTROL) n = 0;
    size_t tail;
    ds4rt_status st = advance(s, bytes, n, 0, &tail);
    if (st != DS4RT_OK) return st;
    return hand_out(s, tail, out, cap, out_len, "ds4rt_detok_stream_push");
}

DS4RT_API ds4rt_status ds4rt_detok_stream_flush(ds4rt_detok_stream *s, char *out, size_t cap,
                                                size_t *out_len) {
    if (!s || !out_len)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "ds4rt_detok_stream_flush: NULL argument");
    *out_len = 0;
    size_t tail;
    ds4rt_status st = advance(s, NULL, 0, 1, &tail);
    if (st != DS4RT_OK) return st;
    return hand_out(s, tail, out, cap, out_len, "ds4rt_detok_stream_flush");
}
