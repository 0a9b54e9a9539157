/*
 * ops.hip - the HC, row and MoE-piece kernels of hip/ops.h.
 *
 * Every kernel reproduces the operation order of the CPU backend's function it replaces
 * (src/backend/cpu/cpu_hc.c, cpu_math.c, cpu_moe.c, cpu_rows.c; the float product of
 * src/quant/kernels_scalar.c), one row per block or per thread, so a row's bits never depend
 * on the batch. Three rules make that hold on nvcc, hipcc and HIP-CPU alike:
 *   - no fused multiply-add where the CPU has none: products that are summed go through
 *     GK_FMUL (__fmul_rn on nvcc; clang honours the fp contract pragma below; HIP-CPU builds
 *     for x86-64 without FMA);
 *   - block reductions go through shared memory in a fixed tree (HIP-CPU's shuffles are not
 *     reliable in multi-warp blocks; docs/GPU.md), never atomics on floats;
 *   - float64 where the CPU uses float64 (norm sums, Sinkhorn, sigmoids, softplus, the
 *     confidence head).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gk_internal.h"
#include "mm.h"
#include "ops.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#if defined(__CUDACC__)
#define GK_FMUL(a, b) __fmul_rn((a), (b))
#else
#define GK_FMUL(a, b) ((a) * (b))
#endif

/* Full unrolling of constant-count loops (register arrays); GCC (HIP-CPU) does without. */
#if defined(__CUDACC__) || defined(__clang__)
#define GK_UNROLL _Pragma("unroll")
#else
#define GK_UNROLL
#endif

/* ---- bit-level helpers --------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t gk_f2u(float f) {
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    return v.u;
}
__device__ __forceinline__ float gk_u2f(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } v;
    v.u = u;
    return v.f;
}

__device__ __forceinline__ bool gk_isfinite(float x) { return (gk_f2u(x) & 0x7f800000u) != 0x7f800000u; }

/* f32 -> f16 bits with round-half-even: the integer algorithm of src/quant/fp16.h, so the
 * activation rounding is bitwise the CPU's on every platform. */
