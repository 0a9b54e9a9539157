/*
 * cpu_expf_fma.c - e^x of an array of floats, 8 at a time with AVX2 and FMA, bitwise what the C
 * library's expf returns where cpu_math.c uses it (glibc 2.28 or later on a CPU with AVX2 and
 * FMA, whose expf is the FMA build of the table-driven method below). Compiled with -mavx2
 * -mfma on its own; called only where those run (cpu_math.c, ds4rt_expf_rows).
 *
 * The method: k = round(x * 32 / ln 2) by adding 1.5 * 2^52, r = x * 32 / ln 2 - k (one fused
 * multiply-subtract), 2^(k/32) from a 32-entry table of 2^(i/32) with k / 32 added to its
 * exponent field, times a cubic in r, all in double, rounded once to float. Each step is the
 * same IEEE operation, fused or not, as that expf's, so the bits are its bits; |x| >= 88 and
 * NaN (overflow, underflow, the special values) go to the library's expf itself.
 * tests/expf_exhaustive.c checks all 2^32 inputs against the library.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "cpu_math.h"

/* 2^(i/32) as doubles, minus i << 47 (k / 32 is added to the exponent field by adding k << 47,
 * of which the low 5 bits of k are already in the entry). Generated with 60-digit decimals and
 * rounded to nearest; tests/expf_exhaustive.c checks every entry through the results. */
static const uint64_t EXP2_32[32] = {
    0x3ff0000000000000u, 0x3fefd9b0d3158574u, 0x3fefb5586cf9890fu, 0x3fef9301d0125b51u, 0x3fef72b83c7d517bu,
    0x3fef54873168b9aau, 0x3fef387a6e756238u, 0x3fef1e9df51fdee1u, 0x3fef06fe0a31b715u, 0x3feef1a7373aa9cbu,
    0x3feedea64c123422u, 0x3feece086061892du, 0x3feebfdad5362a27u, 0x3feeb42b569d4f82u, 0x3feeab07dd485429u,
    0x3feea47eb03a5585u, 0x3feea09e667f3bcdu, 0x3fee9f75e8ec5f74u, 0x3feea11473eb0187u, 0x3feea589994cce13u,
    0x3feeace5422aa0dbu, 0x3feeb737b0cdc5e5u, 0x3feec49182a3f090u, 0x3feed503b23e255du, 0x3feee89f995ad3adu,
    0x3feeff76f2fb5e47u, 0x3fef199bdd85529cu, 0x3fef3720dcef9069u, 0x3fef5818dcfba487u, 0x3fef7c97337b9b5fu,
    0x3fefa4afa2a490dau, 0x3fefd0765b6e4540u,
};

void ds4rt_expf_rows_fma(float *x, int64_t n) {
    const __m256d inv_ln2_32 = _mm256_set1_pd(0x1.71547652b82fep+5), shift = _mm256_set1_pd(0x1.8p+52);
    const __m256d c0 = _mm256_set1_pd(0x1.c6af84b912394p-20), c1 = _mm256_set1_pd(0x1.ebfce50fac4f3p-13);
    const __m256d c2 = _mm256_set1_pd(0x1.62e42ff0c52d6p-6), one = _mm256_set1_pd(1.0);
    const __m256i low5 = _mm256_set1_epi64x(31), absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i big = _mm256_set1_epi32(0x42afffff); /* above: |x| >= 88 (0x42b00000) or NaN */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 xv = _mm256_loadu_ps(x + i);
        __m128 half[2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const __m256d xd = _mm256_cvtps_pd(h == 0 ? _mm256_castps256_ps128(xv) : _mm256_extractf128_ps(xv, 1));
            __m256d kd = _mm256_fmadd_pd(inv_ln2_32, xd, shift);
            const __m256i ki = _mm256_castpd_si256(kd);
            kd = _mm256_sub_pd(kd, shift);
            const __m256d r = _mm256_fmsub_pd(inv_ln2_32, xd, kd);
            const __m256i t = _mm256_add_epi64(
                _mm256_i64gather_epi64((const long long *)(const void *)EXP2_32, _mm256_and_si256(ki, low5), 8),
                _mm256_slli_epi64(ki, 47));
            const __m256d z = _mm256_fmadd_pd(c0, r, c1), r2 = _mm256_mul_pd(r, r);
            __m256d y = _mm256_fmadd_pd(c2, r, one);
            y = _mm256_fmadd_pd(z, r2, y);
            half[h] = _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
        }
        const __m256i special = _mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(xv), absmask), big);
        if (_mm256_testz_si256(special, special)) {
            _mm256_storeu_ps(x + i, _mm256_set_m128(half[1], half[0]));
        } else {
            float in[8];
            _mm256_storeu_ps(in, xv);
            _mm256_storeu_ps(x + i, _mm256_set_m128(half[1], half[0]));
            for (int l = 0; l < 8; l++)
                if (!(fabsf(in[l]) < 88.0f)) x[i + l] = expf(in[l]);
        }
    }
    for (; i < n; i++) x[i] = expf(x[i]);
}
