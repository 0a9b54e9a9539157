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

typedef struct ds4rt_tokenizer ds4rt_tokenizer;

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

/* Fills *arrays with an empty description (size set, ids -1, pointers NULL). */
DS4RT_API void ds4rt_tokenizer_arrays_default(ds4rt_tokenizer_arrays *arrays);

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

DS4RT_API void ds4rt_chat_options_default(ds4rt_chat_options *options);

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