__device__ __forceinline__ uint16_t gk_f32_to_f16(float f) {
    const uint32_t x = gk_f2u(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {
        const uint32_t e = ax >> 23;
        if (e < 102) return sign;
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax >> 13) & 0x3ffu);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

/* f32 -> bf16 bits, round-half-even, quiet NaN (src/quant/fp16.h). */
__device__ __forceinline__ uint16_t gk_f32_to_bf16(float f) {
    uint32_t x = gk_f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* Weight element c of a row, as f32, and the activation rounding paired with the type
 * (docs/QUANTS.md §2). */
template <unsigned T> __device__ __forceinline__ float gk_wload(const uint8_t *row, int64_t c);
template <> __device__ __forceinline__ float gk_wload<DS4RT_GK_TYPE_F32>(const uint8_t *row, int64_t c) {
    return ((const float *)row)[c];
}
template <> __device__ __forceinline__ float gk_wload<DS4RT_GK_TYPE_F16>(const uint8_t *row, int64_t c) {
    return ds4rt_gk_h2f(((const uint16_t *)row)[c]);
}
template <> __device__ __forceinline__ float gk_wload<DS4RT_GK_TYPE_BF16>(const uint8_t *row, int64_t c) {
    return ds4rt_gk_bf2f(((const uint16_t *)row)[c]);
}
template <unsigned T> __device__ __forceinline__ float gk_act(float x);
template <> __device__ __forceinline__ float gk_act<DS4RT_GK_TYPE_F32>(float x) { return x; }
template <> __device__ __forceinline__ float gk_act<DS4RT_GK_TYPE_F16>(float x) { return ds4rt_gk_h2f(gk_f32_to_f16(x)); }
template <> __device__ __forceinline__ float gk_act<DS4RT_GK_TYPE_BF16>(float x) { return ds4rt_gk_bf2f(gk_f32_to_bf16(x)); }

/* A 16-bit weight's bits as f32 (F16 or BF16). */
template <unsigned T> __device__ __forceinline__ float gk_w16(uint16_t u) {
    return T == DS4RT_GK_TYPE_F16 ? ds4rt_gk_h2f(u) : ds4rt_gk_bf2f(u);
}

__device__ __forceinline__ double gk_sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The HC coefficients from a mix value m (float64, as the CPU, src/backend/cpu/cpu_hc.c): pre
 * (and the head's weights), sigmoid(s0 m + b) + eps; post, 2 sigmoid(s1 m + b). One definition
 * for hc_pre_finish, hc_head_finish and the one-launch form, so they give the same bits. */
__device__ __forceinline__ float gk_hc_pre_coef(float s0, float m, float b, double eps) {
    return (float)(gk_sigmoid_d((double)s0 * m + b) + eps);
}
__device__ __forceinline__ float gk_hc_post_coef(float s1, float m, float b) {
    return (float)(2.0 * gk_sigmoid_d((double)s1 * m + b));
}
/* Element j of the HC head: sum_h w[h] X[h][j], h in order (X: N rows of D). */
__device__ __forceinline__ float gk_hc_head_elem(const float *w, const float *X, uint32_t N, uint32_t D, uint32_t j) {
    float acc = 0.0f;
    for (uint32_t h = 0; h < N; h++) acc += GK_FMUL(w[h], X[(int64_t)h * D + j]);
    return acc;
}

/* ---- block reductions (shared memory, fixed tree) --------------------------------------------- */

/* gk_block_sum: hip/gk_internal.h */

/* The CPU's fixed sum of 32 float lanes (src/quant/blocks.h, ds4rt_reduce32). */
__device__ __forceinline__ float gk_reduce32(const float *a) {
    float v[8];
    for (int k = 0; k < 8; k++) v[k] = (a[k] + a[k + 8]) + (a[k + 16] + a[k + 24]);
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

/* ---- RMS scale of rows (HC mixing input) ------------------------------------------------------- */

#define GK_RMS_NT GK_RMS_PARTS /* one partial per thread (hip/gk_internal.h, gk_rms_inv) */

/* ---- the float product in the CPU's order ------------------------------------------------------ */

/* y[t][r] = reduce32(lane l: sum over c = l, l+32, ... of w[r][c] * act(x[t][c] (* inv[t]))).
 * A block owns one weight row r and up to GK_MM_TOK tokens: all its threads stage a chunk of
 * the row in shared memory (the next chunk's loads are issued before the current one is used),
 * then thread (token s, lane l) adds its lane's products in column order, as the CPU does. */
#define GK_MM_NT 512
#define GK_MM_TOK (GK_MM_NT / 32)
#define GK_MM_PER 4
#define GK_MM_CHUNK (GK_MM_NT * GK_MM_PER)

template <unsigned T>
__global__ void __launch_bounds__(GK_MM_NT)
    gk_float_rows_kernel(const uint8_t *__restrict__ w, uint64_t row_bytes, int64_t cols, const float *__restrict__ x,
                         const float *__restrict__ inv, int64_t n, int64_t rows, float *__restrict__ y) {
    GK_PDL_ENTRY();
    __shared__ float wsh[GK_MM_CHUNK];
    __shared__ float lanes[GK_MM_TOK][32];
    const int tid = (int)threadIdx.x, s = tid / 32, l = tid % 32;
    const int64_t r = blockIdx.x;
    const int64_t t = (int64_t)blockIdx.y * GK_MM_TOK + s;
    const bool active = t < n;
    const uint8_t *wr = w + r * row_bytes;
    const float *xt = x + (active ? t : 0) * cols;
    const float sc = inv != NULL && active ? inv[t] : 1.0f;
    float next[GK_MM_PER];
    for (int q = 0; q < GK_MM_PER; q++) {
        int64_t c = (int64_t)q * GK_MM_NT + tid;
        next[q] = c < cols ? gk_wload<T>(wr, c) : 0.0f;
    }
    float acc = 0.0f;
    for (int64_t c0 = 0; c0 < cols; c0 += GK_MM_CHUNK) {
        __syncthreads(); /* the previous chunk is consumed */
        for (int q = 0; q < GK_MM_PER; q++) wsh[q * GK_MM_NT + tid] = next[q];
        __syncthreads();
        const int64_t c1 = c0 + GK_MM_CHUNK;
        for (int q = 0; q < GK_MM_PER; q++) {
            int64_t c = c1 + (int64_t)q * GK_MM_NT + tid;
            next[q] = c < cols ? gk_wload<T>(wr, c) : 0.0f;
        }
        if (active) {
            /* the lane's activations of the chunk are loaded first (independent loads in
             * flight), then added in column order */
            float xr[GK_MM_CHUNK / 32];
GK_UNROLL
            for (int j = 0; j < GK_MM_CHUNK / 32; j++) {
                const int64_t c = c0 + l + 32 * j;
                xr[j] = c < cols ? xt[c] : 0.0f;
            }
GK_UNROLL
            for (int j = 0; j < GK_MM_CHUNK / 32; j++)
                if (c0 + l + 32 * j < cols) {
                    const float xv = inv != NULL ? xr[j] * sc : xr[j];
                    acc += GK_FMUL(wsh[l + 32 * j], gk_act<T>(xv));
                }
        }
    }
    lanes[s][l] = acc;
    __syncthreads();
    if (active && l == 0) y[t * rows + r] = gk_reduce32(lanes[s]);
}

static int gk_float_rows(uint32_t type, const void *d_w, int64_t rows, int64_t cols, uint64_t row_bytes,
                         const float *d_x, const float *d_inv, int64_t n, float *d_y, hipStream_t st, const char *who) {
    if (n == 0 || rows == 0) return DS4RT_GK_OK;
    if (d_w == NULL || d_x == NULL || d_y == NULL || cols <= 0 || n < 0 || rows < 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: bad arguments (rows %lld cols %lld n %lld)", who,
                             (long long)rows, (long long)cols, (long long)n);
    const uint64_t esz = type == DS4RT_GK_TYPE_F32 ? 4 : 2;
    if (row_bytes < (uint64_t)cols * esz || row_bytes % esz != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: row_bytes %llu does not hold %lld columns", who,
                             (unsigned long long)row_bytes, (long long)cols);
    if (rows > 0x7fffffff || (n + GK_MM_TOK - 1) / GK_MM_TOK > 65535)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: %lld rows x %lld tokens exceed the grid", who, (long long)rows,
                             (long long)n);
    dim3 grid((unsigned)rows, (unsigned)((n + GK_MM_TOK - 1) / GK_MM_TOK));
    const uint8_t *w = (const uint8_t *)d_w;
    switch (type) {
    case DS4RT_GK_TYPE_F32:
        hipLaunchKernelGGL(gk_float_rows_kernel<DS4RT_GK_TYPE_F32>, grid, dim3(GK_MM_NT), 0, st, w, row_bytes, cols, d_x,
                           d_inv, n, rows, d_y);
        break;
    case DS4RT_GK_TYPE_F16:
        hipLaunchKernelGGL(gk_float_rows_kernel<DS4RT_GK_TYPE_F16>, grid, dim3(GK_MM_NT), 0, st, w, row_bytes, cols, d_x,
                           d_inv, n, rows, d_y);
        break;
    case DS4RT_GK_TYPE_BF16:
        hipLaunchKernelGGL(gk_float_rows_kernel<DS4RT_GK_TYPE_BF16>, grid, dim3(GK_MM_NT), 0, st, w, row_bytes, cols, d_x,
                           d_inv, n, rows, d_y);
        break;
    default: return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "%s: weight type %u is not F32/F16/BF16", who, type);
    }
    return ds4rt_gk_check(hipGetLastError(), who);
}

extern "C" int ds4rt_gk_matmul_float(uint32_t w_type, const void *d_w, int64_t rows, int64_t cols, uint64_t w_row_bytes,
                                     const float *d_x, int64_t n, float *d_y, void *stream) {
    return gk_float_rows(w_type, d_w, rows, cols, w_row_bytes, d_x, NULL, n, d_y, (hipStream_t)stream, "matmul_float");
}

/* ---- hyper-connections ------------------------------------------------------------------------- */

static size_t gk_align(size_t b) { return (b + 255) & ~(size_t)255; }

/* Scratch of ds4rt_gk_hc_mix: inv [n], then the normalised rows converted for the product
 * (the float activation rows of hip/mm.h, which ds4rt_gk_matmul_act reads). */
static size_t gk_hc_mix_scratch(int64_t n, uint32_t width) {
    return gk_align((size_t)n * 4) + gk_align(ds4rt_gk_act_bytes(DS4RT_GK_TYPE_F32, width, n));
}

/* ... and of hc_pre / hc_head: the mixing product [n][(2+N)*N] first. */
static size_t gk_hc_mix_bytes(int64_t n, uint32_t n_hc) { return gk_align((size_t)n * (2 + n_hc) * n_hc * 4); }

extern "C" size_t ds4rt_gk_hc_scratch_bytes(int64_t n, uint32_t n_hc, uint32_t d) {
    if (n < 1) n = 1;
    return gk_hc_mix_bytes(n, n_hc) + gk_hc_mix_scratch(n, n_hc * d);
}

static int gk_hc_check(const ds4rt_gk_hc_dims *dims, int64_t n, const char *who) {
    if (dims == NULL || dims->n_hc == 0 || dims->n_hc > 16 || dims->d == 0 || n < 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: bad HC shape (N %u, D %u, n %lld)", who,
                             dims ? dims->n_hc : 0, dims ? dims->d : 0, (long long)n);
    if (n > 0x7fffffff) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: %lld rows exceed the grid", who, (long long)n);
    return DS4RT_GK_OK;
}

/* One block per row t: inv[t] = (float)(1 / sqrt(mean(X[t]^2) + eps)), the sum of squares in
 * float64 (each square of a float is exact in float64; only the order of the sum differs from
 * the CPU's), then act[t][c] = the activation paired with type T of X[t][c] * inv[t] (the
 * CPU's RMS(X) row, then its rounding); act rows are `stride` bytes apart. One launch per HC
 * mix (it was two: the scale, then the rows by another grid); the row is read again from
 * L1/L2. */
/* Each thread takes elements tid, tid + NT, ... in that order, GK_RMS_PF of them loaded before
 * any is added. A decode has one row, so the block is the whole kernel: with 256 threads (64
 * elements each) it took 13 us per call for the 16384 floats of an HC row on an H100, its 8
 * warps on one SM a chain of dependent instructions; 1024 threads take 16 elements each
 * (docs/PERFORMANCE.md, "Branches and shorter chains"). */
#define GK_RMS_PF 16
template <unsigned T>
__global__ void __launch_bounds__(GK_RMS_NT) gk_hc_rms_act_kernel(const float *__restrict__ X, int64_t width, float eps,
                                                                   float *__restrict__ inv, uint8_t *__restrict__ act,
                                                                   size_t stride) {
    GK_PDL_ENTRY();
    __shared__ double sh[GK_RMS_NT];
    const float *x = X + (int64_t)blockIdx.x * width;
    const float r = gk_rms_inv<GK_RMS_NT, GK_RMS_PF>(x, width, eps, sh);
    float v[GK_RMS_PF];
    if (threadIdx.x == 0) inv[blockIdx.x] = r;
    float *a = (float *)(void *)(act + (size_t)blockIdx.x * stride);
    for (int64_t i0 = threadIdx.x; i0 < width; i0 += (int64_t)GK_RMS_NT * GK_RMS_PF) {
        GK_UNROLL
        for (int k = 0; k < GK_RMS_PF; k++) {
            const int64_t i = i0 + (int64_t)k * GK_RMS_NT;
            v[k] = i < width ? x[i] : 0.0f;
        }
        GK_UNROLL
        for (int k = 0; k < GK_RMS_PF; k++) {
            const int64_t i = i0 + (int64_t)k * GK_RMS_NT;
            if (i < width) a[i] = gk_act<T>(v[k] * r);
        }
    }
}

extern "C" int ds4rt_gk_hc_mix(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t n_out, uint32_t fn_type,
                               const void *d_fn, uint64_t fn_row_bytes, const float *d_X, float *d_mix, void *d_scratch,
                               size_t scratch_bytes, void *stream) {
    int st = gk_hc_check(dims, n, "hc_mix");
    if (st != DS4RT_GK_OK || n == 0) return st;
    const int64_t width = (int64_t)dims->n_hc * dims->d;
    const size_t need = gk_hc_mix_scratch(n, (uint32_t)width);
    if (d_scratch == NULL || scratch_bytes < need || ((uintptr_t)d_scratch & 15) != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_mix: scratch of %zu bytes < %zu (or not 16-byte aligned)",
                             scratch_bytes, need);
    if (fn_type != DS4RT_GK_TYPE_F32 && fn_type != DS4RT_GK_TYPE_F16 && fn_type != DS4RT_GK_TYPE_BF16)
        return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "hc_mix: weight type %u is not F32/F16/BF16", fn_type);
    const ds4rt_gk_weight w = {fn_type, d_fn, (int64_t)n_out, width, fn_row_bytes};
    /* a few tokens: the RMS scale formed inside the product, one launch (same bits) */
    if (((uintptr_t)d_X & 15) == 0 && ds4rt_gk_matmul_rms_rows_supported(&w, n))
        return ds4rt_gk_matmul_rms_rows(&w, d_X, n, dims->rms_eps, d_mix, stream);
    float *inv = (float *)d_scratch;
    uint8_t *act = (uint8_t *)d_scratch + gk_align((size_t)n * 4);
    const size_t stride = ds4rt_gk_act_bytes(DS4RT_GK_TYPE_F32, width, 1);
    hipStream_t s = (hipStream_t)stream;
    const dim3 grid((unsigned)n), block(GK_RMS_NT);
    const float eps = dims->rms_eps;
    if (fn_type == DS4RT_GK_TYPE_F32)
        hipLaunchKernelGGL(gk_hc_rms_act_kernel<DS4RT_GK_TYPE_F32>, grid, block, 0, s, d_X, width, eps, inv, act, stride);
    else if (fn_type == DS4RT_GK_TYPE_F16)
        hipLaunchKernelGGL(gk_hc_rms_act_kernel<DS4RT_GK_TYPE_F16>, grid, block, 0, s, d_X, width, eps, inv, act, stride);
    else
        hipLaunchKernelGGL(gk_hc_rms_act_kernel<DS4RT_GK_TYPE_BF16>, grid, block, 0, s, d_X, width, eps, inv, act, stride);
    if ((st = DS4RT_GK_LAUNCHED("hc_mix rms and act")) != DS4RT_GK_OK) return st;
    return ds4rt_gk_matmul_act(&w, act, n, d_mix, stream);
}

/* HC pre finish: a decode has one row, so one block is the whole kernel; 1024 threads keep
 * each thread's chain of dependent loads short (4 steps for D = 4096 instead of 16) */
#define GK_HCF_NT 1024
#define GK_HCF_N 4 /* streams, and */
#define GK_HCF_J 5 /* elements per thread, that hc_pre_finish holds in registers (4 x 4096 fit) */

/* Sinkhorn of one row's N x N logits by one warp, element k = a*N + b in lane k (NN <= the
 * warp; lanes past NN mirror element 0 so every lane takes part in the shuffles): each lane
 * forms its row or column sum from the other lanes in index order, so the float64 operations
 * are the CPU's, in the CPU's order, without a block barrier per half-iteration (the block
 * version spent ~33 us per call on the H200 in 80 barriers). NC = N as a constant (DeepSeek V4's
 * 4 streams) unrolls the sums, so a sum's shuffles are issued together instead of one per add
 * (the runtime-N loop left this warp the ~10 us critical path of hc_pre_finish). */
template <uint32_t NC>
__device__ void gk_sinkhorn_warp(uint32_t n_rt, uint32_t iters, double eps, double logit, uint32_t k, double *out) {
    const uint32_t N = NC != 0 ? NC : n_rt;
    const uint32_t a = k / N, b = k % N;
    double mx = -DBL_MAX;
    for (uint32_t j = 0; j < N; j++) {
        const double u = __shfl(logit, (int)(a * N + j), DS4RT_WARP);
        if (u > mx) mx = u;
    }
    const double e = exp(logit - mx);
    double sum = 0.0;
    for (uint32_t j = 0; j < N; j++) sum += __shfl(e, (int)(a * N + j), DS4RT_WARP);
    double v = e / sum + eps;
    for (uint32_t it = 0; it < iters; it++) {
        if (it > 0) {
            double sr = 0.0;
            for (uint32_t j = 0; j < N; j++) sr += __shfl(v, (int)(a * N + j), DS4RT_WARP);
            v = v / (sr + eps);
        }
        double sc = 0.0;
        for (uint32_t j = 0; j < N; j++) sc += __shfl(v, (int)(j * N + b), DS4RT_WARP);
        v = v / (sc + eps);
    }
    *out = v;
}

/* The Sinkhorn coefficients of one row per block, in place: comb [n][N*N] holds the raw mixing
 * logits (hc_pre_finish copied them there) and leaves with the coefficients (float64, the CPU's
 * sequence of operations: each row or column sum in index order, the divisions elementwise), by
 * one warp where N*N fits in it (gk_sinkhorn_warp), else by the block (each sum by one thread,
 * the divisions in parallel). A kernel of its own so that the backend can run it beside the
 * layer's attention or FFN on a second stream: only hc_post reads comb, and the ~10 us chain of
 * 20 iterations no longer holds up xn, which the next product waits for (docs/GPU.md). */
#define GK_SK_NT 256
__global__ void __launch_bounds__(GK_SK_NT) gk_hc_sinkhorn_kernel(uint32_t N, uint32_t iters, float hc_eps,
                                                                   const float *__restrict__ scale,
                                                                   const float *__restrict__ base, float *comb) {
    GK_PDL_ENTRY();
    __shared__ double c[16 * 16];
    __shared__ double div[16];
    const int tid = (int)threadIdx.x;
    const int64_t t = blockIdx.x;
    const uint32_t NN = N * N;
    float *cm = comb + t * (int64_t)NN;
    const double eps = (double)hc_eps;
    if (NN <= DS4RT_WARP) { /* uniform over the block */
        if (tid < DS4RT_WARP) {
            const uint32_t k = (uint32_t)tid < NN ? (uint32_t)tid : 0u;
            double v;
            const double logit = (double)scale[2] * cm[k] + base[2 * N + k];
            if (N == 4) gk_sinkhorn_warp<4>(N, iters, eps, logit, k, &v);
            else gk_sinkhorn_warp<0>(N, iters, eps, logit, k, &v);
            if ((uint32_t)tid < NN) cm[tid] = (float)v;
        }
        return;
    }
    if ((uint32_t)tid < NN) c[tid] = (double)scale[2] * cm[tid] + base[2 * N + tid];
    __syncthreads();
    if ((uint32_t)tid < N) { /* row softmax of row a = tid */
        double *row = c + tid * N;
        double mx = -DBL_MAX;
        for (uint32_t b = 0; b < N; b++)
            if (row[b] > mx) mx = row[b];
        double sum = 0.0;
        for (uint32_t b = 0; b < N; b++) {
            row[b] = exp(row[b] - mx);
            sum += row[b];
        }
        for (uint32_t b = 0; b < N; b++) row[b] = row[b] / sum + eps;
    }
    __syncthreads();
    for (uint32_t it = 0; it < iters; it++) {
        if (it > 0) {
            if ((uint32_t)tid < N) {
                double sm = 0.0;
                for (uint32_t b = 0; b < N; b++) sm += c[tid * N + b];
                div[tid] = sm + eps;
            }
            __syncthreads();
            if ((uint32_t)tid < NN) c[tid] = c[tid] / div[tid / N];
            __syncthreads();
        }
        if ((uint32_t)tid < N) {
            double sm = 0.0;
            for (uint32_t a = 0; a < N; a++) sm += c[a * N + tid];
            div[tid] = sm + eps;
        }
        __syncthreads();
        if ((uint32_t)tid < NN) c[tid] = c[tid] / div[tid % N];
        __syncthreads();
    }
    if ((uint32_t)tid < NN) cm[tid] = (float)c[tid];
}

/* The held layout of HC pre's reduce (DeepSeek V4's shape: N <= GK_HCF_N streams, D <=
 * GK_HCF_J * mixers): mixer thread m = tid - first (the threads past the block's first `first`)
 * takes elements j = m + q * mixers, q < GK_HCF_J, loads them with their norm weights ahead
 * (gk_hc_xn_load), then forms x = sum_h pre[h] X[h] (float, h in order), the float64 sum of
 * squares over that partition by gk_block_sum, and the RMSNorm with the weight (gk_hc_xn_held).
 * One partition for gk_hc_pre_finish_kernel and gk_hc_pre1_kernel, so both give the same bits. */
struct gk_hc_xn_regs {
    float xs[GK_HCF_J][GK_HCF_N];
    float nw[GK_HCF_J];
};

__device__ __forceinline__ void gk_hc_xn_load(gk_hc_xn_regs &r, uint32_t first, uint32_t mixers, uint32_t N,
                                              uint32_t D, const float *__restrict__ norm,
                                              const float *__restrict__ Xt) {
    const uint32_t tid = threadIdx.x;
    if (tid < first) return;
    GK_UNROLL
    for (int q = 0; q < GK_HCF_J; q++) {
        const uint32_t j = tid - first + (uint32_t)q * mixers;
        GK_UNROLL
        for (int h = 0; h < GK_HCF_N; h++) r.xs[q][h] = j < D && (uint32_t)h < N ? Xt[(int64_t)h * D + j] : 0.0f;
        r.nw[q] = j < D && norm != NULL ? norm[j] : 1.0f;
    }
}

/* Every thread of the block (of NT) calls it: the sum is a block reduction. pre: N floats. */
template <int NT>
__device__ __forceinline__ void gk_hc_xn_held(const gk_hc_xn_regs &r, uint32_t first, uint32_t mixers, uint32_t N,
                                              uint32_t D, float rms_eps, const float *pre, const float *norm,
                                              float *__restrict__ x, double *sh) {
    const uint32_t tid = threadIdx.x;
    double ss = 0.0;
    float acc[GK_HCF_J];
    if (tid >= first) {
        GK_UNROLL
        for (int q = 0; q < GK_HCF_J; q++) {
            acc[q] = 0.0f;
            GK_UNROLL /* constant indices keep xs in registers */
            for (int h = 0; h < GK_HCF_N; h++)
                if ((uint32_t)h < N) acc[q] += GK_FMUL(pre[h], r.xs[q][h]);
            if (tid - first + (uint32_t)q * mixers < D) ss += (double)acc[q] * (double)acc[q];
        }
    }
    ss = gk_block_sum<NT>(ss, sh);
    const float inv = (float)(1.0 / sqrt(ss / (double)D + (double)rms_eps));
    if (tid >= first) {
        GK_UNROLL
        for (int q = 0; q < GK_HCF_J; q++) {
            const uint32_t j = tid - first + (uint32_t)q * mixers;
            if (j < D) x[j] = norm != NULL ? acc[q] * inv * r.nw[q] : acc[q] * inv;
        }
    }
}

/* One block per row: pre and post (float64, as the CPU), then the RMSNorm of the weighted
 * reduce of the N streams by the threads past the first warp. The first warp, where N*N fits in
 * it, either runs the Sinkhorn itself meanwhile (sk: comb gets the coefficients) or copies the
 * raw logits into comb for gk_hc_sinkhorn_kernel; the reduce's partition is the same either way,
 * so both give the same bits. */
__global__ void __launch_bounds__(GK_HCF_NT)
    gk_hc_pre_finish_kernel(uint32_t N, uint32_t D, uint32_t iters, int sk, float hc_eps, float rms_eps,
                            const float *__restrict__ mix,
                            const float *__restrict__ scale, const float *__restrict__ base,
                            const float *__restrict__ norm, const float *__restrict__ X, float *__restrict__ xn,
                            float *__restrict__ post, float *__restrict__ comb) {
    GK_PDL_ENTRY();
    __shared__ float pre[16];
    __shared__ double sh[GK_HCF_NT];
    const int tid = (int)threadIdx.x;
    const int64_t t = blockIdx.x;
    const float *m = mix + t * (int64_t)(2 + N) * N;
    const uint32_t NN = N * N;
    const double eps = (double)hc_eps;
    const bool by_warp = NN <= DS4RT_WARP; /* uniform over the block */
    const uint32_t first = by_warp ? DS4RT_WARP : 0, mixers = GK_HCF_NT - first;
    const float *Xt = X + t * (int64_t)N * D;
    float *x = xn + t * (int64_t)D;
    /* DeepSeek V4's shape (N <= GK_HCF_N, D <= GK_HCF_J mixers' steps): each mixer loads its
     * streams' elements and norm weights now, while pre is formed, and keeps its sums in
     * registers (the loop below loaded them after the barrier, one step at a time) */
    const bool held = N <= GK_HCF_N && D <= GK_HCF_J * mixers; /* uniform over the block */
    gk_hc_xn_regs xr;
    if (held) gk_hc_xn_load(xr, first, mixers, N, D, norm, Xt);
    if ((uint32_t)tid < N) {
        pre[tid] = gk_hc_pre_coef(scale[0], m[tid], base[tid], eps);
        post[t * N + tid] = gk_hc_post_coef(scale[1], m[N + tid], base[N + tid]);
    }
    if (!sk || !by_warp) {
        if ((uint32_t)tid < NN) comb[t * NN + tid] = m[2 * N + tid];
    }
    __syncthreads(); /* pre */
    if (sk && by_warp && tid < DS4RT_WARP) {
        const uint32_t k = (uint32_t)tid < NN ? (uint32_t)tid : 0u;
        double v;
        const double logit = (double)scale[2] * m[2 * N + k] + base[2 * N + k];
        if (N == 4) gk_sinkhorn_warp<4>(N, iters, eps, logit, k, &v);
        else gk_sinkhorn_warp<0>(N, iters, eps, logit, k, &v);
        if ((uint32_t)tid < NN) comb[t * NN + tid] = (float)v;
    }

    /* x = sum_h pre[h] X[h] (float, h in order), then RMSNorm with the weight; each thread
     * rescales the elements it formed */
    if (held) {
        gk_hc_xn_held<GK_HCF_NT>(xr, first, mixers, N, D, rms_eps, pre, norm, x, sh);
        return;
    }
    double ss = 0.0;
    if ((uint32_t)tid >= first)
        for (uint32_t j = (uint32_t)tid - first; j < D; j += mixers) {
            float acc = 0.0f;
            for (uint32_t h = 0; h < N; h++) acc += GK_FMUL(pre[h], Xt[(int64_t)h * D + j]);
            x[j] = acc;
            ss += (double)acc * (double)acc;
        }
    ss = gk_block_sum<GK_HCF_NT>(ss, sh);
    const float inv = (float)(1.0 / sqrt(ss / (double)D + (double)rms_eps));
    if ((uint32_t)tid >= first)
        for (uint32_t j = (uint32_t)tid - first; j < D; j += mixers)
            x[j] = norm != NULL ? x[j] * inv * norm[j] : x[j] * inv;
}

extern "C" int ds4rt_gk_hc_pre_finish(const ds4rt_gk_hc_dims *dims, int64_t n, int sinkhorn, const float *d_mix,
                                      const float *d_scale, const float *d_base, const float *d_norm, const float *d_X,
                                      float *d_xn, float *d_post, float *d_comb, void *stream) {
    int st = gk_hc_check(dims, n, "hc_pre_finish");
    if (st != DS4RT_GK_OK || n == 0) return st;
    if (!d_mix || !d_scale || !d_base || !d_X || !d_xn || !d_post || !d_comb)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_pre_finish: a tensor is NULL");
    const int inline_sk = sinkhorn && dims->n_hc * dims->n_hc <= DS4RT_WARP;
    hipLaunchKernelGGL(gk_hc_pre_finish_kernel, dim3((unsigned)n), dim3(GK_HCF_NT), 0, (hipStream_t)stream, dims->n_hc,
                       dims->d, dims->sinkhorn_iters, inline_sk, dims->hc_eps, dims->rms_eps, d_mix, d_scale, d_base,
                       d_norm, d_X, d_xn, d_post, d_comb);
    int st2 = DS4RT_GK_LAUNCHED("hc_pre_finish");
    if (st2 != DS4RT_GK_OK || !sinkhorn || inline_sk) return st2;
    return ds4rt_gk_hc_sinkhorn(dims, n, d_scale, d_base, d_comb, stream); /* too wide for one warp */
}

extern "C" int ds4rt_gk_hc_sinkhorn(const ds4rt_gk_hc_dims *dims, int64_t n, const float *d_scale, const float *d_base,
                                    float *d_comb, void *stream) {
    int st = gk_hc_check(dims, n, "hc_sinkhorn");
    if (st != DS4RT_GK_OK || n == 0) return st;
    if (!d_scale || !d_base || !d_comb) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_sinkhorn: a tensor is NULL");
    hipLaunchKernelGGL(gk_hc_sinkhorn_kernel, dim3((unsigned)n), dim3(GK_SK_NT), 0, (hipStream_t)stream, dims->n_hc,
                       dims->sinkhorn_iters, dims->hc_eps, d_scale, d_base, d_comb);
    return DS4RT_GK_LAUNCHED("hc_sinkhorn");
}

/* ---- HC pre of a few tokens in one launch ----------------------------------------------------
 * A decode's hc_pre was three launches on the critical path (the HC RMS and rounding, the
 * 24-row mixing product, the finish), each a few us of latency for little work. Here a block of
 * GK_HP1_NT threads takes GK_HP1_R mix rows of one token (grid: row groups x tokens): every
 * thread issues its weight and activation loads at once, forms the RMS scale in the HC RMS
 * kernel's partition (gk_rms_inv with one partial a thread), stages each step's weights and
 * rounded activations in shared memory, and warp w runs row w's 32 lane chains in the CPU's
 * column order (the float product above: same bits). The block then writes its rows' post
 * coefficients and raw comb logits, and block 0, which holds the N <= GK_HP1_R pre rows, forms
 * pre and xn with gk_hc_pre_finish_kernel's partition (gk_hc_xn_held): nothing crosses blocks.
 * HEAD: the HC head the same way (its N mix rows in block 0, then y = sum_h w_h X[h] with
 * hc_head_finish's weights, which are pre's formula).
 * F16/BF16 weights (published files store the HC mixes as F16; F32 rows would not fit the
 * staging), N*D <= 16384 in whole 32-column periods, 16-byte aligned rows. The Sinkhorn stays a
 * kernel of its own (it needs all N*N logits, which span blocks). DS4RT_GPU_HC_PRE1=1 turns the
 * form on (docs/GPU.md, "Merged launches"). */
#define GK_HP1_NT 1024
#define GK_HP1_R 4            /* mix rows a block: warps 0..3 run their lane chains */
#define GK_HP1_CE 2048        /* columns a staging step (16-bit weights: 16 KB for 4 rows) */
#define GK_HP1_STEPS 8        /* N*D <= GK_HP1_STEPS * GK_HP1_CE = 16384 */
#define GK_HP1_XE (GK_HP1_STEPS * GK_HP1_CE / GK_HP1_NT) /* activation elements a thread */
#define GK_HP1_MAX_N 16       /* tokens: a block re-reads its 4 weight rows per token */
static_assert(GK_HP1_NT == GK_RMS_PARTS, "one RMS partial a thread (gk_rms_inv's partition)");
static_assert(GK_HP1_R * 256 * 8 == GK_HP1_R * GK_HP1_CE && GK_HP1_NT == GK_HP1_R * 256, "a uint4 of 8 weights a thread and step");

template <unsigned T, bool HEAD>
__global__ void __launch_bounds__(GK_HP1_NT)
    gk_hc_pre1_kernel(uint32_t N, uint32_t D, float hc_eps, float rms_eps, const uint8_t *__restrict__ fn,
                      uint64_t fn_row_bytes, const float *__restrict__ scale, const float *__restrict__ base,
                      const float *__restrict__ norm, const float *__restrict__ X, float *__restrict__ xn,
                      float *__restrict__ post, float *__restrict__ comb) {
    __shared__ uint4 wsh[GK_HP1_R][GK_HP1_CE / 8]; /* 16-bit weights, stored as 16-byte words */
    __shared__ float xsh[GK_HP1_CE];
    __shared__ double sh[GK_HP1_NT];
    __shared__ float lanes[GK_HP1_R][32];
    __shared__ float mix[GK_HP1_R];
    __shared__ float pre[GK_HP1_R];
    const int tid = (int)threadIdx.x, l = tid % 32, wq = tid / 32;
    const int64_t t = blockIdx.y;
    const uint32_t n_out = HEAD ? N : (2 + N) * N, NN = N * N, r0 = blockIdx.x * GK_HP1_R;
    const int64_t width = (int64_t)N * D;
    /* weights: row r0 + wr, elements wc .. wc + 7 of every step (before the wait: weights only) */
    const int wr = tid / 256, wc = (tid % 256) * 8;
    const bool wlive = r0 + (uint32_t)wr < n_out;
    const uint8_t *wrow = fn + (uint64_t)(wlive ? r0 + (uint32_t)wr : 0u) * fn_row_bytes;
    uint4 wv[GK_HP1_STEPS];
    GK_UNROLL
    for (int st = 0; st < GK_HP1_STEPS; st++) {
        const int64_t e = (int64_t)st * GK_HP1_CE + wc;
        wv[st] = wlive && e < width ? *(const uint4 *)(const void *)(wrow + e * 2) : make_uint4(0u, 0u, 0u, 0u);
    }
    GK_PDL_ENTRY_AFTER_WEIGHTS();
    /* activations: element tid + GK_HP1_NT k, which is RMS partial tid's k-th (gk_rms_inv) */
    const float *Xt = X + t * width;
    float xv[GK_HP1_XE];
    GK_UNROLL
    for (int k = 0; k < GK_HP1_XE; k++) {
        const int64_t i = (int64_t)k * GK_HP1_NT + tid;
        xv[k] = i < width ? Xt[i] : 0.0f;
    }
    double p = 0.0;
    GK_UNROLL
    for (int k = 0; k < GK_HP1_XE; k++)
        if ((int64_t)k * GK_HP1_NT + tid < width) p = fma((double)xv[k], (double)xv[k], p);
    const double ss = gk_block_sum<GK_HP1_NT>(p, sh);
    const float inv = (float)(1.0 / sqrt(ss / (double)width + (double)rms_eps));
    float acc = 0.0f;
    GK_UNROLL
    for (int st = 0; st < GK_HP1_STEPS; st++) {
        const int64_t e0 = (int64_t)st * GK_HP1_CE;
        if (e0 < width) { /* uniform over the block */
            __syncthreads(); /* the previous step is consumed */
            wsh[wr][wc / 8] = wv[st];
            xsh[tid] = gk_act<T>(xv[2 * st] * inv);
            xsh[GK_HP1_NT + tid] = gk_act<T>(xv[2 * st + 1] * inv);
            __syncthreads();
            if (wq < GK_HP1_R) { /* uniform over the warp: row wq's lane l, columns in order */
                const uint16_t *w16 = (const uint16_t *)(const void *)wsh[wq];
                const int nj = (int)((width - e0 < GK_HP1_CE ? width - e0 : GK_HP1_CE) / 32);
                for (int j = 0; j < nj; j++) acc += GK_FMUL(gk_w16<T>(w16[l + 32 * j]), xsh[l + 32 * j]);
            }
        }
    }
    if (wq < GK_HP1_R) lanes[wq][l] = acc;
    __syncthreads();
    if (tid < GK_HP1_R) mix[tid] = gk_reduce32(lanes[tid]);
    __syncthreads();
    const double eps = (double)hc_eps;
    if ((uint32_t)tid < GK_HP1_R && r0 + (uint32_t)tid < n_out) { /* gk_hc_pre_finish_kernel's formulas */
        const uint32_t r = r0 + (uint32_t)tid;
        const float m = mix[tid];
        if (r < N) pre[tid] = gk_hc_pre_coef(scale[0], m, base[r], eps);
        else if (r < 2 * N) post[t * N + (r - N)] = gk_hc_post_coef(scale[1], m, base[r]);
        else comb[t * NN + (r - 2 * N)] = m;
    }
    if (blockIdx.x != 0) return; /* uniform over the block */
    if constexpr (HEAD) { /* the HC head: xn[t] = sum_h pre[h] X[t][h], h in order (hc_head_finish) */
        __syncthreads(); /* pre */
        for (uint32_t j = (uint32_t)tid; j < D; j += GK_HP1_NT) xn[t * (int64_t)D + j] = gk_hc_head_elem(pre, Xt, N, D, j);
        return;
    }
    const uint32_t first = DS4RT_WARP, mixers = GK_HP1_NT - first; /* N*N <= 16 fits a warp */
    gk_hc_xn_regs xr;
    gk_hc_xn_load(xr, first, mixers, N, D, norm, Xt);
    __syncthreads(); /* pre */
    gk_hc_xn_held<GK_HP1_NT>(xr, first, mixers, N, D, rms_eps, pre, norm, xn + t * (int64_t)D, sh);
}

/* DS4RT_GPU_HC_PRE1=1: hc_pre of up to GK_HP1_MAX_N tokens takes gk_hc_pre1_kernel where its shape
 * fits (off until measured on a device); decided once, reported by ds4rt_gk_hc_forms(). */
static bool gk_hc_pre1_on(void) {
    static const bool on = [] {
        const char *e = getenv("DS4RT_GPU_HC_PRE1");
        return e != NULL && strcmp(e, "1") == 0;
    }();
    return on;
}

extern "C" const char *ds4rt_gk_hc_forms(void) {
    return gk_hc_pre1_on() ? "HC pre and head one launch up to 16 tokens (DS4RT_GPU_HC_PRE1)"
                           : "HC pre and head mix and finish (default)";
}
static_assert(GK_HP1_MAX_N == 16, "ds4rt_gk_hc_forms says 16");

static bool gk_hc_pre1_takes(const ds4rt_gk_hc_dims *d, int64_t n, uint32_t fn_type, const void *d_fn,
                             uint64_t fn_row_bytes, const float *d_X) {
    const bool on = gk_hc_pre1_on();
    const int64_t width = (int64_t)d->n_hc * d->d;
    return on && n >= 1 && n <= GK_HP1_MAX_N && (fn_type == DS4RT_GK_TYPE_F16 || fn_type == DS4RT_GK_TYPE_BF16) &&
           d->n_hc <= GK_HP1_R && d->n_hc <= GK_HCF_N && d->d <= GK_HCF_J * (GK_HP1_NT - DS4RT_WARP) &&
           width <= GK_HP1_STEPS * GK_HP1_CE && width % 32 == 0 && ((uintptr_t)d_fn & 15) == 0 &&
           (fn_row_bytes & 15) == 0 && fn_row_bytes >= (uint64_t)width * 2 && ((uintptr_t)d_X & 3) == 0;
}

/* head: the HC head (N mix rows, d_xn = y; norm, post and comb unused) instead of hc_pre */
static int gk_hc_pre1(const ds4rt_gk_hc_dims *d, int64_t n, bool head, uint32_t fn_type, const void *d_fn,
                      uint64_t fn_row_bytes, const float *d_scale, const float *d_base, const float *d_norm,
                      const float *d_X, float *d_xn, float *d_post, float *d_comb, hipStream_t s) {
    const uint32_t n_out = head ? d->n_hc : (2 + d->n_hc) * d->n_hc;
    const dim3 grid((n_out + GK_HP1_R - 1) / GK_HP1_R, (unsigned)n);
    const uint8_t *fn = (const uint8_t *)d_fn;
    typedef void (*pre1_fn)(uint32_t, uint32_t, float, float, const uint8_t *, uint64_t, const float *, const float *,
                            const float *, const float *, float *, float *, float *);
    const bool f16 = fn_type == DS4RT_GK_TYPE_F16;
    const pre1_fn k = head ? (f16 ? gk_hc_pre1_kernel<DS4RT_GK_TYPE_F16, true> : gk_hc_pre1_kernel<DS4RT_GK_TYPE_BF16, true>)
                           : (f16 ? gk_hc_pre1_kernel<DS4RT_GK_TYPE_F16, false> : gk_hc_pre1_kernel<DS4RT_GK_TYPE_BF16, false>);
    hipLaunchKernelGGL(k, grid, dim3(GK_HP1_NT), 0, s, d->n_hc, d->d, d->hc_eps, d->rms_eps, fn, fn_row_bytes, d_scale,
                       d_base, d_norm, d_X, d_xn, d_post, d_comb);
    return ds4rt_gk_check(hipGetLastError(), head ? "launch hc_head1" : "launch hc_pre1");
}

/* hc_pre with (sinkhorn) or without the Sinkhorn */
static int hc_pre(const ds4rt_gk_hc_dims *dims, int64_t n, int sinkhorn, uint32_t fn_type, const void *d_fn,
                  uint64_t fn_row_bytes, const float *d_scale, const float *d_base, const float *d_norm,
                  const float *d_X, float *d_xn, float *d_post, float *d_comb, void *d_scratch, size_t scratch_bytes,
                  void *stream) {
    int st = gk_hc_check(dims, n, "hc_pre");
    if (st != DS4RT_GK_OK || n == 0) return st;
    const size_t need = ds4rt_gk_hc_scratch_bytes(n, dims->n_hc, dims->d);
    if (d_scratch == NULL || scratch_bytes < need)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_pre: scratch of %zu bytes < %zu", scratch_bytes, need);
    if (d_fn == NULL || !d_scale || !d_base || !d_X || !d_xn || !d_post || !d_comb)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_pre: a tensor is NULL");
    if (gk_hc_pre1_takes(dims, n, fn_type, d_fn, fn_row_bytes, d_X)) { /* one launch (+ the Sinkhorn) */
        if ((st = gk_hc_pre1(dims, n, false, fn_type, d_fn, fn_row_bytes, d_scale, d_base, d_norm, d_X, d_xn, d_post,
                             d_comb, (hipStream_t)stream)) != DS4RT_GK_OK || !sinkhorn)
            return st;
        return ds4rt_gk_hc_sinkhorn(dims, n, d_scale, d_base, d_comb, stream);
    }
    const size_t mix_bytes = gk_hc_mix_bytes(n, dims->n_hc);
    float *mix = (float *)d_scratch;
    const uint32_t n_out = (2 + dims->n_hc) * dims->n_hc;
    if ((st = ds4rt_gk_hc_mix(dims, n, n_out, fn_type, d_fn, fn_row_bytes, d_X, mix, (uint8_t *)d_scratch + mix_bytes,
                              scratch_bytes - mix_bytes, stream)) != DS4RT_GK_OK)
        return st;
    return ds4rt_gk_hc_pre_finish(dims, n, sinkhorn, mix, d_scale, d_base, d_norm, d_X, d_xn, d_post, d_comb,
                                  stream);
}

extern "C" int ds4rt_gk_hc_pre_raw(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t fn_type, const void *d_fn,
                                   uint64_t fn_row_bytes, const float *d_scale, const float *d_base,
                                   const float *d_norm, const float *d_X, float *d_xn, float *d_post, float *d_comb,
                                   void *d_scratch, size_t scratch_bytes, void *stream) {
    return hc_pre(dims, n, 0, fn_type, d_fn, fn_row_bytes, d_scale, d_base, d_norm, d_X, d_xn, d_post, d_comb,
                  d_scratch, scratch_bytes, stream);
}

extern "C" int ds4rt_gk_hc_pre(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t fn_type, const void *d_fn,
                               uint64_t fn_row_bytes, const float *d_scale, const float *d_base, const float *d_norm,
                               const float *d_X, float *d_xn, float *d_post, float *d_comb, void *d_scratch,
                               size_t scratch_bytes, void *stream) {
    return hc_pre(dims, n, 1, fn_type, d_fn, fn_row_bytes, d_scale, d_base, d_norm, d_X, d_xn, d_post, d_comb,
                  d_scratch, scratch_bytes, stream);
}

#define GK_EW_NT 256

/* One thread per (row, column k): the N stream values of column k are read once. */
__global__ void __launch_bounds__(GK_EW_NT)
    gk_hc_post_kernel(uint32_t N, uint32_t D, int64_t n, const float *__restrict__ X, const float *__restrict__ f,
                      const float *__restrict__ post, const float *__restrict__ comb, float *__restrict__ Xo) {
    GK_PDL_ENTRY();
    const int64_t g = (int64_t)blockIdx.x * GK_EW_NT + threadIdx.x;
    if (g >= n * (int64_t)D) return;
    const int64_t t = g / D, k = g % D;
    const float *Xt = X + t * (int64_t)N * D;
    const float *cm = comb + t * (int64_t)N * N;
    float xs[16];
    for (uint32_t i = 0; i < N; i++) xs[i] = Xt[(int64_t)i * D + k];
    const float fk = f[t * (int64_t)D + k];
    for (uint32_t j = 0; j < N; j++) {
        float acc = GK_FMUL(post[t * N + j], fk);
        for (uint32_t i = 0; i < N; i++) acc += GK_FMUL(cm[i * N + j], xs[i]);
        Xo[t * (int64_t)N * D + (int64_t)j * D + k] = acc;
    }
}

static unsigned gk_blocks(int64_t count, int per) { return (unsigned)((count + per - 1) / per); }

extern "C" int ds4rt_gk_hc_post(const ds4rt_gk_hc_dims *dims, int64_t n, const float *d_X, const float *d_f,
                                const float *d_post, const float *d_comb, float *d_X_out, void *stream) {
    int st = gk_hc_check(dims, n, "hc_post");
    if (st != DS4RT_GK_OK || n == 0) return st;
    if (!d_X || !d_f || !d_post || !d_comb || !d_X_out || d_X == d_X_out)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_post: a tensor is NULL, or X_out aliases X");
    const int64_t total = n * (int64_t)dims->d;
    if (gk_blocks(total, GK_EW_NT) == 0 || (total + GK_EW_NT - 1) / GK_EW_NT > 0x7fffffff)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_post: too many rows");
    hipLaunchKernelGGL(gk_hc_post_kernel, dim3(gk_blocks(total, GK_EW_NT)), dim3(GK_EW_NT), 0, (hipStream_t)stream,
                       dims->n_hc, dims->d, n, d_X, d_f, d_post, d_comb, d_X_out);
    return DS4RT_GK_LAUNCHED("hc_post");
}

/* grid (column blocks, rows): each block forms the row's N head weights, then reduces. */
__global__ void __launch_bounds__(GK_EW_NT)
    gk_hc_head_finish_kernel(uint32_t N, uint32_t D, float hc_eps, const float *__restrict__ mix,
                             const float *__restrict__ scale, const float *__restrict__ base,
                             const float *__restrict__ X, float *__restrict__ y) {
    GK_PDL_ENTRY();
    __shared__ float wts[16];
    const int64_t t = blockIdx.y;
    const int tid = (int)threadIdx.x;
    if ((uint32_t)tid < N)
        wts[tid] = gk_hc_pre_coef(scale[0], mix[t * N + tid], base[tid], (double)hc_eps);
    __syncthreads();
    const int64_t j = (int64_t)blockIdx.x * GK_EW_NT + tid;
    if (j >= D) return;
    y[t * (int64_t)D + j] = gk_hc_head_elem(wts, X + t * (int64_t)N * D, N, D, (uint32_t)j);
}

extern "C" int ds4rt_gk_hc_head_finish(const ds4rt_gk_hc_dims *dims, int64_t n, const float *d_mix,
                                       const float *d_scale, const float *d_base, const float *d_X, float *d_y,
                                       void *stream) {
    int st = gk_hc_check(dims, n, "hc_head_finish");
    if (st != DS4RT_GK_OK || n == 0) return st;
    if (!d_mix || !d_scale || !d_base || !d_X || !d_y)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_head_finish: a tensor is NULL");
    if (n > 65535) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_head_finish: %lld rows exceed the grid", (long long)n);
    hipLaunchKernelGGL(gk_hc_head_finish_kernel, dim3(gk_blocks(dims->d, GK_EW_NT), (unsigned)n), dim3(GK_EW_NT), 0,
                       (hipStream_t)stream, dims->n_hc, dims->d, dims->hc_eps, d_mix, d_scale, d_base, d_X, d_y);
    return DS4RT_GK_LAUNCHED("hc_head_finish");
}

extern "C" int ds4rt_gk_hc_head(const ds4rt_gk_hc_dims *dims, int64_t n, uint32_t fn_type, const void *d_fn,
                                uint64_t fn_row_bytes, const float *d_scale, const float *d_base, const float *d_X,
                                float *d_y, void *d_scratch, size_t scratch_bytes, void *stream) {
    int st = gk_hc_check(dims, n, "hc_head");
    if (st != DS4RT_GK_OK || n == 0) return st;
    const size_t need = ds4rt_gk_hc_scratch_bytes(n, dims->n_hc, dims->d);
    if (d_scratch == NULL || scratch_bytes < need)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hc_head: scratch of %zu bytes < %zu", scratch_bytes, need);
    if (d_fn != NULL && d_scale != NULL && d_base != NULL && d_X != NULL && d_y != NULL &&
        gk_hc_pre1_takes(dims, n, fn_type, d_fn, fn_row_bytes, d_X)) /* one launch (DS4RT_GPU_HC_PRE1) */
        return gk_hc_pre1(dims, n, true, fn_type, d_fn, fn_row_bytes, d_scale, d_base, NULL, d_X, d_y, NULL, NULL,
                          (hipStream_t)stream);
    const size_t mix_bytes = gk_hc_mix_bytes(n, dims->n_hc);
    float *mix = (float *)d_scratch;
    if ((st = ds4rt_gk_hc_mix(dims, n, dims->n_hc, fn_type, d_fn, fn_row_bytes, d_X, mix,
                              (uint8_t *)d_scratch + mix_bytes, scratch_bytes - mix_bytes, stream)) != DS4RT_GK_OK)
        return st;
    return ds4rt_gk_hc_head_finish(dims, n, mix, d_scale, d_base, d_X, d_y, stream);
}

/* ---- row ops ----------------------------------------------------------------------------------- */

__global__ void __launch_bounds__(GK_EW_NT) gk_capture_kernel(uint32_t N, uint32_t D, int64_t n,
                                                               const float *__restrict__ X, float *__restrict__ dst,
                                                               uint64_t stride) {
    GK_PDL_ENTRY();
    const int64_t g = (int64_t)blockIdx.x * GK_EW_NT + threadIdx.x;
    if (g >= n * (int64_t)D) return;
    const int64_t t = g / D, j = g % D;
    const float *Xt = X + t * (int64_t)N * D;
    float acc = 0.0f;
    for (uint32_t h = 0; h < N; h++) acc += Xt[(int64_t)h * D + j];
    dst[(uint64_t)t * stride + (uint64_t)j] = acc / (float)N;
}

extern "C" int ds4rt_gk_capture(uint32_t n_hc, uint32_t d, int64_t n, const float *d_X, float *d_dst,
                                uint64_t dst_stride, void *stream) {
    if (n == 0) return DS4RT_GK_OK;
    if (n < 0 || n_hc == 0 || d == 0 || !d_X || !d_dst || dst_stride < d || (n * (int64_t)d + GK_EW_NT) / GK_EW_NT > 0x7fffffff)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "capture: bad arguments");
    hipLaunchKernelGGL(gk_capture_kernel, dim3(gk_blocks(n * (int64_t)d, GK_EW_NT)), dim3(GK_EW_NT), 0,
                       (hipStream_t)stream, n_hc, d, n, d_X, d_dst, dst_stride);
    return DS4RT_GK_LAUNCHED("capture");
}

