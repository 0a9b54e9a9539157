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
