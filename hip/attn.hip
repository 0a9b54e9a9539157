/*
 * attn.hip - the attention-side kernels (launchers in hip/attn.h): RMS norm, RoPE with YaRN,
 * FP8/FP4 simulations, Hadamard, the raw KV ring store, the streaming KV compressor, the
 * lightning indexer with its top-k, and attention with sinks (docs/GPU.md, "Attention
 * kernels"; the ops they mirror are src/backend/cpu/cpu_rows.c, cpu_math.c, cpu_compressor.c
 * and cpu_attention.c).
 *
 * Where a kernel can follow the CPU's arithmetic order it does, with every product and sum
 * rounded on its own (the *_rn helpers below: no fused multiply-add), so its result is the
 * CPU's bit for bit wherever the two libm's agree (exp, cos, sin: always under HIP-CPU, to an
 * ulp of float64 on a GPU). Attention and the RMS norm reduce in a fixed order of their own;
 * docs/GPU.md states their tolerances. Every reduction goes through shared memory (no
 * shuffles), and no partition of the work depends on the batch size, so a row's bits do not
 * depend on the rows beside it.
 */
#include <math.h>

#include "attn.h"
#include "gk_internal.h"

#if defined(__clang__) && !defined(__CUDACC__)
#pragma clang fp contract(off)
#endif

#if defined(DS4RT_HIP_CPU)
/* HIP-CPU marks kernels and device functions `simd` (vector clones, an optimisation of the
 * emulation), which GCC refuses for struct arguments; plain functions run the same code. */
#undef __global__
#define __global__ __attribute__((flatten))
#undef __device__
#define __device__
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

/* ---- arithmetic rounded one operation at a time --------------------------------------------- */

#if defined(__CUDACC__)
__device__ __forceinline__ float f_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float f_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double d_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double d_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double d_sub(double a, double b) { return __dsub_rn(a, b); }
#else
/* hipcc: contraction is off for this file (pragma above); HIP-CPU: the host compiler does not
 * contract without an FMA target, as for the CPU backend. */
__device__ __forceinline__ float f_mul(float a, float b) { return a * b; }
__device__ __forceinline__ float f_add(float a, float b) { return a + b; }
__device__ __forceinline__ double d_mul(double a, double b) { return a * b; }
__device__ __forceinline__ double d_add(double a, double b) { return a + b; }
__device__ __forceinline__ double d_sub(double a, double b) { return a - b; }
#endif

/* Threads of a block for the row kernels: a few warps, never a literal lane count. */
#define ROW_THREADS (4 * DS4RT_WARP)

static inline unsigned blocks_for(int64_t work, unsigned threads) {
    return (unsigned)((work + threads - 1) / threads);
}

__device__ __forceinline__ int64_t pass_pos0(const void *pass) { return ((const int64_t *)pass)[0]; }
__device__ __forceinline__ int64_t pass_base(const void *pass) { return ((const int64_t *)pass)[1]; }

/* Sum of v over the block (blockDim.x a power of two), in a fixed tree order; every thread
 * gets it. sh holds blockDim.x doubles. */
__device__ double block_sum_d(double v, double *sh) {
    const unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

/* ---- RMS norm ---------------------------------------------------------------------------- */

/* A block of NORM_THREADS per row: a decode normalises one row, and each thread's chain of
 * dependent loads is width / NORM_THREADS long (4 for 4096; it was 32 with ROW_THREADS). */
#define NORM_THREADS 1024

__global__ void __launch_bounds__(NORM_THREADS)
    rms_norm_kernel(const float *x, const float *w, float eps, uint32_t width, float *out) {
    GK_PDL_ENTRY();
    __shared__ double sh[NORM_THREADS];
    __shared__ float s_inv;
    const float *xr = x + (size_t)blockIdx.x * width;
    float *orow = out + (size_t)blockIdx.x * width;
    double ss = 0.0;
    for (uint32_t j = threadIdx.x; j < width; j += blockDim.x) ss = d_add(ss, d_mul((double)xr[j], (double)xr[j]));
    ss = block_sum_d(ss, sh);
    if (threadIdx.x == 0) s_inv = (float)(1.0 / sqrt(d_add(ss / (double)width, (double)eps)));
    __syncthreads();
    const float inv = s_inv;
    for (uint32_t j = threadIdx.x; j < width; j += blockDim.x)
        orow[j] = w != NULL ? f_mul(f_mul(xr[j], inv), w[j]) : f_mul(xr[j], inv);
}

extern "C" int ds4rt_gk_rms_norm(int64_t rows, uint32_t width, const float *d_x, const float *d_w, float eps,
                                 float *d_out, void *stream) {
    if (rows <= 0 || width == 0) return DS4RT_GK_OK;
    if (rows > 0x7fffffff) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "rms_norm: %lld rows", (long long)rows);
    hipLaunchKernelGGL(rms_norm_kernel, dim3((unsigned)rows), dim3(NORM_THREADS), 0, (hipStream_t)stream, d_x, d_w,
                       eps, width, d_out);
    return DS4RT_GK_LAUNCHED("rms_norm");
}

/* ---- RoPE with YaRN ------------------------------------------------------------------------ */

/* The position-independent part of the angles, computed on the host exactly as
 * ds4rt_rope_angles does (src/backend/cpu/cpu_math.c): theta_k = pos * pw[k], then the YaRN
 * blend with gamma[k]. Passed by value, so a captured graph carries it. */
typedef struct rope_tab {
    uint32_t n_rot;
    int yarn;
    double ys;
    double pw[DS4RT_GK_ROPE_MAX_PAIRS];
    double gamma[DS4RT_GK_ROPE_MAX_PAIRS];
} rope_tab;

static int rope_table(const ds4rt_gk_rope_params *r, rope_tab *t, const char *who) {
    const uint32_t half = r->n_rot / 2;
    if (half > DS4RT_GK_ROPE_MAX_PAIRS)
        return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "%s: %u rotated dims exceed %d", who, r->n_rot,
                             2 * DS4RT_GK_ROPE_MAX_PAIRS);
    t->n_rot = r->n_rot;
    t->yarn = r->yarn != 0;
    t->ys = r->yarn_scale;
    for (uint32_t k = 0; k < DS4RT_GK_ROPE_MAX_PAIRS; k++) {
        t->pw[k] = 0.0;
        t->gamma[k] = 0.0;
    }
    for (uint32_t k = 0; k < half; k++) {
        t->pw[k] = pow(r->base, -2.0 * k / (double)r->n_rot);
        if (r->yarn) {
            double span = r->yarn_hi - r->yarn_lo;
            double tt = (k - r->yarn_lo) / (span > 0.001 ? span : 0.001);
            tt = tt < 0 ? 0 : (tt > 1 ? 1 : tt);
            t->gamma[k] = 1.0 - tt;
        }
    }
    return DS4RT_GK_OK;
}

/* cos/sin of pair k at position pos, in the CPU's order of operations. */
__device__ __forceinline__ void rope_angle(const rope_tab &t, int64_t pos, uint32_t k, double *c, double *s) {
    double theta = d_mul((double)pos, t.pw[k]);
    if (t.yarn) {
        const double g = t.gamma[k];
        theta = d_add(d_mul(d_mul(t.ys, theta), d_sub(1.0, g)), d_mul(theta, g));
    }
    *c = cos(theta);
    *s = sin(theta);
}

/* Rotates pair k of the tail of v (dim floats). */
__device__ __forceinline__ void rope_pair(float *v, uint32_t dim, uint32_t n_rot, uint32_t k, double c, double sn,
                                          int sign) {
    float *tail = v + dim - n_rot;
    const double a = tail[2 * k], b = tail[2 * k + 1];
    const double s = (double)sign * sn;
    tail[2 * k] = (float)d_sub(d_mul(a, c), d_mul(b, s));
    tail[2 * k + 1] = (float)d_add(d_mul(a, s), d_mul(b, c));
}

