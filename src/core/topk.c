/* topk.c - deterministic top-k selection for the indexer and the MoE router. */
#include "topk.h"

#include <math.h>

static float key(float x) { return isnan(x) ? -INFINITY : x; }

/* k-th largest (1-based) of a[0..n) by iterative quickselect; reorders a. */
static float kth_largest(float *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        float pivot = a[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] > pivot) i++;
            while (a[j] < pivot) j--;
            if (i <= j) {
                float t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return a[want];
    }
    return a[want];
}

int64_t ds4rt_topk_indices(const float *v, int64_t n, int64_t k, float *tmp, int32_t *out) {
    if (k >= n) {
        for (int64_t i = 0; i < n; i++) out[i] = (int32_t)i;
        return n;
    }
    if (k <= 0) return 0;
    for (int64_t i = 0; i < n; i++) tmp[i] = key(v[i]);
    float thr = kth_largest(tmp, n, k);
    int64_t above = 0;
    for (int64_t i = 0; i < n; i++) above += key(v[i]) > thr;
    int64_t ties_left = k - above, m = 0;
    for (int64_t i = 0; i < n; i++) {
        float x = key(v[i]);
        if (x > thr || (x == thr && ties_left-- > 0)) out[m++] = (int32_t)i;
    }
    return m;
}

void ds4rt_topk_small(const float *v, int64_t n, int64_t k, int32_t *out) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        float x = key(v[i]);
        if (m == k && !(x > key(v[out[m - 1]]))) continue;
        int64_t j = m < k ? m++ : k - 1;
        while (j > 0 && x > key(v[out[j - 1]])) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = (int32_t)i;
    }
}
