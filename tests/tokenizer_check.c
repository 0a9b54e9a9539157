/*
 * tokenizer_check.c - drives the tokenizer's C API through its edge cases and random inputs;
 * built by tests/test_tokenizer_c.py with AddressSanitizer and UBSan (against the sources) and
 * against the installed library. Prints "ok" and exits 0 when every check holds.
 *
 * The vocabulary: the 256 byte-level one-character tokens, a few merges, and three added
 * tokens (a CONTROL BOS/EOS pair and a USER_DEFINED "<think>"), plus the DeepSeek V4 chat
 * markers so the chat template can render ids.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt.h"

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__,     \
                    #cond, ds4rt_last_error());                                                    \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static char *byte_char(int b, char *out) {
    unsigned cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
        cp = (unsigned)b;
    else if (b <= 32)
        cp = 256u + (unsigned)b;
    else if (b <= 160)
        cp = (unsigned)b + 162u;
    else
        cp = 323u;
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
    return out;
}

static const char *EXTRA[] = {
    "he", "hel", "hell", "hello", "\xc4\xa0w", "\xc4\xa0wo", "ll",
    "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<think>", "</think>", "<\xef\xbd\x9cUser\xef\xbd\x9c>", "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>",
};
static const int32_t EXTRA_TYPE[] = {1, 1, 1, 1, 1, 1, 1, 3, 3, 4, 4, 4, 4};
static const char *MERGES[] = {"h e", "he l", "l l", "hel l", "hell o", "\xc4\xa0 w", "\xc4\xa0w o"};

static ds4rt_tokenizer *build(void) {
    enum { N_EXTRA = sizeof EXTRA / sizeof EXTRA[0] };
    static char chars[256][4];
    const char *tokens[256 + N_EXTRA];
    int32_t types[256 + N_EXTRA];
    for (int b = 0; b < 256; b++) {
        tokens[b] = byte_char(b, chars[b]);
        types[b] = DS4RT_TOKEN_NORMAL;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        tokens[256 + i] = EXTRA[i];
        types[256 + i] = EXTRA_TYPE[i];
    }
    ds4rt_tokenizer_arrays a;
    ds4rt_tokenizer_arrays_default(&a);
    a.n_tokens = 256 + N_EXTRA;
    a.tokens = tokens;
    a.token_types = types;
    a.n_merges = sizeof MERGES / sizeof MERGES[0];
    a.merges = MERGES;
    a.bos_id = 263;
    a.eos_id = 264;
    ds4rt_tokenizer *tok = NULL;
    CHECK(ds4rt_tokenizer_from_arrays(&a, &tok) == DS4RT_OK);
    return tok;
}

/* Maximal-subpart replacement, written independently of the library for comparison. */
static size_t lossy(const unsigned char *s, size_t n, unsigned char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t need = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                    : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        size_t k = 1;
        if (need) {
            for (; k < need && i + k < n; k++) {
                unsigned char d = s[i + k];
                unsigned char lo = 0x80, hi = 0xBF;
                if (k == 1 && c == 0xE0) lo = 0xA0;
                if (k == 1 && c == 0xED) hi = 0x9F;
                if (k == 1 && c == 0xF0) lo = 0x90;
                if (k == 1 && c == 0xF4) hi = 0x8F;
                if (d < lo || d > hi) break;
            }
        }
        if (need && k == need) {
            memcpy(out + o, s + i, need);
            o += need;
            i += need;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += need ? k : 1;
        }
    }
    return o;
}

