/*
 * speculative.c - speculative generation: draft, verify in one target pass, accept, roll back
 * (docs/DSPARK.md, "Verification and rollback").
 *
 * Alignment (DeepSeek's reference): the anchor is the token sampled from the last committed
 * row p and not yet run by the target; the drafter proposes d_1..d_k after it; one target pass
 * over [anchor, d_1..d_k] at p+1..p+k+1 verifies them. Greedy: the longest prefix matching the
 * target's argmax, then the target's argmax as the bonus. Sampling: rejection sampling against
 * the drafter's distribution (accept with min(1, p/q), else resample from norm(max(0, p - q)),
 * bonus from p), which leaves the output distribution exactly the target's. The session is then
 * truncated to the committed prefix - exact, without replay (state.h) - and, because every
 * verify row is bitwise what one-token decoding computes, greedy output is token for token the
 * same as plain decoding's.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "api_internal.h"
#include "internal.h"
#include "sampling.h"
#include "scheduler.h"

#define RESIDUAL_FLOOR 1e-8

typedef struct spec_run {
    ds4rt_session *s;
    const ds4rt_generate_params *gp;
    ds4rt_spec_params sp;
    const ds4rt_dspark *d;
    ds4rt_sched sched;
    ds4rt_rng rng;
    uint32_t V;
    int32_t block;          /* most drafts a cycle may verify */
    bool sample;            /* temperature > 0 */
    float *p_probs;         /* [V] */
    float *q_rows;          /* [block][V] */
    float *work_val;        /* [2V] */
    int32_t *work_idx;      /* [V] */
    int32_t *host_draft;    /* [block] */
    ds4rt_spec_stats *st;
    ds4rt_sched_memory *mem; /* where the scheduler's state is kept between generations */
    bool recalled;           /* it started from a kept state */
    uint64_t cycle;          /* cycles of this generation */
} spec_run;

static void free_run(spec_run *r) {
    free(r->p_probs);
    free(r->q_rows);
    free(r->work_val);
    free(r->work_idx);
    free(r->host_draft);
}

/* The target distribution of a row (sampler filters applied), or argmax for greedy. */
static void target_probs(spec_run *r, const float *logits) {
    ds4rt_sampling_probs(r->gp->sampler, logits, r->V, r->p_probs, r->work_idx, r->work_val);
}

static int32_t pick(spec_run *r, const float *logits) {
    if (!r->sample) return ds4rt_argmax(logits, r->V);
    target_probs(r, logits);
    return ds4rt_sample_probs(r->p_probs, r->V, ds4rt_rng_uniform(&r->rng));
}

/* ---- drafting --------------------------------------------------------------------------- */

typedef struct draft {
    int32_t n;
    int32_t tokens[DS4RT_DSPARK_MAX_BLOCK];
    float conf[DS4RT_DSPARK_MAX_BLOCK];
    bool have_conf;
    bool have_q;            /* q_rows hold the drafts' distributions (else point masses) */
    ds4rt_no_draft_reason reason;
    double ms;
} draft;

static void dspark_draft(spec_run *r, int32_t anchor, int32_t L, draft *out) {
    ds4rt_session *s = r->s;
    ds4rt_spec_stats *st = r->st;
    if (s->drafter.end != s->st.n_pos) {
        out->reason = DS4RT_NO_DRAFT_NOT_READY;
        return;
    }
    double u[DS4RT_DSPARK_MAX_BLOCK];
    for (int32_t i = 0; i < L; i++) u[i] = r->sample ? ds4rt_rng_uniform(&r->rng) : 0.0;
    ds4rt_proposal prop;
    ds4rt_status rc = ds4rt_drafter_propose(&s->drafter, anchor, L, r->sp.confidence_threshold,
                                            r->sample ? r->gp->sampler : NULL, u, r->work_val, r->work_idx, r->sample,
                                            &prop);
    st->prop_stage0 += prop.ms_fusion; /* lazy context rows, computed for this proposal */
    st->prop_cache += prop.ms_rows;
    st->prop_setup += prop.ms_setup;
    st->prop_chain += prop.ms_chain;
    for (uint32_t i = 0; i < DS4RT_DSPARK_MAX_STAGES; i++) st->stage_ms[i] += prop.ms_stage[i];
    st->prop_hidden += prop.ms_hidden;
    st->prop_conf0 += prop.ms_conf0;
    st->prop_logits += prop.ms_logits;
    st->prop_markov += prop.ms_markov;
    if (rc != DS4RT_OK) {
        st->errors++;
        out->reason = DS4RT_NO_DRAFT_ERROR;
        return;
    }
    if (prop.cut) st->confidence_cuts++;
    out->n = prop.n;
    memcpy(out->tokens, prop.tokens, (size_t)prop.n * sizeof(int32_t));
    memcpy(out->conf, prop.conf, (size_t)prop.n * sizeof(float));
    out->have_conf = true;
    if (prop.n == 0) out->reason = prop.cut ? DS4RT_NO_DRAFT_CONFIDENCE : DS4RT_NO_DRAFT_EMPTY;
    if (r->sample) {
        for (int32_t i = 0; i < prop.n; i++)
            ds4rt_sampling_probs(r->gp->sampler, prop.corrected + (size_t)i * r->V, r->V, r->q_rows + (size_t)i * r->V,
                                 r->work_idx, r->work_val);
        out->have_q = true;
    }
}

