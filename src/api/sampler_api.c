/* sampler_api.c - the public sampler: parameters, a seeded generator and work buffers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "api_internal.h"
#include "internal.h"
#include "sampling.h"

struct ds4rt_sampler {
    ds4rt_sampler_params p;
    uint32_t n_vocab;
    ds4rt_rng rng;
    float *probs, *work_val;
    int32_t *work_idx;
};

static void sampler_params_defaults(void *out) {
    ds4rt_sampler_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->temperature = 0.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->seed = 0;
}

static const ds4rt_struct_desc SAMPLER_PARAMS = {
    .name = "ds4rt_sampler_params",
    .size = sizeof(ds4rt_sampler_params),
    .min_size = sizeof(ds4rt_sampler_params_1_0),
    .defaults = sampler_params_defaults,
};

DS4RT_API ds4rt_status ds4rt_sampler_params_init(ds4rt_sampler_params *params, size_t size) {
    return ds4rt_struct_init(&SAMPLER_PARAMS, params, size);
}

static ds4rt_status check_params(const ds4rt_sampler_params *p) {
    if (!isfinite(p->temperature) || !(p->top_p > 0.0f) || !isfinite(p->top_p) || !isfinite(p->min_p) ||
        p->min_p > 1.0f)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                          "sampler: temperature must be finite, top_p in (0, 1], min_p <= 1 (got %g, %g, %g)",
                          (double)p->temperature, (double)p->top_p, (double)p->min_p);
    return DS4RT_OK;
}

ds4rt_status ds4rt_sampler_params_read(const ds4rt_sampler_params *in, ds4rt_sampler_params *out) {
    ds4rt_status st = ds4rt_struct_read(&SAMPLER_PARAMS, in, out);
    return st == DS4RT_OK ? check_params(out) : st;
}

DS4RT_API ds4rt_status ds4rt_sampler_create(const ds4rt_sampler_params *params, uint32_t n_vocab, ds4rt_sampler **out) {
    if (out == NULL || n_vocab == 0) return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "sampler_create: bad argument");
    *out = NULL;
    ds4rt_sampler_params p;
    ds4rt_status st = ds4rt_sampler_params_read(params, &p);
    if (st != DS4RT_OK) return ds4rt_fail_context(st, "sampler_create");
    ds4rt_sampler *s = calloc(1, sizeof *s);
    if (s == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "sampler");
    s->p = p;
    s->n_vocab = n_vocab;
    s->probs = malloc(n_vocab * sizeof(float));
    s->work_val = malloc(n_vocab * sizeof(float));
    s->work_idx = malloc(n_vocab * sizeof(int32_t));
    if (!s->probs || !s->work_val || !s->work_idx) {
        ds4rt_sampler_free(s);
        return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "sampler buffers for %u ids", n_vocab);
    }
    ds4rt_rng_seed(&s->rng, p.seed);
    *out = s;
    return DS4RT_OK;
}

DS4RT_API void ds4rt_sampler_free(ds4rt_sampler *s) {
    if (s == NULL) return;
    free(s->probs);
    free(s->work_val);
    free(s->work_idx);
    free(s);
}

DS4RT_API ds4rt_status ds4rt_sampler_probs(ds4rt_sampler *s, const float *logits, float *probs) {
    if (s == NULL || logits == NULL || probs == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "sampler_probs: NULL argument");
    if (s->p.temperature <= 0.0f) {
        memset(probs, 0, s->n_vocab * sizeof(float));
        probs[ds4rt_argmax(logits, s->n_vocab)] = 1.0f;
        return DS4RT_OK;
    }
    ds4rt_sampling_probs(&s->p, logits, s->n_vocab, probs, s->work_idx, s->work_val);
    return DS4RT_OK;
}

DS4RT_API ds4rt_status ds4rt_sampler_sample(ds4rt_sampler *s, const float *logits, int32_t *token) {
    if (s == NULL || logits == NULL || token == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "sampler_sample: NULL argument");
    if (s->p.temperature <= 0.0f) {
        *token = ds4rt_argmax(logits, s->n_vocab);
        return DS4RT_OK;
    }
    ds4rt_sampling_probs(&s->p, logits, s->n_vocab, s->probs, s->work_idx, s->work_val);
    *token = ds4rt_sample_probs(s->probs, s->n_vocab, ds4rt_rng_uniform(&s->rng));
    return DS4RT_OK;
}
