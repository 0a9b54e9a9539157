/*
 * pretokenize.c - the DeepSeek V4 ("joyai-llm") pre-tokenizer: three regex splits with
 * behaviour "Isolated", each applied to every piece the previous one produced, as tokenizers'
 * Sequence of Split pre-tokenizers does:
 *
 *   1. \p{N}{1,3}
 *   2. [\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+
 *   3. [ASCII punct][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ | ␠?[\p{P}\p{S}]+[\r\n]* |
 *      \s*[\r\n]+ | \s+(?!\S) | \s+
 *
 * "Isolated": every match is a piece and so is every maximal stretch between matches. The
 * regexes run on Oniguruma in tokenizers: at each position the alternatives are tried in order
 * and the first that matches wins (with backtracking inside it); where none matches the scan
 * moves on by one character. No alternative can match the empty string. Each alternative is
 * written out below as the exact span backtracking settles on. Lookahead sees only the piece
 * being split: at a piece's end (?!\S) succeeds.
 */
#include "tokenizer_internal.h"
#include "unicode_class.h"
#include "utf8.h"

#define IS_LM(c) ((c) == DS4RT_UC_LETTER || (c) == DS4RT_UC_MARK)
#define IS_PS(c) ((c) == DS4RT_UC_PUNCT || (c) == DS4RT_UC_SYMBOL)

static inline size_t char_at(const uint8_t *s, size_t i, uint32_t *cp, int *cls) {
    size_t len = ds4rt_utf8_decode_valid(s + i, cp);
    *cls = ds4rt_uclass(*cp);
    return len;
}

static inline int is_ascii_alpha(uint8_t b) { return (uint8_t)((b | 0x20) - 'a') < 26; }

/* The 32 characters of the first alternative's bracket: ASCII printable, not alphanumeric. */
static inline int is_ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

/* End of the maximal run of characters of classes a or b starting at i. */
static size_t run_of(const uint8_t *s, size_t i, size_t e, int a, int b) {
    while (i < e) {
        uint32_t cp;
        int cls;
        size_t len = char_at(s, i, &cp, &cls);
        if (cls != a && cls != b) break;
        i += len;
    }
    return i;
}

static size_t run_crlf(const uint8_t *s, size_t i, size_t e) {
    while (i < e && (s[i] == '\r' || s[i] == '\n')) i++;
    return i;
}

/* End of the regex-3 match that starts at i (character cp, class cls, len bytes), or 0. */
static size_t match_word(const uint8_t *s, size_t i, size_t e, uint32_t cp, size_t len, int cls) {
    size_t j = i + len;

    /* [!-/:-@[-`{-~][A-Za-z]+ : greedy, nothing after it. */
    if (cp < 0x80 && is_ascii_punct(cp) && j < e && is_ascii_alpha(s[j])) {
        do j++;
        while (j < e && is_ascii_alpha(s[j]));
        return j;
    }

    uint32_t ncp = 0;
    int ncls = -1;
    if (j < e) (void)char_at(s, j, &ncp, &ncls);

    /* [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ : with the optional prefix when the next character
     * starts a letter/mark run, otherwise without it (then this character must be L or M).
     * Either way the run continues from the next character. */
    int prefix_ok = cp != '\r' && cp != '\n' && cls != DS4RT_UC_LETTER && !IS_PS(cls);
    if (IS_LM(cls) || (prefix_ok && IS_LM(ncls))) return run_of(s, j, e, DS4RT_UC_LETTER, DS4RT_UC_MARK);

    /* ␠?[\p{P}\p{S}]+[\r\n]* */
    if (IS_PS(cls)) return run_crlf(s, run_of(s, j, e, DS4RT_UC_PUNCT, DS4RT_UC_SYMBOL), e);
    if (cp == ' ' && IS_PS(ncls))
        return run_crlf(s, run_of(s, j, e, DS4RT_UC_PUNCT, DS4RT_UC_SYMBOL), e);

    if (cls != DS4RT_UC_SPACE) return 0;

    /* The maximal whitespace run [i, k); where its last \r or \n ends; where its last
     * character starts. */
    size_t k = i, nl_end = 0, last = i;
    uint32_t c = cp;
    size_t l = len;
    for (;;) {
        if (c == '\r' || c == '\n') nl_end = k + l;
        last = k;
        k += l;
        if (k >= e) break;
        int ccls;
        l = char_at(s, k, &c, &ccls);
        if (ccls != DS4RT_UC_SPACE) break;
    }
    /* \s*[\r\n]+ : \s* gives back characters until [\r\n]+ can match, i.e. up to the run's
     * last newline; [\r\n]+ then takes just that one. */
    if (nl_end) return nl_end;
    /* \s+(?!\S) : the whole run if it ends the piece; else all but its last character (which
     * is then followed by whitespace), if that leaves any. */
    if (k >= e) return k;
    if (last > i) return last;
    /* \s+ */
    return k;
}

