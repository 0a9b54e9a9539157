/*
 * backend_impl.h - what backends share and the composition never sees: the buffer record and
 * the backend object. Included only by src/backend/ files.
 */
#ifndef DS4RT_BACKEND_IMPL_H
#define DS4RT_BACKEND_IMPL_H

#include <stdatomic.h>

#include "backend.h"

struct ds4rt_dbuf {
    ds4rt_backend *be;
    void *ptr;          /* host pointer (CPU) or device pointer (GPU) */
    uint64_t bytes;
    ds4rt_mem_kind kind;
    bool owned;         /* false: a view of memory the backend does not own (the mapping) */
    const void *host;   /* a GPU's view of host memory: the host address it was made from */
};

struct ds4rt_backend {
    const ds4rt_backend_ops *ops;
    const ds4rt_backend_entry *entry;
    int device;
    int n_threads;
    _Atomic uint64_t bytes[DS4RT_MEM_COUNT];
    void *impl;         /* the backend's own data (freed by ds4rt_backend_close) */
    void (*close)(ds4rt_backend *be); /* optional: releases what impl holds before it is freed */
    bool unified;       /* a device that shares memory with the host (an APU; HIP-CPU) */
    uint32_t max_head_dim; /* attention's widest head (a kernel's register tile); 0: any */
    /* optional, the Q8->F16 expansion cache (docs/CACHE.md): an F16 copy of a Q8_0 matrix that
     * the backend's products use from then on, and how many products used one */
    ds4rt_status (*cache_expand)(ds4rt_backend *be, const ds4rt_dweight *w, uint64_t *bytes);
    uint64_t (*cache_hits)(const ds4rt_backend *be);
};

/* The registry's entries (src/backend/backend.c). A GPU backend's op table registers by
 * defining DS4RT_CUDA_BACKEND_TABLE / DS4RT_HIP_BACKEND_TABLE in meson.build and providing the
 * entry; until then a GPU build has kernels but no backend that runs the model. */
extern const ds4rt_backend_entry ds4rt_cpu_backend_entry;
#ifdef DS4RT_CUDA_BACKEND_TABLE
extern const ds4rt_backend_entry ds4rt_cuda_backend_entry;
#endif
#ifdef DS4RT_HIP_BACKEND_TABLE
extern const ds4rt_backend_entry ds4rt_hip_backend_entry;
#endif

/* Byte accounting shared by every backend's alloc/release. */
static inline void ds4rt_backend_account(ds4rt_backend *be, ds4rt_mem_kind kind, int64_t delta) {
    atomic_fetch_add(&be->bytes[kind], (uint64_t)delta);
}

#endif /* DS4RT_BACKEND_IMPL_H */
