/*
 * kernels_neon.c - aarch64 NEON dot-product kernels. Compiled twice: as "neon" (baseline
 * ARMv8-A) and, with -DDS4RT_NEON_DOTPROD and -march=armv8.2-a+dotprod, as "neon-dotprod"
 * (SDOT). Both reproduce kernels_scalar.c bit for bit: exact integer sums, then the same f32
 * formulas and lane order.
 */
#include <arm_neon.h>

#include "kernels.h"
#include "quant_tables.h"

#if defined(DS4RT_NEON_DOTPROD)
#  if !defined(__ARM_FEATURE_DOTPROD)
#    error "DS4RT_NEON_DOTPROD needs -march=armv8.2-a+dotprod"
#  endif
#  define NEON_TABLE ds4rt_kernels_neon_dotprod
#  define NEON_NAME "neon-dotprod"
#else
#  define NEON_TABLE ds4rt_kernels_neon
#  define NEON_NAME "neon"
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TMAX DS4RT_TILE_TOK

/* acc + pairwise-summed products of 16 int8 pairs (|a*b| <= 128*127; exact). */
ALWAYS_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(DS4RT_NEON_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_s8(p, vget_high_s8(a), vget_high_s8(b));
    return vpadalq_s16(acc, p);
#endif
}

ALWAYS_INLINE int32x4_t dot32(int8x16_t a0, int8x16_t a1, const int8_t *x) {
    return dot16(dot16(vdupq_n_s32(0), a0, vld1q_s8(x)), a1, vld1q_s8(x + 16));
}

/* ================= float weights: acc[i % 32] += w_i * x_i ================= */

ALWAYS_INLINE float32x4_t load4_f32(const uint8_t *p) { return vld1q_f32((const float *)(const void *)p); }
ALWAYS_INLINE float32x4_t load4_f16(const uint8_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}
ALWAYS_INLINE float32x4_t load4_bf16(const uint8_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)(const void *)p), 16));
}
static inline float scalar_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}
static inline float scalar_bf16(const uint8_t *p) { return ds4rt_bf16_to_f32(ds4rt_rd_u16(p)); }

/* Weight pointers of F16/BF16 rows are 2-byte aligned at least in GGUF; vld1 has no alignment
 * requirement beyond the element size, and rows handed in by hosts are read the same way. */
#define DEF_FLOAT_DOT(name, ESZ, LOADW, SCALARW)                                                     \
    static void dot_##name(const uint8_t *w, const ds4rt_act *a, int64_t t0, int n_tok, int64_t k0,  \
                           int64_t k1, float *lanes, int64_t ls) {                                   \
        const int64_t n32 = k0 + ((k1 - k0) & ~(int64_t)31);                                         \
        for (int t = 0; t < n_tok; t++) {                                                            \
            const float *x = ds4rt_act_f32(a, t0 + t);                                               \
            float *acc = lanes + t * ls;                                                             \
            float32x4_t c[8];                                                                        \
            for (int k = 0; k < 8; k++) c[k] = vld1q_f32(acc + 4 * k);                               \
            for (int64_t i = k0; i < n32; i += 32)                                                    \
                for (int k = 0; k < 8; k++)                                                          \
                    c[k] = vaddq_f32(c[k], vmulq_f32(LOADW(w + ESZ * (i + 4 * k)), vld1q_f32(x + i + 4 * k))); \
            for (int k = 0; k < 8; k++) vst1q_f32(acc + 4 * k, c[k]);                                \
            for (int64_t i = n32; i < k1; i++) acc[i & 31] += SCALARW(w + ESZ * i) * x[i];            \
        }                                                                                            \
    }

DEF_FLOAT_DOT(f32, 4, load4_f32, scalar_f32)
DEF_FLOAT_DOT(f16, 2, load4_f16, ds4rt_rd_f16)
DEF_FLOAT_DOT(bf16, 2, load4_bf16, scalar_bf16)

/* ================= 32-element blocks, Q8_0 activations ================= */

/* kind 0 = Q8_0 (34 B), 1 = Q4_0 (18 B), 2 = MXFP4 (17 B): the signed weights of one block. */
ALWAYS_INLINE void decode_blk32(int kind, const uint8_t *blk, int8x16_t *lo, int8x16_t *hi) {
    if (kind == 0) {
        *lo = vld1q_s8((const int8_t *)blk + 2);
        *hi = vld1q_s8((const int8_t *)blk + 18);
        return;
    }
    const uint8x16_t v = vld1q_u8(blk + (kind == 1 ? 2 : 1));
    const uint8x16_t l = vandq_u8(v, vdupq_n_u8(15)), h = vshrq_n_u8(v, 4);
    if (kind == 1) {
        *lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(8));
        *hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(8));
    } else {
        const int8x16_t table = vld1q_s8(ds4rt_mxfp4_values);
        *lo = vqtbl1q_s8(table, l);
        *hi = vqtbl1q_s8(table, h);
    }
}