#define GK_ARGMAX_NT 256

/* One block per row. Each thread keeps the first maximum (> -inf) of its columns; pairs merge by
 * (larger value, then lower index), which is order-independent, so the result is the CPU's. */
__global__ void __launch_bounds__(GK_ARGMAX_NT)
    gk_argmax_kernel(uint32_t width, const float *__restrict__ x, int32_t *__restrict__ ids) {
    GK_PDL_ENTRY();
    __shared__ float bv[GK_ARGMAX_NT];
    __shared__ uint32_t bi[GK_ARGMAX_NT];
    const int tid = (int)threadIdx.x;
    const float *v = x + (int64_t)blockIdx.x * width;
    float best = -INFINITY;
    uint32_t at = 0xffffffffu;
    for (uint32_t i = tid; i < width; i += GK_ARGMAX_NT) {
        float e = v[i];
        if (e > best) {
            best = e;
            at = i;
        }
    }
    bv[tid] = best;
    bi[tid] = at;
    __syncthreads();
    for (int s = GK_ARGMAX_NT / 2; s > 0; s >>= 1) {
        if (tid < s) {
            float o = bv[tid + s];
            uint32_t oi = bi[tid + s];
            if (o > bv[tid] || (o == bv[tid] && oi < bi[tid])) {
                bv[tid] = o;
                bi[tid] = oi;
            }
        }
        __syncthreads();
    }
    if (tid == 0) ids[blockIdx.x] = bv[0] > -INFINITY ? (int32_t)bi[0] : 0;
}

