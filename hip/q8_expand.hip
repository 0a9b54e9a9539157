/*
 * q8_expand.hip - Q8_0 -> F16 weight expansion on the GPU (the kernel behind the Q8->F16
 * expansion cache). A Q8_0 block is 34 bytes: an f16 scale d, then 32 int8 quants; x = d * q.
 * Each output is rounded to f16 with round-to-nearest-even, as the CPU reference does.
 */
#include "gk_internal.h"
#include "q8_expand.h"

#define Q8_0_BLOCK 32
#define Q8_0_BYTES 34

__global__ void q8_0_to_f16_kernel(const uint8_t *__restrict__ blocks, size_t n_blocks,
                                   __half *__restrict__ out) {
    GK_PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t b = i / Q8_0_BLOCK;
    if (b >= n_blocks) return;
    const uint8_t *blk = blocks + b * Q8_0_BYTES;
    float d = ds4rt_gk_h2f((uint16_t)(blk[0] | (blk[1] << 8)));
    int8_t q = (int8_t)blk[2 + (i % Q8_0_BLOCK)];
    out[i] = __float2half_rn(d * (float)q);
}

extern "C" int ds4rt_gk_q8_0_to_f16(const void *d_blocks, size_t n_blocks, uint16_t *d_out, void *stream) {
    if (n_blocks == 0) return DS4RT_GK_OK;
    const unsigned threads = 256;
    size_t n = n_blocks * Q8_0_BLOCK;
    size_t grid = (n + threads - 1) / threads;
    hipLaunchKernelGGL(q8_0_to_f16_kernel, dim3((unsigned)grid), dim3(threads), 0, (hipStream_t)stream,
                       (const uint8_t *)d_blocks, n_blocks, (__half *)d_out);
    return DS4RT_GK_LAUNCHED("q8_0_to_f16");
}