ALWAYS_INLINE void tile_blk32(int kind, size_t bsz, const uint8_t *w, const ds4rt_act *a, int64_t t0, int T,
                              int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const int8_t *xq[TMAX];
    const float *xd[TMAX];
    for (int t = 0; t < T; t++) {
        xq[t] = ds4rt_act_qs(a, t0 + t);
        xd[t] = ds4rt_act_d(a, t0 + t);
    }
    for (int64_t b = k0 / 32; b < k1 / 32; b++) {
        const uint8_t *blk = w + b * bsz;
        int8x16_t lo, hi;
        decode_blk32(kind, blk, &lo, &hi);
        const float d = kind == 2 ? ds4rt_e8m0_half(blk[0]) : ds4rt_rd_f16(blk);
        for (int t = 0; t < T; t++) {
            const int32_t I = vaddvq_s32(dot32(lo, hi, xq[t] + b * 32));
            L[t][b & 7] += (d * xd[t][b]) * (float)I;
        }
    }
}

/* ================= 256-element blocks, Q8_K activations ================= */

typedef struct {
    const int8_t *xq[TMAX];
    const float *xd[TMAX];
    const int16_t *bs[TMAX];
} qk_rows;

ALWAYS_INLINE void qk_rows_init(qk_rows *r, const ds4rt_act *a, int64_t t0, int T) {
    for (int t = 0; t < T; t++) {
        r->xq[t] = ds4rt_act_qs(a, t0 + t);
        r->xd[t] = ds4rt_act_d(a, t0 + t);
        r->bs[t] = ds4rt_act_bsums(a, t0 + t);
    }
}

ALWAYS_INLINE int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* sum_g m[g] * bs[g] over 16 groups (m: 16 bytes 0..255 as unsigned, bs: the Q8_K bsums). */
ALWAYS_INLINE int32_t dot_mins16(uint8x16_t m, const int16_t *bs) {
    const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
    const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_u8(vget_high_u8(m)));
    const int16x8_t b0 = vld1q_s16(bs), b1 = vld1q_s16(bs + 8);
    int32x4_t p = vmull_s16(vget_low_s16(m0), vget_low_s16(b0));
    p = vmlal_s16(p, vget_high_s16(m0), vget_high_s16(b0));
    p = vmlal_s16(p, vget_low_s16(m1), vget_low_s16(b1));
    p = vmlal_s16(p, vget_high_s16(m1), vget_high_s16(b1));
    return vaddvq_s32(p);
}

ALWAYS_INLINE void tile_q2_K(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q2_K *blk = (const ds4rt_block_q2_K *)(const void *)(w + b * 84);
        int32x4_t acc[TMAX];
        for (int t = 0; t < T; t++) acc[t] = vdupq_n_s32(0);
        for (int n = 0; n < 2; n++) {
            const uint8x16_t va = vld1q_u8(blk->qs + 32 * n), vb = vld1q_u8(blk->qs + 32 * n + 16);
            for (int j = 0; j < 4; j++) {
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * j));
                const int8x16_t qa = s8(vandq_u8(vshlq_u8(va, shift), m3));
                const int8x16_t qb = s8(vandq_u8(vshlq_u8(vb, shift), m3));
                const int g = 8 * n + 2 * j;
                const int32_t sa = blk->scales[g] & 15, sb = blk->scales[g + 1] & 15;
                for (int t = 0; t < T; t++) {
                    const int8_t *x = r.xq[t] + b * 256 + 128 * n + 32 * j;
                    acc[t] = vmlaq_n_s32(acc[t], dot16(vdupq_n_s32(0), qa, vld1q_s8(x)), sa);
                    acc[t] = vmlaq_n_s32(acc[t], dot16(vdupq_n_s32(0), qb, vld1q_s8(x + 16)), sb);
                }
            }
        }
        const float d = ds4rt_rd_f16(blk->d), dmin = ds4rt_rd_f16(blk->dmin);
        const uint8x16_t mins = vshrq_n_u8(vld1q_u8(blk->scales), 4);
        for (int t = 0; t < T; t++) {
            const int32_t B = dot_mins16(mins, r.bs[t] + b * 16);
            const int32_t A = vaddvq_s32(acc[t]);
            L[t][b & 7] += (d * r.xd[t][b]) * (float)A - (dmin * r.xd[t][b]) * (float)B;
        }
    }
}