static void host_draft(spec_run *r, int32_t anchor, int32_t L, draft *out) {
    ds4rt_session *s = r->s;
    /* the context the host sees ends with the anchor (the pass will overwrite this slot) */
    s->tokens[s->st.n_pos] = anchor;
    int32_t have_probs = 0;
    int32_t n = r->sp.draft_fn(r->sp.draft_user, s->tokens, (size_t)s->st.n_pos + 1, L, r->host_draft,
                               r->sample ? r->q_rows : NULL, r->V, &have_probs);
    if (n < 0) {
        r->st->errors++;
        out->reason = DS4RT_NO_DRAFT_ERROR;
        return;
    }
    if (n > L) n = L;
    for (int32_t i = 0; i < n; i++)
        if (r->host_draft[i] < 0 || (uint32_t)r->host_draft[i] >= r->V) {
            r->st->invalid++;
            out->reason = DS4RT_NO_DRAFT_ERROR;
            return;
        }
    out->n = n;
    memcpy(out->tokens, r->host_draft, (size_t)n * sizeof(int32_t));
    out->have_q = r->sample && have_probs;
    if (n == 0) out->reason = DS4RT_NO_DRAFT_EMPTY;
}

/* ---- verification ------------------------------------------------------------------------- */

/* Accepted draft count; *next receives the bonus or resampled token. rows = the pass's logits,
 * row j judging the input after position j (row 0 judges d_1). */
static int32_t accept(spec_run *r, const draft *dft, const float *rows, int32_t *next) {
    const uint32_t V = r->V;
    int32_t n = 0;
    if (!r->sample) {
        while (n < dft->n && dft->tokens[n] == ds4rt_argmax(rows + (size_t)n * V, V)) n++;
        *next = ds4rt_argmax(rows + (size_t)n * V, V);
        return n;
    }
    for (; n < dft->n; n++) {
        int32_t x = dft->tokens[n];
        target_probs(r, rows + (size_t)n * V);
        const float *q = dft->have_q ? r->q_rows + (size_t)n * V : NULL;
        double qx = q ? q[x] : 1.0; /* a draft without a distribution is a point mass */
        double px = r->p_probs[x];
        if (qx > 0.0 && ds4rt_rng_uniform(&r->rng) < (px >= qx ? 1.0 : px / qx)) continue;
        /* rejected: sample the residual norm(max(0, p - q)), or p when it has no mass */
        double mass = 0.0;
        for (uint32_t v = 0; v < V; v++) {
            double qv = q ? q[v] : (v == (uint32_t)x ? 1.0 : 0.0);
            double rv = r->p_probs[v] - qv;
            r->work_val[v] = rv > 0 ? (float)rv : 0.0f;
            mass += r->work_val[v];
        }
        const float *dist = mass > RESIDUAL_FLOOR ? r->work_val : r->p_probs;
        *next = ds4rt_sample_probs(dist, V, ds4rt_rng_uniform(&r->rng));
        return n;
    }
    target_probs(r, rows + (size_t)n * V);
    *next = ds4rt_sample_probs(r->p_probs, V, ds4rt_rng_uniform(&r->rng));
    return n;
}

