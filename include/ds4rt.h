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
/* Tensor element types (ggml/GGUF type ids)                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef enum ds4rt_qtype {
    DS4RT_TYPE_F32 = 0,
    DS4RT_TYPE_F16 = 1,
    DS4RT_TYPE_Q4_0 = 2,
    DS4RT_TYPE_Q4_1 = 3,
    DS4RT_TYPE_Q5_0 = 6,
    DS4RT_TYPE_Q5_1 = 7,
    DS4RT_TYPE_Q8_0 = 8,
    DS4RT_TYPE_Q8_1 = 9,
    DS4RT_TYPE_Q2_K = 10,
    DS4RT_TYPE_Q3_K = 11,
    DS4RT_TYPE_Q4_K = 12,
    DS4RT_TYPE_Q5_K = 13,
    DS4RT_TYPE_Q6_K = 14,
    DS4RT_TYPE_Q8_K = 15,
    DS4RT_TYPE_IQ2_XXS = 16,
    DS4RT_TYPE_IQ2_XS = 17,
    DS4RT_TYPE_IQ3_XXS = 18,
    DS4RT_TYPE_IQ1_S = 19,
    DS4RT_TYPE_IQ4_NL = 20,
    DS4RT_TYPE_IQ3_S = 21,
    DS4RT_TYPE_IQ2_S = 22,
    DS4RT_TYPE_IQ4_XS = 23,
    DS4RT_TYPE_I8 = 24,
    DS4RT_TYPE_I16 = 25,
    DS4RT_TYPE_I32 = 26,
    DS4RT_TYPE_I64 = 27,
    DS4RT_TYPE_F64 = 28,
    DS4RT_TYPE_IQ1_M = 29,
    DS4RT_TYPE_BF16 = 30,
    DS4RT_TYPE_TQ1_0 = 34,
    DS4RT_TYPE_TQ2_0 = 35,
    DS4RT_TYPE_MXFP4 = 39,
    DS4RT_TYPE_NVFP4 = 40,
    DS4RT_TYPE_Q1_0 = 41,
    DS4RT_TYPE_COUNT = 42
} ds4rt_qtype;

/* Layout of one type: `block_elems` elements are stored in `block_bytes` bytes. `name` is the
 * ggml name ("Q8_0"). `compute` is nonzero if ds4rt can dequantise it and multiply with it. */
typedef struct ds4rt_type_info {
    const char *name;
    uint32_t block_elems;
    uint32_t block_bytes;
    int compute;
} ds4rt_type_info;

/* Layout of `type`; DS4RT_ERR_UNSUPPORTED for an id that is not a known GGUF type. */
DS4RT_API ds4rt_status ds4rt_type_get_info(uint32_t type, ds4rt_type_info *out);

/* Bytes of a row of n elements of `type`; DS4RT_ERR_FORMAT if n is not a multiple of the block
 * size or the size overflows, DS4RT_ERR_UNSUPPORTED for an unknown type. */
DS4RT_API ds4rt_status ds4rt_type_row_bytes(uint32_t type, int64_t n, uint64_t *out);

/* ------------------------------------------------------------------------------------------ */
/* GGUF files (read-only). The reader maps the file and validates it completely at open time:  */
/* every count, length, dimension product and offset is checked against the file; a file that  */
/* opens is safe to walk. Strings point into the mapping (not NUL-terminated; use len).        */
/* ------------------------------------------------------------------------------------------ */

typedef struct ds4rt_gguf ds4rt_gguf;

/* GGUF metadata value types (numbering as in the GGUF specification). */
typedef enum ds4rt_gguf_type {
    DS4RT_GGUF_UINT8 = 0,
    DS4RT_GGUF_INT8 = 1,
    DS4RT_GGUF_UINT16 = 2,
    DS4RT_GGUF_INT16 = 3,
    DS4RT_GGUF_UINT32 = 4,
    DS4RT_GGUF_INT32 = 5,
    DS4RT_GGUF_FLOAT32 = 6,
    DS4RT_GGUF_BOOL = 7,
    DS4RT_GGUF_STRING = 8,
    DS4RT_GGUF_ARRAY = 9,
    DS4RT_GGUF_UINT64 = 10,
    DS4RT_GGUF_INT64 = 11,
    DS4RT_GGUF_FLOAT64 = 12
} ds4rt_gguf_type;

