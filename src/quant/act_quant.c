/*
 * act_quant.c - converts f32 activation rows into the type paired with the weight type.
 *
 * Every ISA path sees bitwise the same activations: this portable code is the definition, and
 * a path's SIMD version (ds4rt_cpu_kernels.act_row, e.g. act_quant_avx2.c) reproduces it.
 * Rounding rule: round half to even (the default IEEE mode), done as (v + 1.5*2^23) - 1.5*2^23,
 * exact for |v| < 2^22. This is what ds4's lrintf and llama.cpp's x86 SIMD quantisers do.
 *   Q8_0 (per 32): d = amax/127, q = rne(x * (1/d)) (q = 0 when d = 0), d kept as f32.
 *   Q8_K (per 256): m = the first element of largest |x| (with its sign), iscale = -127/m,
 *                   q = rne(iscale * x), d = 1/iscale; bsums = sums of each 16 q.
 * q is clamped to [-127, 127]; finite inputs never reach the clamp. A NaN input element gives
 * q = 0 (results are then meaningless, but nothing traps).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "repack.h"

static inline float round_half_even(float v) {
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return (v + magic) - magic;
}

static inline int8_t clamp_q(float v) {
    float r = fabsf(v) < 4194304.0f ? round_half_even(v) : v;
    if (r != r) return 0;
    if (r > 127.0f) r = 127.0f;
    if (r < -127.0f) r = -127.0f;
    return (int8_t)r;
}

static inline size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

uint32_t ds4rt_act_type_for(uint32_t wtype, int *ok) {
    *ok = 1;
    switch (wtype) {
    case DS4RT_TYPE_F32: return DS4RT_TYPE_F32;
    case DS4RT_TYPE_F16: return DS4RT_TYPE_F16;
    case DS4RT_TYPE_BF16: return DS4RT_TYPE_BF16;
    case DS4RT_TYPE_Q8_0:
    case DS4RT_TYPE_Q4_0:
    case DS4RT_TYPE_MXFP4: return DS4RT_TYPE_Q8_0;
    case DS4RT_TYPE_Q2_K:
    case DS4RT_TYPE_Q4_K:
    case DS4RT_TYPE_Q5_K:
    case DS4RT_TYPE_Q6_K:
    case DS4RT_TYPE_IQ2_XXS: return DS4RT_TYPE_Q8_K;
    default: *ok = 0; return 0;
    }
}

uint32_t ds4rt_act_type_for_layout(uint32_t wtype, uint32_t layout, int *ok) {
    if (layout == DS4RT_LAYOUT_FILE) return ds4rt_act_type_for(wtype, ok);
    *ok = (layout == DS4RT_LAYOUT_Q8_0_X8 || layout == DS4RT_LAYOUT_Q8_0_R16) && wtype == DS4RT_TYPE_Q8_0;
    return *ok ? DS4RT_ACT_Q8_0_X8 : 0;
}

void ds4rt_act_layout(uint32_t act_type, int64_t cols, ds4rt_act *a) {
    const size_t n = (size_t)cols;
    a->type = act_type;
    a->cols = cols;
    switch (act_type) {
    case DS4RT_TYPE_Q8_0:
    case DS4RT_ACT_Q8_0_X8:
        a->d_off = align64(n);
        a->s_off = a->d_off + align64(n / DS4RT_QK0 * sizeof(float));
        a->stride = a->s_off + align64(n / DS4RT_QK0 * sizeof(int32_t));
        break;
    case DS4RT_TYPE_Q8_K:
        a->d_off = align64(n);
        a->s_off = a->d_off + align64(n / DS4RT_QK * sizeof(float));
        a->stride = a->s_off + align64(n / 16 * sizeof(int16_t));
        break;
    default: /* F32 storage, also for F16/BF16-rounded values */
        a->d_off = a->s_off = 0;
        a->stride = align64(n * sizeof(float));
        break;
    }
}