/* ---- the loop ----------------------------------------------------------------------------- */

static void count_cycle(spec_run *r, const draft *dft, int32_t n, double propose_ms, double verify_ms,
                        bool verify_recorded) {
    ds4rt_spec_stats *st = r->st;
    st->cycles++;
    st->first_tokens++;
    if (dft->n == 0) {
        st->no_draft++;
        st->no_draft_by_reason[dft->reason]++;
        if (dft->reason == DS4RT_NO_DRAFT_SCHEDULER) st->scheduler_skips++;
        if (dft->reason == DS4RT_NO_DRAFT_NO_ROOM) st->no_room++;
        st->target += verify_ms;
    } else {
        st->proposed += (uint64_t)dft->n;
        st->accepted_draft += (uint64_t)n;
        st->draft_len_hist[dft->n]++;
        for (int32_t i = 0; i < dft->n; i++) st->proposed_at[i]++;
        for (int32_t i = 0; i < n; i++) st->accepted_at[i]++;
        if (n == dft->n) st->full++;
        else if (n > 0) st->partial++;
        if (n == 0) st->miss_first++;
        st->verify += verify_ms;
    }
    st->accepted_len_hist[n]++;
    const ds4rt_cache_state *cache = &r->s->model->cache;
    st->cache_bytes = cache->bytes;
    st->cache_hits = cache->hits + ds4rt_backend_cache_hits(r->s->model->be);
    st->cache_fallbacks = cache->fallbacks;
    ds4rt_sched_observe(&r->sched, dft->n, n, propose_ms, verify_ms, verify_recorded);
    double dec = ds4rt_sched_decode_ms(&r->sched);
    if (dec <= 0) dec = verify_ms;
    st->decode_ms_avg = dec;
    st->saved += n * dec;
    if (dft->n > 0) st->net_saved += n * dec - (propose_ms > 0 ? propose_ms : 0) - (verify_ms - dec);
    else if (propose_ms > 0) st->net_saved -= propose_ms;
}

/* The schedule log's event of a cycle (spec.on_schedule). */
static void log_schedule(spec_run *r, int64_t anchor_pos, int32_t max_d, int32_t planned, bool probe, int32_t proposed,
                         const draft *dft, int32_t accepted, double propose_ms, double verify_ms, uint64_t rows) {
    const ds4rt_sched *sc = &r->sched;
    ds4rt_schedule_event ev;
    memset(&ev, 0, sizeof ev);
    ev.size = sizeof ev;
    ev.cycle = r->cycle;
    ev.position = anchor_pos;
    ev.mode = (int32_t)sc->p.mode;
    ev.max_draft = max_d;
    ev.planned = planned;
    ev.probe = probe;
    ev.proposed = proposed;
    ev.verified = dft->n;
    ev.accepted = accepted;
    ev.reason = dft->n > 0 ? -1 : (int32_t)dft->reason;
    ev.probe_gap = sc->probe_gap;
    ev.recalled = r->recalled;
    ev.cost_decode = sc->plan_decode;
    ev.cost_propose = sc->plan_propose;
    ev.cost_verify = sc->plan_verify;
    ev.expected_tokens = sc->plan_expected;
    ev.rate_plan = sc->plan_rate;
    ev.rate_skip = sc->plan_rate_skip;
    for (int32_t i = 0; i < DS4RT_MAX_DRAFT; i++) ev.acceptance[i] = sc->plan_acc[i];
    ev.propose_ms = propose_ms;
    ev.verify_ms = verify_ms;
    ev.drafter_rows = rows;
    r->sp.on_schedule(r->sp.schedule_user, &ev);
}

/* Emits a token; returns false when generation must stop after it. */
static bool emit(spec_run *r, int32_t tok, int32_t *out, size_t *n_out, size_t limit) {
    out[(*n_out)++] = tok;
    r->st->tokens++;
    int go_on = r->gp->on_token ? r->gp->on_token(r->gp->user, tok) : 1;
    bool eos = r->gp->stop_at_eos && tok == r->s->model->eos_id;
    return go_on && !eos && *n_out < limit;
}

