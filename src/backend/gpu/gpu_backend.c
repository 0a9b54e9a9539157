/*
 * gpu_backend.c - the GPU backend's op table (src/backend/backend.h) and its registry entry:
 * kind cuda in a gpu=cuda build, kind hip in gpu=hip and gpu=hipcpu builds (HIP-CPU runs the
 * same kernels on the host, so every GPU path is testable on a machine without a GPU).
 *
 * supports() answers exactly what the kernels cover: an op whose kernel is not in this build is
 * "no", so a model that needs it fails at load with DS4RT_ERR_BACKEND naming it. Its table
 * entry then reports the same error if called anyway (nothing ever pretends to run).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"
#include "gpu_ops.h"
#include "qtypes.h"
#ifdef DS4RT_GPU_HAVE_MM
#include "mm.h"
#include "ops.h"
#endif

/* ---- capability ---------------------------------------------------------------------------- */

static bool gpu_supports(const ds4rt_backend *be, ds4rt_op op, uint32_t type) {
    (void)be;
    if ((unsigned)op >= DS4RT_OP_COUNT || !gpu_op_present(op)) return false;
    switch (op) {
    case DS4RT_OP_GET_ROWS: return gpu_get_rows_type(type);
    case DS4RT_OP_MATMUL:
    case DS4RT_OP_GROUPED_OUT: /* out_a's type (out_b is a matmul) */
    case DS4RT_OP_MOE: return gpu_matmul_type(type);
    case DS4RT_OP_HC_PRE: /* fn's type: the HC kernels' own float product */
    case DS4RT_OP_HC_HEAD: return gpu_hc_float_type(type);
    default: return type == DS4RT_TYPE_F32;
    }
}

/* ---- the table ------------------------------------------------------------------------------ */

const ds4rt_backend_ops ds4rt_gpu_ops = {
    .version = DS4RT_BACKEND_OPS_VERSION,
    .supports = gpu_supports,
    .alloc = gpu_alloc,
    .map_weights = gpu_map_weights,
    .upload_weights = gpu_upload_weights,
    .release = gpu_release,
    .ctx_create = gpu_ctx_create,
    .ctx_reserve = gpu_ctx_reserve,
    .ctx_free = gpu_ctx_free,
    .ctx_threads = gpu_ctx_threads,
    .upload = gpu_upload,
    .download = gpu_download,
    .synchronize = gpu_synchronize,
    .mark = gpu_mark,
    .mark_ms = gpu_mark_ms,
    .pass_begin = gpu_pass_begin,
    .pass_end = gpu_pass_end,
    .branch = gpu_branch,
    .get_rows = gpu_get_rows,
    .hc_pre = gpu_hc_pre,
    .hc_post = gpu_hc_post,
    .hc_head = gpu_hc_head,
    .rms_norm = gpu_rms_norm,
    .matmul = gpu_matmul,
    .rope = gpu_rope,
    .norm_rope = gpu_norm_rope,
    .fp8_round = gpu_fp8_round,
    .fp4_round = gpu_fp4_round,
    .hadamard = gpu_hadamard,
    .kv_store = gpu_kv_store,
    .comp_reset = gpu_comp_reset,
    .comp_snapshot = gpu_comp_snapshot,
    .comp_update = gpu_comp_update,
    .comp_rollback = gpu_comp_rollback,
    .indexer_topk = gpu_indexer_topk,
    .attention = gpu_attention,
    .grouped_out = gpu_grouped_out,
    .moe = gpu_moe,
    .capture = gpu_capture,
    .argmax = gpu_argmax,
    .add = gpu_add,
    .nonfinite = gpu_nonfinite,
    .dspark_confidence = gpu_dspark_confidence,
};

/* ---- registry entry ------------------------------------------------------------------------ */

static int gpu_device_count(void) {
    int n = 0;
    return ds4rt_gk_device_count(&n) == DS4RT_GK_OK ? n : 0;
}

static void gpu_close(ds4rt_backend *be) {
    gpu_impl *g = gpu_be(be);
    if (g == NULL) return;
    gpu_cache_free(be);
    ds4rt_gk_stream_destroy(g->load_stream);
}

