/*
 * hip_compat.h - lets the HIP-syntax kernels under hip/ build with nvcc.
 *
 * On AMD (hipcc defines __HIP_PLATFORM_AMD__ / __HIPCC__) this just includes the HIP runtime.
 * Otherwise it includes the CUDA runtime and maps each HIP name that our kernels and
 * launchers use onto its CUDA equivalent. Extend it only when a kernel needs a new name.
 */
#ifndef DS4RT_HIP_COMPAT_H
#define DS4RT_HIP_COMPAT_H

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#  include <hip/hip_runtime.h>
#  include <hip/hip_fp16.h>
#else
#  include <cuda_runtime.h>
#  include <cuda_fp16.h>

#  define hipError_t cudaError_t
#  define hipSuccess cudaSuccess
#  define hipStream_t cudaStream_t
#  define hipDeviceProp_t cudaDeviceProp
#  define hipGetDeviceCount cudaGetDeviceCount
#  define hipGetDeviceProperties cudaGetDeviceProperties
#  define hipMalloc cudaMalloc
#  define hipFree cudaFree
#  define hipMemcpy cudaMemcpy
#  define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#  define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#  define hipDeviceSynchronize cudaDeviceSynchronize
#  define hipGetLastError cudaGetLastError
#  define hipGetErrorString cudaGetErrorString
#  define hipRuntimeGetVersion cudaRuntimeGetVersion
#  define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
       kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#endif

#endif /* DS4RT_HIP_COMPAT_H */
