/*
 * q8_expand.hip - Q8_0 -> F16 weight expansion on the GPU (the kernel behind the Q8->F16
 * expansion cache), plus the device query the runtime reports. HIP syntax; nvcc builds it
 * through hip_compat.h.
 *
 * A Q8_0 block is 34 bytes: an f16 scale d, then 32 int8 quants; x = d * q. Each output is
 * rounded to f16 with round-to-nearest-even, as the CPU reference does.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hip_compat.h"

#define Q8_0_BLOCK 32
#define Q8_0_BYTES 34

__global__ void q8_0_to_f16_kernel(const uint8_t *__restrict__ blocks, size_t n_blocks,
                                   __half *__restrict__ out) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t b = i / Q8_0_BLOCK;
    if (b >= n_blocks) return;
    const uint8_t *blk = blocks + b * Q8_0_BYTES;
    float d = __half2float(__ushort_as_half((unsigned short)(blk[0] | (blk[1] << 8))));
    int8_t q = (int8_t)blk[2 + (i % Q8_0_BLOCK)];
    out[i] = __float2half_rn(d * (float)q);
}

static int fail(hipError_t e, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "%s: %s", what, hipGetErrorString(e));
    return -1;
}

extern "C" int ds4rt_hip_device_count(int *count, char *err, size_t errlen) {
    hipError_t e = hipGetDeviceCount(count);
    if (e != hipSuccess) {
        *count = 0;
        return fail(e, "device count", err, errlen);
    }
    return 0;
}

extern "C" int ds4rt_hip_device_name(int device, char *buf, size_t len, char *err, size_t errlen) {
    hipDeviceProp_t p;
    hipError_t e = hipGetDeviceProperties(&p, device);
    if (e != hipSuccess) return fail(e, "device properties", err, errlen);
    snprintf(buf, len, "%s (cc %d.%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor,
             p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return 0;
}

extern "C" int ds4rt_hip_q8_0_to_f16(const void *blocks, size_t n_blocks, uint16_t *out, char *err,
                                     size_t errlen) {
    uint8_t *d_in = NULL;
    __half *d_out = NULL;
    size_t n = n_blocks * Q8_0_BLOCK;
    hipError_t e;
    int rc = -1;
    if (n_blocks == 0) return 0;
    if ((e = hipMalloc((void **)&d_in, n_blocks * Q8_0_BYTES)) != hipSuccess) {
        fail(e, "hipMalloc(q8 blocks)", err, errlen);
        goto done;
    }
    if ((e = hipMalloc((void **)&d_out, n * sizeof(__half))) != hipSuccess) {
        fail(e, "hipMalloc(f16 out)", err, errlen);
        goto done;
    }
    if ((e = hipMemcpy(d_in, blocks, n_blocks * Q8_0_BYTES, hipMemcpyHostToDevice)) != hipSuccess) {
        fail(e, "copy to device", err, errlen);
        goto done;
    }
    {
        const unsigned threads = 256;
        size_t grid = (n + threads - 1) / threads;
        hipLaunchKernelGGL(q8_0_to_f16_kernel, dim3((unsigned)grid), dim3(threads), 0, 0, d_in,
                           n_blocks, d_out);
    }
    if ((e = hipGetLastError()) != hipSuccess) {
        fail(e, "launch q8_0_to_f16", err, errlen);
        goto done;
    }
    if ((e = hipMemcpy(out, d_out, n * sizeof(__half), hipMemcpyDeviceToHost)) != hipSuccess) {
        fail(e, "copy to host", err, errlen);
        goto done;
    }
    rc = 0;
done:
    if (d_in) hipFree(d_in);
    if (d_out) hipFree(d_out);
    return rc;
}
