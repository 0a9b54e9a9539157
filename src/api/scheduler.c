/* scheduler.c - the adaptive / always / off draft-length policy (see scheduler.h). */
#include "scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "abi_1_0.h"
#include "api_internal.h"
#include "internal.h"

static void scheduler_params_defaults(void *out) {
    ds4rt_scheduler_params *p = out;
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->mode = DS4RT_SCHEDULER_ADAPTIVE;
    p->max_draft = 0;
    p->warmup_cycles = 1; /* a warm-up cycle is a probe: one is enough to start deciding */
    p->probe_min = 4;
    p->probe_max = 256;   /* the probe budget, not this cap, sets the gap of a useless drafter */
    /* a long memory: with 0.9 a short run of misses made the estimates look unprofitable, the
     * scheduler stopped drafting, and only its rare probes (one observation of the first
     * positions each) could lift them again, so a drafter that pays on average was starved
     * where a proposal is dear (docs/PERFORMANCE.md, "The adaptive scheduler's memory") */
    p->history_decay = 0.99f;
    p->confidence_weight = 0.5f;
    p->measured_costs = 1;
    p->verify_cost_base = 0.8f;
    p->verify_cost_per_token = 0.2f;
    p->propose_cost = 0.3f;
}

static const ds4rt_struct_desc SCHEDULER_PARAMS = {
    .name = "ds4rt_scheduler_params",
    .size = sizeof(ds4rt_scheduler_params),
    .min_size = sizeof(ds4rt_scheduler_params_1_0),
    .defaults = scheduler_params_defaults,
};

DS4RT_API ds4rt_status ds4rt_scheduler_params_init(ds4rt_scheduler_params *params, size_t size) {
    return ds4rt_struct_init(&SCHEDULER_PARAMS, params, size);
}

/* The domain of each field. Probe gaps are bounded so their doubling cannot overflow; costs
 * are bounded so the cost model's products stay finite. */
#define PROBE_LIMIT (1 << 20)
#define COST_LIMIT 1e6f

static bool in_unit(float x) { return x >= 0.0f && x <= 1.0f; } /* false for NaN */
static bool is_cost(float x) { return x >= 0.0f && x <= COST_LIMIT; }

static ds4rt_status check_params(const ds4rt_scheduler_params *p) {
    const char *bad = NULL;
    if ((unsigned)p->mode > DS4RT_SCHEDULER_OFF) bad = "mode is not a ds4rt_scheduler_mode";
    else if (p->max_draft < 0) bad = "max_draft < 0";
    else if (p->warmup_cycles < 0) bad = "warmup_cycles < 0";
    else if (p->probe_min < 0 || p->probe_min > PROBE_LIMIT) bad = "probe_min outside [0, 2^20]";
    else if (p->probe_max < 1 || p->probe_max > PROBE_LIMIT || p->probe_max < p->probe_min)
        bad = "probe_max outside [max(1, probe_min), 2^20]";
    else if (!in_unit(p->history_decay)) bad = "history_decay outside [0, 1]";
    else if (!in_unit(p->confidence_weight)) bad = "confidence_weight outside [0, 1]";
    else if (!is_cost(p->verify_cost_base) || !is_cost(p->verify_cost_per_token) || !is_cost(p->propose_cost))
        bad = "a fixed-model cost outside [0, 1e6]";
    else if (!(p->verify_cost_base + p->verify_cost_per_token > 0.0f))
        bad = "verify_cost_base + verify_cost_per_token is not > 0";
    if (bad == NULL) return DS4RT_OK;
    return ds4rt_fail(DS4RT_ERR_INVALID_ARGUMENT,
                      "scheduler params: %s (mode %d, max_draft %d, warmup_cycles %d, probe_min %d, probe_max %d, "
                      "history_decay %g, confidence_weight %g, costs %g %g %g)",
                      bad, (int)p->mode, p->max_draft, p->warmup_cycles, p->probe_min, p->probe_max,
                      (double)p->history_decay, (double)p->confidence_weight, (double)p->verify_cost_base,
                      (double)p->verify_cost_per_token, (double)p->propose_cost);
}

