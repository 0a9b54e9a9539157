/*
 * kernels_avx512.c - AVX-512 (F, BW, VL) dot-product kernels; compiled with -mavx512f -mavx512bw
 * -mavx512vl (plus the AVX2/F16C flags) and used only when the CPU has them (cpu_isa.c).
 *
 * 64 weights per register; the same exact integer sums and the same f32 formulas and lane order
 * as kernels_scalar.c, so results are bitwise those of every other path. AVX-512BW has no byte
 * sign instruction: signs are applied with a byte mask (x negated where the mask bit is set).
 */
#include <pthread.h>

#include "kernels_avx2_tiles.h"
#include "repack.h"

ALWAYS_INLINE __m512i loadu512(const void *p) { return _mm512_loadu_si512(p); }

ALWAYS_INLINE __m512i join256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* w any int8, x in [-127, 127]: pairs of w*x summed -> 16 x i32. */
ALWAYS_INLINE __m512i dot_i8_512(__m512i w, __m512i x) {
    const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), _mm512_set1_epi16(1));
}

/* The 16 i32 lanes of v folded to 8 (exact integer sums). */
ALWAYS_INLINE __m256i fold256(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

ALWAYS_INLINE __m512i dot_u8_scaled_512(__m512i q, __m512i x, __m512i sc) {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(q, x), sc);
}

/* z_i = [block 2i (8 x i32) | block 2i+1 (8 x i32)] -> [sum block 0, ..., sum block 7]. */
ALWAYS_INLINE __m256i hsum8x8_512(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
    /* 128-bit lane L of u = [sum of lane L of z0, z1, z2, z3] */
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    const __m512i p = _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(3, 1, 2, 0)); /* lanes L0 L2 L1 L3 */
    const __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
    /* s = [S0 S2 S4 S6 S1 S3 S5 S7] */
    return _mm256_permutevar8x32_epi32(s, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* ================= float weights: acc[i % 32] += w_i * x_i ================= */

ALWAYS_INLINE __m512 load16_f32(const uint8_t *p) { return _mm512_loadu_ps(p); }
ALWAYS_INLINE __m512 load16_f16(const uint8_t *p) { return _mm512_cvtph_ps(loadu(p)); }
ALWAYS_INLINE __m512 load16_bf16(const uint8_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(loadu(p)), 16));
}

#define DEF_FLOAT_DOT(name, ESZ, LOADW, SCALARW)                                                     \
    static void dot_##name(const uint8_t *w, const ds4rt_act *a, int64_t t0, int n_tok, int64_t k0,  \
                           int64_t k1, float *lanes, int64_t ls) {                                   \
        const int64_t n32 = k0 + ((k1 - k0) & ~(int64_t)31);                                         \
        for (int t = 0; t < n_tok; t++) {                                                            \
            const float *x = ds4rt_act_f32(a, t0 + t);                                               \
            float *acc = lanes + t * ls;                                                             \
            __m512 c0 = _mm512_loadu_ps(acc), c1 = _mm512_loadu_ps(acc + 16);                        \
            for (int64_t i = k0; i < n32; i += 32) {                                                  \
                c0 = _mm512_add_ps(c0, _mm512_mul_ps(LOADW(w + ESZ * i), _mm512_loadu_ps(x + i)));     \
                c1 = _mm512_add_ps(c1, _mm512_mul_ps(LOADW(w + ESZ * (i + 16)), _mm512_loadu_ps(x + i + 16))); \
            }                                                                                        \
            _mm512_storeu_ps(acc, c0);                                                               \
            _mm512_storeu_ps(acc + 16, c1);                                                          \
            for (int64_t i = n32; i < k1; i++) acc[i & 31] += SCALARW(w + ESZ * i) * x[i];            \
        }                                                                                            \
    }

DEF_FLOAT_DOT(f32, 4, load16_f32, scalar_f32)
DEF_FLOAT_DOT(f16, 2, load16_f16, ds4rt_rd_f16)
DEF_FLOAT_DOT(bf16, 2, load16_bf16, scalar_bf16)

/* Whole float rows (kernels.h, ds4rt_rows_fn; cols a multiple of 32): R rows rs bytes apart
 * x T tokens (R * T <= 4) with the 32 lanes of each in two registers from +0, so a weight vector is
 * converted once for T tokens and R * T * 2 addition chains overlap; then ds4rt_reduce32's
 * additions: lanes k, k+8, k+16, k+24 to 8 lanes, and those by reduce8x4.
 * kind: 0 = F32, 1 = F16, 2 = BF16. */
ALWAYS_INLINE __m512 load16_w(int kind, const uint8_t *p) {
    return kind == 0 ? load16_f32(p) : kind == 1 ? load16_f16(p) : load16_bf16(p);
}

