/*
 * matmul_profile.h - where the CPU's matrix-product time goes, when asked for.
 *
 * With the environment variable DS4RT_PROFILE set to a file path (or to "-" for stderr) when the
 * first product runs, every ds4rt_matmul_batch call adds its wall time to per-weight-type
 * counters (calls, products, weight bytes, token rows, ns), the activation conversion to its own
 * counter, and the counters are written as one JSON object at process exit. Off (the default),
 * it costs one predictable branch per call. The bench (tools/bench_cpu_peer.py --profile) sets
 * it for one extra decode run; what is not in these counters is the rest of the pass (norms,
 * attention, HC, routing, the pool's waits outside products).
 */
#ifndef DS4RT_MATMUL_PROFILE_H
#define DS4RT_MATMUL_PROFILE_H

#include <stdint.h>

/* Nonzero when profiling is on (decided once, from the environment). */
int ds4rt_mmprof_on(void);

/* Monotonic nanoseconds. */
int64_t ds4rt_mmprof_now(void);

/* One product of `type`: its share of a batch's product time, weight bytes and token rows. */
void ds4rt_mmprof_add(uint32_t type, int64_t ns, uint64_t weight_bytes, int64_t n_tok);

/* One batch: its activation conversion time and its dispatch. */
void ds4rt_mmprof_batch(int64_t quant_ns, int64_t total_ns);

#endif /* DS4RT_MATMUL_PROFILE_H */
