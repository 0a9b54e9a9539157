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

#endif /* DS4RT_CACHE_POLICY_H */