ALWAYS_INLINE __m256 hi256_ps(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

ALWAYS_INLINE void rows_tile_float(int kind, const uint8_t *w, int64_t rs, const int R, const ds4rt_act *a,
                                   int64_t t0, const int T, float *y, int64_t ys, int64_t yrs) {
    const int64_t esz = kind == 0 ? 4 : 2, cols = a->cols;
    const float *x[8];
    __m512 c0[8], c1[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) x[t] = ds4rt_act_f32(a, t0 + t);
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) c0[i] = c1[i] = _mm512_setzero_ps();
    for (int64_t i = 0; i < cols; i += 32) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 w0 = load16_w(kind, w + r * rs + esz * i), w1 = load16_w(kind, w + r * rs + esz * (i + 16));
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                c0[r * T + t] = _mm512_add_ps(c0[r * T + t], _mm512_mul_ps(w0, _mm512_loadu_ps(x[t] + i)));
                c1[r * T + t] = _mm512_add_ps(c1[r * T + t], _mm512_mul_ps(w1, _mm512_loadu_ps(x[t] + i + 16)));
            }
        }
    }
    __m256 v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        v[i] = _mm256_add_ps(_mm256_add_ps(_mm512_castps512_ps256(c0[i]), hi256_ps(c0[i])),
                             _mm256_add_ps(_mm512_castps512_ps256(c1[i]), hi256_ps(c1[i])));
    if (R * T <= 4) {
        rows_store(reduce8x4(v[0], v[1], v[2], v[3]), R, T, y, ys, yrs);
        return;
    }
    /* one row, T tokens: results t at y[t * ys] */
    float o[8];
    _mm_storeu_ps(o, reduce8x4(v[0], v[1], v[2], v[3]));
    _mm_storeu_ps(o + 4, reduce8x4(v[4], v[5], v[6], v[7]));
#pragma GCC unroll 8
    for (int t = 0; t < T; t++) y[t * ys] = o[t];
}

/* Five or more tokens: one row at a time with all of them (tiles of up to 8), so that a row's
 * weights are converted once for 5 to 8 tokens rather than once per tile of 3 or 4. */
#define DEF_FLOAT_ROWS(name)                                                                         \
    static void rows_##name(const uint8_t *w, uint64_t rb, int64_t nr, const ds4rt_act *a, int64_t t0, \
                            int64_t nt, float *y, int64_t ys) {                                      \
        if (nt < 5) {                                                                                \
            ROWS_LOOP(TILE_##name);                                                                  \
            return;                                                                                  \
        }                                                                                            \
        const int64_t tiles = (nt + 7) / 8;                                                          \
        for (int64_t r = 0; r < nr; r++) {                                                           \
            int64_t t = 0;                                                                           \
            for (int64_t k = 0; k < tiles; k++) {                                                    \
                const int64_t T = (nt - t + (tiles - k) - 1) / (tiles - k);                          \
                float *yt = y + t * ys + r;                                                          \
                switch (T) { /* 4 (9 tokens: 5 + 4) to 8 */                                         \
                case 4: TILE_##name(w + r * rb, rb, 1, t0 + t, 4, yt, 1); break;                     \
                case 5: TILE_##name(w + r * rb, rb, 1, t0 + t, 5, yt, 1); break;                     \
                case 6: TILE_##name(w + r * rb, rb, 1, t0 + t, 6, yt, 1); break;                     \
                case 7: TILE_##name(w + r * rb, rb, 1, t0 + t, 7, yt, 1); break;                     \
                default: TILE_##name(w + r * rb, rb, 1, t0 + t, 8, yt, 1); break;                    \
                }                                                                                    \
                t += T;                                                                              \
            }                                                                                        \
        }                                                                                            \
    }
#define TILE_f32(wr, rs, R, t, T, yr, yrs) rows_tile_float(0, wr, (int64_t)(rs), R, a, t, T, yr, ys, yrs)
#define TILE_f16(wr, rs, R, t, T, yr, yrs) rows_tile_float(1, wr, (int64_t)(rs), R, a, t, T, yr, ys, yrs)
#define TILE_bf16(wr, rs, R, t, T, yr, yrs) rows_tile_float(2, wr, (int64_t)(rs), R, a, t, T, yr, ys, yrs)
DEF_FLOAT_ROWS(f32)
DEF_FLOAT_ROWS(f16)
DEF_FLOAT_ROWS(bf16)

/* ================= 32-element blocks, Q8_0 activations ================= */

ALWAYS_INLINE void tile_blk32(int kind, size_t bsz, const uint8_t *w, const ds4rt_act *a, int64_t t0, int T,
                              int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    /* k0 is a multiple of 256: vector lane j holds the blocks b with b % 8 == j */
    const int64_t b0 = k0 / 32, nb = k1 / 32, nb8 = b0 + ((nb - b0) & ~(int64_t)7);
    const int8_t *xq[TMAX];
    const float *xd[TMAX];
    float *L[TMAX];
    __m256 acc[TMAX];
    for (int t = 0; t < T; t++) {
        xq[t] = ds4rt_act_qs(a, t0 + t);
        xd[t] = ds4rt_act_d(a, t0 + t);
        L[t] = lanes + t * ls;
        acc[t] = _mm256_loadu_ps(L[t]);
    }
    for (int64_t b = b0; b < nb8; b += 8) {
        const uint8_t *wb = w + b * bsz;
        const __m256 wd = scales8_blk32(kind, wb, bsz);
        __m512i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = join256(decode_blk32(kind, wb + 2 * k * bsz), decode_blk32(kind, wb + (2 * k + 1) * bsz));
        for (int t = 0; t < T; t++) {
            const int8_t *x = xq[t] + b * 32;
            const __m256i S = hsum8x8_512(dot_i8_512(q[0], loadu512(x)), dot_i8_512(q[1], loadu512(x + 64)),
                                          dot_i8_512(q[2], loadu512(x + 128)), dot_i8_512(q[3], loadu512(x + 192)));
            const __m256 ds = _mm256_mul_ps(wd, _mm256_loadu_ps(xd[t] + b));
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(ds, _mm256_cvtepi32_ps(S)));
        }
    }
    for (int t = 0; t < T; t++) _mm256_storeu_ps(L[t], acc[t]);
    for (int64_t b = nb8; b < nb; b++) {
        const uint8_t *blk = w + b * bsz;
        const __m256i q = decode_blk32(kind, blk);
        const float d = scale_blk32(kind, blk);
        for (int t = 0; t < T; t++) {
            const int32_t I = hsum_i32(dot_i8(q, loadu(xq[t] + b * 32)));
            L[t][b & 7] += (d * xd[t][b]) * (float)I;
        }
    }
}