/* A string inside the mapped file. */
typedef struct ds4rt_str {
    const char *data;
    uint64_t len;
} ds4rt_str;

/* One metadata key/value record. For scalars, `data` points at the little-endian value; for a
 * STRING, `str` holds it; for an ARRAY, `array_type` and `array_len` describe it and elements
 * are read with ds4rt_gguf_array_*(). */
typedef struct ds4rt_gguf_kv {
    ds4rt_str key;
    ds4rt_gguf_type type;
    ds4rt_gguf_type array_type; /* element type when type == DS4RT_GGUF_ARRAY */
    uint64_t array_len;         /* element count when type == DS4RT_GGUF_ARRAY */
    const void *data;           /* scalar value bytes, or first array element */
    ds4rt_str str;              /* value when type == DS4RT_GGUF_STRING */
    uint64_t file_offset;       /* byte offset of the record in the file (for messages) */
    /* Fields below were appended after the first version of this struct. */
    uint64_t value_offset;      /* byte offset in the file of `data` */
    uint64_t value_bytes;       /* bytes of the value from `data` on (all elements of an array) */
    const uint64_t *elem_index; /* reader-private index of STRING/ARRAY array elements; NULL
                                 * otherwise. Keep it when copying the struct; never write it. */
} ds4rt_gguf_kv;

#define DS4RT_MAX_DIMS 4

/* One tensor record. `data` points at the tensor's bytes inside the mapping. */
typedef struct ds4rt_gguf_tensor {
    ds4rt_str name;
    uint32_t type;               /* ggml type id (ds4rt_qtype) */
    uint32_t n_dims;
    int64_t ne[4];               /* ne[0] contiguous; unused dims are 1 (4 = DS4RT_MAX_DIMS) */
    uint64_t offset;             /* relative to the start of the data section */
    uint64_t nbytes;
    const void *data;
    /* Fields below were appended after the first version of this struct. */
    uint64_t info_offset;        /* byte offset of the tensor's info record (for messages) */
} ds4rt_gguf_tensor;

/* Opens and validates a GGUF v2/v3 file. On failure *out is NULL and the error names what is
 * wrong and where (key or tensor name, byte offset). DS4RT_ERR_IO if the file cannot be opened
 * or mapped, DS4RT_ERR_FORMAT for a malformed file, DS4RT_ERR_UNSUPPORTED for GGUF version 1,
 * versions above 3, big-endian files and tensor type ids this reader does not know.
 * Only the header (metadata and tensor infos) is read; tensor data is mapped, never touched. */
DS4RT_API ds4rt_status ds4rt_gguf_open(const char *path, ds4rt_gguf **out);
/* Same as ds4rt_gguf_open for a GGUF image already in memory. The reader does not copy it:
 * `data` must stay valid and unchanged until ds4rt_gguf_close. */
DS4RT_API ds4rt_status ds4rt_gguf_open_memory(const void *data, size_t size, ds4rt_gguf **out);
/* Unmaps the file and frees the handle; NULL is ignored. Every pointer obtained from it dies. */
DS4RT_API void ds4rt_gguf_close(ds4rt_gguf *gguf);

DS4RT_API uint32_t ds4rt_gguf_version(const ds4rt_gguf *gguf);
DS4RT_API uint64_t ds4rt_gguf_alignment(const ds4rt_gguf *gguf);
DS4RT_API uint64_t ds4rt_gguf_data_offset(const ds4rt_gguf *gguf); /* start of tensor data */
DS4RT_API uint64_t ds4rt_gguf_file_size(const ds4rt_gguf *gguf);

