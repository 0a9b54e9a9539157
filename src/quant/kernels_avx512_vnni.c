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
 *
 * Short rows (up to 384 columns) are held in the R16 layout instead, 16 rows per panel with a
 * row in each lane (below): the same integer sums and terms, but the per-result work after the
 * dot products (scales, conversion, the 8-lane reduction) runs once per 16 rows.
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

/* ---- Q8_0 rows in the R16 layout (repack.h) -------------------------------------------------- */

ALWAYS_INLINE int32_t load_i32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The f32 terms of block b for P panels (records ps bytes apart from rec) x T tokens (P * T <=
 * 4): each 64-byte load holds 4 quants of the block of 16 rows, one per 32-bit lane, and
 * vpdpbusd with the token's 4 quants broadcast adds their products to each row's lane; the
 * token's bias sum (-128 x its quant sum) starts the first chain, so each lane ends with the
 * row's exact block sum. Then (d_w * d_x) * sum per row, as every path forms the term. One
 * result alone runs 4 chains, more run 2 each, so the instruction's latency is covered. xoff and
 * ks locate the block's quants in the X8 activation (ks 32 in a group, 16 in a half group). */
ALWAYS_INLINE void r16_terms(const uint8_t *rec, int64_t ps, const int P, const int8_t *const *xq, int64_t xoff,
                             const int ks, const float *const *xd, const int32_t *const *xb, int64_t b, const int T,
                             __m512 *term) {
    const int C = P * T == 1 ? 4 : 2;
    __m512i s[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < P * T; i++) {
        s[i][0] = _mm512_set1_epi32(xb[i % T][b]);
#pragma GCC unroll 4
        for (int c = 1; c < C; c++) s[i][c] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
#pragma GCC unroll 4
        for (int p = 0; p < P; p++) {
            const __m512i wv = _mm512_loadu_si512((const void *)(rec + p * ps + 32 + 64 * k));
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                s[p * T + t][k % C] = _mm512_dpbusd_epi32(s[p * T + t][k % C], wv,
                                                          _mm512_set1_epi32(load_i32(xq[t] + xoff + ks * k)));
        }
#pragma GCC unroll 4
    for (int p = 0; p < P; p++) {
        const __m512 wd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(rec + p * ps)));
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m512i *si = s[p * T + t];
            const __m512i sum = C == 4 ? _mm512_add_epi32(_mm512_add_epi32(si[0], si[1]), _mm512_add_epi32(si[2], si[3]))
                                       : _mm512_add_epi32(si[0], si[1]);
            term[p * T + t] = _mm512_mul_ps(_mm512_mul_ps(wd, _mm512_set1_ps(xd[t][b])), _mm512_cvtepi32_ps(sum));
        }
    }
}

/* Lane j (blocks j, j + 8, ...; j < 4 also the half group's) of 16 rows per panel: its terms in
 * block order, from +0. */
ALWAYS_INLINE void r16_lane(const uint8_t *w, int64_t ps, const int P, int64_t groups, int half, int j,
                            const int8_t *const *xq, const float *const *xd, const int32_t *const *xb, const int T,
                            __m512 *L) {
    __m512 term[4];
#pragma GCC unroll 4
    for (int i = 0; i < P * T; i++) L[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        r16_terms(w + ds4rt_r16_record(g, j, 0), ps, P, xq, g * DS4RT_X8_GROUP_COLS + 4 * j, 32, xd, xb, 8 * g + j, T,
                  term);
#pragma GCC unroll 4
        for (int i = 0; i < P * T; i++) L[i] = _mm512_add_ps(L[i], term[i]);
    }
    if (half && j < 4) {
        r16_terms(w + ds4rt_r16_record(groups, j, 1), ps, P, xq, groups * DS4RT_X8_GROUP_COLS + 4 * j, 16, xd, xb,
                  8 * groups + j, T, term);
#pragma GCC unroll 4
        for (int i = 0; i < P * T; i++) L[i] = _mm512_add_ps(L[i], term[i]);
    }
}

/* y of P panels (ps bytes apart, their results yp floats apart) x T tokens: the lanes in
 * ds4rt_reduce8's order, ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), each addition
 * across 16 rows at once. */
