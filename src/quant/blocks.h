/*
 * blocks.h - byte layouts of the weight blocks (GGML conventions), the layout of quantised
 * activation rows, and the fixed float reduction every kernel ends with.
 *
 * Multi-byte fields are byte arrays: rows of 17-, 18- or 210-byte blocks are not aligned, and
 * hosts may pass any pointer. Read them with ds4rt_rd_*() from fp16.h.
 */
#ifndef DS4RT_BLOCKS_H
#define DS4RT_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "fp16.h"

#define DS4RT_QK 256  /* elements of a K-quant / IQ super-block and of a Q8_K block */
#define DS4RT_QK0 32  /* elements of a Q8_0 / Q4_0 / MXFP4 block */

typedef struct { uint8_t d[2]; int8_t qs[32]; } ds4rt_block_q8_0;                 /* 34 B */
typedef struct { uint8_t d[2]; uint8_t qs[16]; } ds4rt_block_q4_0;                /* 18 B */
typedef struct { uint8_t e; uint8_t qs[16]; } ds4rt_block_mxfp4;                  /* 17 B */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint8_t d[2]; uint8_t dmin[2]; } ds4rt_block_q2_K;
typedef struct { uint8_t d[2]; uint8_t dmin[2]; uint8_t scales[12]; uint8_t qs[128]; } ds4rt_block_q4_K;
typedef struct {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} ds4rt_block_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint8_t d[2]; } ds4rt_block_q6_K;
typedef struct { uint8_t d[2]; uint8_t qs[64]; } ds4rt_block_iq2_xxs;             /* 66 B */

_Static_assert(sizeof(ds4rt_block_q8_0) == 34, "Q8_0 block");
_Static_assert(sizeof(ds4rt_block_q4_0) == 18, "Q4_0 block");
_Static_assert(sizeof(ds4rt_block_mxfp4) == 17, "MXFP4 block");
_Static_assert(sizeof(ds4rt_block_q2_K) == 84, "Q2_K block");
_Static_assert(sizeof(ds4rt_block_q4_K) == 144, "Q4_K block");
_Static_assert(sizeof(ds4rt_block_q5_K) == 176, "Q5_K block");
_Static_assert(sizeof(ds4rt_block_q6_K) == 210, "Q6_K block");
_Static_assert(sizeof(ds4rt_block_iq2_xxs) == 66, "IQ2_XXS block");

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (GGML get_scale_min_k4). */
static inline void ds4rt_k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* All 8 scales (out[0..7]) and 8 mins (out[8..15]) of a Q4_K/Q5_K block at once, with 32-bit
 * operations: the same values as ds4rt_k4_scale_min for j = 0..7. */
static inline void ds4rt_k4_unpack(const uint8_t *s, uint8_t out[16]) {
    uint32_t w0, w1, w2;
    memcpy(&w0, s, 4);
    memcpy(&w1, s + 4, 4);
    memcpy(&w2, s + 8, 4);
    const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
    const uint32_t sc_lo = w0 & lo6, sc_hi = (w2 & lo4) | (((w0 >> 6) & lo2) << 4);
    const uint32_t mn_lo = w1 & lo6, mn_hi = ((w2 >> 4) & lo4) | (((w1 >> 6) & lo2) << 4);
    memcpy(out, &sc_lo, 4);
    memcpy(out + 4, &sc_hi, 4);
    memcpy(out + 8, &mn_lo, 4);
    memcpy(out + 12, &mn_hi, 4);
}

/* MXFP4 shared scale: 2^(e-128) (E8M0 halved, since the table values are doubled). */
static inline float ds4rt_e8m0_half(uint8_t e) {
    return ds4rt_bits_f32(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* ------------------------------------------------------------------------------------------ */
/* Activation rows                                                                              */
/* ------------------------------------------------------------------------------------------ */
/*
 * Before a product, each activation row is converted once to the type paired with the weight:
 *   F32 weights  -> f32 values as given
 *   F16 weights  -> f32 values rounded to f16 (stored as f32, so kernels skip a conversion)
 *   BF16 weights -> f32 values rounded to bf16 (likewise)
 *   Q8_0, Q4_0, MXFP4 -> Q8_0: per 32, int8 q and f32 d (= amax/127), plus int32 sum of q
 *   Q2_K..Q6_K, IQ2_XXS -> Q8_K: per 256, int8 q and f32 d, plus int16 sums of each 16
 * One row: qs (or the f32 values) at offset 0, d[] at d_off, the sums at s_off; rows are
 * `stride` bytes apart (a multiple of 64).
 */
typedef struct ds4rt_act {
    uint32_t type; /* DS4RT_TYPE_F32 (also for F16/BF16 rounding), DS4RT_TYPE_Q8_0, DS4RT_TYPE_Q8_K */
    int64_t cols;
    uint8_t *base;
    size_t stride;
    size_t d_off;
    size_t s_off;
} ds4rt_act;

static inline const float *ds4rt_act_f32(const ds4rt_act *a, int64_t t) {
    return (const float *)(const void *)(a->base + (size_t)t * a->stride);
}
static inline const int8_t *ds4rt_act_qs(const ds4rt_act *a, int64_t t) {
    return (const int8_t *)(a->base + (size_t)t * a->stride);
}
static inline const float *ds4rt_act_d(const ds4rt_act *a, int64_t t) {
    return (const float *)(const void *)(a->base + (size_t)t * a->stride + a->d_off);
}
static inline const int32_t *ds4rt_act_sum32(const ds4rt_act *a, int64_t t) { /* Q8_0 */
    return (const int32_t *)(const void *)(a->base + (size_t)t * a->stride + a->s_off);
}
static inline const int16_t *ds4rt_act_bsums(const ds4rt_act *a, int64_t t) { /* Q8_K */
    return (const int16_t *)(const void *)(a->base + (size_t)t * a->stride + a->s_off);
}

/* ------------------------------------------------------------------------------------------ */
/* The fixed reduction order (identical in every ISA path)                                      */
/* ------------------------------------------------------------------------------------------ */
/*
 * Quantised types: each weight block b yields exact integers and one f32 term s_b computed by a
 * fixed formula (see kernels_scalar.c); s_b is added to lane b % 8 of eight f32 accumulators
 * that start at +0, and the lanes are summed by ds4rt_reduce8.
 * Float types: element i's product w_i*x_i (one f32 multiply) is added to lane i % 32 of 32
 * accumulators, summed by ds4rt_reduce32. No fused multiply-add anywhere: every file of the
 * quant module is compiled with -ffp-contract=off.
 */
#define DS4RT_QLANES 8
#define DS4RT_FLANES 32

static inline float ds4rt_reduce8(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static inline float ds4rt_reduce32(const float a[32]) {
    float v[8];
    for (int k = 0; k < 8; k++) v[k] = (a[k] + a[k + 8]) + (a[k + 16] + a[k + 24]);
    return ds4rt_reduce8(v);
}

#endif /* DS4RT_BLOCKS_H */
