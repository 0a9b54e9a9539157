/*
 * bench_ops.c - time per call of the hip/ops.h kernels at DeepSeek V4 Flash's widths (N = 4
 * streams of D = 4096, vocabulary 129280, 256 experts of 2048 with 6 used), for n = 1..16
 * rows. Each case is launched `iters` times back to back on one stream and timed by the host
 * clock around a final synchronisation (so it includes launch cost, as an uncaptured pass
 * would). Output: one JSON object per line. Numbers from HIP-CPU mean nothing.
 *
 * Usage: bench_ops [--iters N] [--quick] (quick: small widths, for a smoke run).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gk.h"
#include "ops.h"

static void *stream;
static int iters = 200;

static void die(const char *what) {
    fprintf(stderr, "bench-ops: %s: %s\n", what, ds4rt_gk_last_error());
    exit(2);
}
#define GK(call)                                                                                  \
    do {                                                                                          \
        if ((call) != 0) die(#call);                                                              \
    } while (0)

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void *dev_fill(size_t bytes, float amp) {
    float *h = malloc(bytes);
    uint64_t s = 12345;
    for (size_t i = 0; i < bytes / 4; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = amp * ((float)(s >> 40) * 0x1.0p-24f * 2.0f - 1.0f);
    }
    void *d;
    GK(ds4rt_gk_malloc(&d, bytes));
    GK(ds4rt_gk_memcpy_h2d(d, h, bytes, stream));
    GK(ds4rt_gk_stream_sync(stream));
    free(h);
    return d;
}

#define TIME(name, n, extra, call)                                                                \
    do {                                                                                          \
        GK(call);                                                                                 \
        GK(ds4rt_gk_stream_sync(stream));                                                         \
        double t0 = now_us();                                                                     \
        for (int it_ = 0; it_ < iters; it_++) GK(call);                                           \
        GK(ds4rt_gk_stream_sync(stream));                                                         \
        printf("{\"op\": \"%s\", \"n\": %lld, %s\"us_per_call\": %.3f}\n", name, (long long)(n), extra, \
               (now_us() - t0) / iters);                                                          \
        fflush(stdout);                                                                           \
    } while (0)

int main(int argc, char **argv) {
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) quick = 1;
    }
    int count = 0;
    if (ds4rt_gk_device_count(&count) != 0 || count == 0) {
        printf("bench-ops: no GPU device (%s)\n", ds4rt_gk_last_error());
        return 77;
    }
    GK(ds4rt_gk_stream_create(&stream));
    const uint32_t N = 4, D = quick ? 256 : 4096, V = quick ? 4096 : 129280, E = quick ? 16 : 256, K = 6,
                   F = quick ? 128 : 2048;
    const int64_t NMAX = 16, W = (int64_t)N * D, M = (2 + N) * N;
    ds4rt_gk_hc_dims dims = {.n_hc = N, .d = D, .sinkhorn_iters = 20, .hc_eps = 1e-6f, .rms_eps = 1e-6f};
    float *X = dev_fill((size_t)(NMAX * W) * 4, 1.0f), *fn32 = dev_fill((size_t)(M * W) * 4, 0.05f);
    float *scale = dev_fill(16, 1.0f), *base = dev_fill((size_t)M * 4, 0.5f), *norm = dev_fill(D * 4u, 1.0f);
    float *xn = dev_fill((size_t)NMAX * D * 4, 0), *post = dev_fill((size_t)NMAX * N * 4, 0),
          *comb = dev_fill((size_t)NMAX * N * N * 4, 0), *Xo = dev_fill((size_t)(NMAX * W) * 4, 0);
    size_t hsb = ds4rt_gk_hc_scratch_bytes(NMAX, N, D);
    void *hscr = dev_fill((hsb + 3) & ~(size_t)3, 0);
    float *logits = dev_fill((size_t)NMAX * V * 4, 4.0f), *rl = dev_fill((size_t)NMAX * E * 4, 2.0f),
          *bias = dev_fill(E * 4u, 0.1f), *wts = dev_fill((size_t)NMAX * K * 4, 0),
          *g = dev_fill((size_t)NMAX * K * F * 4, 3.0f), *u = dev_fill((size_t)NMAX * K * F * 4, 3.0f),
          *y = dev_fill((size_t)NMAX * K * D * 4, 1.0f), *f = dev_fill((size_t)NMAX * D * 4, 0);
    int32_t *ids = dev_fill((size_t)NMAX * K * 4, 0);
    size_t asb = ds4rt_gk_argmax_scratch_bytes(NMAX, V), ssb = ds4rt_gk_sample_scratch_bytes(NMAX, V);
    void *ascr = dev_fill((asb + 3) & ~(size_t)3, 0), *sscr = dev_fill((ssb + 3) & ~(size_t)3, 0);
    uint64_t *counter = dev_fill(8, 0);
    ds4rt_gk_moe_dims md = {.n_expert = E, .n_used = K, .expert_norm = 1, .expert_scale = 1.5f};
    ds4rt_gk_sample_params sp = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.0f, .seed = 1};
    static const int64_t NS[] = {1, 2, 4, 8, 16};
    for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) {
        const int64_t n = NS[k];
        TIME("hc_pre", n, "\"fn\": \"F32\", ",
             ds4rt_gk_hc_pre(&dims, n, DS4RT_GK_TYPE_F32, fn32, (uint64_t)W * 4, scale, base, norm, X, xn, post, comb,
                             hscr, hsb, stream));
        TIME("hc_mix", n, "\"fn\": \"F32\", ",
             ds4rt_gk_hc_mix(&dims, n, (uint32_t)M, DS4RT_GK_TYPE_F32, fn32, (uint64_t)W * 4, X, xn, hscr, hsb, stream));
        TIME("hc_post", n, "", ds4rt_gk_hc_post(&dims, n, X, xn, post, comb, Xo, stream));
        TIME("hc_head", n, "\"fn\": \"F32\", ",
             ds4rt_gk_hc_head(&dims, n, DS4RT_GK_TYPE_F32, fn32, (uint64_t)W * 4, scale, base, X, xn, hscr, hsb, stream));
        TIME("argmax", n, "", ds4rt_gk_argmax(n, V, logits, ids, stream));
        TIME("argmax_split", n, "", ds4rt_gk_argmax_split(n, V, logits, ids, ascr, asb, stream));
        TIME("sample", n, "", ds4rt_gk_sample(&sp, n, V, logits, counter, ids, sscr, ssb, stream));
        TIME("moe_route", n, "", ds4rt_gk_moe_route(&md, n, rl, bias, NULL, NULL, ids, wts, stream));
        TIME("swiglu", n, "", ds4rt_gk_swiglu(n * K, F, g, F, u, F, 10.0f, wts, g, F, stream));
        TIME("moe_combine", n, "", ds4rt_gk_moe_combine(n, K, D, y, xn, f, stream));
        TIME("capture", n, "", ds4rt_gk_capture(N, D, n, X, f, D, stream));
    }
    TIME("dspark_confidence", 1, "", ds4rt_gk_dspark_confidence(D, 64, X, X, X, f, stream));
    ds4rt_gk_stream_destroy(stream);
    return 0;
}
