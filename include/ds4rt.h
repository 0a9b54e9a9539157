/*
 * ds4rt.h - the public C ABI of ds4rt, an embeddable runtime for DeepSeek V4 Flash
 * ("deepseek4" GGUF files) with DSpark speculative decoding.
 *
 * This is the only public C header. It compiles as C99 and as C++.
 *
 * Conventions (see docs/API.md):
 *   - Every call that can fail returns a ds4rt_status. DS4RT_OK is 0.
 *   - On failure, a human-readable message is available from ds4rt_last_error() on the same
 *     thread (thread-local; it stays valid until the next failing call on that thread). Handles
 *     also keep the message of their own last failure.
 *   - No call aborts the process on bad input (files, arguments, token ids, sizes).
 *   - Opaque handles; config structs begin with their own size and have *_default()
 *     initialisers, so fields can be appended without breaking callers.
 *   - Structs that the library fills only ever grow at their end.
 *   - Only symbols that begin with ds4rt_ are exported from libds4rt.
 *
 * Note for binding generators (cffi): declarations use the DS4RT_API macro only as a prefix;
 * strip it and the preprocessor lines before handing the text to a C parser without cpp.
 */
#ifndef DS4RT_H
#define DS4RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  if defined(DS4RT_BUILDING)
#    define DS4RT_API __declspec(dllexport)
#  else
#    define DS4RT_API __declspec(dllimport)
#  endif
#else
#  define DS4RT_API __attribute__((visibility("default")))
#endif

/* Version of this header's ABI. Bumped only on incompatible changes; additions keep it. */
#define DS4RT_API_VERSION 1

/* ------------------------------------------------------------------------------------------ */
/* Status codes and errors                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef enum ds4rt_status {
    DS4RT_OK = 0,
    DS4RT_ERR_INVALID_ARGUMENT = 1, /* a NULL pointer, a size or option outside its domain */
    DS4RT_ERR_IO = 2,               /* the file could not be opened, read or mapped */
    DS4RT_ERR_FORMAT = 3,           /* a malformed, truncated or hostile file */
    DS4RT_ERR_UNSUPPORTED = 4,      /* well-formed, but a type/architecture ds4rt does not run */
    DS4RT_ERR_OUT_OF_MEMORY = 5,    /* host or device allocation failed */
    DS4RT_ERR_OUT_OF_RANGE = 6,     /* a token id, index, position or context length out of range */
    DS4RT_ERR_NOT_FOUND = 7,        /* a key, tensor or name that does not exist */
    DS4RT_ERR_MISMATCH = 8,         /* two inputs that must agree do not (support vs target) */
    DS4RT_ERR_STATE = 9,            /* the call is not valid in the object's current state */
    DS4RT_ERR_BACKEND = 10,         /* the compute backend failed or lacks a required op */
    DS4RT_ERR_INTERNAL = 11         /* a bug in ds4rt: please report it with the message */
} ds4rt_status;

/* Short constant name of a status ("DS4RT_ERR_FORMAT"); never NULL. */
DS4RT_API const char *ds4rt_status_name(ds4rt_status status);

/* Message of the last failing call on the calling thread ("" if none). Valid until the next
 * failing call on this thread. */
DS4RT_API const char *ds4rt_last_error(void);

/* Clears the calling thread's last error message. */
DS4RT_API void ds4rt_clear_error(void);

/* ------------------------------------------------------------------------------------------ */
/* Version and build                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* DS4RT_API_VERSION of the library actually loaded (compare with the header's). */
DS4RT_API uint32_t ds4rt_api_version(void);

/* Library version string, e.g. "0.1.0". */
DS4RT_API const char *ds4rt_version(void);

/* One line describing the build: GPU backend compiled in, CPU SIMD paths selected at run time. */
DS4RT_API const char *ds4rt_build_info(void);

/* ------------------------------------------------------------------------------------------ */
/* GPU backend (present only when built with -Dgpu=cuda or -Dgpu=hip)                          */
/* ------------------------------------------------------------------------------------------ */

/* Number of GPUs visible to the compiled-in GPU backend; 0 (and DS4RT_OK) in a CPU-only build.
 * DS4RT_ERR_BACKEND if a GPU build cannot talk to the driver (e.g. no driver installed). */
DS4RT_API ds4rt_status ds4rt_gpu_device_count(int *count);

/* Writes "name (cc X.Y, N SMs, M GiB)" of GPU `device` into buf. DS4RT_ERR_BACKEND in a
 * CPU-only build. */
DS4RT_API ds4rt_status ds4rt_gpu_device_name(int device, char *buf, size_t len);

/* Expands n_blocks Q8_0 blocks (34 bytes each) into n_blocks*32 IEEE half values on the GPU,
 * with round-to-nearest-even; host buffers in and out. This is the kernel of the Q8->F16
 * expansion cache; the result is bitwise what the CPU dequantiser rounded to F16 gives. */
DS4RT_API ds4rt_status ds4rt_gpu_expand_q8_0_f16(const void *q8_blocks, size_t n_blocks,
                                                 uint16_t *f16_out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DS4RT_H */
