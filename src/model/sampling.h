/* sampling.h - the sampling distribution and a seeded generator (internal; the public
 * ds4rt_sampler wraps these). Speculative verification uses the same functions, so plain and
 * speculative sampling draw from identical distributions. */
#ifndef DS4RT_SAMPLING_H
#define DS4RT_SAMPLING_H

#include <stdint.h>

#include "ds4rt.h"

/* xoshiro256** seeded through splitmix64. */
typedef struct ds4rt_rng {
    uint64_t s[4];
} ds4rt_rng;

void ds4rt_rng_seed(ds4rt_rng *r, uint64_t seed);
/* Uniform in [0, 1) with 53 random bits. */
double ds4rt_rng_uniform(ds4rt_rng *r);

/* Index of the largest value (lowest index on ties; NaN never wins). */
int32_t ds4rt_argmax(const float *v, int64_t n);

/* probs[n] = the distribution of `p` over logits (temperature > 0 required): softmax of
 * logits/T, then top-k, top-p, min-p, renormalised. `work` needs n int32 and n floats. */
void ds4rt_sampling_probs(const ds4rt_sampler_params *p, const float *logits, int64_t n, float *probs,
                          int32_t *work_idx, float *work_val);

/* The token whose cumulative probability (in id order) first exceeds u * total. */
int32_t ds4rt_sample_probs(const float *probs, int64_t n, double u);

#endif /* DS4RT_SAMPLING_H */