static ds4rt_status run_loop(spec_run *r, int32_t *out, size_t limit, size_t *n_out) {
    ds4rt_session *s = r->s;
    ds4rt_spec_stats *st = r->st;
    double t_start = ds4rt_now_ms();
    bool in_context = false; /* the last emitted token is already in the context */
    if (!emit(r, pick(r, s->cur), out, n_out, limit)) goto done;
    for (;;) {
        int32_t anchor = out[*n_out - 1];
        int64_t free_pos = s->st.n_ctx - s->st.n_pos;
        if (free_pos < 1) break; /* context full: the anchor cannot be evaluated */
        int64_t max_d = r->block;
        if ((int64_t)(limit - *n_out) - 1 < max_d) max_d = (int64_t)(limit - *n_out) - 1; /* leave room for the bonus */
        bool tail = max_d <= 0;
        if (free_pos - 1 < max_d) max_d = free_pos - 1;
        if ((int64_t)s->st.max_batch - 1 < max_d) max_d = (int64_t)s->st.max_batch - 1;
        draft dft = {0};
        double propose_ms = -1.0;
        bool probe = false;
        int32_t L = 0;
        uint64_t rows0 = r->d != NULL ? s->drafter.rows_done : 0;
        if (max_d <= 0) {
            dft.reason = tail ? DS4RT_NO_DRAFT_TAIL : DS4RT_NO_DRAFT_NO_ROOM;
            if (tail) st->tail_skips++;
            ds4rt_sched_note_none(&r->sched);
        } else {
            L = ds4rt_sched_plan(&r->sched, (int32_t)max_d, &dft.reason, &probe);
        }
        int32_t proposed = 0;
        if (L > 0) {
            if (probe) st->probes++;
            double t0 = ds4rt_now_ms();
            if (r->d != NULL) dspark_draft(r, anchor, L, &dft);
            else host_draft(r, anchor, L, &dft);
            propose_ms = ds4rt_now_ms() - t0;
            st->propose += propose_ms;
            proposed = dft.n;
            /* a probe is verified whole: trimming it by the estimate it is meant to test would
             * keep that estimate from ever changing */
            int32_t keep = probe ? dft.n : ds4rt_sched_trim(&r->sched, dft.have_conf ? dft.conf : NULL, dft.n);
            if (keep < dft.n) {
                st->scheduler_trims++;
                dft.n = keep;
                if (keep == 0) dft.reason = DS4RT_NO_DRAFT_SCHEDULER;
            }
        }
        int32_t pass[DS4RT_DSPARK_MAX_BLOCK + 1];
        pass[0] = anchor;
        memcpy(pass + 1, dft.tokens, (size_t)dft.n * sizeof(int32_t));
        int64_t p_next = s->st.n_pos; /* position of the anchor */
        double t_v = ds4rt_now_ms();
        ds4rt_status rc = ds4rt_session_pass(s, pass, 1 + dft.n, true);
        double verify_ms = ds4rt_now_ms() - t_v;
        if (rc != DS4RT_OK) {
            st->errors++;
            return rc;
        }
        if (dft.n > 0) {
            st->snapshot += s->last_snapshot_ms;
            st->verify_upload += s->last_upload_ms;
            st->verify_layer += s->last_layers_ms;
            st->verify_head += s->last_head_ms;
            st->verify_read += s->last_read_ms;
        }
        int32_t next;
        int32_t n = accept(r, &dft, s->pass_logits, &next);
        for (int32_t j = 0; j < n; j++) /* a stop token inside the accepted drafts ends them */
            if (r->gp->stop_at_eos && dft.tokens[j] == s->model->eos_id) {
                next = dft.tokens[j];
                n = j;
                break;
            }
        if (n < dft.n) {
            rc = ds4rt_session_truncate(s, p_next + 1 + n);
            if (rc != DS4RT_OK) {
                st->errors++;
                return rc;
            }
        }
        count_cycle(r, &dft, n, propose_ms, verify_ms, s->last_recorded);
        if (r->sp.on_schedule)
            log_schedule(r, p_next, max_d > 0 ? (int32_t)max_d : 0, L, probe, proposed, &dft, n, propose_ms, verify_ms,
                         r->d != NULL ? s->drafter.rows_done - rows0 : 0);
        r->cycle++;
        if (r->sp.on_stats) r->sp.on_stats(r->sp.stats_user, st, 0);
        /* a stop at accepted draft j (on_token said no: a stop string, a callback, Ctrl-C)
         * ends the output there, and the context with it: drafts j+1.. are dropped, and d_j,
         * already evaluated by the verify pass, is not evaluated again (issue 13) */
        int32_t j = 0;
        while (j < n && emit(r, dft.tokens[j], out, n_out, limit)) j++;
        if (j < n) {
            in_context = true;
            if (j + 1 < n) {
                rc = ds4rt_session_truncate(s, p_next + 2 + j);
                if (rc != DS4RT_OK) {
                    st->errors++;
                    return rc;
                }
            }
            break;
        }
        if (!emit(r, next, out, n_out, limit)) break;
    }
done:
    /* as plain generation does, leave every emitted token in the context */
    if (*n_out > 0 && !in_context && s->st.n_pos < s->st.n_ctx) {
        double t0 = ds4rt_now_ms();
        ds4rt_status rc = ds4rt_session_pass(s, &out[*n_out - 1], 1, false);
        st->target += ds4rt_now_ms() - t0;
        if (rc != DS4RT_OK) return rc;
    }
    st->spec_total += ds4rt_now_ms() - t_start;
    return DS4RT_OK;
}

