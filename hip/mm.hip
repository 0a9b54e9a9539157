/*
 * mm.hip - matrix products y = W x, expert-stack products and row gathers on the GPU (mm.h).
 *
 * Bitwise the CPU backend's results (docs/QUANTS.md §3, src/quant/kernels_scalar.c): the same
 * activation conversion (act_quant.c, mirrored operation for operation), per weight block the
 * same exact integer sums and the same f32 term, added to lane b % 8 in increasing b, lanes
 * summed by the same tree; float types: products into lane i % 32, summed by the 32-lane tree.
 * Integer sums are exact whatever their order, so the GPU is free to form them any way (dp4a,
 * 4 elements per instruction); the f32 operations use the _rn intrinsics, which are never fused
 * into multiply-adds. The one exception is F16 x f16-rounded activations: both operands have 11
 * significant bits, their product is exact in f32 (and far from f32's underflow), so a fused
 * multiply-add rounds exactly like the CPU's multiply-then-add.
 *
 * Layout of the work (docs/GPU.md, "Matrix products"):
 *   - quantised types: a block of 64 threads takes 8 weight rows; thread (row, c) is lane c of
 *     its row and walks the row's blocks c, c+8, c+16, ... in order. Each step stages 8 x PER
 *     consecutive weight blocks of every row (1-1.7 KB) in shared memory with 16-byte loads
 *     (when the rows are 16-byte aligned), then each lane decodes its PER blocks once per token.
 *   - float types: a block takes 16 rows; a thread holds 4 of the 32 lanes of 4 rows for a
 *     group of up to 8 tokens (8- or 16-byte loads); up to 4 token groups per block read the
 *     same weight bytes at the same time.
 *   - expert stacks: one grid row per slot; the expert id is read on the device.
 *   - a few tokens on aligned rows (decode, verify): mm_qt_kernel (32-element quantised types,
 *     n <= 8: every thread evaluates block terms, one warp adds them in the lanes' order) and
 *     mm_fs_kernel (float types, n <= 32: one staged row per block, one warp per token).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gk_internal.h"
#include "mm.h"

#if defined(DS4RT_HIP_CPU)
/* HIP-CPU marks kernels `simd` under GCC, which cannot take the struct argument of the product
 * kernels (and means nothing for correctness): plain functions there. */
#undef __global__
#define __global__
#endif

/* The format tables of the CPU (generated from gguf-py), placed in device global memory: inside
 * this include every `static` array definition becomes `static __device__` (on HIP-CPU, device
 * code is host code and reads them as they are). Not __constant__: the lanes of a warp index
 * them with different values, which constant memory serialises; global loads go through L1. */
#if !defined(DS4RT_HIP_CPU)
#define static static __device__
#endif
#include "../src/quant/quant_tables.h"
#if !defined(DS4RT_HIP_CPU)
#undef static
#endif

/* GGML type ids (= DS4RT_TYPE_* of ds4rt.h; tests/gpu/test_mm.c checks them). */
enum {
    T_F32 = 0,
    T_F16 = 1,
    T_Q4_0 = 2,
    T_Q8_0 = 8,
    T_Q2_K = 10,
    T_Q4_K = 12,
    T_Q5_K = 13,
    T_Q6_K = 14,
    T_IQ2_XXS = 16,
    T_BF16 = 30,
    T_MXFP4 = 39
};

/* Activation pairing (docs/QUANTS.md §2). */
enum { A_F32, A_F16, A_BF16, A_Q8_0, A_Q8_K };

static int act_kind(uint32_t type) {
    switch (type) {
    case T_F32: return A_F32;
    case T_F16: return A_F16;
    case T_BF16: return A_BF16;
    case T_Q8_0:
    case T_Q4_0:
    case T_MXFP4: return A_Q8_0;
    case T_Q2_K:
    case T_Q4_K:
    case T_Q5_K:
    case T_Q6_K:
    case T_IQ2_XXS: return A_Q8_K;
    default: return -1;
    }
}

/* Elements and bytes of a weight block. */
static int block_elems(uint32_t type) {
    switch (type) {
    case T_F32:
    case T_F16:
    case T_BF16: return 1;
    case T_Q8_0:
    case T_Q4_0:
    case T_MXFP4: return 32;
    default: return 256;
    }
}

static int block_bytes(uint32_t type) {
    switch (type) {
    case T_F32: return 4;
    case T_F16:
    case T_BF16: return 2;
    case T_Q8_0: return 34;
    case T_Q4_0: return 18;
    case T_MXFP4: return 17;
    case T_Q2_K: return 84;
    case T_Q4_K: return 144;
    case T_Q5_K: return 176;
    case T_Q6_K: return 210;
    case T_IQ2_XXS: return 66;
    default: return 0;
    }
}

static const char *type_name(uint32_t type) {
    switch (type) {
    case T_F32: return "F32";
    case T_F16: return "F16";
    case T_BF16: return "BF16";
    case T_Q8_0: return "Q8_0";
    case T_Q4_0: return "Q4_0";
    case T_MXFP4: return "MXFP4";
    case T_Q2_K: return "Q2_K";
    case T_Q4_K: return "Q4_K";
    case T_Q5_K: return "Q5_K";
    case T_Q6_K: return "Q6_K";
    case T_IQ2_XXS: return "IQ2_XXS";
    default: return "?";
    }
}

/* ---------------- activation rows on the device ----------------
 * One row: int8 q[cols] at 0, f32 d[cols/blk] at d_off, sums at s_off (Q8_0: int32 per 32,
 * Q8_K: int16 per 16), `stride` bytes apart; float pairings: f32 values at 0. All 16-aligned. */
typedef struct {
    int kind;
    int64_t cols;
    size_t stride, d_off, s_off;
} act_layout;

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

static act_layout layout_of(int kind, int64_t cols) {
    act_layout l;
    l.kind = kind;
    l.cols = cols;
    const size_t n = (size_t)cols;
    if (kind == A_Q8_0) {
        l.d_off = align16(n);
        l.s_off = l.d_off + align16(n / 32 * 4);
        l.stride = l.s_off + align16(n / 32 * 4);
    } else if (kind == A_Q8_K) {
        l.d_off = align16(n);
        l.s_off = l.d_off + align16(n / 256 * 4);
        l.stride = l.s_off + align16(n / 16 * 2);
    } else {
        l.d_off = l.s_off = 0;
        l.stride = align16(n * 4);
    }
    return l;
}

/* Loop unrolling hints for the GPU compilers (HIP-CPU's host compiler has no such pragma). */
#if defined(DS4RT_HIP_CPU)
#define UNROLL
#else
#define UNROLL _Pragma("unroll")
#endif

/* ---------------- exact f32 arithmetic ----------------
 * On the GPUs the _rn intrinsics are never contracted into fused multiply-adds. On HIP-CPU the
 * host compiler builds ISO C++ (-std=c++17), where floating contraction is off. */
#if defined(DS4RT_HIP_CPU)
__device__ __forceinline__ float fmul(float a, float b) { return a * b; }
__device__ __forceinline__ float fadd(float a, float b) { return a + b; }
__device__ __forceinline__ float fsub(float a, float b) { return a - b; }
__device__ __forceinline__ float fdiv(float a, float b) { return a / b; }
__device__ __forceinline__ float ffma(float a, float b, float c) { return fmaf(a, b, c); }
#else
__device__ __forceinline__ float fmul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float fadd(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float fsub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float fdiv(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float ffma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
#endif

__device__ __forceinline__ uint32_t f32_bits(float f) {
    union {
        float f;
        uint32_t u;
    } v;
    v.f = f;
    return v.u;
}

__device__ __forceinline__ float bits_f32(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } v;
    v.u = u;
    return v.f;
}

/* fp16.h's conversions, operation for operation (f16 -> f32 is exact on every path). */
__device__ __forceinline__ float h2f(uint32_t h) {
    const uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (e == 0x1f) return bits_f32(sign | 0x7f800000u | (man ? 0x400000u | (man << 13) : 0));
    if (e == 0) {
        const float mag = fmul((float)man, 0x1p-24f);
        return sign ? -mag : mag;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (man << 13));
}

__device__ __forceinline__ uint32_t f2h(float f) {
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0);
    if (ax >= 0x477ff000u) return sign | 0x7c00u;
    if (ax < 0x38800000u) {
        const uint32_t e = ax >> 23;
        if (e < 102) return sign;
        const uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return sign | r;
    }
    uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax >> 13) & 0x3ffu);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return sign | h;
}

__device__ __forceinline__ float bf2f(uint32_t b) { return bits_f32(b << 16); }

__device__ __forceinline__ uint32_t f2bf(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    x += 0x7fffu + ((x >> 16) & 1u);
    return x >> 16;
}

/* MXFP4 block scale 2^(e-128) (blocks.h ds4rt_e8m0_half). */
__device__ __forceinline__ float e8m0_half(uint32_t e) {
    return bits_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

/* ---------------- activation conversion (act_quant.c) ---------------- */

__device__ __forceinline__ int8_t clamp_q(float v) {
    float r = fabsf(v) < 4194304.0f ? fsub(fadd(v, 12582912.0f), 12582912.0f) : v;
    if (r != r) return 0;
    if (r > 127.0f) r = 127.0f;
    if (r < -127.0f) r = -127.0f;
    return (int8_t)r;
}

/* A thread block of AQ_NT threads takes AQ_NT / 32 consecutive 32-element blocks, one element
 * per thread: the loads and the int8 stores are coalesced. The CPU's two serial steps, the
 * maximum of |x| (NaN never compares greater, so it is skipped) and the sum of the block's int8
 * values, have results that do not depend on their order (a maximum; an integer sum), so the 32
 * threads of a block form them by xor shuffles over 32 lanes (a Q8_0 block is 32 elements, a
 * warp holds whole blocks on every target) instead of one thread walking shared memory. */
#define AQ_NT 256
static_assert(DS4RT_WARP % 32 == 0, "a warp holds whole 32-element blocks");

/* What a conversion reads: the rows x themselves (SW false), or (SW true, ds4rt_gk_swiglu_act)
 * the SwiGLU of the rows g = x and u, with clamp c and row weights wt (NULL: none), each element
 * computed by gk_swiglu1 as ds4rt_gk_swiglu computes it, so the same floats are converted. */
typedef struct {
    const float *x, *u, *wt;
    float c;
} act_in;

template <bool SW> __device__ __forceinline__ float act_load(const act_in &in, int64_t t, int64_t i) {
    if constexpr (SW) return gk_swiglu1(in.x[i], in.u[i], in.c, in.wt != NULL ? in.wt[t] : 1.0f);
    return in.x[i];
}

/* Element k of a Q8_0 activation block, held by thread k of 32 consecutive threads (v = 0 for
 * the threads of a block past the data): its int8 value, and the block scale in *db. Shared by
 * act_q8_0_kernel and mm_qt_kernel's fused form, so both give the CPU's bits. */
__device__ __forceinline__ int8_t q8_0_lane(float v, float *db) {
    float amax = fabsf(v);
    amax = amax > 0.0f ? amax : 0.0f; /* NaN -> 0: the CPU's `ax > amax` never takes it */
    UNROLL
    for (int o = 16; o > 0; o >>= 1) {
        const float m = __shfl_xor(amax, o, 32);
        amax = m > amax ? m : amax;
    }
    const float d = fdiv(amax, 127.0f);
    const float inv_d = d != 0.0f ? fdiv(1.0f, d) : 0.0f;
    *db = d;
    return clamp_q(fmul(v, inv_d));
}

/* The same for EPT consecutive elements of a block per thread, TPB consecutive threads a block
 * (the maximum is exact in any order, so the butterfly over TPB threads gives the CPU's). */
template <int EPT, int TPB>
__device__ __forceinline__ void q8_0_part(const float *v, int8_t *q, float *db) {
    float amax = 0.0f;
    UNROLL
    for (int j = 0; j < EPT; j++) {
        const float ax = fabsf(v[j]);
        amax = ax > amax ? ax : amax; /* NaN never compares greater */
    }
    UNROLL
    for (int o = TPB / 2; o > 0; o >>= 1) {
        const float m = __shfl_xor(amax, o, 32);
        amax = m > amax ? m : amax;
    }
    const float d = fdiv(amax, 127.0f);
    const float inv_d = d != 0.0f ? fdiv(1.0f, d) : 0.0f;
    *db = d;
    UNROLL
    for (int j = 0; j < EPT; j++) q[j] = clamp_q(fmul(v[j], inv_d));
}
template <bool SW>
__global__ void __launch_bounds__(AQ_NT) act_q8_0_kernel(act_in in, int64_t n, int64_t cols, uint8_t *__restrict__ act,
                                                         size_t stride, size_t d_off, size_t s_off) {
    GK_PDL_ENTRY();
    const int64_t nb = cols / 32;
    const int k = (int)threadIdx.x % 32, sb = (int)threadIdx.x / 32;
    const int64_t i = (int64_t)blockIdx.x * (AQ_NT / 32) + sb; /* the 32-element block of x */
    const bool live = i < n * nb;                             /* uniform over the 32 threads */
    const int64_t t = live ? i / nb : 0, b = live ? i % nb : 0;
    uint8_t *row = act + (size_t)t * stride;
    const float v = live ? act_load<SW>(in, t, i * 32 + k) : 0.0f; /* rows of x are contiguous: block i at 32 i */
    float db;
    const int8_t q = q8_0_lane(v, &db); /* 0 where !live (v = 0) */
    int32_t s = q;
    UNROLL
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor(s, o, 32);
    if (live) {
        ((int8_t *)row)[b * 32 + k] = q;
        if (k == 0) {
            ((float *)(void *)(row + d_off))[b] = db;
            ((int32_t *)(void *)(row + s_off))[b] = s;
        }
    }
}

/* One thread block of 256 threads per 256-element block, one element per thread. The CPU takes
 * the first element of largest |x| (strict `>` from 0, so NaN and zeros never win): the threads
 * find it by a reduction over (|x|, index) pairs that prefers the larger |x| and, on ties, the
 * lower index (a total order, so any tree gives the CPU's element); the group sums of 16 int8
 * values are integer sums over 16 lanes. */
#define Q8K_NT 256
template <bool SW>
__global__ void __launch_bounds__(Q8K_NT) act_q8_K_kernel(act_in in, int64_t n, int64_t cols, uint8_t *__restrict__ act,
                                                          size_t stride, size_t d_off, size_t s_off) {
    GK_PDL_ENTRY();
    constexpr int NW = Q8K_NT / DS4RT_WARP;
    __shared__ float s_a[NW];
    __shared__ int s_i[NW];
    __shared__ float s_x[Q8K_NT];
    const int64_t nb = cols / 256, i = blockIdx.x;
    const int64_t t = i / nb, b = i % nb;
    const int e = (int)threadIdx.x, wl = e % DS4RT_WARP, wi = e / DS4RT_WARP;
    (void)n;
    const float xv = act_load<SW>(in, t, t * cols + b * 256 + e);
    s_x[e] = xv;
    float am = fabsf(xv);
    am = am > 0.0f ? am : 0.0f; /* NaN -> 0: never taken */
    int ai = e;
    UNROLL
    for (int o = DS4RT_WARP / 2; o > 0; o >>= 1) {
        const float m = __shfl_xor(am, o, DS4RT_WARP);
        const int mi = __shfl_xor(ai, o, DS4RT_WARP);
        if (m > am || (m == am && mi < ai)) {
            am = m;
            ai = mi;
        }
    }
    if (wl == 0) {
        s_a[wi] = am;
        s_i[wi] = ai;
    }
    __syncthreads();
    float amax = s_a[0];
    int imax = s_i[0];
    for (int k = 1; k < NW; k++) /* warps in index order: a tie keeps the earlier warp's element */
        if (s_a[k] > amax) {
            amax = s_a[k];
            imax = s_i[k];
        }
    uint8_t *row = act + (size_t)t * stride;
    int q = 0;
    float iscale = 0.0f;
    if (amax != 0.0f) {
        iscale = fdiv(-127.0f, s_x[imax]);
        q = clamp_q(fmul(iscale, xv));
    }
    int gs = q;
    UNROLL
    for (int o = 8; o > 0; o >>= 1) gs += __shfl_xor(gs, o, 16);
    ((int8_t *)row)[b * 256 + e] = (int8_t)q;
    if (e % 16 == 0) ((int16_t *)(void *)(row + s_off))[b * 16 + e / 16] = (int16_t)gs;
    if (e == 0) ((float *)(void *)(row + d_off))[b] = amax != 0.0f ? fdiv(1.0f, iscale) : 0.0f;
}

/* Float pairings: the values rounded to f16 / bf16 (kept as f32), or copied. */
template <bool SW>
__global__ void act_float_kernel(act_in in, int64_t n, int64_t cols, int kind, uint8_t *__restrict__ act,
                                 size_t stride) {
    GK_PDL_ENTRY();
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * cols) return;
    const int64_t t = i / cols, c = i % cols;
    float v = act_load<SW>(in, t, i);
    if (kind == A_F16) v = h2f(f2h(v));
    else if (kind == A_BF16) v = bf2f(f2bf(v));
    ((float *)(void *)(act + (size_t)t * stride))[c] = v;
}

/* ---------------- integer helpers ---------------- */

/* Sum of the four signed byte products of a and b (exact). */
__device__ __forceinline__ int dot4(int a, int b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    return __dp4a(a, b, 0);
#else
    return (int)(int8_t)a * (int)(int8_t)b + (int)(int8_t)(a >> 8) * (int)(int8_t)(b >> 8) +
           (int)(int8_t)(a >> 16) * (int)(int8_t)(b >> 16) + (int)(a >> 24) * (int)(b >> 24);
#endif
}

/* c + the sum of the four signed byte products of a and b (exact; one instruction on NVIDIA). */
__device__ __forceinline__ int dot4acc(int a, int b, int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610
    return __dp4a(a, b, c);
#else
    return c + dot4(a, b);
#endif
}

/* c + the sum of the four products of a's UNSIGNED bytes and b's signed bytes (exact; PTX
 * dp4a.u32.s32 on NVIDIA). For weight bytes of 128 and more, such as Q2_K's masked top plane. */
__device__ __forceinline__ int dot4us(uint32_t a, int b, int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 610 && !defined(__HIP_PLATFORM_AMD__)
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#else
    return c + (int)(a & 0xffu) * (int)(int8_t)b + (int)((a >> 8) & 0xffu) * (int)(int8_t)(b >> 8) +
           (int)((a >> 16) & 0xffu) * (int)(int8_t)(b >> 16) + (int)(a >> 24) * (int)(b >> 24);
#endif
}

/* Little-endian reads from shared memory at 2-byte (rd16, rd32h) or any (rd8) alignment. */
__device__ __forceinline__ uint32_t rd16(const uint8_t *p) { return *(const uint16_t *)(const void *)p; }
__device__ __forceinline__ uint32_t rd32h(const uint8_t *p) { return rd16(p) | (rd16(p + 2) << 16); }
__device__ __forceinline__ uint32_t rd32a(const uint8_t *p) { return *(const uint32_t *)(const void *)p; }

/* Four consecutive activation bytes (16-aligned row, so k*4 is 4-aligned). */
__device__ __forceinline__ int xw(const int8_t *x, int k) { return *(const int *)(const void *)(x + 4 * k); }

