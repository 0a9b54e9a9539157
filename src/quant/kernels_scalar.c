/*
 * kernels_scalar.c - the portable dot-product kernels. They DEFINE the result every SIMD path
 * must reproduce bit for bit.
 *
 * Per weight block b (x = activation row; xd its block scale; all integer sums are exact):
 *   Q8_0   I = sum w_q * x_q                      s_b = (d * xd) * (float)I
 *   Q4_0   I = sum (q - 8) * x_q                  s_b = (d * xd) * (float)I
 *   MXFP4  I = sum kv[q] * x_q                    s_b = (2^(e-128) * xd) * (float)I
 *   Q2_K   A = sum_g (sc_g & 15) * sum q*x_q      s_b = (d*xd)*(float)A - (dmin*xd)*(float)B
 *          B = sum_g (sc_g >> 4) * bsum_g            (g = 16 groups of 16)
 *   Q4_K   A = sum_j sc_j * sum q*x_q             s_b = (d*xd)*(float)A - (dmin*xd)*(float)B
 *   Q5_K   B = sum_j m_j * (bsum_2j + bsum_2j+1)     (j = 8 sub-blocks of 32)
 *   Q6_K   A = sum_g sc_g * sum (q - 32)*x_q      s_b = (d * xd) * (float)A
 *   IQ2_XXS A = sum_s (2*(aux_s >> 28) + 1) * sum grid*sign*x_q
 *                                                 s_b = ((d * xd) * (float)A) * 0.125f
 * then acc[b % 8] += s_b and y = ds4rt_reduce8(acc). Float weights: acc[i % 32] += w_i * x_i,
 * y = ds4rt_reduce32(acc). The acc_* functions add the terms of columns [k0, k1) to acc; the
 * driver (matmul.c) zeroes acc and reduces it.
 */
#include "kernels.h"
#include "quant_tables.h"
#include "repack.h"

/* ---------------- float weights ---------------- */

static void acc_f32(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const float *x = ds4rt_act_f32(a, t);
    for (int64_t i = k0; i < k1; i++) {
        float wi;
        memcpy(&wi, w + 4 * i, 4);
        acc[i & 31] += wi * x[i];
    }
}

static void acc_f16(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const float *x = ds4rt_act_f32(a, t);
    for (int64_t i = k0; i < k1; i++) acc[i & 31] += ds4rt_rd_f16(w + 2 * i) * x[i];
}

static void acc_bf16(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const float *x = ds4rt_act_f32(a, t);
    for (int64_t i = k0; i < k1; i++) acc[i & 31] += ds4rt_bf16_to_f32(ds4rt_rd_u16(w + 2 * i)) * x[i];
}

/* ---------------- 32-element blocks with Q8_0 activations ---------------- */

static void acc_q8_0(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    for (int64_t b = k0 / 32; b < k1 / 32; b++) {
        const ds4rt_block_q8_0 *blk = (const ds4rt_block_q8_0 *)(const void *)(w + b * 34);
        int32_t isum = 0;
        for (int i = 0; i < 32; i++) isum += blk->qs[i] * xq[b * 32 + i];
        acc[b & 7] += (ds4rt_rd_f16(blk->d) * xd[b]) * (float)isum;
    }
}

/* X8 layout (repack.h): group g holds blocks 8g..8g+7, block j's quants at bytes 32k + 4j + m
 * of the group's quant area (16k + 4j + m in a last half group of 4 blocks), biased by +128; the activation row is interleaved the same way
 * and carries -128 * (block quant sum), so the integer sum is exactly the file layout's. */
