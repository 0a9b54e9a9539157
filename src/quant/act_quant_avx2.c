/*
 * act_quant_avx2.c - AVX2/F16C versions of act_quant.c's conversions of one activation row
 * (Q8_0, Q8_K, F16 rounding), bitwise the portable ones: the same f32 products in the same
 * order, max-abs by exact vector maxima, round half to even by the hardware rounding (equal to
 * act_quant.c's magic-number rounding below 2^22, and either result is clamped to +-127 above),
 * NaN elements give q = 0, F16 by the IEEE conversion of F16C (round to nearest even). Compiled
 * with the AVX2 flags; the avx2 and avx512 kernel tables both point to this one copy, so the
 * code run on AVX-512 machines is the code tested on AVX2 ones. Activations are converted on the
 * calling thread while the pool waits, so this is serial time of every product (docs/QUANTS.md).
 */
#include <immintrin.h>
#include <string.h>

#include "kernels.h"
#include "repack.h"

/* round half to even, NaN -> 0, clamp to [-127, 127], as act_quant.c's clamp_q */
static inline __m256i q_of(__m256 v) {
    const __m256 ok = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
    __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(_mm256_and_ps(r, ok));
}

/* four vectors of 8 x i32 in [-127, 127] -> 32 x i8 in element order */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i p = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline __m256 abs8(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

/* max over 8 lanes (no NaN: NaN elements were skipped by max_ps's operand order) */
static inline float hmax8(__m256 m) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    return _mm_cvtss_f32(h);
}

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* The largest |x| of a 32-element block (max_ps(x, m) returns m when x is NaN: NaN elements
 * never raise the maximum). */
static inline float q8_0_amax(const float *xb) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) m = _mm256_max_ps(abs8(_mm256_loadu_ps(xb + 8 * i)), m);
    return hmax8(m);
}

/* A block's quants and integer sum, given its scale's reciprocal id. */
static inline void q8_0_block(const float *xb, float id, int8_t *qb, int32_t *sum) {
    const __m256 idv = _mm256_set1_ps(id);
    __m256i qi[4];
    for (int i = 0; i < 4; i++) qi[i] = q_of(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * i), idv));
    _mm256_storeu_si256((__m256i *)(void *)qb, pack32(qi[0], qi[1], qi[2], qi[3]));
    *sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
}

static void q8_0_row(const float *x, int64_t n, int8_t *q, float *d, int32_t *sums) {
    const int64_t nb = n / DS4RT_QK0;
    int64_t b0 = 0;
    /* 8 blocks at a time: their scales and reciprocals by two vector divisions (IEEE quotients,
     * the scalar ones' bits) instead of two dependent scalar divisions per block, whose latency
     * was most of a block's time (perf: this row conversion is serial time of every product) */
    for (; b0 + 8 <= nb; b0 += 8) {
        _Alignas(32) float mx[8], dbs[8], ids[8];
        for (int k = 0; k < 8; k++) mx[k] = q8_0_amax(x + (b0 + k) * DS4RT_QK0);
        const __m256 dbv = _mm256_div_ps(_mm256_load_ps(mx), _mm256_set1_ps(127.0f));
        const __m256 nz = _mm256_cmp_ps(dbv, _mm256_setzero_ps(), _CMP_NEQ_UQ); /* db != 0.0f */
        _mm256_store_ps(dbs, dbv);
        _mm256_store_ps(ids, _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), dbv), nz));
        for (int k = 0; k < 8; k++) {
            const int64_t b = b0 + k;
            q8_0_block(x + b * DS4RT_QK0, ids[k], q + b * DS4RT_QK0, &sums[b]);
            d[b] = dbs[k];
        }
    }
    for (int64_t b = b0; b < nb; b++) {
        const float db = q8_0_amax(x + b * DS4RT_QK0) / 127.0f;
        q8_0_block(x + b * DS4RT_QK0, db != 0.0f ? 1.0f / db : 0.0f, q + b * DS4RT_QK0, &sums[b]);
        d[b] = db;
    }
}

static void q8_K_row(const float *x, int64_t n, int8_t *q, float *d, int16_t *bsums) {
    for (int64_t b = 0; b < n / DS4RT_QK; b++) {
        const float *xb = x + b * DS4RT_QK;
        int8_t *qb = q + b * DS4RT_QK;
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < DS4RT_QK; i += 8) m = _mm256_max_ps(abs8(_mm256_loadu_ps(xb + i)), m);
        const float amax = hmax8(m);
        if (amax == 0.0f) {
            d[b] = 0.0f;
            memset(qb, 0, DS4RT_QK);
            memset(bsums + b * 16, 0, 16 * sizeof(int16_t));
            continue;
        }
        /* the first element of largest |x|, with its sign (act_quant.c's strict '>' scan) */
        float max = 0.0f;
        const __m256 am = _mm256_set1_ps(amax);
        for (int i = 0; i < DS4RT_QK; i += 8) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs8(_mm256_loadu_ps(xb + i)), am, _CMP_EQ_OQ));
            if (hit) {
                max = xb[i + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 isv = _mm256_set1_ps(iscale);
        for (int g = 0; g < DS4RT_QK; g += 32) {
            __m256i qi[4];
            for (int i = 0; i < 4; i++) qi[i] = q_of(_mm256_mul_ps(isv, _mm256_loadu_ps(xb + g + 8 * i)));
            _mm256_storeu_si256((__m256i *)(void *)(qb + g), pack32(qi[0], qi[1], qi[2], qi[3]));
            bsums[b * 16 + g / 16] = (int16_t)hsum_epi32(_mm256_add_epi32(qi[0], qi[1]));
            bsums[b * 16 + g / 16 + 1] = (int16_t)hsum_epi32(_mm256_add_epi32(qi[2], qi[3]));
        }
        d[b] = 1.0f / iscale;
    }
}

