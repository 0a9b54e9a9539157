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
/* Models and sessions (the deepseek4 target)                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct ds4rt_model ds4rt_model;     /* read-only after load; shareable across threads */
typedef struct ds4rt_session ds4rt_session; /* one context; use from one thread at a time */

/* Numerics of the target. The official model was trained with quantisation-aware inference:
 * an FP8 (E4M3) round trip of the KV rows' non-RoPE dims and an FP4 (E2M1) round trip of the
 * indexer's q and k after the Hadamard rotation. llama.cpp (b11739) omits both; LLAMACPP turns
 * them off so results can be compared with llama.cpp ("llama.cpp-compatible numerics"). */
typedef enum ds4rt_numerics {
    DS4RT_NUMERICS_OFFICIAL = 0,
    DS4RT_NUMERICS_LLAMACPP = 1
} ds4rt_numerics;

typedef struct ds4rt_model_params {
    size_t size;             /* sizeof(ds4rt_model_params), set by ds4rt_model_default_params */
    int32_t n_threads;       /* CPU threads; <= 0: one per CPU the process may run on */
    ds4rt_numerics numerics;
} ds4rt_model_params;

DS4RT_API ds4rt_model_params ds4rt_model_default_params(void);

/* Maps and validates a deepseek4 GGUF. Errors name the key or tensor at fault. */
DS4RT_API ds4rt_status ds4rt_model_load(const char *path, const ds4rt_model_params *params,
                                        ds4rt_model **out);
DS4RT_API void ds4rt_model_free(ds4rt_model *model);

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
} ds4rt_model_info;

DS4RT_API ds4rt_status ds4rt_model_get_info(const ds4rt_model *model, ds4rt_model_info *out);

typedef struct ds4rt_session_params {
    size_t size;             /* sizeof(ds4rt_session_params), set by the default initialiser */
    int64_t n_ctx;           /* maximum tokens in context (default 4096) */
    uint32_t max_batch;      /* tokens per forward pass: the prefill chunk and the widest
                                speculative verify (default 32) */
} ds4rt_session_params;

DS4RT_API ds4rt_session_params ds4rt_session_default_params(void);
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

typedef struct ds4rt_sampler ds4rt_sampler;

DS4RT_API ds4rt_sampler_params ds4rt_sampler_default_params(void);
DS4RT_API ds4rt_status ds4rt_sampler_create(const ds4rt_sampler_params *params, uint32_t n_vocab,
                                            ds4rt_sampler **out);
DS4RT_API void ds4rt_sampler_free(ds4rt_sampler *sampler);
/* Draws a token from logits[n_vocab]. */
DS4RT_API ds4rt_status ds4rt_sampler_sample(ds4rt_sampler *sampler, const float *logits,
                                            int32_t *token);
/* The distribution sample() draws from (n_vocab probabilities; zero outside the kept set). */
DS4RT_API ds4rt_status ds4rt_sampler_probs(ds4rt_sampler *sampler, const float *logits, float *probs);

/* ------------------------------------------------------------------------------------------ */
/* Generation                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Called for every generated token; return 0 to stop generation after it. */
typedef int (*ds4rt_token_fn)(void *user, int32_t token);

typedef struct ds4rt_generate_params {
    size_t size;             /* sizeof(ds4rt_generate_params) */
    int32_t max_tokens;      /* default 128 */
    int32_t stop_at_eos;     /* nonzero (default): stop after the model's EOS token */
    ds4rt_sampler_params sampler;
    ds4rt_token_fn on_token; /* optional */
    void *user;
} ds4rt_generate_params;

DS4RT_API ds4rt_generate_params ds4rt_generate_default_params(void);

/* Evaluates the prompt (appended to the context), then generates up to max_tokens tokens into
 * out[cap]; *n_out receives the count. */
DS4RT_API ds4rt_status ds4rt_generate(ds4rt_session *session, const int32_t *prompt, size_t n_prompt,
                                      const ds4rt_generate_params *params, int32_t *out, size_t cap,
                                      size_t *n_out);
/* CPU tensor ops: dequantisation and quantised matrix products (docs/QUANTS.md)              */
/* ------------------------------------------------------------------------------------------ */
/* Types computed: F32, F16, BF16, Q8_0, Q4_0, MXFP4, Q2_K, Q4_K, Q5_K, Q6_K, IQ2_XXS (see     */
/* ds4rt_type_info.compute). Results are bitwise the same on every CPU path (scalar, AVX2,    */
/* AVX-512, NEON), for any batch size and thread count.                                        */

/* Dequantises n elements (a whole number of blocks) of `type` at src into dst[n] (f32), bit-exact
 * with gguf-py's dequantize(). DS4RT_ERR_UNSUPPORTED for a type the CPU backend does not compute,
 * DS4RT_ERR_INVALID_ARGUMENT for a partial block or a NULL pointer. */
DS4RT_API ds4rt_status ds4rt_dequantize(uint32_t type, const void *src, int64_t n, float *dst);

/* y[t*rows + r] = sum_c W[r][c] * x[t*cols + c] for t < n_tok, W[rows][cols] stored as GGUF rows of
 * `type` (row r at w + r * row bytes). Each activation row is first rounded to the type paired with
 * the weight (see ds4rt_quantize_activation). Uses a process-wide pool of n_threads threads
 * (<= 0: one per CPU the process may run on), recreated when n_threads changes; concurrent calls
 * are serialised. For hosts and tests; the runtime itself calls the internal matmul. */
DS4RT_API ds4rt_status ds4rt_matmul_host(uint32_t type, const void *w, int64_t rows, int64_t cols,
                                         const float *x, int64_t n_tok, float *y, int n_threads);

/* Rounds an activation row x[n] exactly as ds4rt_matmul_host does for weights of weight_type:
 * Q8_0/Q4_0/MXFP4 pair with Q8_0 (blocks of 32), K-quants and IQ2_XXS with Q8_K (blocks of 256):
 * q[n] receives the int8 values and scales[n/32 or n/256] the f32 block scales (x ~ scale*q).
 * F32/F16/BF16 pair with float activations rounded to that type: scales[n] receives the rounded
 * values and q is not used (may be NULL). */
DS4RT_API ds4rt_status ds4rt_quantize_activation(uint32_t weight_type, const float *x, int64_t n,
                                                 int8_t *q, float *scales);

/* Name of the CPU kernel path in use: "scalar", "avx2", "avx512", "neon" or "neon-dotprod". Chosen
 * at first use from the CPU's features, or by the environment variable DS4RT_CPU_ISA. */
DS4RT_API const char *ds4rt_cpu_isa(void);

/* Nonzero if path `name` (or "auto") is compiled in and this CPU can run it. */
DS4RT_API int ds4rt_cpu_isa_supported(const char *name);

/* Switches the CPU kernel path ("auto" = the widest this CPU runs). Call while no product runs.
 * DS4RT_ERR_UNSUPPORTED if this CPU cannot run it, DS4RT_ERR_INVALID_ARGUMENT for an unknown name. */
DS4RT_API ds4rt_status ds4rt_cpu_isa_set(const char *name);

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
