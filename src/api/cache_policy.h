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

#endif /* DS4RT_CACHE_POLICY_H */