extern "C" int ds4rt_gk_argmax(int64_t rows, uint32_t width, const float *d_x, int32_t *d_ids, void *stream) {
    if (rows == 0) return DS4RT_GK_OK;
    if (rows < 0 || rows > 0x7fffffff || width == 0 || width > 0x7fffffffu || !d_x || !d_ids)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "argmax: bad arguments (rows %lld, width %u)", (long long)rows, width);
    hipLaunchKernelGGL(gk_argmax_kernel, dim3((unsigned)rows), dim3(GK_ARGMAX_NT), 0, (hipStream_t)stream, width, d_x,
                       d_ids);
    return DS4RT_GK_LAUNCHED("argmax");
}

/* Split argmax: chunk c of row r covers columns [c * GK_ARGMAX_CHUNK, ...); partials are
 * (value, index) pairs, merged by the same rule as above, so the answer is the same. */
#define GK_ARGMAX_CHUNK 8192

__global__ void __launch_bounds__(GK_ARGMAX_NT)
    gk_argmax_part_kernel(uint32_t width, const float *__restrict__ x, float *__restrict__ pv,
                          uint32_t *__restrict__ pi) {
    GK_PDL_ENTRY();
    __shared__ float bv[GK_ARGMAX_NT];
    __shared__ uint32_t bi[GK_ARGMAX_NT];
    const int tid = (int)threadIdx.x;
    const int64_t r = blockIdx.y;
    const uint32_t c0 = blockIdx.x * GK_ARGMAX_CHUNK;
    const uint32_t c1 = width - c0 < GK_ARGMAX_CHUNK ? width : c0 + GK_ARGMAX_CHUNK;
    const float *v = x + r * width;
    float best = -INFINITY;
    uint32_t at = 0xffffffffu;
    for (uint32_t i = c0 + tid; i < c1; i += GK_ARGMAX_NT) {
        float e = v[i];
        if (e > best) {
            best = e;
            at = i;
        }
    }
    bv[tid] = best;
    bi[tid] = at;
    __syncthreads();
    for (int s = GK_ARGMAX_NT / 2; s > 0; s >>= 1) {
        if (tid < s) {
            float o = bv[tid + s];
            uint32_t oi = bi[tid + s];
            if (o > bv[tid] || (o == bv[tid] && oi < bi[tid])) {
                bv[tid] = o;
                bi[tid] = oi;
            }
        }
        __syncthreads();
    }
    if (tid == 0) {
        pv[r * gridDim.x + blockIdx.x] = bv[0];
        pi[r * gridDim.x + blockIdx.x] = bi[0];
    }
}