/* Grid (row, head group): each block forms the row's angles itself (they are cheap; sharing
 * them would cost a second launch) and rotates the pairs of its `hpb` heads, one per thread,
 * so a decode's 64 query heads are 16 blocks instead of one block of 16 serial steps. */
__global__ void rope_kernel(const void *pass, rope_tab t, uint32_t heads, uint32_t hpb, uint32_t dim, int sign,
                            float *x) {
    GK_PDL_ENTRY();
    __shared__ double cs[DS4RT_GK_ROPE_MAX_PAIRS], sn[DS4RT_GK_ROPE_MAX_PAIRS];
    const uint32_t half = t.n_rot / 2, h0 = blockIdx.y * hpb;
    const uint32_t nh = heads - h0 < hpb ? heads - h0 : hpb;
    const int64_t pos = pass_pos0(pass) + blockIdx.x;
    for (uint32_t k = threadIdx.x; k < half; k += blockDim.x) rope_angle(t, pos, k, &cs[k], &sn[k]);
    __syncthreads();
    float *row = x + ((size_t)blockIdx.x * heads + h0) * dim;
    for (uint32_t e = threadIdx.x; e < nh * half; e += blockDim.x) {
        const uint32_t h = e / half, k = e % half;
        rope_pair(row + (size_t)h * dim, dim, t.n_rot, k, cs[k], sn[k], sign);
    }
}

extern "C" int ds4rt_gk_rope(const void *d_pass, int64_t n, uint32_t heads, uint32_t dim, const ds4rt_gk_rope_params *r,
                             int sign, float *d_x, void *stream) {
    if (n <= 0 || heads == 0 || r->n_rot < 2) return DS4RT_GK_OK;
    if (r->n_rot > dim || (sign != 1 && sign != -1) || n > 0x7fffffff)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "rope: n_rot %u of dim %u, sign %d", r->n_rot, dim, sign);
    rope_tab t;
    int st = rope_table(r, &t, "rope");
    if (st != DS4RT_GK_OK) return st;
    const uint32_t half = r->n_rot / 2, hpb = half >= ROW_THREADS ? 1 : ROW_THREADS / half;
    const uint32_t groups = (heads + hpb - 1) / hpb;
    if (groups > 65535) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "rope: %u heads", heads);
    hipLaunchKernelGGL(rope_kernel, dim3((unsigned)n, groups), dim3(ROW_THREADS), 0, (hipStream_t)stream, d_pass, t,
                       heads, hpb, dim, sign, d_x);
    return DS4RT_GK_LAUNCHED("rope");
}

/* ---- RMS norm then RoPE, per head ---------------------------------------------------------- */

/* Block (row, head) of P threads, P the power of two >= dim: thread j holds element j. Its sum
 * of squares is rms_norm_kernel's: there thread j of 1024 holds element j (dim <= 1024) and the
 * tree adds exact zeros above P, which change nothing, so block_sum_d over P gives its bits.
 * The scaled row goes to shared memory, then thread j writes element j, rotated as rope_pair
 * forms it where j is in the tail (each of a pair's two threads computes its own element from
 * both). The angles are rope_kernel's, formed per block. */
__global__ void __launch_bounds__(NORM_THREADS)
    norm_rope_kernel(const void *pass, rope_tab t, uint32_t heads, uint32_t dim, const float *w, float eps, float *x) {
    GK_PDL_ENTRY();
    __shared__ double sh[NORM_THREADS];
    __shared__ float v[NORM_THREADS];
    __shared__ double cs[DS4RT_GK_ROPE_MAX_PAIRS], sn[DS4RT_GK_ROPE_MAX_PAIRS];
    const uint32_t j = threadIdx.x, half = t.n_rot / 2;
    const int64_t pos = pass_pos0(pass) + blockIdx.x;
    for (uint32_t k = j; k < half; k += blockDim.x) rope_angle(t, pos, k, &cs[k], &sn[k]);
    float *row = x + ((size_t)blockIdx.x * heads + blockIdx.y) * dim;
    const float xv = j < dim ? row[j] : 0.0f;
    const double ss = block_sum_d(j < dim ? d_add(0.0, d_mul((double)xv, (double)xv)) : 0.0, sh);
    const float inv = (float)(1.0 / sqrt(d_add(ss / (double)dim, (double)eps)));
    if (j < dim) v[j] = w != NULL ? f_mul(f_mul(xv, inv), w[j]) : f_mul(xv, inv);
    __syncthreads(); /* v and the angles */
    if (j >= dim) return;
    const uint32_t lo = dim - t.n_rot;
    if (j < lo) {
        row[j] = v[j];
        return;
    }
    const uint32_t k = (j - lo) / 2;
    const double a = v[lo + 2 * k], b = v[lo + 2 * k + 1], c = cs[k], s = sn[k]; /* sign +1 */
    row[j] = (j - lo) % 2 == 0 ? (float)d_sub(d_mul(a, c), d_mul(b, s)) : (float)d_add(d_mul(a, s), d_mul(b, c));
}

extern "C" int ds4rt_gk_norm_rope(const void *d_pass, int64_t n, uint32_t heads, uint32_t dim, const float *d_w,
                                  float eps, const ds4rt_gk_rope_params *r, float *d_x, void *stream) {
    if (n <= 0 || heads == 0 || dim == 0) return DS4RT_GK_OK;
    if (dim > NORM_THREADS) { /* beyond one element a thread: the two launches */
        int st = ds4rt_gk_rms_norm(n * (int64_t)heads, dim, d_x, d_w, eps, d_x, stream);
        return st != DS4RT_GK_OK ? st : ds4rt_gk_rope(d_pass, n, heads, dim, r, +1, d_x, stream);
    }
    if (r->n_rot > dim || r->n_rot % 2 != 0 || n > 0x7fffffff || heads > 65535)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "norm_rope: n_rot %u of dim %u, %lld rows of %u heads", r->n_rot,
                             dim, (long long)n, heads);
    rope_tab t;
    int st = rope_table(r, &t, "norm_rope");
    if (st != DS4RT_GK_OK) return st;
    unsigned p = 32;
    while (p < dim) p *= 2;
    hipLaunchKernelGGL(norm_rope_kernel, dim3((unsigned)n, heads), dim3(p), 0, (hipStream_t)stream, d_pass, t, heads,
                       dim, d_w, eps, d_x);
    return DS4RT_GK_LAUNCHED("norm_rope");
}

/* ---- FP8 / FP4 simulations (src/backend/cpu/cpu_math.c, the same steps) --------------------- */

__device__ __forceinline__ float pow2_ceil(float x) {
    int e;
    float f = frexpf(x, &e);
    return ldexpf(1.0f, f == 0.5f ? e - 1 : e);
}

__device__ __forceinline__ float round_e4m3(float x) {
    float a = fabsf(x);
    if (a == 0.0f || isnan(a)) return x;
    if (a >= 448.0f) return copysignf(448.0f, x);
    int e;
    frexpf(a, &e);
    int exp2 = e - 1;
    if (exp2 < -6) exp2 = -6;
    float step = ldexpf(1.0f, exp2 - 3);
    float q = f_mul(rintf(a / step), step);
    if (q > 448.0f) q = 448.0f;
    return copysignf(q, x);
}

__device__ __forceinline__ float round_e2m1(float x) {
    float a = fabsf(x), q;
    if (a <= 0.25f) q = 0.0f;
    else if (a < 0.75f) q = 0.5f;
    else if (a <= 1.25f) q = 1.0f;
    else if (a < 1.75f) q = 1.5f;
    else if (a <= 2.5f) q = 2.0f;
    else if (a < 3.5f) q = 3.0f;
    else if (a <= 5.0f) q = 4.0f;
    else q = 6.0f;
    return copysignf(q, x);
}

