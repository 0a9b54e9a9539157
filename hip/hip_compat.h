/*
 * hip_compat.h - lets the HIP-syntax kernels under hip/ build with nvcc, hipcc and HIP-CPU.
 *
 * Three platforms, one source (docs/GPU.md):
 *   - AMD (hipcc defines __HIP_PLATFORM_AMD__ / __HIPCC__): the HIP runtime itself.
 *   - HIP-CPU (DS4RT_HIP_CPU, a developer aid: kernels run on CPU threads): HIP-CPU's header.
 *   - otherwise NVIDIA: the CUDA runtime, with each HIP name our kernels and launchers use
 *     mapped onto its CUDA equivalent. Extend the map only when a kernel needs a new name.
 *
 * DS4RT_WARP is the lane count of a warp/wavefront as a compile-time constant: 32 on NVIDIA,
 * the wavefront size the AMD target was compiled for (wave32 on RDNA such as gfx1151, wave64 on
 * CDNA), 64 on HIP-CPU. Kernels use it instead of a literal, and their shuffles pass it as the
 * width, so one source serves every platform.
 */
#ifndef DS4RT_HIP_COMPAT_H
#define DS4RT_HIP_COMPAT_H

#if defined(DS4RT_HIP_CPU)
#  include <hip/hip_runtime.h>
#  include <hip/hip_fp16.h>
#  include "hipcpu_warp.h" /* shuffles that meet only their own warp, as on a GPU */
#  define DS4RT_WARP 64
#  define DS4RT_HAVE_GRAPHS 0
   /* HIP-CPU defines __forceinline__ as nothing without NDEBUG, which turns header helpers
    * into multiple definitions in debug builds (the test programs' debugoptimized build) */
#  if !defined(NDEBUG)
#    undef __forceinline__
#    define __forceinline__ inline
#  endif
   /* with GCC, HIP-CPU marks __device__ and __global__ functions __attribute__((simd)), which warns (an error
    * under -Werror) for struct arguments; it is only a vectorisation hint there. (GCC does not
    * know #pragma unroll either: meson.build passes -Wno-unknown-pragmas for HIP-CPU.) */
#  if defined(__GNUC__) && !defined(__clang__)
#    undef __device__
#    define __device__
#    undef __global__
#    define __global__ __attribute__((flatten))
#  endif
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#  include <hip/hip_runtime.h>
#  include <hip/hip_fp16.h>
   /* The device pass knows the target's wavefront size. The host pass does not: clang 17
    * defines __AMDGCN_WAVEFRONT_SIZE as 64 there even for gfx1151 (wave32), which made host
    * launch geometry (4 * DS4RT_WARP threads) twice what the device code sized its shared
    * arrays for. meson.build passes the wavefront size of the hip_arch list as
    * DS4RT_HIP_HOST_WARP, and the device pass checks that it agrees (docs/GPU.md). */
#  if defined(__HIP_DEVICE_COMPILE__)
#    define DS4RT_WARP __AMDGCN_WAVEFRONT_SIZE
#    if defined(DS4RT_HIP_HOST_WARP) && DS4RT_HIP_HOST_WARP != __AMDGCN_WAVEFRONT_SIZE
#      error "DS4RT_HIP_HOST_WARP differs from this target's wavefront size"
#    endif
#  elif defined(DS4RT_HIP_HOST_WARP)
#    define DS4RT_WARP DS4RT_HIP_HOST_WARP
#  else
#    error "hipcc's host pass needs -DDS4RT_HIP_HOST_WARP=32 or 64 (the targets' wavefront size)"
#  endif
#  define DS4RT_HAVE_GRAPHS 1
#else
#  include <cuda_runtime.h>
#  include <cuda_fp16.h>

#  define DS4RT_WARP 32
#  define DS4RT_HAVE_GRAPHS 1

