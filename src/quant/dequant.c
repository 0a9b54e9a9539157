/*
 * dequant.c - weight blocks to f32, bit-exact with gguf-py 0.19.0's dequantize(): the same f32
 * operations in the same order (e.g. Q4_K: (d*sc)*q - dmin*m, never fused).
 */
#include <string.h>

#include "internal.h"
#include "kernels.h"
#include "matmul.h"
#include "qtypes.h"
#include "quant_tables.h"

static void deq_q8_0(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 34, y += 32) {
        const ds4rt_block_q8_0 *blk = (const ds4rt_block_q8_0 *)(const void *)src;
        const float d = ds4rt_rd_f16(blk->d);
        for (int i = 0; i < 32; i++) y[i] = (float)blk->qs[i] * d;
    }
}

static void deq_q4_0(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 18, y += 32) {
        const ds4rt_block_q4_0 *blk = (const ds4rt_block_q4_0 *)(const void *)src;
        const float d = ds4rt_rd_f16(blk->d);
        for (int i = 0; i < 16; i++) {
            y[i] = d * (float)((blk->qs[i] & 15) - 8);
            y[i + 16] = d * (float)((blk->qs[i] >> 4) - 8);
        }
    }
}

static void deq_mxfp4(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 17, y += 32) {
        const ds4rt_block_mxfp4 *blk = (const ds4rt_block_mxfp4 *)(const void *)src;
        const float d = ds4rt_e8m0_half(blk->e);
        for (int i = 0; i < 16; i++) {
            y[i] = d * (float)ds4rt_mxfp4_values[blk->qs[i] & 15];
            y[i + 16] = d * (float)ds4rt_mxfp4_values[blk->qs[i] >> 4];
        }
    }
}

static void deq_q2_K(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 84, y += 256) {
        const ds4rt_block_q2_K *blk = (const ds4rt_block_q2_K *)(const void *)src;
        const float d = ds4rt_rd_f16(blk->d), dmin = ds4rt_rd_f16(blk->dmin);
        for (int e = 0; e < 256; e++) {
            const int n = e / 128, j = (e % 128) / 32, i = e % 32;
            const uint8_t sc = blk->scales[e / 16];
            const float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
            y[e] = dl * (float)((blk->qs[32 * n + i] >> (2 * j)) & 3) - ml;
        }
    }
}

static void deq_q4_K(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 144, y += 256) {
        const ds4rt_block_q4_K *blk = (const ds4rt_block_q4_K *)(const void *)src;
        const float d = ds4rt_rd_f16(blk->d), dmin = ds4rt_rd_f16(blk->dmin);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            ds4rt_k4_scale_min(blk->scales, j, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const int c = j / 2, sh = 4 * (j % 2);
            for (int l = 0; l < 32; l++) y[32 * j + l] = dl * (float)((blk->qs[32 * c + l] >> sh) & 15) - ml;
        }
    }
}

static void deq_q5_K(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 176, y += 256) {
        const ds4rt_block_q5_K *blk = (const ds4rt_block_q5_K *)(const void *)src;
        const float d = ds4rt_rd_f16(blk->d), dmin = ds4rt_rd_f16(blk->dmin);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            ds4rt_k4_scale_min(blk->scales, j, &sc, &m);
            const float dl = d * (float)sc, ml = dmin * (float)m;
            const int c = j / 2, sh = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                const int q = ((blk->qs[32 * c + l] >> sh) & 15) | (((blk->qh[l] >> j) & 1) << 4);
                y[32 * j + l] = dl * (float)q - ml;
            }
        }
    }
}

static void deq_q6_K(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 210, y += 256) {
        const ds4rt_block_q6_K *blk = (const ds4rt_block_q6_K *)(const void *)src;
        const float d = ds4rt_rd_f16(blk->d);
        for (int e = 0; e < 256; e++) {
            const int h = e / 128, i = e % 128, k = i / 32;
            const int lo = i < 64 ? blk->ql[64 * h + i] & 15 : blk->ql[64 * h + i - 64] >> 4;
            const int hi = (blk->qh[32 * h + (i % 32)] >> (2 * k)) & 3;
            y[e] = (d * (float)blk->scales[e / 16]) * (float)((lo | (hi << 4)) - 32);
        }
    }
}

static void deq_iq2_xxs(const uint8_t *src, int64_t nb, float *y) {
    for (int64_t b = 0; b < nb; b++, src += 66, y += 256) {
        const ds4rt_block_iq2_xxs *blk = (const ds4rt_block_iq2_xxs *)(const void *)src;
        const float d = ds4rt_rd_f16(blk->d);
        for (int s = 0; s < 8; s++) {
            const uint32_t aux = ds4rt_rd_u32(blk->qs + 8 * s + 4);
            const float db = (d * (0.5f + (float)(aux >> 28))) * 0.25f;
            for (int g = 0; g < 4; g++) {
                const uint64_t grid = ds4rt_iq2xxs_grid[blk->qs[8 * s + g]];
                const uint8_t signs = ds4rt_ksigns[(aux >> (7 * g)) & 127];
                for (int j = 0; j < 8; j++) {
                    const float v = db * (float)((grid >> (8 * j)) & 0xff);
                    y[32 * s + 8 * g + j] = (signs >> j) & 1 ? -v : v;
                }
            }
        }
    }
}

ds4rt_status ds4rt_dequantize_row(uint32_t type, const void *src, int64_t n, float *dst) {
    const ds4rt_type_info *info = ds4rt_type_lookup(type);
    if (info == NULL) return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "dequantize: unknown tensor type id %u", type);
    if (!ds4rt_type_is_computable(type))
        return ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "dequantize: type %s is not supported by the CPU backend",
                          info->name);
    if (n < 0 || n % info->block_elems != 0)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                          "dequantize: %lld elements is not a whole number of %s blocks (%u)",
                          (long long)n, info->name, info->block_elems);
    if (n == 0) return DS4RT_OK;
    if (src == NULL || dst == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "dequantize: %s is NULL", src == NULL ? "src" : "dst");
    const uint8_t *s = src;
    const int64_t nb = n / info->block_elems;
    switch (type) {
    case DS4RT_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case DS4RT_TYPE_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = ds4rt_rd_f16(s + 2 * i);
        break;
    case DS4RT_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = ds4rt_bf16_to_f32(ds4rt_rd_u16(s + 2 * i));
        break;
    case DS4RT_TYPE_Q8_0: deq_q8_0(s, nb, dst); break;
    case DS4RT_TYPE_Q4_0: deq_q4_0(s, nb, dst); break;
    case DS4RT_TYPE_MXFP4: deq_mxfp4(s, nb, dst); break;
    case DS4RT_TYPE_Q2_K: deq_q2_K(s, nb, dst); break;
    case DS4RT_TYPE_Q4_K: deq_q4_K(s, nb, dst); break;
    case DS4RT_TYPE_Q5_K: deq_q5_K(s, nb, dst); break;
    case DS4RT_TYPE_Q6_K: deq_q6_K(s, nb, dst); break;
    case DS4RT_TYPE_IQ2_XXS: deq_iq2_xxs(s, nb, dst); break;
    default:
        return ds4rt_fail(DS4RT_ERR_INTERNAL, "dequantize: type %s listed as computable but has no dequantiser",
                          info->name);
    }
    return DS4RT_OK;
}