/* Bytes 0..3 of the result = bits 0..3 of `bits` as 0x00/0x01 bytes. */
__device__ __forceinline__ uint32_t spread4(uint32_t bits) { return ((bits & 15u) * 0x00204081u) & 0x01010101u; }

/* ---------------- per-block terms (kernels_scalar.c, in the same f32 operations) ----------------
 * 256-element blocks. blk: the weight block (in shared memory, 2-byte aligned); x: the activation
 * row's quants of this block; xd: its scale; bs: its int16 group sums. */

/* Q2_K: scales[16] @0, qs[64] @16, d @80, dmin @82. */
__device__ __forceinline__ float term_q2_K(const uint8_t *blk, const int8_t *x, float xd, const int16_t *bs) {
    int A = 0, B = 0;
UNROLL
    for (int g = 0; g < 16; g++) {
        const int n = g / 8, j = (g % 8) / 2, half = g % 2;
        int s = 0;
UNROLL
        for (int k = 0; k < 4; k++) {
            const uint32_t q = (rd32a(blk + 16 + 32 * n + 16 * half + 4 * k) >> (2 * j)) & 0x03030303u;
            s += dot4((int)q, xw(x, (128 * n + 32 * j + 16 * half) / 4 + k));
        }
        const int sc = blk[g];
        A += (sc & 15) * s;
        B += (sc >> 4) * bs[g];
    }
    const float dx = fmul(h2f(rd16(blk + 80)), xd), mx = fmul(h2f(rd16(blk + 82)), xd);
    return fsub(fmul(dx, (float)A), fmul(mx, (float)B));
}

__device__ __forceinline__ void k4_scale_min(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K: d @0, dmin @2, scales[12] @4, qs[128] @16. Q5_K: the same with qh[32] @16, qs @48. */
template <bool FIVE>
__device__ __forceinline__ float term_q45_K(const uint8_t *blk, const int8_t *x, float xd, const int16_t *bs) {
    const uint8_t *qs = blk + (FIVE ? 48 : 16);
    int A = 0, B = 0;
UNROLL
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_min(blk + 4, j, &sc, &m);
        const int c = j / 2, sh = 4 * (j % 2);
        int s = 0;
UNROLL
        for (int k = 0; k < 8; k++) {
            uint32_t q = (rd32a(qs + 32 * c + 4 * k) >> sh) & 0x0f0f0f0fu;
            if (FIVE) q |= ((rd32a(blk + 16 + 4 * k) >> j) & 0x01010101u) << 4;
            s += dot4((int)q, xw(x, 8 * j + k));
        }
        A += sc * s;
        B += m * (bs[2 * j] + bs[2 * j + 1]);
    }
    const float dx = fmul(h2f(rd16(blk)), xd), mx = fmul(h2f(rd16(blk + 2)), xd);
    return fsub(fmul(dx, (float)A), fmul(mx, (float)B));
}

/* Q6_K: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d @208. sum (q - 32) x = sum q x -
 * 32 * bsum of the group. */
__device__ __forceinline__ float term_q6_K(const uint8_t *blk, const int8_t *x, float xd, const int16_t *bs) {
    int A = 0;
UNROLL
    for (int g = 0; g < 16; g++) {
        int s = 0;
UNROLL
        for (int k = 0; k < 4; k++) {
            const int e = 16 * g + 4 * k, h = e / 128, i = e % 128, kk = i / 32;
            const uint32_t lo = i < 64 ? rd32h(blk + 64 * h + i) & 0x0f0f0f0fu
                                       : (rd32h(blk + 64 * h + i - 64) >> 4) & 0x0f0f0f0fu;
            const uint32_t hi = (rd32h(blk + 128 + 32 * h + (i % 32)) >> (2 * kk)) & 0x03030303u;
            s += dot4((int)(lo | (hi << 4)), xw(x, e / 4));
        }
        s -= 32 * bs[g];
        A += (int)(int8_t)blk[192 + g] * s;
    }
    return fmul(fmul(h2f(rd16(blk + 208)), xd), (float)A);
}

/* IQ2_XXS: d @0, then 8 sub-blocks of 8 bytes: four grid indices and the sign/scale word. */
__device__ __forceinline__ float term_iq2_xxs(const uint8_t *blk, const int8_t *x, float xd) {
    int A = 0;
    for (int s = 0; s < 8; s++) {
        const uint8_t *q = blk + 2 + 8 * s;
        const uint32_t aux = rd32h(q + 4);
        int is = 0;
UNROLL
        for (int g = 0; g < 4; g++) {
            const uint64_t grid = ds4rt_iq2xxs_grid[q[g]];
            const uint32_t signs = ds4rt_ksigns[(aux >> (7 * g)) & 127];
UNROLL
            for (int h = 0; h < 2; h++) {
                /* magnitudes are 8..43, so -m as a byte is (m ^ 0xff) + 1 without carries */
                const uint32_t neg = spread4(signs >> (4 * h));
                const uint32_t m = (uint32_t)(grid >> (32 * h));
                const uint32_t w = (m ^ (neg * 0xffu)) + neg;
                is += dot4((int)w, xw(x, 8 * s + 2 * g + h));
            }
        }
        A += (int)(2 * (aux >> 28) + 1) * is;
    }
    return fmul(fmul(fmul(h2f(rd16(blk)), xd), (float)A), 0.125f);
}

/* 32-element blocks (Q8_0, Q4_0, MXFP4) are decoded once into signed bytes and a scale, then
 * multiplied with each token: I = sum w x exactly as the CPU's sums, term = (d * xd) * I. */
template <int TYPE>
__device__ __forceinline__ float decode32(const uint8_t *blk, int *wq) {
    if constexpr (TYPE == T_Q8_0) {
        UNROLL
        for (int k = 0; k < 8; k++) wq[k] = (int)rd32h(blk + 2 + 4 * k);
        return h2f(rd16(blk));
    } else if constexpr (TYPE == T_Q4_0) { /* bytes q - 8 from nibbles q, without borrows between bytes */
        UNROLL
        for (int k = 0; k < 4; k++) {
            const uint32_t q = rd32h(blk + 2 + 4 * k);
            wq[k] = (int)((((q & 0x0f0f0f0fu) | 0x80808080u) - 0x08080808u) ^ 0x80808080u);
            wq[4 + k] = (int)(((((q >> 4) & 0x0f0f0f0fu) | 0x80808080u) - 0x08080808u) ^ 0x80808080u);
        }
        return h2f(rd16(blk));
    } else { /* MXFP4 */
        for (int k = 0; k < 4; k++) {
            uint32_t lo = 0, hi = 0;
            for (int j = 0; j < 4; j++) {
                const uint32_t q = blk[1 + 4 * k + j];
                lo |= (uint32_t)(uint8_t)ds4rt_mxfp4_values[q & 15] << (8 * j);
                hi |= (uint32_t)(uint8_t)ds4rt_mxfp4_values[q >> 4] << (8 * j);
            }
            wq[k] = (int)lo;
            wq[4 + k] = (int)hi;
        }
        return e8m0_half(blk[0]);
    }
}

/* x: the block's 32 int8 activations (16-byte aligned), xd its scale */
__device__ __forceinline__ float term32x(const int *wq, float dw, const int8_t *x, float xd) {
    const int4 x0 = *(const int4 *)(const void *)x, x1 = *(const int4 *)(const void *)(x + 16);
    const int I = dot4(wq[0], x0.x) + dot4(wq[1], x0.y) + dot4(wq[2], x0.z) + dot4(wq[3], x0.w) + dot4(wq[4], x1.x) +
                  dot4(wq[5], x1.y) + dot4(wq[6], x1.z) + dot4(wq[7], x1.w);
    return fmul(fmul(dw, xd), (float)I);
}

__device__ __forceinline__ float term32(const int *wq, float dw, const uint8_t *arow, size_t d_off, int64_t b) {
    return term32x(wq, dw, (const int8_t *)arow + b * 32, ((const float *)(const void *)(arow + d_off))[b]);
}

template <int TYPE>
__device__ __forceinline__ float block_term(const uint8_t *blk, const uint8_t *arow, size_t d_off, size_t s_off,
                                            int64_t b) {
    const int8_t *x = (const int8_t *)arow + b * 256;
    const float xd = ((const float *)(const void *)(arow + d_off))[b];
    const int16_t *bs = (const int16_t *)(const void *)(arow + s_off) + b * 16;
    if (TYPE == T_Q2_K) return term_q2_K(blk, x, xd, bs);
    if (TYPE == T_Q4_K) return term_q45_K<false>(blk, x, xd, bs);
    if (TYPE == T_Q5_K) return term_q45_K<true>(blk, x, xd, bs);
    if (TYPE == T_Q6_K) return term_q6_K(blk, x, xd, bs);
    return term_iq2_xxs(blk, x, xd);
}

__device__ __forceinline__ float reduce8(const float *a) {
    return fadd(fadd(fadd(a[0], a[4]), fadd(a[2], a[6])), fadd(fadd(a[1], a[5]), fadd(a[3], a[7])));
}

/* ---------------- quantised products ---------------- */

#define QROWS 8      /* weight rows per thread block */
#define QLANES 8     /* lanes (threads) per row: lane c takes blocks c, c+8, ... */
#define QTOK 32      /* tokens per grid row (dense products) */

/* Where a grid row's work is: its weight matrix, first token and count, output rows. */
typedef struct {
    const uint8_t *w;       /* dense: the matrix; experts: expert 0 */
    uint64_t row_bytes;
    int64_t rows;
    int64_t nb;             /* weight blocks per row */
    const uint8_t *act;
    size_t stride, d_off, s_off;
    float *y;
    int64_t n;              /* dense: tokens; experts: slots */
    /* experts */
    const int32_t *ids;
    uint64_t expert_stride;
    uint32_t n_experts;
    uint32_t x_div;
    /* grouped products (mm_qt_kernel, grid row g = group): group g's weights at w + g *
     * w_gstride, its activation blocks from block g * b_goff of each row, its outputs at column
     * g * rows of rows y_stride apart (0: one group, y_stride = rows) */
    uint64_t w_gstride;
    int64_t b_goff;
    int64_t y_stride;
    /* paired expert products (ds4rt_gk_matmul_experts2_act): the blocks of grid z = 1 take this
     * second stack (same shape, type and stride) and its outputs; NULL: one stack */
    const uint8_t *w_b;
    float *y_b;
    float eps; /* ds4rt_gk_matmul_rms_rows: the RMS epsilon */
    int round_x; /* mm_fs kernels: act holds raw float rows, rounded at the load (ds4rt_gk_matmul) */
} mm_args;

/* The stack of this block of an expert product: the second one of a pair in grid z = 1. */
__device__ __forceinline__ void pair_select(mm_args &a) {
    if (blockIdx.z != 0) {
        a.w = a.w_b;
        a.y = a.y_b;
    }
}

template <int TYPE, bool ALIGNED, bool EXPERTS>
__global__ void __launch_bounds__(QROWS * QLANES) mm_q_kernel(mm_args a) {
    constexpr int BB = TYPE == T_Q8_0 ? 34 : TYPE == T_Q4_0 ? 18 : TYPE == T_MXFP4 ? 17 : TYPE == T_Q2_K ? 84
                       : TYPE == T_Q4_K ? 144 : TYPE == T_Q5_K ? 176 : TYPE == T_Q6_K ? 210 : 66;
    /* lane rounds per staging step: about 1-1.7 KB of every row per step, so that a block keeps
     * ~10 KB of loads in flight between two barriers */
    constexpr int PER = TYPE == T_Q8_0 ? 4 : TYPE == T_Q4_0 || TYPE == T_MXFP4 ? 8
                        : TYPE == T_Q2_K || TYPE == T_IQ2_XXS ? 2 : 1;
    constexpr int STEP = QLANES * PER; /* weight blocks per row per step */
    constexpr int SPAN = ((STEP * BB + 15) / 16 + 1) * 16; /* staged bytes per row, with the shift */
    __shared__ uint4 wbuf4[QROWS][SPAN / 16]; /* uint4: 16-byte aligned */
    uint8_t(*wbuf)[SPAN] = reinterpret_cast<uint8_t(*)[SPAN]>(&wbuf4[0][0]);
    __shared__ float acc[QROWS * QLANES][QTOK];

    if constexpr (EXPERTS) pair_select(a);
    const int tid = threadIdx.x, r = tid / QLANES, c = tid % QLANES;
    const int64_t row0 = (int64_t)blockIdx.x * QROWS;
    int64_t t0, nt, y_row;
    const uint8_t *w = a.w;
    bool bad = false;
    if (EXPERTS) {
        const int64_t j = blockIdx.y;
        const int32_t e = a.ids[j];
        bad = e < 0 || (uint32_t)e >= a.n_experts;
        w += bad ? 0 : (uint64_t)e * a.expert_stride;
        t0 = j / a.x_div;
        nt = 1;
        y_row = j;
    } else {
        t0 = (int64_t)blockIdx.y * QTOK;
        nt = a.n - t0 < QTOK ? a.n - t0 : QTOK;
        y_row = t0;
    }
    if (bad) { /* uniform over the block: no barrier is skipped by part of it */
        GK_PDL_ENTRY();
        const int64_t row = row0 + tid;
        if (tid < QROWS && row < a.rows) a.y[y_row * a.rows + row] = bits_f32(0x7fc00000u);
        return;
    }
    for (int t = 0; t < nt; t++) acc[tid][t] = 0.0f; /* shared memory: before the wait is fine */
    const int nrows = a.rows - row0 < QROWS ? (int)(a.rows - row0) : QROWS;
    if (a.nb == 0) GK_PDL_ENTRY(); /* no step below waits */
    for (int64_t b0 = 0; b0 < a.nb; b0 += STEP) {
        const int nblk = a.nb - b0 < STEP ? (int)(a.nb - b0) : STEP;
        const uint64_t off = (uint64_t)b0 * BB, len = (uint64_t)nblk * BB;
        int shift = 0;
        if (ALIGNED) { /* rows are 16-aligned: load the covering 16-byte words */
            shift = (int)(off & 15);
            const int nu = (int)((shift + len + 15) / 16);
            for (int k = tid; k < nrows * nu; k += QROWS * QLANES) {
                const int rr = k / nu, u = k % nu;
                const uint8_t *src = w + (uint64_t)(row0 + rr) * a.row_bytes + (off - shift) + 16 * u;
                *(uint4 *)(void *)&wbuf[rr][16 * u] = *(const uint4 *)(const void *)src;
            }
        } else {
            for (int k = tid; k < nrows * (int)len; k += QROWS * QLANES) {
                const int rr = k / (int)len, u = k % (int)len;
                wbuf[rr][u] = w[(uint64_t)(row0 + rr) * a.row_bytes + off + u];
            }
        }
        if (b0 == 0) GK_PDL_ENTRY_AFTER_WEIGHTS(); /* the first step's weights are staged (gk_internal.h) */
        __syncthreads();
        /* lane c: blocks b0 + c, b0 + c + 8, ... of the step, in increasing order */
        if (r < nrows)
            for (int p = c; p < nblk; p += QLANES) {
                const uint8_t *blk = &wbuf[r][shift + p * BB];
                if constexpr (TYPE == T_Q8_0 || TYPE == T_Q4_0 || TYPE == T_MXFP4) {
                    int wq[8];
                    const float dw = decode32<TYPE>(blk, wq);
                    for (int t = 0; t < nt; t++)
                        acc[tid][t] = fadd(acc[tid][t], term32(wq, dw, a.act + (size_t)(t0 + t) * a.stride, a.d_off,
                                                               b0 + p));
                } else {
                    for (int t = 0; t < nt; t++)
                        acc[tid][t] = fadd(acc[tid][t], block_term<TYPE>(blk, a.act + (size_t)(t0 + t) * a.stride,
                                                                         a.d_off, a.s_off, b0 + p));
                }
            }
        __syncthreads();
    }
    /* y = the fixed reduction of the row's 8 lanes; lane thread c writes tokens c, c+8, ... */
    if (r < nrows)
        for (int t = c; t < nt; t += QLANES) {
            float l[QLANES];
            for (int k = 0; k < QLANES; k++) l[k] = acc[r * QLANES + k][t];
            a.y[(y_row + t) * a.rows + row0 + r] = reduce8(l);
        }
}

/* ---------------- expert stacks of IQ2_XXS and Q2_K: block terms split over threads ----------------
 * In mm_q_kernel one lane thread evaluates a whole 256-element block term (IQ2_XXS: 32 grid
 * lookups; Q2_K: 64 dp4a over activations read from L1 with 8 distinct lines per warp
 * instruction), so an expert slot of 2048 x 4096 is 256 blocks of 64 threads that spend their
 * time in L1 wavefronts, not in DRAM (444 / 630 GB/s on the H200). A block term is exact integer
 * sums plus one f32 formula, so here SUB threads form one term: IQ2_XXS thread `sub` (of 2)
 * takes sub-blocks 4 sub .. 4 sub + 3 (128 elements); Q2_K thread `sub` (of 4) takes the 16
 * quant bytes qs[32 n + 16 half ..] (n = sub / 2, half = sub % 2) with their four 2-bit planes,
 * i.e. groups 8 n + 2 j + half, j = 0..3. The integer partials are summed over the SUB threads
 * by xor shuffles (exact in any order), and thread 0 of the SUB evaluates the CPU's f32 formula.
 * A thread block takes QS_R rows; each step covers CB blocks of every row (QS_R x CB x SUB = 4
 * items per thread: one block column p for all of them, so a thread reads its activations once
 * per step); every weight load of a step is issued before the arithmetic. The terms go to shared
 * memory and lane thread (row, c) adds blocks c, c + 8, ... in increasing order, as the CPU. The
 * IQ2_XXS grid and sign tables are copied into shared memory per thread block (the lanes index
 * them at random: shared memory serves a warp in a few cycles, L1 in up to 32 lines).
 * Taken for expert stacks on 16-byte aligned rows (launch_mm); other K-quant shapes and
 * unaligned rows keep mm_q_kernel. (A first version with 8 / 16 threads per term was bound by
 * instruction issue: ~190 instructions per 8 weight bytes, 637 GB/s, Nsight Compute 2026-12-03.) */
#define QS_NT 256
#define QS_R 32
/* FORM of mm_qs_kernel (DS4RT_GPU_QS_IQ2, DS4RT_GPU_QS_Q2K; launch_mm): QS_OLD the arithmetic
 * of 2026-12-03; QS_NEW fewer instructions per 4 elements (IQ2_XXS: two dp4a and an AND instead
 * of a spread, a multiply, an xor, an add and a dp4a; Q2_K: an AND and a dp4a instead of a
 * shift, an AND and a dp4a). The same exact integer sums, the same f32 formula. */
#define QS_OLD 0
#define QS_NEW 1
/* MINB (DS4RT_GPU_QS_MINB): the thread blocks per multiprocessor the kernel's registers are
 * bounded for (__launch_bounds__' second argument; 1: no bound). Unbounded, the IQ2_XXS forms
 * take 115 / 122 registers and the Q2_K forms 87 / 89 (nvcc 13.0, sm_90), so 2 blocks of 256
 * threads fit an SM: 4 warps per scheduler, and a decode's 6 slots of a 2048-row expert (384
 * blocks) take 1.45 waves of the H100's 264 block slots. Nsight Compute on an H100
 * (docs/PERFORMANCE.md, "GPU against llama.cpp in the same run, with the knobs"): 9.7 cycles
 * between a warp's instructions, 17-26 % of DRAM's bandwidth used, occupancy 25 % by registers.
 * Bounded for 3 blocks the forms fit 80 registers (IQ2_XXS QS_OLD spills 28 bytes, Q2_K none),
 * one wave at n = 1. */
