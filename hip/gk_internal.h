/*
 * gk_internal.h - what the hip/ sources share and the C core never sees: the portability
 * header, error reporting into ds4rt_gk_last_error(), and small device helpers.
 */
#ifndef DS4RT_GK_INTERNAL_H
#define DS4RT_GK_INTERNAL_H

#include <math.h>
#include <stdint.h>

#include "gk.h"
#include "hip_compat.h"

/* Formats the thread's last launcher error and returns `status`. */
int ds4rt_gk_fail(int status, const char *fmt, ...);
/* DS4RT_GK_OK for hipSuccess, else records "what: <runtime message>" and returns the status. */
int ds4rt_gk_check(hipError_t e, const char *what);

/* After hipLaunchKernelGGL: turns a launch error into a status naming the kernel. */
#define DS4RT_GK_LAUNCHED(name) ds4rt_gk_check(hipGetLastError(), "launch " name)

/* The first statement of every kernel. Under programmatic dependent launch (NVIDIA sm_90+,
 * hip_compat.h) a kernel can start before the one ahead of it in the stream has finished:
 * `griddepcontrol.wait` holds it until that kernel has completed and flushed its writes (and,
 * since that kernel waited the same way, everything before it), so nothing is read or written
 * before the wait. `launch_dependents` then lets the next kernel be scheduled as soon as every
 * block of this one has started, so its launch latency hides behind this kernel's tail. Both
 * are no-ops for a kernel launched without the attribute, and absent on AMD and HIP-CPU. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#  define GK_PDL_ENTRY()                                          \
      do {                                                        \
          asm volatile("griddepcontrol.wait;" ::: "memory");      \
          asm volatile("griddepcontrol.launch_dependents;" :::);  \
      } while (0)
#else
#  define GK_PDL_ENTRY() \
      do {               \
      } while (0)
#endif

/* The matrix products issue their first weight loads before the wait, so that a product
 * scheduled early fetches its weights while the kernel ahead of it drains (a decode is a chain
 * of products of a few MB each, bound by that latency). Safe because no kernel writes weights:
 * they are uploaded, and the Q8->F16 cache expanded, synchronously before any pass. Nothing
 * else (activations, state, outputs) may be read or written before it, with one exception:
 * the expert products read their expert id first, to know which weights to fetch. The router
 * kernel that writes the ids is never the kernel just ahead of an expert product (an activation
 * conversion always is, src/backend/gpu/gpu_moe.c), and a kernel releases its successor only
 * after its own wait has returned; so when an expert product starts, the router has completed
 * and its writes are visible. */
#define GK_PDL_ENTRY_AFTER_WEIGHTS() GK_PDL_ENTRY()

/* IEEE half bits -> float, exactly, on every platform. */
__device__ __forceinline__ float ds4rt_gk_h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* bf16 bits -> float (exact: bf16 is the top half of an f32). */
__device__ __forceinline__ float ds4rt_gk_bf2f(uint16_t b) {
    union {
        uint32_t u;
        float f;
    } v;
    v.u = (uint32_t)b << 16;
    return v.f;
}

/* Sum over the lanes of a warp (DS4RT_WARP lanes, all active); every lane gets the result.
 * The butterfly order is fixed, so the result does not depend on anything but the inputs. */
__device__ __forceinline__ float ds4rt_gk_warp_sum(float v) {
    for (int o = DS4RT_WARP / 2; o > 0; o >>= 1) v += __shfl_xor(v, o, DS4RT_WARP);
    return v;
}

__device__ __forceinline__ float ds4rt_gk_warp_max(float v) {
    for (int o = DS4RT_WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor(v, o, DS4RT_WARP));
    return v;
}

/* Sum of v over the NT threads of the block (NT a power of two); every thread gets it. */
template <int NT, typename V> __device__ __forceinline__ V gk_block_sum(V v, V *sh) {
    const int tid = (int)threadIdx.x;
    sh[tid] = v;
    __syncthreads();
    for (int s = NT / 2; s > 0; s >>= 1) {
        if (tid < s) sh[tid] = sh[tid] + sh[tid + s];
        __syncthreads();
    }
    V r = sh[0];
    __syncthreads();
    return r;
}