/* ================= 256-element blocks, Q8_K activations ================= */


/* i16 vector whose 128-bit lane i holds s16[first + i] eight times (s16 = 16 i16 scales). */
ALWAYS_INLINE __m512i scale_quad(__m512i s16, int first) {
    const __m512i idx = _mm512_set_epi64(0x0003000300030003LL, 0x0003000300030003LL, 0x0002000200020002LL,
                                         0x0002000200020002LL, 0x0001000100010001LL, 0x0001000100010001LL, 0, 0);
    return _mm512_permutexvar_epi16(_mm512_add_epi16(idx, _mm512_set1_epi16((short)first)), s16);
}

/* [v | v] for 32 bytes v. */
ALWAYS_INLINE __m512i dup256(const void *p) { return _mm512_broadcast_i64x4(loadu(p)); }

/* i16 shift counts: a in the low 256 bits, b in the high. */
ALWAYS_INLINE __m512i counts(short a, short b) {
    return join256(_mm256_set1_epi16(a), _mm256_set1_epi16(b));
}

/* One Q2_K block with T activation rows: the scaled products as 8 i32 lanes per row in a[t]
 * and the min terms (scale-weighted bsums) as 8 i32 lanes in m[t]; both sum exactly. */
ALWAYS_INLINE void q2_K_block(const ds4rt_block_q2_K *blk, const qk_rows *r, int64_t b, int T, __m256i *a,
                              __m256i *m) {
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)blk->scales);
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(15))));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(15)));
    __m512i acc[TMAX];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
    for (int n = 0; n < 2; n++) {
        const __m512i v = dup256(blk->qs + 32 * n);
        for (int p = 0; p < 2; p++) { /* j = 2p (low half), 2p+1 (high half) */
            const __m512i q = _mm512_and_si512(_mm512_srlv_epi16(v, counts((short)(4 * p), (short)(4 * p + 2))), m3);
            const __m512i sq = scale_quad(sc16, 8 * n + 4 * p);
            for (int t = 0; t < T; t++)
                acc[t] = _mm512_add_epi32(acc[t], dot_u8_scaled_512(q, loadu512(r->xq[t] + b * 256 + 128 * n + 64 * p), sq));
        }
    }
    for (int t = 0; t < T; t++) {
        a[t] = fold256(acc[t]);
        m[t] = _mm256_madd_epi16(mn16, loadu(r->bs[t] + b * 16));
    }
}

/* As tile_iq2_xxs: single blocks off the lane period, whole periods of 8 reduced together; per
 * lane the same (d * xd) * A - (dmin * xd) * B. */
