/*
 * utf8.h - UTF-8 decoding with the "maximal subpart" rule of the Unicode Standard (chapter 3,
 * U+FFFD substitution), which is what Python's bytes.decode(errors="replace") and Rust's
 * String::from_utf8_lossy do: each maximal prefix of a well-formed sequence that cannot be
 * completed becomes one U+FFFD, and a byte that cannot begin a sequence becomes one U+FFFD.
 */
#ifndef DS4RT_TOK_UTF8_H
#define DS4RT_TOK_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Result of looking at the sequence that starts at p[0]. */
typedef enum {
    DS4RT_UTF8_VALID,     /* a whole well-formed character of `len` bytes */
    DS4RT_UTF8_INVALID,   /* `len` bytes (>= 1) form one maximal invalid subpart */
    DS4RT_UTF8_TRUNCATED  /* all n bytes are a valid but unfinished prefix (n < needed) */
} ds4rt_utf8_kind;

/* Classifies the sequence at p (n >= 1 bytes available); sets *len (and *cp when VALID). */
ds4rt_utf8_kind ds4rt_utf8_next(const uint8_t *p, size_t n, size_t *len, uint32_t *cp);

/* Decodes one character of text already known to be valid UTF-8; returns its length. */
static inline size_t ds4rt_utf8_decode_valid(const uint8_t *p, uint32_t *cp) {
    uint8_t b = p[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b < 0xE0) {
        *cp = ((uint32_t)(b & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    if (b < 0xF0) {
        *cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
          ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    return 4;
}

/* Length of the longest valid UTF-8 prefix of p[0..n): n when the whole text is valid. */
size_t ds4rt_utf8_valid_prefix(const uint8_t *p, size_t n);

/* Writes the UTF-8 encoding of cp (< 0x110000) to out (4 bytes room); returns its length. */
size_t ds4rt_utf8_encode(uint32_t cp, uint8_t *out);

#endif /* DS4RT_TOK_UTF8_H */
