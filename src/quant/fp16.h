/*
 * fp16.h - portable IEEE binary16 and bfloat16 conversions (no hardware support assumed).
 *
 * f16 -> f32 is exact. f32 -> f16 and f32 -> bf16 round to nearest, ties to even, exactly like
 * F16C's vcvtps2ph (imm 0), ARM's fcvt and NumPy's astype(float16). NaNs stay NaN: their payload
 * is kept (truncated) and the quiet bit is set, as the hardware converters do.
 */
#ifndef DS4RT_FP16_H
#define DS4RT_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ds4rt_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float ds4rt_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float ds4rt_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN (quieted) */
        return ds4rt_bits_f32(sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0));
    if (exp == 0) { /* zero or subnormal: man * 2^-24, exact in f32 */
        const float mag = (float)man * 0x1p-24f;
        return sign ? -mag : mag;
    }
    return ds4rt_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t ds4rt_f32_to_f16(float f) {
    const uint32_t x = ds4rt_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf, NaN */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                   /* below 2^-14: subnormal f16 */
        const uint32_t e = ax >> 23;
        if (e < 102) return sign; /* < 2^-25: rounds to zero */
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e; /* 14..24 */
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax >> 13) & 0x3ffu);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static inline float ds4rt_bf16_to_f32(uint16_t b) { return ds4rt_bits_f32((uint32_t)b << 16); }

static inline uint16_t ds4rt_f32_to_bf16(float f) {
    uint32_t x = ds4rt_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* Little-endian field reads from byte pointers of any alignment. */
static inline uint16_t ds4rt_rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t ds4rt_rd_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline float ds4rt_rd_f16(const uint8_t *p) { return ds4rt_f16_to_f32(ds4rt_rd_u16(p)); }

#endif /* DS4RT_FP16_H */