ALWAYS_INLINE void tile_q2_K(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const int64_t b1 = k1 / 256;
    int64_t b = k0 / 256;
    for (;;) {
        const int group = (b & 7) == 0 && b1 - b >= 8;
        if (b >= b1) break;
        if (!group) {
            const ds4rt_block_q2_K *blk = (const ds4rt_block_q2_K *)(const void *)(w + b * 84);
            __m256i av[TMAX], mv[TMAX];
            q2_K_block(blk, &r, b, T, av, mv);
            const float d = f16c(blk->d), dmin = f16c(blk->dmin);
            for (int t = 0; t < T; t++) {
                int32_t A, B;
                hsum2_i32(av[t], mv[t], &A, &B);
                L[t][b & 7] += (d * r.xd[t][b]) * (float)A - (dmin * r.xd[t][b]) * (float)B;
            }
            b++;
            continue;
        }
        __m256i pa[TMAX][8], pm[TMAX][8];
        uint16_t dh[8], mh[8];
        for (int k = 0; k < 8; k++) {
            const ds4rt_block_q2_K *blk = (const ds4rt_block_q2_K *)(const void *)(w + (b + k) * 84);
            __m256i av[TMAX], mv[TMAX];
            q2_K_block(blk, &r, b + k, T, av, mv);
            for (int t = 0; t < T; t++) {
                pa[t][k] = av[t];
                pm[t][k] = mv[t];
            }
            dh[k] = ds4rt_rd_u16(blk->d);
            mh[k] = ds4rt_rd_u16(blk->dmin);
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dh));
        const __m256 m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)mh));
        for (int t = 0; t < T; t++) {
            const __m256i A = hsum8x8_512(join256(pa[t][0], pa[t][1]), join256(pa[t][2], pa[t][3]),
                                          join256(pa[t][4], pa[t][5]), join256(pa[t][6], pa[t][7]));
            const __m256i B = hsum8x8_512(join256(pm[t][0], pm[t][1]), join256(pm[t][2], pm[t][3]),
                                          join256(pm[t][4], pm[t][5]), join256(pm[t][6], pm[t][7]));
            const __m256 xd = _mm256_loadu_ps(r.xd[t] + b);
            const __m256 term = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d8, xd), _mm256_cvtepi32_ps(A)),
                                              _mm256_mul_ps(_mm256_mul_ps(m8, xd), _mm256_cvtepi32_ps(B)));
            _mm256_storeu_ps(L[t], _mm256_add_ps(_mm256_loadu_ps(L[t]), term));
        }
        b += 8;
    }
}

ALWAYS_INLINE void tile_q45_K(int hbits, const uint8_t *w, const ds4rt_act *a, int64_t t0, int T,
                              int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const size_t bsz = hbits ? 176 : 144;
    const __m512i m4 = _mm512_set1_epi8(15), sixteen = _mm512_set1_epi8(16);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const uint8_t *blk = w + b * bsz;
        const uint8_t *qs = blk + (hbits ? 48 : 16);
        uint8_t sm[16]; /* 8 scales, 8 mins */
        ds4rt_k4_unpack(blk + 4, sm);
        const __m256i mn16 = mins_pairs16(sm + 8);
        const __m512i qh = hbits ? dup256(blk + 16) : _mm512_setzero_si512();
        __m512i acc[TMAX];
        for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) { /* elements 64c..64c+63: sub-blocks 2c (low nibbles), 2c+1 (high) */
            const __m512i v = dup256(qs + 32 * c);
            __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(v, (__mmask32)0xffff0000u, v, 4), m4);
            if (hbits) {
                const __m512i bit = join256(_mm256_set1_epi8((char)(1 << (2 * c))), _mm256_set1_epi8((char)(1 << (2 * c + 1))));
                q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, bit), q, sixteen);
            }
            const __m512i s = counts((short)sm[2 * c], (short)sm[2 * c + 1]);
            for (int t = 0; t < T; t++)
                acc[t] = _mm512_add_epi32(acc[t], dot_u8_scaled_512(q, loadu512(r.xq[t] + b * 256 + 64 * c), s));
        }
        const float d = f16c(blk), dmin = f16c(blk + 2);
        for (int t = 0; t < T; t++) {
            int32_t A, B;
            hsum2_i32(fold256(acc[t]), _mm256_madd_epi16(mn16, loadu(r.bs[t] + b * 16)), &A, &B);
            L[t][b & 7] += (d * r.xd[t][b]) * (float)A - (dmin * r.xd[t][b]) * (float)B;
        }
    }
}

ALWAYS_INLINE void tile_q6_K(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const __m512i m4 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
    const __m512i sh01 = counts(0, 2), sh23 = counts(4, 6);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q6_K *blk = (const ds4rt_block_q6_K *)(const void *)(w + b * 210);
        const __m256i sc16y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)blk->scales));
        const __m512i sc16 = _mm512_castsi256_si512(sc16y);
        __m512i acc[TMAX];
        for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            const __m512i l = loadu512(blk->ql + 64 * h);
            const __m512i qh = dup256(blk->qh + 32 * h);
            const __m512i h01 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m3), 4);
            const __m512i h23 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m3), 4);
            const __m512i q01 = _mm512_or_si512(_mm512_and_si512(l, m4), h01);
            const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), h23);
            const __m512i s01 = scale_quad(sc16, 8 * h), s23 = scale_quad(sc16, 8 * h + 4);
            for (int t = 0; t < T; t++) {
                const int8_t *x = r.xq[t] + b * 256 + 128 * h;
                acc[t] = _mm512_add_epi32(acc[t], dot_u8_scaled_512(q01, loadu512(x), s01));
                acc[t] = _mm512_add_epi32(acc[t], dot_u8_scaled_512(q23, loadu512(x + 64), s23));
            }
        }
        const float d = f16c(blk->d);
        for (int t = 0; t < T; t++) {
            /* A = sum sc * sum q*x - 32 * sum sc * bsum, all exact */
            const __m256i S = _mm256_slli_epi32(_mm256_madd_epi16(sc16y, loadu(r.bs[t] + b * 16)), 5);
            const int32_t A = hsum_i32(_mm256_sub_epi32(fold256(acc[t]), S));
            L[t][b & 7] += (d * r.xd[t][b]) * (float)A;
        }
    }
}

