/* generate.c - plain (non-speculative) generation: prompt, then sample / evaluate. */
#include <stddef.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "api_internal.h"
#include "internal.h"

static void generate_params_defaults(void *out) {
    ds4rt_generate_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->max_tokens = 128;
    p->stop_at_eos = 1;
    p->sampler = NULL;
}

/* ABI 1.0 embedded the sampler parameters; its layout is recognised by its size. */
static void read_1_0(const void *legacy, void *lib) {
    const ds4rt_generate_params_1_0 *o = legacy;
    ds4rt_generate_params *p = lib;
    p->max_tokens = o->max_tokens;
    p->stop_at_eos = o->stop_at_eos;
    p->sampler = (const ds4rt_sampler_params *)(const void *)&o->sampler;
    p->on_token = o->on_token;
    p->user = o->user;
    p->spec = o->spec;
}

static void init_1_0(void *legacy) {
    ds4rt_generate_params_1_0 *o = legacy;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->max_tokens = 128;
    o->stop_at_eos = 1;
    (void)ds4rt_sampler_params_init((ds4rt_sampler_params *)(void *)&o->sampler, sizeof o->sampler);
}

static const ds4rt_legacy_layout GENERATE_1_0 = {sizeof(ds4rt_generate_params_1_0), read_1_0, init_1_0};

static const ds4rt_struct_desc GENERATE_PARAMS = {
    .name = "ds4rt_generate_params",
    .size = sizeof(ds4rt_generate_params),
    .min_size = offsetof(ds4rt_generate_params, spec) + sizeof(void *), /* the 1.1 layout */
    .defaults = generate_params_defaults,
    .legacy = &GENERATE_1_0,
    .n_legacy = 1,
};
_Static_assert(sizeof(ds4rt_generate_params) != sizeof(ds4rt_generate_params_1_0),
               "the 1.0 size identifies the 1.0 layout: a later layout must skip it (a reserved field)");

DS4RT_API ds4rt_status ds4rt_generate_params_init(ds4rt_generate_params *params, size_t size) {
    return ds4rt_struct_init(&GENERATE_PARAMS, params, size);
}

DS4RT_API ds4rt_status ds4rt_generate(ds4rt_session *s, const int32_t *prompt, size_t n_prompt,
                                      const ds4rt_generate_params *caller, int32_t *out, size_t cap, size_t *n_out) {
    if (s == NULL || caller == NULL || n_out == NULL || (cap > 0 && out == NULL))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "generate: NULL argument");
    *n_out = 0;
    ds4rt_generate_params gp;
    ds4rt_sampler_params sampler;
    ds4rt_status rst = ds4rt_struct_read(&GENERATE_PARAMS, caller, &gp);
    if (rst == DS4RT_OK) rst = ds4rt_sampler_params_read(gp.sampler, &sampler);
    if (rst == DS4RT_OK && gp.max_tokens < 0)
        rst = ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "max_tokens %d < 0", (int)gp.max_tokens);
    if (rst != DS4RT_OK) return ds4rt_session_error(s, ds4rt_fail_context(rst, "generate"));
    gp.sampler = &sampler; /* from here on always the library's layout */
    const ds4rt_generate_params *params = &gp;
    if (params->spec != NULL) {
        ds4rt_status sst = ds4rt_generate_speculative(s, prompt, n_prompt, params, out, cap, n_out);
        return ds4rt_session_error(s, sst);
    }
    /* everything that can be refused is refused before the prompt changes the context */
    if (n_prompt == 0 && s->cur == NULL)
        return ds4rt_session_error(s, ds4rt_fail(DS4RT_ERR_STATE, "generate: no logits to sample from (empty prompt "
                                                                  "and empty context)"));
    ds4rt_sampler *smp;
    ds4rt_status st = ds4rt_sampler_create(params->sampler, s->model->target.hp.n_vocab, &smp);
    if (st != DS4RT_OK) return ds4rt_session_error(s, st);
    st = ds4rt_session_eval(s, prompt, n_prompt, NULL);
    if (st != DS4RT_OK) {
        ds4rt_sampler_free(smp);
        return st;
    }
    size_t limit = (size_t)params->max_tokens;
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