template <int TYPE, int FORM, int MINB>
__global__ void __launch_bounds__(QS_NT, MINB) mm_qs_kernel(mm_args a) {
    constexpr int SUB = TYPE == T_IQ2_XXS ? 2 : 4;    /* threads per block term */
    constexpr int BB = TYPE == T_IQ2_XXS ? 66 : 84;   /* block bytes */
    constexpr int CB = TYPE == T_IQ2_XXS ? 16 : 8;    /* blocks per row and step */
    constexpr int IT = QS_R * CB * SUB / QS_NT;       /* items per thread and step */
    static_assert(IT * QS_NT == QS_R * CB * SUB && QS_NT % SUB == 0 && SUB <= DS4RT_WARP, "item layout");
    static_assert(QS_R * QLANES <= QS_NT, "lane threads");
    __shared__ float terms[QS_R][CB];
    __shared__ float lanes[QS_R][QLANES];
    __shared__ uint64_t grid_s[TYPE == T_IQ2_XXS ? 256 : 1];
    __shared__ uint8_t signs_s[TYPE == T_IQ2_XXS && FORM == QS_OLD ? 128 : 1];
    __shared__ uint64_t smask_s[TYPE == T_IQ2_XXS && FORM == QS_NEW ? 128 : 1];
    pair_select(a);
    const int tid = (int)threadIdx.x, sub = tid % SUB;
    const int64_t row0 = (int64_t)blockIdx.x * QS_R;
    const int nrows = a.rows - row0 < QS_R ? (int)(a.rows - row0) : QS_R;
    const int64_t j = blockIdx.y;
    const int32_t e = a.ids[j]; /* before the wait: see GK_PDL_ENTRY_AFTER_WEIGHTS */
    if (e < 0 || (uint32_t)e >= a.n_experts) { /* uniform over the block */
        GK_PDL_ENTRY();
        if (tid < nrows) a.y[j * a.rows + row0 + tid] = bits_f32(0x7fc00000u);
        return;
    }
    const uint8_t *w = a.w + (uint64_t)e * a.expert_stride + (uint64_t)row0 * a.row_bytes;
    const uint8_t *arow = a.act + (size_t)(j / a.x_div) * a.stride;
    const float *xds = (const float *)(const void *)(arow + a.d_off);
    /* the IQ2_XXS tables into shared memory: called once the first step's weight loads are
     * issued, so that their latencies overlap (constant data: before the PDL wait is fine) */
    auto load_tables = [&]() {
        if constexpr (TYPE == T_IQ2_XXS) {
            for (int k = tid; k < 256; k += QS_NT) grid_s[k] = ds4rt_iq2xxs_grid[k];
            if constexpr (FORM == QS_OLD) {
                for (int k = tid; k < 128; k += QS_NT) signs_s[k] = ds4rt_ksigns[k];
            } else { /* byte j of smask_s[k]: 0xff where bit j of the CPU's ksigns[k] is set (a minus) */
                for (int k = tid; k < 128; k += QS_NT) {
                    const uint32_t sg = ds4rt_ksigns[k];
                    uint64_t m = 0;
                    for (int jb = 0; jb < 8; jb++) m |= (uint64_t)(((sg >> jb) & 1u) * 0xffu) << (8 * jb);
                    smask_s[k] = m;
                }
            }
        }
    };
    /* item it of thread tid is pair tid / SUB + it * (QS_NT / SUB) of the step: block p (the same
     * for every item, since QS_NT / SUB is a multiple of CB) of row rb + it * RS */
    constexpr int RS = QS_NT / SUB / CB;
    static_assert(RS * CB * SUB == QS_NT && RS * IT == QS_R, "rows of a thread's items");
    const int p = (tid / SUB) % CB, rb = tid / (SUB * CB);
    const int lr = tid / QLANES, lc = tid % QLANES;
    constexpr int WV = TYPE == T_IQ2_XXS ? 9 : 9;  /* weight words of an item */
    constexpr int XV = TYPE == T_IQ2_XXS ? 32 : 16; /* activation words of a thread */
    float acc = 0.0f;
    /* QS_NEW: the rows of the thread's items once, not per step */
    const uint8_t *wrow[IT];
    UNROLL
    for (int it = 0; it < IT; it++) wrow[it] = w + (uint64_t)(rb + it * RS) * a.row_bytes;
    if (a.nb == 0) GK_PDL_ENTRY(); /* no step below waits */
    for (int64_t b0 = 0; b0 < a.nb; b0 += CB) {
        const int nblk = a.nb - b0 < CB ? (int)(a.nb - b0) : CB;
        const bool pl = p < nblk;
        const int64_t b = b0 + p;
        const int8_t *x = (const int8_t *)arow + b * 256;
        /* every load of the step first (weights of the IT rows, the activations of (b, sub)),
         * then the arithmetic: the loads of a thread are all in flight together */
        uint32_t wv[IT][WV];
        UNROLL
        for (int it = 0; it < IT; it++) {
            const int r = rb + it * RS;
            const uint8_t *blk = (FORM == QS_NEW ? wrow[it] : w + (uint64_t)r * a.row_bytes) + (uint64_t)b * BB;
            if (pl && r < nrows) {
                if constexpr (TYPE == T_IQ2_XXS && FORM == QS_NEW) {
                    /* the same 32 bytes as 8 aligned words (the first at or 2 bytes before them, so
                     * never past the block) and the last 2 bytes, joined by funnel shifts */
                    const uint8_t *q = blk + 2 + 32 * sub;
                    const uint32_t *q4 = (const uint32_t *)(const void *)(q - ((uintptr_t)q & 2)); /* rows 16-aligned */
                    const uint32_t sh = (uint32_t)((uintptr_t)q & 2) * 8u;
                    uint32_t u[9];
                    UNROLL
                    for (int k = 0; k < 8; k++) u[k] = q4[k];
                    u[8] = *(const uint16_t *)(const void *)(q + 30);
                    UNROLL
                    for (int k = 0; k < 8; k++) wv[it][k] = (uint32_t)((((uint64_t)u[k + 1] << 32) | u[k]) >> sh);
                    wv[it][8] = sub == 0 ? rd16(blk) : 0u;
                } else if constexpr (TYPE == T_IQ2_XXS) { /* sub-blocks 4 sub + k: 4 grid indices, the sign/scale word */
                    const uint16_t *h = (const uint16_t *)(const void *)(blk + 2 + 32 * sub); /* 2-aligned */
                    UNROLL
                    for (int k = 0; k < 8; k++) wv[it][k] = (uint32_t)h[2 * k] | ((uint32_t)h[2 * k + 1] << 16);
                    wv[it][8] = sub == 0 ? rd16(blk) : 0u;
                } else {
                    const int n = sub / 2, half = sub % 2;
                    const uint32_t *qw = (const uint32_t *)(const void *)(blk + 16 + 32 * n + 16 * half); /* 4-aligned */
                    UNROLL
                    for (int k = 0; k < 4; k++) wv[it][k] = qw[k];
                    UNROLL
                    for (int jj = 0; jj < 4; jj++) wv[it][4 + jj] = blk[8 * n + 2 * jj + half]; /* scale of group g */
                    wv[it][8] = sub == 0 ? *(const uint32_t *)(const void *)(blk + 80) : 0u; /* d, dmin */
                }
            } else {
                UNROLL
                for (int k = 0; k < WV; k++) wv[it][k] = 0u;
            }
        }
        if (b0 == 0) {
            load_tables();
            GK_PDL_ENTRY_AFTER_WEIGHTS(); /* the first step's weights are in flight */
        }
        int xv[XV];
        int bsv[4] = {0, 0, 0, 0};
        float xd = 0.0f;
        UNROLL
        for (int k = 0; k < XV; k++) xv[k] = 0;
        if (pl) {
            xd = xds[b];
            if constexpr (TYPE == T_IQ2_XXS) { /* elements 128 sub .. 128 sub + 127 */
                UNROLL
                for (int k = 0; k < 8; k++) {
                    const int4 q4 = *(const int4 *)(const void *)(x + 128 * sub + 16 * k);
                    xv[4 * k] = q4.x, xv[4 * k + 1] = q4.y, xv[4 * k + 2] = q4.z, xv[4 * k + 3] = q4.w;
                }
            } else { /* group g = 8 n + 2 jj + half: 16 elements at 16 g */
                const int n = sub / 2, half = sub % 2;
                const int16_t *bs = (const int16_t *)(const void *)(arow + a.s_off) + b * 16;
                UNROLL
                for (int jj = 0; jj < 4; jj++) {
                    const int g = 8 * n + 2 * jj + half;
                    const int4 q4 = *(const int4 *)(const void *)(x + 16 * g);
                    xv[4 * jj] = q4.x, xv[4 * jj + 1] = q4.y, xv[4 * jj + 2] = q4.z, xv[4 * jj + 3] = q4.w;
                    bsv[jj] = bs[g];
                }
            }
        }
        __syncthreads(); /* the tables are in place; the previous step's terms are consumed */
        UNROLL
        for (int it = 0; it < IT; it++) {
            const int r = rb + it * RS;
            const bool live = pl && r < nrows; /* uniform over the SUB threads of the item */
            int A = 0, B = 0;
            /* QS_NEW computes dead items too (zero weight words: a harmless term that is never
             * stored), without the branch around every item */
            if (FORM == QS_NEW || live) {
                if constexpr (TYPE == T_IQ2_XXS && FORM == QS_NEW) {
                    /* sub-block k: sum s m x = sum m x - 2 sum (m & minus) x over its 32
                     * elements (m: the grid magnitudes, 8..43; minus: 0xff bytes where the sign
                     * is negative), two dp4a chains; the table offsets straight from the packed
                     * indices (a shift and a mask each) */
                    UNROLL
                    for (int k = 0; k < 4; k++) {
                        const uint32_t qi = wv[it][2 * k], aux = wv[it][2 * k + 1];
                        int P = 0, N = 0;
                        UNROLL
                        for (int g = 0; g < 4; g++) {
                            const uint32_t go = (g == 0 ? qi << 3 : qi >> (8 * g - 3)) & 0x7f8u;
                            const uint32_t so = (g == 0 ? aux << 3 : aux >> (7 * g - 3)) & 0x3f8u;
                            const uint64_t grid = *(const uint64_t *)(const void *)((const uint8_t *)grid_s + go);
                            const uint64_t minus = *(const uint64_t *)(const void *)((const uint8_t *)smask_s + so);
                            UNROLL
                            for (int hh = 0; hh < 2; hh++) {
                                const uint32_t m = (uint32_t)(grid >> (32 * hh)), mk = (uint32_t)(minus >> (32 * hh));
                                const int xx = xv[8 * k + 2 * g + hh];
                                P = dot4acc((int)m, xx, P);
                                N = dot4acc((int)(m & mk), xx, N);
                            }
                        }
                        /* (aux >> 27) | 1 = 2 (aux >> 28) + 1, the CPU's sub-block scale */
                        A += (int)((aux >> 27) | 1u) * (P - 2 * N);
                    }
                } else if constexpr (TYPE == T_IQ2_XXS) {
                    UNROLL
                    for (int k = 0; k < 4; k++) {
                        const uint32_t qi = wv[it][2 * k], aux = wv[it][2 * k + 1];
                        int is = 0;
                        UNROLL
                        for (int g = 0; g < 4; g++) {
                            const uint64_t grid = grid_s[(qi >> (8 * g)) & 0xffu];
                            const uint32_t signs = signs_s[(aux >> (7 * g)) & 127];
                            UNROLL
                            for (int hh = 0; hh < 2; hh++) {
                                /* magnitudes are 8..43, so -m as a byte is (m ^ 0xff) + 1 without carries */
                                const uint32_t neg = spread4(signs >> (4 * hh));
                                const uint32_t m = (uint32_t)(grid >> (32 * hh));
                                is += dot4((int)((m ^ (neg * 0xffu)) + neg), xv[8 * k + 2 * g + hh]);
                            }
                        }
                        A += (int)(2 * (aux >> 28) + 1) * is;
                    }
                } else if constexpr (FORM == QS_NEW) {
                    /* plane jj masked in place (q << 2 jj, up to 192: unsigned bytes), the
                     * group's exact sum 4^jj times the plain one, shifted back once a group */
                    UNROLL
                    for (int jj = 0; jj < 4; jj++) {
                        int sm = 0;
                        UNROLL
                        for (int k = 0; k < 4; k++) sm = dot4us(wv[it][k] & (0x03030303u << (2 * jj)), xv[4 * jj + k], sm);
                        sm >>= 2 * jj; /* exact: a multiple of 4^jj */
                        const int sc = (int)wv[it][4 + jj];
                        A += (sc & 15) * sm;
                        B += (sc >> 4) * bsv[jj];
                    }
                } else {
                    UNROLL
                    for (int jj = 0; jj < 4; jj++) {
                        int sm = 0;
                        UNROLL
                        for (int k = 0; k < 4; k++)
                            sm += dot4((int)((wv[it][k] >> (2 * jj)) & 0x03030303u), xv[4 * jj + k]);
                        const int sc = (int)wv[it][4 + jj];
                        A += (sc & 15) * sm;
                        B += (sc >> 4) * bsv[jj];
                    }
                }
            }
            UNROLL
            for (int o = SUB / 2; o > 0; o >>= 1) { /* exact integer sums over the SUB threads */
                A += __shfl_xor(A, o, DS4RT_WARP);
                if constexpr (TYPE == T_Q2_K) B += __shfl_xor(B, o, DS4RT_WARP);
            }
            if (live && sub == 0) {
                if constexpr (TYPE == T_IQ2_XXS) {
                    terms[r][p] = fmul(fmul(fmul(h2f(wv[it][8]), xd), (float)A), 0.125f);
                } else {
                    const float dx = fmul(h2f(wv[it][8] & 0xffffu), xd), mx = fmul(h2f(wv[it][8] >> 16), xd);
                    terms[r][p] = fsub(fmul(dx, (float)A), fmul(mx, (float)B));
                }
            }
        }
        __syncthreads();
        if (tid < QS_R * QLANES && lr < nrows) /* lane lc of row lr: blocks lc, lc + 8, ... in order */
            for (int q = lc; q < nblk; q += QLANES) acc = fadd(acc, terms[lr][q]);
    }
    if (tid < QS_R * QLANES) lanes[lr][lc] = acc;
    __syncthreads();
    if (tid < nrows) a.y[j * a.rows + row0 + tid] = reduce8(lanes[tid]);
}

/* ---------------- 32-element quantised products of a few tokens ----------------
 * In mm_q_kernel a lane thread decodes and multiplies its own blocks, so a matrix has rows x 8
 * threads of work: the 512-row KV projection is 64 blocks that walk their rows in 4 dependent
 * steps (14 us for 2.2 MB on the H200). Only the f32 sum of each lane is ordered (blocks c,
 * c+8, ... in increasing order); a block's term is exact integer arithmetic and one f32 formula
 * that any thread can evaluate. So here a block of QT_NT threads stages QT_CB weight blocks of
 * each of its QT_ROWS rows, every thread evaluates the terms of (row, block) pairs for all
 * tokens into shared memory, and one warp then adds them into the lanes in the CPU's order.
 *
 * Fused form (FX, n <= QT_FX_TOK): a.act holds the float rows x themselves, and each thread
 * block quantises the step's activation blocks into shared memory (q8_0_part: 16 or 4 elements
 * a thread, 2 or 8 threads a block) while the step's weights are in flight, instead of a separate act_q8_0 launch (33 of
 * a decode's launches, ~2.8 us each on the H200). Every block of the grid repeats that work,
 * so the launcher takes it only while the repeated reads stay small (QT_FX_L2_BYTES). */
#define QT_NT 256
#define QT_TOK 8     /* launch_mm takes this kernel up to n = QT_TOK */
#define QT_PAIRS 512 /* (row, block) pairs per step: QT_ROWS x QT_CB */
#define QT_FX_TOK 4  /* the fused form's shared activations fit the static 48 KB up to here */
#define QT_FX_L2_BYTES (8u << 20) /* at most this many float bytes re-read by the grid's blocks */

/* QT_CB weight blocks of a row per step (a multiple of QLANES): 128, or 32 for rows of at most
 * 32 blocks (1024 columns), which then take 16 rows per thread block instead of 4. TT: the
 * tokens the shared term buffer holds (n <= TT): a decode's kernel needs an eighth of the
 * shared memory of n = 8's, so more of its blocks fit on an SM and more weight bytes are in
 * flight (the product is bound by that, not by arithmetic). */
