/* buffers.c - growable id and byte arrays, and the two-call copy to caller buffers. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

ds4rt_status ds4rt_idvec_reserve(ds4rt_idvec *vec, size_t extra) {
    if (vec->cap - vec->len >= extra) return DS4RT_OK;
    if (extra > SIZE_MAX / sizeof(int32_t) / 2 - vec->len)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "token array too large");
    size_t cap = vec->cap ? vec->cap : 256;
    while (cap - vec->len < extra) cap *= 2;
    int32_t *p = realloc(vec->v, cap * sizeof *p);
    if (!p) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "token array of %zu ids", cap);
    vec->v = p;
    vec->cap = cap;
    return DS4RT_OK;
}

void ds4rt_idvec_free(ds4rt_idvec *vec) {
    free(vec->v);
    memset(vec, 0, sizeof *vec);
}

ds4rt_status ds4rt_bytebuf_append(ds4rt_bytebuf *b, const void *src, size_t n) {
    if (b->cap - b->len < n) {
        if (n > SIZE_MAX / 2 - b->len)
            return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "text buffer too large");
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "text buffer of %zu bytes", cap);
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return DS4RT_OK;
}

void ds4rt_bytebuf_free(ds4rt_bytebuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

ds4rt_status ds4rt_tok_copy_out(const void *src, size_t n, size_t size, void *dst, size_t cap,
                                size_t *n_out, int nul_terminate, const char *what) {
    *n_out = n;
    if (dst == NULL && cap == 0) return DS4RT_OK; /* size query */
    if (dst == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "%s: NULL buffer", what);
    size_t k = n < cap ? n : cap;
    if (k) memcpy(dst, src, k * size);
    if (n > cap)
        return ds4rt_fail(DS4RT_ERR_OUT_OF_RANGE, "%s: needs room for %zu, the buffer holds %zu",
                          what, n, cap);
    if (nul_terminate && n < cap) ((char *)dst)[n] = '\0';
    return DS4RT_OK;
}
