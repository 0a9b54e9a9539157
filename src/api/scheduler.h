/*
 * scheduler.h - how long a draft each speculative cycle asks for (docs/DSPARK.md, scheduler).
 *
 * ADAPTIVE keeps an online cost model - the time of a plain decode, of a verify pass per width,
 * of a proposal - and a per-position acceptance estimate (the chance the drafter's i-th token
 * is accepted given the ones before were). Before drafting it picks the length L maximising
 * expected tokens per unit of time, (1 + sum_j prod_{i<=j} a_i) / cost(L), with cost(0) a plain
 * decode; L = 0 skips the drafter. The warm-up cycles and the probes draft two tokens: they
 * are measurements (of the verify cost and the first positions' acceptance), and a long one
 * would cost what skipping saves. While skipping it probes now and then: after probe_min
 * skipped cycles, then - while probes stay unprofitable - after at least twice the last gap
 * and at least the gap that keeps the expected loss of probing under PROBE_BUDGET of the time
 * (its cost minus the tokens it is expected to give, over the gap's plain decodes), up to
 * probe_max. After a proposal (not a probe) it trims the draft by walking positions in order
 * and stopping at the first one that lowers the expected rate (an early stop: admitting
 * position j never depends on later positions, so sampling stays exact).
 *
 * With measured costs, what a generation learned (costs, acceptance, the probe schedule) is
 * kept for the next one with the same drafter (ds4rt_sched_memory): on the DSpark handle,
 * shared by its sessions, or on the session for a host drafter. So short generations do not
 * pay the warm-up and the early probes again. The fixed cost model (measured_costs = 0)
 * starts every generation afresh, so its schedules stay reproducible.
 */
#ifndef DS4RT_SCHEDULER_H
#define DS4RT_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "ds4rt.h"

#define DS4RT_SCHED_MAX 16

/* The observations a support model's acceptance prior (its optional metadata array
 * ds4rt.dspark.acceptance_prior, docs/DSPARK.md "Scheduler") counts as at each position: a
 * missed probe moves a prior of 0.7 only to 0.62, and after 30 observations the prior weighs
 * 0.2 of the estimate. */
#define DS4RT_SCHED_PRIOR_WEIGHT 8

typedef struct ds4rt_sched {
    ds4rt_scheduler_params p;
    int64_t cycles;                  /* cycles observed */
    double decode_ms;                /* plain decode (verify width 1) */
    double verify_ms[DS4RT_SCHED_MAX + 2]; /* by verify width */
    bool have_verify[DS4RT_SCHED_MAX + 2];
    int64_t n_verify[DS4RT_SCHED_MAX + 2];
    double propose_ms;
    bool have_propose;
    int64_t n_propose;
    double acc[DS4RT_SCHED_MAX];     /* conditional acceptance per position */
    int32_t tries[DS4RT_SCHED_MAX];  /* observations behind acc[i] */
    int32_t prior_w[DS4RT_SCHED_MAX]; /* observations the support model's prior counts as at
                                        position i (DS4RT_SCHED_PRIOR_WEIGHT; 0: no prior) */
    double acc_all;                  /* over every position tried: stands in for positions
                                        with few observations (deeper ones, typically) */
    int64_t tries_all;
    int64_t warm0;                   /* cycles before the warm-up: with measured costs the
                                        plain decode that measured the decode cost */
    int32_t skip_run;                /* consecutive cycles skipped */
    int32_t probe_gap;
    bool probing;                    /* the current proposal is a probe */
    int32_t probe_room;              /* the longest draft the cycle of that probe allowed */
    /* the last plan, for the schedule log */
    double plan_rate_skip, plan_rate, plan_expected, plan_decode, plan_propose, plan_verify;
    double plan_acc[DS4RT_SCHED_MAX];
} ds4rt_sched;

/* A scheduler's state kept between generations (thread-safe: sessions on several threads may
 * share one DSpark handle). */
typedef struct ds4rt_sched_memory ds4rt_sched_memory;

ds4rt_status ds4rt_sched_memory_create(ds4rt_sched_memory **out);
void ds4rt_sched_memory_free(ds4rt_sched_memory *m);
/* Replaces *s (freshly initialised) by the state m holds for the same parameters and owner
 * (`key`, `key_fn`: the drafter's handle, or a host drafter's user pointer and function); true
 * if it did. Only adaptive schedulers with measured costs are remembered. */
bool ds4rt_sched_recall(ds4rt_sched *s, ds4rt_sched_memory *m, const void *key, ds4rt_draft_fn key_fn);
void ds4rt_sched_remember(const ds4rt_sched *s, ds4rt_sched_memory *m, const void *key, ds4rt_draft_fn key_fn);

/* The cost model's current estimates (ms, or decode units with the fixed model): a plain
 * decode, a proposal, a verify pass of `width` tokens. */
double ds4rt_sched_cost_decode(const ds4rt_sched *s);
double ds4rt_sched_cost_propose(const ds4rt_sched *s);
double ds4rt_sched_cost_verify(const ds4rt_sched *s, int32_t width);

void ds4rt_sched_init(ds4rt_sched *s, const ds4rt_scheduler_params *p);

/* After ds4rt_sched_init: start the acceptance estimates of positions 0..n-1 from prior[]
 * (the loader validates: in [0, 1]; a value outside, NaN included, is skipped here), each
 * counted as DS4RT_SCHED_PRIOR_WEIGHT observations. Positions past n (n is clamped to
 * DS4RT_SCHED_MAX) and skipped ones keep the uninformed start. */
void ds4rt_sched_set_prior(ds4rt_sched *s, const float *prior, int32_t n);

/* Draft length to ask for, <= max_draft; 0 with *reason set when not drafting. */
int32_t ds4rt_sched_plan(ds4rt_sched *s, int32_t max_draft, ds4rt_no_draft_reason *reason, bool *probe);

/* A cycle that could not draft (tail, no room): the schedule log shows no plan for it. */
void ds4rt_sched_note_none(ds4rt_sched *s);

/* Length to verify of a proposal of n tokens whose confidences are conf[0..n) (NULL if the
 * drafter gives none). */
int32_t ds4rt_sched_trim(const ds4rt_sched *s, const float *conf, int32_t n);

/* After a cycle: drafts verified, drafts accepted, the proposal time (< 0 if none) and the
 * verify pass time of width 1 + drafted. A `recorded` verify pass (the backend recorded its
 * graph: the first pass of that width in the session) paid a one-time cost, so its time is
 * not a cost sample; its acceptance counts as any other. */
void ds4rt_sched_observe(ds4rt_sched *s, int32_t drafted, int32_t accepted, double propose_ms, double verify_ms,
                         bool recorded);

/* The plain-decode time the cost model currently uses (ms; inferred until measured). */
double ds4rt_sched_decode_ms(const ds4rt_sched *s);

#endif /* DS4RT_SCHEDULER_H */
