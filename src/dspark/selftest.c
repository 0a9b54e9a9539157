/*
 * selftest.c - DSpark's load-time self-test: one proposal on a probe context must produce a
 * full draft with finite values, or the support model is refused with the failing stage named.
 * This is the check ds4 lacked: a drafter whose every cycle ends in no_draft (dspark.md §10).
 */
#include <math.h>
#include <stdlib.h>

#include "api_internal.h"
#include "dspark.h"
#include "internal.h"

ds4rt_status ds4rt_dspark_self_test(struct ds4rt_dspark *d);

static ds4rt_status probe(struct ds4rt_dspark *d, ds4rt_session *s) {
    const uint32_t V = d->target->hp.n_vocab;
    int32_t toks[8];
    for (int i = 0; i < 8; i++) toks[i] = (int32_t)((uint32_t)(i * 7919 + 1) % V);
    if (d->model->bos_id >= 0) toks[0] = d->model->bos_id;
    ds4rt_status st = ds4rt_session_attach_drafter(s, d);
    if (st != DS4RT_OK) return st;
    st = ds4rt_session_eval(s, toks, 8, NULL);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "probe context (target pass with capture)");
    float *work_val = malloc(2 * (size_t)V * sizeof(float));
    int32_t *work_idx = malloc((size_t)V * sizeof(int32_t));
    if (work_val == NULL || work_idx == NULL) {
        free(work_val);
        free(work_idx);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "self-test buffers");
    }
    ds4rt_proposal prop;
    st = ds4rt_drafter_propose(&s->drafter, s->pool, toks[7], (int32_t)d->block_size, 0.0f, NULL, NULL, work_val,
                               work_idx, &prop);
    free(work_val);
    free(work_idx);
    if (st != DS4RT_OK) return st;
    if (prop.n != (int32_t)d->block_size)
        return ds4rt_fail(DS4RT_ERR_BACKEND, "the proposal produced %d of %u drafts", prop.n, d->block_size);
    for (int32_t i = 0; i < prop.n_conf; i++)
        if (!isfinite(prop.conf[i]))
            return ds4rt_fail(DS4RT_ERR_BACKEND, "the confidence head produced a non-finite value at slot %d", i);
    for (int64_t i = 0; i < (int64_t)prop.n * V; i++)
        if (!isfinite(prop.corrected[i]))
            return ds4rt_fail(DS4RT_ERR_BACKEND, "the base logits / Markov head produced non-finite values (slot %lld)",
                              (long long)(i / V));
    return DS4RT_OK;
}

ds4rt_status ds4rt_dspark_self_test(struct ds4rt_dspark *d) {
    ds4rt_session_params sp = ds4rt_session_params_defaults();
    sp.n_ctx = 64;
    sp.max_batch = d->block_size + 1 > 8 ? d->block_size + 1 : 8;
    ds4rt_session *s;
    ds4rt_status st = ds4rt_session_create((ds4rt_model *)d->model, &sp, &s);
    if (st == DS4RT_OK) {
        st = probe(d, s);
        ds4rt_session_free(s);
    }
    return st == DS4RT_OK ? st : ds4rt_fail_context(st, "DSpark self-test");
}
