/*
 * gk.h - the C interface of the GPU kernels ("gk" = GPU kernel). The C core never includes a
 * HIP or CUDA header: it calls the extern "C" launchers declared in the hip/ headers, which enqueue work
 * on a stream and return a status. This header holds what every launcher shares.
 *
 * Conventions (docs/GPU.md):
 *   - A launcher returns 0 on success, or a nonzero ds4rt_gk_status; ds4rt_gk_last_error()
 *     gives a message naming the launcher and the runtime's error (thread-local).
 *   - Pointers named d_* are device addresses (from ds4rt_gk_malloc); h_* are host addresses.
 *   - `stream` is an opaque runtime stream (hipStream_t / cudaStream_t); NULL is the default
 *     stream. Launchers only enqueue: nothing waits unless the name says so (…_sync).
 *   - Launchers never allocate: scratch they need is passed in (sizes given by a matching
 *     ..._scratch_bytes() function), so a pass can be captured as a graph and replayed.
 *   - Dynamic per-pass values (position, token ids, counts) are read from device memory by the
 *     kernels, never passed by value, for the same reason.
 */
#ifndef DS4RT_GK_H
#define DS4RT_GK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ds4rt_gk_status {
    DS4RT_GK_OK = 0,
    DS4RT_GK_ERR_ARGUMENT = 1,   /* a shape or pointer the launcher cannot take */
    DS4RT_GK_ERR_UNSUPPORTED = 2, /* e.g. a weight type without a kernel */
    DS4RT_GK_ERR_OUT_OF_MEMORY = 3,
    DS4RT_GK_ERR_RUNTIME = 4,    /* any other error of the HIP/CUDA runtime */
    DS4RT_GK_ERR_NO_DEVICE = 5
} ds4rt_gk_status;

/* Message of the calling thread's last failing launcher ("" if none). */
const char *ds4rt_gk_last_error(void);

/* Devices. */
int ds4rt_gk_device_count(int *count);
int ds4rt_gk_set_device(int device);
/* "name (cc X.Y, N SMs, M GiB)"; *integrated: nonzero for a unified-memory (APU) device. */
int ds4rt_gk_device_info(int device, char *name, size_t name_len, int *integrated,
                         uint64_t *total_bytes, uint64_t *free_bytes, int *n_sm);

/* Memory and streams. ds4rt_gk_malloc reports DS4RT_GK_ERR_OUT_OF_MEMORY on exhaustion. */
int ds4rt_gk_malloc(void **d_ptr, size_t bytes);
void ds4rt_gk_free(void *d_ptr);
int ds4rt_gk_memcpy_h2d(void *d_dst, const void *h_src, size_t bytes, void *stream);
int ds4rt_gk_memcpy_d2h(void *h_dst, const void *d_src, size_t bytes, void *stream);
int ds4rt_gk_memcpy_d2d(void *d_dst, const void *d_src, size_t bytes, void *stream);
int ds4rt_gk_memset(void *d_dst, int value, size_t bytes, void *stream);
int ds4rt_gk_stream_create(void **stream);
void ds4rt_gk_stream_destroy(void *stream);
int ds4rt_gk_stream_sync(void *stream);

/* Timing events (the backend's stage timers, docs/GPU.md "Stage timers"): record enqueues the
 * event on `stream`; elapsed waits for `to` and gives the device time between the two recorded
 * events in milliseconds. */
int ds4rt_gk_event_create(void **event);
void ds4rt_gk_event_destroy(void *event);
int ds4rt_gk_event_record(void *event, void *stream);
int ds4rt_gk_event_elapsed_ms(void *from, void *to, float *ms);
/* Work enqueued on `stream` after this call waits for `event`'s last record (a fork or join
 * between two streams; inside a graph capture it becomes an edge of the graph). */
int ds4rt_gk_stream_wait_event(void *stream, void *event);

/* Rows of `width` bytes, `height` of them, from d_src (rows `spitch` bytes apart) to d_dst
 * (`dpitch` apart), enqueued on `stream`: gathers and scatters of row slices without a kernel. */
int ds4rt_gk_memcpy2d_d2d(void *d_dst, size_t dpitch, const void *d_src, size_t spitch, size_t width,
                          size_t height, void *stream);

/* A device address for read-only host memory (the weight mapping) without a copy, on a device
 * that shares memory with the host (integrated / unified memory). DS4RT_GK_ERR_UNSUPPORTED where
 * the runtime cannot give one (the caller uploads a copy and reports why). Undo with
 * ds4rt_gk_host_unview(host) before the host memory goes away. */
int ds4rt_gk_host_view(const void *h_ptr, size_t bytes, void **d_ptr);
void ds4rt_gk_host_unview(const void *h_ptr);

/* Graphs (DS4RT_HAVE_GRAPHS: CUDA and HIP; not HIP-CPU). ds4rt_gk_graphs_supported() is
 * nonzero where they exist. Between capture_begin and capture_end, work enqueued on `stream` is
 * recorded, not run; capture_end instantiates it into *exec, which graph_launch replays on
 * `stream`. Nothing on the stream may wait for the host while it records. */
int ds4rt_gk_graphs_supported(void);
int ds4rt_gk_capture_begin(void *stream);
int ds4rt_gk_capture_end(void *stream, void **exec);
int ds4rt_gk_graph_launch(void *exec, void *stream);
void ds4rt_gk_graph_destroy(void *exec);

/* Programmatic dependent launch (NVIDIA compute capability 9.0 and later only): each kernel
 * is scheduled while the one before it drains and waits on the device for it (gk_internal.h,
 * GK_PDL_ENTRY). On unless DS4RT_GPU_PDL=0, for passes of at most DS4RT_GPU_PDL_MAX_N tokens
 * (default 8; docs/GPU.md). Decided once per process, from the environment and `device`,
 * before the first launch; returns 1 if launches use it. */
int ds4rt_gk_pdl_configure(int device);
/* The launches this thread issues next (a pass of n tokens and the head after it) use PDL if it
 * is on and n <= DS4RT_GPU_PDL_MAX_N (default 8). Graphs captured meanwhile keep it. */
void ds4rt_gk_pdl_pass(int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* DS4RT_GK_H */