/* The RMS scale of the hyper-connection mix, (float)(1 / sqrt(mean(x^2) + eps)) over x[0, width),
 * with its float64 sum of squares in one fixed partition: GK_RMS_PARTS partial sums, partial p
 * of the elements p, p + GK_RMS_PARTS, ... in increasing order (each square exact, added by one
 * fma), then the tree p += p + s for s = GK_RMS_PARTS / 2, ..., 1. A block of NT threads (NT
 * dividing GK_RMS_PARTS) holds GK_RMS_PARTS / NT partials a thread and forms the tree's levels
 * above NT in the same order, so every block size gives the same bits: the HC RMS kernel
 * (ops.hip, NT = GK_RMS_PARTS) and the one-token mix that computes it itself (mm.hip,
 * mm_fs1_kernel, NT = 256). PF: loads in flight per partial before they are added. sh: NT
 * doubles of shared memory. Every thread gets the result. */
#define GK_RMS_PARTS 1024
#if defined(__CUDACC__) || defined(__clang__)
#define GK_IUNROLL _Pragma("unroll")
#else
#define GK_IUNROLL /* GCC (HIP-CPU) does without */
#endif
template <int NT, int PF> __device__ __forceinline__ float gk_rms_inv(const float *x, int64_t width, float eps, double *sh) {
    constexpr int V = GK_RMS_PARTS / NT;
    static_assert(V * NT == GK_RMS_PARTS && (V & (V - 1)) == 0, "NT divides the partition");
    const int tid = (int)threadIdx.x;
    double p[V];
    for (int v = 0; v < V; v++) p[v] = 0.0;
    float val[V][PF];
    for (int64_t i0 = 0; i0 < width; i0 += (int64_t)GK_RMS_PARTS * PF) {
        GK_IUNROLL for (int k = 0; k < PF; k++) {
            GK_IUNROLL for (int v = 0; v < V; v++) {
                const int64_t i = i0 + (int64_t)k * GK_RMS_PARTS + v * NT + tid;
                val[v][k] = i < width ? x[i] : 0.0f;
            }
        }
        GK_IUNROLL for (int k = 0; k < PF; k++) {
            GK_IUNROLL for (int v = 0; v < V; v++) {
                if (i0 + (int64_t)k * GK_RMS_PARTS + v * NT + tid < width)
                    p[v] = fma((double)val[v][k], (double)val[v][k], p[v]);
            }
        }
    }
    for (int h = V / 2; h > 0; h >>= 1) /* the tree's levels above NT */
        for (int v = 0; v < h; v++) p[v] = p[v] + p[v + h];
    const double ss = gk_block_sum<NT>(p[0], sh);
    return (float)(1.0 / sqrt(ss / (double)width + (double)eps));
}

/* e^x in float as the CPU's expf gives it: HIP-CPU calls the same libm; a device rounds its
 * float64 exp to float (see ops.h, ds4rt_gk_swiglu). */
__device__ __forceinline__ float gk_expf(float x) {
#if defined(DS4RT_HIP_CPU)
    return expf(x);
#else
    return (float)exp((double)x);
#endif
}

/* One element of the SwiGLU with clamp (ds4rt_gk_swiglu, ops.h): silu(min(g, c)) *
 * clamp(u, -c, c) * w, in the CPU's order. Shared by the SwiGLU kernel and the conversions that
 * compute it on the fly (ds4rt_gk_swiglu_act, mm.h), so both give the same bits. */
__device__ __forceinline__ float gk_swiglu1(float gv, float uv, float c, float w) {
    const float gi = gv < c ? gv : c;
    const float ui = uv < -c ? -c : (uv > c ? c : uv);
    const float silu = gi / (1.0f + gk_expf(-gi));
    return silu * ui * w;
}

#endif /* DS4RT_GK_INTERNAL_H */