static void acc_q8_0_x8(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    const int32_t *bias = ds4rt_act_sum32(a, t);
    /* whole groups, then the half group of a row of 256 G + 128 columns (k1 = cols) */
    for (int64_t g = k0 / DS4RT_X8_GROUP_COLS; g * DS4RT_X8_GROUP_COLS < k1; g++) {
        const int nb = k1 - g * DS4RT_X8_GROUP_COLS < DS4RT_X8_GROUP_COLS ? 4 : 8;
        const uint8_t *wg = w + g * DS4RT_X8_GROUP_BYTES;
        const int8_t *xg = xq + g * DS4RT_X8_GROUP_COLS;
        for (int j = 0; j < nb; j++) {
            int32_t isum = bias[8 * g + j];
            for (int k = 0; k < 8; k++)
                for (int m = 0; m < 4; m++)
                    isum += (int32_t)wg[2 * nb + 4 * nb * k + 4 * j + m] * xg[4 * nb * k + 4 * j + m];
            acc[j] += (ds4rt_rd_f16(wg + 2 * j) * xd[8 * g + j]) * (float)isum;
        }
    }
}

void ds4rt_dot_q8_0_x8_portable(const uint8_t *w, const ds4rt_act *a, int64_t t0, int n_tok, int64_t k0, int64_t k1,
                                float *lanes, int64_t ls) {
    for (int i = 0; i < n_tok; i++) acc_q8_0_x8(w, a, t0 + i, k0, k1, lanes + i * ls);
}

/* R16 layout (repack.h): block b of row i of a panel is in record (b / 8, b % 8), its scale at
 * byte 2i, quant 4k + m at 32 + 64k + 4i + m, biased by +128; the activation is X8's. Each
 * row's lanes and reduction are those of every other layout. */
void ds4rt_rows_q8_0_r16_portable(const uint8_t *w, uint64_t rb, int64_t nr, const ds4rt_act *a, int64_t t0,
                                  int64_t nt, float *y, int64_t ys) {
    const int64_t nb = a->cols / 32, full = a->cols / DS4RT_X8_GROUP_COLS;
    for (int64_t r = 0; r < nr; r++) {
        const uint8_t *panel = w + (uint64_t)(r / DS4RT_R16_ROWS) * DS4RT_R16_ROWS * rb;
        const int i = (int)(r % DS4RT_R16_ROWS);
        for (int64_t t = t0; t < t0 + nt; t++) {
            const int8_t *xq = ds4rt_act_qs(a, t);
            const float *xd = ds4rt_act_d(a, t);
            const int32_t *bias = ds4rt_act_sum32(a, t);
            float acc[DS4RT_QLANES] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const int64_t g = b / 8;
                const int j = (int)(b % 8), ks = g < full ? 32 : 16; /* X8's quant stride: group or half */
                const uint8_t *rec = panel + ds4rt_r16_record(g, j, g >= full);
                const int8_t *xg = xq + g * DS4RT_X8_GROUP_COLS;
                int32_t isum = bias[b];
                for (int k = 0; k < 8; k++)
                    for (int m = 0; m < 4; m++) isum += (int32_t)rec[32 + 64 * k + 4 * i + m] * xg[ks * k + 4 * j + m];
                acc[j] += (ds4rt_rd_f16(rec + 2 * i) * xd[b]) * (float)isum;
            }
            y[(t - t0) * ys + r] = ds4rt_reduce8(acc);
        }
    }
}

static void acc_q4_0(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    for (int64_t b = k0 / 32; b < k1 / 32; b++) {
        const ds4rt_block_q4_0 *blk = (const ds4rt_block_q4_0 *)(const void *)(w + b * 18);
        const int8_t *x = xq + b * 32;
        int32_t isum = 0;
        for (int i = 0; i < 16; i++)
            isum += ((blk->qs[i] & 15) - 8) * x[i] + ((blk->qs[i] >> 4) - 8) * x[i + 16];
        acc[b & 7] += (ds4rt_rd_f16(blk->d) * xd[b]) * (float)isum;
    }
}

