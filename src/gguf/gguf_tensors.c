/* gguf_tensors.c - validation of the tensor-info records and of where each tensor's data lies:
 * shape, type, size, alignment, bounds, and that no two tensors share a byte. */
#include <stdlib.h>

#include "gguf_internal.h"
#include "qtypes.h"

static ds4rt_status tensor_fail(const ds4rt_gguf_tensor *t, uint64_t i, ds4rt_status st) {
    gguf_qname q;
    gguf_quote(&q, t->name.data, t->name.len);
    return ds4rt_fail_context(st, "tensor '%s' (record %llu at byte %llu)", q.s,
                              (unsigned long long)i, (unsigned long long)t->info_offset);
}

/* Parses the info record `i` at c->pos into *t (name, dims, type, offset). */
static ds4rt_status parse_info(gguf_cursor *c, uint64_t i, ds4rt_gguf_tensor *t) {
    memset(t, 0, sizeof *t);
    t->info_offset = c->pos;
    uint64_t name_len;
    if (!gguf_read_u64(c, &name_len) || name_len > gguf_left(c)) {
        return ds4rt_fail(DS4RT_ERR_FORMAT,
                          "tensor record %llu at byte %llu: name runs past the end of the file "
                          "(%llu bytes)",
                          (unsigned long long)i, (unsigned long long)t->info_offset,
                          (unsigned long long)c->size);
    }
    t->name.data = (const char *)c->base + c->pos;
    t->name.len = name_len;
    c->pos += name_len;

    uint64_t at = c->pos;
    if (!gguf_read_u32(c, &t->n_dims)) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "n_dims at byte %llu is truncated", (unsigned long long)at);
        return tensor_fail(t, i, DS4RT_ERR_FORMAT);
    }
    if (t->n_dims > DS4RT_MAX_DIMS) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "n_dims at byte %llu is %u; at most %d are allowed",
                   (unsigned long long)at, t->n_dims, DS4RT_MAX_DIMS);
        return tensor_fail(t, i, DS4RT_ERR_FORMAT);
    }
    for (uint32_t d = 0; d < DS4RT_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        at = c->pos;
        if (!gguf_read_u64(c, &ne)) {
            ds4rt_fail(DS4RT_ERR_FORMAT, "ne[%u] at byte %llu is truncated", d,
                       (unsigned long long)at);
            return tensor_fail(t, i, DS4RT_ERR_FORMAT);
        }
        /* ggml stores ne as int64; an empty dimension makes an empty tensor, which no model
         * uses and which ggml's own size checks divide by. Both are rejected. */
        if (ne == 0 || ne > (uint64_t)INT64_MAX) {
            ds4rt_fail(DS4RT_ERR_FORMAT, "ne[%u] at byte %llu is %llu; it must be in [1, 2^63)",
                       d, (unsigned long long)at, (unsigned long long)ne);
            return tensor_fail(t, i, DS4RT_ERR_FORMAT);
        }
        t->ne[d] = (int64_t)ne;
    }
    at = c->pos;
    if (!gguf_read_u32(c, &t->type) || !gguf_read_u64(c, &t->offset)) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "type and offset at byte %llu are truncated",
                   (unsigned long long)at);
        return tensor_fail(t, i, DS4RT_ERR_FORMAT);
    }
    if (ds4rt_type_lookup(t->type) == NULL) {
        /* Type ids are added to ggml over time: an unknown one is beyond this reader, not
         * proof of a broken file. */
        ds4rt_fail(DS4RT_ERR_UNSUPPORTED, "unknown tensor type id %u at byte %llu", t->type,
                   (unsigned long long)at);
        return tensor_fail(t, i, DS4RT_ERR_UNSUPPORTED);
    }
    return DS4RT_OK;
}

ds4rt_status gguf_parse_tensor_infos(ds4rt_gguf *g, gguf_cursor *c, uint64_t n) {
    uint64_t cap = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (g->n_tensors == cap) {
            uint64_t new_cap = cap ? 2 * cap : 64;
            if (new_cap > n) new_cap = n;
            ds4rt_gguf_tensor *grown = realloc(g->tensors, (size_t)new_cap * sizeof *grown);
            if (grown == NULL) {
                return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "no memory for %llu tensor records",
                                  (unsigned long long)new_cap);
            }
            g->tensors = grown;
            cap = new_cap;
        }
        ds4rt_status st = parse_info(c, i, &g->tensors[i]);
        if (st != DS4RT_OK) return st;
        g->n_tensors = i + 1;
    }
    uint64_t first = 0, dup = 0;
    switch (gguf_index_build(&g->tensor_index, g, g->n_tensors, gguf_tensor_name_at, &first,
                             &dup)) {
    case GGUF_INDEX_OK: return DS4RT_OK;
    case GGUF_INDEX_NO_MEMORY:
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "no memory for the index of %llu tensors",
                          (unsigned long long)g->n_tensors);
    case GGUF_INDEX_DUPLICATE: break;
    }
    ds4rt_fail(DS4RT_ERR_FORMAT, "duplicate name; first defined by record %llu at byte %llu",
               (unsigned long long)first, (unsigned long long)g->tensors[first].info_offset);
    return tensor_fail(&g->tensors[dup], dup, DS4RT_ERR_FORMAT);
}

