/* scratch.c - sizing and allocating the forward pass's activation buffers. */
#include "scratch.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

static size_t alloc_count(int64_t n) { return n > 0 ? (size_t)n : 1; }

ds4rt_status ds4rt_scratch_create(const ds4rt_hparams *hp, int64_t cap, int64_t n_ctx, int n_threads,
                                  int64_t min_keys, ds4rt_scratch *s) {
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->n_threads = n_threads < 1 ? 1 : n_threads;
    int64_t max_comp = 1;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (hp->ratio[l] != 0 && n_ctx / hp->ratio[l] + 2 > max_comp) max_comp = n_ctx / hp->ratio[l] + 2;
    s->max_comp = max_comp;
    s->max_keys = hp->window + max_comp > min_keys ? hp->window + max_comp : min_keys;

    const int64_t N = hp->hc, D = hp->n_embd, k = hp->n_expert_used;
    bool ok = true;
#define F(ptr, count)                                                                               \
    ok = ok && ((ptr) = calloc(alloc_count((int64_t)(count)), sizeof *(ptr))) != NULL;                \
    s->bytes += alloc_count((int64_t)(count)) * sizeof *(ptr)
    F(s->X, cap * N * D);
    F(s->X2, cap * N * D);
    F(s->normed, cap * N * D);
    F(s->mix, cap * hp->hc_mix);
    F(s->pre, cap * N);
    F(s->post, cap * N);
    F(s->comb, cap * N * N);
    F(s->x, cap * D);
    F(s->xn, cap * D);
    F(s->f, cap * D);
    F(s->qa, cap * hp->q_lora);
    F(s->q, cap * hp->q_dim);
    F(s->kv, cap * hp->head_dim);
    F(s->cu, cap * 2 * hp->head_dim);
    F(s->cg, cap * 2 * hp->head_dim);
    F(s->iu, cap * 2 * hp->idx_dim);
    F(s->ig, cap * 2 * hp->idx_dim);
    F(s->iq, cap * hp->idx_q_dim);
    F(s->iw, cap * hp->idx_heads);
    F(s->og, cap * hp->group_dim);
    F(s->olow, cap * hp->o_lora);
    F(s->low, cap * hp->o_low_dim);
    F(s->comp_tmp, 2 * (hp->head_dim + hp->idx_dim) + 4 * hp->rope_dim + 8);
    F(s->rope_cs, cap * hp->rope_dim + 2);
    F(s->iscores, max_comp);
    F(s->isel, max_comp);
    F(s->iscores_tmp, max_comp);
    F(s->att_scores, (int64_t)s->n_threads * s->max_keys);
    F(s->att_keys, s->max_keys);
    F(s->router, cap * hp->n_expert);
    F(s->sel, cap * k);
    F(s->selw, cap * k);
    F(s->etok, cap * k);
    F(s->ex, cap * k * D);
    F(s->eg, cap * k * hp->expert_ff);
    F(s->eu, cap * k * hp->expert_ff);
    F(s->ey, cap * k * D);
    F(s->yslot, cap * k * D);
    F(s->shg, cap * (int64_t)hp->shared_ff);
    F(s->shu, cap * (int64_t)hp->shared_ff);
    F(s->shy, cap * D);
    F(s->hy, cap * D);
#undef F
    if (!ok) {
        ds4rt_scratch_free(s);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "activation buffers for batches of %lld tokens", (long long)cap);
    }
    return DS4RT_OK;
}

void ds4rt_scratch_free(ds4rt_scratch *s) {
    void *ptrs[] = {s->X,      s->X2,     s->normed, s->mix,    s->pre,        s->post,       s->comb,
                    s->x,      s->xn,     s->f,      s->qa,     s->q,          s->kv,         s->cu,
                    s->cg,     s->iu,     s->ig,     s->iq,     s->iw,         s->og,         s->olow,
                    s->low,    s->comp_tmp, s->rope_cs, s->iscores, s->isel,   s->iscores_tmp, s->att_scores,
                    (void *)s->att_keys, s->router, s->sel, s->selw, s->etok, s->ex, s->eg,
                    s->eu,     s->ey,     s->yslot,  s->shg,    s->shu,        s->shy,        s->hy};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) free(ptrs[i]);
    memset(s, 0, sizeof *s);
}