static void acc_mxfp4(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    for (int64_t b = k0 / 32; b < k1 / 32; b++) {
        const ds4rt_block_mxfp4 *blk = (const ds4rt_block_mxfp4 *)(const void *)(w + b * 17);
        const int8_t *x = xq + b * 32;
        int32_t isum = 0;
        for (int i = 0; i < 16; i++)
            isum += ds4rt_mxfp4_values[blk->qs[i] & 15] * x[i] + ds4rt_mxfp4_values[blk->qs[i] >> 4] * x[i + 16];
        acc[b & 7] += (ds4rt_e8m0_half(blk->e) * xd[b]) * (float)isum;
    }
}

/* ---------------- 256-element blocks with Q8_K activations ---------------- */

static void acc_q2_K(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    const int16_t *bs = ds4rt_act_bsums(a, t);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q2_K *blk = (const ds4rt_block_q2_K *)(const void *)(w + b * 84);
        const int8_t *x = xq + b * 256;
        int32_t A = 0, B = 0;
        for (int g = 0; g < 16; g++) {
            const int n = g / 8, j = (g % 8) / 2, half = g % 2;
            int32_t s = 0;
            for (int l = 0; l < 16; l++) {
                const int i = 16 * half + l;
                s += ((blk->qs[32 * n + i] >> (2 * j)) & 3) * x[128 * n + 32 * j + i];
            }
            A += (blk->scales[g] & 15) * s;
            B += (blk->scales[g] >> 4) * bs[b * 16 + g];
        }
        const float dx = ds4rt_rd_f16(blk->d) * xd[b], mx = ds4rt_rd_f16(blk->dmin) * xd[b];
        acc[b & 7] += dx * (float)A - mx * (float)B;
    }
}

static void acc_q4_K(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    const int16_t *bs = ds4rt_act_bsums(a, t);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q4_K *blk = (const ds4rt_block_q4_K *)(const void *)(w + b * 144);
        const int8_t *x = xq + b * 256;
        int32_t A = 0, B = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            ds4rt_k4_scale_min(blk->scales, j, &sc, &m);
            const int c = j / 2, sh = 4 * (j % 2);
            int32_t s = 0;
            for (int l = 0; l < 32; l++) s += ((blk->qs[32 * c + l] >> sh) & 15) * x[32 * j + l];
            A += sc * s;
            B += m * (bs[b * 16 + 2 * j] + bs[b * 16 + 2 * j + 1]);
        }
        const float dx = ds4rt_rd_f16(blk->d) * xd[b], mx = ds4rt_rd_f16(blk->dmin) * xd[b];
        acc[b & 7] += dx * (float)A - mx * (float)B;
    }
}

static void acc_q5_K(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    const int16_t *bs = ds4rt_act_bsums(a, t);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q5_K *blk = (const ds4rt_block_q5_K *)(const void *)(w + b * 176);
        const int8_t *x = xq + b * 256;
        int32_t A = 0, B = 0;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            ds4rt_k4_scale_min(blk->scales, j, &sc, &m);
            const int c = j / 2, sh = 4 * (j % 2);
            int32_t s = 0;
            for (int l = 0; l < 32; l++) {
                const int q = ((blk->qs[32 * c + l] >> sh) & 15) | (((blk->qh[l] >> j) & 1) << 4);
                s += q * x[32 * j + l];
            }
            A += sc * s;
            B += m * (bs[b * 16 + 2 * j] + bs[b * 16 + 2 * j + 1]);
        }
        const float dx = ds4rt_rd_f16(blk->d) * xd[b], mx = ds4rt_rd_f16(blk->dmin) * xd[b];
        acc[b & 7] += dx * (float)A - mx * (float)B;
    }
}