template <int TYPE, int QT_CB, int TT, bool FX>
__global__ void __launch_bounds__(QT_NT) mm_qt_kernel(mm_args a) {
    constexpr int QT_ROWS = QT_PAIRS / QT_CB;
    constexpr int BB = TYPE == T_Q8_0 ? 34 : TYPE == T_Q4_0 ? 18 : 17;
    constexpr int SPAN = ((QT_CB * BB + 15) / 16 + 1) * 16; /* staged bytes per row, with the shift */
    constexpr int NU = SPAN / 16, LPT = (QT_ROWS * NU + QT_NT - 1) / QT_NT;
    __shared__ uint4 wbuf4[QT_ROWS][NU];
    __shared__ float terms[TT][QT_ROWS][QT_CB];
    __shared__ float lanes[TT][QT_ROWS][QLANES];
    /* FX: the step's quantised activations, 32 int8 (two int4) and a scale per block */
    __shared__ int4 xq4[FX ? TT : 1][FX ? 2 * QT_CB : 1];
    __shared__ float xqd[FX ? TT : 1][FX ? QT_CB : 1];
    static_assert(!FX || TT <= QT_FX_TOK, "fused form: shared activations for at most QT_FX_TOK tokens");
    uint8_t(*wbuf)[SPAN] = reinterpret_cast<uint8_t(*)[SPAN]>(&wbuf4[0][0]);
    const int tid = (int)threadIdx.x;
    const int nt = (int)a.n;
    const int64_t g = blockIdx.y, boff = g * a.b_goff, ys = a.y_stride ? a.y_stride : a.rows;
    const uint8_t *w = a.w + (uint64_t)g * a.w_gstride;
    float *y = a.y + g * a.rows;
    /* row groups of QT_ROWS rows: group blockIdx.x, then every gridDim.x-th (a grid smaller
     * than the row groups keeps every thread block resident and streaming: the next group's
     * weights are loaded while this one's terms are formed) */
    const int64_t n_rg = (a.rows + QT_ROWS - 1) / QT_ROWS;
    auto rows_in = [&](int64_t rg) { return a.rows - rg * QT_ROWS < QT_ROWS ? (int)(a.rows - rg * QT_ROWS) : QT_ROWS; };
    uint4 pre[LPT];
    UNROLL
    for (int i = 0; i < LPT; i++) pre[i] = make_uint4(0u, 0u, 0u, 0u);
    /* word k of a step is word k % NU of row k / NU; thread tid loads words tid + i * QT_NT */
    auto issue = [&](int64_t rg, int64_t b0) {
        const int nblk = a.nb - b0 < QT_CB ? (int)(a.nb - b0) : QT_CB;
        const uint64_t off = (uint64_t)b0 * BB;
        const int shift = (int)(off & 15), nu = (int)((shift + (uint64_t)nblk * BB + 15) / 16);
        const int nr = rows_in(rg);
        const uint8_t *wg = w + (uint64_t)(rg * QT_ROWS) * a.row_bytes + (off - shift);
        UNROLL
        for (int i = 0; i < LPT; i++) {
            const int k = tid + i * QT_NT, rr = k / NU, u = k % NU;
            if (rr < nr && u < nu) pre[i] = *(const uint4 *)(const void *)(wg + (uint64_t)rr * a.row_bytes + 16 * u);
        }
    };
    if ((int64_t)blockIdx.x < n_rg) issue(blockIdx.x, 0);
    GK_PDL_ENTRY_AFTER_WEIGHTS(); /* the first step's weights are in flight (gk_internal.h) */
    const int lr = tid / QLANES, lc = tid % QLANES; /* lane threads: tid < QT_ROWS * QLANES */
    for (int64_t rg = blockIdx.x; rg < n_rg; rg += gridDim.x) {
        const int64_t row0 = rg * QT_ROWS;
        const int nrows = rows_in(rg);
        float acc[TT];
        UNROLL
        for (int t = 0; t < TT; t++) acc[t] = 0.0f;
        for (int64_t b0 = 0; b0 < a.nb; b0 += QT_CB) {
            const int nblk = a.nb - b0 < QT_CB ? (int)(a.nb - b0) : QT_CB;
            const int shift = (int)(((uint64_t)b0 * BB) & 15);
            const int nu = (int)((shift + (uint64_t)nblk * BB + 15) / 16);
            __syncthreads(); /* the previous step's weights and terms are consumed */
            /* quantise the step's activations, every load of the step issued at once; a row of
             * one step keeps them in xq4 for every later row group of the block */
            if (FX && (rg == (int64_t)blockIdx.x || a.nb > QT_CB)) {
                constexpr int EPT = QT_CB * 32 / QT_NT; /* elements per thread: 16 or 4 */
                constexpr int TPB = 32 / EPT;           /* threads per 32-element block */
                static_assert(EPT % 4 == 0 && 32 % EPT == 0, "whole float4s, whole blocks per thread group");
                const int e0 = tid * EPT, p = e0 / 32; /* this thread's first element and its block */
                float v[TT][EPT];
                UNROLL
                for (int t = 0; t < TT; t++)
                    UNROLL
                    for (int j = 0; j < EPT; j += 4) {
                        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
                        if (t < nt && p < nblk)
                            f = *(const float4 *)(const void *)(a.act + (size_t)t * a.stride +
                                                                ((size_t)(boff + b0) * 32 + e0 + j) * sizeof(float));
                        v[t][j] = f.x, v[t][j + 1] = f.y, v[t][j + 2] = f.z, v[t][j + 3] = f.w;
                    }
                UNROLL
                for (int t = 0; t < TT; t++) {
                    float d;
                    int8_t q[EPT];
                    q8_0_part<EPT, TPB>(v[t], q, &d);
                    if (t < nt && p < nblk) {
                        int8_t *dst = (int8_t *)&xq4[t][0] + e0;
                        UNROLL
                        for (int j = 0; j < EPT; j += 4)
                            *(int *)(void *)(dst + j) = (int)(uint8_t)q[j] | ((int)(uint8_t)q[j + 1] << 8) |
                                                        ((int)(uint8_t)q[j + 2] << 16) | ((int)(uint8_t)q[j + 3] << 24);
                        if (e0 % 32 == 0) xqd[t][p] = d;
                    }
                }
            }
            UNROLL
            for (int i = 0; i < LPT; i++) {
                const int k = tid + i * QT_NT, rr = k / NU, u = k % NU;
                if (rr < nrows && u < nu) wbuf4[rr][u] = pre[i];
            }
            __syncthreads();
            if (b0 + QT_CB < a.nb) issue(rg, b0 + QT_CB);
            else if (rg + gridDim.x < n_rg) issue(rg + gridDim.x, 0);
            UNROLL
            for (int k0 = 0; k0 < QT_PAIRS; k0 += QT_NT) {
                const int k = k0 + tid, rr = k / QT_CB, p = k % QT_CB;
                if (rr < nrows && p < nblk) {
                    int wq[8];
                    const float dw = decode32<TYPE>(&wbuf[rr][shift + p * BB], wq);
                    UNROLL
                    for (int t = 0; t < TT; t++)
                        if (t < nt)
                            terms[t][rr][p] = FX ? term32x(wq, dw, (const int8_t *)&xq4[t][2 * p], xqd[t][p])
                                                 : term32(wq, dw, a.act + (size_t)t * a.stride, a.d_off, boff + b0 + p);
                }
            }
            __syncthreads();
            if (tid < QT_ROWS * QLANES && lr < nrows) /* lane lc of row lr: blocks lc, lc + 8, ... in order */
                for (int p = lc; p < nblk; p += QLANES)
                    UNROLL
                    for (int t = 0; t < TT; t++)
                        if (t < nt) acc[t] = fadd(acc[t], terms[t][lr][p]);
        }
        if (tid < QT_ROWS * QLANES && lr < nrows)
            UNROLL
            for (int t = 0; t < TT; t++) lanes[t][lr][lc] = acc[t];
        __syncthreads();
        if (tid < nt * QT_ROWS) { /* the fixed reduction of the row's 8 lanes */
            const int t = tid / QT_ROWS, r = tid % QT_ROWS;
            if (r < nrows) y[(int64_t)t * ys + row0 + r] = reduce8(lanes[t][r]);
        }
    }
}

/* ---------------- Q8_0 products on the int8 tensor cores (NVIDIA sm_80 and later) ----------------
 * A Q8_0 block term's integer sum I = sum w_q * x_q over 32 elements is exactly one k = 32 step
 * of the int8 matrix instruction mma.m16n8k32 (s8 x s8 -> s32): one instruction gives the exact
 * I of 16 weight rows x 8 tokens for one block. Only the f32 part is ordered (docs/QUANTS.md §3:
 * term (d * xd) * (float)I added to lane b % 8 in increasing b, the 8 lanes summed by the fixed
 * tree), so warp c of a thread block takes lane class c — blocks c, c + 8, c + 16, ... in
 * increasing order — and holds the lane-c sum of each of its outputs in registers; at the end
 * the eight warps' lanes meet in shared memory and reduce8 forms y. Bitwise the CPU's result,
 * and a token's column never mixes with another's, so batch invariance holds whatever the tile.
 *
 * A block of QM_NT threads takes QM_MT x 16 rows and 8 x NTL tokens (grid: row tiles, token
 * tiles, groups of a grouped product). Each step stages QM_CB blocks of every row in shared
 * memory with 16-byte loads (the next step's loads issued before this step's arithmetic), and
 * warp c multiplies blocks c and c + 8 of the step. Fragment layout (PTX ISA, mma.m16n8k32 .s8;
 * lane = 4 gid + tid): A regs 0..3 = row gid bytes 4 tid.., row gid + 8 bytes 4 tid.., row gid
 * bytes 16 + 4 tid.., row gid + 8 bytes 16 + 4 tid..; B regs 0, 1 = token gid bytes 4 tid.. and
 * 16 + 4 tid..; C regs 0..3 = (gid, 2 tid), (gid, 2 tid + 1), (gid + 8, 2 tid), (gid + 8,
 * 2 tid + 1). The launcher takes this kernel only where the loaded binary has the instruction
 * (qm_ready); AMD and HIP-CPU keep mm_qt_kernel / mm_q_kernel. */
#if !defined(DS4RT_HIP_CPU) && !defined(__HIP_PLATFORM_AMD__) && !defined(__HIPCC__)
#define DS4RT_GK_INT8_MMA 1
#else
#define DS4RT_GK_INT8_MMA 0
#endif

#if DS4RT_GK_INT8_MMA
#define QM_NT 256   /* 8 warps, warp c = lane class c */
#define QM_CB 16    /* weight blocks of a row per step: two per warp */
#define QM_NU 34    /* 16-byte words of a row's step (16 x 34 bytes) */
#define QM_SPAN 560 /* staged bytes per row: 544 padded so that a fragment load's 8 rows fall in distinct banks */
#define QM_LS 36    /* row stride (floats) of the lane buffer: the 4 tids of a row in distinct banks */
static_assert(DS4RT_WARP == 32 && QM_NT == 8 * DS4RT_WARP, "one warp per lane class");

__device__ __forceinline__ void mma_s8_16832(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1;
    __trap(); /* never launched: qm_ready() checks the binary's architecture */
#endif
}

template <int QM_MT, int NTL>
__global__ void __launch_bounds__(QM_NT) mm_qm_kernel(mm_args a) {
    constexpr int ROWS = 16 * QM_MT, TOK = 8 * NTL;
    constexpr int LPT = (ROWS * QM_NU + QM_NT - 1) / QM_NT;
    constexpr int WBUF = ROWS * QM_SPAN, LBUF = 8 * TOK * QM_LS * 4;
    __shared__ uint4 smem4[(WBUF > LBUF ? WBUF : LBUF) / 16];
    uint8_t(*wbuf)[QM_SPAN] = reinterpret_cast<uint8_t(*)[QM_SPAN]>(&smem4[0]);
    float(*lanes)[TOK][QM_LS] = reinterpret_cast<float(*)[TOK][QM_LS]>(&smem4[0]); /* after the steps */
    const int tid = (int)threadIdx.x, warp = tid / 32, gid = (tid % 32) / 4, qid = tid % 4;
    const int64_t row0 = (int64_t)blockIdx.x * ROWS, tok0 = (int64_t)blockIdx.y * TOK;
    const int nrows = a.rows - row0 < ROWS ? (int)(a.rows - row0) : ROWS;
    const int ntok = a.n - tok0 < TOK ? (int)(a.n - tok0) : TOK;
    const int64_t grp = blockIdx.z, boff = grp * a.b_goff, ys = a.y_stride ? a.y_stride : a.rows;
    const uint8_t *w = a.w + (uint64_t)grp * a.w_gstride;
    uint4 pre[LPT];
    UNROLL
    for (int i = 0; i < LPT; i++) pre[i] = make_uint4(0u, 0u, 0u, 0u);
    /* word k of a step is word k % QM_NU of row k / QM_NU; a step starts 16-aligned (16 x 34 = 544 bytes) */
    auto issue = [&](int64_t b0) {
        const int nblk = a.nb - b0 < QM_CB ? (int)(a.nb - b0) : QM_CB;
        const int nu = (nblk * 34 + 15) / 16;
        UNROLL
        for (int i = 0; i < LPT; i++) {
            const int k = tid + i * QM_NT, rr = k / QM_NU, u = k % QM_NU;
            if (rr < nrows && u < nu)
                pre[i] = *(const uint4 *)(const void *)(w + (uint64_t)(row0 + rr) * a.row_bytes + (uint64_t)b0 * 34 +
                                                        16 * u);
        }
    };
    issue(0);
    GK_PDL_ENTRY_AFTER_WEIGHTS(); /* the first step's weights are in flight (gk_internal.h) */
    float acc[QM_MT][NTL][4];
    UNROLL
    for (int m = 0; m < QM_MT; m++)
        UNROLL
        for (int j = 0; j < NTL; j++) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.0f;
    for (int64_t b0 = 0; b0 < a.nb; b0 += QM_CB) {
        const int nblk = a.nb - b0 < QM_CB ? (int)(a.nb - b0) : QM_CB;
        __syncthreads(); /* the previous step's weights are consumed */
        UNROLL
        for (int i = 0; i < LPT; i++) {
            const int k = tid + i * QM_NT, rr = k / QM_NU, u = k % QM_NU;
            if (k < ROWS * QM_NU) *(uint4 *)(void *)&wbuf[rr][16 * u] = pre[i];
        }
        __syncthreads();
        if (b0 + QM_CB < a.nb) issue(b0 + QM_CB);
        UNROLL
        for (int h = 0; h < 2; h++) {
            const int p = warp + 8 * h; /* this warp's block of the step: lane class `warp`, increasing */
            if (p >= nblk) break;       /* uniform over the warp */
            const int64_t b = boff + b0 + p;
            uint32_t bx[NTL][2];
            float xd[NTL][2];
            UNROLL
            for (int j = 0; j < NTL; j++) {
                const int tb = 8 * j + gid, tc = 8 * j + 2 * qid; /* B column gid; C columns 2 qid, 2 qid + 1 */
                bx[j][0] = bx[j][1] = 0u;
                if (tb < ntok) {
                    const uint8_t *xq = a.act + (size_t)(tok0 + tb) * a.stride + b * 32 + 4 * qid;
                    bx[j][0] = *(const uint32_t *)(const void *)xq;
                    bx[j][1] = *(const uint32_t *)(const void *)(xq + 16);
                }
                UNROLL
                for (int e = 0; e < 2; e++)
                    xd[j][e] = tc + e < ntok ? ((const float *)(const void *)(a.act + (size_t)(tok0 + tc + e) * a.stride +
                                                                               a.d_off))[b]
                                             : 0.0f;
            }
            UNROLL
            for (int m = 0; m < QM_MT; m++) {
                const uint8_t *pa = &wbuf[16 * m + gid][p * 34], *pb = &wbuf[16 * m + gid + 8][p * 34];
                uint32_t af[4];
                if (p & 1) { /* 34 p + 2 is 4-aligned for odd p */
                    af[0] = rd32a(pa + 2 + 4 * qid), af[1] = rd32a(pb + 2 + 4 * qid);
                    af[2] = rd32a(pa + 18 + 4 * qid), af[3] = rd32a(pb + 18 + 4 * qid);
                } else {
                    af[0] = rd32h(pa + 2 + 4 * qid), af[1] = rd32h(pb + 2 + 4 * qid);
                    af[2] = rd32h(pa + 18 + 4 * qid), af[3] = rd32h(pb + 18 + 4 * qid);
                }
                const float da = h2f(rd16(pa)), db = h2f(rd16(pb));
                UNROLL
                for (int j = 0; j < NTL; j++) {
                    int c[4] = {0, 0, 0, 0};
                    mma_s8_16832(c, af, bx[j][0], bx[j][1]);
                    acc[m][j][0] = fadd(acc[m][j][0], fmul(fmul(da, xd[j][0]), (float)c[0]));
                    acc[m][j][1] = fadd(acc[m][j][1], fmul(fmul(da, xd[j][1]), (float)c[1]));
                    acc[m][j][2] = fadd(acc[m][j][2], fmul(fmul(db, xd[j][0]), (float)c[2]));
                    acc[m][j][3] = fadd(acc[m][j][3], fmul(fmul(db, xd[j][1]), (float)c[3]));
                }
            }
        }
    }
    __syncthreads(); /* the staging buffer becomes the lane buffer */
    UNROLL
    for (int m = 0; m < QM_MT; m++)
        UNROLL
        for (int j = 0; j < NTL; j++) {
            const int r = 16 * m + gid, tc = 8 * j + 2 * qid;
            lanes[warp][tc][r] = acc[m][j][0];
            lanes[warp][tc + 1][r] = acc[m][j][1];
            lanes[warp][tc][r + 8] = acc[m][j][2];
            lanes[warp][tc + 1][r + 8] = acc[m][j][3];
        }
    __syncthreads();
    float *y = a.y + grp * a.rows;
    for (int k = tid; k < ROWS * TOK; k += QM_NT) { /* the fixed reduction of the 8 lanes */
        const int r = k % ROWS, t = k / ROWS;
        if (r < nrows && t < ntok) {
            float l[8];
            UNROLL
            for (int c = 0; c < 8; c++) l[c] = lanes[c][t][r];
            y[(tok0 + t) * ys + row0 + r] = reduce8(l);
        }
    }
}
#endif /* DS4RT_GK_INT8_MMA */

/* ---------------- float products ----------------
 * Thread (q, rg, g) holds lanes 4q..4q+3 of FRT rows for the TT tokens of token group g: each
 * activation load serves FRT rows and each weight load TT tokens, which keeps the L1 traffic of
 * activations (not the FMA rate) from bounding batches of 2..17 rows. */

#define FQ 8      /* threads per row, each holding 4 of the 32 lanes */
#define FRT 4     /* rows per thread */
#define FRG 4     /* row groups per thread block */
#define FROWS (FRT * FRG)
#define FGROUPS 4 /* token groups per thread block */

template <int TYPE>
__device__ __forceinline__ void load4(const uint8_t *wr, int64_t e, float *v) {
    if (TYPE == T_F32) {
        const float4 p = *(const float4 *)(const void *)(wr + 4 * e);
        v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w;
    } else {
        const uint2 p = *(const uint2 *)(const void *)(wr + 2 * e);
        const uint32_t u[2] = {p.x, p.y};
        for (int k = 0; k < 2; k++) {
            v[2 * k] = TYPE == T_F16 ? h2f(u[k] & 0xffffu) : bf2f(u[k] & 0xffffu);
            v[2 * k + 1] = TYPE == T_F16 ? h2f(u[k] >> 16) : bf2f(u[k] >> 16);
        }
    }
}

template <int TYPE>
__device__ __forceinline__ float load1(const uint8_t *wr, int64_t e) {
    if (TYPE == T_F32) {
        const uint32_t u = wr[4 * e] | (wr[4 * e + 1] << 8) | (wr[4 * e + 2] << 16) | ((uint32_t)wr[4 * e + 3] << 24);
        return bits_f32(u);
    }
    const uint32_t u = wr[2 * e] | (wr[2 * e + 1] << 8);
    return TYPE == T_F16 ? h2f(u) : bf2f(u);
}

/* acc += w * x: one rounding after the exact product for F16 (see the top), else two. */
template <int TYPE>
__device__ __forceinline__ float mac(float acc, float w, float x) {
    return TYPE == T_F16 ? ffma(w, x, acc) : fadd(acc, fmul(w, x));
}

/* Tokens of token group g of a grid row, and its first token (dense products). */
__device__ __forceinline__ int64_t group_tokens(int64_t n, int64_t t0, int tt) {
    const int64_t nt = n - t0 < tt ? n - t0 : tt;
    return nt < 0 ? 0 : nt;
}