static ds4rt_status split_words(const uint8_t *s, size_t b, size_t e, ds4rt_piece_fn fn,
                                void *ctx) {
    size_t i = b, gap = b;
    ds4rt_status st;
    while (i < e) {
        uint32_t cp;
        int cls;
        size_t len = char_at(s, i, &cp, &cls);
        size_t m = match_word(s, i, e, cp, len, cls);
        if (m == 0) {
            i += len;
            continue;
        }
        if (gap < i && (st = fn(ctx, s, gap, i)) != DS4RT_OK) return st;
        if ((st = fn(ctx, s, i, m)) != DS4RT_OK) return st;
        i = gap = m;
    }
    if (gap < e) return fn(ctx, s, gap, e);
    return DS4RT_OK;
}

static inline int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF);
}

static ds4rt_status split_cjk(const uint8_t *s, size_t b, size_t e, ds4rt_piece_fn fn,
                              void *ctx) {
    size_t i = b, gap = b;
    ds4rt_status st;
    while (i < e) {
        if (s[i] < 0x80) { /* fast path: no ASCII byte is CJK */
            i++;
            continue;
        }
        uint32_t cp;
        size_t len = ds4rt_utf8_decode_valid(s + i, &cp);
        if (!is_cjk(cp)) {
            i += len;
            continue;
        }
        size_t j = i + len;
        while (j < e && s[j] >= 0x80) {
            size_t l = ds4rt_utf8_decode_valid(s + j, &cp);
            if (!is_cjk(cp)) break;
            j += l;
        }
        if (gap < i && (st = split_words(s, gap, i, fn, ctx)) != DS4RT_OK) return st;
        if ((st = split_words(s, i, j, fn, ctx)) != DS4RT_OK) return st;
        i = gap = j;
    }
    if (gap < e) return split_words(s, gap, e, fn, ctx);
    return DS4RT_OK;
}

ds4rt_status ds4rt_pretokenize(const uint8_t *s, size_t b, size_t e, ds4rt_piece_fn fn,
                               void *ctx) {
    size_t i = b, gap = b;
    ds4rt_status st;
    while (i < e) {
        uint32_t cp;
        int cls;
        size_t len = char_at(s, i, &cp, &cls);
        if (cls != DS4RT_UC_NUMBER) {
            i += len;
            continue;
        }
        /* \p{N}{1,3}: up to three number characters. Such a piece passes the later splits
         * unchanged (numbers are not CJK and start no regex-3 alternative that a number can
         * continue), so it goes straight to fn. */
        size_t j = i + len;
        for (int count = 1; count < 3 && j < e; count++) {
            size_t l = char_at(s, j, &cp, &cls);
            if (cls != DS4RT_UC_NUMBER) break;
            j += l;
        }
        if (gap < i && (st = split_cjk(s, gap, i, fn, ctx)) != DS4RT_OK) return st;
        if ((st = fn(ctx, s, i, j)) != DS4RT_OK) return st;
        i = gap = j;
    }
    if (gap < e) return split_cjk(s, gap, e, fn, ctx);
    return DS4RT_OK;
}