static void acc_q6_K(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_q6_K *blk = (const ds4rt_block_q6_K *)(const void *)(w + b * 210);
        const int8_t *x = xq + b * 256;
        int32_t A = 0;
        for (int g = 0; g < 16; g++) {
            int32_t s = 0;
            for (int l = 0; l < 16; l++) {
                const int e = 16 * g + l, h = e / 128, i = e % 128, k = i / 32;
                const int lo = i < 64 ? blk->ql[64 * h + i] & 15 : blk->ql[64 * h + i - 64] >> 4;
                const int hi = (blk->qh[32 * h + (i % 32)] >> (2 * k)) & 3;
                s += ((lo | (hi << 4)) - 32) * x[e];
            }
            A += blk->scales[g] * s;
        }
        acc[b & 7] += (ds4rt_rd_f16(blk->d) * xd[b]) * (float)A;
    }
}

static void acc_iq2_xxs(const uint8_t *w, const ds4rt_act *a, int64_t t, int64_t k0, int64_t k1, float *acc) {
    const int8_t *xq = ds4rt_act_qs(a, t);
    const float *xd = ds4rt_act_d(a, t);
    for (int64_t b = k0 / 256; b < k1 / 256; b++) {
        const ds4rt_block_iq2_xxs *blk = (const ds4rt_block_iq2_xxs *)(const void *)(w + b * 66);
        const int8_t *x = xq + b * 256;
        int32_t A = 0;
        for (int s = 0; s < 8; s++) {
            const uint8_t *idx = blk->qs + 8 * s; /* four grid indices, then the sign/scale word */
            const uint32_t aux = ds4rt_rd_u32(blk->qs + 8 * s + 4);
            int32_t is = 0;
            for (int g = 0; g < 4; g++) {
                const uint64_t grid = ds4rt_iq2xxs_grid[idx[g]];
                const uint8_t signs = ds4rt_ksigns[(aux >> (7 * g)) & 127];
                for (int j = 0; j < 8; j++) {
                    const int v = (int)((grid >> (8 * j)) & 0xff) * x[32 * s + 8 * g + j];
                    is += (signs >> j) & 1 ? -v : v;
                }
            }
            A += (int32_t)(2 * (aux >> 28) + 1) * is;
        }
        acc[b & 7] += ((ds4rt_rd_f16(blk->d) * xd[b]) * (float)A) * 0.125f;
    }
}

#define DEF_TILE(name)                                                                            \
    static void dot_##name(const uint8_t *w, const ds4rt_act *a, int64_t t0, int n_tok, int64_t k0,    \
                           int64_t k1, float *lanes, int64_t ls) {                                     \
        for (int i = 0; i < n_tok; i++) acc_##name(w, a, t0 + i, k0, k1, lanes + i * ls);              \
    }
DEF_TILE(f32)
DEF_TILE(f16)
DEF_TILE(bf16)
DEF_TILE(q8_0)
DEF_TILE(q4_0)
DEF_TILE(mxfp4)
DEF_TILE(q2_K)
DEF_TILE(q4_K)
DEF_TILE(q5_K)
DEF_TILE(q6_K)
DEF_TILE(iq2_xxs)

const ds4rt_cpu_kernels ds4rt_kernels_scalar = {
    .name = "scalar",
    .dot = {
        [DS4RT_TYPE_F32] = dot_f32,
        [DS4RT_TYPE_F16] = dot_f16,
        [DS4RT_TYPE_BF16] = dot_bf16,
        [DS4RT_TYPE_Q8_0] = dot_q8_0,
        [DS4RT_TYPE_Q4_0] = dot_q4_0,
        [DS4RT_TYPE_MXFP4] = dot_mxfp4,
        [DS4RT_TYPE_Q2_K] = dot_q2_K,
        [DS4RT_TYPE_Q4_K] = dot_q4_K,
        [DS4RT_TYPE_Q5_K] = dot_q5_K,
        [DS4RT_TYPE_Q6_K] = dot_q6_K,
        [DS4RT_TYPE_IQ2_XXS] = dot_iq2_xxs,
    },
    .dot_q8_0_x8 = ds4rt_dot_q8_0_x8_portable,
    .rows_q8_0_r16 = ds4rt_rows_q8_0_r16_portable,
    .q8_0_layout = DS4RT_LAYOUT_FILE,
};
