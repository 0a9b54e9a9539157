/*
 * bytelevel.h - GPT-2's byte-level alphabet: every byte is written as one printable code
 * point so BPE tokens are strings of those. Bytes 33-126, 161-172 and 174-255 stand for
 * themselves; the other 68 bytes take U+0100, U+0101, ... in increasing byte order.
 */
#ifndef DS4RT_TOK_BYTELEVEL_H
#define DS4RT_TOK_BYTELEVEL_H

#include <stdint.h>

/* Code point that stands for byte b. */
static inline uint32_t ds4rt_bytelevel_cp(uint8_t b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    if (b <= 32) return 256u + b;        /* 0..32   -> U+0100..U+0120 */
    if (b <= 160) return (uint32_t)b + 162u; /* 127..160 -> U+0121..U+0142 */
    return 323u;                         /* 173     -> U+0143 */
}

/* Byte that code point cp stands for, or -1 if cp is not in the alphabet. */
static inline int ds4rt_bytelevel_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp >= 256 && cp <= 288) return (int)(cp - 256);
    if (cp >= 289 && cp <= 322) return (int)(cp - 162);
    if (cp == 323) return 173;
    return -1;
}

#endif /* DS4RT_TOK_BYTELEVEL_H */
