/*
 * dspark_api.c - the public DSpark entry points: loading a support model (with its load-time
 * self-test), info, and one proposal on a session's context. The model layer (src/dspark/)
 * does the work; this file owns the handles and the sessions the self-test runs on.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "api_internal.h"
#include "dspark.h"
#include "internal.h"
#include "scheduler.h"

static void dspark_params_defaults(void *out) {
    ds4rt_dspark_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->window = 0;
    p->self_test = 1;
}

/* The versioning rule of abi.h. */
static const ds4rt_struct_desc DSPARK_PARAMS = {
    .name = "ds4rt_dspark_params",
    .size = sizeof(ds4rt_dspark_params),
    .min_size = sizeof(ds4rt_dspark_params_1_0),
    .defaults = dspark_params_defaults,
};

static const ds4rt_struct_desc DSPARK_INFO = {
    .name = "ds4rt_dspark_info",
    .size = sizeof(ds4rt_dspark_info),
    .min_size = offsetof(ds4rt_dspark_info, tensor_types) + DS4RT_TENSOR_TYPES_LEN, /* the 1.0 layout */
};

DS4RT_API ds4rt_status ds4rt_dspark_params_init(ds4rt_dspark_params *params, size_t size) {
    return ds4rt_struct_init(&DSPARK_PARAMS, params, size);
}

/* ---- the self-test: one proposal on a probe context must produce a full draft with finite
 * values, on the backend the drafter will run on, or the support model is refused with the
 * failing stage named (the check ds4 lacked: a drafter whose every cycle ends in no_draft) ---- */

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
    st = ds4rt_drafter_propose(&s->drafter, toks[7], (int32_t)d->block_size, 0.0f, NULL, NULL, work_val, work_idx,
                               true, &prop);
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

static ds4rt_status self_test(struct ds4rt_dspark *d) {
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

/* ---- handles -------------------------------------------------------------------------------- */

DS4RT_API ds4rt_status ds4rt_dspark_load(const ds4rt_model *target, const char *path, const ds4rt_dspark_params *params,
                                         ds4rt_dspark **out) {
    if (target == NULL || path == NULL || out == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "dspark_load: NULL argument");
    *out = NULL;
    ds4rt_dspark_params p;
    ds4rt_status rst = ds4rt_struct_read(&DSPARK_PARAMS, params, &p);
    if (rst != DS4RT_OK) return ds4rt_fail_context(rst, "dspark_load");
    if (p.window > 65536) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "dspark_load: window %u > 65536", p.window);
    struct ds4rt_dspark *d = calloc(1, sizeof *d);
    if (d == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "DSpark support model");
    d->model = target;
    d->target = &target->target;
    ds4rt_status st = ds4rt_dspark_bind(d, path, &p);
    if (st == DS4RT_OK) st = ds4rt_sched_memory_create(&d->sched_mem);
    if (st == DS4RT_OK && p.self_test) st = self_test(d);
    if (st != DS4RT_OK) {
        ds4rt_dspark_free(d);
        return ds4rt_fail_context(st, "DSpark support %s", path);
    }
    *out = d;
    return DS4RT_OK;
}

DS4RT_API void ds4rt_dspark_free(ds4rt_dspark *d) {
    if (d == NULL) return;
    ds4rt_dspark_release(d);
    ds4rt_sched_memory_free(d->sched_mem);
    free(d);
}

DS4RT_API ds4rt_status ds4rt_dspark_get_info(const ds4rt_dspark *d, ds4rt_dspark_info *out) {
    if (d == NULL || out == NULL) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "dspark_get_info: NULL argument");
    ds4rt_dspark_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    info.layout = (int32_t)d->layout;
    info.n_stages = d->n_stages;
    info.block_size = d->block_size;
    info.markov_rank = d->markov_rank;
    info.noise_token = d->noise_token;
    info.window = d->window;
    info.n_target_layers = d->n_tgt;
    for (uint32_t i = 0; i < d->n_tgt; i++) info.target_layers[i] = d->tgt_layers[i];
    snprintf(info.tensor_types, sizeof info.tensor_types, "%s", d->tensor_types);
    info.n_acceptance_prior = d->n_prior;
    for (uint32_t i = 0; i < d->n_prior; i++) info.acceptance_prior[i] = d->acceptance_prior[i];
    ds4rt_status st = ds4rt_struct_write(&DSPARK_INFO, &info, out);
    return st == DS4RT_OK ? st : ds4rt_fail_context(st, "dspark_get_info");
}

/* ---- one proposal, for hosts and tests ----------------------------------------------------- */

DS4RT_API ds4rt_status ds4rt_dspark_propose(ds4rt_session *s, const ds4rt_dspark *d, int32_t anchor, int32_t max_draft,
                                            float threshold, int32_t *tokens, int32_t *n_tokens, float *conf,
                                            int32_t *n_conf, float *logits) {
    if (s == NULL || d == NULL || tokens == NULL || n_tokens == NULL || conf == NULL || n_conf == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "dspark_propose: NULL argument");
    ds4rt_status st = ds4rt_session_attach_drafter(s, d);
    if (st != DS4RT_OK) return ds4rt_session_error(s, st);
    if (s->drafter.end != s->st.n_pos || s->st.n_pos == 0)
        return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_STATE, "dspark_propose: the drafter has no context row for "
                                                                  "position %lld (attach before evaluating)",
                                                 (long long)s->st.n_pos - 1));
    const uint32_t V = d->target->hp.n_vocab;
    float *work_val = malloc(2 * (size_t)V * sizeof(float));
    int32_t *work_idx = malloc((size_t)V * sizeof(int32_t));
    if (work_val == NULL || work_idx == NULL) {
        free(work_val);
        free(work_idx);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "proposal buffers");
    }
    ds4rt_proposal prop;
    st = ds4rt_drafter_propose(&s->drafter, anchor, max_draft, threshold, NULL, NULL, work_val, work_idx,
                               logits != NULL, &prop);
    free(work_val);
    free(work_idx);
    if (st != DS4RT_OK) return ds4rt_session_error(s, st);
    *n_tokens = prop.n;
    *n_conf = prop.n_conf;
    memcpy(tokens, prop.tokens, (size_t)prop.n * sizeof(int32_t));
    memcpy(conf, prop.conf, (size_t)prop.n_conf * sizeof(float));
    if (logits != NULL) memcpy(logits, prop.corrected, (size_t)prop.n * V * sizeof(float));
    return DS4RT_OK;
}
