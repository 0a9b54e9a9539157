/* backend_choice.c - the backend decision of a model load (see backend_choice.h). */
#include "backend_choice.h"

#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "internal.h"

#ifndef DS4RT_GPU_BACKEND
#  define DS4RT_GPU_BACKEND "none"
#endif

static const char *kind_name(int32_t kind) {
    switch (kind) {
    case DS4RT_BACKEND_AUTO: return "auto";
    case DS4RT_BACKEND_CPU: return "cpu";
    case DS4RT_BACKEND_CUDA: return "cuda";
    case DS4RT_BACKEND_HIP: return "hip";
    }
    return "?";
}

static int compiled_in(int32_t kind) {
#if defined(DS4RT_WITH_CUDA)
    return kind == DS4RT_BACKEND_CUDA;
#elif defined(DS4RT_WITH_HIP) || defined(DS4RT_WITH_HIP_CPU)
    /* HIP-CPU (a developer aid) registers its backend as kind hip */
    return kind == DS4RT_BACKEND_HIP;
#else
    (void)kind;
    return 0;
#endif
}

/* A GPU backend that is compiled in: a visible device, then whether it runs the model. */
static ds4rt_status choose_gpu(int32_t kind, int32_t device) {
    int count = 0;
    ds4rt_status st = ds4rt_gpu_device_count(&count);
    if (st != DS4RT_OK) return ds4rt_fail_context(DS4RT_ERR_BACKEND, "backend %s", kind_name(kind));
    if (count == 0)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s: this build has it, but no %s device is visible",
                          kind_name(kind), kind == DS4RT_BACKEND_CUDA ? "CUDA" : "HIP");
    if (device >= count)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s: device %d asked for, %d visible (0..%d)", kind_name(kind),
                          device, count, count - 1);
    /* a GPU runs the model once its op table is in the registry (src/backend/backend.c) */
    if (ds4rt_backend_find((ds4rt_bkind)kind) == NULL)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "backend %s: this build has GPU kernels but no %s op table registered",
                          kind_name(kind), kind_name(kind));
    return DS4RT_OK;
}

/* AUTO: the first registered GPU backend that sees a device, else the CPU. */
static int32_t auto_kind(void) {
    const ds4rt_backend_entry *const *reg;
    size_t n = ds4rt_backend_registry(&reg);
    for (size_t i = 0; i < n; i++)
        if (reg[i]->kind != DS4RT_BKIND_CPU && !reg[i]->explicit_only && reg[i]->device_count() > 0)
            return (int32_t)reg[i]->kind;
    return DS4RT_BACKEND_CPU;
}

ds4rt_status ds4rt_backend_choose(int32_t requested, int32_t device, ds4rt_backend_choice *out) {
    memset(out, 0, sizeof *out);
    if (requested < DS4RT_BACKEND_AUTO || requested > DS4RT_BACKEND_HIP)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: unknown backend %d (ds4rt_backend_kind)",
                          (int)requested);
    if (device < 0)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "model_load: device %d is negative", (int)device);
    if (requested == DS4RT_BACKEND_CUDA || requested == DS4RT_BACKEND_HIP) {
        if (!compiled_in(requested))
            return ds4rt_fail(DS4RT_ERR_BACKEND,
                              "backend %s is not compiled into this build (gpu=%s); rebuild with -Dgpu=%s",
                              kind_name(requested), DS4RT_GPU_BACKEND, kind_name(requested));
        ds4rt_status st = choose_gpu(requested, device);
        if (st != DS4RT_OK) return st;
    }
    int32_t kind = requested == DS4RT_BACKEND_AUTO ? auto_kind() : requested;
    out->kind = (ds4rt_backend_kind)kind;
    out->device = kind == DS4RT_BACKEND_CPU ? -1 : device;
    snprintf(out->name, sizeof out->name, "%s", kind_name(kind));
    return DS4RT_OK;
}

ds4rt_status ds4rt_backend_open_choice(const ds4rt_backend_choice *c, int n_threads, ds4rt_backend **out) {
    return ds4rt_backend_open((ds4rt_bkind)c->kind, c->device < 0 ? 0 : c->device, n_threads, out);
}