static void spec_params_defaults(void *out) {
    ds4rt_spec_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->confidence_threshold = 0.5f;
    p->scheduler = NULL;
}

/* ABI 1.0 embedded the scheduler parameters; its layout is recognised by its size. */
static void read_1_0(const void *legacy, void *lib) {
    const ds4rt_spec_params_1_0 *o = legacy;
    ds4rt_spec_params *p = lib;
    p->dspark = o->dspark;
    p->draft_fn = o->draft_fn;
    p->draft_user = o->draft_user;
    p->confidence_threshold = o->confidence_threshold;
    p->scheduler = (const ds4rt_scheduler_params *)(const void *)&o->scheduler;
    p->on_stats = o->on_stats;
    p->stats_user = o->stats_user;
    p->on_schedule = NULL;
    p->schedule_user = NULL;
}

static void init_1_0(void *legacy) {
    ds4rt_spec_params_1_0 *o = legacy;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->confidence_threshold = 0.5f;
    (void)ds4rt_scheduler_params_init((ds4rt_scheduler_params *)(void *)&o->scheduler, sizeof o->scheduler);
}

static const ds4rt_legacy_layout SPEC_1_0 = {sizeof(ds4rt_spec_params_1_0), read_1_0, init_1_0};

static const ds4rt_struct_desc SPEC_PARAMS = {
    .name = "ds4rt_spec_params",
    .size = sizeof(ds4rt_spec_params),
    .min_size = offsetof(ds4rt_spec_params, stats_user) + sizeof(void *), /* the 1.1 layout */
    .defaults = spec_params_defaults,
    .legacy = &SPEC_1_0,
    .n_legacy = 1,
};
_Static_assert(sizeof(ds4rt_spec_params) != sizeof(ds4rt_spec_params_1_0),
               "the 1.0 size identifies the 1.0 layout: a later layout must skip it (a reserved field)");
_Static_assert(DS4RT_DSPARK_MAX_BLOCK == DS4RT_MAX_DRAFT && DS4RT_DSPARK_MAX_STAGES == DS4RT_MAX_DRAFTER_STAGES &&
                   DS4RT_DSPARK_MAX_TARGET_LAYERS == DS4RT_MAX_TARGET_LAYERS,
               "the drafter's limits are the public array sizes");

DS4RT_API ds4rt_status ds4rt_spec_params_init(ds4rt_spec_params *params, size_t size) {
    return ds4rt_struct_init(&SPEC_PARAMS, params, size);
}

ds4rt_status ds4rt_spec_params_read(const ds4rt_spec_params *in, ds4rt_spec_params *out,
                                    ds4rt_scheduler_params *scheduler) {
    ds4rt_status st = ds4rt_struct_read(&SPEC_PARAMS, in, out);
    if (st == DS4RT_OK) st = ds4rt_scheduler_params_read(out->scheduler, scheduler);
    out->scheduler = scheduler; /* from here on always the library's layout */
    return st;
}