ALWAYS_INLINE void tile_q45_K(int hbits, const uint8_t *w, const ds4rt_act *a, int64_t t0, int T,
                              int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const size_t bsz = hbits ? 176 : 144;
    const uint8x16_t m4 = vdupq_n_u8(15), b4 = vdupq_n_u8(16);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const uint8_t *blk = w + b * bsz;
        const uint8_t *qs = blk + (hbits ? 48 : 16);
        uint8_t sm[16]; /* 8 scales, 8 mins */
        ds4rt_k4_unpack(blk + 4, sm);
        static const uint8_t dup_idx[16] = {8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15};
        const uint8x16_t mins = vqtbl1q_u8(vld1q_u8(sm), vld1q_u8(dup_idx)); /* each min per 16 */
        const uint8x16_t qh0 = hbits ? vld1q_u8(blk + 16) : vdupq_n_u8(0);
        const uint8x16_t qh1 = hbits ? vld1q_u8(blk + 32) : vdupq_n_u8(0);
        int32x4_t acc[TMAX];
        for (int t = 0; t < T; t++) acc[t] = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) {
            const uint8x16_t v0 = vld1q_u8(qs + 32 * c), v1 = vld1q_u8(qs + 32 * c + 16);
            uint8x16_t l0 = vandq_u8(v0, m4), l1 = vandq_u8(v1, m4);
            uint8x16_t h0 = vshrq_n_u8(v0, 4), h1 = vshrq_n_u8(v1, 4);
            if (hbits) {
                const uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * c))), bh = vdupq_n_u8((uint8_t)(2u << (2 * c)));
                l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(qh0, bl), b4));
                l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(qh1, bl), b4));
                h0 = vorrq_u8(h0, vandq_u8(vtstq_u8(qh0, bh), b4));
                h1 = vorrq_u8(h1, vandq_u8(vtstq_u8(qh1, bh), b4));
            }
            for (int t = 0; t < T; t++) {
                const int8_t *x = r.xq[t] + b * 256 + 64 * c;
                acc[t] = vmlaq_n_s32(acc[t], dot32(s8(l0), s8(l1), x), sm[2 * c]);
                acc[t] = vmlaq_n_s32(acc[t], dot32(s8(h0), s8(h1), x + 32), sm[2 * c + 1]);
            }
        }
        const float d = ds4rt_rd_f16(blk), dmin = ds4rt_rd_f16(blk + 2);
        for (int t = 0; t < T; t++) {
            const int32_t B = dot_mins16(mins, r.bs[t] + b * 16);
            const int32_t A = vaddvq_s32(acc[t]);
            L[t][b & 7] += (d * r.xd[t][b]) * (float)A - (dmin * r.xd[t][b]) * (float)B;
        }
    }
}

ALWAYS_INLINE void tile_q6_K(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const uint8x16_t m4 = vdupq_n_u8(15), m3 = vdupq_n_u8(3);
    const int8x16_t k32 = vdupq_n_s8(32);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q6_K *blk = (const ds4rt_block_q6_K *)(const void *)(w + b * 210);
        int32x4_t acc[TMAX];
        for (int t = 0; t < T; t++) acc[t] = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            uint8x16_t ql[4], qh[2];
            for (int i = 0; i < 4; i++) ql[i] = vld1q_u8(blk->ql + 64 * h + 16 * i);
            qh[0] = vld1q_u8(blk->qh + 32 * h);
            qh[1] = vld1q_u8(blk->qh + 32 * h + 16);
            for (int k = 0; k < 4; k++) {
                const int8x16_t shift = vdupq_n_s8((int8_t)(-2 * k));
                for (int half = 0; half < 2; half++) { /* elements 32k + 16*half .. +15 of this half */
                    const uint8x16_t l = ql[(k & 1) * 2 + half];
                    const uint8x16_t lo = k < 2 ? vandq_u8(l, m4) : vshrq_n_u8(l, 4);
                    const uint8x16_t hb = vandq_u8(vshlq_u8(qh[half], shift), m3);
                    const int8x16_t q = vsubq_s8(s8(vorrq_u8(lo, vshlq_n_u8(hb, 4))), k32);
                    const int32_t sc = blk->scales[8 * h + 2 * k + half];
                    for (int t = 0; t < T; t++) {
                        const int8_t *x = r.xq[t] + b * 256 + 128 * h + 32 * k + 16 * half;
                        acc[t] = vmlaq_n_s32(acc[t], dot16(vdupq_n_s32(0), q, vld1q_s8(x)), sc);
                    }
                }
            }
        }
        const float d = ds4rt_rd_f16(blk->d);
        for (int t = 0; t < T; t++) L[t][b & 7] += (d * r.xd[t][b]) * (float)vaddvq_s32(acc[t]);
    }
}