/* Size in bytes of t's data; checks the element count and the block structure. */
static ds4rt_status size_tensor(ds4rt_gguf_tensor *t, uint64_t i) {
    const ds4rt_type_info *info = ds4rt_type_lookup(t->type);
    uint64_t elems = 1;
    for (int d = 0; d < DS4RT_MAX_DIMS; d++) {
        if (!ds4rt_mul_u64(elems, (uint64_t)t->ne[d], &elems) || elems > (uint64_t)INT64_MAX) {
            ds4rt_fail(DS4RT_ERR_FORMAT,
                       "element count of shape [%lld, %lld, %lld, %lld] overflows int64",
                       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3]);
            return tensor_fail(t, i, DS4RT_ERR_FORMAT);
        }
    }
    if ((uint64_t)t->ne[0] % info->block_elems != 0) {
        ds4rt_fail(DS4RT_ERR_FORMAT,
                   "ne[0] = %lld is not a multiple of the %s block size (%u elements)",
                   (long long)t->ne[0], info->name, info->block_elems);
        return tensor_fail(t, i, DS4RT_ERR_FORMAT);
    }
    /* elems / block_elems * block_bytes: exact, since ne[0] and hence elems is a multiple. */
    if (!ds4rt_mul_u64(elems / info->block_elems, info->block_bytes, &t->nbytes)) {
        ds4rt_fail(DS4RT_ERR_FORMAT, "byte size of %llu %s elements overflows",
                   (unsigned long long)elems, info->name);
        return tensor_fail(t, i, DS4RT_ERR_FORMAT);
    }
    return DS4RT_OK;
}

typedef struct extent {
    uint64_t begin, end, tensor;
} extent;

static int by_begin(const void *a, const void *b) {
    const extent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->tensor < y->tensor ? -1 : (x->tensor > y->tensor);
}

static ds4rt_status check_overlaps(ds4rt_gguf *g) {
    if (g->n_tensors < 2) return DS4RT_OK;
    extent *ex = malloc((size_t)g->n_tensors * sizeof *ex);
    if (ex == NULL) {
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "no memory to sort %llu tensors",
                          (unsigned long long)g->n_tensors);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ex[i].begin = g->tensors[i].offset;
        ex[i].end = g->tensors[i].offset + g->tensors[i].nbytes; /* bounds already checked */
        ex[i].tensor = i;
    }
    qsort(ex, (size_t)g->n_tensors, sizeof *ex, by_begin);
    ds4rt_status st = DS4RT_OK;
    for (uint64_t k = 1; k < g->n_tensors; k++) {
        if (ex[k].begin < ex[k - 1].end) {
            const ds4rt_gguf_tensor *a = &g->tensors[ex[k - 1].tensor];
            const ds4rt_gguf_tensor *b = &g->tensors[ex[k].tensor];
            gguf_qname qa, qb;
            gguf_quote(&qa, a->name.data, a->name.len);
            gguf_quote(&qb, b->name.data, b->name.len);
            st = ds4rt_fail(DS4RT_ERR_FORMAT,
                            "tensor data overlaps: '%s' (record %llu at byte %llu) occupies "
                            "bytes [%llu, %llu) of the data section and '%s' (record %llu at "
                            "byte %llu) starts at %llu",
                            qa.s, (unsigned long long)ex[k - 1].tensor,
                            (unsigned long long)a->info_offset, (unsigned long long)a->offset,
                            (unsigned long long)(a->offset + a->nbytes), qb.s,
                            (unsigned long long)ex[k].tensor, (unsigned long long)b->info_offset,
                            (unsigned long long)b->offset);
            break;
        }
    }
    free(ex);
    return st;
}

ds4rt_status gguf_place_tensors(ds4rt_gguf *g) {
    uint64_t data_bytes = g->data_offset <= g->size ? g->size - g->data_offset : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ds4rt_gguf_tensor *t = &g->tensors[i];
        ds4rt_status st = size_tensor(t, i);
        if (st != DS4RT_OK) return st;
        if (t->offset % g->alignment != 0) {
            ds4rt_fail(DS4RT_ERR_FORMAT,
                       "data offset %llu is not a multiple of the alignment %llu",
                       (unsigned long long)t->offset, (unsigned long long)g->alignment);
            return tensor_fail(t, i, DS4RT_ERR_FORMAT);
        }
        if (g->header_only) { /* the data may be absent: only its extent must be sane */
            uint64_t end;
            if (!ds4rt_add_u64(t->offset, t->nbytes, &end) || !ds4rt_add_u64(end, g->data_offset, &end)) {
                ds4rt_fail(DS4RT_ERR_FORMAT, "data [%llu, +%llu bytes) overflows the file offsets",
                           (unsigned long long)t->offset, (unsigned long long)t->nbytes);
                return tensor_fail(t, i, DS4RT_ERR_FORMAT);
            }
            t->data = NULL;
            continue;
        }
        if (t->offset > data_bytes || t->nbytes > data_bytes - t->offset) {
            ds4rt_fail(DS4RT_ERR_FORMAT,
                       "data [%llu, +%llu bytes) of the data section (which starts at byte "
                       "%llu) runs past the end of the file (%llu bytes)",
                       (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                       (unsigned long long)g->data_offset, (unsigned long long)g->size);
            return tensor_fail(t, i, DS4RT_ERR_FORMAT);
        }
        t->data = g->base + g->data_offset + t->offset;
    }
    return check_overlaps(g);
}
