/* sampling.c - temperature / top-k / top-p / min-p sampling with a seeded generator. */
#include "sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "topk.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ds4rt_rng_seed(ds4rt_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

double ds4rt_rng_uniform(ds4rt_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return (double)(result >> 11) * 0x1.0p-53;
}

int32_t ds4rt_argmax(const float *v, int64_t n) {
    int32_t best = 0;
    float bv = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (v[i] > bv) {
            bv = v[i];
            best = (int32_t)i;
        }
    return best;
}

/* Descending probability, then ascending id: a total order, so results are reproducible. */
static _Thread_local const float *g_sort_vals; /* qsort has no context argument */
static int cmp_desc(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = g_sort_vals[i], y = g_sort_vals[j];
    if (x != y) return x > y ? -1 : 1;
    return (i > j) - (i < j);
}

void ds4rt_sampling_probs(const ds4rt_sampler_params *p, const float *logits, int64_t n, float *probs,
                          int32_t *work_idx, float *work_val) {
    const double inv_t = 1.0 / p->temperature;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, isnan(logits[i]) ? -INFINITY : logits[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double e = isnan(logits[i]) ? 0.0 : exp(((double)logits[i] - mx) * inv_t);
        probs[i] = (float)e;
        sum += e;
    }
    for (int64_t i = 0; i < n; i++) probs[i] = (float)(probs[i] / sum);

    if (p->top_k > 0 && p->top_k < n) {
        int64_t m = ds4rt_topk_indices(probs, n, p->top_k, work_val, work_idx);
        memset(work_val, 0, (size_t)n * sizeof(float));
        for (int64_t j = 0; j < m; j++) work_val[work_idx[j]] = probs[work_idx[j]];
        memcpy(probs, work_val, (size_t)n * sizeof(float));
    }
    if (p->top_p < 1.0f) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (probs[i] > 0.0f) work_idx[m++] = (int32_t)i;
        g_sort_vals = probs;
        qsort(work_idx, (size_t)m, sizeof(int32_t), cmp_desc);
        double total = 0.0, cum = 0.0;
        for (int64_t j = 0; j < m; j++) total += probs[work_idx[j]];
        int64_t keep = m;
        for (int64_t j = 0; j < m; j++) {
            cum += probs[work_idx[j]];
            if (cum >= p->top_p * total) {
                keep = j + 1;
                break;
            }
        }
        for (int64_t j = keep; j < m; j++) probs[work_idx[j]] = 0.0f;
    }
    if (p->min_p > 0.0f) {
        float pmax = 0.0f;
        for (int64_t i = 0; i < n; i++) pmax = fmaxf(pmax, probs[i]);
        for (int64_t i = 0; i < n; i++)
            if (probs[i] < p->min_p * pmax) probs[i] = 0.0f;
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) total += probs[i];
    for (int64_t i = 0; i < n; i++) probs[i] = (float)(probs[i] / total);
}

int32_t ds4rt_sample_probs(const float *probs, int64_t n, double u) {
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) total += probs[i];
    double target = u * total, cum = 0.0;
    int32_t last = -1;
    for (int64_t i = 0; i < n; i++) {
        if (probs[i] <= 0.0f) continue;
        cum += probs[i];
        last = (int32_t)i;
        if (cum > target) return last;
    }
    return last < 0 ? 0 : last;
}
