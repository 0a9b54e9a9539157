/*
 * simd_avx2.h - AVX2 building blocks shared by kernels_avx2.c and kernels_avx512.c (included only
 * by files compiled with at least -mavx2 -mf16c).
 */
#ifndef DS4RT_SIMD_AVX2_H
#define DS4RT_SIMD_AVX2_H

#include <immintrin.h>

#include "kernels.h"
#include "quant_tables.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define TMAX DS4RT_TILE_TOK

/* One weight of a float row, for the scalar tails of the float kernels. */
static inline float scalar_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}
static inline float scalar_bf16(const uint8_t *p) { return ds4rt_bf16_to_f32(ds4rt_rd_u16(p)); }

/* f16 -> f32 with F16C: bitwise the same as ds4rt_f16_to_f32 (exact; NaNs quieted). */
ALWAYS_INLINE float f16c(const uint8_t *p) { return _cvtsh_ss(ds4rt_rd_u16(p)); }

ALWAYS_INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The lane sums of a and of b, with one shared reduction. */
ALWAYS_INLINE void hsum2_i32(__m256i a, __m256i b, int32_t *sa, int32_t *sb) {
    const __m256i h = _mm256_hadd_epi32(a, b); /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    s = _mm_hadd_epi32(s, s); /* A B A B */
    *sa = _mm_cvtsi128_si32(s);
    *sb = _mm_extract_epi32(s, 1);
}

/* 16 x i16 [m0 m0 m1 m1 ... m7 m7] from the 8 bytes at mins: each min once per 16 elements. */
ALWAYS_INLINE __m256i mins_pairs16(const uint8_t *mins) {
    const __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)mins);
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(v, dup));
}

/* The eight lane sums of s[0..7] as one vector [sum(s0), ..., sum(s7)] (exact integers). */
ALWAYS_INLINE __m256i hsum8x8(const __m256i s[8]) {
    const __m256i h01 = _mm256_hadd_epi32(s[0], s[1]), h23 = _mm256_hadd_epi32(s[2], s[3]);
    const __m256i h45 = _mm256_hadd_epi32(s[4], s[5]), h67 = _mm256_hadd_epi32(s[6], s[7]);
    const __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* sum of w*x over pairs of bytes -> 8 x i32; w any int8, x in [-127, 127]. */
ALWAYS_INLINE __m256i dot_i8(__m256i w, __m256i x) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* u8 q (< 64) times int8 x, pairs summed and scaled by the i16 lanes of sc -> 8 x i32. */
ALWAYS_INLINE __m256i dot_u8_scaled(__m256i q, __m256i x, __m256i sc) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), sc);
}

ALWAYS_INLINE __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 16 packed nibbles -> 32 bytes: low nibbles first, then high nibbles. */
ALWAYS_INLINE __m256i nibbles32(const uint8_t *q16) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q16);
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0f));
}

/* From 16 i16 scales, the vector [s[2g] x8 | s[2g+1] x8] (the scales of elements 32g..32g+31). */
ALWAYS_INLINE __m256i scale_pair(__m256i s16, int g) {
    const __m256i ctrl = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2,
                                          3, 2, 3, 2, 3, 2, 3);
    return _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(s16, _mm256_set1_epi32(g)), ctrl);
}

/* Block kinds of 32-element blocks: 0 = Q8_0 (34 B), 1 = Q4_0 (18 B), 2 = MXFP4 (17 B). */
ALWAYS_INLINE __m256 f16x8_strided(const uint8_t *p, size_t stride) {
    const __m128i h = _mm_setr_epi16(
        (short)ds4rt_rd_u16(p), (short)ds4rt_rd_u16(p + stride), (short)ds4rt_rd_u16(p + 2 * stride),
        (short)ds4rt_rd_u16(p + 3 * stride), (short)ds4rt_rd_u16(p + 4 * stride), (short)ds4rt_rd_u16(p + 5 * stride),
        (short)ds4rt_rd_u16(p + 6 * stride), (short)ds4rt_rd_u16(p + 7 * stride));
    return _mm256_cvtph_ps(h);
}

/* The signed int8 weights of one block. */
ALWAYS_INLINE __m256i decode_blk32(int kind, const uint8_t *blk) {
    if (kind == 0) return loadu(blk + 2);
    if (kind == 1) return _mm256_sub_epi8(nibbles32(blk + 2), _mm256_set1_epi8(8));
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)ds4rt_mxfp4_values));
    return _mm256_shuffle_epi8(table, nibbles32(blk + 1));
}

ALWAYS_INLINE float scale_blk32(int kind, const uint8_t *blk) {
    return kind == 2 ? ds4rt_e8m0_half(blk[0]) : f16c(blk);
}