static void check_two_call(ds4rt_tokenizer *tok) {
    const char *text = "hello world <think>";
    size_t need = 0;
    CHECK(ds4rt_tokenize(tok, text, strlen(text), 0, NULL, 0, &need) == DS4RT_OK);
    CHECK(need > 3);
    int32_t ids[64];
    size_t got = 0;
    CHECK(ds4rt_tokenize(tok, text, strlen(text), 0, ids, need - 1, &got) ==
          DS4RT_ERR_OUT_OF_RANGE);
    CHECK(got == need);
    CHECK(ds4rt_tokenize(tok, text, strlen(text), 0, ids, need, &got) == DS4RT_OK && got == need);
    CHECK(ids[0] == 259); /* "hello" */
    size_t with_special = 0;
    CHECK(ds4rt_tokenize(tok, text, strlen(text), DS4RT_TOKENIZE_PARSE_SPECIAL, ids, 64,
                         &with_special) == DS4RT_OK);
    CHECK(ids[with_special - 1] == 265); /* <think> as one token */

    char out[64];
    size_t len = 0;
    CHECK(ds4rt_detokenize(tok, ids, with_special, 0, NULL, 0, &len) == DS4RT_OK);
    CHECK(len == strlen(text));
    CHECK(ds4rt_detokenize(tok, ids, with_special, 0, out, len, &len) == DS4RT_OK);
    CHECK(memcmp(out, text, len) == 0);
    CHECK(ds4rt_detokenize(tok, ids, with_special, 0, out, sizeof out, &len) == DS4RT_OK);
    CHECK(strcmp(out, text) == 0); /* NUL-terminated when there is room */
    CHECK(ds4rt_detokenize(tok, ids, with_special, 0, out, 3, &len) == DS4RT_ERR_OUT_OF_RANGE);
    CHECK(len == strlen(text));
}

