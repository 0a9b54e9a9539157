/*
 * sched_check.c - the adaptive scheduler's cold start, driven directly (tests/test_sched.py):
 * plan / observe with given outcomes and costs, no model. Links the library's objects to reach
 * src/api/scheduler.h. Prints "ok NAME" per check; exits 1 on the first failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt.h"
#include "scheduler.h"

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failures++;                                                        \
            return;                                                            \
        }                                                                      \
    } while (0)

/* The fixed cost model with tools/sched_model.py's launch-bound GPU-like costs (decode units):
 * verify(n) = 1.0 + 0.035 n, a proposal 1.0. */
static ds4rt_scheduler_params defaults(void) {
    ds4rt_scheduler_params p;
    if (ds4rt_scheduler_params_init(&p, sizeof p) != DS4RT_OK) abort();
    return p;
}

static ds4rt_scheduler_params gpu_like(void) {
    ds4rt_scheduler_params p = defaults();
    p.measured_costs = 0;
    p.verify_cost_base = 1.0f;
    p.verify_cost_per_token = 0.035f;
    p.propose_cost = 1.0f;
    return p;
}

static int32_t plan(ds4rt_sched *s, int32_t max_draft, bool *probe) {
    ds4rt_no_draft_reason reason = DS4RT_NO_DRAFT_TAIL;
    int32_t L = ds4rt_sched_plan(s, max_draft, &reason, probe);
    if (L == 0 && reason != DS4RT_NO_DRAFT_SCHEDULER) abort(); /* the adaptive scheduler's own skip */
    return L;
}

static const float PRIOR8[5] = {0.8f, 0.8f, 0.8f, 0.8f, 0.8f};

/* The cold start the prior fixes: under GPU-like costs a fresh scheduler whose warm-up probe
 * misses stops drafting; with a prior of 0.8 it drafts on. */
static void one_missed_probe(void) {
    for (int with_prior = 0; with_prior < 2; with_prior++) {
        ds4rt_scheduler_params p = gpu_like();
        ds4rt_sched s;
        ds4rt_sched_init(&s, &p);
        if (with_prior) ds4rt_sched_set_prior(&s, PRIOR8, 5);
        bool probe;
        int32_t L = plan(&s, 5, &probe);
        CHECK(L == 2 && probe, "the warm-up is a 2-draft probe (got %d, probe %d)", L, probe);
        ds4rt_sched_observe(&s, 2, 0, -1.0, 0.0, false); /* it misses */
        L = plan(&s, 5, &probe);
        if (with_prior)
            CHECK(L > 0 && !probe, "with a prior of 0.8 one missed probe must not stop drafting (L %d)", L);
        else
            CHECK(L == 0, "without a prior one missed probe stops drafting (L %d): the cold start", L);
        if (with_prior)
            CHECK(s.probe_gap == 4, "a probe after which drafting still pays keeps the gap at probe_min (%d)",
                  s.probe_gap);
        else
            /* the probe's expected loss over the 1 % budget: a proposal 1 + verify(3) 1.105 - the
             * 1 + 0.25 + 0.25^2 tokens it is expected to give = 0.7925 decodes: 80 cycles */
            CHECK(s.probe_gap == 80, "a missed probe without a prior waits 80 cycles (%d)", s.probe_gap);
    }
    printf("ok one_missed_probe\n");
}

/* Evidence overrides the prior within tens of cycles: a drafter that always misses stops being
 * drafted after a handful of misses, and a prior does not change the probes after that. */
static void evidence_overrides_the_prior(void) {
    ds4rt_scheduler_params p = gpu_like();
    ds4rt_sched s;
    ds4rt_sched_init(&s, &p);
    ds4rt_sched_set_prior(&s, PRIOR8, 5);
    int drafting = 0, first_skip = -1;
    for (int c = 0; c < 400; c++) {
        bool probe;
        int32_t L = plan(&s, 5, &probe);
        if (L > 0) drafting++;
        else if (first_skip < 0) first_skip = c;
        ds4rt_sched_observe(&s, L, 0, L ? 0.0 : -1.0, 0.0, false);
    }
    CHECK(first_skip > 1 && first_skip < 30, "an always-missing drafter is dropped within tens of cycles (%d)",
          first_skip);
    CHECK(drafting < first_skip + 12, "after that only probes draft (%d drafting cycles)", drafting);
    printf("ok evidence_overrides_the_prior (drafted until cycle %d, %d drafting cycles of 400)\n", first_skip,
           drafting);
}

