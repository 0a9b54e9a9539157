/*
 * kernels_avx512_vnni.c - the Q8_0 product for X8-layout weights (repack.h) with AVX-512 VNNI
 * (vpdpbusd on 256-bit registers, AVX-512 VL); compiled with -mavx512vnni on its own and used
 * only on CPUs that have it (cpu_isa.c, path "avx512-vnni").
 *
 * A 256-column group is 8 blocks. Load k (32 bytes) of the weights holds quants 4k..4k+3 of
 * each of the 8 blocks, biased to unsigned bytes; the activation row is interleaved the same
 * way, so vpdpbusd adds 4 products per 32-bit lane and after the 8 loads lane j holds block
 * j's integer sum plus 128 times its activation sum, which the activation's stored correction
 * (-128 * sum) takes back out: exactly the file layout's integer sums (docs/QUANTS.md, "The Q8_0
 * X8 layout"). Then the f32 term of block j, (d_w * d_x) * sum, goes to lane j as in every
 * other path, so the result is bitwise theirs. Per block and token that is one dot-product
 * instruction per 4 bytes instead of sign fix-up, byte and word multiply-adds and a horizontal
 * sum of 8 lanes.
 */
#include <string.h>

#include "repack.h"
#include "simd_avx2.h"

ALWAYS_INLINE __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* The terms of the half group that ends a row of 256 G + 128 columns (repack.h), for lanes
 * 0..3: the same sums with 128-bit dot products; wg and xg point at the half group, xd and xb
 * at its 4 blocks' activation scales and corrections. */
ALWAYS_INLINE __m128 half_x8(const uint8_t *wg, const int8_t *xg, const float *xd, const int32_t *xb) {
    const __m128 wd = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)wg));
    __m128i s0 = _mm_loadu_si128((const __m128i *)(const void *)xb), s1 = _mm_setzero_si128();
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
        s0 = _mm_dpbusd_epi32(s0, _mm_loadu_si128((const __m128i *)(const void *)(wg + 8 + 16 * k)),
                              _mm_loadu_si128((const __m128i *)(const void *)(xg + 16 * k)));
        s1 = _mm_dpbusd_epi32(s1, _mm_loadu_si128((const __m128i *)(const void *)(wg + 24 + 16 * k)),
                              _mm_loadu_si128((const __m128i *)(const void *)(xg + 16 * k + 16)));
    }
    return _mm_mul_ps(_mm_mul_ps(wd, _mm_loadu_ps(xd)), _mm_cvtepi32_ps(_mm_add_epi32(s0, s1)));
}

/* acc + the half group's terms in lanes 0..3; lanes 4..7 untouched. */
ALWAYS_INLINE __m256 add_half(__m256 acc, __m128 terms) {
    return _mm256_mask_add_ps(acc, 0x0f, acc, _mm256_castps128_ps256(terms));
}

/* The activation rows of T tokens (1..4) that an X8 kernel reads: quants, block scales and the
 * X8 bias sums. */
ALWAYS_INLINE void x8_token_rows(const ds4rt_act *a, int64_t t0, const int T, const int8_t **xq, const float **xd,
                                 const int32_t **xb) {
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        xq[t] = ds4rt_act_qs(a, t0 + t);
        xd[t] = ds4rt_act_d(a, t0 + t);
        xb[t] = ds4rt_act_sum32(a, t0 + t);
    }
}

/* T tokens (1..4, a constant after inlining): each token's 8 dot products in two independent
 * chains, so that the instruction's latency does not serialise one token's group. The loops
 * over tokens are unrolled whatever the optimisation level: their arrays must stay in
 * registers (at -O2 GCC kept them in memory and the kernel ran at half speed for 4 tokens). */
ALWAYS_INLINE void tile_x8(const uint8_t *w, const ds4rt_act *a, int64_t t0, const int T, int64_t k0, int64_t k1,
                           float *lanes, int64_t ls) {
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xb[4];
    __m256 acc[4];
    x8_token_rows(a, t0, T, xq, xd, xb);
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm256_loadu_ps(lanes + t * ls);
    for (int64_t g = k0 / DS4RT_X8_GROUP_COLS; g < k1 / DS4RT_X8_GROUP_COLS; g++) {
        const uint8_t *wg = w + g * DS4RT_X8_GROUP_BYTES;
        const __m256 wd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)wg));
        __m256i s0[4], s1[4];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            s0[t] = load256(xb[t] + 8 * g);
            s1[t] = _mm256_setzero_si256();
        }