__global__ void __launch_bounds__(GK_ARGMAX_NT)
    gk_argmax_merge_kernel(uint32_t parts, const float *__restrict__ pv, const uint32_t *__restrict__ pi,
                           int32_t *__restrict__ ids) {
    GK_PDL_ENTRY();
    __shared__ float bv[GK_ARGMAX_NT];
    __shared__ uint32_t bi[GK_ARGMAX_NT];
    const int tid = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    float best = -INFINITY;
    uint32_t at = 0xffffffffu;
    for (uint32_t c = tid; c < parts; c += GK_ARGMAX_NT) {
        float o = pv[r * parts + c];
        uint32_t oi = pi[r * parts + c];
        if (o > best || (o == best && oi < at)) {
            best = o;
            at = oi;
        }
    }
    bv[tid] = best;
    bi[tid] = at;
    __syncthreads();
    for (int s = GK_ARGMAX_NT / 2; s > 0; s >>= 1) {
        if (tid < s) {
            float o = bv[tid + s];
            uint32_t oi = bi[tid + s];
            if (o > bv[tid] || (o == bv[tid] && oi < bi[tid])) {
                bv[tid] = o;
                bi[tid] = oi;
            }
        }
        __syncthreads();
    }
    if (tid == 0) ids[r] = bv[0] > -INFINITY ? (int32_t)bi[0] : 0;
}

