/*
 * runtime.hip - devices, memory, copies and streams for the C core (hip/gk.h), and the
 * thread-local message of the last failing launcher that every hip/ file reports through
 * gk_internal.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gk_internal.h"

static thread_local char gk_error[512];

extern "C" const char *ds4rt_gk_last_error(void) { return gk_error; }

int ds4rt_gk_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gk_error, sizeof gk_error, fmt, ap);
    va_end(ap);
    return status;
}

int ds4rt_gk_check(hipError_t e, const char *what) {
    if (e == hipSuccess) return DS4RT_GK_OK;
    int status = e == hipErrorOutOfMemory ? DS4RT_GK_ERR_OUT_OF_MEMORY : DS4RT_GK_ERR_RUNTIME;
    return ds4rt_gk_fail(status, "%s: %s", what, hipGetErrorString(e));
}

extern "C" int ds4rt_gk_device_count(int *count) {
    *count = 0;
    hipError_t e = hipGetDeviceCount(count);
    if (e != hipSuccess) {
        *count = 0;
        return ds4rt_gk_check(e, "device count");
    }
    return DS4RT_GK_OK;
}

extern "C" int ds4rt_gk_set_device(int device) { return ds4rt_gk_check(hipSetDevice(device), "set device"); }

extern "C" int ds4rt_gk_device_info(int device, char *name, size_t name_len, int *integrated,
                                    uint64_t *total_bytes, uint64_t *free_bytes, int *n_sm) {
    hipDeviceProp_t p;
    int st = ds4rt_gk_check(hipGetDeviceProperties(&p, device), "device properties");
    if (st != DS4RT_GK_OK) return st;
    if (name != NULL && name_len > 0)
        snprintf(name, name_len, "%s (cc %d.%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor,
                 p.multiProcessorCount, (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    if (integrated != NULL) *integrated = p.integrated;
    if (total_bytes != NULL) *total_bytes = (uint64_t)p.totalGlobalMem;
    if (n_sm != NULL) *n_sm = p.multiProcessorCount;
    if (free_bytes != NULL) {
        size_t f = 0, t = 0;
        int cur = 0;
        if ((st = ds4rt_gk_check(hipGetDevice(&cur), "get device")) != DS4RT_GK_OK) return st;
        if ((st = ds4rt_gk_check(hipSetDevice(device), "set device")) != DS4RT_GK_OK) return st;
        st = ds4rt_gk_check(hipMemGetInfo(&f, &t), "memory info");
        (void)hipSetDevice(cur);
        if (st != DS4RT_GK_OK) return st;
        *free_bytes = (uint64_t)f;
    }
    return DS4RT_GK_OK;
}

extern "C" int ds4rt_gk_malloc(void **d_ptr, size_t bytes) {
    *d_ptr = NULL;
    if (bytes == 0) return DS4RT_GK_OK;
    hipError_t e = hipMalloc(d_ptr, bytes);
    if (e == hipSuccess && *d_ptr == NULL) e = hipErrorOutOfMemory; /* HIP-CPU reports a failed malloc as success */
    if (e != hipSuccess) {
        *d_ptr = NULL;
        (void)hipGetLastError(); /* an allocation failure must not poison later launches */
        return ds4rt_gk_fail(e == hipErrorOutOfMemory ? DS4RT_GK_ERR_OUT_OF_MEMORY : DS4RT_GK_ERR_RUNTIME,
                             "device allocation of %zu bytes: %s", bytes, hipGetErrorString(e));
    }
    return DS4RT_GK_OK;
}

extern "C" void ds4rt_gk_free(void *d_ptr) {
    if (d_ptr != NULL) (void)hipFree(d_ptr);
}

extern "C" int ds4rt_gk_memcpy_h2d(void *d_dst, const void *h_src, size_t bytes, void *stream) {
    if (bytes == 0) return DS4RT_GK_OK;
    return ds4rt_gk_check(hipMemcpyAsync(d_dst, h_src, bytes, hipMemcpyHostToDevice, (hipStream_t)stream),
                          "copy to device");
}

extern "C" int ds4rt_gk_memcpy_d2h(void *h_dst, const void *d_src, size_t bytes, void *stream) {
    if (bytes == 0) return DS4RT_GK_OK;
    return ds4rt_gk_check(hipMemcpyAsync(h_dst, d_src, bytes, hipMemcpyDeviceToHost, (hipStream_t)stream),
                          "copy to host");
}