/* One scale block of 64 (FP8) / 32 (FP4) floats, by one thread. */
__device__ void fp8_block(float *v) {
    float amax = 0.0f;
    for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(v[i]));
    if (amax < 1e-4f) amax = 1e-4f;
    const float s = pow2_ceil(amax / 448.0f);
    for (int i = 0; i < 64; i++) {
        float y = v[i] / s;
        y = y > 448.0f ? 448.0f : (y < -448.0f ? -448.0f : y);
        v[i] = f_mul(round_e4m3(y), s);
    }
}

__device__ void fp4_block(float *v) {
    const float amin = 6.0f * 0x1p-126f;
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[i]));
    if (amax < amin) amax = amin;
    const float s = pow2_ceil(amax / 6.0f);
    for (int i = 0; i < 32; i++) {
        float y = v[i] / s;
        y = y > 6.0f ? 6.0f : (y < -6.0f ? -6.0f : y);
        v[i] = f_mul(round_e2m1(y), s);
    }
}

/* One scale block per 32 lanes (a wave64 holds two): lane l holds elements l and l + 32
 * (FP8's 64) or l (FP4's 32); the block's amax by xor-shuffles (fmaxf is exact and ignores NaN
 * in any order, so this is fp8_block's amax), then each lane rounds its own elements with
 * fp8_block's / fp4_block's steps. One thread per block walking 64 elements serially took
 * 14.5 us per decode call on the H200 (docs/PERFORMANCE.md). */
#define LOWP_LANES 32
__global__ void lowp_round_kernel(int64_t rows, uint32_t stride, uint32_t blocks_per_row, int fp4, float *x) {
    GK_PDL_ENTRY();
    const int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / LOWP_LANES;
    const uint32_t l = threadIdx.x % LOWP_LANES;
    const bool ok = g < rows * blocks_per_row; /* no early return: every lane takes the shuffles */
    const int64_t gg = ok ? g : 0, r = gg / blocks_per_row, k = gg % blocks_per_row;
    float *v = x + (size_t)r * stride + (size_t)k * (fp4 ? 32 : 64);
    const float a0 = ok ? v[l] : 0.0f, a1 = ok && !fp4 ? v[l + 32] : 0.0f;
    float amax = fmaxf(fabsf(a0), fabsf(a1));
    for (int o = LOWP_LANES / 2; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor(amax, o, LOWP_LANES));
    if (fp4) {
        const float amin = 6.0f * 0x1p-126f;
        const float s = pow2_ceil((amax < amin ? amin : amax) / 6.0f);
        float y = a0 / s;
        y = y > 6.0f ? 6.0f : (y < -6.0f ? -6.0f : y);
        if (ok) v[l] = f_mul(round_e2m1(y), s);
    } else {
        const float s = pow2_ceil((amax < 1e-4f ? 1e-4f : amax) / 448.0f);
        float y0 = a0 / s, y1 = a1 / s;
        y0 = y0 > 448.0f ? 448.0f : (y0 < -448.0f ? -448.0f : y0);
        y1 = y1 > 448.0f ? 448.0f : (y1 < -448.0f ? -448.0f : y1);
        if (ok) {
            v[l] = f_mul(round_e4m3(y0), s);
            v[l + 32] = f_mul(round_e4m3(y1), s);
        }
    }
}

static int lowp_round(int64_t rows, uint32_t stride, uint32_t width, float *d_x, void *stream, int fp4) {
    const uint32_t blk = fp4 ? 32 : 64;
    const char *name = fp4 ? "fp4_round" : "fp8_round";
    if (rows <= 0 || width == 0) return DS4RT_GK_OK;
    if (width % blk != 0 || width > stride)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: width %u (stride %u) is not a multiple of %u", name, width,
                             stride, blk);
    const int64_t work = rows * (width / blk) * LOWP_LANES;
    hipLaunchKernelGGL(lowp_round_kernel, dim3(blocks_for(work, ROW_THREADS)), dim3(ROW_THREADS), 0,
                       (hipStream_t)stream, rows, stride, width / blk, fp4, d_x);
    return ds4rt_gk_check(hipGetLastError(), fp4 ? "launch fp4_round" : "launch fp8_round");
}

extern "C" int ds4rt_gk_fp8_round(int64_t rows, uint32_t stride, uint32_t width, float *d_x, void *stream) {
    return lowp_round(rows, stride, width, d_x, stream, 0);
}

extern "C" int ds4rt_gk_fp4_round(int64_t rows, uint32_t stride, uint32_t width, float *d_x, void *stream) {
    return lowp_round(rows, stride, width, d_x, stream, 1);
}

/* ---- Hadamard rotation ----------------------------------------------------------------------- */

/* In-place Sylvester butterflies of v[n] in shared memory by the whole block, stage by stage
 * as ds4rt_hadamard does (each output is the CPU's a + b or a - b of the same operands). */
__device__ void hadamard_shared(float *v, uint32_t n) {
    for (uint32_t h = 1; h < n; h *= 2) {
        for (uint32_t p = threadIdx.x; p < n / 2; p += blockDim.x) {
            const uint32_t i = (p / h) * 2 * h + (p % h);
            const float a = v[i], b = v[i + h];
            v[i] = f_add(a, b);
            v[i + h] = a - b;
        }
        __syncthreads();
    }
    const float s = (float)(1.0 / sqrt((double)n));
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) v[i] = f_mul(v[i], s);
    __syncthreads();
}

__global__ void hadamard_kernel(uint32_t width, float *x) {
    GK_PDL_ENTRY();
    __shared__ float v[DS4RT_GK_HADAMARD_MAX];
    float *row = x + (size_t)blockIdx.x * width;
    for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) v[i] = row[i];
    __syncthreads();
    hadamard_shared(v, width);
    for (uint32_t i = threadIdx.x; i < width; i += blockDim.x) row[i] = v[i];
}

static bool pow2(uint32_t n) { return n != 0 && (n & (n - 1)) == 0; }

extern "C" int ds4rt_gk_hadamard(int64_t rows, uint32_t width, float *d_x, void *stream) {
    if (rows <= 0) return DS4RT_GK_OK;
    if (!pow2(width) || width > DS4RT_GK_HADAMARD_MAX || rows > 0x7fffffff)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "hadamard: width %u is not a power of two <= %d", width,
                             DS4RT_GK_HADAMARD_MAX);
    hipLaunchKernelGGL(hadamard_kernel, dim3((unsigned)rows), dim3(ROW_THREADS), 0, (hipStream_t)stream, width, d_x);
    return DS4RT_GK_LAUNCHED("hadamard");
}

/* ---- raw KV ring store ------------------------------------------------------------------------- */

__global__ void kv_store_kernel(const void *pass, int64_t n, uint32_t dim, const float *src, float *ring,
                                uint32_t cap) {
    GK_PDL_ENTRY();
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n * dim) return;
    const int64_t i = e / dim, j = e % dim;
    if (i + cap < n) return; /* a later row of the pass takes this slot (the CPU's last write wins) */
    const int64_t slot = (pass_pos0(pass) + i) % cap;
    ring[(size_t)slot * dim + j] = src[e];
}

extern "C" int ds4rt_gk_kv_store(const void *d_pass, int64_t n, uint32_t dim, const float *d_src, float *d_ring,
                                 uint32_t ring_cap, void *stream) {
    if (n <= 0 || dim == 0) return DS4RT_GK_OK;
    if (ring_cap == 0) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "kv_store: empty ring");
    hipLaunchKernelGGL(kv_store_kernel, dim3(blocks_for(n * dim, ROW_THREADS)), dim3(ROW_THREADS), 0,
                       (hipStream_t)stream, d_pass, n, dim, d_src, d_ring, ring_cap);
    return DS4RT_GK_LAUNCHED("kv_store");
}

/* ---- the streaming KV compressor ---------------------------------------------------------------- */

__global__ void fill2_kernel(float *a, float va, float *b, float vb, size_t count) {
    GK_PDL_ENTRY();
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= count) return;
    a[e] = va;
    b[e] = vb;
}

