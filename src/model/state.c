/* state.c - allocation, reset and batch snapshots of the target's per-session state. */
#include "state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static float *alloc_floats(size_t n, uint64_t *bytes) {
    *bytes += n * sizeof(float);
    return calloc(n ? n : 1, sizeof(float));
}

static void frontier_clear(ds4rt_frontier *f) {
    size_t n = (size_t)f->rows * f->width;
    memset(f->kv, 0, n * sizeof(float));
    for (size_t i = 0; i < n; i++) f->score[i] = -INFINITY;
}

static bool frontier_alloc(ds4rt_frontier *f, uint32_t rows, uint32_t width, float **snap_kv,
                           float **snap_score, uint64_t *bytes) {
    size_t n = (size_t)rows * width;
    f->rows = rows;
    f->width = width;
    f->kv = alloc_floats(n, bytes);
    f->score = alloc_floats(n, bytes);
    *snap_kv = alloc_floats(n, bytes);
    *snap_score = alloc_floats(n, bytes);
    return f->kv && f->score && *snap_kv && *snap_score;
}

ds4rt_status ds4rt_kv_state_create(const ds4rt_hparams *hp, int64_t n_ctx, uint32_t max_batch,
                                   ds4rt_kv_state *st) {
    memset(st, 0, sizeof *st);
    st->n_layer = hp->n_layer;
    st->n_ctx = n_ctx;
    st->max_batch = max_batch;
    st->raw_cap = hp->window + max_batch;
    st->layers = calloc(hp->n_layer, sizeof *st->layers);
    if (st->layers == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "session state");
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        ds4rt_layer_state *ls = &st->layers[l];
        uint32_t R = hp->ratio[l];
        bool ok = (ls->raw = alloc_floats((size_t)st->raw_cap * hp->head_dim, &st->bytes)) != NULL;
        if (R != 0) {
            uint32_t c = ds4rt_coff(R);
            ls->comp_cap = (uint32_t)(n_ctx / R + 2);
            ok = ok && (ls->comp = alloc_floats((size_t)ls->comp_cap * hp->head_dim, &st->bytes)) != NULL;
            ok = ok && frontier_alloc(&ls->cf, c * R, c * hp->head_dim, &ls->snap_cf_kv, &ls->snap_cf_score,
                                      &st->bytes);
            ok = ok && (ls->journal_c = alloc_floats((size_t)max_batch * 2 * ls->cf.width, &st->bytes)) != NULL;
        }
        if (R == 4) {
            ok = ok && (ls->icomp = alloc_floats((size_t)ls->comp_cap * hp->idx_dim, &st->bytes)) != NULL;
            ok = ok && frontier_alloc(&ls->icf, 2 * 4, 2 * hp->idx_dim, &ls->snap_icf_kv, &ls->snap_icf_score,
                                      &st->bytes);
            ok = ok && (ls->journal_i = alloc_floats((size_t)max_batch * 2 * ls->icf.width, &st->bytes)) != NULL;
        }
        if (!ok) {
            ds4rt_kv_state_free(st);
            return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "session state for a context of %lld tokens",
                              (long long)n_ctx);
        }
    }
    ds4rt_kv_state_reset(st);
    return DS4RT_OK;
}

void ds4rt_kv_state_free(ds4rt_kv_state *st) {
    if (st->layers != NULL) {
        for (uint32_t l = 0; l < st->n_layer; l++) {
            ds4rt_layer_state *ls = &st->layers[l];
            free(ls->raw);
            free(ls->comp);
            free(ls->cf.kv);
            free(ls->cf.score);
            free(ls->snap_cf_kv);
            free(ls->snap_cf_score);
            free(ls->journal_c);
            free(ls->icomp);
            free(ls->icf.kv);
            free(ls->icf.score);
            free(ls->snap_icf_kv);
            free(ls->snap_icf_score);
            free(ls->journal_i);
        }
    }
    free(st->layers);
    memset(st, 0, sizeof *st);
}

void ds4rt_kv_state_reset(ds4rt_kv_state *st) {
    st->n_pos = 0;
    st->batch_start = 0;
    st->batch_len = 0;
    for (uint32_t l = 0; l < st->n_layer; l++) {
        ds4rt_layer_state *ls = &st->layers[l];
        ls->n_comp = ls->n_icomp = 0;
        if (ls->cf.kv) frontier_clear(&ls->cf);
        if (ls->icf.kv) frontier_clear(&ls->icf);
    }
}

void ds4rt_kv_state_begin_batch(ds4rt_kv_state *st, int64_t n) {
    st->batch_start = st->n_pos;
    st->batch_len = n;
    for (uint32_t l = 0; l < st->n_layer; l++) {
        ds4rt_layer_state *ls = &st->layers[l];
        ls->snap_n_comp = ls->n_comp;
        ls->snap_n_icomp = ls->n_icomp;
        if (ls->cf.kv) {
            size_t bytes = (size_t)ls->cf.rows * ls->cf.width * sizeof(float);
            memcpy(ls->snap_cf_kv, ls->cf.kv, bytes);
            memcpy(ls->snap_cf_score, ls->cf.score, bytes);
        }
        if (ls->icf.kv) {
            size_t bytes = (size_t)ls->icf.rows * ls->icf.width * sizeof(float);
            memcpy(ls->snap_icf_kv, ls->icf.kv, bytes);
            memcpy(ls->snap_icf_score, ls->icf.score, bytes);
        }
    }
}
