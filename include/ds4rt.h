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
 *   - Opaque handles.
 *   - Struct versioning: a struct that may grow begins with `size_t size`, the sizeof the caller
 *     was compiled with, and that size is its version. Set it with the struct's *_init(p, sizeof
 *     *p) call (or the header-inline *_default_params(), which calls it); for an output struct,
 *     set it yourself before the call. The library accepts a smaller (older) struct and gives
 *     the fields it lacks their defaults; it accepts a larger (newer) one only if every byte it
 *     does not know is zero, else it fails with DS4RT_ERR_UNSUPPORTED ("the library is older
 *     than the header"); it fills an output up to the caller's size and no further. Fields are
 *     only ever appended, and a field added later means "what older libraries did" when zero.
 *     Structs without a size member are frozen: their layout never changes.
 *   - Only symbols that begin with ds4rt_ are exported from libds4rt (soname libds4rt.so.1).
 *
 * Note for binding generators (cffi): declarations use the DS4RT_API macro only as a prefix;
 * strip it and the preprocessor lines (keep the integer #defines) before handing the text to a
 * C parser without cpp, and skip the block marked ds4rt:inline-defaults (function bodies).
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
/* Revision of the header within DS4RT_API_VERSION: 0 was the first (tests/abi/ds4rt_1_0.h),
 * each revision only adds. Lets a host test at compile time for a field or call it uses. */
#define DS4RT_ABI_MINOR 4

/* ------------------------------------------------------------------------------------------ */
/* Opaque handles                                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct ds4rt_gguf ds4rt_gguf;           /* an open, validated GGUF file */
typedef struct ds4rt_tokenizer ds4rt_tokenizer; /* immutable; shareable across threads */
typedef struct ds4rt_model ds4rt_model;         /* read-only after load; shareable across threads */
typedef struct ds4rt_session ds4rt_session;     /* one context; one thread at a time */
typedef struct ds4rt_sampler ds4rt_sampler;     /* sampling state; one thread at a time */
typedef struct ds4rt_dspark ds4rt_dspark;       /* a DSpark support model bound to a target */

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
/* Frozen layout (no size member; filled by the caller-allocated ds4rt_type_get_info). */
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

/* A string inside the mapped file. Frozen layout. */
typedef struct ds4rt_str {
    const char *data;
    uint64_t len;
} ds4rt_str;

/* One metadata key/value record. For scalars, `data` points at the little-endian value; for a
 * STRING, `str` holds it; for an ARRAY, `array_type` and `array_len` describe it and elements
 * are read with ds4rt_gguf_array_*().
 * Frozen layout: records are read in place (ds4rt_gguf_kv_at) and filled by the caller
 * (ds4rt_gguf_array_sub), and every accessor reads the record back, so it can never grow; new
 * facts about a record come as new accessor functions. */
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

/* One tensor record. `data` points at the tensor's bytes inside the mapping. Handed out by
 * pointer only, into the reader's own memory (never caller-allocated, never read back by the
 * library), so it grows at its end: read only the fields your header has. */
typedef struct ds4rt_gguf_tensor {
    ds4rt_str name;
    uint32_t type;               /* ggml type id (ds4rt_qtype) */
    uint32_t n_dims;
    int64_t ne[DS4RT_MAX_DIMS];  /* ne[0] contiguous; unused dims are 1 */
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
/* Models and sessions (the deepseek4 target)                                                   */
/* ------------------------------------------------------------------------------------------ */


/* Numerics of the target. The official model was trained with quantisation-aware inference:
 * an FP8 (E4M3) round trip of the KV rows' non-RoPE dims and an FP4 (E2M1) round trip of the
 * indexer's q and k after the Hadamard rotation. llama.cpp (b11739) omits both; LLAMACPP turns
 * them off so results can be compared with llama.cpp ("llama.cpp-compatible numerics"). */
typedef enum ds4rt_numerics {
    DS4RT_NUMERICS_OFFICIAL = 0,
    DS4RT_NUMERICS_LLAMACPP = 1
} ds4rt_numerics;

/* The Q8->F16 expansion cache: an F16 copy of selected Q8_0 weights that batched passes can
 * multiply with through half-precision GEMMs. A policy of the model, set by the host, and never
 * changed by loading a support model (ds4 turned it off whenever a second model was mapped,
 * docs/CACHE.md). Enabling it changes arithmetic (F16 vs Q8_0 kernels), so greedy output may
 * differ between policies; it never differs because of a support model. See docs/CACHE.md. */
typedef enum ds4rt_cache_policy {
    DS4RT_CACHE_AUTO = 0,    /* the backend decides (unified-memory devices: off unless a budget
                                is given; the CPU backend: off, see docs/CACHE.md) */
    DS4RT_CACHE_OFF = 1,
    DS4RT_CACHE_ON = 2       /* expand within cache_budget_bytes (0 = no limit) */
} ds4rt_cache_policy;

/* The compute backend a model runs on. */
typedef enum ds4rt_backend_kind {
    DS4RT_BACKEND_AUTO = 0, /* the best backend this build and machine offer; today the CPU in
                               every build (the GPU backends do not run the model yet) */
    DS4RT_BACKEND_CPU = 1,
    DS4RT_BACKEND_CUDA = 2, /* NVIDIA GPU: needs a -Dgpu=cuda build and a visible device */
    DS4RT_BACKEND_HIP = 3   /* AMD GPU: needs a -Dgpu=hip build and a visible device */
} ds4rt_backend_kind;

/* Load progress: called on the loading thread while weights are mapped, bound and (on a GPU)
 * uploaded. done_bytes never decreases, total_bytes stays the same during one load (the tensor
 * data of the file), and a load that succeeds ends with a call where done == total. */
typedef void (*ds4rt_progress_fn)(void *user, uint64_t done_bytes, uint64_t total_bytes);

/* How a model holds its file (ds4rt_model_params.load; ABI 1.2). */
typedef enum ds4rt_load_mode {
    DS4RT_LOAD_MAP = 0,  /* map the file read-only (default): no copy, pages shared with the page
                            cache. The file must not be truncated or rewritten while the model
                            lives: reading a page past a truncation ends the process with SIGBUS */
    DS4RT_LOAD_COPY = 1  /* read the whole file into memory the model owns: costs the file's size
                            in memory and a full read at load; the file may then change or go */
} ds4rt_load_mode;

typedef struct ds4rt_model_params {
    size_t size;             /* sizeof(ds4rt_model_params), set by ds4rt_model_default_params */
    int32_t n_threads;       /* CPU threads; <= 0: one per CPU the process may run on */
    ds4rt_numerics numerics;
    ds4rt_cache_policy cache_policy;
    uint64_t cache_budget_bytes;
    /* Fields below were added in ABI 1.1. */
    int32_t backend;         /* ds4rt_backend_kind; default DS4RT_BACKEND_AUTO. A backend this
                                build lacks, or a GPU backend without a visible device, is a
                                DS4RT_ERR_BACKEND error naming why; never a silent fallback */
    int32_t device;          /* GPU ordinal for CUDA/HIP (default 0); not used by the CPU */
    ds4rt_progress_fn progress; /* optional load progress callback (NULL: none) */
    void *progress_user;
    /* Fields below were added in ABI 1.2. */
    int32_t load;            /* ds4rt_load_mode; default DS4RT_LOAD_MAP */
} ds4rt_model_params;

/* Fills *params with the defaults of a ds4rt_model_params of `size` bytes (pass sizeof *params) and sets
 * params->size = size. ds4rt_model_default_params() (header-inline) returns the same by value. */
DS4RT_API ds4rt_status ds4rt_model_params_init(ds4rt_model_params *params, size_t size);

/* Maps and validates a deepseek4 GGUF. Errors name the key or tensor at fault. */
DS4RT_API ds4rt_status ds4rt_model_load(const char *path, const ds4rt_model_params *params,
                                        ds4rt_model **out);
DS4RT_API void ds4rt_model_free(ds4rt_model *model);

#define DS4RT_CACHE_REASON_LEN 160  /* ds4rt_model_info.cache_reason */
#define DS4RT_BACKEND_NAME_LEN 32   /* ds4rt_model_info.backend */

typedef struct ds4rt_model_info {
    size_t size;             /* set by the caller to sizeof(ds4rt_model_info) */
    uint32_t n_layer;
    uint32_t n_embd;
    uint32_t n_vocab;
    uint32_t n_head;
    uint32_t head_dim;
    uint32_t n_expert;
    uint32_t n_expert_used;
    uint32_t window;
    uint32_t n_hc;
    int32_t bos_id;          /* -1 if the file names none */
    int32_t eos_id;
    ds4rt_numerics numerics;
    int32_t n_threads;
    uint64_t file_bytes;
    ds4rt_cache_policy cache_requested; /* the policy asked for */
    int32_t cache_active;    /* nonzero if weights are being expanded */
    uint64_t cache_bytes;    /* bytes of F16 copies held */
    uint64_t cache_hits;     /* matrix products served from the cache */
    uint64_t cache_fallbacks; /* requests the backend could not serve (reason below) */
    char cache_reason[DS4RT_CACHE_REASON_LEN]; /* why the cache is in its state ("" if active
                                                   as asked) */
    /* Fields below were added in ABI 1.1. Memory is in bytes; "session" figures are for one
     * session with the default ds4rt_session_params (n_ctx 4096, max_batch 32) and this
     * model's thread count. */
    char backend[DS4RT_BACKEND_NAME_LEN]; /* the backend the model runs on: "cpu" */
    int32_t backend_kind;    /* ds4rt_backend_kind chosen (never AUTO) */
    int32_t device;          /* GPU ordinal; -1 on the CPU */
    uint64_t weight_bytes;   /* weights the forward pass reads: tensors bound as views into the
                                mapped file (pages the OS loads on demand and may share between
                                processes) plus weight_owned_bytes */
    uint64_t weight_owned_bytes; /* the part of weight_bytes copied to the heap at load (small
                                vectors converted to f32); all of it with DS4RT_LOAD_COPY, whose
                                copy of the whole file (file_bytes) the model holds */
    uint64_t state_fixed_bytes;  /* per session, independent of n_ctx: the raw KV ring of
                                window + max_batch rows, compressor frontiers, rollback journals */
    uint64_t state_bytes_per_1k; /* per session, per 1024 tokens of n_ctx: compressed KV and
                                indexer rows (a session's state is fixed + per_1k * n_ctx / 1024) */
    uint64_t scratch_bytes;  /* per session: activation buffers of one forward pass of max_batch
                                tokens and the session's logit and token buffers */
    uint64_t graph_bytes;    /* compiled graphs and kernel workspaces on a device; 0 on the CPU
                                backend, which has none */
} ds4rt_model_info;

DS4RT_API ds4rt_status ds4rt_model_get_info(const ds4rt_model *model, ds4rt_model_info *out);

/* The memory plan of a model (ABI 1.3): what loading the file and running one session of
 * n_ctx tokens would hold, from the file's header alone (no tensor data is read, so a header
 * written without its data serves too: tools/make_big_model.py prepare; docs/PERFORMANCE.md,
 * "Memory of the real model"). The target (and the support file, if given) are bound "dry":
 * every name, shape and type is checked as a load checks it and every byte is accounted as a
 * load accounts it (weight_bytes equals ds4rt_model_info.weight_bytes of the loaded file), the
 * session state comes from the one layout of ds4rt_kv_state, and the scratch and the drafter's
 * buffers are built once on the CPU backend and measured by its accounting. */
typedef enum ds4rt_weight_kind {
    DS4RT_WEIGHT_EMBEDDING = 0,      /* token_embd */
    DS4RT_WEIGHT_HEAD = 1,           /* output (the LM head) and the output HC head */
    DS4RT_WEIGHT_ATTENTION = 2,      /* attn_q_a, attn_q_b, attn_kv, attn_output_a/_b, sinks */
    DS4RT_WEIGHT_COMPRESSOR = 3,     /* attn_compressor_* (kv, gate, ape) */
    DS4RT_WEIGHT_INDEXER = 4,        /* indexer.* and indexer_compressor_* */
    DS4RT_WEIGHT_ROUTER = 5,         /* ffn_gate_inp, exp_probs_b, ffn_gate_tid2eid */
    DS4RT_WEIGHT_EXPERTS = 6,        /* routed experts: ffn_{gate,up,down}_exps */
    DS4RT_WEIGHT_SHARED_EXPERTS = 7, /* ffn_{gate,up,down}_shexp */
    DS4RT_WEIGHT_HYPER = 8,          /* hyper-connection mixing of the layers (hc_attn_*, hc_ffn_*) */
    DS4RT_WEIGHT_NORMS = 9,          /* every *norm.weight */
    DS4RT_WEIGHT_KIND_COUNT = 10
} ds4rt_weight_kind;

#define DS4RT_WEIGHT_KINDS 16 /* entries of ds4rt_memory_plan.weight_kind_bytes (room to grow) */

typedef struct ds4rt_memory_params {
    size_t size;             /* sizeof(ds4rt_memory_params), set by the default initialiser */
    int64_t n_ctx;           /* the session's context (default 4096) */
    uint32_t max_batch;      /* the session's max_batch (default 32) */
    const char *support;     /* a DSpark support file for the drafter's figures, or NULL */
    uint32_t dspark_window;  /* its window (0: as ds4rt_dspark_params.window) */
    uint64_t cache_budget_bytes; /* the budget for cache_budget_bytes below (0: no limit) */
    int32_t numerics;        /* ds4rt_numerics (default official): the checks of that load */
    int32_t n_threads;       /* threads the scratch is measured for (the CPU backend's op
                                workspaces are per thread); <= 0: as ds4rt_model_params */
} ds4rt_memory_params;

typedef struct ds4rt_memory_plan {
    size_t size;             /* set by the caller to sizeof(ds4rt_memory_plan) */
    int64_t n_ctx;
    uint32_t max_batch;
    uint32_t n_layer;
    uint64_t file_bytes;     /* bytes of the file as opened (the header alone: its size) */
    uint64_t data_bytes;     /* tensor data the header describes (the full file's data section) */
    uint64_t weight_bytes;   /* ds4rt_model_info.weight_bytes of a load */
    uint64_t weight_owned_bytes; /* the part copied (small vectors converted to f32) */
    uint64_t weight_kind_bytes[DS4RT_WEIGHT_KINDS]; /* weight_bytes by ds4rt_weight_kind */
    /* one session of n_ctx tokens and max_batch (ds4rt_model_info's state figures for it) */
    uint64_t state_bytes;        /* all of it: fixed + per_1k * n_ctx / 1024 (to the row) */
    uint64_t state_fixed_bytes;
    uint64_t state_bytes_per_1k;
    uint64_t state_window_bytes;    /* raw KV rings (window + max_batch rows per layer) */
    uint64_t state_frontier_bytes;  /* compressor frontiers, snapshots, journals (both kinds) */
    uint64_t state_compressed_bytes; /* compressed KV rows at n_ctx */
    uint64_t state_indexer_bytes;    /* indexer rows at n_ctx */
    uint64_t state_compressed_per_1k; /* ... per 1024 tokens of n_ctx */
    uint64_t state_indexer_per_1k;
    uint64_t scratch_bytes;  /* pass buffers and op workspaces on the CPU backend, logits and
                                token buffers (as ds4rt_model_info.scratch_bytes, at n_ctx) */
    /* the drafter (support given; else 0) */
    uint64_t drafter_weight_bytes;
    uint64_t drafter_state_bytes;   /* its per-session rings and proposal tensors */
    uint64_t drafter_scratch_bytes; /* what its buffers add to the session's scratch */
    /* the Q8->F16 cache (docs/CACHE.md) on a GPU backend: policy on; off and auto hold 0 (as
     * does every policy on the CPU backend, which has no F16 path) */
    uint64_t cache_matrices;     /* Q8_0 matrices `on` expands */
    uint64_t cache_q8_bytes;     /* their stored bytes (already counted in weight_bytes) */
    uint64_t cache_on_bytes;     /* their F16 copies, without a budget */
    uint64_t cache_budget_bytes; /* the F16 copies `on` makes within cache_budget_bytes */
} ds4rt_memory_plan;

/* Fills *params with the defaults of a ds4rt_memory_params of `size` bytes (pass sizeof
 * *params) and sets params->size = size. ds4rt_memory_default_params() (header-inline) returns
 * the same by value. */
DS4RT_API ds4rt_status ds4rt_memory_params_init(ds4rt_memory_params *params, size_t size);
/* Name of a ds4rt_weight_kind ("experts", ...); NULL outside [0, DS4RT_WEIGHT_KIND_COUNT). */
DS4RT_API const char *ds4rt_weight_kind_name(uint32_t kind);
/* The plan of the deepseek4 file at `path` (params may be NULL: the defaults). Errors as
 * ds4rt_model_load's for a file that would not load (by its header), and the support's as
 * ds4rt_dspark_load's. */
DS4RT_API ds4rt_status ds4rt_model_memory_plan(const char *path, const ds4rt_memory_params *params,
                                               ds4rt_memory_plan *out);

/* The tokenizer read from the model file's tokenizer.* metadata (see the tokenizer section), or
 * NULL if the file carries none. Owned by the model; valid while it lives. */
DS4RT_API const ds4rt_tokenizer *ds4rt_model_tokenizer(const ds4rt_model *model);

typedef struct ds4rt_session_params {
    size_t size;             /* sizeof(ds4rt_session_params), set by the default initialiser */
    int64_t n_ctx;           /* maximum tokens in context (default 4096) */
    uint32_t max_batch;      /* tokens per forward pass: the prefill chunk and the widest
                                speculative verify (default 32) */
} ds4rt_session_params;

/* Fills *params with the defaults of a ds4rt_session_params of `size` bytes (pass sizeof *params) and sets
 * params->size = size. ds4rt_session_default_params() (header-inline) returns the same by value. */
DS4RT_API ds4rt_status ds4rt_session_params_init(ds4rt_session_params *params, size_t size);
DS4RT_API ds4rt_status ds4rt_session_create(ds4rt_model *model, const ds4rt_session_params *params,
                                            ds4rt_session **out);
DS4RT_API void ds4rt_session_free(ds4rt_session *session);
/* Empties the context. */
DS4RT_API void ds4rt_session_reset(ds4rt_session *session);
/* Tokens in context. */
DS4RT_API int64_t ds4rt_session_position(const ds4rt_session *session);
/* Message of this session's last failure ("" if none). */
DS4RT_API const char *ds4rt_session_last_error(const ds4rt_session *session);

/* Appends n tokens to the context, in passes of at most max_batch tokens. If `logits` is not
 * NULL it receives the teacher-forced logits of every token, n rows of n_vocab floats. The
 * last row always becomes the session's current logits. A token outside the vocabulary or a
 * context overflow is an error that leaves the session unchanged. */
DS4RT_API ds4rt_status ds4rt_session_eval(ds4rt_session *session, const int32_t *tokens, size_t n,
                                          float *logits);

/* The logits after the last token in context (n_vocab floats), or NULL if there are none
 * (empty context, or a truncation to a row whose logits were not computed). Valid until the
 * next call that changes the session. */
DS4RT_API const float *ds4rt_session_logits(const ds4rt_session *session);

/* Shrinks the context to n_tokens, which must lie within the last forward pass (from its
 * first position to the current one): the state becomes exactly what evaluating only those
 * tokens would have left (speculative rollback). */
DS4RT_API ds4rt_status ds4rt_session_truncate(ds4rt_session *session, int64_t n_tokens);

/* Capture (DSpark's input): after each pass, the mean of the hyper-connection streams of the
 * listed layers' outputs, one row of n_embd floats per token. Layers must be increasing and
 * < n_layer; n = 0 turns capture off. */
DS4RT_API ds4rt_status ds4rt_session_set_capture(ds4rt_session *session, const uint32_t *layers,
                                                 size_t n);
/* Rows captured for capture slot `slot` in the last pass: *rows points at n_rows rows of
 * n_embd floats for positions first_pos .. first_pos + n_rows - 1. */
DS4RT_API ds4rt_status ds4rt_session_get_capture(const ds4rt_session *session, uint32_t slot,
                                                 const float **rows, int64_t *first_pos,
                                                 int64_t *n_rows);

/* Trace (diagnostics and verification): called for every token and layer with the tensors
 * between sublayers; `stage` is a ds4rt_trace_stage, `data` holds n floats valid during the
 * call. Layer == n_layer for DS4RT_TRACE_HEAD. NULL turns it off. Slows the forward pass. */
typedef enum ds4rt_trace_stage {
    DS4RT_TRACE_LAYER_IN = 0,  /* HC state entering the layer, n_hc*n_embd */
    DS4RT_TRACE_ATTN_IN = 1,   /* attn_norm output, n_embd */
    DS4RT_TRACE_ATTN_OUT = 2,  /* attention sublayer output, n_embd */
    DS4RT_TRACE_ATTN_HC = 3,   /* HC state after the attention sublayer */
    DS4RT_TRACE_FFN_IN = 4,    /* ffn_norm output */
    DS4RT_TRACE_FFN_OUT = 5,   /* MoE sublayer output */
    DS4RT_TRACE_LAYER_OUT = 6, /* HC state leaving the layer */
    DS4RT_TRACE_HEAD = 7       /* output HC head collapse, before the final norm */
} ds4rt_trace_stage;

typedef void (*ds4rt_trace_fn)(void *user, uint32_t layer, uint32_t stage, int64_t pos,
                               const float *data, int64_t n);
DS4RT_API ds4rt_status ds4rt_session_set_trace(ds4rt_session *session, ds4rt_trace_fn fn, void *user);

/* ------------------------------------------------------------------------------------------ */
/* Sampling                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Order: logits / temperature -> softmax -> top-k -> top-p -> min-p -> renormalise -> draw.
 * temperature <= 0 is greedy (argmax; ties to the lowest id) and ignores the rest. */
typedef struct ds4rt_sampler_params {
    size_t size;             /* sizeof(ds4rt_sampler_params) */
    float temperature;       /* default 0 (greedy) */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off; keeps p >= min_p * p_max */
    uint64_t seed;           /* the same seed and inputs give the same draws */
} ds4rt_sampler_params;


/* Fills *params with the defaults of a ds4rt_sampler_params of `size` bytes (pass sizeof *params) and sets
 * params->size = size. ds4rt_sampler_default_params() (header-inline) returns the same by value. */
DS4RT_API ds4rt_status ds4rt_sampler_params_init(ds4rt_sampler_params *params, size_t size);
DS4RT_API ds4rt_status ds4rt_sampler_create(const ds4rt_sampler_params *params, uint32_t n_vocab,
                                            ds4rt_sampler **out);
DS4RT_API void ds4rt_sampler_free(ds4rt_sampler *sampler);
/* Draws a token from logits[n_vocab]. */
DS4RT_API ds4rt_status ds4rt_sampler_sample(ds4rt_sampler *sampler, const float *logits,
                                            int32_t *token);
/* The distribution sample() draws from (n_vocab probabilities; zero outside the kept set). */
DS4RT_API ds4rt_status ds4rt_sampler_probs(ds4rt_sampler *sampler, const float *logits, float *probs);

/* ------------------------------------------------------------------------------------------ */
/* DSpark support models                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Loading options. The support model never changes the target: its numerics, caches and memory
 * policy stay exactly as they were (contrast with ds4, docs/CACHE.md). */
typedef struct ds4rt_dspark_params {
    size_t size;             /* sizeof(ds4rt_dspark_params), set by the default initialiser */
    uint32_t window;         /* context rows per drafter stage; 0 = the target's sliding window
                                (DeepSeek's reference sizes it so; 128 for V4 Flash) */
    int32_t self_test;       /* nonzero (default): run one proposal at load; the load fails,
                                naming the stage, unless it produced a full draft */
} ds4rt_dspark_params;

/* Fills *params with the defaults of a ds4rt_dspark_params of `size` bytes (pass sizeof *params) and sets
 * params->size = size. ds4rt_dspark_default_params() (header-inline) returns the same by value. */
DS4RT_API ds4rt_status ds4rt_dspark_params_init(ds4rt_dspark_params *params, size_t size);

/* Loads a DSpark support model for `target`: ds4's layout (general.architecture
 * "deepseek4-dspark", stages mtp.N., metadata under deepseek4.dspark.<k>, deepseek4.dspark_<k>
 * or dspark.<k>) or llama.cpp's ("dflash", stages blk.N., dflash.target_layers = ids + 1).
 * Everything is checked against the target (widths, vocabulary, target layer ids < n_layer and
 * increasing, noise token < n_vocab, block size 1..16, every tensor's shape and type); any
 * problem is an error naming the key or tensor, never a drafter that silently does not draft.
 * The target model must outlive the support model. */
DS4RT_API ds4rt_status ds4rt_dspark_load(const ds4rt_model *target, const char *path,
                                         const ds4rt_dspark_params *params, ds4rt_dspark **out);
DS4RT_API void ds4rt_dspark_free(ds4rt_dspark *dspark);

#define DS4RT_MAX_TARGET_LAYERS 8   /* ds4rt_dspark_info.target_layers */
#define DS4RT_TENSOR_TYPES_LEN 160  /* ds4rt_dspark_info.tensor_types */
#define DS4RT_MAX_DRAFT 16          /* the largest block size: most drafts a cycle verifies
                                       (ds4rt_dspark_info, ds4rt_spec_stats) */

typedef struct ds4rt_dspark_info {
    size_t size;             /* set by the caller to sizeof(ds4rt_dspark_info) */
    int32_t layout;          /* 0: ds4 support GGUF, 1: llama.cpp dflash draft */
    uint32_t n_stages;
    uint32_t block_size;     /* B: drafts per block */
    uint32_t markov_rank;
    uint32_t noise_token;
    uint32_t window;
    uint32_t n_target_layers;
    uint32_t target_layers[DS4RT_MAX_TARGET_LAYERS]; /* 0-based target layers whose outputs are
                                                        captured */
    char tensor_types[DS4RT_TENSOR_TYPES_LEN]; /* e.g. "main_proj=Q8_0 markov_w1=BF16 ..." */
    /* Fields below were added in ABI 1.4. */
    uint32_t n_acceptance_prior; /* values in acceptance_prior: the file's measured acceptance per
                                    draft position (ds4rt.dspark.acceptance_prior), where the
                                    adaptive scheduler's estimates start; 0: none, it starts
                                    uninformed */
    float acceptance_prior[DS4RT_MAX_DRAFT];
} ds4rt_dspark_info;

DS4RT_API ds4rt_status ds4rt_dspark_get_info(const ds4rt_dspark *dspark, ds4rt_dspark_info *out);

/* Attaches the drafter of `dspark` to a session: from then on every forward pass also captures
 * the drafter's target layers and appends the drafter's context rows, and truncation rolls them
 * back. Speculative generation attaches automatically; attach before evaluating a prompt so the
 * drafter sees all of it (rows of positions evaluated before attaching never exist, and
 * proposals then see a shorter window). The support model must outlive the session. */
DS4RT_API ds4rt_status ds4rt_session_attach_dspark(ds4rt_session *session, const ds4rt_dspark *dspark);

/* One DSpark proposal after the session's context, for inspection and tests: up to max_draft
 * greedy drafts following `anchor` (the token that would come next, not yet evaluated).
 * tokens[] receives *n_tokens drafts, conf[] the sigmoid confidences of the *n_conf slots
 * evaluated (the draft ends at the first below `threshold`; 0 disables), and logits, if not
 * NULL, the Markov-corrected logits of each draft (*n_tokens rows of n_vocab floats). Arrays
 * hold the block size. */
DS4RT_API ds4rt_status ds4rt_dspark_propose(ds4rt_session *session, const ds4rt_dspark *dspark, int32_t anchor,
                                            int32_t max_draft, float threshold, int32_t *tokens, int32_t *n_tokens,
                                            float *conf, int32_t *n_conf, float *logits);

/* ------------------------------------------------------------------------------------------ */
/* Speculative decoding: scheduler, draft sources, statistics                                   */
/* ------------------------------------------------------------------------------------------ */

/* A host drafter: propose up to max_draft tokens to follow `context` (n_context ids: the whole
 * context, ending with the token the drafts continue). Write them to draft[] and return their
 * count (0 = no draft; negative = error, counted). If probs is not NULL the host may fill
 * probs[i * n_vocab ...] with the distribution draft[i] was sampled from and set *have_probs to
 * 1; otherwise drafts are verified as point masses, which keeps sampling exact. */
typedef int32_t (*ds4rt_draft_fn)(void *user, const int32_t *context, size_t n_context,
                                  int32_t max_draft, int32_t *draft, float *probs,
                                  uint32_t n_vocab, int32_t *have_probs);

typedef enum ds4rt_scheduler_mode {
    DS4RT_SCHEDULER_ADAPTIVE = 0, /* cost model: draft the length that maximises tokens/s */
    DS4RT_SCHEDULER_ALWAYS = 1,   /* draft the longest allowed block every cycle */
    DS4RT_SCHEDULER_OFF = 2       /* never draft (plain decoding through the same loop) */
} ds4rt_scheduler_mode;

/* The library checks every field (generation refuses a struct outside these domains with
 * DS4RT_ERR_INVALID_ARGUMENT before anything runs): max_draft, warmup_cycles >= 0; probe_min in
 * [0, 2^20] (0 acts as 1); probe_max in [max(1, probe_min), 2^20]; history_decay and
 * confidence_weight in [0, 1]; the three fixed-model costs in [0, 1e6] with
 * verify_cost_base + verify_cost_per_token > 0. */
typedef struct ds4rt_scheduler_params {
    size_t size;             /* sizeof(ds4rt_scheduler_params) */
    ds4rt_scheduler_mode mode;
    int32_t max_draft;       /* cap on drafts per cycle; 0 = the drafter's block size */
    int32_t warmup_cycles;   /* adaptive: cycles that always draft (a 2-token probe each)
                                before the model decides (1; 4 of full blocks before 1.3) */
    int32_t probe_min;       /* adaptive: skipped cycles before a probe proposal (4); after
                                each unprofitable probe the gap at least doubles and is at
                                least what keeps probing's expected loss under 1 % of the
                                time, up to probe_max (256; 64 before 1.3) */
    int32_t probe_max;       /*   (see probe_min) */
    float history_decay;     /* adaptive: weight of the past in acceptance/cost averages (0.99;
                                0.9 in libraries before 2026-12-07) */
    float confidence_weight; /* adaptive: weight of the drafter's confidences vs history (0.5) */
    int32_t measured_costs;  /* nonzero (default): time the passes; 0: use the fixed ratios below,
                                so scheduling (and sampled output) is reproducible run to run */
    float verify_cost_base;  /* fixed model: cost of a verify pass of n tokens in decode units, */
    float verify_cost_per_token; /* base + per_token * n (defaults 0.8, 0.2) */
    float propose_cost;      /* fixed model: cost of a proposal in decode units (0.3) */
} ds4rt_scheduler_params;

/* Fills *params with the defaults of a ds4rt_scheduler_params of `size` bytes (pass sizeof *params) and sets
 * params->size = size. ds4rt_scheduler_default_params() (header-inline) returns the same by value. */
DS4RT_API ds4rt_status ds4rt_scheduler_params_init(ds4rt_scheduler_params *params, size_t size);

/* Array sizes of ds4rt_spec_stats. They are part of the 1.x layout and never change; a larger
 * capacity would come as new fields appended to the struct. */
#define DS4RT_DRAFT_HIST_LEN 17        /* histograms by draft length 0..DS4RT_MAX_DRAFT */
#define DS4RT_NO_DRAFT_REASON_COUNT 9  /* entries of ds4rt_no_draft_reason */
#define DS4RT_MAX_DRAFTER_STAGES 8     /* drafter stages timed in stage_ms */

/* Why a cycle verified no draft (indices of no_draft_by_reason). */
typedef enum ds4rt_no_draft_reason {
    DS4RT_NO_DRAFT_SCHEDULER = 0,     /* the scheduler chose not to draft */
    DS4RT_NO_DRAFT_TAIL = 1,          /* too few tokens left before max_tokens */
    DS4RT_NO_DRAFT_CONFIDENCE = 2,    /* cut by the confidence threshold at the first position */
    DS4RT_NO_DRAFT_NOT_READY = 3,     /* the drafter had no context for this position */
    DS4RT_NO_DRAFT_OP_UNAVAILABLE = 4, /* never produced: a backend op the drafter needs that
                                          the backend lacks fails the load or the first
                                          speculative generation with DS4RT_ERR_BACKEND, so no
                                          cycle runs without it. Kept so the indices (and
                                          no_draft_by_reason's layout) stay those of 1.0 */
    DS4RT_NO_DRAFT_NO_ROOM = 5,       /* the context cannot hold a verify pass */
    DS4RT_NO_DRAFT_ERROR = 6,         /* the drafter failed (host callback < 0) */
    DS4RT_NO_DRAFT_SCHEDULER_OFF = 7, /* scheduler mode OFF */
    DS4RT_NO_DRAFT_EMPTY = 8          /* the draft source returned no tokens */
} ds4rt_no_draft_reason;

/* Counters and timers of speculative decoding. The first group has ds4's stats-line names and
 * meanings (docs/DSPARK.md, "ds4's stats line"), adapted to the reference alignment.
 * Times are milliseconds. The struct only grows at its end. */
typedef struct ds4rt_spec_stats {
    size_t size;
    uint64_t cycles;               /* verify passes (with or without drafts) */
    uint64_t first_tokens;         /* = cycles (ds4 compatibility) */
    uint64_t proposed;             /* draft tokens verified */
    uint64_t accepted_draft;       /* draft tokens committed (excludes the bonus token) */
    uint64_t full;                 /* cycles that committed every draft */
    uint64_t partial;              /* cycles that committed some but not all */
    uint64_t miss_first;           /* cycles whose first draft was rejected */
    uint64_t no_draft;             /* cycles without a draft (every reason) */
    uint64_t no_room;
    uint64_t invalid;              /* draft ids outside the vocabulary (host drafters) */
    uint64_t scheduler_skips;
    uint64_t tail_skips;
    uint64_t verifier_unavailable; /* reserved, always 0: a failed verify pass is an error of
                                      the generation (counted in errors), never a fallback */
    uint64_t errors;
    /* Times in ms. propose, verify, spec_total and target are host wall-clock time; the
     * stage timers inside them (prop_* but propose, snapshot, verify_* parts, stage_ms) are
     * the backend's own time per stage: device events on a GPU (docs/GPU.md "Stage timers"). */
    double propose;                /* whole proposer */
    double prop_stage0;            /* fusion: main_proj + main_norm (+ context rows) */
    double prop_setup;             /* block assembly */
    double prop_cache;             /* drafter ring maintenance (context rows of committed tokens) */
    double prop_chain;             /* all stages */
    double prop_hidden;            /* final HC head + norm */
    double prop_conf0;             /* confidence of the first slot */
    double prop_logits;            /* base logits (target head) */
    double prop_markov;            /* Markov chain + confidences */
    double prop_confidence;        /* reserved, always 0: ds4's non-lazy confidence pass;
                                      ds4rt's lazy confidences are timed in prop_markov */
    double snapshot;               /* target frontier snapshot (inside verify) */
    double verify;                 /* verify passes */
    double verify_upload;          /* the copy of a verify pass's positions and ids in */
    double verify_layer;
    double verify_head;
    double verify_read;            /* reading a verify pass's logits rows back */
    uint64_t verify_fused_head;    /* reserved, always 0: verify passes whose output head was
                                      fused with the layers (a ds4 GPU variant; never here) */
    double replay;                 /* always 0: rollback is exact without replay */
    double spec_total;             /* whole speculative loop after the prompt */
    double target;                 /* passes that verified no draft (plain decodes) */
    double saved;                  /* accepted drafts x the running plain-decode time */
    double net_saved;              /* saved - propose - (verify - cycles x decode time) */
    uint64_t draft_len_hist[DS4RT_DRAFT_HIST_LEN];    /* cycles by drafts verified */
    uint64_t accepted_len_hist[DS4RT_DRAFT_HIST_LEN]; /* cycles by drafts committed */
    /* ds4rt additions */
    uint64_t no_draft_by_reason[DS4RT_NO_DRAFT_REASON_COUNT]; /* by ds4rt_no_draft_reason */
    uint64_t proposed_at[DS4RT_MAX_DRAFT]; /* drafts verified at position i of a block */
    uint64_t accepted_at[DS4RT_MAX_DRAFT]; /* ... and committed */
    double stage_ms[DS4RT_MAX_DRAFTER_STAGES]; /* drafter stage timers */
    uint64_t confidence_cuts;       /* drafts shortened by the threshold (any position) */
    uint64_t scheduler_trims;       /* drafts shortened by the scheduler after proposing */
    uint64_t probes;                /* adaptive: proposals made to re-measure while skipping */
    uint64_t tokens;                /* tokens generated */
    uint64_t cache_bytes;           /* Q8->F16 expansion cache bytes (see docs/CACHE.md) */
    uint64_t cache_hits;
    uint64_t cache_fallbacks;
    double decode_ms_avg;           /* scheduler's running plain-decode time */
} ds4rt_spec_stats;

/* Called after every cycle (final = 0) and once at the end of a generation (final = 1) with
 * the session's cumulative statistics. */
typedef void (*ds4rt_stats_fn)(void *user, const ds4rt_spec_stats *stats, int final);

/* One speculative cycle as the scheduler saw it (ABI 1.3; spec.on_schedule): what it planned
 * and why, then what happened. The library owns the struct; `size` is the library's sizeof, so
 * a host built with a newer header checks it before reading a field appended later. Costs are
 * the cost model's estimates when it planned: ms with measured costs, decode units with the
 * fixed model (measured_costs = 0). */
typedef struct ds4rt_schedule_event {
    size_t size;
    uint64_t cycle;            /* cycles of this generation before this one */
    int64_t position;          /* context position of the anchor */
    int32_t mode;              /* ds4rt_scheduler_mode */
    int32_t max_draft;         /* drafts this cycle could verify (block, tail, room, max_batch) */
    int32_t planned;           /* drafts asked of the drafter (0: none) */
    int32_t probe;             /* 1: a warm-up or probe proposal (a measurement, verified whole) */
    int32_t proposed;          /* drafts the drafter returned */
    int32_t verified;          /* drafts verified (after the confidence cut and the trim) */
    int32_t accepted;          /* drafts committed */
    int32_t reason;            /* ds4rt_no_draft_reason when verified == 0, else -1 */
    int32_t probe_gap;         /* adaptive: skipped cycles before the next probe, after this one */
    int32_t recalled;          /* 1: the scheduler started this generation from what an earlier
                                  one with the same drafter learned */
    double cost_decode;        /* the cost model: a plain decode, */
    double cost_propose;       /* a proposal, */
    double cost_verify;        /* a verify pass of 1 + planned tokens */
    double expected_tokens;    /* tokens the plan is expected to commit (the bonus included) */
    double rate_plan;          /* expected tokens per cost unit of the plan, */
    double rate_skip;          /* and of a plain decode */
    double acceptance[DS4RT_MAX_DRAFT]; /* per-position acceptance estimates it planned with */
    double propose_ms;         /* measured: the proposal (-1 if none), */
    double verify_ms;          /* the verify pass */
    uint64_t drafter_rows;     /* DSpark context rows computed in this cycle (fusion + KV) */
} ds4rt_schedule_event;

typedef void (*ds4rt_schedule_fn)(void *user, const ds4rt_schedule_event *event);

typedef struct ds4rt_spec_params {
    size_t size;             /* sizeof(ds4rt_spec_params) */
    ds4rt_dspark *dspark;    /* the drafter: a DSpark support model, or */
    ds4rt_draft_fn draft_fn; /* a host drafter (used when dspark is NULL) */
    void *draft_user;
    float confidence_threshold; /* DSpark: the draft ends at the first position whose
                                   confidence sigma(c_i) is below it (per position, not the
                                   cumulative product); 0 disables pruning. Default 0.5. */
    const ds4rt_scheduler_params *scheduler; /* NULL (default): ds4rt_scheduler_default_params().
                                   A pointer since ABI 1.1, so both structs can grow (1.0
                                   embedded it by value; the library still reads that layout) */
    ds4rt_stats_fn on_stats;
    void *stats_user;
    /* Fields below were appended in ABI 1.3. */
    ds4rt_schedule_fn on_schedule; /* called after every cycle with its schedule, or NULL */
    void *schedule_user;
} ds4rt_spec_params;

/* Fills *params with the defaults of a ds4rt_spec_params of `size` bytes (pass sizeof *params) and sets
 * params->size = size. ds4rt_spec_default_params() (header-inline) returns the same by value. */
DS4RT_API ds4rt_status ds4rt_spec_params_init(ds4rt_spec_params *params, size_t size);

/* Cumulative statistics of a session's speculative generations (zeros before any). */
DS4RT_API ds4rt_status ds4rt_session_spec_stats(const ds4rt_session *session, ds4rt_spec_stats *out);
DS4RT_API void ds4rt_session_reset_spec_stats(ds4rt_session *session);

/* ds4's one-line format ("ds4: DSpark stats cycles=... time_ms propose=...") followed by the
 * ds4rt fields; or JSON. Two-call pattern on buf/cap/needed. */
DS4RT_API ds4rt_status ds4rt_spec_stats_format(const ds4rt_spec_stats *stats, int json, char *buf, size_t cap,
                                               size_t *needed);

/* ------------------------------------------------------------------------------------------ */
/* Generation                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Called for every generated token; return 0 to stop generation after it. */
typedef int (*ds4rt_token_fn)(void *user, int32_t token);

typedef struct ds4rt_generate_params {
    size_t size;             /* sizeof(ds4rt_generate_params) */
    int32_t max_tokens;      /* default 128; < 0 is refused (DS4RT_ERR_INVALID_ARGUMENT) */
    int32_t stop_at_eos;     /* nonzero (default): stop after the model's EOS token */
    const ds4rt_sampler_params *sampler; /* NULL (default): greedy, ds4rt_sampler_default_params().
                                A pointer since ABI 1.1, so both structs can grow (1.0 embedded
                                it by value; the library still reads that layout) */
    ds4rt_token_fn on_token; /* optional */
    void *user;
    const ds4rt_spec_params *spec; /* speculative decoding, or NULL for plain decoding; greedy
                                      output is token for token the same either way */
} ds4rt_generate_params;

/* Fills *params with the defaults of a ds4rt_generate_params of `size` bytes (pass sizeof *params) and sets
 * params->size = size. ds4rt_generate_default_params() (header-inline) returns the same by value. */
DS4RT_API ds4rt_status ds4rt_generate_params_init(ds4rt_generate_params *params, size_t size);

/* Evaluates the prompt (appended to the context), then generates up to max_tokens tokens into
 * out[cap]; *n_out receives the count. Generation stops after an EOS (if stop_at_eos), when
 * on_token returns 0, at max_tokens, or when the context is full (then *n_out may be below
 * max_tokens and the session's position equals n_ctx). Afterwards the context holds the prompt
 * and every generated token (context permitting), and nothing else: a stop inside a block of
 * accepted drafts drops the rest of the block. Every input (the parameter structs' fields, the
 * prompt's ids and length, the drafter) is checked before the prompt is evaluated: an error
 * names the problem and leaves the context as it was. */
DS4RT_API ds4rt_status ds4rt_generate(ds4rt_session *session, const int32_t *prompt, size_t n_prompt,
                                      const ds4rt_generate_params *params, int32_t *out, size_t cap,
                                      size_t *n_out);

/* ------------------------------------------------------------------------------------------ */
/* Tokenizer and chat template (docs/TOKENIZER.md)                                              */
/*                                                                                              */
/* Byte-level BPE with the DeepSeek V4 pre-tokenizer ("joyai-llm"), giving the ids of the      */
/* published tokenizer.json under the `tokenizers` library. A ds4rt_tokenizer is immutable      */
/* once built: any number of threads may use one handle at the same time.                       */
/*                                                                                              */
/* Outputs use the two-call pattern: pass out = NULL and cap = 0 to learn the size (*n_out,     */
/* DS4RT_OK); a buffer smaller than needed gives DS4RT_ERR_OUT_OF_RANGE with *n_out still set   */
/* to the size needed (the buffer then holds a prefix). Text outputs are not NUL-terminated     */
/* unless cap exceeds the length, in which case a NUL follows the text.                        */
/* ------------------------------------------------------------------------------------------ */


/* Token types, numbered as GGUF's tokenizer.ggml.token_type. CONTROL and USER_DEFINED tokens
 * are "added tokens": they are never produced by BPE, only matched whole in text when the
 * tokenize flags ask for it, and they decode to their text as stored. */
typedef enum ds4rt_token_type {
    DS4RT_TOKEN_UNDEFINED = 0,
    DS4RT_TOKEN_NORMAL = 1,
    DS4RT_TOKEN_UNKNOWN = 2,
    DS4RT_TOKEN_CONTROL = 3,      /* tokenizer.json added token flagged "special" */
    DS4RT_TOKEN_USER_DEFINED = 4, /* tokenizer.json added token not flagged "special" */
    DS4RT_TOKEN_UNUSED = 5,
    DS4RT_TOKEN_BYTE = 6
} ds4rt_token_type;

/* A vocabulary given as plain arrays (what a GGUF holds), for hosts without a GGUF file.
 * Every string is copied: the arrays may be freed once ds4rt_tokenizer_from_arrays returns. */
typedef struct ds4rt_tokenizer_arrays {
    size_t size;                    /* sizeof(ds4rt_tokenizer_arrays) */
    uint32_t n_tokens;
    const char *const *tokens;      /* n_tokens strings: byte-level form ("\u0120the") for BPE
                                       tokens, plain text for added tokens */
    const uint32_t *token_lens;     /* their byte lengths, or NULL: NUL-terminated strings */
    const int32_t *token_types;     /* n_tokens ds4rt_token_type values, or NULL: all NORMAL */
    uint32_t n_merges;
    const char *const *merges;      /* n_merges "left right" strings, rank = index */
    const uint32_t *merge_lens;     /* their byte lengths, or NULL: NUL-terminated */
    int32_t bos_id;                 /* -1: none */
    int32_t eos_id;                 /* -1: none */
    const char *pre;                /* pre-tokenizer name: NULL or "joyai-llm" ("deepseek-v3",
                                       the same patterns, is accepted too) */
    uint32_t n_normalized_ids;      /* added tokens that tokenizers matches in its second pass */
    const int32_t *normalized_ids;  /* (tokenizer.json "normalized": true); 0/NULL: one pass */
} ds4rt_tokenizer_arrays;

/* Fills *arrays (a struct of `size` bytes: pass sizeof *arrays) with an empty description
 * (size set, ids -1, pointers NULL). ds4rt_tokenizer_arrays_default(&arrays) (header-inline)
 * does the same. */
DS4RT_API ds4rt_status ds4rt_tokenizer_arrays_init(ds4rt_tokenizer_arrays *arrays, size_t size);

/* Builds a tokenizer from arrays. DS4RT_ERR_FORMAT names the first bad entry (a merge whose
 * parts or result are not tokens, a duplicate token, an id out of range); every byte must
 * have its single-character token for text containing that byte to be encodable. */
DS4RT_API ds4rt_status ds4rt_tokenizer_from_arrays(const ds4rt_tokenizer_arrays *arrays,
                                                   ds4rt_tokenizer **out);

/* Builds a tokenizer from the tokenizer.* metadata of an open GGUF file: tokenizer.ggml.model
 * "gpt2", tokenizer.ggml.pre, .tokens, .token_type, .merges, .bos_token_id, .eos_token_id and,
 * when present, tokenizer.ds4rt.normalized_ids. The GGUF may be closed afterwards. */
DS4RT_API ds4rt_status ds4rt_tokenizer_from_gguf(const ds4rt_gguf *gguf, ds4rt_tokenizer **out);

DS4RT_API void ds4rt_tokenizer_free(ds4rt_tokenizer *tok);

DS4RT_API uint32_t ds4rt_tokenizer_n_tokens(const ds4rt_tokenizer *tok);
DS4RT_API uint32_t ds4rt_tokenizer_n_merges(const ds4rt_tokenizer *tok);
/* BOS / EOS ids, -1 if the vocabulary has none. */
DS4RT_API int32_t ds4rt_tokenizer_bos(const ds4rt_tokenizer *tok);
DS4RT_API int32_t ds4rt_tokenizer_eos(const ds4rt_tokenizer *tok);
/* Longest decoded text of one token, in bytes (sizes streaming buffers). */
DS4RT_API size_t ds4rt_tokenizer_max_token_bytes(const ds4rt_tokenizer *tok);

/* Stored string of token `id` (byte-level form for BPE tokens; see ds4rt_tokenizer_arrays),
 * valid while the tokenizer lives; and its ds4rt_token_type. DS4RT_ERR_OUT_OF_RANGE for a bad
 * id. */
DS4RT_API ds4rt_status ds4rt_tokenizer_token(const ds4rt_tokenizer *tok, int32_t id,
                                             const char **text, size_t *len, int32_t *type);

/* Id of the token whose stored string is exactly text[0..len); DS4RT_ERR_NOT_FOUND if none. */
DS4RT_API ds4rt_status ds4rt_tokenizer_find(const ds4rt_tokenizer *tok, const char *text,
                                            size_t len, int32_t *id);

/* Flags of ds4rt_tokenize (OR them). By default text is plain text: added-token strings such
 * as "<think>" in it are encoded by BPE like any other text, so user text cannot inject
 * control tokens. PARSE_SPECIAL = what tokenizers' encode() does. */
typedef enum ds4rt_tokenize_flags {
    DS4RT_TOKENIZE_PARSE_CONTROL = 1,      /* match CONTROL tokens ("special" added tokens) */
    DS4RT_TOKENIZE_PARSE_USER_DEFINED = 2, /* match USER_DEFINED tokens (<think>, <｜User｜>) */
    DS4RT_TOKENIZE_PARSE_SPECIAL = 3,      /* both */
    DS4RT_TOKENIZE_STRICT_UTF8 = 4,        /* invalid UTF-8 is an error instead of U+FFFD */
    DS4RT_TOKENIZE_ADD_BOS = 8             /* prepend the BOS id */
} ds4rt_tokenize_flags;

/* Largest text ds4rt_tokenize accepts, in bytes (2^31 - 1). */
#define DS4RT_TOKENIZE_MAX_BYTES 2147483647

/* Encodes text[0..len) (UTF-8) into token ids. Each maximal invalid UTF-8 subsequence is read
 * as U+FFFD (as Python's bytes.decode(errors="replace")), unless DS4RT_TOKENIZE_STRICT_UTF8.
 * The ids never outnumber 3 * len (+1 with ADD_BOS); for valid UTF-8 they never outnumber len
 * (+1). Two-call pattern on ids/cap/n_ids. */
DS4RT_API ds4rt_status ds4rt_tokenize(const ds4rt_tokenizer *tok, const char *text, size_t len,
                                      uint32_t flags, int32_t *ids, size_t cap, size_t *n_ids);

/* The pieces BPE sees: the end offset of each piece, in order (pieces are contiguous and
 * cover the text; matched added tokens are pieces too). Offsets index the text after U+FFFD
 * substitution, i.e. the input itself when it is valid UTF-8. Flags as ds4rt_tokenize (ADD_BOS
 * ignored). Two-call pattern on ends/cap/n_pieces. */
DS4RT_API ds4rt_status ds4rt_tokenizer_split(const ds4rt_tokenizer *tok, const char *text,
                                             size_t len, uint32_t flags, size_t *ends, size_t cap,
                                             size_t *n_pieces);

/* Flags of ds4rt_detokenize and the streaming decoder. */
typedef enum ds4rt_detokenize_flags {
    DS4RT_DETOKENIZE_SKIP_CONTROL = 1,   /* leave out CONTROL tokens (BOS, EOS, ...) */
    DS4RT_DETOKENIZE_REPLACE_INVALID = 2 /* ds4rt_detokenize: make the output valid UTF-8,
                                            each maximal invalid subsequence -> U+FFFD */
} ds4rt_detokenize_flags;

/* The bytes of ids[0..n) concatenated (BPE tokens byte-level decoded, added tokens as
 * stored). Without REPLACE_INVALID the bytes are exact and may hold invalid or cut UTF-8.
 * DS4RT_ERR_OUT_OF_RANGE names the first id outside [0, n_tokens). Two-call pattern. */
DS4RT_API ds4rt_status ds4rt_detokenize(const ds4rt_tokenizer *tok, const int32_t *ids, size_t n,
                                        uint32_t flags, char *out, size_t cap, size_t *out_len);

/* Streaming decoder: turns ids into text one at a time and only ever hands out complete,
 * valid UTF-8. Bytes of a character split across tokens are held until it completes; a byte
 * sequence that can no longer become valid is replaced by U+FFFD (one per maximal invalid
 * subsequence, as Python's decode(errors="replace")), so the concatenated output of all
 * pushes and the final flush equals decoding the whole id sequence at once with
 * DS4RT_DETOKENIZE_REPLACE_INVALID. The stream keeps a pointer to `tok`. One thread at a time. */
typedef struct ds4rt_detok_stream ds4rt_detok_stream;

DS4RT_API ds4rt_status ds4rt_detok_stream_create(const ds4rt_tokenizer *tok, uint32_t flags,
                                                 ds4rt_detok_stream **out);
DS4RT_API void ds4rt_detok_stream_free(ds4rt_detok_stream *stream);
/* Feeds one id and writes the text it completes (possibly none). A buffer of
 * 3 * (ds4rt_tokenizer_max_token_bytes() + 4) bytes always suffices. If out is too small the
 * id is NOT consumed (DS4RT_ERR_OUT_OF_RANGE, *out_len = bytes needed): retry with more room. */
DS4RT_API ds4rt_status ds4rt_detok_stream_push(ds4rt_detok_stream *stream, int32_t id, char *out,
                                               size_t cap, size_t *out_len);
/* Ends the stream: held bytes of an unfinished character come out as U+FFFD (at most 3
 * bytes). The stream is then empty and can be reused. */
DS4RT_API ds4rt_status ds4rt_detok_stream_flush(ds4rt_detok_stream *stream, char *out, size_t cap,
                                                size_t *out_len);
/* Bytes currently held back (0..3). */
DS4RT_API size_t ds4rt_detok_stream_pending(const ds4rt_detok_stream *stream);

/* Chat template: the prompt rendering ds4 uses for DeepSeek V4 Flash.
 *   BOS [Think-Max prefix] [system texts joined by "\n\n"], then per turn
 *   user      -> <｜User｜>text
 *   tool      -> [<｜User｜> unless right after another tool result]<tool_result>text</tool_result>
 *   assistant -> [<｜Assistant｜> + (</think> | <think>reasoning</think>)]text<｜end▁of▁sentence｜>
 *                (the marker part only when a user/tool turn precedes it; with thinking on, the
 *                reasoning is kept for turns after the last user turn, or for every turn in a
 *                tool context, else only </think>; with thinking off always </think>)
 *   generation prompt -> <｜Assistant｜><think> (thinking) or <｜Assistant｜></think>
 * System messages are gathered wherever they appear. "</tool_result>" inside a tool result is
 * escaped as "&lt;/tool_result>". */
typedef enum ds4rt_chat_role {
    DS4RT_ROLE_SYSTEM = 0,
    DS4RT_ROLE_USER = 1,
    DS4RT_ROLE_ASSISTANT = 2,
    DS4RT_ROLE_TOOL = 3
} ds4rt_chat_role;

typedef enum ds4rt_think_mode {
    DS4RT_THINK_NONE = 0, /* answer directly: </think> */
    DS4RT_THINK_HIGH = 1, /* think: <think> */
    DS4RT_THINK_MAX = 2   /* think, with the "Reasoning Effort: Absolute maximum" prefix after
                             BOS; DeepSeek recommends it only with a context >= 393216 */
} ds4rt_think_mode;

/* Frozen layout: passed as an array, whose stride cannot carry a version. */
typedef struct ds4rt_chat_message {
    int32_t role;          /* ds4rt_chat_role */
    const char *content;   /* UTF-8, content_len bytes (NULL if 0) */
    size_t content_len;
    const char *reasoning; /* assistant turns: the reasoning text; NULL/0 if none */
    size_t reasoning_len;
} ds4rt_chat_message;

typedef struct ds4rt_chat_options {
    size_t size;                   /* sizeof(ds4rt_chat_options) */
    int32_t think;                 /* ds4rt_think_mode; default DS4RT_THINK_NONE */
    int32_t add_generation_prompt; /* default 1: end with the assistant prefix when the last
                                      turn is a user or tool turn */
    int32_t tool_context;          /* nonzero: keep every assistant turn's reasoning, as in
                                      tool-use conversations (a tool message implies it) */
    uint32_t content_flags;        /* ds4rt_tokenize flags used on message text by
                                      ds4rt_chat_render_ids; default 0 (markers in text stay
                                      plain text) */
} ds4rt_chat_options;

/* Fills *options (a struct of `size` bytes: pass sizeof *options) with the defaults.
 * ds4rt_chat_options_default(&options) (header-inline) does the same. */
DS4RT_API ds4rt_status ds4rt_chat_options_init(ds4rt_chat_options *options, size_t size);

/* Renders messages to prompt text (UTF-8). options may be NULL (defaults). Two-call pattern. */
DS4RT_API ds4rt_status ds4rt_chat_render(const ds4rt_chat_message *messages, size_t n_messages,
                                         const ds4rt_chat_options *options, char *out, size_t cap,
                                         size_t *out_len);

/* Renders messages to token ids: template markers by id (DS4RT_ERR_NOT_FOUND if the
 * vocabulary lacks one), the text between them encoded as one span each with
 * options->content_flags. Two-call pattern. */
DS4RT_API ds4rt_status ds4rt_chat_render_ids(const ds4rt_tokenizer *tok,
                                             const ds4rt_chat_message *messages, size_t n_messages,
                                             const ds4rt_chat_options *options, int32_t *ids,
                                             size_t cap, size_t *n_ids);

/* ------------------------------------------------------------------------------------------ */
/* Compute backends and what they run (docs/ARCHITECTURE.md, "The backend seam")               */
/*                                                                                              */
/* A backend implements ds4rt's table of DeepSeek V4 operations (embedding rows, hyper-         */
/* connections, norms, matrix products per weight type, attention, compressors, indexer, MoE,   */
/* ...). A model loads only on a backend that runs every op and type it needs; these calls let  */
/* a host ask before loading. Added in ABI 1.1.                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct ds4rt_backend_info {
    size_t size;             /* set by the caller to sizeof(ds4rt_backend_info) */
    char name[DS4RT_BACKEND_NAME_LEN]; /* "cpu", "cuda", "hip" */
    int32_t kind;            /* ds4rt_backend_kind */
    int32_t n_devices;       /* devices it can run on now (the CPU: 1) */
    uint32_t ops_version;    /* version of the op table it implements */
} ds4rt_backend_info;

/* Number of backends compiled into this build (the CPU is always index 0). */
DS4RT_API size_t ds4rt_backend_count(void);
DS4RT_API ds4rt_status ds4rt_backend_get_info(size_t index, ds4rt_backend_info *out);

/* The op table's ops are numbered 0 .. ds4rt_backend_op_count() - 1; their names ("matmul",
 * "attention", ...) are stable. NULL for an index out of range. */
DS4RT_API uint32_t ds4rt_backend_op_count(void);
DS4RT_API const char *ds4rt_backend_op_name(uint32_t op);

/* *supported = 1 if the backend of `kind` (on `device`) runs `op` with weights of GGUF type
 * `type` (ds4rt_qtype; DS4RT_TYPE_F32 for ops without weights), else 0. DS4RT_ERR_BACKEND for a
 * backend this build lacks or a device it does not see. */
DS4RT_API ds4rt_status ds4rt_backend_supports(int32_t kind, int32_t device, uint32_t op, uint32_t type,
                                              int *supported);

/* ------------------------------------------------------------------------------------------ */
/* GPU devices (a GPU backend is present only when built with -Dgpu=cuda or -Dgpu=hip)        */
/* ------------------------------------------------------------------------------------------ */

/* Number of GPUs visible to the compiled-in GPU backend; 0 (and DS4RT_OK) in a CPU-only build.
 * DS4RT_ERR_BACKEND if a GPU build cannot talk to the driver (e.g. no driver installed). */
DS4RT_API ds4rt_status ds4rt_gpu_device_count(int *count);

/* Writes "name (cc X.Y, N SMs, M GiB)" of GPU `device` into buf. DS4RT_ERR_BACKEND in a
 * CPU-only build. */
DS4RT_API ds4rt_status ds4rt_gpu_device_name(int device, char *buf, size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Default initialisers (header-inline)                                                         */
/*                                                                                              */
/* They pass this header's sizeof to the *_init() calls, so the library fills exactly the      */
/* struct the caller has, whichever header it was built with. (ABI 1.0 exported these names as */
/* library functions; the library still does, for 1.0 binaries, with the 1.0 layouts.)        */
/* ------------------------------------------------------------------------------------------ */

#if !defined(DS4RT_BUILDING) /* ds4rt:inline-defaults (binding generators: skip to #endif) */
static inline ds4rt_model_params ds4rt_model_default_params(void) {
    ds4rt_model_params p;
    (void)ds4rt_model_params_init(&p, sizeof p);
    return p;
}

static inline ds4rt_session_params ds4rt_session_default_params(void) {
    ds4rt_session_params p;
    (void)ds4rt_session_params_init(&p, sizeof p);
    return p;
}

static inline ds4rt_memory_params ds4rt_memory_default_params(void) {
    ds4rt_memory_params p;
    (void)ds4rt_memory_params_init(&p, sizeof p);
    return p;
}

static inline ds4rt_sampler_params ds4rt_sampler_default_params(void) {
    ds4rt_sampler_params p;
    (void)ds4rt_sampler_params_init(&p, sizeof p);
    return p;
}

static inline ds4rt_dspark_params ds4rt_dspark_default_params(void) {
    ds4rt_dspark_params p;
    (void)ds4rt_dspark_params_init(&p, sizeof p);
    return p;
}

static inline ds4rt_scheduler_params ds4rt_scheduler_default_params(void) {
    ds4rt_scheduler_params p;
    (void)ds4rt_scheduler_params_init(&p, sizeof p);
    return p;
}

static inline ds4rt_spec_params ds4rt_spec_default_params(void) {
    ds4rt_spec_params p;
    (void)ds4rt_spec_params_init(&p, sizeof p);
    return p;
}

static inline ds4rt_generate_params ds4rt_generate_default_params(void) {
    ds4rt_generate_params p;
    (void)ds4rt_generate_params_init(&p, sizeof p);
    return p;
}

static inline void ds4rt_tokenizer_arrays_default(ds4rt_tokenizer_arrays *arrays) {
    (void)ds4rt_tokenizer_arrays_init(arrays, sizeof *arrays);
}
static inline void ds4rt_chat_options_default(ds4rt_chat_options *options) {
    (void)ds4rt_chat_options_init(options, sizeof *options);
}
#endif /* ds4rt:inline-defaults */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DS4RT_H */
