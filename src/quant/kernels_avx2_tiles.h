/*
 * kernels_avx2_tiles.h - the AVX2 kernels (see kernels_avx2.c). A header so that the AVX-512
 * path can use some of them too, compiled with its flags (EVEX encoding, 32 registers), where
 * they measured faster than 512-bit versions. Include after simd_avx2.h.
 */
#ifndef DS4RT_KERNELS_AVX2_TILES_H
#define DS4RT_KERNELS_AVX2_TILES_H

#include "simd_avx2.h"

/* ================= float weights: acc[i % 32] += w_i * x_i ================= */

ALWAYS_INLINE __m256 load_w_f32(const uint8_t *p) { return _mm256_loadu_ps((const float *)(const void *)p); }
ALWAYS_INLINE __m256 load_w_f16(const uint8_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
ALWAYS_INLINE __m256 load_w_bf16(const uint8_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

#define AVX2_DEF_FLOAT_DOT(name, ESZ, LOADW, SCALARW)                                                     \
    static inline void avx2_dot_##name(const uint8_t *w, const ds4rt_act *a, int64_t t0, int n_tok, int64_t k0,  \
                           int64_t k1, float *lanes, int64_t ls) {                                   \
        const int64_t n32 = k0 + ((k1 - k0) & ~(int64_t)31);                                         \
        for (int t = 0; t < n_tok; t++) {                                                            \
            const float *x = ds4rt_act_f32(a, t0 + t);                                               \
            float *acc = lanes + t * ls;                                                             \
            __m256 c0 = _mm256_loadu_ps(acc), c1 = _mm256_loadu_ps(acc + 8);                         \
            __m256 c2 = _mm256_loadu_ps(acc + 16), c3 = _mm256_loadu_ps(acc + 24);                   \
            for (int64_t i = k0; i < n32; i += 32) {                                                  \
                c0 = _mm256_add_ps(c0, _mm256_mul_ps(LOADW(w + ESZ * i), _mm256_loadu_ps(x + i)));     \
                c1 = _mm256_add_ps(c1, _mm256_mul_ps(LOADW(w + ESZ * (i + 8)), _mm256_loadu_ps(x + i + 8)));  \
                c2 = _mm256_add_ps(c2, _mm256_mul_ps(LOADW(w + ESZ * (i + 16)), _mm256_loadu_ps(x + i + 16))); \
                c3 = _mm256_add_ps(c3, _mm256_mul_ps(LOADW(w + ESZ * (i + 24)), _mm256_loadu_ps(x + i + 24))); \
            }                                                                                        \
            _mm256_storeu_ps(acc, c0);                                                               \
            _mm256_storeu_ps(acc + 8, c1);                                                           \
            _mm256_storeu_ps(acc + 16, c2);                                                          \
            _mm256_storeu_ps(acc + 24, c3);                                                          \
            for (int64_t i = n32; i < k1; i++) acc[i & 31] += SCALARW(w + ESZ * i) * x[i];            \
        }                                                                                            \
    }


AVX2_DEF_FLOAT_DOT(f32, 4, load_w_f32, scalar_f32)
AVX2_DEF_FLOAT_DOT(f16, 2, load_w_f16, ds4rt_rd_f16)
AVX2_DEF_FLOAT_DOT(bf16, 2, load_w_bf16, scalar_bf16)

/* ================= 32-element blocks, Q8_0 activations ================= */
/* Groups of 8 blocks: the 8 exact block sums land in one vector, the f32 terms are formed lane
 * by lane ((d * xd) * I) and added to the 8 accumulator lanes; leftover blocks go lane by lane. */

ALWAYS_INLINE void avx2_tile_blk32(int kind, size_t bsz, const uint8_t *w, const ds4rt_act *a, int64_t t0, int T,
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
        __m256i q[8];
        for (int k = 0; k < 8; k++) q[k] = decode_blk32(kind, wb + k * bsz);
        for (int t = 0; t < T; t++) {
            __m256i s[8];
            for (int k = 0; k < 8; k++) s[k] = dot_i8(q[k], loadu(xq[t] + (b + k) * 32));
            const __m256 ds = _mm256_mul_ps(wd, _mm256_loadu_ps(xd[t] + b));
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(ds, _mm256_cvtepi32_ps(hsum8x8(s))));
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


/* One Q2_K block with T activation rows: scaled products (8 i32 lanes) in a[t], min terms
 * (scale-weighted bsums, 8 i32 lanes) in m[t]; both sum exactly. */
ALWAYS_INLINE void avx2_q2_K_block(const ds4rt_block_q2_K *blk, const qk_rows *r, int64_t b, int T, __m256i *a,
                                   __m256i *m) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)blk->scales);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, _mm_set1_epi8(15)));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(15)));
    for (int t = 0; t < T; t++) a[t] = _mm256_setzero_si256();
    for (int n = 0; n < 2; n++) {
        const __m256i v = loadu(blk->qs + 32 * n);
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m3);
            const __m256i sp = scale_pair(sc16, 4 * n + j);
            for (int t = 0; t < T; t++)
                a[t] = _mm256_add_epi32(a[t], dot_u8_scaled(q, loadu(r->xq[t] + b * 256 + 128 * n + 32 * j), sp));
        }
    }
    for (int t = 0; t < T; t++) m[t] = _mm256_madd_epi16(mn16, bsums16(r, t, b));
}