ds4rt_status ds4rt_scheduler_params_read(const ds4rt_scheduler_params *in, ds4rt_scheduler_params *out) {
    ds4rt_status st = ds4rt_struct_read(&SCHEDULER_PARAMS, in, out);
    return st == DS4RT_OK ? check_params(out) : st;
}

void ds4rt_sched_init(ds4rt_sched *s, const ds4rt_scheduler_params *p) {
    memset(s, 0, sizeof *s);
    s->p = *p;
    for (int i = 0; i < DS4RT_SCHED_MAX; i++) s->acc[i] = 0.5; /* uninformed prior */
    s->acc_all = 0.5;
    s->probe_gap = p->probe_min > 0 ? p->probe_min : 1;
}

void ds4rt_sched_set_prior(ds4rt_sched *s, const float *prior, int32_t n) {
    for (int32_t i = 0; i < n && i < DS4RT_SCHED_MAX; i++) {
        if (!(prior[i] >= 0.0f && prior[i] <= 1.0f)) continue; /* the loader refuses these; NaN too */
        s->acc[i] = prior[i];
        s->prior_w[i] = DS4RT_SCHED_PRIOR_WEIGHT;
    }
}

/* The warm-up's probes: the first warmup_cycles cycles after the plain decode that measured the
 * decode cost (measured costs), or the first warmup_cycles cycles (the fixed model). */
static bool warming_up(const ds4rt_sched *s) { return s->cycles - s->warm0 < s->p.warmup_cycles; }

/* Cost of a plain decode: measured, or inferred from a measured verify width through the
 * fixed model's shape, or 1 (the fixed model's unit). */
static double decode_cost(const ds4rt_sched *s) {
    if (!s->p.measured_costs) return 1.0;
    if (s->decode_ms > 0) return s->decode_ms;
    for (int32_t w = 2; w < (int32_t)DS4RT_ARRAY_LEN(s->verify_ms); w++)
        if (s->have_verify[w]) return s->verify_ms[w] / (s->p.verify_cost_base + s->p.verify_cost_per_token * w);
    return 1.0;
}

/* A pass over more tokens never costs less than a plain decode: a noisy (preempted) decode
 * measurement must not make drafting look free, since while every cycle drafts the decode
 * time is never measured again. */
static double verify_cost_raw(const ds4rt_sched *s, int32_t width);
static double verify_cost(const ds4rt_sched *s, int32_t width) {
    double v = verify_cost_raw(s, width), unit = decode_cost(s);
    return v > unit ? v : unit;
}

static double verify_cost_raw(const ds4rt_sched *s, int32_t width) {
    double unit = decode_cost(s);
    if (!s->p.measured_costs)
        return width == 1 ? unit : unit * (s->p.verify_cost_base + s->p.verify_cost_per_token * width);
    if (width == 1) return unit;
    if (width < (int32_t)DS4RT_ARRAY_LEN(s->verify_ms) && s->have_verify[width]) return s->verify_ms[width];
    /* an unseen width: interpolate linearly between the nearest measured widths */
    int32_t lo = width, hi = width;
    while (lo > 1 && !s->have_verify[lo]) lo--;
    while (hi < (int32_t)DS4RT_ARRAY_LEN(s->verify_ms) - 1 && !s->have_verify[hi]) hi++;
    double vlo = lo >= 1 && s->have_verify[lo] ? s->verify_ms[lo] : unit;
    if (lo < 1) lo = 1;
    if (!s->have_verify[hi] || hi == lo) {
        /* extrapolate with the slope between the two widest measured widths (a measured plain
         * decode is width 1): a CPU's verify(6) is ~3 decodes where the fixed model's slope
         * from verify(3) would say ~2. The fixed model's slope until two are measured. */
        int32_t lo2 = lo - 1;
        while (lo2 >= 1 && !s->have_verify[lo2]) lo2--;
        double slope = unit * s->p.verify_cost_per_token;
        if (lo2 >= 1 && s->have_verify[lo]) {
            slope = (vlo - s->verify_ms[lo2]) / (double)(lo - lo2);
            if (!(slope > 0.0)) slope = 0.0; /* noise: a wider pass is not cheaper (NaN-safe) */
        }
        return vlo + slope * (width - lo);
    }
    return vlo + (s->verify_ms[hi] - vlo) * (double)(width - lo) / (double)(hi - lo);
}

