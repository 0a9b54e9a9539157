/* topk.h - deterministic top-k selection (ties go to the lower index; NaN ranks lowest). */
#ifndef DS4RT_TOPK_H
#define DS4RT_TOPK_H

#include <stdint.h>

/* Writes the indices of the k largest of v[0..n) to out in ascending index order and returns
 * their count (min(k, n)). tmp needs n floats. O(n) expected. */
int64_t ds4rt_topk_indices(const float *v, int64_t n, int64_t k, float *tmp, int32_t *out);

/* Small-k variant for routers: the k largest in descending value order (ties: lower index
 * first). k <= 64. */
void ds4rt_topk_small(const float *v, int64_t n, int64_t k, int32_t *out);

#endif /* DS4RT_TOPK_H */
