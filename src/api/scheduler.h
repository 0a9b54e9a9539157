/*
 * scheduler.h - how long a draft each speculative cycle asks for (docs/DSPARK.md, scheduler).
 *
 * ADAPTIVE keeps an online cost model - the time of a plain decode, of a verify pass per width,
 * of a proposal - and a per-position acceptance estimate (the chance the drafter's i-th token
 * is accepted given the ones before were). Before drafting it picks the length L maximising
 * expected tokens per unit of time, (1 + sum_j prod_{i<=j} a_i) / cost(L), with cost(0) a plain
 * decode; L = 0 skips the drafter. While skipping it probes now and then (after probe_min
 * skipped cycles, doubling up to probe_max while probes stay unprofitable) so it notices when
 * drafting pays again; a probe drafts only two tokens, since it measures the first positions'
 * acceptance and a long probe would cost what skipping saves. After a proposal (not a probe)
 * it trims the draft by walking positions in order and
 * stopping at the first one that lowers the expected rate (an early stop: admitting position j
 * never depends on later positions, so sampling stays exact).
 */
#ifndef DS4RT_SCHEDULER_H
#define DS4RT_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "ds4rt.h"

#define DS4RT_SCHED_MAX 16

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
    double acc_all;                  /* over every position tried: stands in for positions
                                        with few observations (deeper ones, typically) */
    int64_t tries_all;
    int32_t skip_run;                /* consecutive cycles skipped */
    int32_t probe_gap;
    bool probing;                    /* the current proposal is a probe */
} ds4rt_sched;

void ds4rt_sched_init(ds4rt_sched *s, const ds4rt_scheduler_params *p);

/* Draft length to ask for, <= max_draft; 0 with *reason set when not drafting. */
int32_t ds4rt_sched_plan(ds4rt_sched *s, int32_t max_draft, ds4rt_no_draft_reason *reason, bool *probe);

/* Length to verify of a proposal of n tokens whose confidences are conf[0..n) (NULL if the
 * drafter gives none). */
int32_t ds4rt_sched_trim(const ds4rt_sched *s, const float *conf, int32_t n);

/* After a cycle: drafts verified, drafts accepted, the proposal time (< 0 if none) and the
 * verify pass time of width 1 + drafted. */
void ds4rt_sched_observe(ds4rt_sched *s, int32_t drafted, int32_t accepted, double propose_ms, double verify_ms);

/* The plain-decode time the cost model currently uses (ms; inferred until measured). */
double ds4rt_sched_decode_ms(const ds4rt_sched *s);

#endif /* DS4RT_SCHEDULER_H */