template <int TYPE, int TT, bool VEC, bool EXPERTS>
__global__ void __launch_bounds__(FQ * FRG * FGROUPS) mm_f_kernel(mm_args a, int64_t cols) {
    GK_PDL_ENTRY();
    __shared__ float part[TT][FROWS][33]; /* the 32 lanes of each (token, row); 33 against bank conflicts */
    const int q = threadIdx.x % FQ, rg = threadIdx.x / FQ, g = threadIdx.y;
    const int64_t rowb = (int64_t)blockIdx.x * FROWS, row0 = rowb + rg * FRT;
    if constexpr (EXPERTS) pair_select(a);
    int64_t t0, nt, y_row;
    const uint8_t *w = a.w;
    bool bad = false;
    if (EXPERTS) {
        const int64_t j = blockIdx.y;
        const int32_t e = a.ids[j];
        bad = e < 0 || (uint32_t)e >= a.n_experts;
        w += bad ? 0 : (uint64_t)e * a.expert_stride;
        t0 = j / a.x_div;
        nt = 1;
        y_row = j;
    } else {
        t0 = (int64_t)blockIdx.y * (TT * FGROUPS) + (int64_t)g * TT;
        nt = group_tokens(a.n, t0, TT);
        y_row = t0;
    }
    float acc[FRT][TT][4];
    UNROLL
    for (int i = 0; i < FRT; i++)
        UNROLL
        for (int t = 0; t < TT; t++)
            UNROLL
            for (int k = 0; k < 4; k++) acc[i][t][k] = 0.0f;
    if (nt > 0 && !bad) {
        const uint8_t *wr[FRT];
        UNROLL
        for (int i = 0; i < FRT; i++) /* rows past the end read the last row; nothing is stored */
            wr[i] = w + (uint64_t)(row0 + i < a.rows ? row0 + i : a.rows - 1) * a.row_bytes;
        for (int64_t e0 = 4 * q; e0 < cols; e0 += 32) {
            float wv[FRT][4];
            UNROLL
            for (int i = 0; i < FRT; i++) {
                if (VEC) {
                    load4<TYPE>(wr[i], e0, wv[i]);
                } else {
                    UNROLL
                    for (int k = 0; k < 4; k++) wv[i][k] = e0 + k < cols ? load1<TYPE>(wr[i], e0 + k) : 0.0f;
                }
            }
            UNROLL
            for (int t = 0; t < TT; t++) {
                if (t < nt) {
                    const float *xr = (const float *)(const void *)(a.act + (size_t)(t0 + t) * a.stride) + e0;
                    float xv[4];
                    if (VEC) {
                        const float4 x4 = *(const float4 *)(const void *)xr;
                        xv[0] = x4.x, xv[1] = x4.y, xv[2] = x4.z, xv[3] = x4.w;
                    } else {
                        UNROLL
                        for (int k = 0; k < 4; k++) xv[k] = e0 + k < cols ? xr[k] : 0.0f;
                    }
                    UNROLL
                    for (int i = 0; i < FRT; i++)
                        UNROLL
                        for (int k = 0; k < 4; k++)
                            if (VEC || e0 + k < cols) acc[i][t][k] = mac<TYPE>(acc[i][t][k], wv[i][k], xv[k]);
                }
            }
        }
    }
    /* one token group at a time: its lanes through shared memory, then reduce32 (blocks.h):
     * v[k] = (l[k] + l[k+8]) + (l[k+16] + l[k+24]), y = reduce8(v) */
    const int nthreads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
    for (int gr = 0; gr < (int)blockDim.y; gr++) {
        if (g == gr)
            UNROLL
            for (int i = 0; i < FRT; i++)
                UNROLL
                for (int t = 0; t < TT; t++)
                    UNROLL
                    for (int k = 0; k < 4; k++) part[t][rg * FRT + i][4 * q + k] = acc[i][t][k];
        __syncthreads();
        const int64_t tg = EXPERTS ? t0 : (int64_t)blockIdx.y * (TT * FGROUPS) + (int64_t)gr * TT;
        const int64_t ng = EXPERTS ? 1 : group_tokens(a.n, tg, TT), yg = EXPERTS ? y_row : tg;
        for (int j = tid; j < TT * FROWS; j += nthreads) {
            const int t = j / FROWS, lr = j % FROWS;
            const int64_t row = rowb + lr;
            if (t >= ng || row >= a.rows) continue;
            const float *l = part[t][lr];
            float v[8];
            for (int k = 0; k < 8; k++) v[k] = fadd(fadd(l[k], l[k + 8]), fadd(l[k + 16], l[k + 24]));
            a.y[(yg + t) * a.rows + row] = bad ? bits_f32(0x7fc00000u) : reduce8(v);
        }
        __syncthreads();
    }
}

/* ---------------- float products, 16-byte weight loads ----------------
 * Thread (q, lr, g) is lanes L*q .. L*q+L-1 of row lr for the TT tokens of token group g, where
 * L = 16 / element bytes (F16/BF16: 8, F32: 4): every weight load is 16 bytes, and each lane is
 * one accumulator that adds its elements in column order (the CPU's lane i % 32). A row's 32
 * lanes are TPR = 32 / L threads; a thread block is VX threads (VX / TPR rows) per token group.
 * The loads of VU chunks (32 elements each) are issued one batch ahead of their use, so each
 * thread keeps 2 x VU x 16 bytes in flight: the weights, not the number of warps, bound it. */

#define VX 64 /* threads of a token group in a block */

template <int TYPE>
__device__ __forceinline__ void unpack16(uint4 p, float *v) {
    if (TYPE == T_F32) {
        v[0] = bits_f32(p.x), v[1] = bits_f32(p.y), v[2] = bits_f32(p.z), v[3] = bits_f32(p.w);
    } else {
        const uint32_t u[4] = {p.x, p.y, p.z, p.w};
        UNROLL
        for (int k = 0; k < 4; k++) {
            v[2 * k] = TYPE == T_F16 ? h2f(u[k] & 0xffffu) : bf2f(u[k] & 0xffffu);
            v[2 * k + 1] = TYPE == T_F16 ? h2f(u[k] >> 16) : bf2f(u[k] >> 16);
        }
    }
}

template <int TYPE, int TT, bool EXPERTS>
__global__ void __launch_bounds__(VX * FGROUPS) mm_fv_kernel(mm_args a, int64_t cols) {
    GK_PDL_ENTRY();
    constexpr int L = TYPE == T_F32 ? 4 : 8;       /* lanes per thread */
    constexpr int TPR = 32 / L;                     /* threads per row */
    constexpr int VR = VX / TPR;                    /* rows per block */
    constexpr int CB = 32 * (TYPE == T_F32 ? 4 : 2); /* bytes of a 32-element chunk of a row */
    constexpr int VU = TT >= 4 ? 4 : 8;             /* chunks per load batch */
    __shared__ float part[TT][VR][33]; /* the 32 lanes of each (token, row); 33 against bank conflicts */
    const int q = threadIdx.x % TPR, lr = threadIdx.x / TPR, g = threadIdx.y;
    const int64_t rowb = (int64_t)blockIdx.x * VR, row = rowb + lr;
    if constexpr (EXPERTS) pair_select(a);
    int64_t t0, nt, y_row;
    const uint8_t *w = a.w;
    bool bad = false;
    if (EXPERTS) {
        const int64_t j = blockIdx.y;
        const int32_t e = a.ids[j];
        bad = e < 0 || (uint32_t)e >= a.n_experts;
        w += bad ? 0 : (uint64_t)e * a.expert_stride;
        t0 = j / a.x_div;
        nt = 1;
        y_row = j;
    } else {
        t0 = (int64_t)blockIdx.y * (TT * FGROUPS) + (int64_t)g * TT;
        nt = group_tokens(a.n, t0, TT);
        y_row = t0;
    }
    float acc[TT][L];
    UNROLL
    for (int t = 0; t < TT; t++)
        UNROLL
        for (int k = 0; k < L; k++) acc[t][k] = 0.0f;
    if (nt > 0 && !bad) {
        /* rows past the end read the last row; nothing is stored */
        const uint8_t *wr = w + (uint64_t)(row < a.rows ? row : a.rows - 1) * a.row_bytes + 16 * q;
        const int64_t nch = cols / 32;
        const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
        uint4 cur[VU];
        UNROLL
        for (int u = 0; u < VU; u++) cur[u] = u < nch ? *(const uint4 *)(const void *)(wr + (int64_t)u * CB) : zero;
        for (int64_t c0 = 0; c0 < nch; c0 += VU) {
            uint4 nxt[VU];
            UNROLL
            for (int u = 0; u < VU; u++) {
                const int64_t c = c0 + VU + u;
                nxt[u] = c < nch ? *(const uint4 *)(const void *)(wr + c * CB) : zero;
            }
            UNROLL
            for (int u = 0; u < VU; u++) {
                if (c0 + u < nch) {
                    float wv[L];
                    unpack16<TYPE>(cur[u], wv);
                    const int64_t e = (c0 + u) * 32 + L * q;
                    UNROLL
                    for (int t = 0; t < TT; t++) {
                        if (t < nt) {
                            const float *xr = (const float *)(const void *)(a.act + (size_t)(t0 + t) * a.stride) + e;
                            float xv[L];
                            UNROLL
                            for (int k = 0; k < L; k += 4) {
                                const float4 x4 = *(const float4 *)(const void *)(xr + k);
                                xv[k] = x4.x, xv[k + 1] = x4.y, xv[k + 2] = x4.z, xv[k + 3] = x4.w;
                            }
                            UNROLL
                            for (int k = 0; k < L; k++) acc[t][k] = mac<TYPE>(acc[t][k], wv[k], xv[k]);
                        }
                    }
                }
            }
            UNROLL
            for (int u = 0; u < VU; u++) cur[u] = nxt[u];
        }
    }
    /* one token group at a time: its lanes through shared memory, then reduce32 (blocks.h):
     * v[k] = (l[k] + l[k+8]) + (l[k+16] + l[k+24]), y = reduce8(v) */
    const int nthreads = blockDim.x * blockDim.y, tid = threadIdx.y * blockDim.x + threadIdx.x;
    for (int gr = 0; gr < (int)blockDim.y; gr++) {
        if (g == gr)
            UNROLL
            for (int t = 0; t < TT; t++)
                UNROLL
                for (int k = 0; k < L; k++) part[t][lr][L * q + k] = acc[t][k];
        __syncthreads();
        const int64_t tg = EXPERTS ? t0 : (int64_t)blockIdx.y * (TT * FGROUPS) + (int64_t)gr * TT;
        const int64_t ng = EXPERTS ? 1 : group_tokens(a.n, tg, TT), yg = EXPERTS ? y_row : tg;
        for (int j = tid; j < TT * VR; j += nthreads) {
            const int t = j / VR, jr = j % VR;
            const int64_t orow = rowb + jr;
            if (t >= ng || orow >= a.rows) continue;
            const float *l = part[t][jr];
            float v[8];
            for (int k = 0; k < 8; k++) v[k] = fadd(fadd(l[k], l[k + 8]), fadd(l[k + 16], l[k + 24]));
            a.y[(yg + t) * a.rows + orow] = bad ? bits_f32(0x7fc00000u) : reduce8(v);
        }
        __syncthreads();
    }
}

/* ---------------- float products of a few tokens: one row per block, staged ----------------
 * For decode and verify the kernels above give each thread whole rows, so a matrix of a few
 * hundred rows (the router, the compressors, the HC mixes) keeps only a few KB of loads in
 * flight and reads at tens of GB/s. Here a block of FS_NT (128 or 256) threads owns one weight row and up to
 * FS_TT_MAX tokens. Step by step (CE columns), all of its threads stage the chunk of the row,
 * converted to f32, and the tokens' activations of those columns in shared memory; the next
 * step's loads are issued before the current one is used. Then warp g runs the 32 lane chains of
 * token g in the CPU's order (lane c % 32, in column order), reading both operands from shared
 * memory, so a chain costs a shared load pair and a multiply-add per element. */
typedef void (*mmf_kernel_fn_fwd)(mm_args, int64_t);
#define FS_MAX_N 32          /* launch_mm takes this kernel up to here */
#define FS_TT_MAX 4          /* tokens per grid row at most (one warp each) */

template <int TYPE>
__device__ __forceinline__ void unpack_store(uint4 p, float *dst) {
    if (TYPE == T_F32) {
        *(uint4 *)(void *)dst = p;
    } else {
        float v[8];
        unpack16<TYPE>(p, v);
        *(float4 *)(void *)dst = make_float4(v[0], v[1], v[2], v[3]);
        *(float4 *)(void *)(dst + 4) = make_float4(v[4], v[5], v[6], v[7]);
    }
}

/* The activation rounding paired with float weights of TYPE (act_float_kernel's). */
template <int TYPE> __device__ __forceinline__ float act_round(float v) {
    if (TYPE == T_F16) return h2f(f2h(v));
    if (TYPE == T_BF16) return bf2f(f2bf(v));
    return v;
}

/* x of a float product as its conversion leaves it: raw rows (a.round_x) rounded as
 * act_float_kernel rounds them, or rows that conversion wrote (F32: the same values). Apply it
 * where the loaded values are stored, never right after each load: the rounding then waits for
 * each load in turn and the loads of a thread stop being in flight together (the one-token HC
 * mix took 26 us instead of 9.4 on an H100; docs/GPU.md, "Merged launches"). */
template <int TYPE> __device__ __forceinline__ float4 x_in(float4 v, int round_x) {
    if (TYPE != T_F32 && round_x) {
        v.x = act_round<TYPE>(v.x), v.y = act_round<TYPE>(v.y);
        v.z = act_round<TYPE>(v.z), v.w = act_round<TYPE>(v.w);
    }
    return v;
}

/* TT tokens per grid row (1, 2 or 4: the shared activation buffer is sized by it) and CE columns
 * per step: a decode (TT = 1) stages 4096 columns a step, so the 16384 columns of the HC mix
 * take 4 dependent steps instead of 8 and a 4096-column row is one step of 256 threads (every
 * load of the row in flight at once); TT = 2, 4 stage 2048 (static shared memory stays under
 * 48 KB). The arithmetic of a token does not depend on TT or CE: lane l of token t adds
 * w[l + 32 j] x[l + 32 j] in increasing j, the lanes summed by the 32-lane tree. */
template <int TYPE, int TT, int CE, int FS_NT>
__global__ void __launch_bounds__(FS_NT) mm_fs_kernel(mm_args a, int64_t cols) {
    constexpr int ES = TYPE == T_F32 ? 4 : 2;      /* weight element bytes */
    constexpr int EW = 16 / ES;                     /* elements per 16-byte weight word */
    constexpr int WL = CE / EW / FS_NT;             /* weight loads per thread and step */
    constexpr int XL = CE / 4 / FS_NT;              /* 16-byte activation loads per thread, token and step */
    static_assert(WL >= 1 && XL >= 1 && TT <= FS_NT / 32, "step layout: one group of 32 lane threads per token");
    __shared__ float wf[CE];
    __shared__ float xs[TT][CE];
    __shared__ float lanes[TT][33];
    const int tid = (int)threadIdx.x, l = tid % 32, g = tid / 32;
    const int64_t r = blockIdx.x, tb = (int64_t)blockIdx.y * TT;
    const int nt = a.n - tb < TT ? (int)(a.n - tb) : TT;
    const uint8_t *wr = a.w + (uint64_t)r * a.row_bytes;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 wp[WL];
    float4 xp[TT][XL];
    /* element offsets of this thread's words within a step: weights k * FS_NT + tid words of
     * EW elements, activations (k * FS_NT + tid) * 4 */
    auto issue_w = [&](int64_t e0) {
        UNROLL
        for (int k = 0; k < WL; k++) {
            const int64_t e = e0 + (int64_t)(k * FS_NT + tid) * EW;
            wp[k] = e < cols ? *(const uint4 *)(const void *)(wr + e * ES) : zero;
        }
    };
    auto issue_x = [&](int64_t e0) {
        UNROLL
        for (int t = 0; t < TT; t++)
            if (t < nt) {
                const float *xr = (const float *)(const void *)(a.act + (size_t)(tb + t) * a.stride);
                UNROLL
                for (int k = 0; k < XL; k++) {
                    const int64_t e = e0 + (int64_t)(k * FS_NT + tid) * 4;
                    xp[t][k] = e < cols ? *(const float4 *)(const void *)(xr + e) : make_float4(0.f, 0.f, 0.f, 0.f);
                }
            }
    };
    issue_w(0);
    GK_PDL_ENTRY_AFTER_WEIGHTS(); /* the first step's weights are in flight (gk_internal.h) */
    issue_x(0);
    float acc = 0.0f;
    for (int64_t e0 = 0; e0 < cols; e0 += CE) {
        __syncthreads(); /* the previous step is consumed */
        UNROLL
        for (int k = 0; k < WL; k++) unpack_store<TYPE>(wp[k], &wf[(k * FS_NT + tid) * EW]);
        UNROLL
        for (int t = 0; t < TT; t++)
            if (t < nt)
                UNROLL
                for (int k = 0; k < XL; k++) *(float4 *)(void *)&xs[t][(k * FS_NT + tid) * 4] = x_in<TYPE>(xp[t][k], a.round_x);
        __syncthreads();
        if (e0 + CE < cols) issue_w(e0 + CE), issue_x(e0 + CE);
        if (g < nt) { /* uniform over the warp */
            const int nj = (int)((cols - e0 < CE ? cols - e0 : CE) / 32);
            if (nj == CE / 32) {
                UNROLL
                for (int j = 0; j < CE / 32; j++) acc = mac<TYPE>(acc, wf[l + 32 * j], xs[g][l + 32 * j]);
            } else {
                for (int j = 0; j < nj; j++) acc = mac<TYPE>(acc, wf[l + 32 * j], xs[g][l + 32 * j]);
            }
        }
    }
    if (g < nt) lanes[g][l] = acc;
    __syncthreads();
    if (tid < nt) { /* reduce32 (blocks.h), as the kernels above */
        const float *lv = lanes[tid];
        float v[8];
        for (int k = 0; k < 8; k++) v[k] = fadd(fadd(lv[k], lv[k + 8]), fadd(lv[k + 16], lv[k + 24]));
        a.y[(tb + tid) * a.rows + r] = reduce8(v);
    }
}

/* One token per thread block (grid row t) and rows of at most FS1_STEPS x 4096 columns (the
 * hyper-connection mixes: 24 rows of 16384): mm_fs_kernel<TYPE, 1, 4096, 256> with every weight
 * and activation load of the row issued at once, so a row waits for one memory latency instead of
 * one per step (the steps' staging and the lane chains are the same, so are the bits). 24 rows
 * are 24 thread blocks a token: registers (128 of loads a thread) are not what limits them. A
 * verify pass of n tokens is 24 n blocks: mm_fs_kernel's 4 tokens a block took 17 us a call for
 * 8 tokens on an H100 (each of its 48 blocks streams 4 tokens' 64 KB rows through one SM in 8
 * dependent steps), so the form can take up to 64 tokens: DS4RT_GPU_FS1=N, off (one token, the
 * form measured on a device) until a device has run and timed N > 1 (written 2026-12-08 without
 * one; bitwise under HIP-CPU). */
#define FS1_STEPS 4
#define FS1_MAX_ROWS 256 /* more rows fill the device without the registers this form holds */
#define FS1_MAX_N 1      /* default token bound of the form; DS4RT_GPU_FS1=N sets it (at most 64) */
/* RMS (ds4rt_gk_matmul_rms_rows): a.act holds the raw rows X; every block forms the HC RMS scale r of
 * it itself (gk_rms_inv, the HC RMS kernel's partition and tree) and multiplies act(X * r), the
 * values that kernel would have written, so the HC mix of one token is one launch. */
