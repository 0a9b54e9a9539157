/*
 * ds4rt_testing.h - entry points libds4rt exports for its tests and for ds4rt.ops, but not as
 * part of the product: single CPU tensor ops (dequantisation, a quantised matrix product on a
 * process-wide pool, activation rounding), the CPU kernel path choice, and single GPU kernels.
 * Not installed; the product's header is include/ds4rt.h. ABI 1.0 declared these in ds4rt.h,
 * so they stay exported with the same signatures (tests/abi/abi_1_0.txt), but they may change
 * in a later major version without notice.
 */
#ifndef DS4RT_TESTING_H
#define DS4RT_TESTING_H

#include "ds4rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* CPU tensor ops: dequantisation and quantised matrix products (docs/QUANTS.md)              */
/* ------------------------------------------------------------------------------------------ */
/* Types computed: F32, F16, BF16, Q8_0, Q4_0, MXFP4, Q2_K, Q4_K, Q5_K, Q6_K, IQ2_XXS (see     */
/* ds4rt_type_info.compute). Results are bitwise the same on every CPU path (scalar, AVX2,    */
/* AVX-512, NEON), for any batch size and thread count.                                        */

/* Dequantises n elements (a whole number of blocks) of `type` at src into dst[n] (f32), bit-exact
 * with gguf-py's dequantize(). DS4RT_ERR_UNSUPPORTED for a type the CPU backend does not compute,
 * DS4RT_ERR_INVALID_ARGUMENT for a partial block or a NULL pointer. */
DS4RT_API ds4rt_status ds4rt_dequantize(uint32_t type, const void *src, int64_t n, float *dst);

/* y[t*rows + r] = sum_c W[r][c] * x[t*cols + c] for t < n_tok, W[rows][cols] stored as GGUF rows of
 * `type` (row r at w + r * row bytes). Each activation row is first rounded to the type paired with
 * the weight (see ds4rt_quantize_activation). Uses a process-wide pool of n_threads threads
 * (<= 0: one per CPU the process may run on), recreated when n_threads changes; concurrent calls
 * are serialised. For hosts and tests; the runtime itself calls the internal matmul. */
DS4RT_API ds4rt_status ds4rt_matmul_host(uint32_t type, const void *w, int64_t rows, int64_t cols,
                                         const float *x, int64_t n_tok, float *y, int n_threads);

/* Rounds an activation row x[n] exactly as ds4rt_matmul_host does for weights of weight_type:
 * Q8_0/Q4_0/MXFP4 pair with Q8_0 (blocks of 32), K-quants and IQ2_XXS with Q8_K (blocks of 256):
 * q[n] receives the int8 values and scales[n/32 or n/256] the f32 block scales (x ~ scale*q).
 * F32/F16/BF16 pair with float activations rounded to that type: scales[n] receives the rounded
 * values and q is not used (may be NULL). */
DS4RT_API ds4rt_status ds4rt_quantize_activation(uint32_t weight_type, const float *x, int64_t n,
                                                 int8_t *q, float *scales);

/* Name of the CPU kernel path in use: "scalar", "avx2", "avx512", "avx512-vnni", "avx512-vbmi",
 * "neon" or "neon-dotprod". Chosen at first use from the CPU's features, or by the environment variable
 * DS4RT_CPU_ISA. */
DS4RT_API const char *ds4rt_cpu_isa(void);

/* Nonzero if path `name` (or "auto") is compiled in and this CPU can run it. */
DS4RT_API int ds4rt_cpu_isa_supported(const char *name);

/* Switches the CPU kernel path ("auto" = the widest this CPU runs). Call while no product runs.
 * DS4RT_ERR_UNSUPPORTED if this CPU cannot run it, DS4RT_ERR_INVALID_ARGUMENT for an unknown name. */
DS4RT_API ds4rt_status ds4rt_cpu_isa_set(const char *name);

/* ------------------------------------------------------------------------------------------ */
/* Single GPU kernels (present only when built with -Dgpu=cuda or -Dgpu=hip)                    */
/* ------------------------------------------------------------------------------------------ */

/* Expands n_blocks Q8_0 blocks (34 bytes each) into n_blocks*32 IEEE half values on the GPU,
 * with round-to-nearest-even; host buffers in and out. This is the kernel of the Q8->F16
 * expansion cache; the result is bitwise what the CPU dequantiser rounded to F16 gives. */
DS4RT_API ds4rt_status ds4rt_gpu_expand_q8_0_f16(const void *q8_blocks, size_t n_blocks,
                                                 uint16_t *f16_out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DS4RT_TESTING_H */