static uint32_t gk_argmax_parts(uint32_t width) { return (width + GK_ARGMAX_CHUNK - 1) / GK_ARGMAX_CHUNK; }

extern "C" size_t ds4rt_gk_argmax_scratch_bytes(int64_t rows, uint32_t width) {
    if (rows < 1) rows = 1;
    const size_t parts = (size_t)rows * gk_argmax_parts(width ? width : 1);
    return gk_align(parts * 4) + gk_align(parts * 4);
}

extern "C" int ds4rt_gk_argmax_split(int64_t rows, uint32_t width, const float *d_x, int32_t *d_ids, void *d_scratch,
                                     size_t scratch_bytes, void *stream) {
    if (rows == 0) return DS4RT_GK_OK;
    if (rows < 0 || rows > 65535 || width == 0 || width > 0x7fffffffu || !d_x || !d_ids)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "argmax_split: bad arguments (rows %lld, width %u)",
                             (long long)rows, width);
    const size_t need = ds4rt_gk_argmax_scratch_bytes(rows, width);
    if (d_scratch == NULL || scratch_bytes < need)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "argmax_split: scratch of %zu bytes < %zu", scratch_bytes, need);
    const uint32_t parts = gk_argmax_parts(width);
    float *pv = (float *)d_scratch;
    uint32_t *pi = (uint32_t *)((uint8_t *)d_scratch + gk_align((size_t)rows * parts * 4));
    hipStream_t s = (hipStream_t)stream;
    hipLaunchKernelGGL(gk_argmax_part_kernel, dim3(parts, (unsigned)rows), dim3(GK_ARGMAX_NT), 0, s, width, d_x, pv, pi);
    int st = DS4RT_GK_LAUNCHED("argmax_split parts");
    if (st != DS4RT_GK_OK) return st;
    hipLaunchKernelGGL(gk_argmax_merge_kernel, dim3((unsigned)rows), dim3(GK_ARGMAX_NT), 0, s, parts, pv, pi, d_ids);
    return DS4RT_GK_LAUNCHED("argmax_split merge");
}

__global__ void __launch_bounds__(GK_EW_NT) gk_add_kernel(int64_t count, const float *__restrict__ a,
                                                           const float *__restrict__ b, float *__restrict__ o) {
    GK_PDL_ENTRY();
    for (int64_t i = (int64_t)blockIdx.x * GK_EW_NT + threadIdx.x; i < count; i += (int64_t)gridDim.x * GK_EW_NT)
        o[i] = a[i] + b[i];
}

/* Grid of a grid-stride kernel: enough blocks to fill a device, no more than needed. */
static unsigned gk_stride_blocks(int64_t count) {
    int64_t b = (count + GK_EW_NT - 1) / GK_EW_NT;
    return (unsigned)(b < 1 ? 1 : (b > 4096 ? 4096 : b));
}

extern "C" int ds4rt_gk_add(int64_t count, const float *d_a, const float *d_b, float *d_out, void *stream) {
    if (count == 0) return DS4RT_GK_OK;
    if (count < 0 || !d_a || !d_b || !d_out) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "add: bad arguments");
    hipLaunchKernelGGL(gk_add_kernel, dim3(gk_stride_blocks(count)), dim3(GK_EW_NT), 0, (hipStream_t)stream, count, d_a,
                       d_b, d_out);
    return DS4RT_GK_LAUNCHED("add");
}