ALWAYS_INLINE void r16_tile(const uint8_t *w, int64_t ps, const int P, int64_t groups, int half, const ds4rt_act *a,
                            int64_t t0, const int T, float *y, int64_t ys, int64_t yp) {
    const int8_t *xq[4];
    const float *xd[4];
    const int32_t *xb[4];
    x8_token_rows(a, t0, T, xq, xd, xb);
    __m512 A[4], B[4], C[4], L[4];
    r16_lane(w, ps, P, groups, half, 0, xq, xd, xb, T, A);
    r16_lane(w, ps, P, groups, half, 4, xq, xd, xb, T, L);
#pragma GCC unroll 4
    for (int i = 0; i < P * T; i++) A[i] = _mm512_add_ps(A[i], L[i]);
    r16_lane(w, ps, P, groups, half, 2, xq, xd, xb, T, B);
    r16_lane(w, ps, P, groups, half, 6, xq, xd, xb, T, L);
#pragma GCC unroll 4
    for (int i = 0; i < P * T; i++) A[i] = _mm512_add_ps(A[i], _mm512_add_ps(B[i], L[i]));
    r16_lane(w, ps, P, groups, half, 1, xq, xd, xb, T, B);
    r16_lane(w, ps, P, groups, half, 5, xq, xd, xb, T, L);
#pragma GCC unroll 4
    for (int i = 0; i < P * T; i++) B[i] = _mm512_add_ps(B[i], L[i]);
    r16_lane(w, ps, P, groups, half, 3, xq, xd, xb, T, C);
    r16_lane(w, ps, P, groups, half, 7, xq, xd, xb, T, L);
#pragma GCC unroll 4
    for (int p = 0; p < P; p++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const int i = p * T + t;
            B[i] = _mm512_add_ps(B[i], _mm512_add_ps(C[i], L[i]));
            _mm512_storeu_ps(y + t * ys + p * yp, _mm512_add_ps(A[i], B[i]));
        }
}

/* Whole R16 rows (kernels.h). One token: 4 panels a quarter of the rows apart, so that 4
 * independent results share each block's steps and the weights come in 4 long runs, which the
 * hardware prefetchers follow (4 adjacent panels, one run, read a 1 MB matrix a third slower);
 * two tokens: 2 panels half the rows apart (the 1 MB output head at 2 tokens 48 -> 33 us). More
 * tokens: a panel at a time, the tokens in even tiles of up to 4. */
void ds4rt_rows_q8_0_r16_vnni(const uint8_t *w, uint64_t rb, int64_t nr, const ds4rt_act *a, int64_t t0, int64_t nt,
                              float *y, int64_t ys) {
    const int64_t groups = a->cols / DS4RT_X8_GROUP_COLS, ps = DS4RT_R16_ROWS * (int64_t)rb, np = nr / DS4RT_R16_ROWS;
    const int half = a->cols % DS4RT_X8_GROUP_COLS != 0;
    int64_t p = 0;
    if (nt == 1) {
        const int64_t q = np / 4;
        for (; p < q; p++)
            r16_tile(w + p * ps, q * ps, 4, groups, half, a, t0, 1, y + p * DS4RT_R16_ROWS, ys, q * DS4RT_R16_ROWS);
        p = 4 * q;
    } else if (nt == 2) {
        const int64_t q = np / 2;
        for (; p < q; p++)
            r16_tile(w + p * ps, q * ps, 2, groups, half, a, t0, 2, y + p * DS4RT_R16_ROWS, ys, q * DS4RT_R16_ROWS);
        p = 2 * q;
    }
    const int64_t tiles = (nt + 3) / 4;
    for (; p < np; p++) {
        const uint8_t *wp = w + p * ps;
        float *yp = y + p * DS4RT_R16_ROWS;
        for (int64_t i = 0, t = 0; i < tiles; i++) {
            const int T = (int)((nt - t) / (tiles - i)); /* even tiles: 5 = 2 + 3, 6 = 3 + 3 */
            switch (T) {
            case 1: r16_tile(wp, ps, 1, groups, half, a, t0 + t, 1, yp + t * ys, ys, 0); break;
            case 2: r16_tile(wp, ps, 1, groups, half, a, t0 + t, 2, yp + t * ys, ys, 0); break;
            case 3: r16_tile(wp, ps, 1, groups, half, a, t0 + t, 3, yp + t * ys, ys, 0); break;
            default: r16_tile(wp, ps, 1, groups, half, a, t0 + t, 4, yp + t * ys, ys, 0); break;
            }
            t += T;
        }
    }
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
