/* gguf_metadata.c - validation of the metadata key/value records, and the element index that
 * makes element i of a STRING array (or of an array of arrays, at any depth) O(1) to reach.
 *
 * Validation walks every value once with bounds checks and computes how many index words the
 * record needs; only then is the index allocated (its size is bounded by the bytes already
 * walked) and filled by a second walk over the now trusted bytes.
 *
 * Index layout for an array of n variable-size elements (see elem_index in ds4rt.h):
 *   STRING elements: words [0, n) are the byte offsets of the elements from the first one.
 *   ARRAY elements:  words [0, n) are the byte offsets of the elements' headers; word n + i is
 *                    the distance in words from this block to element i's own index block,
 *                    or 0 if element i holds fixed-size values and needs none. Child blocks
 *                    always follow their parent's block in the same allocation. */
#include <stdlib.h>

#include "gguf_internal.h"

/* Who a message is about: the record being validated. */
typedef struct record_ctx {
    uint64_t record;
    uint64_t offset;
    gguf_qname key;
} record_ctx;

static ds4rt_status record_fail(const record_ctx *r, ds4rt_status st) {
    return ds4rt_fail_context(st, "metadata key '%s' (record %llu at byte %llu)", r->key.s,
                              (unsigned long long)r->record, (unsigned long long)r->offset);
}

static const char *type_name_or(uint32_t type) {
    const char *n = ds4rt_gguf_type_name(type);
    return n ? n : "unknown";
}

static ds4rt_status check_elements(gguf_cursor *c, uint64_t array_at, uint32_t type, uint64_t n,
                                   int depth, const record_ctx *r, uint64_t *index_words);

/* Validates an array header (element type, count) and its elements at c->pos. */
static ds4rt_status check_array(gguf_cursor *c, int depth, const record_ctx *r,
                                uint64_t *index_words) {
    uint64_t at = c->pos;
    uint32_t elem_type;
    uint64_t n;
    if (depth > GGUF_MAX_NESTING) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "array at byte %llu is nested deeper than %d levels",
                   (unsigned long long)at, GGUF_MAX_NESTING);
        return record_fail(r, DS4RT_ERR_FORMAT);
    }
    if (!gguf_read_u32(c, &elem_type) || !gguf_read_u64(c, &n)) {
        ds4rt_fail(DS4RT_ERR_FORMAT,
                   "array header at byte %llu is truncated (12 bytes needed, %llu left)",
                   (unsigned long long)at, (unsigned long long)(c->size - at));
        return record_fail(r, DS4RT_ERR_FORMAT);
    }
    if (gguf_value_size(elem_type) < 0) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "array at byte %llu has unknown element type %u",
                   (unsigned long long)at, elem_type);
        return record_fail(r, DS4RT_ERR_FORMAT);
    }
    return check_elements(c, at, elem_type, n, depth, r, index_words);
}

/* Validates the n elements of `type` at c->pos of the array whose header is at byte
 * `array_at`, at nesting `depth`. */
static ds4rt_status check_elements(gguf_cursor *c, uint64_t array_at, uint32_t type, uint64_t n,
                                   int depth, const record_ctx *r, uint64_t *index_words) {
    const uint64_t at = array_at;
    int size = gguf_value_size(type);
    /* Each element takes at least this many bytes: reject impossible counts up front. */
    uint64_t min_bytes = size > 0                       ? (uint64_t)size
                         : type == DS4RT_GGUF_STRING ? 8u
                                                     : GGUF_ARRAY_HEADER_BYTES;
    if (n > gguf_left(c) / min_bytes) {
        ds4rt_fail(DS4RT_ERR_FORMAT,
                   "array at byte %llu declares %llu %s elements, which cannot fit in the %llu "
                   "bytes left in the file (each takes at least %llu)",
                   (unsigned long long)at, (unsigned long long)n, type_name_or(type),
                   (unsigned long long)gguf_left(c), (unsigned long long)min_bytes);
        return record_fail(r, DS4RT_ERR_FORMAT);
    }
    if (size > 0) {
        c->pos += n * (uint64_t)size; /* no overflow: n * size <= bytes left */
        return DS4RT_OK;
    }
    if (type == DS4RT_GGUF_STRING) {
        *index_words += n;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t el = c->pos, len;
            if (!gguf_read_u64(c, &len) || !gguf_skip(c, len)) {
                ds4rt_fail(DS4RT_ERR_FORMAT,
                           "string element %llu of the array at byte %llu: length at byte %llu "
                           "runs past the end of the file (%llu bytes)",
                           (unsigned long long)i, (unsigned long long)at, (unsigned long long)el,
                           (unsigned long long)c->size);
                return record_fail(r, DS4RT_ERR_FORMAT);
            }
        }
        return DS4RT_OK;
    }
    *index_words += 2 * n;
    for (uint64_t i = 0; i < n; i++) {
        ds4rt_status st = check_array(c, depth + 1, r, index_words);
        if (st != DS4RT_OK) return st;
    }
    return DS4RT_OK;
}