static void quantize_q8_0(const float *x, int64_t n, int8_t *q, float *d, int32_t *sums) {
    for (int64_t b = 0; b < n / DS4RT_QK0; b++) {
        const float *xb = x + b * DS4RT_QK0;
        float amax = 0.0f;
        for (int i = 0; i < DS4RT_QK0; i++) {
            const float ax = fabsf(xb[i]);
            if (ax > amax) amax = ax;
        }
        const float db = amax / 127.0f;
        const float id = db != 0.0f ? 1.0f / db : 0.0f;
        int32_t s = 0;
        for (int i = 0; i < DS4RT_QK0; i++) {
            const int8_t v = clamp_q(xb[i] * id);
            q[b * DS4RT_QK0 + i] = v;
            s += v;
        }
        d[b] = db;
        sums[b] = s;
    }
}

static void quantize_q8_K(const float *x, int64_t n, int8_t *q, float *d, int16_t *bsums) {
    for (int64_t b = 0; b < n / DS4RT_QK; b++) {
        const float *xb = x + b * DS4RT_QK;
        int8_t *qb = q + b * DS4RT_QK;
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < DS4RT_QK; i++) {
            const float ax = fabsf(xb[i]);
            if (ax > amax) {
                amax = ax;
                max = xb[i];
            }
        }
        if (amax == 0.0f) {
            d[b] = 0.0f;
            memset(qb, 0, DS4RT_QK);
            memset(bsums + b * 16, 0, 16 * sizeof(int16_t));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int i = 0; i < DS4RT_QK; i++) qb[i] = clamp_q(iscale * xb[i]);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += qb[g * 16 + i];
            bsums[b * 16 + g] = (int16_t)s;
        }
        d[b] = 1.0f / iscale;
    }
}

/* The Q8_0 row, then each 256-column group's (and a last half group's) quants interleaved as
 * the X8 weights' are and
 * each block's sum turned into the bias correction -128 * sum (kernels.h). */
static void quantize_q8_0_x8(const ds4rt_act *a, int64_t t, const float *x) {
    ds4rt_act q = *a;
    q.type = DS4RT_TYPE_Q8_0;
    ds4rt_act_quantize_row(&q, t, x);
    uint8_t *row = a->base + (size_t)t * a->stride;
    int32_t *sums = (int32_t *)(void *)(row + a->s_off);
    for (int64_t c = 0; c < a->cols; c += DS4RT_X8_GROUP_COLS) {
        const int nb = a->cols - c < DS4RT_X8_GROUP_COLS ? 4 : 8; /* a half group at the end */
        uint8_t *qs = row + c, plain[DS4RT_X8_GROUP_COLS];
        memcpy(plain, qs, (size_t)nb * DS4RT_QK0);
        for (int k = 0; k < 8; k++)
            for (int j = 0; j < nb; j++) memcpy(qs + 4 * nb * k + 4 * j, plain + 32 * j + 4 * k, 4);
    }
    for (int64_t b = 0; b < a->cols / DS4RT_QK0; b++) sums[b] *= -128;
}

void ds4rt_act_quantize_row(const ds4rt_act *a, int64_t t, const float *x) {
    const ds4rt_cpu_kernels *k = ds4rt_cpu_active();
    if (k->act_row != NULL && k->act_row(a, t, x)) return; /* the same bits, in SIMD */
    if (a->type == DS4RT_ACT_Q8_0_X8) {
        quantize_q8_0_x8(a, t, x);
        return;
    }
    uint8_t *row = a->base + (size_t)t * a->stride;
    const int64_t n = a->cols;
    switch (a->type) {
    case DS4RT_TYPE_Q8_0:
        quantize_q8_0(x, n, (int8_t *)row, (float *)(void *)(row + a->d_off),
                      (int32_t *)(void *)(row + a->s_off));
        break;
    case DS4RT_TYPE_Q8_K:
        quantize_q8_K(x, n, (int8_t *)row, (float *)(void *)(row + a->d_off),
                      (int16_t *)(void *)(row + a->s_off));
        break;
    case DS4RT_TYPE_F16: {
        float *dst = (float *)(void *)row;
        for (int64_t i = 0; i < n; i++) dst[i] = ds4rt_f16_to_f32(ds4rt_f32_to_f16(x[i]));
        break;
    }
    case DS4RT_TYPE_BF16: {
        float *dst = (float *)(void *)row;
        for (int64_t i = 0; i < n; i++) dst[i] = ds4rt_bf16_to_f32(ds4rt_f32_to_bf16(x[i]));
        break;
    }
    default: memcpy(row, x, (size_t)n * sizeof(float)); break;
    }
}
