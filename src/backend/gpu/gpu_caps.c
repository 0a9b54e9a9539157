/*
 * gpu_caps.c - what the kernels compiled into this build cover: the ops that have launchers,
 * the weight types of the matmul and row-gather kernels, and the kernel scratch the ops need.
 * meson.build defines DS4RT_GPU_HAVE_<FAMILY> for each kernel family in the build
 * (docs/GPU.md, "The GPU backend").
 */
#include "gpu_ops.h"

bool gpu_op_present(ds4rt_op op) {
    switch (op) {
#ifdef DS4RT_GPU_HAVE_ATTN
    case DS4RT_OP_RMS_NORM:
    case DS4RT_OP_ROPE:
    case DS4RT_OP_NORM_ROPE:
    case DS4RT_OP_FP8_ROUND:
    case DS4RT_OP_FP4_ROUND:
    case DS4RT_OP_HADAMARD:
    case DS4RT_OP_KV_STORE:
    case DS4RT_OP_COMPRESSOR:
    case DS4RT_OP_INDEXER_TOPK:
    case DS4RT_OP_ATTENTION: return true;
#endif
#ifdef DS4RT_GPU_HAVE_MM
    case DS4RT_OP_GET_ROWS:
    case DS4RT_OP_MATMUL:
    case DS4RT_OP_GROUPED_OUT: return true;
#endif
#ifdef DS4RT_GPU_HAVE_OPS
    case DS4RT_OP_HC_PRE:
    case DS4RT_OP_HC_POST:
    case DS4RT_OP_HC_HEAD:
    case DS4RT_OP_CAPTURE:
    case DS4RT_OP_ARGMAX:
    case DS4RT_OP_ADD:
    case DS4RT_OP_NONFINITE:
    case DS4RT_OP_DSPARK_CONFIDENCE: return true;
#endif
#ifdef DS4RT_GPU_HAVE_MOE
    case DS4RT_OP_MOE: return true;
#endif
    default: return false;
    }
}

bool gpu_matmul_type(uint32_t type) {
#ifdef DS4RT_GPU_HAVE_MM
    return gpu_mm_type(type);
#else
    (void)type;
    return false;
#endif
}

bool gpu_get_rows_type(uint32_t type) {
#ifdef DS4RT_GPU_HAVE_MM
    return gpu_mm_rows_type(type);
#else
    (void)type;
    return false;
#endif
}

uint64_t gpu_kernel_scratch_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim) {
    uint64_t bytes = 0, b;
    (void)hp;
    (void)lim;
    (void)b;
#ifdef DS4RT_GPU_HAVE_ATTN
    if ((b = gpu_attn_scratch_bytes(hp, lim)) > bytes) bytes = b;
#endif
#ifdef DS4RT_GPU_HAVE_OPS
    if ((b = gpu_ops_scratch_bytes(hp, lim)) > bytes) bytes = b;
#endif
    return bytes;
}

uint64_t gpu_mm_act_bytes(const ds4rt_hparams *hp, const ds4rt_limits *lim) {
#ifdef DS4RT_GPU_HAVE_MM
    return gpu_mm_scratch_bytes(hp, lim);
#else
    (void)hp;
    (void)lim;
    return 0;
#endif
}

bool gpu_hc_float_type(uint32_t type) {
#ifdef DS4RT_GPU_HAVE_OPS
    return gpu_hc_type(type);
#else
    (void)type;
    return false;
#endif
}