__global__ void __launch_bounds__(GK_EW_NT) gk_nonfinite_kernel(int64_t count, const float *__restrict__ x,
                                                                 int32_t *__restrict__ out) {
    GK_PDL_ENTRY();
    __shared__ int32_t sh[GK_EW_NT];
    int32_t bad = 0;
    for (int64_t i = (int64_t)blockIdx.x * GK_EW_NT + threadIdx.x; i < count; i += (int64_t)gridDim.x * GK_EW_NT)
        bad += !gk_isfinite(x[i]);
    bad = gk_block_sum<GK_EW_NT>(bad, sh);
    if (threadIdx.x == 0 && bad != 0) atomicAdd(out, bad); /* integer: exact in any order */
}

extern "C" int ds4rt_gk_nonfinite(int64_t count, const float *d_x, int32_t *d_out, void *stream) {
    if (count < 0 || !d_out || (count > 0 && !d_x)) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "nonfinite: bad arguments");
    int st = ds4rt_gk_check(hipMemsetAsync(d_out, 0, sizeof(int32_t), (hipStream_t)stream), "nonfinite: clear");
    if (st != DS4RT_GK_OK || count == 0) return st;
    hipLaunchKernelGGL(gk_nonfinite_kernel, dim3(gk_stride_blocks(count)), dim3(GK_EW_NT), 0, (hipStream_t)stream, count,
                       d_x, d_out);
    return DS4RT_GK_LAUNCHED("nonfinite");
}

__global__ void __launch_bounds__(GK_EW_NT)
    gk_confidence_kernel(uint32_t d, uint32_t r, const float *__restrict__ p, const float *__restrict__ h,
                         const float *__restrict__ s, float *__restrict__ out) {
    GK_PDL_ENTRY();
    __shared__ double sh[GK_EW_NT];
    double acc = 0.0;
    for (uint32_t i = threadIdx.x; i < d; i += GK_EW_NT) acc += (double)p[i] * (double)h[i];
    for (uint32_t i = threadIdx.x; i < r; i += GK_EW_NT) acc += (double)p[d + i] * (double)s[i];
    acc = gk_block_sum<GK_EW_NT>(acc, sh);
    if (threadIdx.x == 0) out[0] = (float)(1.0 / (1.0 + exp(-acc)));
}

extern "C" int ds4rt_gk_dspark_confidence(uint32_t d, uint32_t r, const float *d_proj, const float *d_h,
                                          const float *d_state, float *d_out, void *stream) {
    if (!d_proj || !d_out || (d > 0 && !d_h) || (r > 0 && !d_state))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "dspark_confidence: a tensor is NULL");
    hipLaunchKernelGGL(gk_confidence_kernel, dim3(1), dim3(GK_EW_NT), 0, (hipStream_t)stream, d, r, d_proj, d_h, d_state,
                       d_out);
    return DS4RT_GK_LAUNCHED("dspark_confidence");
}

/* ---- MoE pieces ------------------------------------------------------------------------------- */

#define GK_ROUTE_NT 256
#define GK_ROUTE_MAX_E 1024
#define GK_ROUTE_MAX_K 64

__device__ __forceinline__ float gk_sqrt_softplus(float x) {
    double sp = x > 20.0f ? (double)x : (x < -20.0f ? exp((double)x) : log1p(exp((double)x)));
    return (float)sqrt(sp);
}

/* One block per row. Learned routing ranks every expert by (key desc, index asc) with
 * key = p + bias, NaN as -inf: the k of rank < k in rank order are exactly the CPU's insertion
 * top-k (src/core/topk.c). The weight sum runs in slot order on one thread, as on the CPU. */
__global__ void __launch_bounds__(GK_ROUTE_NT)
    gk_route_kernel(uint32_t E, uint32_t k, int norm_on, float scale, const float *__restrict__ logits,
                    const float *__restrict__ bias, const int32_t *__restrict__ tid2eid,
                    const int32_t *__restrict__ tokens, int32_t *__restrict__ ids, float *__restrict__ wout) {
    GK_PDL_ENTRY();
    __shared__ float p[GK_ROUTE_MAX_E];
    __shared__ float key[GK_ROUTE_MAX_E];
    __shared__ int32_t sel[GK_ROUTE_MAX_K];
    const int tid = (int)threadIdx.x;
    const int64_t t = blockIdx.x;
    for (uint32_t e = tid; e < E; e += GK_ROUTE_NT) {
        p[e] = gk_sqrt_softplus(logits[t * E + e]);
        if (tid2eid == NULL) {
            float b = p[e] + bias[e];
            key[e] = b != b ? -INFINITY : b;
        }
    }
    __syncthreads();
    if (tid2eid != NULL) {
        const int32_t tok = tokens[t];
        for (uint32_t s = tid; s < k; s += GK_ROUTE_NT) sel[s] = tid2eid[(int64_t)tok * k + s];
    } else {
        for (uint32_t e = tid; e < E; e += GK_ROUTE_NT) {
            const float ke = key[e];
            uint32_t rank = 0;
            for (uint32_t o = 0; o < E; o++) rank += key[o] > ke || (key[o] == ke && o < e);
            if (rank < k) sel[rank] = (int32_t)e;
        }
    }
    __syncthreads();
    if (tid == 0) {
        float sum = 0.0f;
        for (uint32_t s = 0; s < k; s++) sum += p[sel[s]];
        const float nm = norm_on ? 1.0f / (sum > 6.103515625e-5f ? sum : 6.103515625e-5f) : 1.0f;
        for (uint32_t s = 0; s < k; s++) {
            ids[t * k + s] = sel[s];
            wout[t * k + s] = p[sel[s]] * nm * scale;
        }
    }
}

extern "C" int ds4rt_gk_moe_route(const ds4rt_gk_moe_dims *dims, int64_t n, const float *d_logits, const float *d_bias,
                                  const int32_t *d_tid2eid, const void *d_pass, int32_t *d_ids, float *d_weights,
                                  void *stream) {
    if (n == 0) return DS4RT_GK_OK;
    if (dims == NULL || dims->n_expert == 0 || dims->n_expert > GK_ROUTE_MAX_E || dims->n_used == 0 ||
        dims->n_used > GK_ROUTE_MAX_K || dims->n_used > dims->n_expert || n < 0 || n > 0x7fffffff)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "moe_route: bad shape (E %u, k %u, n %lld)",
                             dims ? dims->n_expert : 0, dims ? dims->n_used : 0, (long long)n);
    if (!d_logits || !d_ids || !d_weights || (d_tid2eid == NULL && d_bias == NULL) || (d_tid2eid != NULL && d_pass == NULL))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT,
                             "moe_route: needs logits, ids, weights and a bias (learned) or tid2eid + pass (hash)");
    const int32_t *tokens = d_pass ? (const int32_t *)((const uint8_t *)d_pass + 16) : NULL;
    hipLaunchKernelGGL(gk_route_kernel, dim3((unsigned)n), dim3(GK_ROUTE_NT), 0, (hipStream_t)stream, dims->n_expert,
                       dims->n_used, dims->expert_norm, dims->expert_scale, d_logits, d_bias, d_tid2eid, tokens, d_ids,
                       d_weights);
    return DS4RT_GK_LAUNCHED("moe_route");
}

__global__ void __launch_bounds__(GK_EW_NT)
    gk_swiglu_kernel(int64_t rows, uint32_t width, const float *__restrict__ g, uint64_t gs, const float *__restrict__ u,
                     uint64_t us, float c, const float *__restrict__ wt, float *h, uint64_t hs) {
    GK_PDL_ENTRY();
    const int64_t total = rows * (int64_t)width;
    for (int64_t i = (int64_t)blockIdx.x * GK_EW_NT + threadIdx.x; i < total; i += (int64_t)gridDim.x * GK_EW_NT) {
        const int64_t r = i / width, j = i % width;
        h[(uint64_t)r * hs + (uint64_t)j] =
            gk_swiglu1(g[(uint64_t)r * gs + (uint64_t)j], u[(uint64_t)r * us + (uint64_t)j], c, wt != NULL ? wt[r] : 1.0f);
    }
}

extern "C" int ds4rt_gk_swiglu(int64_t rows, uint32_t width, const float *d_g, uint64_t g_stride, const float *d_u,
                               uint64_t u_stride, float clamp, const float *d_weight, float *d_h, uint64_t h_stride,
                               void *stream) {
    if (rows == 0 || width == 0) return DS4RT_GK_OK;
    if (rows < 0 || !d_g || !d_u || !d_h || g_stride < width || u_stride < width || h_stride < width)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "swiglu: bad arguments");
    hipLaunchKernelGGL(gk_swiglu_kernel, dim3(gk_stride_blocks(rows * (int64_t)width)), dim3(GK_EW_NT), 0,
                       (hipStream_t)stream, rows, width, d_g, g_stride, d_u, u_stride, clamp, d_weight, d_h, h_stride);
    return DS4RT_GK_LAUNCHED("swiglu");
}

__global__ void __launch_bounds__(GK_EW_NT) gk_combine_kernel(int64_t n, uint32_t k, uint32_t d,
                                                               const float *__restrict__ y,
                                                               const float *__restrict__ sh, float *__restrict__ f) {
    GK_PDL_ENTRY();
    const int64_t total = n * (int64_t)d;
    for (int64_t i = (int64_t)blockIdx.x * GK_EW_NT + threadIdx.x; i < total; i += (int64_t)gridDim.x * GK_EW_NT) {
        const int64_t t = i / d, j = i % d;
        const float *yt = y + t * (int64_t)k * d;
        float acc = 0.0f;
        for (uint32_t s = 0; s < k; s++) acc += yt[(int64_t)s * d + j];
        f[i] = sh != NULL ? acc + sh[i] : acc;
    }
}

extern "C" int ds4rt_gk_moe_combine(int64_t n, uint32_t k, uint32_t d, const float *d_y, const float *d_shared,
                                    float *d_f, void *stream) {
    if (n == 0 || d == 0) return DS4RT_GK_OK;
    if (n < 0 || !d_f || (k > 0 && !d_y)) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "moe_combine: bad arguments");
    hipLaunchKernelGGL(gk_combine_kernel, dim3(gk_stride_blocks(n * (int64_t)d)), dim3(GK_EW_NT), 0,
                       (hipStream_t)stream, n, k, d, d_y, d_shared, d_f);
    return DS4RT_GK_LAUNCHED("moe_combine");
}

/* ---- sampling ----------------------------------------------------------------------------------- */

#define GK_SAMPLE_NT 256