/* The 32 sign bits of a sub-block: byte g = the 7 stored bits of group g (aux bits 7g..7g+6)
 * plus their parity as bit 7, i.e. ds4rt_ksigns[(aux >> 7g) & 127]. pdep spreads the 28 bits
 * (fast on every CPU with AVX-512); the xor-fold leaves each byte's parity in its bit 0. */
ALWAYS_INLINE uint32_t iq2_sign_mask(uint32_t aux) {
    const uint32_t m = _pdep_u32(aux, 0x7f7f7f7fu);
    uint32_t p = m ^ (m >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return m | (p & 0x01010101u) << 7;
}

/* One IQ2_XXS block's exact integer dot products with T activation rows, as 16 i32 lanes each
 * (their sum is the block's sum of ls * q * x, 8 times the scaled sum). */
ALWAYS_INLINE void iq2_xxs_block(const ds4rt_block_iq2_xxs *blk, const qk_rows *r, int64_t b, int T, __m512i *acc) {
    const uint64_t *G = ds4rt_iq2xxs_grid;
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
    for (int s = 0; s < 8; s += 2) { /* two sub-blocks of 32 per register */
        const uint8_t *p0 = blk->qs + 8 * s, *p1 = p0 + 8;
        const uint32_t aux0 = ds4rt_rd_u32(p0 + 4), aux1 = ds4rt_rd_u32(p1 + 4);
        const __m512i grid = _mm512_set_epi64((long long)G[p1[3]], (long long)G[p1[2]], (long long)G[p1[1]],
                                              (long long)G[p1[0]], (long long)G[p0[3]], (long long)G[p0[2]],
                                              (long long)G[p0[1]], (long long)G[p0[0]]);
        const __mmask64 neg = (__mmask64)((uint64_t)iq2_sign_mask(aux0) | (uint64_t)iq2_sign_mask(aux1) << 32);
        const __m512i lsv = counts((short)(2 * (aux0 >> 28) + 1), (short)(2 * (aux1 >> 28) + 1));
        for (int t = 0; t < T; t++) {
            const __m512i x = loadu512(r->xq[t] + b * 256 + 32 * s);
            const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
            acc[t] = _mm512_add_epi32(acc[t], dot_u8_scaled_512(grid, xs, lsv));
        }
    }
}

/* ================= IQ2_XXS with AVX-512 VBMI (the path avx512-vbmi) =================
 * iq2_xxs_block gathers each sub-block's four 8-byte grid rows by scalar loads and spreads its
 * sign bits with pdep: ~48 instructions per 64 weights whatever the token count, about 3.3 GB/s
 * a core in a 2-thread decode on a Zen 4 (docs/PERFORMANCE.md, "IQ2_XXS on the CPU with AVX-512
 * VBMI"). Here a whole
 * block is decoded in registers: every grid byte is one of 8, 25, 43, so a grid row is 8 two-bit
 * codes (16 bits) and the 256 rows a 512-byte table held in 8 registers; the block's 32 indices
 * select their codes by 4 two-register word permutes and 3 blends, a byte permute and a
 * multishift put code j at byte j of its row, a byte shuffle maps codes to magnitudes. The sign
 * indices are cut from the aux words by a multishift and looked up in ksigns (128 bytes, two
 * registers) by one byte permute; the sub-block scales come from the aux words' top 4 bits. The
 * products are those of iq2_xxs_block (magnitudes x activations negated where the sign is set,
 * pairs summed, times the scale, exact), so the block sums, and the results, are the same. */
#define VBMI __attribute__((target("avx512vbmi")))

/* The tables, made once: grid rows as codes, and the constant permutations of the block decode. */
static uint16_t iq2_codes[256];  /* grid row i: code j = index of its byte j in {8, 25, 43} */
static int8_t iq2_gperm[64];     /* word i <- block byte 8 (i / 4) + i % 4: the grid indices */
static int8_t iq2_cwidx[4][64];  /* k: qword g <- code word 8k + g (bytes 0, 1) */
static int8_t iq2_sgidx[4][64];  /* k: byte 8g + j <- sign byte of group 8k + g */
static int16_t iq2_lsidx[4][32]; /* k: words 0..15 <- scale of sub-block 2k, 16..31 <- of 2k + 1 */
static pthread_once_t iq2_tables_once = PTHREAD_ONCE_INIT;
static void iq2_tables_make(void) {
    for (int i = 0; i < 256; i++) {
        uint16_t c = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t v = (uint8_t)(ds4rt_iq2xxs_grid[i] >> (8 * j));
            c |= (uint16_t)((v == 0x19 ? 1 : v == 0x2b ? 2 : 0) << (2 * j));
        }
        iq2_codes[i] = c;
    }
    for (int i = 0; i < 64; i++) iq2_gperm[i] = (int8_t)(8 * ((i / 2) / 4) + (i / 2) % 4);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 64; i++) {
            const int g = i / 8;
            iq2_cwidx[k][i] = (int8_t)(2 * (8 * k + g) + (i % 8 == 1));
            iq2_sgidx[k][i] = (int8_t)(8 * (2 * k + g / 4) + g % 4);
        }
        for (int w = 0; w < 32; w++) iq2_lsidx[k][w] = (int16_t)(4 * (2 * k + w / 16));
    }
}

