/*
 * fuzz_tokenizer.c - libFuzzer target for the tokenizer (docs/ROBUSTNESS.md, docs/TOKENIZER.md).
 *
 * The first byte chooses what the rest is:
 *   bit 7 clear: text for a fixed byte-level vocabulary (the 256 byte tokens, a few merges, a
 *     CONTROL BOS/EOS pair and USER_DEFINED tokens), tokenized with the flags in bits 0-3;
 *   bit 7 set: a vocabulary - lines up to the first empty one are token strings (their first
 *     byte mod 7 a token type), the lines after it merges - built with
 *     ds4rt_tokenizer_from_arrays and, if accepted, used on the input itself.
 * Checks beyond the sanitizers: the documented id bounds (3 len + 1; len + 1 for valid UTF-8),
 * ids within the vocabulary, the two-call pattern agreeing with itself, decode(encode(text)) ==
 * text for valid UTF-8, the pieces of ds4rt_tokenizer_split covering the text, and the stream
 * decoder's output equalling a whole REPLACE_INVALID decode.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt.h"
#include "fuzz_target.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_tokenizer: %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, ds4rt_last_error());                                                \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

/* GPT-2's byte-to-character map, the form byte-level BPE stores tokens in. */
static void byte_char(int b, char out[3]) {
    unsigned cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (unsigned)b
                  : b <= 32                                                  ? 256u + (unsigned)b
                  : b <= 160                                                 ? (unsigned)b + 162u
                                                                             : 323u;
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static const char *EXTRA[] = {"he", "hel", "ll", "\xc4\xa0w", "<s>", "</s>", "<think>", "</think>"};
static const int32_t EXTRA_TYPE[] = {1, 1, 1, 1, 3, 3, 4, 4};
static const char *MERGES[] = {"h e", "he l", "l l", "\xc4\xa0 w"};

static ds4rt_tokenizer *fixed;

static ds4rt_tokenizer *build_fixed(void) {
    enum { N_EXTRA = sizeof EXTRA / sizeof EXTRA[0] };
    static char chars[256][3];
    const char *tokens[256 + N_EXTRA];
    int32_t types[256 + N_EXTRA];
    for (int b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        tokens[b] = chars[b];
        types[b] = DS4RT_TOKEN_NORMAL;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        tokens[256 + i] = EXTRA[i];
        types[256 + i] = EXTRA_TYPE[i];
    }
    ds4rt_tokenizer_arrays a;
    REQUIRE(ds4rt_tokenizer_arrays_init(&a, sizeof a) == DS4RT_OK);
    a.n_tokens = 256 + N_EXTRA;
    a.tokens = tokens;
    a.token_types = types;
    a.n_merges = sizeof MERGES / sizeof MERGES[0];
    a.merges = MERGES;
    a.bos_id = 260;
    a.eos_id = 261;
    ds4rt_tokenizer *tok = NULL;
    REQUIRE(ds4rt_tokenizer_from_arrays(&a, &tok) == DS4RT_OK);
    return tok;
}

static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t need = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                    : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (need == 0 || i + need > n) return 0;
        for (size_t k = 1; k < need; k++) {
            uint8_t d = s[i + k], lo = 0x80, hi = 0xBF;
            if (k == 1 && c == 0xE0) lo = 0xA0;
            if (k == 1 && c == 0xED) hi = 0x9F;
            if (k == 1 && c == 0xF0) lo = 0x90;
            if (k == 1 && c == 0xF4) hi = 0x8F;
            if (d < lo || d > hi) return 0;
        }
        i += need;
    }
    return 1;
}