extern "C" int ds4rt_gk_memcpy_d2d(void *d_dst, const void *d_src, size_t bytes, void *stream) {
    if (bytes == 0) return DS4RT_GK_OK;
    return ds4rt_gk_check(hipMemcpyAsync(d_dst, d_src, bytes, hipMemcpyDeviceToDevice, (hipStream_t)stream),
                          "device copy");
}

extern "C" int ds4rt_gk_memset(void *d_dst, int value, size_t bytes, void *stream) {
    if (bytes == 0) return DS4RT_GK_OK;
    return ds4rt_gk_check(hipMemsetAsync(d_dst, value, bytes, (hipStream_t)stream), "device memset");
}

extern "C" int ds4rt_gk_stream_create(void **stream) {
    hipStream_t s = NULL;
    int st = ds4rt_gk_check(hipStreamCreateWithFlags(&s, hipStreamNonBlocking), "stream create");
    *stream = st == DS4RT_GK_OK ? (void *)s : NULL;
    return st;
}

extern "C" void ds4rt_gk_stream_destroy(void *stream) {
    if (stream != NULL) (void)hipStreamDestroy((hipStream_t)stream);
}

extern "C" int ds4rt_gk_stream_sync(void *stream) {
    return ds4rt_gk_check(hipStreamSynchronize((hipStream_t)stream), "stream synchronize");
}

extern "C" int ds4rt_gk_event_create(void **event) {
    hipEvent_t e = NULL;
    int st = ds4rt_gk_check(hipEventCreate(&e), "event create");
    *event = st == DS4RT_GK_OK ? (void *)e : NULL;
    return st;
}

extern "C" void ds4rt_gk_event_destroy(void *event) {
    if (event != NULL) (void)hipEventDestroy((hipEvent_t)event);
}

extern "C" int ds4rt_gk_event_record(void *event, void *stream) {
    return ds4rt_gk_check(hipEventRecord((hipEvent_t)event, (hipStream_t)stream), "event record");
}

extern "C" int ds4rt_gk_stream_wait_event(void *stream, void *event) {
#if defined(DS4RT_HIP_CPU)
    /* HIP-CPU runs every stream's tasks on one processor thread, and a stream's wait for an event
     * blocks that thread, so a wait enqueued before the recording stream's work has run never
     * returns (backend_ops hung at the side branch's join). The host waits instead: the event is
     * complete before anything later is enqueued on `stream`, which is at least as strong an
     * order (HIP-CPU has no graphs to capture). */
    (void)stream;
    return ds4rt_gk_check(hipEventSynchronize((hipEvent_t)event), "event synchronize (stream wait)");
#else
    return ds4rt_gk_check(hipStreamWaitEvent((hipStream_t)stream, (hipEvent_t)event, 0), "stream wait event");
#endif
}

extern "C" int ds4rt_gk_event_elapsed_ms(void *from, void *to, float *ms) {
    int st = ds4rt_gk_check(hipEventSynchronize((hipEvent_t)to), "event synchronize");
    if (st != DS4RT_GK_OK) return st;
    return ds4rt_gk_check(hipEventElapsedTime(ms, (hipEvent_t)from, (hipEvent_t)to), "event elapsed time");
}

extern "C" int ds4rt_gk_memcpy2d_d2d(void *d_dst, size_t dpitch, const void *d_src, size_t spitch, size_t width,
                                     size_t height, void *stream) {
    if (width == 0 || height == 0) return DS4RT_GK_OK;
    return ds4rt_gk_check(hipMemcpy2DAsync(d_dst, dpitch, d_src, spitch, width, height, hipMemcpyDeviceToDevice,
                                           (hipStream_t)stream),
                          "device 2-D copy");
}

extern "C" int ds4rt_gk_host_view(const void *h_ptr, size_t bytes, void **d_ptr) {
    *d_ptr = NULL;
#if defined(DS4RT_HIP_CPU)
    /* HIP-CPU's device memory is host memory: the mapping is its own device view */
    (void)bytes;
    *d_ptr = (void *)h_ptr;
    return DS4RT_GK_OK;
#else
    /* pin the pages and map them into the device's address space (read-only: weights) */
    hipError_t e = hipHostRegister((void *)h_ptr, bytes, hipHostRegisterMapped | hipHostRegisterReadOnly);
    if (e != hipSuccess) {
        (void)hipGetLastError();
        return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "host register of %zu bytes: %s", bytes, hipGetErrorString(e));
    }
    e = hipHostGetDevicePointer(d_ptr, (void *)h_ptr, 0);
    if (e != hipSuccess) {
        (void)hipHostUnregister((void *)h_ptr);
        (void)hipGetLastError();
        *d_ptr = NULL;
        return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "device pointer of registered memory: %s",
                             hipGetErrorString(e));
    }
    return DS4RT_GK_OK;