typedef struct {
    __m512i code[8];           /* iq2_codes, 32 words a register */
    __m512i ks0, ks1;          /* ds4rt_ksigns, 64 bytes a register */
    __m512i gperm, cw[4], sg[4], ls[4];
} iq2_vbmi_tables;

ALWAYS_INLINE VBMI void iq2_vbmi_tables_load(iq2_vbmi_tables *tb) {
    pthread_once(&iq2_tables_once, iq2_tables_make);
    for (int i = 0; i < 8; i++) tb->code[i] = loadu512(iq2_codes + 32 * i);
    tb->ks0 = loadu512(ds4rt_ksigns);
    tb->ks1 = loadu512(ds4rt_ksigns + 64);
    tb->gperm = loadu512(iq2_gperm);
    for (int k = 0; k < 4; k++) {
        tb->cw[k] = loadu512(iq2_cwidx[k]);
        tb->sg[k] = loadu512(iq2_sgidx[k]);
        tb->ls[k] = loadu512(iq2_lsidx[k]);
    }
}

ALWAYS_INLINE VBMI void iq2_xxs_block_vbmi(const ds4rt_block_iq2_xxs *blk, const iq2_vbmi_tables *tb,
                                           const qk_rows *r, int64_t b, int T, __m512i *acc) {
    const __m512i q = loadu512(blk->qs); /* qword s: sub-block s (4 grid indices, aux) */
    /* the 32 grid indices as words: word i = byte 8 (i / 4) + i % 4 */
    const __m512i gidx = _mm512_maskz_permutexvar_epi8((__mmask64)0x5555555555555555ULL, tb->gperm, q);
    const __m512i c01 = _mm512_permutex2var_epi16(tb->code[0], gidx, tb->code[1]);
    const __m512i c23 = _mm512_permutex2var_epi16(tb->code[2], gidx, tb->code[3]);
    const __m512i c45 = _mm512_permutex2var_epi16(tb->code[4], gidx, tb->code[5]);
    const __m512i c67 = _mm512_permutex2var_epi16(tb->code[6], gidx, tb->code[7]);
    const __mmask32 b6 = _mm512_test_epi16_mask(gidx, _mm512_set1_epi16(64));
    const __mmask32 b7 = _mm512_test_epi16_mask(gidx, _mm512_set1_epi16(128));
    const __m512i codes = _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, c01, c23),
                                                  _mm512_mask_blend_epi16(b6, c45, c67));
    /* sign bytes: qword s, bytes 0..3 = ksigns[(aux_s >> 7g) & 127], aux_s = bits 32..63 */
    const __m512i sctl = _mm512_set1_epi64(0x352e2720352e2720LL); /* 32, 39, 46, 53, twice */
    const __m512i sidx = _mm512_and_si512(_mm512_multishift_epi64_epi8(sctl, q), _mm512_set1_epi8(0x7f));
    const __m512i sbytes = _mm512_permutex2var_epi8(tb->ks0, sidx, tb->ks1);
    /* scales 2 (aux >> 28) + 1 in the low word of each qword */
    const __m512i sc = _mm512_or_si512(_mm512_slli_epi64(_mm512_srli_epi64(q, 60), 1), _mm512_set1_epi64(1));
    const __m512i bits = _mm512_set1_epi64(0x8040201008040201LL);
    const __m512i vtab = _mm512_set4_epi32(0, 0, 0, 0x002b1908); /* codes 0, 1, 2 -> 8, 25, 43 */
    const __m512i m3 = _mm512_set1_epi8(3);
    const __m512i cctl = _mm512_set1_epi64(0x0e0c0a0806040200LL); /* byte j: bits 2j.. of its qword */
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) { /* sub-blocks 2k, 2k + 1: groups 8k .. 8k + 7 */
        /* qword g of the 64 weights holds group 8k + g's code word; then code j to byte j */
        const __m512i cw = _mm512_permutexvar_epi8(tb->cw[k], codes);
        const __m512i mag = _mm512_shuffle_epi8(vtab, _mm512_and_si512(_mm512_multishift_epi64_epi8(cctl, cw), m3));
        /* byte 8g + j: sign byte of group 8k + g (qword s = 2k + g / 4, byte g % 4), tested at bit j */
        const __m512i sg = _mm512_permutexvar_epi8(tb->sg[k], sbytes);
        const __mmask64 neg = _mm512_test_epi8_mask(sg, bits);
        /* words 0..15: the scale of sub-block 2k, 16..31: of 2k + 1 */
        const __m512i lsv = _mm512_permutexvar_epi16(tb->ls[k], sc);
        for (int t = 0; t < T; t++) {
            const __m512i x = loadu512(r->xq[t] + b * 256 + 64 * k);
            const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
            acc[t] = _mm512_add_epi32(acc[t], dot_u8_scaled_512(mag, xs, lsv));
        }
    }
}