static void f16_row(const float *x, int64_t n, float *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) {
        const __m128i h = _mm_cvtps_ph(_mm_set_ss(x[i]), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        dst[i] = _mm_cvtss_f32(_mm_cvtph_ps(h));
    }
}

/* The X8 interleave of a converted Q8_0 row's quants (kernels.h, DS4RT_ACT_Q8_0_X8): within a
 * 256-column group, 32-bit word 8k + j of the output is word 8j + k of the input, an 8 x 8
 * transpose of words, here in registers; a half group at the end (4 blocks: word 4k + j from
 * word 8j + k) by word copies, as act_quant.c does. Then the sums times -128. */
static void x8_interleave(uint8_t *qs, int32_t *sums, int64_t cols) {
    int64_t c = 0;
    for (; c + DS4RT_X8_GROUP_COLS <= cols; c += DS4RT_X8_GROUP_COLS) {
        __m256i r[8], u[8], v[8];
        for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_si256((const __m256i *)(const void *)(qs + c + 32 * j));
        for (int j = 0; j < 8; j += 2) {
            u[j] = _mm256_unpacklo_epi32(r[j], r[j + 1]);
            u[j + 1] = _mm256_unpackhi_epi32(r[j], r[j + 1]);
        }
        for (int j = 0; j < 8; j += 4) {
            v[j] = _mm256_unpacklo_epi64(u[j], u[j + 2]);
            v[j + 1] = _mm256_unpackhi_epi64(u[j], u[j + 2]);
            v[j + 2] = _mm256_unpacklo_epi64(u[j + 1], u[j + 3]);
            v[j + 3] = _mm256_unpackhi_epi64(u[j + 1], u[j + 3]);
        }
        /* v[0..3]: words k = 0, 1, 2, 3 (low lane) and 4, 5, 6, 7 (high lane) of blocks 0..3;
         * v[4..7] the same of blocks 4..7 */
        for (int k = 0; k < 4; k++) {
            const __m256i lo = _mm256_permute2x128_si256(v[k], v[k + 4], 0x20);
            const __m256i hi = _mm256_permute2x128_si256(v[k], v[k + 4], 0x31);
            _mm256_storeu_si256((__m256i *)(void *)(qs + c + 32 * k), lo);
            _mm256_storeu_si256((__m256i *)(void *)(qs + c + 32 * (k + 4)), hi);
        }
    }
    if (c < cols) { /* the half group */
        uint8_t plain[DS4RT_X8_HALF_COLS];
        memcpy(plain, qs + c, sizeof plain);
        for (int k = 0; k < 8; k++)
            for (int j = 0; j < 4; j++) memcpy(qs + c + 16 * k + 4 * j, plain + 32 * j + 4 * k, 4);
    }
    for (int64_t b = 0; b < cols / DS4RT_QK0; b++) sums[b] *= -128;
}

int ds4rt_act_row_avx2(const ds4rt_act *a, int64_t t, const float *x) {
    uint8_t *row = a->base + (size_t)t * a->stride;
    switch (a->type) {
    case DS4RT_ACT_Q8_0_X8:
        if (a->cols % DS4RT_X8_HALF_COLS != 0) return 0; /* not an X8 row: the portable code says so */
        q8_0_row(x, a->cols, (int8_t *)row, (float *)(void *)(row + a->d_off), (int32_t *)(void *)(row + a->s_off));
        x8_interleave(row, (int32_t *)(void *)(row + a->s_off), a->cols);
        return 1;
    case DS4RT_TYPE_Q8_0:
        q8_0_row(x, a->cols, (int8_t *)row, (float *)(void *)(row + a->d_off), (int32_t *)(void *)(row + a->s_off));
        return 1;
    case DS4RT_TYPE_Q8_K:
        q8_K_row(x, a->cols, (int8_t *)row, (float *)(void *)(row + a->d_off), (int16_t *)(void *)(row + a->s_off));
        return 1;
    case DS4RT_TYPE_F16: f16_row(x, a->cols, (float *)(void *)row); return 1;
    default: return 0;
    }
}