#pragma GCC unroll 4
        for (int k = 0; k < 8; k += 2) {
            const __m256i w0 = load256(wg + 16 + 32 * k), w1 = load256(wg + 48 + 32 * k);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const int8_t *x = xq[t] + g * DS4RT_X8_GROUP_COLS + 32 * k;
                s0[t] = _mm256_dpbusd_epi32(s0[t], w0, load256(x));
                s1[t] = _mm256_dpbusd_epi32(s1[t], w1, load256(x + 32));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256 ds = _mm256_mul_ps(wd, _mm256_loadu_ps(xd[t] + 8 * g));
            const __m256 s = _mm256_cvtepi32_ps(_mm256_add_epi32(s0[t], s1[t]));
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(ds, s));
        }
    }
    if (k1 % DS4RT_X8_GROUP_COLS != 0) { /* k1 = cols: the half group */
        const int64_t g = k1 / DS4RT_X8_GROUP_COLS;
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc[t] = add_half(acc[t], half_x8(w + g * DS4RT_X8_GROUP_BYTES, xq[t] + g * DS4RT_X8_GROUP_COLS,
                                              xd[t] + 8 * g, xb[t] + 8 * g));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++) _mm256_storeu_ps(lanes + t * ls, acc[t]);
}

void ds4rt_dot_q8_0_x8_vnni(const uint8_t *w, const ds4rt_act *a, int64_t t0, int n, int64_t k0, int64_t k1,
                            float *lanes, int64_t ls) {
    switch (n) {
    case 1: tile_x8(w, a, t0, 1, k0, k1, lanes, ls); break;
    case 2: tile_x8(w, a, t0, 2, k0, k1, lanes, ls); break;
    case 3: tile_x8(w, a, t0, 3, k0, k1, lanes, ls); break;
    default: tile_x8(w, a, t0, 4, k0, k1, lanes, ls); break;
    }
}

/* Whole X8 rows (kernels.h, ds4rt_rows_fn): R rows rs bytes apart x T tokens (R * T <= 4,
 * constants after inlining) over all `groups` groups, the same sums as tile_x8 with the lanes kept in
 * registers from +0, then reduced in the fixed order straight into y. */
ALWAYS_INLINE void rows_tile_x8(const uint8_t *w, int64_t rs, const int R, const ds4rt_act *a, int64_t t0,
                                const int T, int64_t groups, float *y, int64_t ys, int64_t yrs) {
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xb[4];
    __m256 acc[4];
    x8_token_rows(a, t0, T, xq, xd, xb);
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) acc[i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        __m256 wd[4];
        __m256i s0[4], s1[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            wd[r] = _mm256_cvtph_ps(
                _mm_loadu_si128((const __m128i *)(const void *)(w + r * rs + g * DS4RT_X8_GROUP_BYTES)));
#pragma GCC unroll 4
        for (int i = 0; i < R * T; i++) {
            s0[i] = load256(xb[i % T] + 8 * g);
            s1[i] = _mm256_setzero_si256();
        }
#pragma GCC unroll 4
        for (int k = 0; k < 8; k += 2) {
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const uint8_t *wg = w + r * rs + g * DS4RT_X8_GROUP_BYTES;
                const __m256i w0 = load256(wg + 16 + 32 * k), w1 = load256(wg + 48 + 32 * k);
#pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    const int8_t *x = xq[t] + g * DS4RT_X8_GROUP_COLS + 32 * k;
                    s0[r * T + t] = _mm256_dpbusd_epi32(s0[r * T + t], w0, load256(x));
                    s1[r * T + t] = _mm256_dpbusd_epi32(s1[r * T + t], w1, load256(x + 32));
                }
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const __m256 ds = _mm256_mul_ps(wd[r], _mm256_loadu_ps(xd[t] + 8 * g));
                const __m256 sum = _mm256_cvtepi32_ps(_mm256_add_epi32(s0[r * T + t], s1[r * T + t]));
                acc[r * T + t] = _mm256_add_ps(acc[r * T + t], _mm256_mul_ps(ds, sum));
            }
    }
    if (a->cols % DS4RT_X8_GROUP_COLS != 0) {
        const int64_t g = groups;
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[r * T + t] = add_half(acc[r * T + t], half_x8(w + r * rs + g * DS4RT_X8_GROUP_BYTES,
                                                                  xq[t] + g * DS4RT_X8_GROUP_COLS, xd[t] + 8 * g,
                                                                  xb[t] + 8 * g));
    }
    rows_store(reduce8x4(acc[0], acc[1], acc[2], acc[3]), R, T, y, ys, yrs);
}