template <int TYPE, bool RMS>
__global__ void __launch_bounds__(256) mm_fs1_kernel(mm_args a, int64_t cols) {
    constexpr int CE = 4096, NT = 256;
    constexpr int ES = TYPE == T_F32 ? 4 : 2, EW = 16 / ES, WL = CE / EW / NT, XL = CE / 4 / NT;
    __shared__ float wf[CE];
    __shared__ float xs[CE];
    __shared__ float lanes[33];
    __shared__ double rms_sh[RMS ? NT : 1];
    const int tid = (int)threadIdx.x, l = tid % 32, g = tid / 32;
    const int64_t r = blockIdx.x, t = blockIdx.y;
    const uint8_t *wr = a.w + (uint64_t)r * a.row_bytes;
    const float *xr = (const float *)(const void *)(a.act + (size_t)t * a.stride);
    uint4 wp[FS1_STEPS][WL];
    float4 xp[FS1_STEPS][XL];
    UNROLL
    for (int st = 0; st < FS1_STEPS; st++)
        UNROLL
        for (int k = 0; k < WL; k++) {
            const int64_t e = (int64_t)st * CE + (int64_t)(k * NT + tid) * EW;
            wp[st][k] = e < cols ? *(const uint4 *)(const void *)(wr + e * ES) : make_uint4(0u, 0u, 0u, 0u);
        }
    GK_PDL_ENTRY_AFTER_WEIGHTS(); /* the row's weights are in flight (gk_internal.h) */
    float inv = 1.0f;
    if constexpr (RMS) inv = gk_rms_inv<NT, FS1_STEPS * CE / GK_RMS_PARTS>(xr, cols, a.eps, rms_sh);
    UNROLL
    for (int st = 0; st < FS1_STEPS; st++)
        UNROLL
        for (int k = 0; k < XL; k++) {
            const int64_t e = (int64_t)st * CE + (int64_t)(k * NT + tid) * 4;
            xp[st][k] = e < cols ? *(const float4 *)(const void *)(xr + e) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    float acc = 0.0f;
    UNROLL
    for (int st = 0; st < FS1_STEPS; st++) {
        const int64_t e0 = (int64_t)st * CE;
        if (e0 >= cols) break;
        __syncthreads(); /* the previous step is consumed */
        UNROLL
        for (int k = 0; k < WL; k++) unpack_store<TYPE>(wp[st][k], &wf[(k * NT + tid) * EW]);
        UNROLL
        for (int k = 0; k < XL; k++) {
            float4 v = xp[st][k];
            if constexpr (RMS) {
                v.x = act_round<TYPE>(v.x * inv), v.y = act_round<TYPE>(v.y * inv);
                v.z = act_round<TYPE>(v.z * inv), v.w = act_round<TYPE>(v.w * inv);
            } else {
                v = x_in<TYPE>(v, a.round_x);
            }
            *(float4 *)(void *)&xs[(k * NT + tid) * 4] = v;
        }
        __syncthreads();
        if (g == 0) { /* warp 0 runs the 32 lane chains, as mm_fs_kernel's warp of token 0 */
            const int nj = (int)((cols - e0 < CE ? cols - e0 : CE) / 32);
            if (nj == CE / 32) {
                UNROLL
                for (int j = 0; j < CE / 32; j++) acc = mac<TYPE>(acc, wf[l + 32 * j], xs[l + 32 * j]);
            } else {
                for (int j = 0; j < nj; j++) acc = mac<TYPE>(acc, wf[l + 32 * j], xs[l + 32 * j]);
            }
        }
    }
    if (g == 0) lanes[l] = acc;
    __syncthreads();
    if (tid == 0) { /* reduce32, as mm_fs_kernel */
        float v[8];
        for (int k = 0; k < 8; k++) v[k] = fadd(fadd(lanes[k], lanes[k + 8]), fadd(lanes[k + 16], lanes[k + 24]));
        a.y[t * a.rows + r] = reduce8(v);
    }
}

/* A product of n tokens with `w` runs mm_fs_kernel or mm_fs1_kernel (launch_mm): float rows of
 * whole 32-column lane periods, 16-byte aligned, at most FS_MAX_N tokens. */
static bool fs_takes(const ds4rt_gk_weight *w, int64_t n) {
    return (w->type == T_F32 || w->type == T_F16 || w->type == T_BF16) && n >= 1 && n <= FS_MAX_N &&
           w->cols % 32 == 0 && ((uintptr_t)w->d_data & 15) == 0 && (w->row_bytes & 15) == 0;
}

/* The most tokens whose products take mm_fs1_kernel, decided once: DS4RT_GPU_FS1 unset,
 * FS1_MAX_N; =N, N (at most 64; 1 is the form's first, one-token use); =0, never (mm_fs_kernel
 * then): an A/B knob, reported by ds4rt_gk_mm_forms(). */
/* A knob's value as a count in [0, max]: -1 where it is set but not a whole number in that
 * range (the caller keeps its default and says "not understood"), -2 where it is unset. */
static long knob_count(const char *name, long max) {
    const char *e = getenv(name);
    if (e == NULL || *e == '\0') return -2;
    char *end = NULL;
    const long v = strtol(e, &end, 10);
    return end != e && *end == '\0' && v >= 0 && v <= max ? v : -1;
}

static int64_t fs1_max_n(void) {
    static const int64_t n = [] {
        const long v = knob_count("DS4RT_GPU_FS1", 64);
        return (int64_t)(v >= 0 ? v : FS1_MAX_N);
    }();
    return n;
}

/* A product of n tokens with `w` runs mm_fs1_kernel: 1 <= n <= fs1_max_n(), float rows of
 * 4097..16384 columns, at most FS1_MAX_ROWS of them, 16-byte aligned. */
static bool fs1_takes(const ds4rt_gk_weight *w, int64_t n) {
    return n >= 1 && n <= fs1_max_n() && (w->type == T_F32 || w->type == T_F16 || w->type == T_BF16) && w->cols > 4096 &&
           w->cols <= FS1_STEPS * 4096 && w->cols % 32 == 0 && w->rows <= FS1_MAX_ROWS &&
           ((uintptr_t)w->d_data & 15) == 0 && (w->row_bytes & 15) == 0;
}

/* Rows of at most 1024 columns (the indexer's query projection: 8192 x 1024) take one step of
 * 1024 columns with 128 threads, so a row's thread block holds no idle threads and more blocks
 * fit on an SM. */
template <int TYPE>
static mmf_kernel_fn_fwd pick_fs_t(int tt, int64_t cols, int *nt) {
    if (cols <= 1024) {
        *nt = 128;
        return tt == 1 ? mm_fs_kernel<TYPE, 1, 1024, 128> : tt == 2 ? mm_fs_kernel<TYPE, 2, 1024, 128>
                                                                    : mm_fs_kernel<TYPE, 4, 1024, 128>;
    }
    *nt = 256;
    return tt == 1 ? mm_fs_kernel<TYPE, 1, 4096, 256> : tt == 2 ? mm_fs_kernel<TYPE, 2, 2048, 256>
                                                                : mm_fs_kernel<TYPE, 4, 2048, 256>;
}

/* ---------------- row gathers (dequant.c, operation for operation) ---------------- */

template <int TYPE>
__device__ __forceinline__ void dequant_block(const uint8_t *blk, float *y, int64_t copies, int64_t cols) {
#define PUT(i, v)                                                     \
    do {                                                              \
        const float pv_ = (v);                                        \
        for (int64_t c_ = 0; c_ < copies; c_++) y[c_ * cols + (i)] = pv_; \
    } while (0)
    if (TYPE == T_F32) {
        PUT(0, bits_f32(blk[0] | (blk[1] << 8) | (blk[2] << 16) | ((uint32_t)blk[3] << 24)));
    } else if (TYPE == T_F16) {
        PUT(0, h2f(blk[0] | (blk[1] << 8)));
    } else if (TYPE == T_BF16) {
        PUT(0, bf2f(blk[0] | (blk[1] << 8)));
    } else if (TYPE == T_Q8_0) {
        const float d = h2f(blk[0] | (blk[1] << 8));
        for (int i = 0; i < 32; i++) PUT(i, fmul((float)(int8_t)blk[2 + i], d));
    } else if (TYPE == T_Q4_0) {
        const float d = h2f(blk[0] | (blk[1] << 8));
        for (int i = 0; i < 16; i++) {
            PUT(i, fmul(d, (float)((blk[2 + i] & 15) - 8)));
            PUT(i + 16, fmul(d, (float)((blk[2 + i] >> 4) - 8)));
        }
    } else if (TYPE == T_MXFP4) {
        const float d = e8m0_half(blk[0]);
        for (int i = 0; i < 16; i++) {
            PUT(i, fmul(d, (float)ds4rt_mxfp4_values[blk[1 + i] & 15]));
            PUT(i + 16, fmul(d, (float)ds4rt_mxfp4_values[blk[1 + i] >> 4]));
        }
    } else if (TYPE == T_Q2_K) {
        const float d = h2f(blk[80] | (blk[81] << 8)), dmin = h2f(blk[82] | (blk[83] << 8));
        for (int e = 0; e < 256; e++) {
            const int n = e / 128, j = (e % 128) / 32, i = e % 32;
            const int sc = blk[e / 16];
            const float dl = fmul(d, (float)(sc & 15)), ml = fmul(dmin, (float)(sc >> 4));
            PUT(e, fsub(fmul(dl, (float)((blk[16 + 32 * n + i] >> (2 * j)) & 3)), ml));
        }
    } else if (TYPE == T_Q4_K || TYPE == T_Q5_K) {
        const float d = h2f(blk[0] | (blk[1] << 8)), dmin = h2f(blk[2] | (blk[3] << 8));
        const uint8_t *qs = blk + (TYPE == T_Q5_K ? 48 : 16);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(blk + 4, j, &sc, &m);
            const float dl = fmul(d, (float)sc), ml = fmul(dmin, (float)m);
            const int c = j / 2, sh = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * c + l] >> sh) & 15;
                if (TYPE == T_Q5_K) q |= ((blk[16 + l] >> j) & 1) << 4;
                PUT(32 * j + l, fsub(fmul(dl, (float)q), ml));
            }
        }
    } else if (TYPE == T_Q6_K) {
        const float d = h2f(blk[208] | (blk[209] << 8));
        for (int e = 0; e < 256; e++) {
            const int h = e / 128, i = e % 128, k = i / 32;
            const int lo = i < 64 ? blk[64 * h + i] & 15 : blk[64 * h + i - 64] >> 4;
            const int hi = (blk[128 + 32 * h + (i % 32)] >> (2 * k)) & 3;
            PUT(e, fmul(fmul(d, (float)(int8_t)blk[192 + e / 16]), (float)((lo | (hi << 4)) - 32)));
        }
    } else { /* IQ2_XXS */
        const float d = h2f(blk[0] | (blk[1] << 8));
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = blk + 2 + 8 * s;
            const uint32_t aux = q[4] | (q[5] << 8) | (q[6] << 16) | ((uint32_t)q[7] << 24);
            const float db = fmul(fmul(d, fadd(0.5f, (float)(aux >> 28))), 0.25f);
            for (int g = 0; g < 4; g++) {
                const uint64_t grid = ds4rt_iq2xxs_grid[q[g]];
                const uint32_t signs = ds4rt_ksigns[(aux >> (7 * g)) & 127];
                for (int j = 0; j < 8; j++) {
                    const float v = fmul(db, (float)((grid >> (8 * j)) & 0xff));
                    PUT(32 * s + 8 * g + j, (signs >> j) & 1 ? -v : v);
                }
            }
        }
    }
#undef PUT
}

/* One thread per (row id, weight block). */
template <int TYPE>
__global__ void get_rows_kernel(const uint8_t *__restrict__ w, uint64_t row_bytes, int64_t rows, int64_t cols,
                                const int32_t *__restrict__ ids, int64_t n, int64_t copies, float *__restrict__ out) {
    GK_PDL_ENTRY();
    constexpr int BE = TYPE == T_F32 || TYPE == T_F16 || TYPE == T_BF16 ? 1
                       : (TYPE == T_Q8_0 || TYPE == T_Q4_0 || TYPE == T_MXFP4) ? 32 : 256;
    constexpr int BB = TYPE == T_F32 ? 4 : TYPE == T_F16 || TYPE == T_BF16 ? 2 : TYPE == T_Q8_0 ? 34
                       : TYPE == T_Q4_0 ? 18 : TYPE == T_MXFP4 ? 17 : TYPE == T_Q2_K ? 84 : TYPE == T_Q4_K ? 144
                       : TYPE == T_Q5_K ? 176 : TYPE == T_Q6_K ? 210 : 66;
    const int64_t nb = cols / BE;
    const int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n * nb) return;
    const int64_t i = k / nb, b = k % nb;
    const int32_t id = ids[i];
    float *y = out + (size_t)i * copies * cols + b * BE;
    if (id < 0 || id >= rows) {
        for (int64_t c = 0; c < copies; c++)
            for (int e = 0; e < BE; e++) y[c * cols + e] = bits_f32(0x7fc00000u);
        return;
    }
    dequant_block<TYPE>(w + (uint64_t)id * row_bytes + b * BB, y, copies, cols);
}

/* ---------------- launchers ---------------- */

extern "C" int ds4rt_gk_mm_supports(uint32_t type) { return act_kind(type) >= 0; }

/* Shapes the CPU accepts (matmul.c check_shape), for `what`. */
static int check_weight(const ds4rt_gk_weight *w, const char *what) {
    if (w == NULL) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: weight is NULL", what);
    const int kind = act_kind(w->type);
    if (kind < 0) return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "%s: weight type %u has no GPU kernel", what, w->type);
    const int be = block_elems(w->type), ab = kind == A_Q8_0 ? 32 : kind == A_Q8_K ? 256 : 1;
    if (w->rows < 0 || w->cols <= 0 || w->cols % be != 0 || w->cols % ab != 0 || w->cols > ((int64_t)1 << 40) ||
        w->rows > ((int64_t)1 << 31))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: bad %s shape rows=%lld cols=%lld", what, type_name(w->type),
                             (long long)w->rows, (long long)w->cols);
    const uint64_t need = (uint64_t)(w->cols / be) * (uint64_t)block_bytes(w->type);
    if (w->row_bytes < need)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: row_bytes %llu < %llu needed by %lld %s columns", what,
                             (unsigned long long)w->row_bytes, (unsigned long long)need, (long long)w->cols,
                             type_name(w->type));
    if (w->rows > 0 && w->d_data == NULL) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: weight data is NULL", what);
    return DS4RT_GK_OK;
}

extern "C" size_t ds4rt_gk_act_bytes(uint32_t type, int64_t cols, int64_t n) {
    const int kind = act_kind(type);
    if (kind < 0 || cols <= 0 || n <= 0) return 0;
    return layout_of(kind, cols).stride * (size_t)n;
}

extern "C" size_t ds4rt_gk_matmul_scratch_bytes(uint32_t type, int64_t cols, int64_t n) {
    return ds4rt_gk_act_bytes(type, cols, n);
}

template <bool SW>
static int act_launch(uint32_t type, act_in in, int64_t n, int64_t cols, void *d_act, size_t act_bytes,
                      void *stream) {
    const float *d_x = in.x;
    const int kind = act_kind(type);
    if (kind < 0) return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "act_convert: weight type %u has no GPU kernel", type);
    const int ab = kind == A_Q8_0 ? 32 : kind == A_Q8_K ? 256 : 1;
    if (n < 0 || cols <= 0 || cols % ab != 0 || n > ((int64_t)1 << 24) || cols > ((int64_t)1 << 30))
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "act_convert: bad shape n=%lld cols=%lld for %s", (long long)n,
                             (long long)cols, type_name(type));
    if (n == 0) return DS4RT_GK_OK;
    const act_layout l = layout_of(kind, cols);
    if (act_bytes < l.stride * (size_t)n)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "act_convert: %zu bytes of scratch < %zu needed", act_bytes,
                             l.stride * (size_t)n);
    if (d_x == NULL || d_act == NULL || ((uintptr_t)d_act & 15) != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "act_convert: x or scratch NULL or scratch not 16-byte aligned");
    hipStream_t s = (hipStream_t)stream;
    uint8_t *act = (uint8_t *)d_act;
    if (kind == A_Q8_0) {
        const int64_t items = n * (cols / 32);
        const int64_t per = AQ_NT / 32;
        hipLaunchKernelGGL(act_q8_0_kernel<SW>, dim3((unsigned)((items + per - 1) / per)), dim3(AQ_NT), 0, s, in, n,
                           cols, act, l.stride, l.d_off, l.s_off);
        return DS4RT_GK_LAUNCHED("act_q8_0");
    }
    if (kind == A_Q8_K) {
        const int64_t items = n * (cols / 256);
        hipLaunchKernelGGL(act_q8_K_kernel<SW>, dim3((unsigned)items), dim3(Q8K_NT), 0, s, in, n, cols, act, l.stride,
                           l.d_off, l.s_off);
        return DS4RT_GK_LAUNCHED("act_q8_K");
    }
    const int64_t items = n * cols;
    hipLaunchKernelGGL(act_float_kernel<SW>, dim3((unsigned)((items + 255) / 256)), dim3(256), 0, s, in, n, cols, kind,
                       act, l.stride);
    return DS4RT_GK_LAUNCHED("act_float");
}

extern "C" int ds4rt_gk_act_convert(uint32_t type, const float *d_x, int64_t n, int64_t cols, void *d_act,
                                    size_t act_bytes, void *stream) {
    const act_in in = {d_x, NULL, NULL, 0.0f};
    return act_launch<false>(type, in, n, cols, d_act, act_bytes, stream);
}

extern "C" int ds4rt_gk_swiglu_act(uint32_t type, int64_t rows, uint32_t width, const float *d_g, const float *d_u,
                                   float clamp, const float *d_weight, void *d_act, size_t act_bytes, void *stream) {
    if (d_u == NULL) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "swiglu_act: u is NULL");
    const act_in in = {d_g, d_u, d_weight, clamp};
    return act_launch<true>(type, in, rows, (int64_t)width, d_act, act_bytes, stream);
}

typedef void (*mm_kernel_fn)(mm_args);
typedef void (*mmf_kernel_fn)(mm_args, int64_t);

template <bool EXPERTS>
static mm_kernel_fn pick_q(uint32_t type, bool aligned) {
#define PICK(T) return aligned ? mm_q_kernel<T, true, EXPERTS> : mm_q_kernel<T, false, EXPERTS>
    switch (type) {
    case T_Q8_0: PICK(T_Q8_0);
    case T_Q4_0: PICK(T_Q4_0);
    case T_MXFP4: PICK(T_MXFP4);
    case T_Q2_K: PICK(T_Q2_K);
    case T_Q4_K: PICK(T_Q4_K);
    case T_Q5_K: PICK(T_Q5_K);
    case T_Q6_K: PICK(T_Q6_K);
    case T_IQ2_XXS: PICK(T_IQ2_XXS);
    default: return NULL;
    }
#undef PICK
}

template <int TYPE, bool EXPERTS>
static mmf_kernel_fn pick_f_tt(int tt, bool vec) {
    if constexpr (EXPERTS) { /* one token per slot */
        (void)tt;
        return vec ? mm_f_kernel<TYPE, 1, true, true> : mm_f_kernel<TYPE, 1, false, true>;
    } else {
        switch (tt) {
        case 1: return vec ? mm_f_kernel<TYPE, 1, true, false> : mm_f_kernel<TYPE, 1, false, false>;
        case 2: return vec ? mm_f_kernel<TYPE, 2, true, false> : mm_f_kernel<TYPE, 2, false, false>;
        case 4: return vec ? mm_f_kernel<TYPE, 4, true, false> : mm_f_kernel<TYPE, 4, false, false>;
        default: return vec ? mm_f_kernel<TYPE, 8, true, false> : mm_f_kernel<TYPE, 8, false, false>;
        }
    }
}

