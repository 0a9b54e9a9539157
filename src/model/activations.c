/* activations.c - allocating a pass's inter-op tensors in one backend buffer. */
#include "activations.h"

#include <string.h>

#include "internal.h"

/* Lays the views out from offset 0 on `b` (NULL: only counts); returns the floats used. */
static uint64_t layout(ds4rt_dbuf *b, const ds4rt_hparams *hp, int64_t cap, ds4rt_acts *a) {
    uint64_t off = 0;
    const uint64_t n = (uint64_t)cap;
    a->X = ds4rt_carve_f32(b, &off, n * hp->hc_dim);
    a->X2 = ds4rt_carve_f32(b, &off, n * hp->hc_dim);
    a->xn = ds4rt_carve_f32(b, &off, n * hp->n_embd);
    a->post = ds4rt_carve_f32(b, &off, n * hp->hc);
    a->comb = ds4rt_carve_f32(b, &off, n * hp->hc * hp->hc);
    a->f = ds4rt_carve_f32(b, &off, n * hp->n_embd);
    a->qa = ds4rt_carve_f32(b, &off, n * hp->q_lora);
    a->q = ds4rt_carve_f32(b, &off, n * hp->q_dim);
    a->kv = ds4rt_carve_f32(b, &off, n * hp->head_dim);
    a->cu = ds4rt_carve_f32(b, &off, n * 2 * hp->head_dim);
    a->cg = ds4rt_carve_f32(b, &off, n * 2 * hp->head_dim);
    a->iu = ds4rt_carve_f32(b, &off, n * 2 * hp->idx_dim);
    a->ig = ds4rt_carve_f32(b, &off, n * 2 * hp->idx_dim);
    a->iq = ds4rt_carve_f32(b, &off, n * hp->idx_q_dim);
    a->iw = ds4rt_carve_f32(b, &off, n * hp->idx_heads);
    a->sel = ds4rt_carve_i32(b, &off, n * hp->idx_topk);
    a->n_sel = ds4rt_carve_i32(b, &off, n);
    return off;
}

ds4rt_status ds4rt_acts_create(ds4rt_backend *be, const ds4rt_hparams *hp, int64_t cap, int64_t pass_tokens,
                               ds4rt_acts *a) {
    memset(a, 0, sizeof *a);
    a->cap = cap;
    a->be = be;
    const ds4rt_backend_ops *ops = ds4rt_backend_get_ops(be);
    uint64_t floats = layout(NULL, hp, cap, a);
    ds4rt_status st = ops->alloc(be, DS4RT_MEM_SCRATCH, floats * 4, &a->buf);
    if (st == DS4RT_OK) st = ops->alloc(be, DS4RT_MEM_SCRATCH, ds4rt_pass_bytes(pass_tokens), &a->in_buf);
    if (st != DS4RT_OK) {
        ds4rt_acts_free(a);
        return ds4rt_fail_context(st, "activations for batches of %lld tokens", (long long)cap);
    }
    layout(a->buf, hp, cap, a);
    a->in = (ds4rt_dpass){a->in_buf};
    return DS4RT_OK;
}

void ds4rt_acts_free(ds4rt_acts *a) {
    if (a->be != NULL) {
        const ds4rt_backend_ops *ops = ds4rt_backend_get_ops(a->be);
        if (a->buf) ops->release(a->be, a->buf);
        if (a->in_buf) ops->release(a->be, a->in_buf);
    }
    memset(a, 0, sizeof *a);
}