static double propose_cost(const ds4rt_sched *s) {
    if (s->p.measured_costs && s->have_propose) return s->propose_ms;
    return decode_cost(s) * s->p.propose_cost;
}

/* Expected tokens per cycle when verifying L drafts with per-position acceptance a[]. */
static double expected_tokens(const double *a, int32_t L) {
    double e = 1.0, surv = 1.0;
    for (int32_t j = 0; j < L; j++) {
        surv *= a[j];
        e += surv;
    }
    return e;
}

#define MIN_TRIES 3
#define PROBE_LEN 2 /* drafts of a probe: enough to see the first positions' acceptance */
#define PROBE_BUDGET 0.01 /* the share of the time an unprofitable drafter's probes may lose */

/* Per-position acceptance estimates for planning. */
static void estimates(const ds4rt_sched *s, double *a) {
    for (int32_t i = 0; i < DS4RT_SCHED_MAX; i++)
        a[i] = s->tries[i] + s->prior_w[i] >= MIN_TRIES ? s->acc[i] : s->acc_all;
}

double ds4rt_sched_decode_ms(const ds4rt_sched *s) { return s->p.measured_costs ? decode_cost(s) : 0.0; }
double ds4rt_sched_cost_decode(const ds4rt_sched *s) { return decode_cost(s); }
double ds4rt_sched_cost_propose(const ds4rt_sched *s) { return propose_cost(s); }
double ds4rt_sched_cost_verify(const ds4rt_sched *s, int32_t width) { return verify_cost(s, width); }

static double rate(const ds4rt_sched *s, const double *a, int32_t L, bool proposal_paid) {
    double cost = L == 0 && !proposal_paid ? decode_cost(s) : propose_cost(s) + verify_cost(s, 1 + L);
    return expected_tokens(a, L) / cost;
}

/* The plan's figures for the schedule log (rates in tokens per cost unit). */
static void note_plan(ds4rt_sched *s, const double *a, int32_t L) {
    memcpy(s->plan_acc, a, sizeof s->plan_acc);
    s->plan_decode = decode_cost(s);
    s->plan_propose = L > 0 ? propose_cost(s) : 0.0;
    s->plan_verify = verify_cost(s, 1 + L);
    s->plan_rate_skip = rate(s, a, 0, false);
    s->plan_rate = rate(s, a, L, false);
    s->plan_expected = expected_tokens(a, L);
}

void ds4rt_sched_note_none(ds4rt_sched *s) {
    double a[DS4RT_SCHED_MAX];
    estimates(s, a);
    note_plan(s, a, 0);
}

int32_t ds4rt_sched_plan(ds4rt_sched *s, int32_t max_draft, ds4rt_no_draft_reason *reason, bool *probe) {
    *probe = false;
    s->probing = false;
    double a[DS4RT_SCHED_MAX];
    estimates(s, a);
    if (s->p.mode == DS4RT_SCHEDULER_OFF || max_draft <= 0) {
        note_plan(s, a, 0);
        *reason = s->p.mode == DS4RT_SCHEDULER_OFF ? DS4RT_NO_DRAFT_SCHEDULER_OFF : DS4RT_NO_DRAFT_TAIL;
        return 0;
    }
    if (s->p.mode == DS4RT_SCHEDULER_ALWAYS) {
        note_plan(s, a, max_draft < DS4RT_SCHED_MAX ? max_draft : DS4RT_SCHED_MAX);
        return max_draft;
    }
    if (s->p.measured_costs && s->n_verify[1] == 0) {
        /* no plain decode measured yet: this cycle measures one. Inferred from a probe's verify
         * pass through the fixed model's shape instead, a decode can be off by half, and with
         * it every verify width extrapolated from it (docs/PERFORMANCE.md, "The adaptive
         * scheduler's cold start") */
        note_plan(s, a, 0);
        *reason = DS4RT_NO_DRAFT_SCHEDULER;
        return 0;
    }
    if (warming_up(s)) { /* acceptance and the verify cost unmeasured: a warm-up cycle is a probe */
        int32_t L = max_draft < PROBE_LEN ? max_draft : PROBE_LEN;
        note_plan(s, a, L);
        s->skip_run = 0;
        *probe = s->probing = true;
        s->probe_room = max_draft;
        return L;
    }
    int32_t best = 0;
    double best_rate = rate(s, a, 0, false);
    for (int32_t L = 1; L <= max_draft && L <= DS4RT_SCHED_MAX; L++) {
        double r = rate(s, a, L, false);
        if (r > best_rate) {
            best_rate = r;
            best = L;
        }
    }
    if (best > 0) {
        s->skip_run = 0;
        note_plan(s, a, best);
        return best;
    }
    if (s->skip_run >= s->probe_gap) { /* look again: acceptance or costs may have changed */
        s->skip_run = 0;
        *probe = s->probing = true;
        s->probe_room = max_draft;
        int32_t L = max_draft < PROBE_LEN ? max_draft : PROBE_LEN; /* short: a probe is a measurement */
        note_plan(s, a, L);
        return L;
    }
    s->skip_run++;
    note_plan(s, a, 0);
    *reason = DS4RT_NO_DRAFT_SCHEDULER;
    return 0;
}