/* Without a prior, and with set_prior(n = 0), the scheduler is the uninformed one: identical
 * plans and state over a long mixed run. */
static void no_prior_is_the_uninformed_scheduler(void) {
    ds4rt_scheduler_params p = gpu_like();
    ds4rt_sched a, b;
    ds4rt_sched_init(&a, &p);
    ds4rt_sched_init(&b, &p);
    ds4rt_sched_set_prior(&b, PRIOR8, 0);
    uint32_t x = 12345;
    for (int c = 0; c < 300; c++) {
        bool pa, pb;
        int32_t la = plan(&a, 5, &pa), lb = plan(&b, 5, &pb);
        CHECK(la == lb && pa == pb, "cycle %d: %d vs %d", c, la, lb);
        x = x * 1103515245u + 12345u;
        int32_t acc = la ? (int32_t)((x >> 16) % (uint32_t)(la + 1)) : 0;
        ds4rt_sched_observe(&a, la, acc, la ? 0.0 : -1.0, 0.0, false);
        ds4rt_sched_observe(&b, lb, acc, lb ? 0.0 : -1.0, 0.0, false);
    }
    CHECK(memcmp(&a, &b, sizeof a) == 0, "the states differ");
    printf("ok no_prior_is_the_uninformed_scheduler\n");
}

/* Measured costs: the first cycle is a plain decode that measures the decode, the next the
 * warm-up probe, and unmeasured widths are extrapolated from the measured decode and verify. */
static void measured_costs_start_with_a_decode(void) {
    for (int with_prior = 0; with_prior < 2; with_prior++) {
        ds4rt_scheduler_params p = defaults(); /* measured costs */
        ds4rt_sched s;
        ds4rt_sched_init(&s, &p);
        if (with_prior) ds4rt_sched_set_prior(&s, PRIOR8, 5);
        bool probe;
        int32_t L = plan(&s, 5, &probe);
        CHECK(L == 0 && !probe, "the first cycle is a plain decode (L %d, probe %d)", L, probe);
        ds4rt_sched_observe(&s, 0, 0, -1.0, 2.0, false); /* a decode: 2 ms */
        CHECK(ds4rt_sched_cost_decode(&s) == 2.0, "the decode measured (%g)", ds4rt_sched_cost_decode(&s));
        L = plan(&s, 5, &probe);
        CHECK(L == 2 && probe, "then the warm-up probe (L %d, probe %d)", L, probe);
        ds4rt_sched_observe(&s, 2, 2, 0.7, 3.4, false); /* verify(3) = 1.7 decodes: the development VM's shape */
        /* verify(6): 3.4 ms + 3 * (3.4 - 2.0) / 2 = 5.5 ms (2.75 decodes), where the fixed model's
         * slope from verify(3) would say 3.4 + 3 * 0.2 * 2.0 = 4.6 ms */
        double v6 = ds4rt_sched_cost_verify(&s, 6), v2 = ds4rt_sched_cost_verify(&s, 2);
        CHECK(fabs(v6 - 5.5) < 1e-12, "verify(6) extrapolated from the measured decode and verify(3): %g", v6);
        CHECK(fabs(v2 - 2.7) < 1e-12, "verify(2) interpolated: %g", v2);
    }
    printf("ok measured_costs_start_with_a_decode\n");
}

/* A tail cycle (no room to draft) also measures the decode: the warm-up follows it. */
static void a_tail_cycle_measures_the_decode(void) {
    ds4rt_scheduler_params p = defaults(); /* measured costs */
    ds4rt_sched s;
    ds4rt_sched_init(&s, &p);
    ds4rt_sched_note_none(&s);
    ds4rt_sched_observe(&s, 0, 0, -1.0, 1.0, false);
    bool probe;
    int32_t L = plan(&s, 5, &probe);
    CHECK(L == 2 && probe, "the warm-up probe after a tail cycle (L %d)", L);
    printf("ok a_tail_cycle_measures_the_decode\n");
}

