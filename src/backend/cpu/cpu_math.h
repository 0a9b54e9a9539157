/*
 * cpu_math.h - the CPU backend's numeric building blocks, one row (token) at a time: norms,
 * hyper-connection mixing, RoPE with YaRN, the FP8/FP4 quantisation-aware simulations and the
 * Hadamard rotation (docs/MODEL.md, "Numerics"; the formulas are checked against the float64
 * reference of docs/REFERENCE.md).
 *
 * Every function computes one row (one token) with a fixed operation order, so a token's
 * result never depends on how many tokens are processed together.
 */
#ifndef DS4RT_CPU_MATH_H
#define DS4RT_CPU_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

/* out = x / sqrt(mean(x^2) + eps) * w (w may be NULL: no weight). out may alias x. */
void ds4rt_rms_norm(const float *x, int64_t n, const float *w, float eps, float *out);

/* ds4rt_rms_norm of `rows` rows `stride` floats apart (x and out alike; out may be x), four
 * rows at a time: each row's sum of squares stays one chain of additions in element order (so
 * its bits are ds4rt_rms_norm's), but the chains of four rows overlap instead of waiting on
 * each other's latency (a last group of 1-3 rows costs as much as one row). */
void ds4rt_rms_norm_rows(const float *x, int64_t rows, int64_t stride, int64_t n, const float *w, float eps,
                         float *out);

static inline float ds4rt_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float ds4rt_silu(float x) { return x / (1.0f + expf(-x)); }

/* x[i] = expf(x[i]), bitwise the C library's expf: 8 at a time (cpu_expf_fma.c) where that is
 * proven equal to it (glibc >= 2.28 on a CPU with AVX2 and FMA: tests/expf_exhaustive.c checks
 * all 2^32 inputs), else the library's expf per element. SwiGLU and the attention softmax call
 * expf 17 k times a token on the default model. */
void ds4rt_expf_rows(float *x, int64_t n);
/* Whether ds4rt_expf_rows takes the vector form on this machine. */
bool ds4rt_expf_rows_vector(void);
#if defined(__x86_64__)
void ds4rt_expf_rows_fma(float *x, int64_t n); /* cpu_expf_fma.c: needs AVX2 and FMA */
#endif

/* Hyper-connection "pre" coefficients from the mixing logits m[(2+N)*N] (already Φ·normed):
 * pre[N], post[N], comb[N*N] (row-major, Sinkhorn-normalised). */
void ds4rt_hc_coefficients(const float *m, const float *scale, const float *base, uint32_t n_hc,
                           uint32_t sinkhorn_iters, float eps, float *pre, float *post, float *comb);

/* x[D] = sum_h pre[h] * X[h][D]. */
void ds4rt_hc_reduce(const float *X, const float *pre, uint32_t n_hc, int64_t d, float *x);

/* X[j] = post[j] * f + sum_i comb[i*N + j] * X_old[i]; X_new and X_old must not alias. */
void ds4rt_hc_expand(const float *X_old, const float *f, const float *post, const float *comb,
                     uint32_t n_hc, int64_t d, float *X_new);

/* Head collapse weights w[h] = sigmoid(scale * m[h] + base[h]) + eps. */
void ds4rt_hc_head_weights(const float *m, float scale, const float *base, uint32_t n_hc, float eps,
                           float *w);

/* Upper bound on rotated pairs (rope dims <= head dims <= 4096), for stack buffers. */
#define DS4RT_MAX_ROPE_PAIRS 2048

/* cos/sin of the n_rot/2 pairs at position pos, in float64. */
void ds4rt_rope_angles(const ds4rt_rope *r, int64_t pos, double *cos_out, double *sin_out);

/* Rotates the tail (last n_rot dims) of v[dim] with precomputed angles; sign = +1 forward,
 * -1 inverse. */
void ds4rt_rope_apply(float *v, int64_t dim, const ds4rt_rope *r, const double *cs, const double *sn,
                      int sign);

/* FP8 E4M3FN round trip in blocks of 64 with power-of-two (ue8m0) scales . n % 64 == 0. */
void ds4rt_fp8_roundtrip(float *v, int64_t n);

/* FP4 E2M1 round trip in blocks of 32 with power-of-two scales. n % 32 == 0. */
void ds4rt_fp4_roundtrip(float *v, int64_t n);

/* v = H_n v / sqrt(n), Sylvester order, n a power of two. */
void ds4rt_hadamard(float *v, int64_t n);

/* Nearest E4M3FN / E2M1 value of x (ties to the even code), for tests and kernels. */
float ds4rt_round_e4m3(float x);
float ds4rt_round_e2m1(float x);

#endif /* DS4RT_CPU_MATH_H */