/* Validates the value of `type` at c->pos, advancing past it. */
static ds4rt_status check_value(gguf_cursor *c, uint32_t type, const record_ctx *r,
                                uint64_t *index_words) {
    uint64_t at = c->pos;
    int size = gguf_value_size(type);
    if (size < 0) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "unknown value type %u at byte %llu", type,
                   (unsigned long long)(at - 4));
        return record_fail(r, DS4RT_ERR_FORMAT);
    }
    if (size > 0) {
        if (!gguf_skip(c, (uint64_t)size)) {
            ds4rt_fail(DS4RT_ERR_FORMAT, "%s value at byte %llu is truncated (%d bytes needed, "
                       "%llu left)", type_name_or(type), (unsigned long long)at, size,
                       (unsigned long long)gguf_left(c));
            return record_fail(r, DS4RT_ERR_FORMAT);
        }
        return DS4RT_OK;
    }
    if (type == DS4RT_GGUF_STRING) {
        uint64_t len;
        if (!gguf_read_u64(c, &len) || !gguf_skip(c, len)) {
            ds4rt_fail(DS4RT_ERR_FORMAT,
                       "string value at byte %llu runs past the end of the file (%llu bytes)",
                       (unsigned long long)at, (unsigned long long)c->size);
            return record_fail(r, DS4RT_ERR_FORMAT);
        }
        return DS4RT_OK;
    }
    return check_array(c, 1, r, index_words);
}

/* Fills the index block `blk` of n validated elements of `type` (STRING or ARRAY) starting at
 * `elems`; child blocks are carved from *next. Returns the bytes the elements occupy. */
static uint64_t fill_index(const uint8_t *elems, uint32_t type, uint64_t n, uint64_t *blk,
                           uint64_t **next) {
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        blk[i] = pos;
        if (type == DS4RT_GGUF_STRING) {
            pos += 8 + gguf_load_u64(elems + pos);
            continue;
        }
        uint32_t sub_type = gguf_load_u32(elems + pos);
        uint64_t sub_n = gguf_load_u64(elems + pos + 4);
        pos += GGUF_ARRAY_HEADER_BYTES;
        int size = gguf_value_size(sub_type);
        if (size > 0) {
            blk[n + i] = 0;
            pos += sub_n * (uint64_t)size;
        } else {
            uint64_t *child = *next;
            *next += sub_type == DS4RT_GGUF_STRING ? sub_n : 2 * sub_n;
            blk[n + i] = (uint64_t)(child - blk);
            pos += fill_index(elems + pos, sub_type, sub_n, child, next);
        }
    }
    return pos;
}