#define TILE_X8(wr, rs, R, t, T, yr, yrs) rows_tile_x8(wr, (int64_t)(rs), R, a, t, T, groups, yr, ys, yrs)

void ds4rt_rows_q8_0_x8_vnni(const uint8_t *w, uint64_t rb, int64_t nr, const ds4rt_act *a, int64_t t0, int64_t nt,
                             float *y, int64_t ys) {
    const int64_t groups = a->cols / DS4RT_X8_GROUP_COLS;
    ROWS_LOOP(TILE_X8);
}

/* ---- Q8_0 rows in the file layout ------------------------------------------------------------ */

/* The exact integer sums of block b of 8 rows (row i at row[i]) with the quants x of one token:
 * the weights biased to unsigned bytes (w ^ 0x80 = w + 128) so that vpdpbusd multiplies them,
 * and 128 times the block's activation sum (xs) taken back out. */
ALWAYS_INLINE __m256i isums8_q8_0(const uint8_t *const *row, int64_t b, const int8_t *x, int32_t xs) {
    const __m256i bias = _mm256_set1_epi8((char)0x80), xv = load256(x);
    __m256i v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        v[i] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_xor_si256(load256(row[i] + b * 34 + 2), bias), xv);
    /* 8 x 8 lanes -> the 8 rows' sums (128-bit half h of u0 = rows 0..3's sums of their half h) */
    __m256i t[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        t[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    const __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi64(t[0], t[1]), _mm256_unpackhi_epi64(t[0], t[1]));
    const __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi64(t[2], t[3]), _mm256_unpackhi_epi64(t[2], t[3]));
    const __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
    return _mm256_sub_epi32(s, _mm256_set1_epi32(128 * xs));
}

/* The f16 scales of block b of 8 rows, as f32. */
ALWAYS_INLINE __m256 scales8_q8_0(const uint8_t *const *row, int64_t b) {
    uint16_t h[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) memcpy(&h[i], row[i] + b * 34, 2);
    return _mm256_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], (short)h[4],
                                          (short)h[5], (short)h[6], (short)h[7]));
}

/* Whole Q8_0 rows of the file layout (kernels.h, ds4rt_rows_fn), 8 rows at a time with a row in
 * each vector lane: lane set L[j] of the 8 rows gets the term (d_w * d_x) * sum of every block
 * b with b % 8 == j, in block order from +0, and y = ds4rt_reduce8 of the lane sets, as in every
 * other path. Rows of short columns (the DSpark Markov head's 64) cost a dot-kernel call each
 * through the product driver; here a block of 8 rows is a few instructions. A last partial
 * tile repeats its last row in the spare lanes and stores only its own rows. */
void ds4rt_rows_q8_0_vnni(const uint8_t *w, uint64_t rb, int64_t nr, const ds4rt_act *a, int64_t t0, int64_t nt,
                          float *y, int64_t ys) {
    const int64_t nb = a->cols / 32;
    for (int64_t r0 = 0; r0 < nr; r0 += 8) {
        const int m = nr - r0 < 8 ? (int)(nr - r0) : 8;
        const uint8_t *row[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) row[i] = w + (size_t)(r0 + (i < m ? i : m - 1)) * rb;
        for (int64_t t = t0; t < t0 + nt; t++) {
            const int8_t *xq = ds4rt_act_qs(a, t);
            const float *xd = ds4rt_act_d(a, t);
            const int32_t *xs = ds4rt_act_sum32(a, t);
            __m256 L[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) L[j] = _mm256_setzero_ps();
            for (int64_t b8 = 0; b8 < nb; b8 += 8) {
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    const int64_t b = b8 + j;
                    if (b < nb) {
                        const __m256 ds = _mm256_mul_ps(scales8_q8_0(row, b), _mm256_set1_ps(xd[b]));
                        const __m256i is = isums8_q8_0(row, b, xq + b * 32, xs[b]);
                        L[j] = _mm256_add_ps(L[j], _mm256_mul_ps(ds, _mm256_cvtepi32_ps(is)));
                    }
                }
            }
            const __m256 res = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(L[0], L[4]), _mm256_add_ps(L[2], L[6])),
                                             _mm256_add_ps(_mm256_add_ps(L[1], L[5]), _mm256_add_ps(L[3], L[7])));
            _mm256_mask_storeu_ps(y + (t - t0) * ys + r0, (__mmask8)((1u << m) - 1u), res);
        }
    }
}