/* Everything the tokenizer offers, on one text. */
static void exercise(const ds4rt_tokenizer *tok, const char *text, size_t len, uint32_t flags) {
    size_t need = 0;
    ds4rt_status st = ds4rt_tokenize(tok, text, len, flags, NULL, 0, &need);
    if (st != DS4RT_OK) {
        /* a refusal says why; the fixed vocabulary (every byte has a token) refuses only
         * invalid UTF-8 under STRICT_UTF8, a fuzzed one also bytes it has no token for */
        REQUIRE(st != DS4RT_ERR_OUT_OF_RANGE && ds4rt_last_error()[0] != '\0');
        if (tok == fixed)
            REQUIRE((flags & DS4RT_TOKENIZE_STRICT_UTF8) && !valid_utf8((const uint8_t *)text, len));
        return;
    }
    int valid = valid_utf8((const uint8_t *)text, len);
    size_t bos = (flags & DS4RT_TOKENIZE_ADD_BOS) && ds4rt_tokenizer_bos(tok) >= 0;
    REQUIRE(need <= (valid ? len : 3 * len) + bos);
    int32_t *ids = malloc((need ? need : 1) * sizeof *ids);
    REQUIRE(ids != NULL);
    size_t got = 0;
    REQUIRE(ds4rt_tokenize(tok, text, len, flags, ids, need, &got) == DS4RT_OK && got == need);
    uint32_t n_tokens = ds4rt_tokenizer_n_tokens(tok);
    for (size_t i = 0; i < got; i++) REQUIRE(ids[i] >= 0 && (uint32_t)ids[i] < n_tokens);

    size_t out_len = 0;
    REQUIRE(ds4rt_detokenize(tok, ids, got, 0, NULL, 0, &out_len) == DS4RT_OK);
    char *out = malloc(out_len + 1);
    REQUIRE(out != NULL);
    size_t out_got = 0;
    REQUIRE(ds4rt_detokenize(tok, ids, got, 0, out, out_len + 1, &out_got) == DS4RT_OK && out_got == out_len);
    if (valid && !bos && tok == fixed) /* the fixed vocabulary has every byte: nothing is lost */
        REQUIRE(out_len == len && memcmp(out, text, len) == 0);

    /* the stream decoder, id by id, gives a whole REPLACE_INVALID decode */
    size_t whole_len = 0;
    REQUIRE(ds4rt_detokenize(tok, ids, got, DS4RT_DETOKENIZE_REPLACE_INVALID, NULL, 0, &whole_len) == DS4RT_OK);
    char *whole = malloc(whole_len + 1), *streamed = malloc(whole_len + 1);
    REQUIRE(whole != NULL && streamed != NULL);
    REQUIRE(ds4rt_detokenize(tok, ids, got, DS4RT_DETOKENIZE_REPLACE_INVALID, whole, whole_len + 1, &whole_len) ==
            DS4RT_OK);
    ds4rt_detok_stream *ds = NULL;
    REQUIRE(ds4rt_detok_stream_create(tok, 0, &ds) == DS4RT_OK);
    size_t piece_cap = 3 * (ds4rt_tokenizer_max_token_bytes(tok) + 4), at = 0, n = 0;
    char *piece = malloc(piece_cap);
    REQUIRE(piece != NULL);
    for (size_t i = 0; i < got; i++) {
        REQUIRE(ds4rt_detok_stream_push(ds, ids[i], piece, piece_cap, &n) == DS4RT_OK);
        REQUIRE(at + n <= whole_len);
        memcpy(streamed + at, piece, n);
        at += n;
    }
    REQUIRE(ds4rt_detok_stream_flush(ds, piece, piece_cap, &n) == DS4RT_OK && at + n <= whole_len);
    memcpy(streamed + at, piece, n);
    at += n;
    REQUIRE(at == whole_len && memcmp(streamed, whole, at) == 0);
    ds4rt_detok_stream_free(ds);

    /* the pieces BPE sees: contiguous and increasing */
    size_t n_pieces = 0;
    if (ds4rt_tokenizer_split(tok, text, len, flags, NULL, 0, &n_pieces) == DS4RT_OK && n_pieces > 0) {
        size_t *ends = malloc(n_pieces * sizeof *ends), got_pieces = 0;
        REQUIRE(ends != NULL);
        REQUIRE(ds4rt_tokenizer_split(tok, text, len, flags, ends, n_pieces, &got_pieces) == DS4RT_OK);
        for (size_t i = 1; i < got_pieces; i++) REQUIRE(ends[i] > ends[i - 1]);
        if (valid) REQUIRE(ends[got_pieces - 1] == len);
        free(ends);
    }
    free(piece);
    free(whole);
    free(streamed);
    free(out);
    free(ids);
}

/* A vocabulary from the input's lines (see the file comment); NULL if refused. */
static ds4rt_tokenizer *build_from(const char *text, size_t len) {
    size_t cap = 1;
    for (size_t i = 0; i < len; i++) cap += text[i] == '\n';
    const char **lines = malloc(cap * sizeof *lines);
    uint32_t *lens = malloc(cap * sizeof *lens);
    int32_t *types = malloc(cap * sizeof *types);
    REQUIRE(lines && lens && types);
    size_t n = 0, n_tokens = (size_t)-1;
    for (size_t start = 0; start <= len;) {
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (end == start && n_tokens == (size_t)-1) n_tokens = n;
        else {
            lines[n] = text + start;
            lens[n] = (uint32_t)(end - start);
            types[n] = end > start ? (int32_t)((uint8_t)text[start] % 7) : DS4RT_TOKEN_NORMAL;
            n++;
        }
        start = end + 1;
    }
    if (n_tokens == (size_t)-1) n_tokens = n;
    ds4rt_tokenizer_arrays a;
    REQUIRE(ds4rt_tokenizer_arrays_init(&a, sizeof a) == DS4RT_OK);
    a.n_tokens = (uint32_t)n_tokens;
    a.tokens = lines;
    a.token_lens = lens;
    a.token_types = types;
    a.n_merges = (uint32_t)(n - n_tokens);
    a.merges = lines + n_tokens;
    a.merge_lens = lens + n_tokens;
    a.bos_id = n_tokens > 0 ? 0 : -1;
    a.eos_id = -1;
    ds4rt_tokenizer *tok = NULL;
    ds4rt_status st = ds4rt_tokenizer_from_arrays(&a, &tok);
    REQUIRE((st == DS4RT_OK) == (tok != NULL));
    if (st != DS4RT_OK) REQUIRE(ds4rt_last_error()[0] != '\0');
    free(lines);
    free(lens);
    free(types);
    return tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fixed == NULL) fixed = build_fixed();
    if (size == 0) return 0;
    uint32_t flags = data[0] & 0x0f;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 0x80) {
        ds4rt_tokenizer *tok = build_from(text, len);
        if (tok != NULL) {
            exercise(tok, text, len, flags);
            exercise(tok, "hello world", 11, flags);
            ds4rt_tokenizer_free(tok);
        }
    } else {
        exercise(fixed, text, len, flags);
    }
    return 0;
}