/* Parses record `i` at c->pos into *kv. */
static ds4rt_status parse_record(ds4rt_gguf *g, gguf_cursor *c, uint64_t i, ds4rt_gguf_kv *kv) {
    record_ctx r = {.record = i, .offset = c->pos};
    uint64_t key_len;
    if (!gguf_read_u64(c, &key_len)) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "metadata record %llu at byte %llu: key length is truncated (8 bytes "
                          "needed, %llu left)",
                          (unsigned long long)i, (unsigned long long)r.offset,
                          (unsigned long long)gguf_left(c));
    }
    if (key_len > gguf_left(c)) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "metadata record %llu at byte %llu: key length %llu runs past the end "
                          "of the file (%llu bytes left)",
                          (unsigned long long)i, (unsigned long long)r.offset,
                          (unsigned long long)key_len, (unsigned long long)gguf_left(c));
    }
    const char *key = (const char *)c->base + c->pos;
    c->pos += key_len;
    gguf_quote(&r.key, key, key_len);
    uint32_t type;
    if (!gguf_read_u32(c, &type)) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "value type at byte %llu is truncated",
                   (unsigned long long)c->pos);
        return record_fail(&r, DS4RT_ERR_FORMAT);
    }
    uint64_t value_at = c->pos, index_words = 0;
    ds4rt_status st = check_value(c, type, &r, &index_words);
    if (st != DS4RT_OK) return st;

    memset(kv, 0, sizeof *kv);
    kv->key.data = key;
    kv->key.len = key_len;
    kv->type = (ds4rt_gguf_type)type;
    kv->file_offset = r.offset;
    kv->value_offset = value_at;
    if (type == DS4RT_GGUF_STRING) {
        kv->value_offset = value_at + 8;
        kv->str.data = (const char *)g->base + kv->value_offset;
        kv->str.len = c->pos - kv->value_offset;
    } else if (type == DS4RT_GGUF_ARRAY) {
        kv->array_type = (ds4rt_gguf_type)gguf_load_u32(g->base + value_at);
        kv->array_len = gguf_load_u64(g->base + value_at + 4);
        kv->value_offset = value_at + GGUF_ARRAY_HEADER_BYTES;
    }
    kv->data = g->base + kv->value_offset;
    kv->value_bytes = c->pos - kv->value_offset;

    if (index_words > 0) {
        /* index_words counts at most one or two words per element walked, each element at
         * least 8 bytes, so this is bounded by the record's size. */
        uint64_t *blk = NULL;
        if (index_words <= SIZE_MAX / sizeof(uint64_t))
            blk = malloc((size_t)index_words * sizeof(uint64_t));
        if (blk == NULL) {
            ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "no memory for an index of %llu array elements",
                       (unsigned long long)index_words);
            return record_fail(&r, DS4RT_ERR_OUT_OF_MEMORY);
        }
        uint64_t *next = blk + (kv->array_type == DS4RT_GGUF_STRING ? kv->array_len
                                                                    : 2 * kv->array_len);
        fill_index(kv->data, kv->array_type, kv->array_len, blk, &next);
        kv->elem_index = blk;
    }
    return DS4RT_OK;
}

static ds4rt_status check_alignment(ds4rt_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    uint64_t i = gguf_index_find(&g->kv_index, g, gguf_kv_name_at, "general.alignment", 17);
    if (i == UINT64_MAX) return DS4RT_OK;
    const ds4rt_gguf_kv *kv = &g->kvs[i];
    if (kv->type != DS4RT_GGUF_UINT32) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "metadata key 'general.alignment' (record %llu at byte %llu) has type "
                          "%s; it must be UINT32",
                          (unsigned long long)i, (unsigned long long)kv->file_offset,
                          type_name_or(kv->type));
    }
    uint32_t a = gguf_load_u32(kv->data);
    if (a == 0 || (a & (a - 1)) != 0) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "metadata key 'general.alignment' (record %llu at byte %llu) is %u; it "
                          "must be a non-zero power of two",
                          (unsigned long long)i, (unsigned long long)kv->file_offset, a);
    }
    g->alignment = a;
    return DS4RT_OK;
}

ds4rt_status gguf_parse_metadata(ds4rt_gguf *g, gguf_cursor *c, uint64_t n_kv) {
    /* Grow with the records actually parsed, never by the count the header claims. */
    uint64_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (g->n_kv == cap) {
            uint64_t new_cap = cap ? 2 * cap : 64;
            if (new_cap > n_kv) new_cap = n_kv;
            ds4rt_gguf_kv *grown = realloc(g->kvs, (size_t)new_cap * sizeof *grown);
            if (grown == NULL) {
                return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "no memory for %llu metadata records",
                                  (unsigned long long)new_cap);
            }
            g->kvs = grown;
            cap = new_cap;
        }
        ds4rt_status st = parse_record(g, c, i, &g->kvs[i]);
        if (st != DS4RT_OK) return st;
        g->n_kv = i + 1;
    }
    uint64_t first = 0, dup = 0;
    switch (gguf_index_build(&g->kv_index, g, g->n_kv, gguf_kv_name_at, &first, &dup)) {
    case GGUF_INDEX_OK: break;
    case GGUF_INDEX_NO_MEMORY:
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "no memory for the index of %llu keys",
                          (unsigned long long)g->n_kv);
    case GGUF_INDEX_DUPLICATE: {
        gguf_qname q;
        gguf_quote(&q, g->kvs[dup].key.data, g->kvs[dup].key.len);
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "metadata key '%s' (record %llu at byte %llu) is a duplicate of record "
                          "%llu at byte %llu",
                          q.s, (unsigned long long)dup, (unsigned long long)g->kvs[dup].file_offset,
                          (unsigned long long)first, (unsigned long long)g->kvs[first].file_offset);
    }
    }
    return check_alignment(g);
}

void gguf_free_metadata(ds4rt_gguf *g) {
    for (uint64_t i = 0; i < g->n_kv; i++) free((void *)g->kvs[i].elem_index);
    free(g->kvs);
    g->kvs = NULL;
    g->n_kv = 0;
    gguf_index_free(&g->kv_index);
}
