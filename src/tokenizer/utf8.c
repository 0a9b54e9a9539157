/* utf8.c - UTF-8 well-formedness (Unicode Table 3-7) and maximal-subpart classification. */
#include "utf8.h"

/* Allowed range of the second byte for each lead byte; later bytes are always 80..BF. */
static int second_byte_ok(uint8_t lead, uint8_t b) {
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
    }
}

static size_t sequence_length(uint8_t lead) {
    if (lead < 0x80) return 1;
    if (lead >= 0xC2 && lead <= 0xDF) return 2;
    if (lead >= 0xE0 && lead <= 0xEF) return 3;
    if (lead >= 0xF0 && lead <= 0xF4) return 4;
    return 0; /* 80..C1, F5..FF never begin a sequence */
}

ds4rt_utf8_kind ds4rt_utf8_next(const uint8_t *p, size_t n, size_t *len, uint32_t *cp) {
    size_t need = sequence_length(p[0]);
    if (need == 0) {
        *len = 1;
        return DS4RT_UTF8_INVALID;
    }
    for (size_t k = 1; k < need; k++) {
        if (k >= n) {
            *len = n;
            return DS4RT_UTF8_TRUNCATED;
        }
        int ok = k == 1 ? second_byte_ok(p[0], p[1]) : (p[k] >= 0x80 && p[k] <= 0xBF);
        if (!ok) {
            *len = k;
            return DS4RT_UTF8_INVALID;
        }
    }
    *len = ds4rt_utf8_decode_valid(p, cp);
    return DS4RT_UTF8_VALID;
}

size_t ds4rt_utf8_valid_prefix(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* ASCII runs dominate real text: skip them 8 bytes at a time. */
        while (i + 8 <= n) {
            uint64_t w;
            __builtin_memcpy(&w, p + i, 8);
            if (w & UINT64_C(0x8080808080808080)) break;
            i += 8;
        }
        if (i >= n) break;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (ds4rt_utf8_next(p + i, n - i, &len, &cp) != DS4RT_UTF8_VALID) return i;
        i += len;
    }
    return n;
}

size_t ds4rt_utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