#endif
}

extern "C" void ds4rt_gk_host_unview(const void *h_ptr) {
#if defined(DS4RT_HIP_CPU)
    (void)h_ptr;
#else
    if (h_ptr != NULL) (void)hipHostUnregister((void *)h_ptr);
#endif
}

#if !defined(DS4RT_HIP_CPU) && !defined(__HIP_PLATFORM_AMD__) && !defined(__HIPCC__)
int ds4rt_gk_pdl_on = 0;
thread_local int ds4rt_gk_pdl_now = 1;
/* Passes of more tokens launch plainly: on an H100 PDL gained 11 % at decode and 1-4 % for 2..8
 * tokens, and lost 43 % at 16 (docs/GPU.md, "Programmatic dependent launch"). */
static int64_t pdl_max_n = 8;

extern "C" int ds4rt_gk_pdl_configure(int device) {
    /* one decision per process (the first device opened decides; a thread-safe static): a
     * kernel captured into a graph keeps the launch attribute it was captured with */
    static const int decided = [device] {
        const char *env = getenv("DS4RT_GPU_PDL");
        const char *max_n = getenv("DS4RT_GPU_PDL_MAX_N");
        int major = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) major = 0;
        ds4rt_gk_pdl_on = !(env != NULL && env[0] == '0') && major >= 9; /* on unless DS4RT_GPU_PDL=0 */
        if (max_n != NULL && max_n[0] != '\0') pdl_max_n = strtoll(max_n, NULL, 10);
        return ds4rt_gk_pdl_on;
    }();
    return decided;
}

extern "C" void ds4rt_gk_pdl_pass(int64_t n) { ds4rt_gk_pdl_now = n <= pdl_max_n; }
#else
extern "C" int ds4rt_gk_pdl_configure(int device) {
    (void)device;
    return 0;
}

extern "C" void ds4rt_gk_pdl_pass(int64_t n) { (void)n; }
#endif

#if DS4RT_HAVE_GRAPHS
extern "C" int ds4rt_gk_graphs_supported(void) { return 1; }

extern "C" int ds4rt_gk_capture_begin(void *stream) {
    return ds4rt_gk_check(hipStreamBeginCapture((hipStream_t)stream, hipStreamCaptureModeThreadLocal),
                          "begin graph capture");
}

extern "C" int ds4rt_gk_capture_end(void *stream, void **exec) {
    *exec = NULL;
    hipGraph_t g = NULL;
    int st = ds4rt_gk_check(hipStreamEndCapture((hipStream_t)stream, &g), "end graph capture");
    if (st != DS4RT_GK_OK) return st;
    hipGraphExec_t e = NULL;
    st = ds4rt_gk_check(hipGraphInstantiateWithFlags(&e, g, 0), "instantiate graph");
    (void)hipGraphDestroy(g);
    if (st == DS4RT_GK_OK) *exec = (void *)e;
    return st;
}

extern "C" int ds4rt_gk_graph_launch(void *exec, void *stream) {
    return ds4rt_gk_check(hipGraphLaunch((hipGraphExec_t)exec, (hipStream_t)stream), "graph launch");
}

extern "C" void ds4rt_gk_graph_destroy(void *exec) {
    if (exec != NULL) (void)hipGraphExecDestroy((hipGraphExec_t)exec);
}
#else
extern "C" int ds4rt_gk_graphs_supported(void) { return 0; }
extern "C" int ds4rt_gk_capture_begin(void *stream) {
    (void)stream;
    return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "graphs: not on this platform");
}
extern "C" int ds4rt_gk_capture_end(void *stream, void **exec) {
    (void)stream;
    *exec = NULL;
    return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "graphs: not on this platform");
}
extern "C" int ds4rt_gk_graph_launch(void *exec, void *stream) {
    (void)exec;
    (void)stream;
    return ds4rt_gk_fail(DS4RT_GK_ERR_UNSUPPORTED, "graphs: not on this platform");
}
extern "C" void ds4rt_gk_graph_destroy(void *exec) { (void)exec; }
#endif
