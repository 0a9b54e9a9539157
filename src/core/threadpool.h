/*
 * threadpool.h - a persistent pool of worker threads for the CPU backend.
 *
 * The calling thread takes part in the work, so a pool of n threads starts n-1 workers.
 * parallel_for splits [0, n) into chunks of at least `grain` items and returns when all are
 * done. The split never changes what is computed for an item, only who computes it, so results
 * do not depend on the thread count.
 */
#ifndef DS4RT_THREADPOOL_H
#define DS4RT_THREADPOOL_H

#include <stdint.h>

#include "ds4rt.h"

typedef struct ds4rt_pool ds4rt_pool;

/* Work on items [begin, end); `thread` is in [0, n_threads) and identifies per-thread scratch. */
typedef void (*ds4rt_range_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* n_threads <= 0 means one per online CPU the process may run on. */
ds4rt_status ds4rt_pool_create(int n_threads, ds4rt_pool **out);
void ds4rt_pool_destroy(ds4rt_pool *pool);
int ds4rt_pool_threads(const ds4rt_pool *pool);

/* Runs fn over [0, n) in chunks of about max(grain, n / (4 * threads)) items, never more than
 * n / (2 * threads) (a job larger than the grain keeps every thread busy) and sized so that
 * their count is close to a multiple of the thread count; n <= grain runs on the calling thread
 * alone. Not reentrant: one call at a time per pool.
 * A NULL pool runs everything on the calling thread. */
void ds4rt_pool_parallel_for(ds4rt_pool *pool, int64_t n, int64_t grain, ds4rt_range_fn fn,
                             void *ctx);

/* CPUs the process may run on (at least 1). */
int ds4rt_cpu_count(void);

#endif /* DS4RT_THREADPOOL_H */