static ds4rt_status gpu_create(int device, int n_threads, ds4rt_backend **out) {
    *out = NULL;
    int n = gpu_device_count();
    if (device < 0 || device >= n)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "GPU device %d does not exist (%d visible)", device, n);
    GK(ds4rt_gk_set_device(device), "select device");
    (void)ds4rt_gk_pdl_configure(device); /* before the first launch (docs/GPU.md) */
    ds4rt_backend *be = calloc(1, sizeof *be);
    gpu_impl *g = calloc(1, sizeof *g);
    if (be == NULL || g == NULL) {
        free(be);
        free(g);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "backend");
    }
    int st = ds4rt_gk_device_info(device, g->device_name, sizeof g->device_name, &g->integrated, &g->total_bytes,
                                  NULL, NULL);
#ifdef DS4RT_GPU_HAVE_MM
    if (st == DS4RT_GK_OK) { /* decided once, before any capture (hip/mm.h), and reported with the device */
        const size_t used = strlen(g->device_name);
        (void)ds4rt_gk_qm_min_rows(); /* decided first: a value not understood amends the reason */
        const char *qm_note = ds4rt_gk_qm_reason(); /* "on", or why not quite */
        const bool plain = strcmp(qm_note, "on") == 0;
        if (ds4rt_gk_qm_min_n() > 0 && ds4rt_gk_qm_min_rows() > 0)
            snprintf(g->device_name + used, sizeof g->device_name - used,
                     "; Q8_0 tensor cores from n=%lld (up to n=8 from %lld rows)", (long long)ds4rt_gk_qm_min_n(),
                     (long long)ds4rt_gk_qm_min_rows());
        else if (ds4rt_gk_qm_min_n() > 0)
            snprintf(g->device_name + used, sizeof g->device_name - used, "; Q8_0 tensor cores from n=%lld%s%s%s",
                     (long long)ds4rt_gk_qm_min_n(), plain ? "" : " (", plain ? "" : qm_note, plain ? "" : ")");
        else
            snprintf(g->device_name + used, sizeof g->device_name - used, "; Q8_0 tensor cores %s",
                     ds4rt_gk_qm_reason());
        const size_t used2 = strlen(g->device_name);
        snprintf(g->device_name + used2, sizeof g->device_name - used2, "; %s; %s", ds4rt_gk_mm_forms(),
                 ds4rt_gk_hc_forms());
    }
#endif
    if (st == DS4RT_GK_OK) st = ds4rt_gk_stream_create(&g->load_stream);
    if (st != DS4RT_GK_OK) {
        free(be);
        free(g);
        return gpu_check(st, "open device");
    }
    be->ops = &ds4rt_gpu_ops;
    be->device = device;
    be->n_threads = n_threads;
    be->impl = g;
    be->close = gpu_close;
    be->unified = g->integrated != 0;
#ifdef DS4RT_GPU_HAVE_ATTN
    be->max_head_dim = gpu_attn_max_head_dim(); /* checked at load (target.c) */
#endif
#ifdef DS4RT_GPU_HAVE_MM
    /* the cache needs the F16 products */
    be->cache_expand = gpu_cache_expand;
    be->cache_hits = gpu_cache_hits;
#endif
    *out = be;
    return DS4RT_OK;
}

#if defined(DS4RT_CUDA_BACKEND_TABLE)
const ds4rt_backend_entry ds4rt_cuda_backend_entry = {
    .name = "cuda", .kind = DS4RT_BKIND_CUDA, .device_count = gpu_device_count, .create = gpu_create};
#elif defined(DS4RT_HIP_BACKEND_TABLE)
#  if defined(DS4RT_WITH_HIP_CPU)
/* HIP-CPU runs the kernels on host threads: tests ask for it by kind, AUTO keeps the CPU */
#    define GPU_EXPLICIT_ONLY true
#  else
#    define GPU_EXPLICIT_ONLY false
#  endif
const ds4rt_backend_entry ds4rt_hip_backend_entry = {.name = "hip",
                                                     .kind = DS4RT_BKIND_HIP,
                                                     .device_count = gpu_device_count,
                                                     .create = gpu_create,
                                                     .explicit_only = GPU_EXPLICIT_ONLY};
#endif
