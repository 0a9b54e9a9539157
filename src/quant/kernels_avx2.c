/*
 * kernels_avx2.c - AVX2 (+F16C, BMI1/2) dot-product kernels; compiled with -mavx2 -mfma -mf16c
 * -mbmi -mbmi2 and used only when the CPU has them (cpu_isa.c). They reproduce kernels_scalar.c
 * bit for bit: integer sums are exact, and the f32 terms and lane accumulation follow the same
 * formulas and order. The kernels themselves are in kernels_avx2_tiles.h.
 */
#include "kernels_avx2_tiles.h"

/* ================= dispatch on the tile size (kernels.h, DS4RT_DEF_DOT_DISPATCH) ================= */

#define C_Q8_0(T) avx2_tile_blk32(0, 34, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q4_0(T) avx2_tile_blk32(1, 18, w, a, t0, T, k0, k1, lanes, ls)
#define C_MXFP4(T) avx2_tile_blk32(2, 17, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q2_K(T) avx2_tile_q2_K(w, a, t0, T, k0, k1, lanes, ls)
#define C_Q4_K(T) avx2_tile_q45_K(0, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q5_K(T) avx2_tile_q45_K(1, w, a, t0, T, k0, k1, lanes, ls)
#define C_Q6_K(T) avx2_tile_q6_K(w, a, t0, T, k0, k1, lanes, ls)
#define C_IQ2_XXS(T) avx2_tile_iq2_xxs(w, a, t0, T, k0, k1, lanes, ls)

DS4RT_DEF_DOTS()

const ds4rt_cpu_kernels ds4rt_kernels_avx2 = {
    .name = "avx2",
    .dot = {
        [DS4RT_TYPE_F32] = avx2_dot_f32,
        [DS4RT_TYPE_F16] = avx2_dot_f16,
        [DS4RT_TYPE_BF16] = avx2_dot_bf16,
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
    .act_row = ds4rt_act_row_avx2,
};