/* The IQ2_XXS tile, for either block decode (BLOCK, after SETUP): blocks one at a time where the
 * lane period is incomplete (lane b & 7 gets ((d * xd) * sum) * 0.125), and whole periods of 8
 * blocks with the 8 sums reduced together and the same f32 formula applied lane-wise: the same
 * operations per lane, fewer reductions. */
#define DEF_TILE_IQ2_XXS(NAME, ATTR, SETUP, BLOCK)                                                                   \
ALWAYS_INLINE ATTR void NAME(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) { \
    SETUP;                                                                                                           \
    qk_rows r;                                                                                                       \
    qk_rows_init(&r, a, t0, T);                                                                                      \
    float *L[TMAX];                                                                                                  \
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;                                                               \
    const int64_t b1 = k1 / 256;                                                                                     \
    int64_t b = k0 / 256;                                                                                            \
    while (b < b1) {                                                                                                 \
        if ((b & 7) != 0 || b1 - b < 8) { /* a block off the lane period */                                          \
            const ds4rt_block_iq2_xxs *blk = (const ds4rt_block_iq2_xxs *)(const void *)(w + b * 66);                \
            __m512i acc[TMAX];                                                                                       \
            BLOCK(blk, &r, b, T, acc);                                                                               \
            const float d = f16c(blk->d);                                                                            \
            for (int t = 0; t < T; t++)                                                                              \
                L[t][b & 7] += ((d * r.xd[t][b]) * (float)_mm512_reduce_add_epi32(acc[t])) * 0.125f;                 \
            b++;                                                                                                     \
            continue;                                                                                                \
        }                                                                                                            \
        __m256i part[TMAX][8];                                                                                       \
        uint16_t dh[8];                                                                                              \
        for (int k = 0; k < 8; k++) {                                                                                \
            const ds4rt_block_iq2_xxs *blk = (const ds4rt_block_iq2_xxs *)(const void *)(w + (b + k) * 66);          \
            __m512i acc[TMAX];                                                                                       \
            BLOCK(blk, &r, b + k, T, acc);                                                                           \
            for (int t = 0; t < T; t++) part[t][k] = fold256(acc[t]);                                                \
            dh[k] = ds4rt_rd_u16(blk->d);                                                                            \
        }                                                                                                            \
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dh));                       \
        for (int t = 0; t < T; t++) {                                                                                \
            const __m256i sums = hsum8x8_512(join256(part[t][0], part[t][1]), join256(part[t][2], part[t][3]),       \
                                             join256(part[t][4], part[t][5]), join256(part[t][6], part[t][7]));      \
            const __m256 term = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d8, _mm256_loadu_ps(r.xd[t] + b)),         \
                                                            _mm256_cvtepi32_ps(sums)),                               \
                                              _mm256_set1_ps(0.125f));                                               \
            _mm256_storeu_ps(L[t], _mm256_add_ps(_mm256_loadu_ps(L[t]), term));                                      \
        }                                                                                                            \
        b += 8;                                                                                                      \
    }                                                                                                                \
}

#define IQ2_BLOCK_PLAIN(blk, r, b, T, acc) iq2_xxs_block(blk, r, b, T, acc)
#define IQ2_BLOCK_VBMI(blk, r, b, T, acc) iq2_xxs_block_vbmi(blk, &tb, r, b, T, acc)
DEF_TILE_IQ2_XXS(tile_iq2_xxs, , (void)0, IQ2_BLOCK_PLAIN)
DEF_TILE_IQ2_XXS(tile_iq2_xxs_vbmi, VBMI, iq2_vbmi_tables tb; iq2_vbmi_tables_load(&tb), IQ2_BLOCK_VBMI)

/* ================= dispatch on the tile size (kernels.h, DS4RT_DEF_DOT_DISPATCH) ================= */

#define C_Q8_0(T) tile_blk32(0, 34, w, a, t0, T, k0, k1, lanes, ls)
/* Q4_0, MXFP4 and Q4_K use the 256-bit kernels (kernels_avx2_tiles.h), EVEX-encoded here: on a
 * Sapphire Rapids-class Xeon they ran 5-16% faster than 512-bit versions (docs/QUANTS.md). */
#define C_Q4_0(T) avx2_tile_blk32(1, 18, w, a, t0, T, k0, k1, lanes, ls)
#define C_MXFP4(T) avx2_tile_blk32(2, 17, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q2_K(T) tile_q2_K(w, a, t0, T, k0, k1, lanes, ls)
#define C_Q4_K(T) avx2_tile_q45_K(0, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q5_K(T) tile_q45_K(1, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q6_K(T) tile_q6_K(w, a, t0, T, k0, k1, lanes, ls)
#define C_IQ2_XXS(T) tile_iq2_xxs(w, a, t0, T, k0, k1, lanes, ls)

DS4RT_DEF_DOTS()

/* the register decode for tiles of 1 and 2 tokens; from 3 the plain one, whose decode runs on the
 * integer ports beside the vector work (on a Zen 4 the register decode took 10 % / 6 % less time
 * at 1 / 2 tokens and 4 % / 6-8 % more at 3 / 4: docs/PERFORMANCE.md, "IQ2_XXS on the CPU with
 * AVX-512 VBMI") */