__global__ void copy2_kernel(float *a, const float *sa, float *b, const float *sb, size_t count) {
    GK_PDL_ENTRY();
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= count) return;
    a[e] = sa[e];
    b[e] = sb[e];
}

extern "C" int ds4rt_gk_comp_reset(const ds4rt_gk_comp_state *cs, void *stream) {
    const size_t count = (size_t)cs->rows * cs->width;
    if (count == 0) return DS4RT_GK_OK;
    hipLaunchKernelGGL(fill2_kernel, dim3(blocks_for((int64_t)count, ROW_THREADS)), dim3(ROW_THREADS), 0,
                       (hipStream_t)stream, cs->d_kv, 0.0f, cs->d_score, -INFINITY, count);
    return DS4RT_GK_LAUNCHED("comp_reset");
}

static int comp_copy(float *kv, const float *skv, float *sc, const float *ssc, size_t count, void *stream,
                     const char *what) {
    if (count == 0) return DS4RT_GK_OK;
    hipLaunchKernelGGL(copy2_kernel, dim3(blocks_for((int64_t)count, ROW_THREADS)), dim3(ROW_THREADS), 0,
                       (hipStream_t)stream, kv, skv, sc, ssc, count);
    return ds4rt_gk_check(hipGetLastError(), what);
}

extern "C" int ds4rt_gk_comp_snapshot(const ds4rt_gk_comp_state *cs, void *stream) {
    return comp_copy(cs->d_snap_kv, cs->d_kv, cs->d_snap_score, cs->d_score, (size_t)cs->rows * cs->width, stream,
                     "launch comp_snapshot");
}

/* Arguments of the compressor kernels. pass NULL: positions start at pos0 (a rollback). */
typedef struct comp_args {
    const void *pass;
    int64_t pos0;
    int64_t n;
    uint32_t R, d, w, d_nope, cap;
    const float *u, *g; /* row i at u + i * in_stride */
    uint32_t in_stride;
    float *journal;     /* NULL: do not journal */
    const float *ape, *norm;
    float eps;
    int post;
    float *kv, *score, *out;
} comp_args;

/* The frontier is per feature: feature j (< d) owns column j and, on overlapping (R = 4)
 * compressors, column d + j, in every frontier row. So thread j pushes the n rows in position
 * order, pools its feature whenever a position closes a block (float64, the CPU's order),
 * writes the pooled value into the emitted row and shifts its columns, exactly as push() of
 * src/backend/cpu/cpu_compressor.c. */
__global__ void comp_push_kernel(comp_args a) {
    GK_PDL_ENTRY();
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= a.d) return;
    const int64_t pos0 = a.pass != NULL ? pass_pos0(a.pass) : a.pos0;
    const uint32_t R = a.R, d = a.d, w = a.w;
    const bool overlap = R == 4;
    float *kv = a.kv, *sc = a.score;
    for (int64_t i = 0; i < a.n; i++) {
        const int64_t pos = pos0 + i;
        const float *u = a.u + (size_t)i * a.in_stride, *g = a.g + (size_t)i * a.in_stride;
        if (a.journal != NULL) {
            float *jr = a.journal + (size_t)i * 2 * w;
            jr[j] = u[j];
            jr[w + j] = g[j];
            if (overlap) {
                jr[d + j] = u[d + j];
                jr[w + d + j] = g[d + j];
            }
        }
        const uint32_t r = (uint32_t)(pos % R);
        const uint32_t slot = overlap ? R + r : r;
        const float *ape = a.ape + (size_t)r * w;
        kv[(size_t)slot * w + j] = u[j];
        sc[(size_t)slot * w + j] = f_add(g[j], ape[j]);
        if (overlap) {
            kv[(size_t)slot * w + d + j] = u[d + j];
            sc[(size_t)slot * w + d + j] = f_add(g[d + j], ape[d + j]);
        }
        if ((pos + 1) % R != 0) continue;

        float mx = -INFINITY;
        for (uint32_t q = 0; q < R; q++) mx = fmaxf(mx, sc[(size_t)q * w + j]);
        if (overlap)
            for (uint32_t q = R; q < 2 * R; q++) mx = fmaxf(mx, sc[(size_t)q * w + d + j]);
        double num = 0.0, den = 0.0;
        for (uint32_t q = 0; q < R; q++) {
            const float s = sc[(size_t)q * w + j];
            if (overlap && s == -INFINITY) continue;
            const double e = exp(d_sub((double)s, (double)mx));
            den = d_add(den, e);
            num = d_add(num, d_mul(e, (double)kv[(size_t)q * w + j]));
        }
        if (overlap) {
            for (uint32_t q = R; q < 2 * R; q++) {
                const double e = exp(d_sub((double)sc[(size_t)q * w + d + j], (double)mx));
                den = d_add(den, e);
                num = d_add(num, d_mul(e, (double)kv[(size_t)q * w + d + j]));
            }
            for (uint32_t q = 0; q < R; q++) {
                kv[(size_t)q * w + j] = kv[(size_t)(R + q) * w + j];
                kv[(size_t)q * w + d + j] = kv[(size_t)(R + q) * w + d + j];
                sc[(size_t)q * w + j] = sc[(size_t)(R + q) * w + j];
                sc[(size_t)q * w + d + j] = sc[(size_t)(R + q) * w + d + j];
            }
        }
        const int64_t row = (pos + 1) / R - 1;
        if (row < (int64_t)a.cap) a.out[(size_t)row * d + j] = (float)(num / den);
    }
}

/* Finishes each row emitted by the pushes: RMSNorm (one thread sums in the CPU's order),
 * RoPE at the block's first position, then the post-processing; block e takes the e-th
 * position of the pass that closes a block. */
__global__ void comp_emit_kernel(comp_args a, rope_tab t) {
    GK_PDL_ENTRY();
    __shared__ float z[DS4RT_GK_HADAMARD_MAX];
    __shared__ double cs[DS4RT_GK_ROPE_MAX_PAIRS], sn[DS4RT_GK_ROPE_MAX_PAIRS];
    __shared__ float s_inv;
    const int64_t pos0 = a.pass != NULL ? pass_pos0(a.pass) : a.pos0;
    const uint32_t R = a.R, d = a.d;
    const int64_t pos = pos0 + (int64_t)(R - 1 - (uint32_t)(pos0 % R)) + (int64_t)blockIdx.x * R;
    if (pos >= pos0 + a.n) return;
    const int64_t row = (pos + 1) / R - 1;
    if (row >= (int64_t)a.cap) return;
    float *orow = a.out + (size_t)row * d;
    for (uint32_t j = threadIdx.x; j < d; j += blockDim.x) z[j] = orow[j];
    const uint32_t half = t.n_rot / 2;
    for (uint32_t k = threadIdx.x; k < half; k += blockDim.x) rope_angle(t, pos + 1 - R, k, &cs[k], &sn[k]);
    __syncthreads();
    if (threadIdx.x == 0) {
        double ss = 0.0;
        for (uint32_t j = 0; j < d; j++) ss = d_add(ss, d_mul((double)z[j], (double)z[j]));
        s_inv = (float)(1.0 / sqrt(d_add(ss / (double)d, (double)a.eps)));
    }
    __syncthreads();
    const float inv = s_inv;
    for (uint32_t j = threadIdx.x; j < d; j += blockDim.x)
        z[j] = a.norm != NULL ? f_mul(f_mul(z[j], inv), a.norm[j]) : f_mul(z[j], inv);
    __syncthreads();
    for (uint32_t k = threadIdx.x; k < half; k += blockDim.x) rope_pair(z, d, t.n_rot, k, cs[k], sn[k], +1);
    __syncthreads();
    switch (a.post) {
    case DS4RT_GK_COMP_POST_FP8:
        for (uint32_t b = threadIdx.x; b < a.d_nope / 64; b += blockDim.x) fp8_block(z + 64 * b);
        __syncthreads();
        break;
    case DS4RT_GK_COMP_POST_HADAMARD_FP4:
        hadamard_shared(z, d);
        for (uint32_t b = threadIdx.x; b < d / 32; b += blockDim.x) fp4_block(z + 32 * b);
        __syncthreads();
        break;
    case DS4RT_GK_COMP_POST_HADAMARD: hadamard_shared(z, d); break;
    default: break;
    }
    for (uint32_t j = threadIdx.x; j < d; j += blockDim.x) orow[j] = z[j];
}