template <int TYPE, bool EXPERTS>
static mmf_kernel_fn pick_fv_tt(int tt) {
    if constexpr (EXPERTS) {
        (void)tt;
        return mm_fv_kernel<TYPE, 1, true>;
    } else {
        switch (tt) {
        case 1: return mm_fv_kernel<TYPE, 1, false>;
        case 2: return mm_fv_kernel<TYPE, 2, false>;
        case 4: return mm_fv_kernel<TYPE, 4, false>;
        default: return mm_fv_kernel<TYPE, 8, false>;
        }
    }
}

template <bool EXPERTS>
static mmf_kernel_fn pick_fv(uint32_t type, int tt) {
    switch (type) {
    case T_F32: return pick_fv_tt<T_F32, EXPERTS>(tt);
    case T_F16: return pick_fv_tt<T_F16, EXPERTS>(tt);
    case T_BF16: return pick_fv_tt<T_BF16, EXPERTS>(tt);
    default: return NULL;
    }
}

template <bool EXPERTS>
static mmf_kernel_fn pick_f(uint32_t type, int tt, bool vec) {
    switch (type) {
    case T_F32: return pick_f_tt<T_F32, EXPERTS>(tt, vec);
    case T_F16: return pick_f_tt<T_F16, EXPERTS>(tt, vec);
    case T_BF16: return pick_f_tt<T_BF16, EXPERTS>(tt, vec);
    default: return NULL;
    }
}

/* mm_qt_kernel for `tt` (1, 2, 4 or 8) token rows of the term buffer; fx: the fused form
 * (tt <= QT_FX_TOK). */
template <int TYPE, int QT_CB>
static mm_kernel_fn pick_qt_cb(int tt, bool fx) {
    if (fx)
        return tt == 1 ? mm_qt_kernel<TYPE, QT_CB, 1, true> : tt == 2 ? mm_qt_kernel<TYPE, QT_CB, 2, true>
                                                                       : mm_qt_kernel<TYPE, QT_CB, 4, true>;
    return tt == 1 ? mm_qt_kernel<TYPE, QT_CB, 1, false> : tt == 2 ? mm_qt_kernel<TYPE, QT_CB, 2, false>
                   : tt == 4 ? mm_qt_kernel<TYPE, QT_CB, 4, false> : mm_qt_kernel<TYPE, QT_CB, 8, false>;
}
template <int TYPE>
static mm_kernel_fn pick_qt(bool short_rows, int tt, bool fx) {
    return short_rows ? pick_qt_cb<TYPE, 32>(tt, fx) : pick_qt_cb<TYPE, 128>(tt, fx);
}

static int64_t qt_rows_per_block(int64_t nb) { return nb <= 32 ? QT_PAIRS / 32 : QT_PAIRS / 128; }

/* Blocks that stream mm_qt_kernel's row groups (docs/GPU.md, "Streaming row groups"), from
 * DS4RT_GPU_QT_STREAM: "on" -1 (the device's resident blocks), N > 0 N blocks (the tests force
 * streaming on small shapes with it); unset or 0: 0, one row group per block, the default
 * until the GPU suite has run the streamed forms on a device. */
static long qt_stream_forced(void) {
    static const long forced = [] {
        const char *e = getenv("DS4RT_GPU_QT_STREAM");
        if (e != NULL && strcmp(e, "on") == 0) return -1L;
        const long v = e != NULL && *e != '\0' ? strtol(e, NULL, 10) : 0L;
        return v > 0 ? v : 0L;
    }();
    return forced;
}

/* Thread blocks of `k` (QT_NT threads) that stream a product's row groups, 0 for one group per
 * block (qt_stream_forced, or the device's count unknown). */
static int64_t qt_resident(mm_kernel_fn k) {
    const long forced = qt_stream_forced();
    if (forced >= 0) return forced;
#if defined(DS4RT_HIP_CPU)
    (void)k;
    return 0;
#else
    int dev = 0, sms = 0, per = 0;
    if (hipGetDevice(&dev) != hipSuccess ||
        hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, dev) != hipSuccess ||
        hipOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, QT_NT, 0) != hipSuccess) {
        (void)hipGetLastError();
        return 0;
    }
    return (int64_t)sms * per;
#endif
}

/* mm_qt_kernel over n <= QT_TOK token rows, `groups` grid rows of a.rows weight rows each;
 * fx: a.act holds float rows (the fused form, n <= QT_FX_TOK). */
static void launch_qt(const ds4rt_gk_weight *w, mm_args a, int64_t n, uint32_t groups, bool fx, hipStream_t s) {
    a.nb = w->cols / block_elems(w->type);
    const bool short_rows = a.nb <= 32;
    const int64_t rows_per = qt_rows_per_block(a.nb);
    const int tt = n <= 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8;
    mm_kernel_fn k = w->type == T_Q8_0   ? pick_qt<T_Q8_0>(short_rows, tt, fx)
                     : w->type == T_Q4_0 ? pick_qt<T_Q4_0>(short_rows, tt, fx)
                                         : pick_qt<T_MXFP4>(short_rows, tt, fx);
    /* more row groups than the device holds blocks (the LM head: 32320 of 4 rows): as many
     * blocks as it holds, each streaming its row groups, the next group's weights in flight
     * while this one's terms are formed. The fused form converts a step's activations in the
     * block: it streams only rows of one step, whose converted activations stay in shared
     * memory for the block's later row groups. */
    int64_t blocks = (a.rows + rows_per - 1) / rows_per;
    if (!fx || a.nb <= (short_rows ? 32 : 128)) {
        const int64_t resident = qt_resident(k) / (int64_t)groups;
        if (resident > 0 && blocks > resident) blocks = resident;
    }
    hipLaunchKernelGGL(k, dim3((unsigned)blocks, groups), dim3(QT_NT), 0, s, a);
}

#if DS4RT_GK_INT8_MMA
static const char *qm_why = "not decided yet";

extern "C" int64_t ds4rt_gk_qm_min_n(void) {
    static const int64_t decided = [] {
        cudaFuncAttributes fa;
        if (cudaFuncGetAttributes(&fa, mm_qm_kernel<1, 1>) != cudaSuccess || fa.binaryVersion < 80) {
            (void)cudaGetLastError();
            qm_why = "off: the loaded binary has no int8 mma (built for an architecture before sm_80)";
            return (int64_t)0;
        }
        const char *env = getenv("DS4RT_GPU_QM_MIN_N");
        const int64_t n = env != NULL && env[0] != '\0' ? (int64_t)strtoll(env, NULL, 10) : (int64_t)2;
        qm_why = n > 0 ? "on" : "off: DS4RT_GPU_QM_MIN_N=0";
        return n > 0 ? n : (int64_t)0;
    }();
    return decided;
}

extern "C" const char *ds4rt_gk_qm_reason(void) {
    (void)ds4rt_gk_qm_min_n();
    return qm_why;
}

/* DS4RT_GPU_QM_MIN_ROWS=R (default 0): a product of at most QT_TOK tokens with fewer than R
 * rows keeps mm_qt_kernel (for n <= QT_FX_TOK its fused form, no conversion launch). The tensor
 * core kernel's tiles are 16 rows a thread block, so a 1024-row projection is 64 blocks on a
 * device of 132 SMs; an A/B knob until measured (docs/GPU.md, "Matrix products"). */
extern "C" int64_t ds4rt_gk_qm_min_rows(void) {
    static const int64_t r = [] {
        const long v = knob_count("DS4RT_GPU_QM_MIN_ROWS", 1L << 30);
        if (v == -1 && ds4rt_gk_qm_min_n() > 0) qm_why = "DS4RT_GPU_QM_MIN_ROWS not understood: 0 kept";
        return (int64_t)(v > 0 ? v : 0);
    }();
    return r;
}

/* Whether a product of n token rows takes mm_qm_kernel: Q8_0 on 16-byte aligned rows. */
static bool qm_takes(const ds4rt_gk_weight *w, int64_t n) {
    const int64_t m = ds4rt_gk_qm_min_n();
    return m > 0 && n >= m && w->type == T_Q8_0 && ((uintptr_t)w->d_data & 15) == 0 && (w->row_bytes & 15) == 0 &&
           (n > QT_TOK || w->rows >= ds4rt_gk_qm_min_rows());
}

template <int QM_MT>
static mm_kernel_fn pick_qm_mt(int ntl) {
    return ntl == 1 ? mm_qm_kernel<QM_MT, 1> : ntl == 2 ? mm_qm_kernel<QM_MT, 2> : mm_qm_kernel<QM_MT, 4>;
}

/* mm_qm_kernel over n token rows (tiles of 8, 16 or 32), `groups` grid layers of a.rows rows.
 * Matrices of few rows take 16 rows per block, so that more SMs share them. */
static int launch_qm(const ds4rt_gk_weight *w, mm_args a, int64_t n, uint32_t groups, hipStream_t s, const char *what) {
    a.nb = w->cols / 32;
    const int ntl = n <= 8 ? 1 : n <= 16 ? 2 : 4;
    const int mt = a.rows >= 8192 ? 2 : 1;
    const int64_t gy = (n + 8 * ntl - 1) / (8 * ntl);
    if (gy > 65535) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: %lld rows of x is too many", what, (long long)n);
    const dim3 grid((unsigned)((a.rows + 16 * mt - 1) / (16 * mt)), (unsigned)gy, groups);
    const mm_kernel_fn k = mt == 2 ? pick_qm_mt<2>(ntl) : pick_qm_mt<1>(ntl); /* a local: see launch_mm */
    hipLaunchKernelGGL(k, grid, dim3(QM_NT), 0, s, a);
    return ds4rt_gk_check(hipGetLastError(), what);
}
#else
extern "C" int64_t ds4rt_gk_qm_min_rows(void) { return 0; }
extern "C" int64_t ds4rt_gk_qm_min_n(void) { return 0; }
extern "C" const char *ds4rt_gk_qm_reason(void) { return "off: int8 mma is an NVIDIA path (AMD and HIP-CPU keep mm_qt)"; }
#endif

/* Whether a dense product of n float rows takes mm_qt_kernel's fused form: a Q8_0-activation
 * type on aligned rows, n <= QT_FX_TOK, and the blocks' repeated activation reads (each block
 * reads all n rows) within QT_FX_L2_BYTES, so the LM head and the 8192-column projections keep
 * the separate conversion. */
static bool qt_fused(const ds4rt_gk_weight *w, int64_t n, uint32_t groups) {
    if (act_kind(w->type) != A_Q8_0 || n < 1 || n > QT_FX_TOK || ((uintptr_t)w->d_data & 15) != 0 ||
        (w->row_bytes & 15) != 0)
        return false;
    const int64_t nb = w->cols / block_elems(w->type), rows_g = w->rows / groups;
    int64_t blocks = (rows_g + qt_rows_per_block(nb) - 1) / qt_rows_per_block(nb);
    if (nb <= (nb <= 32 ? 32 : 128)) { /* one step: streamed blocks convert once (launch_qt) */
        const int tt = n <= 1 ? 1 : n == 2 ? 2 : 4;
        const mm_kernel_fn k = w->type == T_Q8_0   ? pick_qt<T_Q8_0>(nb <= 32, tt, true)
                               : w->type == T_Q4_0 ? pick_qt<T_Q4_0>(nb <= 32, tt, true)
                                                   : pick_qt<T_MXFP4>(nb <= 32, tt, true);
        const int64_t resident = qt_resident(k) / (int64_t)groups;
        if (resident > 0 && blocks > resident) blocks = resident;
    }
    /* every block reads the float rows of its columns: at most QT_FX_L2_BYTES in all */
    return (double)blocks * (double)groups * (double)w->cols * 4.0 * (double)n <= (double)QT_FX_L2_BYTES;
}

/* The forms of the expert-stack products, decided once per process from the environment and
 * reported by ds4rt_gk_mm_forms() (the backend appends it to the device's description):
 *   DS4RT_GPU_QS_IQ2 = old (default) | new: mm_qs_kernel's IQ2_XXS arithmetic (QS_OLD, QS_NEW);
 *   DS4RT_GPU_QS_Q2K = 1 or new (default: mm_qs_kernel, QS_NEW) | old (mm_qs_kernel, QS_OLD) |
 *   0 (mm_q_kernel); DS4RT_GPU_QS_MINB = 3 (default) | 1 (no bound) | 4: the blocks per
 *   multiprocessor mm_qs_kernel's registers are bounded for (MINB). Every form gives the same bits
 *   (tests/test_gpu_mm.py runs each). The
 *   defaults are the measured ones: on an H100, expert shapes, IQ2_XXS QS_NEW took 1.13x QS_OLD's
 *   time at n = 1..8, and Q2_K in mm_qs_kernel half of mm_q_kernel's
 *   (docs/PERFORMANCE.md, "The expert forms measured"). A value not understood gives the
 *   default and says so. */
typedef struct {
    int iq2;    /* QS_OLD or QS_NEW */
    int q2k;    /* -1: mm_q_kernel; else the mm_qs_kernel form */
    int minb;   /* DS4RT_GPU_QS_MINB: 3 (default), 1 or 4 (MINB) */
    char text[320];
} qs_forms;

static const qs_forms *qs_decided(void) {
    static const qs_forms f = [] {
        qs_forms r;
        const char *e1 = getenv("DS4RT_GPU_QS_IQ2"), *e2 = getenv("DS4RT_GPU_QS_Q2K");
        const bool s1 = e1 != NULL && e1[0] != '\0', s2 = e2 != NULL && e2[0] != '\0';
        r.iq2 = s1 && strcmp(e1, "new") == 0 ? QS_NEW : QS_OLD;
        const char *n1 = !s1 ? "default" : strcmp(e1, "old") == 0 || strcmp(e1, "new") == 0 ? "DS4RT_GPU_QS_IQ2"
                         : "DS4RT_GPU_QS_IQ2 not understood";
        r.q2k = s2 && strcmp(e2, "0") == 0 ? -1 : s2 && strcmp(e2, "old") == 0 ? QS_OLD : QS_NEW;
        const bool bad2 = s2 && strcmp(e2, "0") != 0 && strcmp(e2, "old") != 0 && strcmp(e2, "1") != 0 &&
                          strcmp(e2, "new") != 0;
        const char *e3 = getenv("DS4RT_GPU_QS_MINB");
        const bool s3 = e3 != NULL && e3[0] != '\0';
        r.minb = s3 && strcmp(e3, "1") == 0 ? 1 : s3 && strcmp(e3, "4") == 0 ? 4 : 3;
        const bool bad3 = s3 && r.minb == 3 && strcmp(e3, "3") != 0;
        const long qs = qt_stream_forced();
        char stream[64];
        if (qs < 0) snprintf(stream, sizeof stream, "streamed by the resident blocks (DS4RT_GPU_QT_STREAM)");
        else if (qs == 0) snprintf(stream, sizeof stream, "one per block (default)");
        else snprintf(stream, sizeof stream, "streamed by %ld blocks (DS4RT_GPU_QT_STREAM)", qs);
        const long k4 = knob_count("DS4RT_GPU_FS1", 64);
        char fs1[80];
        snprintf(fs1, sizeof fs1, "mm_fs1 up to %lld token%s (%s)", (long long)fs1_max_n(), fs1_max_n() == 1 ? "" : "s",
                 k4 == -2 ? "default" : k4 == -1 ? "DS4RT_GPU_FS1 not understood" : "DS4RT_GPU_FS1");
        snprintf(r.text, sizeof r.text,
                 "experts: IQ2_XXS mm_qs %s (%s), Q2_K %s (%s), %s (%s); Q8_0 row groups %s; HC mixes %s",
                 r.iq2 == QS_NEW ? "new" : "old", n1,
                 r.q2k < 0 ? "mm_q" : r.q2k == QS_NEW ? "mm_qs new" : "mm_qs old",
                 !s2 ? "default" : bad2 ? "DS4RT_GPU_QS_Q2K not understood" : "DS4RT_GPU_QS_Q2K",
                 r.minb == 1 ? "registers unbounded" : r.minb == 3 ? "registers for 3 blocks" : "registers for 4 blocks",
                 bad3 ? "DS4RT_GPU_QS_MINB not understood" : s3 ? "DS4RT_GPU_QS_MINB" : "default",
                 stream, fs1);
        return r;
    }();
    return &f;
}

extern "C" const char *ds4rt_gk_mm_forms(void) { return qs_decided()->text; }

/* mm_qs_kernel of the decided arithmetic form for IQ2_XXS or Q2_K weights, bounded for MINB blocks */
template <int MINB>
static mm_kernel_fn qs_pick(int type, const qs_forms *f) {
    if (type == T_IQ2_XXS) return f->iq2 == QS_NEW ? mm_qs_kernel<T_IQ2_XXS, QS_NEW, MINB> : mm_qs_kernel<T_IQ2_XXS, QS_OLD, MINB>;
    return f->q2k == QS_NEW ? mm_qs_kernel<T_Q2_K, QS_NEW, MINB> : mm_qs_kernel<T_Q2_K, QS_OLD, MINB>;
}

/* Launches the product of a dense matrix (EXPERTS false: grid rows are token tiles) or an
 * expert stack (grid rows are slots). */