#define C_IQ2_XXS_VBMI(T) \
    ((T) <= 2 ? tile_iq2_xxs_vbmi(w, a, t0, T, k0, k1, lanes, ls) : tile_iq2_xxs(w, a, t0, T, k0, k1, lanes, ls))
DS4RT_DEF_DOT_DISPATCH(VBMI, iq2_xxs_vbmi, C_IQ2_XXS_VBMI)

/* The avx512 table, and avx512-vnni: the same kernels, plus Q8_0 weights repacked into the X8
 * layout (repack.h) for kernels_avx512_vnni.c, compiled with the VNNI flag on its own so that
 * nothing here can use an instruction a CPU without VNNI lacks. */
#define AVX512_DOTS                                                                                 \
    {                                                                                               \
        [DS4RT_TYPE_F32] = dot_f32, [DS4RT_TYPE_F16] = dot_f16, [DS4RT_TYPE_BF16] = dot_bf16,       \
        [DS4RT_TYPE_Q8_0] = dot_q8_0, [DS4RT_TYPE_Q4_0] = dot_q4_0, [DS4RT_TYPE_MXFP4] = dot_mxfp4, \
        [DS4RT_TYPE_Q2_K] = dot_q2_K, [DS4RT_TYPE_Q4_K] = dot_q4_K, [DS4RT_TYPE_Q5_K] = dot_q5_K,   \
        [DS4RT_TYPE_Q6_K] = dot_q6_K, [DS4RT_TYPE_IQ2_XXS] = dot_iq2_xxs,                           \
    }

#define AVX512_ROWS {[DS4RT_TYPE_F32] = rows_f32, [DS4RT_TYPE_F16] = rows_f16, [DS4RT_TYPE_BF16] = rows_bf16}

const ds4rt_cpu_kernels ds4rt_kernels_avx512 = {
    .name = "avx512",
    .dot = AVX512_DOTS,
    .rows = AVX512_ROWS,
    .dot_q8_0_x8 = ds4rt_dot_q8_0_x8_portable,
    .rows_q8_0_r16 = ds4rt_rows_q8_0_r16_portable,
    .act_row = ds4rt_act_row_avx2, /* the AVX2 build of it (act_quant_avx2.c), also here */
};

/* The VNNI fields of avx512-vnni and avx512-vbmi. Q8_0 rows the X8 layout cannot hold (columns
 * not a multiple of 128) stay in the file layout: the VNNI whole-row kernel takes those that fit
 * a chunk. Q8_0 matrices of up to 384 columns in panels of 16 rows (R16): 1.6-4x faster than X8
 * per row at 2 or more tokens, about as fast at one (docs/QUANTS.md, "The Q8_0 R16 layout"). */
#define VNNI_FIELDS                                                                                     \
    .dot_q8_0_x8 = ds4rt_dot_q8_0_x8_vnni, .q8_0_layout = DS4RT_LAYOUT_Q8_0_X8,                         \
    .rows = {[DS4RT_TYPE_F32] = rows_f32, [DS4RT_TYPE_F16] = rows_f16, [DS4RT_TYPE_BF16] = rows_bf16,   \
             [DS4RT_TYPE_Q8_0] = ds4rt_rows_q8_0_vnni},                                                 \
    .rows_q8_0_x8 = ds4rt_rows_q8_0_x8_vnni, .rows_q8_0_r16 = ds4rt_rows_q8_0_r16_vnni, .q8_0_r16 = 1,  \
    .act_row = ds4rt_act_row_avx2

const ds4rt_cpu_kernels ds4rt_kernels_avx512_vnni = {
    .name = "avx512-vnni",
    .dot = AVX512_DOTS,
    VNNI_FIELDS,
};

/* avx512-vbmi: avx512-vnni's kernels with the IQ2_XXS block decoded in registers (VBMI's byte
 * permutes and multishift, above): the same bits, for CPUs that have VNNI and VBMI (Ice Lake and
 * later Xeons, Zen 4 and later). */
const ds4rt_cpu_kernels ds4rt_kernels_avx512_vbmi = {
    .name = "avx512-vbmi",
    .dot = {[DS4RT_TYPE_F32] = dot_f32, [DS4RT_TYPE_F16] = dot_f16, [DS4RT_TYPE_BF16] = dot_bf16,
            [DS4RT_TYPE_Q8_0] = dot_q8_0, [DS4RT_TYPE_Q4_0] = dot_q4_0, [DS4RT_TYPE_MXFP4] = dot_mxfp4,
            [DS4RT_TYPE_Q2_K] = dot_q2_K, [DS4RT_TYPE_Q4_K] = dot_q4_K, [DS4RT_TYPE_Q5_K] = dot_q5_K,
            [DS4RT_TYPE_Q6_K] = dot_q6_K, [DS4RT_TYPE_IQ2_XXS] = dot_iq2_xxs_vbmi},
    VNNI_FIELDS,
};