__host__ __device__ __forceinline__ double gk_uniform(uint64_t seed, uint64_t counter) {
    uint64_t z = seed + counter * 0x9E3779B97F4A7C15ull + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

extern "C" double ds4rt_gk_sample_uniform(uint64_t seed, uint64_t counter) { return gk_uniform(seed, counter); }

template <typename V> __device__ __forceinline__ V gk_block_max(V v, V *sh) {
    const int tid = (int)threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (int s = GK_SAMPLE_NT / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] = sh[tid + s] > sh[tid] ? sh[tid + s] : sh[tid];
        __syncthreads();
    }
    V r = sh[0];
    __syncthreads();
    return r;
}

/* Exclusive prefix of per-thread counts in thread order (thread 0 scans: NT is small). */
__device__ __forceinline__ uint32_t gk_block_prefix(uint32_t v, uint32_t *sh, uint32_t *total) {
    const int tid = (int)threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    if (tid == 0) {
        uint32_t acc = 0;
        for (int i = 0; i < GK_SAMPLE_NT; i++) {
            uint32_t c = sh[i];
            sh[i] = acc;
            acc += c;
        }
        sh[GK_SAMPLE_NT] = acc;
    }
    __syncthreads();
    uint32_t r = sh[tid];
    *total = sh[GK_SAMPLE_NT];
    __syncthreads();
    return r;
}

/* One block per row; thread i owns the contiguous columns [i*C, (i+1)*C), so scans in thread
 * order are scans in id order. Probabilities are >= 0, so their bit patterns order like them. */
__global__ void __launch_bounds__(GK_SAMPLE_NT)
    gk_sample_kernel(float temperature, int32_t top_k, float top_p, float min_p, uint64_t seed, uint32_t V,
                     const float *__restrict__ x, const uint64_t *__restrict__ counter, float *__restrict__ probs,
                     int32_t *__restrict__ ids) {
    GK_PDL_ENTRY();
    __shared__ double shd[GK_SAMPLE_NT];
    __shared__ float shf[GK_SAMPLE_NT];
    __shared__ uint32_t shu[GK_SAMPLE_NT + 1];
    __shared__ uint32_t hist[256];
    __shared__ uint32_t sel[2];
    __shared__ double dsel[2];
    const int tid = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const float *l = x + r * V;
    float *p = probs + r * V;
    const uint32_t C = (V + GK_SAMPLE_NT - 1) / GK_SAMPLE_NT;
    const uint32_t i0 = tid * C < V ? tid * C : V, i1 = i0 + C < V ? i0 + C : V;

    /* softmax of l / T (float64 exp and sum, as the CPU) */
    float mx = -INFINITY;
    for (uint32_t i = i0; i < i1; i++) mx = fmaxf(mx, l[i] != l[i] ? -INFINITY : l[i]);
    mx = gk_block_max(mx, shf);
    const double inv_t = 1.0 / temperature;
    double s = 0.0;
    for (uint32_t i = i0; i < i1; i++) {
        double e = l[i] != l[i] ? 0.0 : exp(((double)l[i] - mx) * inv_t);
        p[i] = (float)e;
        s += e;
    }
    const double sum = gk_block_sum<GK_SAMPLE_NT>(s, shd);
    for (uint32_t i = i0; i < i1; i++) p[i] = (float)(p[i] / sum);

    /* top-k: the k-th largest by radix selection over the bits; ties above the quota go to
     * the lower ids (src/core/topk.c, ds4rt_topk_indices) */
    if (top_k > 0 && (uint32_t)top_k < V) {
        uint32_t prefix = 0, mask = 0, want = (uint32_t)top_k;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int b = tid; b < 256; b += GK_SAMPLE_NT) hist[b] = 0;
            __syncthreads();
            for (uint32_t i = i0; i < i1; i++) {
                uint32_t u = gk_f2u(p[i]);
                if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (tid == 0) {
                uint32_t w = want;
                int b = 255;
                for (; b > 0; b--) {
                    if (w <= hist[b]) break;
                    w -= hist[b];
                }
                sel[0] = (uint32_t)b;
                sel[1] = w;
            }
            __syncthreads();
            prefix |= sel[0] << shift;
            mask |= 255u << shift;
            want = sel[1];
            __syncthreads();
        }
        uint32_t eq = 0, n_eq;
        for (uint32_t i = i0; i < i1; i++) eq += gk_f2u(p[i]) == prefix;
        uint32_t before = gk_block_prefix(eq, shu, &n_eq);
        for (uint32_t i = i0; i < i1; i++) {
            uint32_t u = gk_f2u(p[i]);
            if (u == prefix) p[i] = before++ < want ? p[i] : 0.0f;
            else if (u < prefix) p[i] = 0.0f;
        }
        __syncthreads();
    }

    /* top-p: the cut value v* = the largest value whose "sum of p >= v*" still reaches
     * top_p * total (bit by bit), then ties of v* in id order until the sum reaches it */
    if (top_p < 1.0f) {
        double t = 0.0;
        for (uint32_t i = i0; i < i1; i++) t += p[i] > 0.0f ? (double)p[i] : 0.0;
        const double total = gk_block_sum<GK_SAMPLE_NT>(t, shd);
        const double P = top_p * total;
        float pm = 0.0f;
        for (uint32_t i = i0; i < i1; i++) pm = fmaxf(pm, p[i]);
        const uint32_t pmax_bits = gk_f2u(gk_block_max(pm, shf));
        uint32_t cur = 0;
        for (int b = 30; b >= 0; b--) {
            const uint32_t cand = cur | (1u << b);
            double g = 0.0;
            for (uint32_t i = i0; i < i1; i++)
                if (p[i] > 0.0f && gk_f2u(p[i]) >= cand) g += p[i];
            g = gk_block_sum<GK_SAMPLE_NT>(g, shd);
            if (g >= P) cur = cand;
        }
        if (cur > pmax_bits) cur = pmax_bits; /* P <= 0: the CPU still keeps the first item */
        double gt = 0.0;
        uint32_t eq = 0, above = 0, n_eq, n_above;
        for (uint32_t i = i0; i < i1; i++) {
            const uint32_t u = gk_f2u(p[i]);
            if (p[i] > 0.0f && u > cur) gt += p[i];
            above += p[i] > 0.0f && u > cur;
            eq += p[i] > 0.0f && u == cur;
        }
        gt = gk_block_sum<GK_SAMPLE_NT>(gt, shd);
        (void)gk_block_prefix(above, shu, &n_above);
        uint32_t before = gk_block_prefix(eq, shu, &n_eq);
        if (tid == 0) { /* ties of v* kept in id order while the sum before them is short of P
                         * (the first item of the sorted order is always kept) */
            double c = gt;
            uint32_t m = 0;
            const double v = (double)gk_u2f(cur);
            while (m < n_eq && (c < P || (m == 0 && n_above == 0))) {
                c += v;
                m++;
            }
            sel[0] = m;
        }
        __syncthreads();
        const uint32_t keep_eq = sel[0];
        for (uint32_t i = i0; i < i1; i++) {
            if (!(p[i] > 0.0f)) continue;
            const uint32_t u = gk_f2u(p[i]);
            if (u < cur || (u == cur && before++ >= keep_eq)) p[i] = 0.0f;
        }
        __syncthreads();
    }

    if (min_p > 0.0f) {
        float pm = 0.0f;
        for (uint32_t i = i0; i < i1; i++) pm = fmaxf(pm, p[i]);
        pm = gk_block_max(pm, shf);
        for (uint32_t i = i0; i < i1; i++)
            if (p[i] < min_p * pm) p[i] = 0.0f;
    }
    double t2 = 0.0;
    for (uint32_t i = i0; i < i1; i++) t2 += p[i];
    const double total2 = gk_block_sum<GK_SAMPLE_NT>(t2, shd);
    double own = 0.0;
    for (uint32_t i = i0; i < i1; i++) {
        p[i] = (float)(p[i] / total2);
        own += p[i];
    }

    /* the draw: cumulative sums in id order (per thread, then across threads in order) */
    shd[tid] = own;
    __syncthreads();
    if (tid == 0) {
        double acc = 0.0;
        for (int i = 0; i < GK_SAMPLE_NT; i++) {
            double c = shd[i];
            shd[i] = acc;
            acc += c;
        }
        dsel[0] = gk_uniform(seed, *counter + (uint64_t)r) * acc;
    }
    __syncthreads();
    const double target = dsel[0];
    double cum = shd[tid];
    uint32_t hit = 0xffffffffu, last = 0xffffffffu;
    for (uint32_t i = i0; i < i1; i++) {
        if (p[i] <= 0.0f) continue;
        cum += p[i];
        last = i;
        if (cum > target) {
            hit = i;
            break;
        }
    }
    __syncthreads();
    shu[tid] = hit;
    __syncthreads();
    for (int st = GK_SAMPLE_NT / 2; st > 0; st >>= 1) {
        if (tid < st && shu[tid + st] < shu[tid]) shu[tid] = shu[tid + st];
        __syncthreads();
    }
    const uint32_t first = shu[0];
    __syncthreads();
    shu[tid] = last == 0xffffffffu ? 0u : last + 1u; /* 0: none */
    __syncthreads();
    for (int st = GK_SAMPLE_NT / 2; st > 0; st >>= 1) {
        if (tid < st && shu[tid + st] > shu[tid]) shu[tid] = shu[tid + st];
        __syncthreads();
    }
    if (tid == 0) ids[r] = first != 0xffffffffu ? (int32_t)first : (shu[0] ? (int32_t)(shu[0] - 1) : 0);
}

extern "C" size_t ds4rt_gk_sample_scratch_bytes(int64_t rows, uint32_t width) {
    if (rows < 1) rows = 1;
    return gk_align((size_t)rows * (width ? width : 1) * 4);
}

extern "C" int ds4rt_gk_sample(const ds4rt_gk_sample_params *p, int64_t rows, uint32_t width, const float *d_x,
                               const uint64_t *d_counter, int32_t *d_ids, void *d_scratch, size_t scratch_bytes,
                               void *stream) {
    if (rows == 0) return DS4RT_GK_OK;
    if (p == NULL || rows < 0 || rows > 0x7fffffff || width == 0 || !d_x || !d_ids)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "sample: bad arguments");
    if (!(p->temperature > 0.0f)) return ds4rt_gk_argmax(rows, width, d_x, d_ids, stream);
    const size_t need = ds4rt_gk_sample_scratch_bytes(rows, width);
    if (d_counter == NULL || d_scratch == NULL || scratch_bytes < need)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "sample: needs the counter and %zu bytes of scratch (got %zu)", need,
                             scratch_bytes);
    hipLaunchKernelGGL(gk_sample_kernel, dim3((unsigned)rows), dim3(GK_SAMPLE_NT), 0, (hipStream_t)stream,
                       p->temperature, p->top_k, p->top_p, p->min_p, p->seed, width, d_x, d_counter,
                       (float *)d_scratch, d_ids);
    return DS4RT_GK_LAUNCHED("sample");
}