static int comp_check(const ds4rt_gk_comp_desc *c, const ds4rt_gk_comp_state *cs, const char *who) {
    const uint32_t coff = c->ratio == 4 ? 2 : 1;
    if (c->ratio < 2 || c->dim == 0 || c->dim > DS4RT_GK_HADAMARD_MAX || cs->width != coff * c->dim ||
        cs->rows != coff * c->ratio || c->rope.n_rot > c->dim || c->d_nope > c->dim)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: ratio %u, dim %u, state %u x %u", who, c->ratio, c->dim,
                             cs->rows, cs->width);
    if ((c->post == DS4RT_GK_COMP_POST_FP8 && c->d_nope % 64 != 0) ||
        ((c->post == DS4RT_GK_COMP_POST_HADAMARD || c->post == DS4RT_GK_COMP_POST_HADAMARD_FP4) && !pow2(c->dim)) ||
        (c->post == DS4RT_GK_COMP_POST_HADAMARD_FP4 && c->dim % 32 != 0))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: post-processing %d of a %u-wide row (FP8 on %u)", who,
                             c->post, c->dim, c->d_nope);
    return DS4RT_GK_OK;
}

static int comp_run(comp_args a, const ds4rt_gk_comp_desc *c, void *stream, const char *who) {
    if (a.n <= 0) return DS4RT_GK_OK;
    rope_tab t;
    int st = rope_table(&c->rope, &t, who);
    if (st != DS4RT_GK_OK) return st;
    hipLaunchKernelGGL(comp_push_kernel, dim3(blocks_for(a.d, ROW_THREADS)), dim3(ROW_THREADS), 0,
                       (hipStream_t)stream, a);
    if ((st = ds4rt_gk_check(hipGetLastError(), who)) != DS4RT_GK_OK) return st;
    const unsigned emissions = (unsigned)((a.n + a.R - 1) / a.R);
    hipLaunchKernelGGL(comp_emit_kernel, dim3(emissions), dim3(ROW_THREADS), 0, (hipStream_t)stream, a, t);
    return ds4rt_gk_check(hipGetLastError(), who);
}

static comp_args comp_base(const ds4rt_gk_comp_desc *c, const ds4rt_gk_comp_state *cs, int64_t n) {
    comp_args a;
    a.pass = NULL;
    a.pos0 = 0;
    a.n = n;
    a.R = c->ratio;
    a.d = c->dim;
    a.w = cs->width;
    a.d_nope = c->d_nope;
    a.cap = cs->cap;
    a.u = a.g = NULL;
    a.in_stride = cs->width;
    a.journal = NULL;
    a.ape = c->d_ape;
    a.norm = c->d_norm;
    a.eps = c->rms_eps;
    a.post = c->post;
    a.kv = cs->d_kv;
    a.score = cs->d_score;
    a.out = cs->d_out;
    return a;
}

extern "C" int ds4rt_gk_comp_update(const void *d_pass, int64_t n, const ds4rt_gk_comp_desc *c,
                                    const ds4rt_gk_comp_state *cs, const float *d_u, const float *d_g, void *stream) {
    int st = comp_check(c, cs, "comp_update");
    if (st != DS4RT_GK_OK) return st;
    comp_args a = comp_base(c, cs, n);
    a.pass = d_pass;
    a.u = d_u;
    a.g = d_g;
    a.journal = cs->d_journal;
    return comp_run(a, c, stream, "launch comp_update");
}

extern "C" int ds4rt_gk_comp_rollback(const ds4rt_gk_comp_desc *c, const ds4rt_gk_comp_state *cs,
                                      int64_t batch_start, int64_t keep, void *stream) {
    int st = comp_check(c, cs, "comp_rollback");
    if (st != DS4RT_GK_OK) return st;
    if (batch_start < 0 || keep < 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "comp_rollback: start %lld, keep %lld", (long long)batch_start,
                             (long long)keep);
    st = comp_copy(cs->d_kv, cs->d_snap_kv, cs->d_score, cs->d_snap_score, (size_t)cs->rows * cs->width, stream,
                   "launch comp_rollback");
    if (st != DS4RT_GK_OK) return st;
    comp_args a = comp_base(c, cs, keep);
    a.pos0 = batch_start;
    a.u = cs->d_journal;
    a.g = cs->d_journal + cs->width;
    a.in_stride = 2 * cs->width;
    return comp_run(a, c, stream, "launch comp_rollback");
}

/* ---- the lightning indexer -------------------------------------------------------------------- */

#define IX_ROWS 16    /* indexer rows scored per block */
#define IX_QMAX 8256  /* Hi * (d_i + 1) floats of the row's queries in shared memory */
#define IX_HMAX 64    /* Hi */
#define IX_RPT 8      /* rows a thread scores against one head */
#define IX_MAX_GRID 1024 /* blocks per batch row; more tiles are walked by the same blocks */

/* Scores of IX_ROWS visible rows for batch row blockIdx.y, each in the CPU's order: per head
 * a sequential dot, then the weighted relu terms summed over heads in head order. */
__global__ void index_score_kernel(const void *pass, uint32_t Hi, uint32_t di, uint32_t topk, int64_t max_comp,
                                   float wscale, const float *iq, const float *iw, const float *rows,
                                   float *scores) {
    GK_PDL_ENTRY();
    __shared__ float q[IX_QMAX];
    __shared__ float k[IX_ROWS * 128];
    __shared__ float term[IX_ROWS * IX_HMAX];
    const int64_t i = blockIdx.y;
    const int64_t n_vis = (pass_pos0(pass) + i + 1) / 4;
    if (n_vis <= (int64_t)topk || n_vis > max_comp || (int64_t)blockIdx.x * IX_ROWS >= n_vis) return;
    const float *qi = iq + (size_t)i * Hi * di;
    for (uint32_t e = threadIdx.x; e < Hi * di; e += blockDim.x) q[(e / di) * (di + 1) + e % di] = qi[e];
    const float *wi = iw + (size_t)i * Hi;
    /* a fixed grid walks the visible tiles (a tile is always one block's whole job) */
    for (int64_t r0 = (int64_t)blockIdx.x * IX_ROWS; r0 < n_vis; r0 += (int64_t)gridDim.x * IX_ROWS) {
        const uint32_t nr = (uint32_t)(n_vis - r0 < IX_ROWS ? n_vis - r0 : IX_ROWS);
        for (uint32_t c0 = 0; c0 < di; c0 += 128) { /* d_i in slices of 128 dims */
            const uint32_t cw = di - c0 < 128 ? di - c0 : 128;
            __syncthreads();
            for (uint32_t e = threadIdx.x; e < nr * cw; e += blockDim.x)
                k[(e / cw) * 128 + e % cw] = rows[(size_t)(r0 + e / cw) * di + c0 + e % cw];
            __syncthreads();
            /* one thread: one head against IX_RPT rows, each dot still sequential in x (the
             * query value is read once for the rows; the rows are broadcast across the warp) */
            for (uint32_t m = threadIdx.x; m < Hi * (IX_ROWS / IX_RPT); m += blockDim.x) {
                const uint32_t h = m % Hi, cb = (m / Hi) * IX_RPT;
                if (cb >= nr) continue;
                float dot[IX_RPT];
                UNROLL
                for (int r = 0; r < IX_RPT; r++) dot[r] = c0 == 0 ? 0.0f : term[(cb + r) * IX_HMAX + h];
                const float *qh = q + (size_t)h * (di + 1) + c0, *kc = k + cb * 128;
                for (uint32_t x = 0; x < cw; x++) {
                    const float qv = qh[x];
                    UNROLL
                    for (int r = 0; r < IX_RPT; r++) dot[r] = f_add(dot[r], f_mul(qv, kc[r * 128 + x]));
                }
                UNROLL
                for (int r = 0; r < IX_RPT; r++) term[(cb + r) * IX_HMAX + h] = dot[r];
            }
        }
        __syncthreads();
        for (uint32_t c = threadIdx.x; c < nr; c += blockDim.x) {
            float sc = 0.0f;
            for (uint32_t h = 0; h < Hi; h++) {
                const float dot = term[c * IX_HMAX + h];
                sc = f_add(sc, f_mul(f_mul(wi[h], wscale), dot > 0.0f ? dot : 0.0f));
            }
            scores[(size_t)i * max_comp + r0 + c] = sc;
        }
    }
}