DS4RT_API uint64_t ds4rt_gguf_kv_count(const ds4rt_gguf *gguf);
/* Record i (0 <= i < kv_count); NULL if out of range. Valid while the file is open. */
DS4RT_API const ds4rt_gguf_kv *ds4rt_gguf_kv_at(const ds4rt_gguf *gguf, uint64_t i);
/* Record with this key (NUL-terminated), or NULL. */
DS4RT_API const ds4rt_gguf_kv *ds4rt_gguf_find_kv(const ds4rt_gguf *gguf, const char *key);

/* Typed getters with the leniency of ds4's loader: get_u32 accepts UINT32 and any other
 * integer type whose value fits; get_f32 accepts FLOAT32, FLOAT64 (finite values must fit a
 * float) and integers; get_u64 accepts unsigned and non-negative signed integers; get_bool
 * accepts BOOL only (any nonzero byte is true); get_str accepts STRING only.
 * DS4RT_ERR_NOT_FOUND if the key is absent, DS4RT_ERR_FORMAT if its type/value does not fit. */
DS4RT_API ds4rt_status ds4rt_gguf_get_u32(const ds4rt_gguf *gguf, const char *key, uint32_t *out);
DS4RT_API ds4rt_status ds4rt_gguf_get_u64(const ds4rt_gguf *gguf, const char *key, uint64_t *out);
DS4RT_API ds4rt_status ds4rt_gguf_get_f32(const ds4rt_gguf *gguf, const char *key, float *out);
DS4RT_API ds4rt_status ds4rt_gguf_get_bool(const ds4rt_gguf *gguf, const char *key, int *out);
DS4RT_API ds4rt_status ds4rt_gguf_get_str(const ds4rt_gguf *gguf, const char *key, ds4rt_str *out);

/* Array elements of record kv (which must be an ARRAY): element i as string, as an integer
 * (any integer or bool element type), or as a double (any numeric element type). A UINT64
 * element above INT64_MAX does not fit array_int (DS4RT_ERR_FORMAT); bools are 0/1 there
 * (any nonzero byte is true) and are not numbers for array_f64. */
DS4RT_API ds4rt_status ds4rt_gguf_array_str(const ds4rt_gguf_kv *kv, uint64_t i, ds4rt_str *out);
DS4RT_API ds4rt_status ds4rt_gguf_array_int(const ds4rt_gguf_kv *kv, uint64_t i, int64_t *out);
DS4RT_API ds4rt_status ds4rt_gguf_array_f64(const ds4rt_gguf_kv *kv, uint64_t i, double *out);
/* Element i of an array of arrays, described in *out as a record of its own (key and
 * file_offset of the enclosing record; type DS4RT_GGUF_ARRAY). Its elements are read with the
 * same accessors, so nested arrays of any depth are walked in O(1) per element.
 * Errors of the array accessors: DS4RT_ERR_INVALID_ARGUMENT for NULL pointers, DS4RT_ERR_FORMAT
 * when the record is not an array or its element type does not fit the accessor (the message
 * says which type it is), DS4RT_ERR_OUT_OF_RANGE when i >= array_len. */
DS4RT_API ds4rt_status ds4rt_gguf_array_sub(const ds4rt_gguf_kv *kv, uint64_t i,
                                            ds4rt_gguf_kv *out);

/* Name of a metadata value type ("UINT32", "STRING", "ARRAY", ...); NULL for an unknown id. */
DS4RT_API const char *ds4rt_gguf_type_name(uint32_t type);

DS4RT_API uint64_t ds4rt_gguf_tensor_count(const ds4rt_gguf *gguf);
/* Tensor i (0 <= i < tensor_count), in file order; NULL if out of range. */
DS4RT_API const ds4rt_gguf_tensor *ds4rt_gguf_tensor_at(const ds4rt_gguf *gguf, uint64_t i);
/* Tensor with this name (NUL-terminated), or NULL. */
DS4RT_API const ds4rt_gguf_tensor *ds4rt_gguf_find_tensor(const ds4rt_gguf *gguf, const char *name);

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