ds4rt_status ds4rt_generate_speculative(ds4rt_session *s, const int32_t *prompt, size_t n_prompt,
                                        const ds4rt_generate_params *gp, int32_t *out, size_t cap, size_t *n_out) {
    ds4rt_spec_params spec;
    ds4rt_scheduler_params scheduler;
    ds4rt_status rst = ds4rt_spec_params_read(gp->spec, &spec, &scheduler);
    if (rst != DS4RT_OK) return rst;
    const ds4rt_spec_params *sp = &spec;
    if (sp->dspark == NULL && sp->draft_fn == NULL)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "speculative generation needs a drafter: set spec.dspark or "
                                                      "spec.draft_fn");
    if (!(sp->confidence_threshold >= 0.0f && sp->confidence_threshold <= 1.0f))
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT, "confidence_threshold %g outside [0, 1]",
                          (double)sp->confidence_threshold);
    if (sp->dspark != NULL && sp->dspark->model != s->model)
        return ds4rt_fail(DS4RT_ERR_MISMATCH, "the DSpark support model was loaded for another target model");
    int32_t block = sp->dspark != NULL ? (int32_t)sp->dspark->block_size : DS4RT_DSPARK_MAX_BLOCK;
    if (sp->scheduler->max_draft > 0 && sp->scheduler->max_draft < block) block = sp->scheduler->max_draft;
    if ((int64_t)block + 1 > (int64_t)s->st.max_batch)
        return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                          "the session's max_batch %u cannot hold a verify pass of %d drafts + the anchor",
                          s->st.max_batch, block);
    if (n_prompt == 0 && s->cur == NULL)
        return ds4rt_fail(DS4RT_ERR_STATE, "generate: no logits to sample from (empty prompt and empty context)");
    spec_run r = {.s = s, .gp = gp, .sp = *sp, .d = sp->dspark, .st = &s->stats};
    r.V = s->model->target.hp.n_vocab;
    r.sample = gp->sampler->temperature > 0.0f;
    ds4rt_rng_seed(&r.rng, gp->sampler->seed);
    ds4rt_sched_init(&r.sched, sp->scheduler);
    if (r.d != NULL) ds4rt_sched_set_prior(&r.sched, r.d->acceptance_prior, (int32_t)r.d->n_prior);
    r.block = block;
    /* what an earlier generation with this drafter learned (costs, acceptance, probe gap) */
    const void *mem_key = r.d != NULL ? (const void *)r.d : sp->draft_user;
    ds4rt_draft_fn mem_fn = r.d != NULL ? NULL : sp->draft_fn;
    if (r.d != NULL) r.mem = r.d->sched_mem;
    else if (s->host_sched != NULL || ds4rt_sched_memory_create(&s->host_sched) == DS4RT_OK) r.mem = s->host_sched;
    else return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "scheduler memory");
    r.recalled = ds4rt_sched_recall(&r.sched, r.mem, mem_key, mem_fn);
    /* the prompt's tokens and room, checked before the drafter is attached */
    ds4rt_status st = ds4rt_session_check_tokens(s, prompt, n_prompt);
    if (st != DS4RT_OK) return st;
    if (r.d != NULL) {
        st = ds4rt_session_attach_drafter(s, r.d);
        if (st != DS4RT_OK) return st;
    }
    r.p_probs = malloc(r.V * sizeof(float));
    r.q_rows = malloc((size_t)r.block * r.V * sizeof(float));
    r.work_val = malloc(2 * (size_t)r.V * sizeof(float));
    r.work_idx = malloc(r.V * sizeof(int32_t));
    r.host_draft = malloc((size_t)r.block * sizeof(int32_t));
    if (!r.p_probs || !r.q_rows || !r.work_val || !r.work_idx || !r.host_draft)
        st = ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "speculative decoding buffers");
    if (st == DS4RT_OK) st = ds4rt_session_eval(s, prompt, n_prompt, NULL);
    size_t limit = (size_t)gp->max_tokens;
    if (limit > cap) limit = cap;
    if (st == DS4RT_OK && limit > 0) st = run_loop(&r, out, limit, n_out);
    if (st == DS4RT_OK) ds4rt_sched_remember(&r.sched, r.mem, mem_key, mem_fn);
    if (sp->on_stats) sp->on_stats(sp->stats_user, &s->stats, 1);
    free_run(&r);
    return st;
}