#  define hipError_t cudaError_t
#  define hipSuccess cudaSuccess
#  define hipErrorOutOfMemory cudaErrorMemoryAllocation
#  define hipStream_t cudaStream_t
#  define hipEvent_t cudaEvent_t
#  define hipDeviceProp_t cudaDeviceProp
#  define hipGetDeviceCount cudaGetDeviceCount
#  define hipGetDeviceProperties cudaGetDeviceProperties
#  define hipSetDevice cudaSetDevice
#  define hipGetDevice cudaGetDevice
#  define hipMalloc cudaMalloc
#  define hipFree cudaFree
#  define hipMemGetInfo cudaMemGetInfo
#  define hipMemcpy cudaMemcpy
#  define hipMemcpyAsync cudaMemcpyAsync
#  define hipMemset cudaMemset
#  define hipMemsetAsync cudaMemsetAsync
#  define hipMemcpy2DAsync cudaMemcpy2DAsync
#  define hipHostRegister cudaHostRegister
#  define hipHostUnregister cudaHostUnregister
#  define hipHostGetDevicePointer cudaHostGetDevicePointer
#  define hipHostRegisterMapped cudaHostRegisterMapped
#  define hipHostRegisterReadOnly cudaHostRegisterReadOnly
#  define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#  define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#  define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#  define hipStreamCreate cudaStreamCreate
#  define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#  define hipStreamNonBlocking cudaStreamNonBlocking
#  define hipStreamDestroy cudaStreamDestroy
#  define hipStreamSynchronize cudaStreamSynchronize
#  define hipEventCreate cudaEventCreate
#  define hipEventDestroy cudaEventDestroy
#  define hipEventRecord cudaEventRecord
#  define hipStreamWaitEvent cudaStreamWaitEvent
#  define hipEventSynchronize cudaEventSynchronize
#  define hipEventElapsedTime cudaEventElapsedTime
#  define hipDeviceSynchronize cudaDeviceSynchronize
#  define hipGetLastError cudaGetLastError
#  define hipPeekAtLastError cudaPeekAtLastError
#  define hipGetErrorString cudaGetErrorString
#  define hipRuntimeGetVersion cudaRuntimeGetVersion
#  define hipDeviceAttributeIntegrated cudaDevAttrIntegrated
#  define hipDeviceGetAttribute cudaDeviceGetAttribute
#  define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#  define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#  define hipGraph_t cudaGraph_t
#  define hipGraphExec_t cudaGraphExec_t
#  define hipStreamBeginCapture cudaStreamBeginCapture
#  define hipStreamEndCapture cudaStreamEndCapture
#  define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#  define hipGraphInstantiate(exec, graph, flags) cudaGraphInstantiate(exec, graph, flags)
   /* the portable spelling: AMD's hipGraphInstantiate takes 5 arguments (error node, log
    * buffer), CUDA's 3; hipGraphInstantiateWithFlags(exec, graph, flags) is the same on both */
#  define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#  define hipGraphLaunch cudaGraphLaunch
#  define hipGraphExecDestroy cudaGraphExecDestroy
#  define hipGraphDestroy cudaGraphDestroy
   /* Every launch goes through ds4rt_nv_launch, so that on Hopper and later each kernel may be
    * launched with programmatic stream serialization (PDL): it is scheduled while the kernel
    * before it drains and waits on the device, in GK_PDL_ENTRY, until that one has finished
    * and its writes are visible (docs/GPU.md, "Programmatic dependent launch"). */
extern int ds4rt_gk_pdl_on; /* runtime.hip: set once per process by ds4rt_gk_pdl_configure */
extern thread_local int ds4rt_gk_pdl_now; /* runtime.hip: the current pass's choice (ds4rt_gk_pdl_pass) */
template <typename... KArgs, typename... Args>
static inline void ds4rt_nv_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t shmem,
                                   cudaStream_t stream, Args &&...args) {
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = shmem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = ds4rt_gk_pdl_on && ds4rt_gk_pdl_now ? 1 : 0;
    (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...); /* error: hipGetLastError */
}
#  define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
       ds4rt_nv_launch(kernel, dim3(grid), dim3(block), (size_t)(shmem), (stream), __VA_ARGS__)
#  define __shfl_xor(var, mask, width) __shfl_xor_sync(0xffffffffu, (var), (mask), (width))
#  define __shfl(var, lane, width) __shfl_sync(0xffffffffu, (var), (lane), (width))
#  define __shfl_down(var, delta, width) __shfl_down_sync(0xffffffffu, (var), (delta), (width))
#endif

#endif /* DS4RT_HIP_COMPAT_H */