/* A scheduler recalled from the memory of an earlier generation is not a fresh one: no decode
 * cycle and no warm-up probe first, it plans from what it learned. */
static void a_recalled_scheduler_plans_at_once(void) {
    ds4rt_scheduler_params p = defaults(); /* measured costs */
    ds4rt_sched_memory *m;
    if (ds4rt_sched_memory_create(&m) != DS4RT_OK) abort();
    static int key;
    ds4rt_sched s;
    ds4rt_sched_init(&s, &p);
    ds4rt_sched_set_prior(&s, PRIOR8, 5);
    bool probe;
    for (int c = 0; c < 20; c++) { /* cheap verify passes, every draft accepted */
        int32_t L = plan(&s, 5, &probe);
        ds4rt_sched_observe(&s, L, L, L ? 0.1 : -1.0, L ? 1.0 + 0.02 * L : 1.0, false);
    }
    ds4rt_sched_remember(&s, m, &key, NULL);
    ds4rt_sched fresh;
    ds4rt_sched_init(&fresh, &p);
    ds4rt_sched_set_prior(&fresh, PRIOR8, 5);
    CHECK(ds4rt_sched_recall(&fresh, m, &key, NULL), "recalled");
    int32_t L = plan(&fresh, 5, &probe);
    CHECK(L == 5 && !probe, "a recalled scheduler drafts the full block at once (L %d, probe %d)", L, probe);
    ds4rt_sched_memory_free(m);
    printf("ok a_recalled_scheduler_plans_at_once\n");
}

/* A pass whose graph was recorded (the first of its width in a session) is no cost sample: a
 * recorded first decode leaves the decode unmeasured (another plain decode follows), and a
 * recorded verify pass moves no verify estimate, while its acceptance counts. */
static void recorded_passes_are_no_cost_samples(void) {
    ds4rt_scheduler_params p = defaults(); /* measured costs */
    ds4rt_sched s;
    ds4rt_sched_init(&s, &p);
    ds4rt_sched_set_prior(&s, PRIOR8, 5);
    bool probe;
    int32_t L = plan(&s, 5, &probe);
    CHECK(L == 0 && !probe, "the first cycle is a plain decode (L %d)", L);
    ds4rt_sched_observe(&s, 0, 0, -1.0, 40.0, true); /* recorded: 40 ms of capture */
    L = plan(&s, 5, &probe);
    CHECK(L == 0 && !probe, "a recorded decode measured nothing: another plain decode (L %d)", L);
    ds4rt_sched_observe(&s, 0, 0, -1.0, 2.0, false);
    CHECK(ds4rt_sched_cost_decode(&s) == 2.0, "the replayed decode measured (%g)", ds4rt_sched_cost_decode(&s));
    L = plan(&s, 5, &probe);
    CHECK(L == 2 && probe, "then the warm-up probe (L %d, probe %d)", L, probe);
    const double inferred = ds4rt_sched_cost_verify(&s, 3);
    ds4rt_sched_observe(&s, 2, 2, 0.5, 60.0, true); /* recorded verify(3) */
    CHECK(ds4rt_sched_cost_verify(&s, 3) == inferred, "a recorded verify(3) moved nothing (%g, was %g)",
          ds4rt_sched_cost_verify(&s, 3), inferred);
    ds4rt_sched_observe(&s, 2, 2, 0.5, 2.2, false);
    CHECK(ds4rt_sched_cost_verify(&s, 3) == 2.2, "the replayed verify(3) measured (%g)", ds4rt_sched_cost_verify(&s, 3));
    printf("ok recorded_passes_are_no_cost_samples\n");
}

int main(void) {
    one_missed_probe();
    evidence_overrides_the_prior();
    no_prior_is_the_uninformed_scheduler();
    measured_costs_start_with_a_decode();
    a_tail_cycle_measures_the_decode();
    a_recalled_scheduler_plans_at_once();
    recorded_passes_are_no_cost_samples();
    printf("sched_check: %d failed\n", failures);
    return failures ? 1 : 0;
}