static void check_bad_arguments(ds4rt_tokenizer *tok) {
    int32_t ids[4];
    size_t n = 99;
    CHECK(ds4rt_tokenize(NULL, "a", 1, 0, ids, 4, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_tokenize(tok, NULL, 1, 0, ids, 4, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_tokenize(tok, "a", 1, 0, ids, 4, NULL) == DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_tokenize(tok, "a", 1, 0x100, ids, 4, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_tokenize(tok, "a", (size_t)DS4RT_TOKENIZE_MAX_BYTES + 1, 0, ids, 4, &n) ==
          DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(strstr(ds4rt_last_error(), "exceeds the limit") != NULL);
    CHECK(ds4rt_tokenize(tok, "a", 1, 0, NULL, 4, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_tokenize(tok, NULL, 0, 0, NULL, 0, &n) == DS4RT_OK && n == 0);
    CHECK(ds4rt_tokenize(tok, "a\x80", 2, DS4RT_TOKENIZE_STRICT_UTF8, ids, 4, &n) ==
          DS4RT_ERR_INVALID_ARGUMENT);
    int32_t bad[2] = {5, 100000};
    char out[16];
    CHECK(ds4rt_detokenize(tok, bad, 2, 0, out, sizeof out, &n) == DS4RT_ERR_OUT_OF_RANGE);
    CHECK(ds4rt_detokenize(tok, NULL, 2, 0, out, sizeof out, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    const char *s;
    size_t len;
    int32_t type, id;
    CHECK(ds4rt_tokenizer_token(tok, -1, &s, &len, &type) == DS4RT_ERR_OUT_OF_RANGE);
    CHECK(ds4rt_tokenizer_token(tok, 265, &s, &len, &type) == DS4RT_OK && len == 7 &&
          type == DS4RT_TOKEN_USER_DEFINED && s[len] == '\0');
    CHECK(ds4rt_tokenizer_find(tok, "hello", 5, &id) == DS4RT_OK && id == 259);
    CHECK(ds4rt_tokenizer_find(tok, "nope", 4, &id) == DS4RT_ERR_NOT_FOUND);
    ds4rt_tokenizer *t2 = NULL;
    ds4rt_tokenizer_arrays a;
    ds4rt_tokenizer_arrays_default(&a);
    CHECK(ds4rt_tokenizer_from_arrays(&a, &t2) == DS4RT_ERR_INVALID_ARGUMENT && t2 == NULL);
    a.size = 3;
    CHECK(ds4rt_tokenizer_from_arrays(&a, &t2) == DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_tokenizer_from_arrays(NULL, &t2) == DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_tokenizer_bos(tok) == 263 && ds4rt_tokenizer_eos(tok) == 264);
    CHECK(ds4rt_tokenizer_bos(NULL) == -1 && ds4rt_tokenizer_n_tokens(NULL) == 0);
    ds4rt_tokenizer_free(NULL);
}

static void check_stream(ds4rt_tokenizer *tok) {
    ds4rt_detok_stream *s = NULL;
    CHECK(ds4rt_detok_stream_create(tok, 0, &s) == DS4RT_OK);
    /* U+4F60 as three byte tokens: E4 BD A0 */
    char c0[4], c1[4], c2[4];
    int32_t id0, id1, id2;
    byte_char(0xE4, c0);
    byte_char(0xBD, c1);
    byte_char(0xA0, c2);
    CHECK(ds4rt_tokenizer_find(tok, c0, strlen(c0), &id0) == DS4RT_OK);
    CHECK(ds4rt_tokenizer_find(tok, c1, strlen(c1), &id1) == DS4RT_OK);
    CHECK(ds4rt_tokenizer_find(tok, c2, strlen(c2), &id2) == DS4RT_OK);
    char out[64];
    size_t n = 99;
    CHECK(ds4rt_detok_stream_push(s, id0, out, sizeof out, &n) == DS4RT_OK && n == 0);
    CHECK(ds4rt_detok_stream_push(s, id1, out, sizeof out, &n) == DS4RT_OK && n == 0);
    CHECK(ds4rt_detok_stream_pending(s) == 2);
    /* too small: not consumed, size reported */
    CHECK(ds4rt_detok_stream_push(s, id2, out, 2, &n) == DS4RT_ERR_OUT_OF_RANGE && n == 3);
    CHECK(ds4rt_detok_stream_pending(s) == 2);
    CHECK(ds4rt_detok_stream_push(s, id2, out, sizeof out, &n) == DS4RT_OK && n == 3);
    CHECK(memcmp(out, "\xe4\xbd\xa0", 3) == 0 && out[3] == '\0');
    CHECK(ds4rt_detok_stream_push(s, id0, out, sizeof out, &n) == DS4RT_OK && n == 0);
    CHECK(ds4rt_detok_stream_push(s, 259, out, sizeof out, &n) == DS4RT_OK);
    CHECK(n == 8 && memcmp(out, "\xef\xbf\xbdhello", 8) == 0);
    CHECK(ds4rt_detok_stream_push(s, id1, out, sizeof out, &n) == DS4RT_OK && n == 3);
    CHECK(ds4rt_detok_stream_push(s, -5, out, sizeof out, &n) == DS4RT_ERR_OUT_OF_RANGE);
    CHECK(ds4rt_detok_stream_flush(s, out, sizeof out, &n) == DS4RT_OK && n == 0);
    CHECK(ds4rt_detok_stream_push(s, id0, out, sizeof out, &n) == DS4RT_OK && n == 0);
    CHECK(ds4rt_detok_stream_flush(s, out, sizeof out, &n) == DS4RT_OK && n == 3);
    ds4rt_detok_stream_free(s);
    ds4rt_detok_stream_free(NULL);
    CHECK(ds4rt_detok_stream_create(NULL, 0, &s) == DS4RT_ERR_INVALID_ARGUMENT && s == NULL);
}

static void check_chat(ds4rt_tokenizer *tok) {
    ds4rt_chat_message m[2] = {{DS4RT_ROLE_USER, "hello", 5, NULL, 0},
                               {DS4RT_ROLE_ASSISTANT, "he", 2, "r", 1}};
    char out[256];
    size_t n = 0;
    CHECK(ds4rt_chat_render(m, 1, NULL, out, sizeof out, &n) == DS4RT_OK);
    const char *want = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef"
                       "\xbd\x9cUser\xef\xbd\x9c>hello<\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>";
    CHECK(n == strlen(want) && strcmp(out, want) == 0);
    int32_t ids[16];
    CHECK(ds4rt_chat_render_ids(tok, m, 1, NULL, ids, 16, &n) == DS4RT_OK && n == 5);
    CHECK(ids[0] == 263 && ids[1] == 267 && ids[2] == 259 && ids[3] == 268 && ids[4] == 266);
    ds4rt_chat_options o;
    ds4rt_chat_options_default(&o);
    o.think = DS4RT_THINK_HIGH;
    /* BOS <User> hello <Assistant> <think> r </think> he EOS */
    CHECK(ds4rt_chat_render_ids(tok, m, 2, &o, ids, 16, &n) == DS4RT_OK && n == 9);
    CHECK(ids[4] == 265 && ids[5] == 'r' && ids[6] == 266 && ids[7] == 256 && ids[8] == 264);
    CHECK(ds4rt_chat_render_ids(tok, m, 2, &o, ids, 2, &n) == DS4RT_ERR_OUT_OF_RANGE && n == 9);
    o.think = 7;
    CHECK(ds4rt_chat_render(m, 1, &o, out, sizeof out, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    o.think = 0;
    o.size = 1;
    CHECK(ds4rt_chat_render(m, 1, &o, out, sizeof out, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    ds4rt_chat_message bad = {9, "x", 1, NULL, 0};
    CHECK(ds4rt_chat_render(&bad, 1, NULL, out, sizeof out, &n) == DS4RT_ERR_INVALID_ARGUMENT);
    ds4rt_chat_message null_text = {DS4RT_ROLE_USER, NULL, 3, NULL, 0};
    CHECK(ds4rt_chat_render(&null_text, 1, NULL, out, sizeof out, &n) ==
          DS4RT_ERR_INVALID_ARGUMENT);
    CHECK(ds4rt_chat_render(NULL, 0, NULL, NULL, 0, &n) == DS4RT_OK && n > 0);
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* Random bytes (biased to UTF-8 fragments, whitespace and markers): encode, then decode, must
 * give the lossy reading of the input; streamed decoding with small buffers, the same. */
static void check_random(ds4rt_tokenizer *tok, int rounds) {
    static const char *frag[] = {" ", "  ", "\n", "\r\n", "\t", "he", "hello", "<think>", "1234",
                                 "\xe4\xbd\xa0", "\xe4\xbd", "\xf0\x9f\x98\x80", "\xcc\x81", "!",
                                 "\xe3\x80\x80", "\xc2\x85", "\xed\xa0\x80", "\xff", "a", "\x00"};
    unsigned char text[512], want[2048];
    int32_t ids[2048];
    char dec[4096];
    ds4rt_detok_stream *s = NULL;
    CHECK(ds4rt_detok_stream_create(tok, 0, &s) == DS4RT_OK);
    for (int r = 0; r < rounds; r++) {
        size_t n = 0, target = rnd() % 200;
        while (n < target) {
            if (rnd() % 4 == 0) {
                text[n++] = (unsigned char)rnd();
            } else {
                const char *f = frag[rnd() % (sizeof frag / sizeof frag[0])];
                size_t fl = f[0] ? strlen(f) : 1;
                if (n + fl > sizeof text) break;
                memcpy(text + n, f, fl);
                n += fl;
            }
        }
        uint32_t flags = rnd() % 4 == 0 ? 0 : (rnd() & 3);
        size_t n_ids = 0;
        CHECK(ds4rt_tokenize(tok, (const char *)text, n, flags, ids, 3 * n + 1, &n_ids) ==
              DS4RT_OK);
        CHECK(n_ids <= 3 * n);
        size_t wl = lossy(text, n, want), dl = 0;
        CHECK(ds4rt_detokenize(tok, ids, n_ids, 0, dec, sizeof dec, &dl) == DS4RT_OK);
        CHECK(dl == wl && memcmp(dec, want, wl) == 0);
        size_t pieces = 0;
        size_t ends[2048];
        CHECK(ds4rt_tokenizer_split(tok, (const char *)text, n, flags, ends, 2048, &pieces) ==
              DS4RT_OK);
        CHECK(pieces <= n_ids && (pieces == 0 || ends[pieces - 1] == wl));
        /* random ids through the stream, one-shot lossy decode as reference */
        size_t k = rnd() % 40;
        for (size_t i = 0; i < k; i++) ids[i] = (int32_t)(rnd() % ds4rt_tokenizer_n_tokens(tok));
        size_t raw_len = 0;
        CHECK(ds4rt_detokenize(tok, ids, k, 0, dec, sizeof dec, &raw_len) == DS4RT_OK);
        wl = lossy((unsigned char *)dec, raw_len, want);
        char streamed[4096];
        size_t sl = 0;
        for (size_t i = 0; i < k; i++) {
            size_t got = 0;
            size_t cap = 1 + rnd() % 8;
            while (ds4rt_detok_stream_push(s, ids[i], streamed + sl, cap, &got) ==
                   DS4RT_ERR_OUT_OF_RANGE)
                cap = got;
            sl += got;
        }
        size_t got = 0;
        CHECK(ds4rt_detok_stream_flush(s, streamed + sl, 8, &got) == DS4RT_OK);
        sl += got;
        CHECK(sl == wl && memcmp(streamed, want, wl) == 0);
    }
    ds4rt_detok_stream_free(s);
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    ds4rt_tokenizer *tok = build();
    if (!tok) return 1;
    check_two_call(tok);
    check_bad_arguments(tok);
    check_stream(tok);
    check_chat(tok);
    check_random(tok, rounds);
    ds4rt_tokenizer_free(tok);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
