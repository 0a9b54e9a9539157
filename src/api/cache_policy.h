/* cache_policy.h - resolving the Q8->F16 expansion cache policy for the backend in use. */
#ifndef DS4RT_CACHE_POLICY_H
#define DS4RT_CACHE_POLICY_H

#include <stdint.h>

#include "ds4rt.h"

typedef struct ds4rt_cache_state {
    ds4rt_cache_policy requested;
    uint64_t budget;
    int active;
    uint64_t bytes, hits, fallbacks;
    char reason[160];
} ds4rt_cache_state;

/* Decides the cache's state for the CPU backend from the requested policy. */
void ds4rt_cache_resolve_cpu(ds4rt_cache_policy requested, uint64_t budget, ds4rt_cache_state *out);

struct ds4rt_target;

/* Decides and builds the cache for the target's backend: the CPU rule above for a backend
 * without a cache; on a GPU backend, `on` expands the selected Q8_0 matrices within the budget
 * (a failed allocation drops the cache for the remaining ones, counted with the reason), `auto`
 * stays off (reason given), `off` is off. Never depends on a support model. */
void ds4rt_cache_apply(struct ds4rt_target *t, ds4rt_cache_policy requested, uint64_t budget, ds4rt_cache_state *out);

/* What `on` expands on a backend with a cache (the same selection, order and budget rule as
 * ds4rt_cache_apply), without expanding anything: for the memory plan of a model. */
typedef struct ds4rt_cache_plan_bytes {
    uint64_t matrices;         /* the Q8_0 matrices selected */
    uint64_t q8_bytes;         /* their bytes as stored */
    uint64_t f16_bytes;        /* their F16 copies: `on` without a budget */
    uint64_t budget_matrices;  /* ... expanded within the budget */
    uint64_t f16_budget_bytes; /* ... their F16 bytes */
} ds4rt_cache_plan_bytes;

ds4rt_status ds4rt_cache_plan(const struct ds4rt_target *t, uint64_t budget, ds4rt_cache_plan_bytes *out);

#endif /* DS4RT_CACHE_POLICY_H */