/* Single blocks off the lane period, whole periods of 8 reduced together; per lane the same
 * (d * xd) * A - (dmin * xd) * B. */
ALWAYS_INLINE void avx2_tile_q2_K(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const int64_t b1 = k1 / 256;
    int64_t b = k0 / 256;
    while (b < b1) {
        if ((b & 7) != 0 || b1 - b < 8) {
            const ds4rt_block_q2_K *blk = (const ds4rt_block_q2_K *)(const void *)(w + b * 84);
            __m256i av[TMAX], mv[TMAX];
            avx2_q2_K_block(blk, &r, b, T, av, mv);
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
            avx2_q2_K_block(blk, &r, b + k, T, av, mv);
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
            const __m256 xd = _mm256_loadu_ps(r.xd[t] + b);
            const __m256 term = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d8, xd), _mm256_cvtepi32_ps(hsum8x8(pa[t]))),
                                              _mm256_mul_ps(_mm256_mul_ps(m8, xd), _mm256_cvtepi32_ps(hsum8x8(pm[t]))));
            _mm256_storeu_ps(L[t], _mm256_add_ps(_mm256_loadu_ps(L[t]), term));
        }
        b += 8;
    }
}

/* One Q4_K / Q5_K (hbits = 1) block (8 sub-blocks of 32 with 6-bit scale and min) with T
 * activation rows: scaled products (8 i32 lanes) in a[t], min terms in m[t]; both exact. */
ALWAYS_INLINE void avx2_q45_K_block(int hbits, const uint8_t *blk, const qk_rows *r, int64_t b, int T, __m256i *a,
                                    __m256i *m) {
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    const uint8_t *scales = blk + 4;
    const uint8_t *qs = blk + (hbits ? 48 : 16);
    uint8_t sm[16]; /* 8 scales, 8 mins */
    ds4rt_k4_unpack(scales, sm);
    const __m256i mn16 = mins_pairs16(sm + 8);
    const __m256i qh = hbits ? loadu(blk + 16) : _mm256_setzero_si256();
    for (int t = 0; t < T; t++) a[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i v = loadu(qs + 32 * c);
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (hbits) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4));
        }
        const __m256i slo = _mm256_set1_epi16((short)sm[2 * c]), shi = _mm256_set1_epi16((short)sm[2 * c + 1]);
        for (int t = 0; t < T; t++) {
            const int8_t *x = r->xq[t] + b * 256 + 64 * c;
            a[t] = _mm256_add_epi32(a[t], dot_u8_scaled(lo, loadu(x), slo));
            a[t] = _mm256_add_epi32(a[t], dot_u8_scaled(hi, loadu(x + 32), shi));
        }
    }
    for (int t = 0; t < T; t++) m[t] = _mm256_madd_epi16(mn16, bsums16(r, t, b));
}