int32_t ds4rt_sched_trim(const ds4rt_sched *s, const float *conf, int32_t n) {
    if (s->p.mode != DS4RT_SCHEDULER_ADAPTIVE || warming_up(s)) return n;
    double a[DS4RT_SCHED_MAX];
    estimates(s, a);
    double w = conf ? s->p.confidence_weight : 0.0;
    for (int32_t i = 0; i < n && i < DS4RT_SCHED_MAX; i++) a[i] = w * (conf ? conf[i] : 0.0) + (1.0 - w) * a[i];
    int32_t L = 0;
    double r = rate(s, a, 0, true);
    while (L < n && L < DS4RT_SCHED_MAX) {
        double next = rate(s, a, L + 1, true);
        if (next <= r) break; /* early stop: the first position that lowers the rate ends it */
        r = next;
        L++;
    }
    return L;
}

/* Running mean of the first observations, then an exponential average: `n` observations came
 * before this one, so early estimates carry no weight from the prior. */
static void ema(double *x, double v, double decay, int64_t n) {
    double w_new = 1.0 / (double)(n + 1);
    if (w_new < 1.0 - decay) w_new = 1.0 - decay;
    *x += w_new * (v - *x);
}

void ds4rt_sched_observe(ds4rt_sched *s, int32_t drafted, int32_t accepted, double propose_ms, double verify_ms,
                         bool recorded) {
    const double k = s->p.history_decay;
    int32_t width = 1 + drafted;
    /* a recorded pass's time includes its graph's capture and instantiation, a one-time cost
     * that every new session pays again for each width (graphs are per context), and with the
     * memory between generations it would weigh on the estimate each time: no cost sample. A
     * first decode that was recorded leaves the decode unmeasured, so the next cycle measures
     * another. */
    const bool sample = !recorded;
    if (sample && width == 1 && s->p.measured_costs && s->n_verify[1] == 0) s->warm0 = s->cycles + 1; /* the warm-up next */
    if (sample && width < (int32_t)DS4RT_ARRAY_LEN(s->verify_ms)) {
        ema(&s->verify_ms[width], verify_ms, k, s->n_verify[width]++);
        s->have_verify[width] = true;
        if (width == 1) s->decode_ms = s->verify_ms[1];
    }
    if (propose_ms >= 0) {
        ema(&s->propose_ms, propose_ms, k, s->n_propose++);
        s->have_propose = true;
    }
    /* position i was tried if every draft before it was accepted */
    /* in the average over all positions (which stands in for the positions tried less than
     * MIN_TRIES times) the uninformed prior counts as one observation, so one lucky draft does
     * not make every position look certain */
    for (int32_t i = 0; i < drafted && i <= accepted && i < DS4RT_SCHED_MAX; i++) {
        double hit = i < accepted ? 1.0 : 0.0;
        ema(&s->acc[i], hit, k, s->prior_w[i] + s->tries[i]++); /* a prior: its weight's observations came first */
        ema(&s->acc_all, hit, k, 1 + s->tries_all++);
    }
    if (s->probing) {
        /* a probe after which the plan would not draft widens the wait before the next one: at
         * least doubled, and at least the gap over whose plain decodes its expected loss stays
         * under PROBE_BUDGET. "Would draft" looks at every length the probe's cycle allowed, not
         * only the probe's 2: where a proposal costs much more than a verified token (a GPU),
         * 2 drafts never pay although 5 do, and judging by 2 kept such a drafter skipped. */
        double a[DS4RT_SCHED_MAX];
        estimates(s, a);
        bool pays = false;
        for (int32_t L = 1; L <= s->probe_room && L <= DS4RT_SCHED_MAX; L++)
            pays |= rate(s, a, L, false) > rate(s, a, 0, false);
        int32_t first = s->p.probe_min > 0 ? s->p.probe_min : 1;
        if (pays) {
            s->probe_gap = first;
        } else {
            /* a probe the drafter cut to nothing cost its proposal only */
            double dec = decode_cost(s);
            double loss = drafted == 0 ? propose_cost(s)
                                       : propose_cost(s) + verify_cost(s, 1 + drafted) - dec * expected_tokens(a, drafted);
            double want = loss > 0 ? ceil(loss / (PROBE_BUDGET * dec)) : 0.0;
            double gap = 2.0 * s->probe_gap;
            if (gap < want) gap = want;
            if (gap < first) gap = first;
            s->probe_gap = gap < s->p.probe_max ? (int32_t)gap : s->p.probe_max; /* NaN-safe */
        }
        s->probing = false;
    }
    s->cycles++;
}