/* The f32 scales of 8 consecutive blocks of `bsz` bytes. */
ALWAYS_INLINE __m256 scales8_blk32(int kind, const uint8_t *wb, size_t bsz) {
    if (kind != 2) return f16x8_strided(wb, bsz);
    float e[8];
    for (int k = 0; k < 8; k++) e[k] = ds4rt_e8m0_half(wb[k * bsz]);
    return _mm256_loadu_ps(e);
}

/* The activation rows of a token tile, for 256-element block kernels. */
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

ALWAYS_INLINE __m256i bsums16(const qk_rows *r, int t, int64_t b) { return loadu(r->bs[t] + b * 16); }

/* ================= whole-row kernels (kernels.h, ds4rt_rows_fn) ================= */

/* ds4rt_reduce8 of four 8-lane accumulators at once, the same additions in the same pairs:
 * [reduce8(a), reduce8(b), reduce8(c), reduce8(d)]. */
ALWAYS_INLINE __m128 reduce8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
    /* h = [l0+l4, l1+l5, l2+l6, l3+l7] */
    const __m128 ha = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 hb = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    const __m128 hc = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
    const __m128 hd = _mm_add_ps(_mm256_castps256_ps128(d), _mm256_extractf128_ps(d, 1));
    /* p = [a0+a2, b0+b2, a1+a3, b1+b3] of the h's, q likewise for c and d */
    const __m128 p = _mm_add_ps(_mm_unpacklo_ps(ha, hb), _mm_unpackhi_ps(ha, hb));
    const __m128 q = _mm_add_ps(_mm_unpacklo_ps(hc, hd), _mm_unpackhi_ps(hc, hd));
    return _mm_add_ps(_mm_movelh_ps(p, q), _mm_movehl_ps(q, p));
}

/* The body of a whole-row kernel with arguments (w, rb, nr, a, t0, nt, y, ys), around its tile
 * TILE(first row, byte step between its rows, R, first token, T, first y, y step between its
 * rows): R rows x T tokens with their lanes in registers, R * T <= 4.
 * One or two tokens: tiles of 4 or 2 rows, so that the dependency chains of a tile overlap;
 * the rows of a tile are nr / R apart, so each of them walks its own long run of consecutive
 * rows, which the hardware prefetchers follow (4 adjacent rows per tile made 4 runs of a few
 * cache lines each, and decoding with the weights out of cache ran 1.7x slower).
 * Three or more: one row at a time, the tokens in even tiles of 2 to 4 (never 1), while the
 * row stays in L1. */
#define ROWS_LOOP(TILE)                                                                               \
    if (nt <= 2) {                                                                                    \
        const int64_t q = nr / (nt == 1 ? 4 : 2);                                                     \
        for (int64_t i = 0; i < q; i++) {                                                             \
            if (nt == 1)                                                                              \
                TILE(w + i * rb, q * rb, 4, t0, 1, y + i, q);                                         \
            else                                                                                      \
                TILE(w + i * rb, q * rb, 2, t0, 2, y + i, q);                                         \
        }                                                                                             \
        for (int64_t r = q * (nt == 1 ? 4 : 2); r < nr; r++) {                                        \
            if (nt == 1)                                                                              \
                TILE(w + r * rb, rb, 1, t0, 1, y + r, 1);                                             \
            else                                                                                      \
                TILE(w + r * rb, rb, 1, t0, 2, y + r, 1);                                             \
        }                                                                                             \
    } else {                                                                                          \
        const int64_t tiles = (nt + 3) / 4;                                                           \
        for (int64_t r = 0; r < nr; r++) {                                                            \
            int64_t t = 0;                                                                            \
            for (int64_t k = 0; k < tiles; k++) {                                                     \
                const int64_t T = (nt - t + (tiles - k) - 1) / (tiles - k);                           \
                float *yt = y + t * ys + r;                                                           \
                switch (T) {                                                                          \
                case 2: TILE(w + r * rb, rb, 1, t0 + t, 2, yt, 1); break;                             \
                case 3: TILE(w + r * rb, rb, 1, t0 + t, 3, yt, 1); break;                             \
                default: TILE(w + r * rb, rb, 1, t0 + t, 4, yt, 1); break;                            \
                }                                                                                     \
                t += T;                                                                               \
            }                                                                                         \
        }                                                                                             \
    }

/* Writes the R x T results res = [the reduction of tile (r, t) at r * T + t] to
 * y[t * ys + r * yrs]. */
ALWAYS_INLINE void rows_store(__m128 res, const int R, const int T, float *y, int64_t ys, int64_t yrs) {
    float o[4];
    _mm_storeu_ps(o, res);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) y[t * ys + r * yrs] = o[r * T + t];
}

#endif /* DS4RT_SIMD_AVX2_H */