/* Single blocks off the lane period, whole periods of 8 reduced together; per lane the same
 * (d * xd) * A - (dmin * xd) * B. */
ALWAYS_INLINE void avx2_tile_q45_K(int hbits, const uint8_t *w, const ds4rt_act *a, int64_t t0, int T,
                              int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const size_t bsz = hbits ? 176 : 144;
    const int64_t b1 = k1 / 256;
    int64_t b = k0 / 256;
    while (b < b1) {
        if ((b & 7) != 0 || b1 - b < 8) {
            const uint8_t *blk = w + b * bsz;
            __m256i av[TMAX], mv[TMAX];
            avx2_q45_K_block(hbits, blk, &r, b, T, av, mv);
            const float d = f16c(blk), dmin = f16c(blk + 2);
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
            const uint8_t *blk = w + (b + k) * bsz;
            __m256i av[TMAX], mv[TMAX];
            avx2_q45_K_block(hbits, blk, &r, b + k, T, av, mv);
            for (int t = 0; t < T; t++) {
                pa[t][k] = av[t];
                pm[t][k] = mv[t];
            }
            dh[k] = ds4rt_rd_u16(blk);
            mh[k] = ds4rt_rd_u16(blk + 2);
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dh));
        const __m256 m8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)mh));
        for (int t = 0; t < T; t++) {
            const __m256 xd = _mm256_loadu_ps(r.xd[t] + b);
            const __m256 term = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d8, xd), _mm256_cvtepi32_ps(hsum8x8(pa[t]))),
                                              _mm256_mul_ps(_mm256_mul_ps(m8, xd), _mm256_cvtepi32_ps(hsum8x8(pm[t]))));
            _mm256_storeu_ps(L[t], _mm256_add_ps(_mm256_loadu_ps(L[t]), term));
        }
        b += 8;
    }
}

ALWAYS_INLINE void avx2_tile_q6_K(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q6_K *blk = (const ds4rt_block_q6_K *)(const void *)(w + b * 210);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)blk->scales));
        __m256i acc[TMAX];
        for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = loadu(blk->ql + 64 * h), l1 = loadu(blk->ql + 64 * h + 32);
            const __m256i qh = loadu(blk->qh + 32 * h);
            __m256i q[4];
            q[0] = _mm256_and_si256(l0, m4);
            q[1] = _mm256_and_si256(l1, m4);
            q[2] = _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4);
            q[3] = _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4);
            for (int k = 0; k < 4; k++) {
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m3);
                const __m256i qk = _mm256_or_si256(q[k], _mm256_slli_epi16(hb, 4));
                const __m256i sp = scale_pair(sc16, 4 * h + k);
                for (int t = 0; t < T; t++)
                    acc[t] = _mm256_add_epi32(acc[t], dot_u8_scaled(qk, loadu(r.xq[t] + b * 256 + 128 * h + 32 * k), sp));
            }
        }
        const float d = f16c(blk->d);
        for (int t = 0; t < T; t++) {
            /* A = sum sc * sum q*x - 32 * sum sc * bsum, all exact */
            const __m256i S = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums16(&r, t, b)), 5);
            const int32_t A = hsum_i32(_mm256_sub_epi32(acc[t], S));
            L[t][b & 7] += (d * r.xd[t][b]) * (float)A;
        }
    }
}

/* ls = 2 * (aux >> 28) + 1 broadcast to 16 x i16, indexed by aux >> 28. */
#define LS16(v) {v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v}
static const int16_t avx2_iq2_ls16[16][16] __attribute__((aligned(32))) = {
    LS16(1),  LS16(3),  LS16(5),  LS16(7),  LS16(9),  LS16(11), LS16(13), LS16(15),
    LS16(17), LS16(19), LS16(21), LS16(23), LS16(25), LS16(27), LS16(29), LS16(31)};