/* Order-preserving map of a score to an unsigned key (NaN ranks with -inf, -0 with +0), so
 * that the top-k is ds4rt_topk_indices's (src/core/topk.c). */
__device__ __forceinline__ uint32_t order_key(float x) {
    if (isnan(x)) x = -INFINITY;
    if (x == 0.0f) x = 0.0f;
    union {
        float f;
        uint32_t u;
    } b;
    b.f = x;
    const uint32_t u = b.u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Exclusive prefix sum of v over the block (blockDim.x a power of two), total in *total. */
__device__ uint32_t block_scan(uint32_t v, uint32_t *sh, uint32_t *total) {
    const unsigned t = threadIdx.x, nt = blockDim.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned o = 1; o < nt; o <<= 1) {
        uint32_t add = t >= o ? sh[t - o] : 0;
        __syncthreads();
        sh[t] += add;
        __syncthreads();
    }
    const uint32_t incl = sh[t];
    *total = sh[nt - 1];
    __syncthreads();
    return incl - v;
}

/* Top idx_topk of row blockIdx.x by a radix select of the threshold key (8 bits a pass over
 * shared histograms), then an ordered compaction: every key above it, and the ties in index
 * order until k are taken (ds4rt_topk_indices's rule). */
__global__ void index_topk_kernel(const void *pass, uint32_t topk, int64_t max_comp, const float *scores,
                                  int32_t *sel, int32_t *n_sel) {
    GK_PDL_ENTRY();
    __shared__ uint32_t hist[256];
    __shared__ uint32_t scan[ROW_THREADS];
    __shared__ uint32_t s_prefix, s_remaining;
    const int64_t i = blockIdx.x;
    const int64_t n_vis = (pass_pos0(pass) + i + 1) / 4;
    int32_t *out = sel + (size_t)i * topk;
    if (n_vis > max_comp && n_vis > (int64_t)topk) {
        if (threadIdx.x == 0) n_sel[i] = -1;
        return;
    }
    if (n_vis <= (int64_t)topk) {
        for (int64_t r = threadIdx.x; r < n_vis; r += blockDim.x) out[r] = (int32_t)r;
        if (threadIdx.x == 0) n_sel[i] = (int32_t)n_vis;
        return;
    }
    const float *v = scores + (size_t)i * max_comp;
    if (threadIdx.x == 0) {
        s_prefix = 0;
        s_remaining = topk;
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        const uint32_t prefix = s_prefix;
        const uint32_t hmask = shift == 24 ? 0u : ~0u << (shift + 8);
        for (int64_t r = threadIdx.x; r < n_vis; r += blockDim.x) {
            const uint32_t u = order_key(v[r]);
            if ((u & hmask) == (prefix & hmask)) atomicAdd(&hist[(u >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            uint32_t rem = s_remaining, cum = 0;
            int digit = 255;
            for (; digit > 0; digit--) {
                if (cum + hist[digit] >= rem) break;
                cum += hist[digit];
            }
            s_remaining = rem - cum;
            s_prefix = prefix | ((uint32_t)digit << shift);
        }
        __syncthreads();
    }
    const uint32_t thr = s_prefix, ties = s_remaining;
    /* ordered compaction: thread t owns the contiguous rows [t L, (t + 1) L); two block scans
     * give its first tie's rank and its first output slot */
    const int64_t L = (n_vis + blockDim.x - 1) / blockDim.x;
    const int64_t b0 = (int64_t)threadIdx.x * L, b1 = b0 + L < n_vis ? b0 + L : n_vis;
    uint32_t my_ties = 0, total;
    for (int64_t r = b0; r < b1; r++) my_ties += order_key(v[r]) == thr;
    const uint32_t tie0 = block_scan(my_ties, scan, &total);
    uint32_t my_take = 0;
    for (int64_t r = b0, tr = tie0; r < b1; r++) {
        const uint32_t u = order_key(v[r]);
        if (u > thr) my_take++;
        else if (u == thr && tr++ < ties) my_take++;
    }
    uint32_t at = block_scan(my_take, scan, &total);
    for (int64_t r = b0, tr = tie0; r < b1; r++) {
        const uint32_t u = order_key(v[r]);
        if (u > thr || (u == thr && tr++ < ties)) out[at++] = (int32_t)r;
    }
    if (threadIdx.x == 0) n_sel[i] = (int32_t)topk;
}

extern "C" size_t ds4rt_gk_indexer_topk_scratch_bytes(int64_t n, int64_t max_comp) {
    return (size_t)(n > 0 ? n : 1) * (size_t)(max_comp > 0 ? max_comp : 1) * sizeof(float);
}

extern "C" int ds4rt_gk_indexer_topk(const void *d_pass, int64_t n, uint32_t idx_heads, uint32_t idx_dim,
                                     uint32_t idx_topk, int64_t max_comp, const float *d_iq, const float *d_iw,
                                     const float *d_rows, int32_t *d_sel, int32_t *d_n_sel, void *d_scratch,
                                     size_t scratch_bytes, void *stream) {
    if (n <= 0) return DS4RT_GK_OK;
    if (idx_heads == 0 || idx_heads > IX_HMAX || idx_dim == 0 || (size_t)idx_heads * (idx_dim + 1) > IX_QMAX ||
        idx_topk == 0 || max_comp < 0 || n > 65535)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "indexer_topk: %u heads of %u dims, top %u, %lld rows",
                             idx_heads, idx_dim, idx_topk, (long long)n);
    if (scratch_bytes < ds4rt_gk_indexer_topk_scratch_bytes(n, max_comp))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "indexer_topk: scratch of %zu bytes, needs %zu", scratch_bytes,
                             ds4rt_gk_indexer_topk_scratch_bytes(n, max_comp));
    const float wscale = (float)(1.0 / sqrt((double)idx_dim * idx_heads));
    float *scores = (float *)d_scratch;
    if (max_comp > (int64_t)idx_topk) {
        int64_t tiles = (max_comp + IX_ROWS - 1) / IX_ROWS;
        if (tiles > IX_MAX_GRID) tiles = IX_MAX_GRID;
        hipLaunchKernelGGL(index_score_kernel, dim3((unsigned)tiles, (unsigned)n), dim3(ROW_THREADS), 0,
                           (hipStream_t)stream, d_pass, idx_heads, idx_dim, idx_topk, max_comp, wscale, d_iq, d_iw,
                           d_rows, scores);
        int st = DS4RT_GK_LAUNCHED("indexer scores");
        if (st != DS4RT_GK_OK) return st;
    }
    hipLaunchKernelGGL(index_topk_kernel, dim3((unsigned)n), dim3(ROW_THREADS), 0, (hipStream_t)stream, d_pass,
                       idx_topk, max_comp, scores, d_sel, d_n_sel);
    return DS4RT_GK_LAUNCHED("indexer top-k");
}

/* ---- attention with sinks ------------------------------------------------------------------------ */

/* Split-key ("flash decoding") attention. The keys of a row are cut into ATT_SPLITS chunks of
 * max(ATT_MIN_CHUNK, ceil(n_keys / ATT_SPLITS)) keys: the chunking depends on the row's own
 * key count only, never on the batch. Block (split s, head h, row i) has ATT_WARPS warps; warp
 * w takes keys k0 + w, k0 + w + ATT_WARPS, ... of the chunk and keeps its own online softmax
 * with the query and the weighted values in registers (lane l holds dims l + j * DS4RT_WARP),
 * so a key costs one coalesced row load, a warp dot and no block barrier. The warps are then
 * merged in warp order into the split's (max, sum, weighted values), and the block of the
 * split that finishes last folds the splits and the sink in split order (attn_finish_split).
 *
 * The first version kept 8 heads per block with key tiles in shared memory (each key read once
 * per 8 heads); at a decode's ~65 keys only 5 of its splits had work and each spent ~47 us in
 * barrier-separated serial steps (Nsight Compute on the H200, docs/PERFORMANCE.md). Reading
 * a key once per head costs L2 traffic only: the keys of a decode are ~130 KB. */
#define ATT_SPLITS 32
#define ATT_MIN_CHUNK 16
#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * DS4RT_WARP)
#define ATT_DMAX 1024 /* dims a lane's registers hold: ATT_DPL_MAX * 32 */
#define ATT_DPL_MAX 32

typedef struct attn_args {
    const void *pass;
    int64_t n;
    uint32_t heads, dim;
    float scale;
    const float *ring;
    uint32_t ring_cap, window;
    int block;
    const float *block_rows;
    uint32_t comp_ratio;
    const float *comp;
    const int32_t *sel, *n_sel;
    uint32_t sel_stride;
    const float *q, *sinks;
    float *part; /* [n][heads][ATT_SPLITS][dim + 2]: m, l, o[dim] */
    unsigned *tickets; /* [n][heads]: splits of the head done in this call (0 between calls) */
    float *out;
} attn_args;

/* Row i's key list (backend.h, ds4rt_attn_keys): ring window, block rows, compressed rows. */
typedef struct key_list {
    int64_t first, nw, nb, nc;
} key_list;

__device__ key_list row_keys(const attn_args &a, int64_t i) {
    const int64_t pos0 = pass_pos0(a.pass), base = pass_base(a.pass);
    const int64_t pos = pos0 + i;
    const int64_t last = a.block ? pos0 - 1 : pos;
    int64_t first = last - (int64_t)a.window + 1;
    if (first < base) first = base;
    key_list kl;
    kl.first = first;
    kl.nw = last >= first ? last - first + 1 : 0;
    kl.nb = a.block ? a.n : 0;
    kl.nc = 0;
    if (a.comp_ratio != 0) {
        if (a.sel != NULL) kl.nc = a.n_sel[i] > 0 ? a.n_sel[i] : 0;
        else kl.nc = (pos + 1) / a.comp_ratio;
    }
    return kl;
}

__device__ const float *key_row(const attn_args &a, const key_list &kl, int64_t i, int64_t k) {
    if (k < kl.nw) return a.ring + (size_t)((kl.first + k) % a.ring_cap) * a.dim;
    k -= kl.nw;
    if (k < kl.nb) return a.block_rows + (size_t)k * a.dim;
    k -= kl.nb;
    const int64_t j = a.sel != NULL ? a.sel[(size_t)i * a.sel_stride + k] : k;
    return a.comp + (size_t)j * a.dim;
}

/* Lane l's DPL elements l + j * DS4RT_WARP of a dim-float row (zero past dim). */
template <int DPL> __device__ __forceinline__ void lane_row(const float *r, uint32_t dim, uint32_t lane, float *v) {
    UNROLL
    for (int j = 0; j < DPL; j++) {
        const uint32_t x = lane + (uint32_t)j * DS4RT_WARP;
        v[j] = x < dim ? r[x] : 0.0f;
    }
}

/* Folds the splits of head h of row i with the sink, in split order, by the thread block of
 * the split that finished last (attn_partial_kernel). Warp 0 holds split s in lane s: the
 * maximum by a butterfly (fmaxf is exact in any order), each split's weight in its lane, the
 * denominator summed in split order from the lanes; thread 0 then lists the splits with keys
 * and each output sums only those. The other splits' results are read with volatile loads
 * (from L2, never a stale L1 line). Which block folds does not change the arithmetic. */
static_assert(ATT_SPLITS <= DS4RT_WARP, "warp 0 holds one split per lane");
__device__ void attn_fold(const attn_args &a, const rope_tab &unrope, int64_t i, uint32_t h) {
    __shared__ float sw_all[ATT_SPLITS], sw[ATT_SPLITS];
    __shared__ uint32_t sidx[ATT_SPLITS];
    __shared__ uint32_t s_na;
    __shared__ float s_inv;
    const uint32_t d = a.dim;
    const volatile float *part = a.part + ((size_t)i * a.heads + h) * ATT_SPLITS * (d + 2);
    if (threadIdx.x < DS4RT_WARP) { /* lanes past ATT_SPLITS (wave64) hold empty splits */
        const uint32_t s = threadIdx.x;
        const bool real = s < ATT_SPLITS;
        const float m = real ? part[(size_t)s * (d + 2)] : -INFINITY;
        const float l = real ? part[(size_t)s * (d + 2) + 1] : 0.0f;
        const float sink = a.sinks[h];
        const float M = fmaxf(sink, ds4rt_gk_warp_max(l > 0.0f ? m : -INFINITY));
        const float w = l > 0.0f ? expf(m - M) : 0.0f;
        const double lw = (double)l * w;
        double den = exp((double)sink - M);
        for (int j = 0; j < ATT_SPLITS; j++) den += __shfl(lw, j, DS4RT_WARP);
        if (real) sw_all[s] = w;
        if (s == 0) s_inv = (float)(1.0 / den);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t na = 0;
        for (uint32_t s = 0; s < ATT_SPLITS; s++)
            if (sw_all[s] != 0.0f) {
                sidx[na] = s;
                sw[na++] = sw_all[s];
            }
        s_na = na;
    }
    __syncthreads();
    const float inv = s_inv;
    const uint32_t na = s_na;
    float *o = a.out + ((size_t)i * a.heads + h) * d;
    auto element = [&](uint32_t x) {
        const volatile float *px = part + 2 + x;
        float acc = 0.0f;
        _Pragma("unroll 8") for (uint32_t j = 0; j < na; j++) acc += px[(size_t)sidx[j] * (d + 2)] * sw[j];
        return acc * inv;
    };
    /* with unrope, the tail's pairs leave rotated back (rope -1 at the row's position): one
     * thread a pair forms both elements, then rope_pair's arithmetic with the sine negated */
    const uint32_t lo = unrope.n_rot >= 2 ? d - unrope.n_rot : d;
    for (uint32_t x = threadIdx.x; x < lo; x += blockDim.x) o[x] = element(x);
    for (uint32_t k = threadIdx.x; k < (d - lo) / 2; k += blockDim.x) {
        const double e0 = element(lo + 2 * k), e1 = element(lo + 2 * k + 1);
        double c, sn;
        rope_angle(unrope, pass_pos0(a.pass) + i, k, &c, &sn);
        const double s = -1.0 * sn;
        o[lo + 2 * k] = (float)d_sub(d_mul(e0, c), d_mul(e1, s));
        o[lo + 2 * k + 1] = (float)d_add(d_mul(e0, s), d_mul(e1, c));
    }
}

/* The split's results are in global memory: counts it done for (i, h); the last split to
 * arrive resets the count (for the next call, or a graph's next replay) and folds. */
__device__ void attn_finish_split(const attn_args &a, const rope_tab &unrope, int64_t i, uint32_t h) {
    __shared__ unsigned s_last;
    __threadfence(); /* this block's part stores before its ticket */
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned *t = a.tickets + (size_t)i * a.heads + h;
        const unsigned before = atomicAdd(t, 1u);
        s_last = before == ATT_SPLITS - 1;
        if (s_last) *t = 0u;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence(); /* the other splits' stores before the reads */
    attn_fold(a, unrope, i, h);
}

template <int DPL>
__global__ void __launch_bounds__(ATT_THREADS) attn_partial_kernel(attn_args a, rope_tab unrope) {
    GK_PDL_ENTRY();
    __shared__ float s_o[ATT_WARPS][DPL * DS4RT_WARP];
    __shared__ float s_m[ATT_WARPS], s_l[ATT_WARPS];
    const unsigned tid = threadIdx.x, lane = tid % DS4RT_WARP, w = tid / DS4RT_WARP;
    const int64_t i = blockIdx.z;
    const uint32_t s = blockIdx.x, h = blockIdx.y, d = a.dim;
    const key_list kl = row_keys(a, i);
    const int64_t nk = kl.nw + kl.nb + kl.nc;
    int64_t chunk = (nk + ATT_SPLITS - 1) / ATT_SPLITS;
    if (chunk < ATT_MIN_CHUNK) chunk = ATT_MIN_CHUNK;
    const int64_t k0 = (int64_t)s * chunk, k1 = k0 + chunk < nk ? k0 + chunk : nk;
    float *part = a.part + (((size_t)i * a.heads + h) * ATT_SPLITS + s) * (d + 2);
    if (k0 >= k1) { /* an empty split: the fold skips it */
        if (tid == 0) {
            part[0] = -INFINITY;
            part[1] = 0.0f;
        }
        attn_finish_split(a, unrope, i, h);
        return;
    }
    float q[DPL], o[DPL], kv[DPL], nx[DPL];
    lane_row<DPL>(a.q + ((size_t)i * a.heads + h) * d, d, lane, q);
    UNROLL
    for (int j = 0; j < DPL; j++) o[j] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    int64_t k = k0 + w;
    if (k < k1) lane_row<DPL>(key_row(a, kl, i, k), d, lane, nx);
    for (; k < k1; k += ATT_WARPS) {
        UNROLL
        for (int j = 0; j < DPL; j++) kv[j] = nx[j];
        if (k + ATT_WARPS < k1) lane_row<DPL>(key_row(a, kl, i, k + ATT_WARPS), d, lane, nx); /* the next key's load in flight */
        float dot = 0.0f;
        UNROLL
        for (int j = 0; j < DPL; j++) dot += q[j] * kv[j];
        const float sc = ds4rt_gk_warp_sum(dot) * a.scale; /* the same bits in every lane */
        const float mn = fmaxf(m, sc);
        const float alpha = expf(m - mn), p = expf(sc - mn);
        l = l * alpha + p;
        UNROLL
        for (int j = 0; j < DPL; j++) o[j] = o[j] * alpha + p * kv[j];
        m = mn;
    }
    if (lane == 0) {
        s_m[w] = m;
        s_l[w] = l;
    }
    UNROLL
    for (int j = 0; j < DPL; j++) s_o[w][lane + (uint32_t)j * DS4RT_WARP] = o[j];
    __syncthreads();
    /* merge the warps in warp order (a warp without keys has l = 0 and is skipped) */
    float M = -INFINITY;
    for (int v = 0; v < ATT_WARPS; v++)
        if (s_l[v] > 0.0f) M = fmaxf(M, s_m[v]);
    float f[ATT_WARPS], L = 0.0f;
    UNROLL
    for (int v = 0; v < ATT_WARPS; v++) {
        f[v] = s_l[v] > 0.0f ? expf(s_m[v] - M) : 0.0f;
        L += s_l[v] * f[v];
    }
    if (tid == 0) {
        part[0] = M;
        part[1] = L;
    }
    for (uint32_t x = tid; x < d; x += blockDim.x) {
        float acc = 0.0f;
        UNROLL
        for (int v = 0; v < ATT_WARPS; v++)
            if (f[v] != 0.0f) acc += s_o[v][x] * f[v];
        part[2 + x] = acc;
    }
    attn_finish_split(a, unrope, i, h);
}

extern "C" uint32_t ds4rt_gk_attention_max_dim(void) { return ATT_DMAX; }

extern "C" size_t ds4rt_gk_attention_scratch_bytes(int64_t n, uint32_t heads, uint32_t dim) {
    return (size_t)(n > 0 ? n : 1) * heads * ATT_SPLITS * ((size_t)dim + 2) * sizeof(float);
}

extern "C" int ds4rt_gk_attention(const void *d_pass, int64_t n, uint32_t heads, uint32_t dim,
                                  const ds4rt_gk_attn_keys *k, const float *d_sinks, const float *d_q, float *d_out,
                                  const ds4rt_gk_rope_params *unrope, void *d_scratch, size_t scratch_bytes,
                                  uint32_t *d_tickets, void *stream) {
    if (n <= 0 || heads == 0) return DS4RT_GK_OK;
    rope_tab t; /* n_rot 0: no rotation back */
    t.n_rot = 0;
    if (unrope != NULL && unrope->n_rot >= 2) {
        if (unrope->n_rot > dim || unrope->n_rot % 2 != 0)
            return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "attention: unrope of %u dims of %u", unrope->n_rot, dim);
        int st = rope_table(unrope, &t, "attention");
        if (st != DS4RT_GK_OK) return st;
    }
    if (dim == 0 || dim > ATT_DMAX || k->ring_cap == 0 || n > 65535 || (k->block && k->d_block_rows == NULL) ||
        (k->comp_ratio != 0 && k->d_comp == NULL) || (k->d_sel != NULL && k->d_n_sel == NULL))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "attention: %u heads of %u dims, ring %u", heads, dim,
                             k->ring_cap);
    if (d_tickets == NULL) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "attention: no tickets");
    if (scratch_bytes < ds4rt_gk_attention_scratch_bytes(n, heads, dim))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "attention: scratch of %zu bytes, needs %zu", scratch_bytes,
                             ds4rt_gk_attention_scratch_bytes(n, heads, dim));
    attn_args a;
    a.pass = d_pass;
    a.n = n;
    a.heads = heads;
    a.dim = dim;
    a.scale = (float)(1.0 / sqrt((double)dim));
    a.ring = k->d_ring;
    a.ring_cap = k->ring_cap;
    a.window = k->window;
    a.block = k->block;
    a.block_rows = k->d_block_rows;
    a.comp_ratio = k->comp_ratio;
    a.comp = k->d_comp;
    a.sel = k->d_sel;
    a.n_sel = k->d_n_sel;
    a.sel_stride = k->sel_stride;
    a.q = d_q;
    a.sinks = d_sinks;
    a.part = (float *)d_scratch;
    a.tickets = d_tickets;
    a.out = d_out;
    const dim3 grid(ATT_SPLITS, heads, (unsigned)n), block(ATT_THREADS);
    const uint32_t dpl = (dim + DS4RT_WARP - 1) / DS4RT_WARP; /* <= ATT_DPL_MAX: dim <= ATT_DMAX */
    hipStream_t s = (hipStream_t)stream;
    if (dpl <= 1) hipLaunchKernelGGL(attn_partial_kernel<1>, grid, block, 0, s, a, t);
    else if (dpl <= 2) hipLaunchKernelGGL(attn_partial_kernel<2>, grid, block, 0, s, a, t);
    else if (dpl <= 4) hipLaunchKernelGGL(attn_partial_kernel<4>, grid, block, 0, s, a, t);
    else if (dpl <= 8) hipLaunchKernelGGL(attn_partial_kernel<8>, grid, block, 0, s, a, t);
    else if (dpl <= 16) hipLaunchKernelGGL(attn_partial_kernel<16>, grid, block, 0, s, a, t);
    else hipLaunchKernelGGL(attn_partial_kernel<ATT_DPL_MAX>, grid, block, 0, s, a, t);
    return DS4RT_GK_LAUNCHED("attention");
}
