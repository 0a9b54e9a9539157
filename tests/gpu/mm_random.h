/*
 * mm_random.h - random weights and activations for the GPU matrix-product test and benchmark
 * (tests/gpu/test_mm.c, bench_mm.c): valid blocks of every type the CPU computes, with scales
 * of order 0.01 (finite, normal), float weights of order 1.
 */
#ifndef DS4RT_TESTS_MM_RANDOM_H
#define DS4RT_TESTS_MM_RANDOM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ds4rt.h"

static uint64_t rng;
static inline uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next_u64() >> 11) * 0x1.0p-53); }

/* f16 bits of v (mantissa truncated): for normal values of order 0.001..1 only. */
static inline uint16_t f16_bits(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    /* positive normal values of order 0.001..1 only (scales and float weights) */
    int e;
    const float m = frexpf(fabsf(v), &e);
    uint16_t h = (uint16_t)(((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024));
    return (uint16_t)(h | (u >> 31 ? 0x8000u : 0));
}

typedef struct {
    uint32_t type;
    const char *name;
    int f16_at[2]; /* byte offsets of f16 scales in a block, -1: none */
    int e8m0_at;
} type_case;

static const type_case TYPES[] = {
    {DS4RT_TYPE_F32, "F32", {-1, -1}, -1},     {DS4RT_TYPE_F16, "F16", {-1, -1}, -1},
    {DS4RT_TYPE_BF16, "BF16", {-1, -1}, -1},   {DS4RT_TYPE_Q8_0, "Q8_0", {0, -1}, -1},
    {DS4RT_TYPE_Q4_0, "Q4_0", {0, -1}, -1},    {DS4RT_TYPE_MXFP4, "MXFP4", {-1, -1}, 0},
    {DS4RT_TYPE_Q2_K, "Q2_K", {80, 82}, -1},   {DS4RT_TYPE_Q4_K, "Q4_K", {0, 2}, -1},
    {DS4RT_TYPE_Q5_K, "Q5_K", {0, 2}, -1},     {DS4RT_TYPE_Q6_K, "Q6_K", {208, -1}, -1},
    {DS4RT_TYPE_IQ2_XXS, "IQ2_XXS", {0, -1}, -1},
};

static inline int is_float_type(uint32_t t) { return t == DS4RT_TYPE_F32 || t == DS4RT_TYPE_F16 || t == DS4RT_TYPE_BF16; }

/* Random rows with values of order 1 (float types) or random blocks with scales of order 0.01. */
static inline void random_rows(const type_case *tc, uint8_t *w, int64_t rows, int64_t cols, uint64_t row_bytes) {
    ds4rt_type_info ti;
    ds4rt_type_get_info(tc->type, &ti);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + r * row_bytes;
        if (is_float_type(tc->type)) {
            for (int64_t i = 0; i < cols; i++) {
                float v = uniform(-1, 1);
                if (fabsf(v) < 1e-3f) v = 0.5f;
                if (tc->type == DS4RT_TYPE_F32) {
                    memcpy(row + 4 * i, &v, 4);
                } else if (tc->type == DS4RT_TYPE_BF16) {
                    uint32_t u;
                    memcpy(&u, &v, 4);
                    const uint16_t h = (uint16_t)(u >> 16);
                    memcpy(row + 2 * i, &h, 2);
                } else {
                    const uint16_t h = f16_bits(v);
                    memcpy(row + 2 * i, &h, 2);
                }
            }
            continue;
        }
        for (uint64_t i = 0; i < row_bytes; i++) row[i] = (uint8_t)next_u64();
        for (int64_t b = 0; b < cols / ti.block_elems; b++) {
            uint8_t *blk = row + b * ti.block_bytes;
            for (int s = 0; s < 2; s++)
                if (tc->f16_at[s] >= 0) {
                    const uint16_t h = f16_bits(uniform(0.002f, 0.05f));
                    memcpy(blk + tc->f16_at[s], &h, 2);
                }
            if (tc->e8m0_at >= 0) blk[tc->e8m0_at] = (uint8_t)(121 + next_u64() % 6);
        }
    }
}

/* Activations of order 1, with the cases the conversion must get right mixed in: an all-zero
 * 32-block, a 256-block whose largest |x| appears twice with opposite signs, a large value. */
static inline void random_x(float *x, int64_t n, int64_t cols) {
    for (int64_t i = 0; i < n * cols; i++) x[i] = uniform(-2, 2);
    for (int64_t t = 0; t < n; t++) {
        float *r = x + t * cols;
        if (t % 3 == 1 && cols >= 32) memset(r, 0, 32 * sizeof(float));
        if (t % 4 == 2 && cols >= 256) {
            r[cols - 256 + 5] = -3.5f;
            r[cols - 256 + 77] = 3.5f;
        }
        if (t % 5 == 3) r[cols / 2] = 1000.0f;
    }
}

#endif /* DS4RT_TESTS_MM_RANDOM_H */