#undef LS16

/* One IQ2_XXS block's exact integer dot products with T activation rows, 8 i32 lanes each. */
ALWAYS_INLINE void avx2_iq2_xxs_block(const ds4rt_block_iq2_xxs *blk, const qk_rows *r, int64_t b, int T,
                                      __m256i *acc) {
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        const uint8_t *p = blk->qs + 8 * s;
        const uint32_t aux = ds4rt_rd_u32(p + 4);
        const __m256i grid = _mm256_set_epi64x((long long)ds4rt_iq2xxs_grid[p[3]], (long long)ds4rt_iq2xxs_grid[p[2]],
                                               (long long)ds4rt_iq2xxs_grid[p[1]], (long long)ds4rt_iq2xxs_grid[p[0]]);
        const __m256i sgn = _mm256_set_epi64x(
            (long long)ds4rt_ksigns_bytes[(aux >> 21) & 127], (long long)ds4rt_ksigns_bytes[(aux >> 14) & 127],
            (long long)ds4rt_ksigns_bytes[(aux >> 7) & 127], (long long)ds4rt_ksigns_bytes[aux & 127]);
        const __m256i lsv = _mm256_load_si256((const __m256i *)(const void *)avx2_iq2_ls16[aux >> 28]);
        for (int t = 0; t < T; t++) {
            const __m256i xs = _mm256_sign_epi8(loadu(r->xq[t] + b * 256 + 32 * s), sgn);
            acc[t] = _mm256_add_epi32(acc[t], dot_u8_scaled(grid, xs, lsv));
        }
    }
}

/* Single blocks off the lane period (lane b & 7 gets ((d * xd) * sum) * 0.125); whole periods
 * of 8 blocks reduce their sums together and apply the same f32 formula lane-wise. */
ALWAYS_INLINE void avx2_tile_iq2_xxs(const uint8_t *w, const ds4rt_act *a, int64_t t0, int T, int64_t k0, int64_t k1, float *lanes, int64_t ls) {
    qk_rows r;
    qk_rows_init(&r, a, t0, T);
    float *L[TMAX];
    for (int t = 0; t < T; t++) L[t] = lanes + t * ls;
    const int64_t b1 = k1 / 256;
    int64_t b = k0 / 256;
    while (b < b1) {
        if ((b & 7) != 0 || b1 - b < 8) {
            const ds4rt_block_iq2_xxs *blk = (const ds4rt_block_iq2_xxs *)(const void *)(w + b * 66);
            __m256i acc[TMAX];
            avx2_iq2_xxs_block(blk, &r, b, T, acc);
            const float d = f16c(blk->d);
            for (int t = 0; t < T; t++)
                L[t][b & 7] += ((d * r.xd[t][b]) * (float)hsum_i32(acc[t])) * 0.125f;
            b++;
            continue;
        }
        __m256i part[TMAX][8];
        uint16_t dh[8];
        for (int k = 0; k < 8; k++) {
            const ds4rt_block_iq2_xxs *blk = (const ds4rt_block_iq2_xxs *)(const void *)(w + (b + k) * 66);
            __m256i acc[TMAX];
            avx2_iq2_xxs_block(blk, &r, b + k, T, acc);
            for (int t = 0; t < T; t++) part[t][k] = acc[t];
            dh[k] = ds4rt_rd_u16(blk->d);
        }
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dh));
        for (int t = 0; t < T; t++) {
            const __m256 term = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d8, _mm256_loadu_ps(r.xd[t] + b)),
                                                            _mm256_cvtepi32_ps(hsum8x8(part[t]))),
                                              _mm256_set1_ps(0.125f));
            _mm256_storeu_ps(L[t], _mm256_add_ps(_mm256_loadu_ps(L[t]), term));
        }
        b += 8;
    }
}

#endif /* DS4RT_KERNELS_AVX2_TILES_H */
