/* hash.h - a fast 64-bit hash of byte strings and of integer keys, for the tokenizer's tables
 * (token strings, merge pairs, cached pieces). Not cryptographic; tables are sized at least
 * twice their contents, so probe chains stay short. */
#ifndef DS4RT_TOK_HASH_H
#define DS4RT_TOK_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t ds4rt_hash_mix(uint64_t x) {
    x ^= x >> 32;
    x *= UINT64_C(0xd6e8feb86659fd93);
    x ^= x >> 32;
    x *= UINT64_C(0xd6e8feb86659fd93);
    x ^= x >> 32;
    return x;
}

static inline uint64_t ds4rt_hash_bytes(const void *data, size_t n) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t h = UINT64_C(0x9E3779B97F4A7C15) ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ ds4rt_hash_mix(w)) * UINT64_C(0xff51afd7ed558ccd);
        p += 8;
        n -= 8;
    }
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) t |= (uint64_t)p[i] << (8 * i);
    h = (h ^ ds4rt_hash_mix(t ^ (uint64_t)n << 59)) * UINT64_C(0xff51afd7ed558ccd);
    return ds4rt_hash_mix(h);
}

/* Smallest power of two >= 2 * n (and >= 16), or 0 on overflow. */
static inline size_t ds4rt_table_capacity(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) {
        if (cap > SIZE_MAX / 4) return 0;
        cap <<= 1;
    }
    return cap;
}

#endif /* DS4RT_TOK_HASH_H */
