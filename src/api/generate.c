/* generate.c - plain (non-speculative) generation: prompt, then sample / evaluate. */
#include <string.h>

#include "api_internal.h"
#include "internal.h"

DS4RT_API ds4rt_generate_params ds4rt_generate_default_params(void) {
    ds4rt_generate_params p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.max_tokens = 128;
    p.stop_at_eos = 1;
    p.sampler = ds4rt_sampler_default_params();
    return p;
}

DS4RT_API ds4rt_status ds4rt_generate(ds4rt_session *s, const int32_t *prompt, size_t n_prompt,
                                      const ds4rt_generate_params *params, int32_t *out, size_t cap, size_t *n_out) {
    if (s == NULL || params == NULL || n_out == NULL || (cap > 0 && out == NULL))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "generate: NULL argument");
    *n_out = 0;
    if (params->size < sizeof *params)
        return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "generate: params.size %zu < %zu",
                                                 params->size, sizeof *params));
    if (params->spec != NULL) {
        ds4rt_status sst = ds4rt_generate_speculative(s, prompt, n_prompt, params, out, cap, n_out);
        return ds4rt_session_error(s, sst);
    }
    ds4rt_status st = ds4rt_session_eval(s, prompt, n_prompt, NULL);
    if (st != DS4RT_OK) return st;
    if (s->cur == NULL)
        return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_STATE, "generate: no logits to sample from (empty prompt "
                                                                  "and empty context)"));
    ds4rt_sampler *smp;
    st = ds4rt_sampler_create(&params->sampler, s->model->target.hp.n_vocab, &smp);
    if (st != DS4RT_OK) return ds4rt_session_error(s, st);
    size_t limit = params->max_tokens < 0 ? 0 : (size_t)params->max_tokens;
    if (limit > cap) limit = cap;
    while (*n_out < limit) {
        int32_t tok;
        st = ds4rt_sampler_sample(smp, s->cur, &tok);
        if (st != DS4RT_OK) break;
        out[(*n_out)++] = tok;
        int go_on = params->on_token ? params->on_token(params->user, tok) : 1;
        bool eos = params->stop_at_eos && tok == s->model->eos_id;
        if (ds4rt_session_position(s) >= s->st.n_ctx) break; /* no room to evaluate it */
        st = ds4rt_session_pass(s, &tok, 1, false);
        if (st != DS4RT_OK || !go_on || eos) break;
    }
    ds4rt_sampler_free(smp);
    return ds4rt_session_error(s, st);
}
