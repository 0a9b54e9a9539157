/* cpu_math.c - norms, hyper-connections, RoPE, FP8/FP4 simulations, Hadamard (see cpu_math.h). */
#include "cpu_math.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h" /* ds4rt_cpu_expf_vector */

/* ---- expf of an array (cpu_math.h) ------------------------------------------------------------ */

bool ds4rt_expf_rows_vector(void) { return ds4rt_cpu_expf_vector(); } /* the choice: cpu_isa.c */

void ds4rt_expf_rows(float *x, int64_t n) {
#if defined(__x86_64__)
    if (ds4rt_expf_rows_vector()) {
        ds4rt_expf_rows_fma(x, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = expf(x[i]);
}

/* out = x * inv(ss) (* w): the second half of an RMS norm, given the row's sum of squares. */
static void rms_scale(const float *x, int64_t n, const float *w, float eps, double ss, float *out) {
    float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    if (w != NULL) {
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
    } else {
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv;
    }
}

void ds4rt_rms_norm(const float *x, int64_t n, const float *w, float eps, float *out) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    rms_scale(x, n, w, eps, ss, out);
}

void ds4rt_rms_norm_rows(const float *x, int64_t rows, int64_t stride, int64_t n, const float *w, float eps,
                         float *out) {
    for (int64_t r = 0; r < rows; r += 4) {
        /* a group of fewer than 4 rows repeats its last row in the spare chains */
        const int64_t g = rows - r < 4 ? rows - r : 4;
        const float *xr[4];
        for (int64_t k = 0; k < 4; k++) xr[k] = x + (r + (k < g ? k : g - 1)) * stride;
        const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
        double s[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t i = 0; i < n; i++) {
            s[0] += (double)x0[i] * x0[i];
            s[1] += (double)x1[i] * x1[i];
            s[2] += (double)x2[i] * x2[i];
            s[3] += (double)x3[i] * x3[i];
        }
        for (int64_t k = 0; k < g; k++) rms_scale(xr[k], n, w, eps, s[k], out + (r + k) * stride);
    }
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The Sinkhorn iterations of ds4rt_hc_coefficients for 4 streams, on rows of 4 doubles (GCC/Clang
 * vector extensions): every element gets the same divisions by the same sums, each sum added in
 * the same order, so the bits are the scalar loop's; the divisions, most of the time, go two or
 * four at a time. The row sums are the column sums of the transpose, which the iteration keeps
 * beside the matrix (a transpose is a few shuffles; a division per element is not). */
typedef double v4d __attribute__((vector_size(32)));

static void transpose4(const v4d *a, v4d *t) {
    for (int i = 0; i < 4; i++) t[i] = (v4d){a[0][i], a[1][i], a[2][i], a[3][i]};
}

static void sinkhorn4(double *c, uint32_t iters, float eps) {
    v4d r[4], t[4];
    const double e = eps;
    for (int a = 0; a < 4; a++) memcpy(&r[a], c + 4 * a, sizeof r[a]);
    for (uint32_t it = 0; it < iters; it++) {
        if (it > 0) {
            /* row a: s = sum over b of c[a][b] in order, then c[a][b] /= s + eps */
            transpose4(r, t);
            const v4d s = (((((v4d){0.0, 0.0, 0.0, 0.0} + t[0]) + t[1]) + t[2]) + t[3]) + e;
            for (int b = 0; b < 4; b++) t[b] /= s;
            transpose4(t, r);
        }
        /* column b: s = sum over a of c[a][b] in order, then c[a][b] /= s + eps */
        const v4d s = (((((v4d){0.0, 0.0, 0.0, 0.0} + r[0]) + r[1]) + r[2]) + r[3]) + e;
        for (int a = 0; a < 4; a++) r[a] /= s;
    }
    for (int a = 0; a < 4; a++) memcpy(c + 4 * a, &r[a], sizeof r[a]);
}

void ds4rt_hc_coefficients(const float *m, const float *scale, const float *base, uint32_t n_hc,
                           uint32_t sinkhorn_iters, float eps, float *pre, float *post, float *comb) {
    const uint32_t N = n_hc;
    for (uint32_t i = 0; i < N; i++) {
        pre[i] = (float)(sigmoid_d((double)scale[0] * m[i] + base[i]) + eps);
        post[i] = (float)(2.0 * sigmoid_d((double)scale[1] * m[N + i] + base[N + i]));
    }
    double c[DS4RT_MAX_HC * DS4RT_MAX_HC];
    for (uint32_t a = 0; a < N; a++) {
        double mx = -DBL_MAX;
        for (uint32_t b = 0; b < N; b++) {
            c[a * N + b] = (double)scale[2] * m[2 * N + a * N + b] + base[2 * N + a * N + b];
            if (c[a * N + b] > mx) mx = c[a * N + b];
        }
        double sum = 0.0;
        for (uint32_t b = 0; b < N; b++) {
            c[a * N + b] = exp(c[a * N + b] - mx);
            sum += c[a * N + b];
        }
        for (uint32_t b = 0; b < N; b++) c[a * N + b] = c[a * N + b] / sum + eps;
    }
    if (N == 4) {
        sinkhorn4(c, sinkhorn_iters, eps);
        for (uint32_t i = 0; i < N * N; i++) comb[i] = (float)c[i];
        return;
    }
    for (uint32_t it = 0; it < sinkhorn_iters; it++) {
        if (it > 0) {
            for (uint32_t a = 0; a < N; a++) {
                double s = 0.0;
                for (uint32_t b = 0; b < N; b++) s += c[a * N + b];
                for (uint32_t b = 0; b < N; b++) c[a * N + b] /= s + eps;
            }
        }
        for (uint32_t b = 0; b < N; b++) {
            double s = 0.0;
            for (uint32_t a = 0; a < N; a++) s += c[a * N + b];
            for (uint32_t a = 0; a < N; a++) c[a * N + b] /= s + eps;
        }
    }
    for (uint32_t i = 0; i < N * N; i++) comb[i] = (float)c[i];
}

void ds4rt_hc_reduce(const float *X, const float *pre, uint32_t n_hc, int64_t d, float *x) {
    /* element j: +0, then + pre[h] X[h][j] for h in order; the streams outermost so that the
     * element loop vectorises (with h innermost the compiler summed across h instead) */
    enum { CHUNK = 64 };
    for (int64_t j0 = 0; j0 < d; j0 += CHUNK) {
        const int64_t m = d - j0 < CHUNK ? d - j0 : CHUNK;
        float acc[CHUNK];
        for (int64_t j = 0; j < m; j++) acc[j] = 0.0f;
        for (uint32_t h = 0; h < n_hc; h++) {
            const float p = pre[h], *xh = X + h * d + j0;
            for (int64_t j = 0; j < m; j++) acc[j] += p * xh[j];
        }
        memcpy(x + j0, acc, (size_t)m * sizeof(float));
    }
}

void ds4rt_hc_expand(const float *X_old, const float *f, const float *post, const float *comb,
                     uint32_t n_hc, int64_t d, float *X_new) {
    /* element k of stream j: post[j] f[k], then + comb[i][j] X_old[i][k] for i in order; the
     * element loop innermost so that it vectorises (X_new never aliases X_old) */
    for (uint32_t j = 0; j < n_hc; j++) {
        float *dst = X_new + j * d;
        for (int64_t k = 0; k < d; k++) dst[k] = post[j] * f[k];
        for (uint32_t i = 0; i < n_hc; i++) {
            const float c = comb[i * n_hc + j], *x = X_old + i * d;
            for (int64_t k = 0; k < d; k++) dst[k] += c * x[k];
        }
    }
}

void ds4rt_hc_head_weights(const float *m, float scale, const float *base, uint32_t n_hc, float eps,
                           float *w) {
    for (uint32_t h = 0; h < n_hc; h++) w[h] = (float)(sigmoid_d((double)scale * m[h] + base[h]) + eps);
}

/* ---- RoPE ------------------------------------------------------------------------------- */

void ds4rt_rope_angles(const ds4rt_rope *r, int64_t pos, double *cos_out, double *sin_out) {
    const uint32_t half = r->n_rot / 2;
    for (uint32_t k = 0; k < half; k++) {
        double theta = (double)pos * pow(r->base, -2.0 * k / (double)r->n_rot);
        if (r->yarn) {
            double span = r->yarn_hi - r->yarn_lo;
            double t = (k - r->yarn_lo) / (span > 0.001 ? span : 0.001);
            t = t < 0 ? 0 : (t > 1 ? 1 : t);
            double gamma = 1.0 - t;
            theta = r->yarn_scale * theta * (1.0 - gamma) + theta * gamma;
        }
        cos_out[k] = cos(theta);
        sin_out[k] = sin(theta);
    }
}

void ds4rt_rope_apply(float *v, int64_t dim, const ds4rt_rope *r, const double *cs, const double *sn,
                      int sign) {
    float *tail = v + dim - r->n_rot;
    for (uint32_t k = 0; k < r->n_rot / 2; k++) {
        double a = tail[2 * k], b = tail[2 * k + 1];
        double s = sign * sn[k];
        tail[2 * k] = (float)(a * cs[k] - b * s);
        tail[2 * k + 1] = (float)(a * s + b * cs[k]);
    }
}

/* ---- FP8 / FP4 simulations ----------------------------------------------------------------- */

/* 2^ceil(log2(x)) for x > 0, exactly (frexp gives x = f * 2^e with f in [0.5, 1)). */
static float pow2_ceil(float x) {
    int e;
    float f = frexpf(x, &e);
    return ldexpf(1.0f, f == 0.5f ? e - 1 : e);
}

float ds4rt_round_e4m3(float x) {
    float a = fabsf(x);
    if (a == 0.0f || isnan(a)) return x;
    if (a >= 448.0f) return copysignf(448.0f, x);
    int e;
    frexpf(a, &e);             /* a = f * 2^e, f in [0.5, 1): floor(log2 a) = e - 1 */
    int exp2 = e - 1;
    if (exp2 < -6) exp2 = -6;  /* subnormals share the step of the smallest binade */
    float step = ldexpf(1.0f, exp2 - 3);
    float q = rintf(a / step) * step; /* ties to even integer = even mantissa code */
    if (q > 448.0f) q = 448.0f;
    return copysignf(q, x);
}

float ds4rt_round_e2m1(float x) {
    /* the largest value whose lower midpoint a passes (ties to the even code: 0.25 -> 0,
     * 0.75 -> 1, ...), as selects rather than a chain of branches, which mispredicted on
     * activations; NaN fails every test and gets 6, as the chain of branches gave it */
    const float a = fabsf(x);
    float q = a > 0.25f ? 0.5f : 0.0f;
    q = a >= 0.75f ? 1.0f : q;
    q = a > 1.25f ? 1.5f : q;
    q = a >= 1.75f ? 2.0f : q;
    q = a > 2.5f ? 3.0f : q;
    q = a >= 3.5f ? 4.0f : q;
    q = a <= 5.0f ? q : 6.0f;
    return copysignf(q, x);
}

void ds4rt_fp8_roundtrip(float *v, int64_t n) {
    for (int64_t b = 0; b < n; b += 64) {
        float amax = 0.0f;
        for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(v[b + i]));
        if (amax < 1e-4f) amax = 1e-4f;
        float s = pow2_ceil(amax / 448.0f);
        for (int i = 0; i < 64; i++) {
            float y = v[b + i] / s;
            y = y > 448.0f ? 448.0f : (y < -448.0f ? -448.0f : y);
            v[b + i] = ds4rt_round_e4m3(y) * s;
        }
    }
}

void ds4rt_fp4_roundtrip(float *v, int64_t n) {
    const float amin = 6.0f * 0x1p-126f;
    for (int64_t b = 0; b < n; b += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[b + i]));
        if (amax < amin) amax = amin;
        float s = pow2_ceil(amax / 6.0f);
        for (int i = 0; i < 32; i++) {
            float y = v[b + i] / s;
            y = y > 6.0f ? 6.0f : (y < -6.0f ? -6.0f : y);
            v[b + i] = ds4rt_round_e2m1(y) * s;
        }
    }
}

void ds4rt_hadamard(float *v, int64_t n) {
    for (int64_t h = 1; h < n; h *= 2) {
        for (int64_t i = 0; i < n; i += 2 * h) {
            for (int64_t j = i; j < i + h; j++) {
                float a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
        }
    }
    float s = (float)(1.0 / sqrt((double)n));
    for (int64_t i = 0; i < n; i++) v[i] *= s;
}
