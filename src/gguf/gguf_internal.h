/*
 * gguf_internal.h - the GGUF reader's handle and the pieces its files share: a bounds-checked
 * cursor over the file image, the name index, and the parse stages called by gguf_open.c.
 * Not installed; nothing here is exported.
 */
#ifndef DS4RT_GGUF_INTERNAL_H
#define DS4RT_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* Deepest nesting of arrays inside arrays that the reader accepts (a record's own array is
 * depth 1). Bounds the recursion of validation and indexing. */
#define GGUF_MAX_NESTING 16

/* Data alignment when the file has no general.alignment key. */
#define GGUF_DEFAULT_ALIGNMENT 32u

/* Smallest possible encodings, used to reject counts that cannot fit in the bytes left:
 * a metadata record is key length (8) + type (4) + a 1-byte value; a tensor info is name
 * length (8) + n_dims (4) + type (4) + offset (8); an array header is type (4) + count (8). */
#define GGUF_MIN_KV_BYTES 13u
#define GGUF_MIN_TENSOR_INFO_BYTES 24u
#define GGUF_ARRAY_HEADER_BYTES 12u

/* Open-addressing hash index from names to record numbers. */
typedef struct gguf_name_index {
    uint64_t *slots; /* record number + 1; 0 marks an empty slot */
    uint64_t mask;   /* capacity - 1 (capacity is a power of two) */
    uint64_t seed;   /* per-open hash seed, so hostile names cannot be precomputed to collide */
} gguf_name_index;

struct ds4rt_gguf {
    const uint8_t *base; /* the file image */
    uint64_t size;
    size_t map_len;      /* nonzero if base is our own mmap to unmap on close */
    void *owned;         /* non-NULL if base is our own copy of the file, freed on close */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    ds4rt_gguf_kv *kvs;
    uint64_t n_kv;
    ds4rt_gguf_tensor *tensors;
    uint64_t n_tensors;
    gguf_name_index kv_index;
    gguf_name_index tensor_index;
    bool header_only;    /* opened for its header only (ds4rt_gguf_open_header): tensor data
                            may lie past the end of the file and every tensor's data is NULL */
};

/* A read position in the file image; invariant pos <= size. Reads fail (return false) instead
 * of running past the end. */
typedef struct gguf_cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
} gguf_cursor;

static inline uint64_t gguf_left(const gguf_cursor *c) { return c->size - c->pos; }

static inline bool gguf_read_u32(gguf_cursor *c, uint32_t *v) {
    if (gguf_left(c) < 4) return false;
    memcpy(v, c->base + c->pos, 4);
    c->pos += 4;
    return true;
}

static inline bool gguf_read_u64(gguf_cursor *c, uint64_t *v) {
    if (gguf_left(c) < 8) return false;
    memcpy(v, c->base + c->pos, 8);
    c->pos += 8;
    return true;
}

static inline bool gguf_skip(gguf_cursor *c, uint64_t n) {
    if (gguf_left(c) < n) return false;
    c->pos += n;
    return true;
}

/* Unaligned little-endian loads from already validated bytes. */
static inline uint32_t gguf_load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t gguf_load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Byte size of a fixed-size metadata value type; 0 for STRING and ARRAY; -1 for an id that is
 * not a GGUF value type. */
int gguf_value_size(uint32_t type);

/* A name from the file rendered for an error message: printable ASCII kept, other bytes as
 * \xNN, cut to a bounded length with "...". */
typedef struct gguf_qname {
    char s[200];
} gguf_qname;
void gguf_quote(gguf_qname *q, const char *name, uint64_t len);

/* --- name index (gguf_index.c) --- */

typedef ds4rt_str (*gguf_name_at_fn)(const ds4rt_gguf *g, uint64_t i);

typedef enum gguf_index_result {
    GGUF_INDEX_OK,
    GGUF_INDEX_DUPLICATE, /* *first and *dup name the two records */
    GGUF_INDEX_NO_MEMORY
} gguf_index_result;

/* Indexes records 0..n-1 by name_at(g, i). */
gguf_index_result gguf_index_build(gguf_name_index *ix, const ds4rt_gguf *g, uint64_t n,
                                   gguf_name_at_fn name_at, uint64_t *first, uint64_t *dup);
/* Record number with this name, or UINT64_MAX. */
uint64_t gguf_index_find(const gguf_name_index *ix, const ds4rt_gguf *g, gguf_name_at_fn name_at,
                         const char *name, uint64_t len);
void gguf_index_free(gguf_name_index *ix);

ds4rt_str gguf_kv_name_at(const ds4rt_gguf *g, uint64_t i);
ds4rt_str gguf_tensor_name_at(const ds4rt_gguf *g, uint64_t i);

/* --- parse stages, in the order gguf_open.c runs them --- */

/* Validates n_kv metadata records from c->pos on, fills g->kvs/g->n_kv and indexes them
 * (duplicate keys are an error). */
ds4rt_status gguf_parse_metadata(ds4rt_gguf *g, gguf_cursor *c, uint64_t n_kv);
/* Frees the element indexes of g's records. */
void gguf_free_metadata(ds4rt_gguf *g);

/* Validates n tensor-info records from c->pos on, fills g->tensors/g->n_tensors and indexes
 * their names (duplicates are an error). */
ds4rt_status gguf_parse_tensor_infos(ds4rt_gguf *g, gguf_cursor *c, uint64_t n);
/* With g->data_offset and g->alignment set: sizes, alignment, bounds and overlaps of the
 * tensors' data; sets their data pointers. */
ds4rt_status gguf_place_tensors(ds4rt_gguf *g);

#endif /* DS4RT_GGUF_INTERNAL_H */