template <bool EXPERTS>
static int launch_mm(const ds4rt_gk_weight *w, mm_args a, int64_t n_grid_rows, hipStream_t s, const char *what) {
    const int kind = act_kind(w->type);
    const act_layout l = layout_of(kind, w->cols);
    a.stride = a.round_x ? (size_t)w->cols * sizeof(float) : l.stride; /* raw rows: contiguous */
    a.d_off = l.d_off;
    a.s_off = l.s_off;
    a.row_bytes = w->row_bytes;
    a.rows = w->rows;
    const bool aligned = ((uintptr_t)w->d_data & 15) == 0 && (w->row_bytes & 15) == 0 &&
                         (!EXPERTS || ((a.expert_stride & 15) == 0 && ((uintptr_t)a.w_b & 15) == 0));
    const unsigned gz = EXPERTS && a.w_b != NULL ? 2u : 1u; /* a pair of expert stacks */
#if DS4RT_GK_INT8_MMA
    if (!EXPERTS && qm_takes(w, n_grid_rows)) return launch_qm(w, a, n_grid_rows, 1, s, what); /* verify, prefill */
#endif
    if (kind == A_Q8_0 && !EXPERTS && aligned && n_grid_rows <= QT_TOK) { /* decode, short verify */
        launch_qt(w, a, n_grid_rows, 1, false, s);
    } else if (EXPERTS && aligned && (w->type == T_IQ2_XXS || (w->type == T_Q2_K && qs_decided()->q2k >= 0))) {
        /* split block terms (mm_qs_kernel). Q2_K unless DS4RT_GPU_QS_Q2K=0: the kernel's first,
         * 16-thread Q2_K form measured no faster than mm_q_kernel (docs/PERFORMANCE.md, "The
         * fourth kernel round"); its 4-thread forms take half the time at expert shapes ("The
         * expert forms measured") */
        a.nb = w->cols / block_elems(w->type);
        if (n_grid_rows > 65535) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: %lld slots is too many", what, (long long)n_grid_rows);
        const dim3 grid((unsigned)((w->rows + QS_R - 1) / QS_R), (unsigned)n_grid_rows, gz);
        const qs_forms *f = qs_decided();
        const mm_kernel_fn k = f->minb == 3 ? qs_pick<3>(w->type, f) : f->minb == 4 ? qs_pick<4>(w->type, f) : qs_pick<1>(w->type, f);
        hipLaunchKernelGGL(k, grid, dim3(QS_NT), 0, s, a);
    } else if (kind == A_Q8_0 || kind == A_Q8_K) {
        a.nb = w->cols / block_elems(w->type);
        const int64_t gy = EXPERTS ? n_grid_rows : (n_grid_rows + QTOK - 1) / QTOK;
        if (gy > 65535) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: %lld rows of x is too many", what, (long long)n_grid_rows);
        const dim3 grid((unsigned)((w->rows + QROWS - 1) / QROWS), (unsigned)gy, gz);
        mm_kernel_fn k = pick_q<EXPERTS>(w->type, aligned);
        hipLaunchKernelGGL(k, grid, dim3(QROWS * QLANES), 0, s, a);
    } else {
        /* vector loads need aligned rows and whole 32-element lane periods */
        const bool vec = aligned && w->cols % 32 == 0;
        /* tokens per group: the smallest power of two >= n, at most 8 (experts: 1) */
        const int64_t nn = EXPERTS ? 1 : n_grid_rows;
        const int tt = nn >= 5 ? 8 : nn >= 3 ? 4 : nn == 2 ? 2 : 1;
        const int64_t per = (int64_t)tt * FGROUPS;
        const int64_t gy = EXPERTS ? n_grid_rows : (n_grid_rows + per - 1) / per;
        if (gy > 65535) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "%s: %lld rows of x is too many", what, (long long)n_grid_rows);
        /* as many token groups as the tokens need (the groups of a block share weight loads) */
        const int64_t groups = ((nn < per ? nn : per) + tt - 1) / tt;
        if (vec && !EXPERTS && fs1_takes(w, nn)) {
            /* a few tokens, a few long rows (the HC mixes): a block per row and token, every
             * load at once (mm_fs1_kernel) */
            mmf_kernel_fn k = w->type == T_F32   ? mm_fs1_kernel<T_F32, false>
                              : w->type == T_F16 ? mm_fs1_kernel<T_F16, false>
                                                 : mm_fs1_kernel<T_BF16, false>;
            hipLaunchKernelGGL(k, dim3((unsigned)w->rows, (unsigned)nn), dim3(256u), 0, s, a, w->cols);
        } else if (vec && !EXPERTS && nn <= FS_MAX_N) { /* a few tokens: one staged row per block (mm_fs_kernel) */
            const int fs_tt = nn == 1 ? 1 : nn == 2 ? 2 : FS_TT_MAX;
            const dim3 grid((unsigned)w->rows, (unsigned)((nn + fs_tt - 1) / fs_tt));
            int fs_nt = 0;
            mmf_kernel_fn k = w->type == T_F32   ? pick_fs_t<T_F32>(fs_tt, w->cols, &fs_nt)
                              : w->type == T_F16 ? pick_fs_t<T_F16>(fs_tt, w->cols, &fs_nt)
                                                 : pick_fs_t<T_BF16>(fs_tt, w->cols, &fs_nt);
            hipLaunchKernelGGL(k, grid, dim3((unsigned)fs_nt), 0, s, a, w->cols);
        } else if (vec) { /* 16-byte weight loads, one row per thread (mm_fv_kernel) */
            const int64_t vr = VX / (w->type == T_F32 ? 8 : 4);
            const dim3 grid((unsigned)((w->rows + vr - 1) / vr), (unsigned)gy, gz);
            /* the kernel in a local: HIP-CPU's launch macro evaluates its kernel expression when the
             * launch runs, after this function has returned (w would dangle) */
            const mmf_kernel_fn k = pick_fv<EXPERTS>(w->type, tt);
            hipLaunchKernelGGL(k, grid, dim3(VX, (unsigned)groups), 0, s, a, w->cols);
        } else {
            const dim3 grid((unsigned)((w->rows + FROWS - 1) / FROWS), (unsigned)gy, gz);
            mmf_kernel_fn k = pick_f<EXPERTS>(w->type, tt, vec);
            hipLaunchKernelGGL(k, grid, dim3(FQ * FRG, (unsigned)groups), 0, s, a, w->cols);
        }
    }
    return ds4rt_gk_check(hipGetLastError(), what);
}

extern "C" int ds4rt_gk_matmul_act(const ds4rt_gk_weight *w, const void *d_act, int64_t n, float *d_y, void *stream) {
    int st = check_weight(w, "matmul");
    if (st != DS4RT_GK_OK) return st;
    if (n < 0) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul: n=%lld", (long long)n);
    if (n == 0 || w->rows == 0) return DS4RT_GK_OK;
    if (d_act == NULL || d_y == NULL || ((uintptr_t)d_act & 15) != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul: activations or y NULL, or activations not 16-byte aligned");
    mm_args a = {};
    a.w = (const uint8_t *)w->d_data;
    a.act = (const uint8_t *)d_act;
    a.y = d_y;
    a.n = n;
    return launch_mm<false>(w, a, n, (hipStream_t)stream, "matmul");
}

extern "C" int ds4rt_gk_matmul(const ds4rt_gk_weight *w, const float *d_x, int64_t n, float *d_y, void *d_scratch,
                               size_t scratch_bytes, void *stream) {
    int st = check_weight(w, "matmul");
    if (st != DS4RT_GK_OK) return st;
    if (n == 0 || w->rows == 0) return DS4RT_GK_OK;
    /* the fused form reads x with 16-byte loads: an unaligned view takes the conversion */
    bool fused = n > 0 && d_x != NULL && d_y != NULL && ((uintptr_t)d_x & 15) == 0 && qt_fused(w, n, 1);
#if DS4RT_GK_INT8_MMA
    fused = fused && !qm_takes(w, n); /* the tensor-core product takes converted activations */
#endif
    if (fused) {
        mm_args a = {};
        a.w = (const uint8_t *)w->d_data;
        a.act = (const uint8_t *)d_x;
        a.y = d_y;
        a.n = n;
        a.stride = (size_t)w->cols * sizeof(float);
        a.row_bytes = w->row_bytes;
        a.rows = w->rows;
        launch_qt(w, a, n, 1, true, (hipStream_t)stream);
        return ds4rt_gk_check(hipGetLastError(), "matmul");
    }
    static const bool raw_float = [] { /* DS4RT_GPU_RAW_FLOAT=1 (off until the GPU suite has run it) */
        const char *e = getenv("DS4RT_GPU_RAW_FLOAT");
        return e != NULL && strcmp(e, "1") == 0;
    }();
    if (raw_float && d_x != NULL && d_y != NULL && ((uintptr_t)d_x & 15) == 0 && fs_takes(w, n)) {
        /* float weights, a few tokens: mm_fs_kernel rounds x as it loads it, no conversion launch */
        mm_args a = {};
        a.w = (const uint8_t *)w->d_data;
        a.act = (const uint8_t *)d_x;
        a.y = d_y;
        a.n = n;
        a.round_x = 1;
        return launch_mm<false>(w, a, n, (hipStream_t)stream, "matmul");
    }
    st = ds4rt_gk_act_convert(w->type, d_x, n, w->cols, d_scratch, scratch_bytes, stream);
    if (st != DS4RT_GK_OK) return st;
    return ds4rt_gk_matmul_act(w, d_scratch, n, d_y, stream);
}

/* DS4RT_GPU_HC_RMS_IN_MIX=1: ds4rt_gk_hc_mix takes the one-launch form for up to fs1_max_n()
 * tokens (off until measured faster on a device; docs/GPU.md, "Merged launches") */
extern "C" int ds4rt_gk_matmul_rms_rows_supported(const ds4rt_gk_weight *w, int64_t n) {
    static const bool on = [] {
        const char *e = getenv("DS4RT_GPU_HC_RMS_IN_MIX");
        return e != NULL && strcmp(e, "1") == 0;
    }();
    return on && w != NULL && fs1_takes(w, n);
}

extern "C" int ds4rt_gk_matmul_rms_rows(const ds4rt_gk_weight *w, const float *d_x, int64_t n, float eps, float *d_y,
                                        void *stream) {
    int st = check_weight(w, "matmul_rms_rows");
    if (st != DS4RT_GK_OK) return st;
    if (n == 0 || w->rows == 0) return DS4RT_GK_OK;
    if (!fs1_takes(w, n))
        return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED,
                             "matmul_rms_rows: %s %lldx%lld for %lld tokens is not a one-step-per-4096 float product",
                             type_name(w->type), (long long)w->rows, (long long)w->cols, (long long)n);
    if (d_x == NULL || d_y == NULL || ((uintptr_t)d_x & 15) != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul_rms_rows: x or y NULL, or x not 16-byte aligned");
    mm_args a = {};
    a.w = (const uint8_t *)w->d_data;
    a.act = (const uint8_t *)d_x;
    a.y = d_y;
    a.n = n;
    a.rows = w->rows;
    a.row_bytes = w->row_bytes;
    a.stride = (size_t)w->cols * sizeof(float);
    a.eps = eps;
    mmf_kernel_fn k = w->type == T_F32   ? mm_fs1_kernel<T_F32, true>
                      : w->type == T_F16 ? mm_fs1_kernel<T_F16, true>
                                         : mm_fs1_kernel<T_BF16, true>;
    hipLaunchKernelGGL(k, dim3((unsigned)w->rows, (unsigned)n), dim3(256u), 0, (hipStream_t)stream, a, w->cols);
    return ds4rt_gk_check(hipGetLastError(), "matmul_rms_rows");
}

extern "C" int ds4rt_gk_matmul_grouped_supported(const ds4rt_gk_weight *w, uint32_t n_groups, int64_t n) {
    return w != NULL && act_kind(w->type) == A_Q8_0 && n >= 1 && n <= QT_TOK && n_groups >= 1 &&
           n_groups <= 65535 && w->rows % n_groups == 0 && ((uintptr_t)w->d_data & 15) == 0 &&
           (w->row_bytes & 15) == 0;
}

extern "C" int ds4rt_gk_matmul_grouped_fused(const ds4rt_gk_weight *w, uint32_t n_groups, const float *d_x, int64_t n,
                                             float *d_y, void *stream) {
    int st = check_weight(w, "matmul_grouped_fused");
    if (st != DS4RT_GK_OK) return st;
    if (n == 0 || w->rows == 0) return DS4RT_GK_OK;
    bool ok = ds4rt_gk_matmul_grouped_supported(w, n_groups, n) && qt_fused(w, n, n_groups);
#if DS4RT_GK_INT8_MMA
    ok = ok && !qm_takes(w, n);
#endif
    if (!ok)
        return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "matmul_grouped_fused: %s %lldx%lld in %u groups at n=%lld",
                             type_name(w->type), (long long)w->rows, (long long)w->cols, n_groups, (long long)n);
    if (d_x == NULL || d_y == NULL || ((uintptr_t)d_x & 15) != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul_grouped_fused: x or y NULL, or x not 16-byte aligned");
    mm_args a = {};
    a.w = (const uint8_t *)w->d_data;
    a.act = (const uint8_t *)d_x;
    a.y = d_y;
    a.n = n;
    a.stride = (size_t)w->cols * n_groups * sizeof(float);
    a.row_bytes = w->row_bytes;
    a.rows = w->rows / n_groups;
    a.w_gstride = (uint64_t)a.rows * w->row_bytes;
    a.b_goff = w->cols / 32;
    a.y_stride = w->rows;
    launch_qt(w, a, n, n_groups, true, (hipStream_t)stream);
    return ds4rt_gk_check(hipGetLastError(), "matmul_grouped_fused");
}

extern "C" int ds4rt_gk_matmul_grouped_fused_supported(const ds4rt_gk_weight *w, uint32_t n_groups, int64_t n) {
    bool ok = ds4rt_gk_matmul_grouped_supported(w, n_groups, n) && qt_fused(w, n, n_groups);
#if DS4RT_GK_INT8_MMA
    ok = ok && !qm_takes(w, n);
#endif
    return ok;
}

extern "C" int ds4rt_gk_matmul_grouped_act(const ds4rt_gk_weight *w, uint32_t n_groups, const void *d_act, int64_t n,
                                           float *d_y, void *stream) {
    int st = check_weight(w, "matmul_grouped");
    if (st != DS4RT_GK_OK) return st;
    if (n == 0 || w->rows == 0) return DS4RT_GK_OK;
    if (!ds4rt_gk_matmul_grouped_supported(w, n_groups, n))
        return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED,
                             "matmul_grouped: %s %lldx%lld in %u groups at n=%lld (needs a Q8_0-activation type, "
                             "16-byte aligned rows, groups dividing the rows, 1 <= n <= %d)",
                             type_name(w->type), (long long)w->rows, (long long)w->cols, n_groups, (long long)n, QT_TOK);
    if (d_act == NULL || d_y == NULL || ((uintptr_t)d_act & 15) != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul_grouped: activations or y NULL, or activations not 16-byte aligned");
    const act_layout l = layout_of(A_Q8_0, w->cols * (int64_t)n_groups);
    mm_args a = {};
    a.w = (const uint8_t *)w->d_data;
    a.act = (const uint8_t *)d_act;
    a.y = d_y;
    a.n = n;
    a.stride = l.stride;
    a.d_off = l.d_off;
    a.s_off = l.s_off;
    a.row_bytes = w->row_bytes;
    a.rows = w->rows / n_groups;
    a.w_gstride = (uint64_t)a.rows * w->row_bytes;
    a.b_goff = w->cols / 32;
    a.y_stride = w->rows;
#if DS4RT_GK_INT8_MMA
    if (qm_takes(w, n)) return launch_qm(w, a, n, n_groups, (hipStream_t)stream, "matmul_grouped");
#endif
    launch_qt(w, a, n, n_groups, false, (hipStream_t)stream);
    return ds4rt_gk_check(hipGetLastError(), "matmul_grouped");
}

/* The one launch of ds4rt_gk_matmul_experts_act and of a pair (w_b, y_b non-NULL). */
static int launch_experts(const ds4rt_gk_weight *w, uint64_t expert_stride, uint32_t n_experts, const int32_t *d_ids,
                          int64_t n_slots, uint32_t x_div, const void *d_act, float *d_y, const void *w_b, float *y_b,
                          void *stream) {
    int st = check_weight(w, "matmul_experts");
    if (st != DS4RT_GK_OK) return st;
    if (n_slots < 0 || x_div == 0 || n_experts == 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul_experts: n_slots=%lld x_div=%u n_experts=%u",
                             (long long)n_slots, x_div, n_experts);
    if (n_slots == 0 || w->rows == 0) return DS4RT_GK_OK;
    if (d_ids == NULL || d_act == NULL || d_y == NULL || ((uintptr_t)d_act & 15) != 0)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul_experts: ids, activations or y NULL, or activations not 16-byte aligned");
    if (expert_stride < w->row_bytes * (uint64_t)w->rows)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul_experts: expert stride %llu < the %llu bytes of a matrix",
                             (unsigned long long)expert_stride, (unsigned long long)(w->row_bytes * (uint64_t)w->rows));
    mm_args a = {};
    a.w = (const uint8_t *)w->d_data;
    a.act = (const uint8_t *)d_act;
    a.y = d_y;
    a.n = n_slots;
    a.ids = d_ids;
    a.expert_stride = expert_stride;
    a.n_experts = n_experts;
    a.x_div = x_div;
    a.w_b = (const uint8_t *)w_b;
    a.y_b = y_b;
    return launch_mm<true>(w, a, n_slots, (hipStream_t)stream, "matmul_experts");
}

extern "C" int ds4rt_gk_matmul_experts_act(const ds4rt_gk_weight *w, uint64_t expert_stride, uint32_t n_experts,
                                           const int32_t *d_ids, int64_t n_slots, uint32_t x_div, const void *d_act,
                                           float *d_y, void *stream) {
    return launch_experts(w, expert_stride, n_experts, d_ids, n_slots, x_div, d_act, d_y, NULL, NULL, stream);
}

extern "C" int ds4rt_gk_matmul_experts2_act(const ds4rt_gk_weight *w, const ds4rt_gk_weight *w2,
                                            uint64_t expert_stride, uint32_t n_experts, const int32_t *d_ids,
                                            int64_t n_slots, uint32_t x_div, const void *d_act, float *d_y,
                                            float *d_y2, void *stream) {
    int st = check_weight(w2, "matmul_experts2");
    if (st != DS4RT_GK_OK) return st;
    if (w == NULL || w2->type != w->type || w2->rows != w->rows || w2->cols != w->cols ||
        w2->row_bytes != w->row_bytes || d_y2 == NULL)
        return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "matmul_experts2: the two stacks differ in type or shape, or y2 is NULL");
    return launch_experts(w, expert_stride, n_experts, d_ids, n_slots, x_div, d_act, d_y, w2->d_data, d_y2, stream);
}

typedef void (*rows_kernel_fn)(const uint8_t *, uint64_t, int64_t, int64_t, const int32_t *, int64_t, int64_t, float *);

extern "C" int ds4rt_gk_get_rows(const ds4rt_gk_weight *w, const int32_t *d_ids, int64_t n, uint32_t copies,
                                 float *d_out, void *stream) {
    int st = check_weight(w, "get_rows");
    if (st != DS4RT_GK_OK) return st;
    if (n < 0 || copies == 0) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "get_rows: n=%lld copies=%u", (long long)n, copies);
    if (n == 0) return DS4RT_GK_OK;
    if (d_ids == NULL || d_out == NULL) return ds4rt_gk_fail(DS4RT_GK_ERR_ARGUMENT, "get_rows: ids or out is NULL");
    rows_kernel_fn k = NULL;
    switch (w->type) {
    case T_F32: k = get_rows_kernel<T_F32>; break;
    case T_F16: k = get_rows_kernel<T_F16>; break;
    case T_BF16: k = get_rows_kernel<T_BF16>; break;
    case T_Q8_0: k = get_rows_kernel<T_Q8_0>; break;
    case T_Q4_0: k = get_rows_kernel<T_Q4_0>; break;
    case T_MXFP4: k = get_rows_kernel<T_MXFP4>; break;
    case T_Q2_K: k = get_rows_kernel<T_Q2_K>; break;
    case T_Q4_K: k = get_rows_kernel<T_Q4_K>; break;
    case T_Q5_K: k = get_rows_kernel<T_Q5_K>; break;
    case T_Q6_K: k = get_rows_kernel<T_Q6_K>; break;
    default: k = get_rows_kernel<T_IQ2_XXS>; break;
    }
    const int64_t items = n * (w->cols / block_elems(w->type));
    hipLaunchKernelGGL(k, dim3((unsigned)((items + 127) / 128)), dim3(128), 0, (hipStream_t)stream,
                       (const uint8_t *)w->d_data, w->row_bytes, w->rows, w->cols, d_ids, n, (int64_t)copies, d_out);
    return DS4RT_GK_LAUNCHED("get_rows");
}