ALWAYS_INLINE int8x16_t grid16(uint8_t i0, uint8_t i1) {
    return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(ds4rt_iq2xxs_grid[i0]), vcreate_u64(ds4rt_iq2xxs_grid[i1])));
}
ALWAYS_INLINE int8x16_t signs16(uint32_t i0, uint32_t i1) { /* bytes of +1 / -1 */
    return vreinterpretq_s8_u64(
        vcombine_u64(vcreate_u64(ds4rt_ksigns_bytes[i0 & 127]), vcreate_u64(ds4rt_ksigns_bytes[i1 & 127])));
}

ALWAYS_INLINE void tile_iq2_xxs(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_iq2_xxs *blk = (const ds4rt_block_iq2_xxs *)(const void *)(w + b * 66);
        int32x4_t acc[TMAX];
        for (int t = 0; t < T; t++) acc[t] = vdupq_n_s32(0);
        for (int s = 0; s < 8; s++) {
            const uint8_t *p = blk->qs + 8 * s;
            const uint32_t aux = ds4rt_rd_u32(p + 4);
            const int8x16_t g0 = grid16(p[0], p[1]), g1 = grid16(p[2], p[3]);
            const int8x16_t s0 = signs16(aux, aux >> 7), s1 = signs16(aux >> 14, aux >> 21);
            const int32_t lsv = (int32_t)(2 * (aux >> 28) + 1);
            for (int t = 0; t < T; t++) {
                const int8_t *x = r.xq[t] + b * 256 + 32 * s;
                const int8x16_t x0 = vmulq_s8(vld1q_s8(x), s0), x1 = vmulq_s8(vld1q_s8(x + 16), s1);
                acc[t] = vmlaq_n_s32(acc[t], dot16(dot16(vdupq_n_s32(0), g0, x0), g1, x1), lsv);
            }
        }
        const float d = ds4rt_rd_f16(blk->d);
        for (int t = 0; t < T; t++)
            L[t][b & 7] += ((d * r.xd[t][b]) * (float)vaddvq_s32(acc[t])) * 0.125f;
    }
}

/* ================= dispatch on the tile size (kernels.h, DS4RT_DEF_DOT_DISPATCH) ================= */

#define C_Q8_0(T) tile_blk32(0, 34, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q4_0(T) tile_blk32(1, 18, w, a, t0, T, k0, k1, lanes, ls)
#define C_MXFP4(T) tile_blk32(2, 17, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q2_K(T) tile_q2_K(w, a, t0, T, k0, k1, lanes, ls)
#define C_Q4_K(T) tile_q45_K(0, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q5_K(T) tile_q45_K(1, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q6_K(T) tile_q6_K(w, a, t0, T, k0, k1, lanes, ls)
#define C_IQ2_XXS(T) tile_iq2_xxs(w, a, t0, T, k0, k1, lanes, ls)

DS4RT_DEF_DOTS()

const ds4rt_cpu_kernels NEON_TABLE = {
    .name = NEON_NAME,
    .dot = {
        [DS4RT_TYPE_F32] = dot_f32,
        [DS4RT_TYPE_F16] = dot_f16,
        [DS4RT_TYPE_BF16] = dot_bf16,
        [DS4RT_TYPE_Q8_0] = dot_q8_0,
        [DS4RT_TYPE_Q4_0] = dot_q4_0,
        [DS4RT_TYPE_MXFP4] = dot_mxfp4,
        [DS4RT_TYPE_Q2_K] = dot_q2_K,
        [DS4RT_TYPE_Q4_K] = dot_q4_K,
        [DS4RT_TYPE_Q5_K] = dot_q5_K,
        [DS4RT_TYPE_Q6_K] = dot_q6_K,
        [DS4RT_TYPE_IQ2_XXS] = dot_iq2_xxs,
    },
    .dot_q8_0_x8 = ds4rt_dot_q8_0_x8_portable,
    .rows_q8_0_r16 = ds4rt_rows_q8_0_r16_portable,
};
