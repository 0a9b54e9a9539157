/*
 * fuzz_params.c - libFuzzer target for the parameter readers and what runs on them
 * (docs/ROBUSTNESS.md): the input's bytes become a ds4rt_sampler_params (any float bits, NaN
 * and infinities included), a vocabulary size and logits, and a ds4rt_scheduler_params with a
 * stream of cycle observations.
 *
 * Sampler: ds4rt_sampler_create refuses what check_params forbids, with a message; an accepted
 * sampler always samples an id in [0, n_vocab), and for finite logits its probabilities are
 * finite, non-negative and sum to 1 (greedy: one-hot at the argmax).
 * Scheduler: ds4rt_scheduler_params_read refuses fields outside their documented domains; on
 * accepted params, with a fuzzed acceptance prior (a support model's, up to DS4RT_SCHED_MAX values
 * in [0, 1]) or none, 64 cycles of plan / trim / observe (with fuzzed acceptance, confidences and
 * timings) keep every draft length within [0, max_draft] and every acceptance estimate in [0, 1],
 * and never overflow (UBSan).
 * Links the library's objects, to reach the scheduler (src/api/scheduler.h).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "ds4rt.h"
#include "fuzz_target.h"
#include "scheduler.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz_params: %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, \
                    #cond, ds4rt_last_error());                                                \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

/* The next k bytes (zeros once the input runs out). */
static void take(reader *r, void *out, size_t k) {
    memset(out, 0, k);
    size_t m = r->n < k ? r->n : k;
    memcpy(out, r->p, m);
    r->p += m;
    r->n -= m;
}

static uint32_t u32(reader *r) {
    uint32_t v;
    take(r, &v, 4);
    return v;
}

static float f32(reader *r) {
    float v;
    take(r, &v, 4);
    return v;
}

/* A float that is mostly in [0, 1]: the byte picks a fraction, sometimes the raw bits. */
static float unit(reader *r) {
    uint8_t b;
    take(r, &b, 1);
    return b == 255 ? f32(r) : (float)b / 254.0f;
}

static void fuzz_sampler(reader *r) {
    ds4rt_sampler_params p;
    REQUIRE(ds4rt_sampler_params_init(&p, sizeof p) == DS4RT_OK);
    p.temperature = f32(r);
    p.top_k = (int32_t)u32(r);
    p.top_p = f32(r);
    p.min_p = f32(r);
    take(r, &p.seed, sizeof p.seed);
    uint32_t V = 1 + u32(r) % 300;
    float *logits = malloc(V * sizeof *logits), *probs = malloc(V * sizeof *probs);
    REQUIRE(logits && probs);
    int finite = 1;
    uint8_t mode;
    take(r, &mode, 1);
    for (uint32_t i = 0; i < V; i++) {
        logits[i] = mode & 1 ? f32(r) : (float)(int8_t)(uint8_t)u32(r) / 8.0f;
        finite &= isfinite(logits[i]) != 0;
    }
    ds4rt_sampler *s = NULL;
    ds4rt_status st = ds4rt_sampler_create(&p, V, &s);
    if (st != DS4RT_OK) {
        REQUIRE(s == NULL && st == DS4RT_ERR_INVALID_ARGUMENT && ds4rt_last_error()[0] != '\0');
        REQUIRE(!isfinite(p.temperature) || !(p.top_p > 0.0f) || !isfinite(p.top_p) || !isfinite(p.min_p) ||
                p.min_p > 1.0f);
    } else {
        for (int k = 0; k < 4; k++) {
            int32_t tok = -1;
            REQUIRE(ds4rt_sampler_sample(s, logits, &tok) == DS4RT_OK);
            REQUIRE(tok >= 0 && (uint32_t)tok < V);
        }
        REQUIRE(ds4rt_sampler_probs(s, logits, probs) == DS4RT_OK);
        if (finite) {
            double sum = 0.0;
            for (uint32_t i = 0; i < V; i++) {
                REQUIRE(isfinite(probs[i]) && probs[i] >= 0.0f);
                sum += probs[i];
            }
            REQUIRE(fabs(sum - 1.0) < 1e-3);
        }
        ds4rt_sampler_free(s);
    }
    free(logits);
    free(probs);
}

static void fuzz_scheduler(reader *r) {
    ds4rt_scheduler_params in;
    REQUIRE(ds4rt_scheduler_params_init(&in, sizeof in) == DS4RT_OK);
    in.mode = (ds4rt_scheduler_mode)(u32(r) % 4); /* 3: not a mode */
    in.max_draft = (int32_t)u32(r);
    in.warmup_cycles = (int32_t)(u32(r) % 16);
    in.probe_min = (int32_t)u32(r);
    in.probe_max = (int32_t)u32(r);
    in.history_decay = unit(r);
    in.confidence_weight = unit(r);
    in.measured_costs = (int32_t)(u32(r) & 1);
    in.verify_cost_base = f32(r);
    in.verify_cost_per_token = f32(r);
    in.propose_cost = f32(r);
    ds4rt_scheduler_params p;
    if (ds4rt_scheduler_params_read(&in, &p) != DS4RT_OK) {
        REQUIRE(ds4rt_last_error()[0] != '\0');
        return;
    }
    ds4rt_sched sched;
    ds4rt_sched_init(&sched, &p);
    /* a support model's acceptance prior (validated at load: values in [0, 1]) or none; unit()
     * also gives any float bits, which ds4rt_sched_set_prior must skip */
    float prior[DS4RT_SCHED_MAX];
    int32_t n_prior = (int32_t)(u32(r) % (DS4RT_SCHED_MAX + 1));
    for (int32_t i = 0; i < n_prior; i++) prior[i] = unit(r);
    ds4rt_sched_set_prior(&sched, prior, n_prior);
    for (int cycle = 0; cycle < 64; cycle++) {
        int32_t max_draft = (int32_t)(u32(r) % (DS4RT_SCHED_MAX + 2)) - 1;
        ds4rt_no_draft_reason reason = DS4RT_NO_DRAFT_SCHEDULER;
        bool probe = false;
        int32_t L = ds4rt_sched_plan(&sched, max_draft, &reason, &probe);
        REQUIRE(L >= 0 && L <= (max_draft > 0 ? max_draft : 0));
        for (int32_t i = 0; i < DS4RT_SCHED_MAX; i++) REQUIRE(sched.plan_acc[i] >= 0.0 && sched.plan_acc[i] <= 1.0);
        if (L == 0) REQUIRE((unsigned)reason < DS4RT_NO_DRAFT_REASON_COUNT);
        float conf[DS4RT_SCHED_MAX];
        for (int32_t i = 0; i < L; i++) conf[i] = unit(r);
        int32_t keep = probe ? L : ds4rt_sched_trim(&sched, L ? conf : NULL, L);
        REQUIRE(keep >= 0 && keep <= L);
        int32_t accepted = keep ? (int32_t)(u32(r) % (uint32_t)(keep + 1)) : 0;
        double propose_ms = L ? (double)unit(r) * 10.0 : -1.0;
        double verify_ms = 0.01 + (double)unit(r) * 20.0;
        ds4rt_sched_observe(&sched, keep, accepted, propose_ms, verify_ms, (u32(r) & 7) == 0); /* some recorded */
        REQUIRE(sched.probe_gap >= 1 && sched.probe_gap <= (p.probe_max > 1 ? p.probe_max : 1));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    reader r = {data + 1, size - 1};
    if (data[0] & 1) fuzz_scheduler(&r);
    else fuzz_sampler(&r);
    return 0;
}