/* ---- memory between generations ------------------------------------------------------------ */

struct ds4rt_sched_memory {
    pthread_mutex_t mu;
    bool valid;
    const void *key;
    ds4rt_draft_fn key_fn;
    ds4rt_sched s;
};

ds4rt_status ds4rt_sched_memory_create(ds4rt_sched_memory **out) {
    ds4rt_sched_memory *m = calloc(1, sizeof *m);
    if (m == NULL) return ds4rt_fail(DS4RT_ERR_OUT_OF_MEMORY, "scheduler memory");
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return DS4RT_OK;
}

void ds4rt_sched_memory_free(ds4rt_sched_memory *m) {
    if (m == NULL) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static bool remembers(const ds4rt_scheduler_params *p) {
    return p->mode == DS4RT_SCHEDULER_ADAPTIVE && p->measured_costs;
}

static bool same_params(const ds4rt_scheduler_params *a, const ds4rt_scheduler_params *b) {
    return a->mode == b->mode && a->max_draft == b->max_draft && a->warmup_cycles == b->warmup_cycles &&
           a->probe_min == b->probe_min && a->probe_max == b->probe_max && a->history_decay == b->history_decay &&
           a->confidence_weight == b->confidence_weight && a->measured_costs == b->measured_costs &&
           a->verify_cost_base == b->verify_cost_base && a->verify_cost_per_token == b->verify_cost_per_token &&
           a->propose_cost == b->propose_cost;
}

bool ds4rt_sched_recall(ds4rt_sched *s, ds4rt_sched_memory *m, const void *key, ds4rt_draft_fn key_fn) {
    if (m == NULL || !remembers(&s->p)) return false;
    pthread_mutex_lock(&m->mu);
    bool hit = m->valid && m->key == key && m->key_fn == key_fn && same_params(&m->s.p, &s->p);
    if (hit) {
        *s = m->s;
        s->probing = false;
    }
    pthread_mutex_unlock(&m->mu);
    return hit;
}

void ds4rt_sched_remember(const ds4rt_sched *s, ds4rt_sched_memory *m, const void *key, ds4rt_draft_fn key_fn) {
    if (m == NULL || !remembers(&s->p) || s->cycles == 0) return;
    pthread_mutex_lock(&m->mu);
    m->s = *s;
    m->key = key;
    m->key_fn = key_fn;
    m->valid = true;
    pthread_mutex_unlock(&m->mu);
}
