/*
 * bench_attn.c - device time of the attention-side kernels (hip/attn.h) at the real DeepSeek V4
 * Flash width (64 heads x 512 dims, window 128, indexer 64 x 128 with top 512), as JSON on
 * stdout: one record per (kernel, shape) with microseconds per call, and for attention and
 * the indexer the bytes of keys a call must read and the bandwidth that implies.
 *
 * Each record: 3 warm-up calls, then `iters` calls enqueued back to back on one stream and one
 * synchronisation; time = wall time / iters (launch overhead included, as in a pass without
 * graphs). Random inputs; results are not checked here (tests/gpu/test_attn.c does that).
 * Usage: bench_attn [--quick] (--quick: 2 calls per record and the smaller shapes, a smoke
 * run for HIP-CPU). Exit 77 without a device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "gk.h"

static void *stream;
static int quick;
static int first_record = 1;

static void gk(int st, const char *what) {
    if (st != DS4RT_GK_OK) {
        fprintf(stderr, "bench_attn: %s: %s\n", what, ds4rt_gk_last_error());
        exit(2);
    }
}

static uint64_t rng = 12345;
static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * 0x1.0p-24) * 2.0f - 1.0f;
}

static void *dev_random(size_t floats) {
    float *h = malloc((floats ? floats : 1) * sizeof *h);
    for (size_t i = 0; i < floats; i++) h[i] = frand();
    void *d;
    gk(ds4rt_gk_malloc(&d, (floats ? floats : 1) * 4), "malloc");
    gk(ds4rt_gk_memcpy_h2d(d, h, floats * 4, stream), "upload");
    gk(ds4rt_gk_stream_sync(stream), "sync");
    free(h);
    return d;
}
static void *dev_zero(size_t bytes) {
    void *d;
    gk(ds4rt_gk_malloc(&d, bytes ? bytes : 4), "malloc");
    gk(ds4rt_gk_memset(d, 0, bytes ? bytes : 4, stream), "memset");
    return d;
}
static void *dev_pass(int64_t pos0) {
    int64_t h[2] = {pos0, 0};
    void *d = dev_zero(sizeof h);
    gk(ds4rt_gk_memcpy_h2d(d, h, sizeof h, stream), "upload");
    gk(ds4rt_gk_stream_sync(stream), "sync");
    return d;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef int (*call_fn)(void *ctx);

static double time_us(call_fn f, void *ctx, int iters) {
    for (int i = 0; i < 3; i++) gk(f(ctx), "warm-up");
    gk(ds4rt_gk_stream_sync(stream), "sync");
    double t0 = now_s();
    for (int i = 0; i < iters; i++) gk(f(ctx), "call");
    gk(ds4rt_gk_stream_sync(stream), "sync");
    return (now_s() - t0) * 1e6 / iters;
}

static void record(const char *kernel, const char *shape, double us, double bytes) {
    printf("%s\n    {\"kernel\": \"%s\", \"shape\": \"%s\", \"us\": %.3f", first_record ? "" : ",", kernel, shape, us);
    if (bytes > 0) printf(", \"key_bytes\": %.0f, \"gb_per_s\": %.2f", bytes, bytes / (us * 1e-6) / 1e9);
    printf("}");
    first_record = 0;
    fflush(stdout);
}

/* ---- attention ---- */

typedef struct attn_ctx {
    void *pass;
    int64_t n;
    ds4rt_gk_attn_keys k;
    float *sinks, *q, *out;
    void *scratch;
    size_t sb;
    uint32_t *tickets;
} attn_ctx;

static int call_attn(void *c) {
    attn_ctx *a = c;
    return ds4rt_gk_attention(a->pass, a->n, 64, 512, &a->k, a->sinks, a->q, a->out, NULL, a->scratch, a->sb, a->tickets,
                              stream);
}

static void bench_attention(int64_t n, int64_t n_comp, int selected) {
    const uint32_t H = 64, d = 512, W = 128, cap = 256;
    attn_ctx a;
    memset(&a, 0, sizeof a);
    a.n = n;
    /* the position that makes n_comp rows visible: ratio 128 (all visible) or 4 (selected) */
    const uint32_t ratio = selected ? 4 : 128;
    const int64_t pos0 = n_comp > 0 ? n_comp * ratio : 4096;
    a.pass = dev_pass(pos0);
    const int64_t held = n_comp > 0 ? (pos0 + n) / ratio + 1 : 1;
    float *ring = dev_random((size_t)cap * d), *comp = dev_random((size_t)held * d);
    int32_t *sel = NULL, *ns = NULL;
    if (selected) {
        int32_t *h = malloc((size_t)n * 512 * 4), *hn = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
            for (int j = 0; j < 512; j++) h[i * 512 + j] = (int32_t)((int64_t)j * (held - 1) / 512);
            hn[i] = 512;
        }
        sel = dev_zero((size_t)n * 512 * 4);
        ns = dev_zero((size_t)n * 4);
        gk(ds4rt_gk_memcpy_h2d(sel, h, (size_t)n * 512 * 4, stream), "upload");
        gk(ds4rt_gk_memcpy_h2d(ns, hn, (size_t)n * 4, stream), "upload");
        gk(ds4rt_gk_stream_sync(stream), "sync"); /* the copies read h, hn */
        free(h), free(hn);
    }
    a.k = (ds4rt_gk_attn_keys){.d_ring = ring, .ring_cap = cap, .window = W, .comp_ratio = n_comp > 0 ? ratio : 0,
                               .d_comp = comp, .d_sel = sel, .d_n_sel = ns, .sel_stride = 512};
    a.sinks = dev_random(H);
    a.q = dev_random((size_t)n * H * d);
    a.out = dev_zero((size_t)n * H * d * 4);
    a.sb = ds4rt_gk_attention_scratch_bytes(n, H, d);
    a.scratch = dev_zero(a.sb);
    a.tickets = dev_zero((size_t)n * H * 4);
    const double us = time_us(call_attn, &a, quick ? 2 : 200);
    const int64_t keys = W + (n_comp == 0 ? 0 : selected ? 512 : (pos0 + 1) / ratio);
    char shape[128];
    snprintf(shape, sizeof shape, "n %lld, H 64 x 512, window 128 + %lld %s rows", (long long)n,
             (long long)(keys - W), selected ? "selected" : "compressed");
    record("attention", shape, us, (double)keys * d * 4);
    ds4rt_gk_free(a.pass), ds4rt_gk_free(ring), ds4rt_gk_free(comp), ds4rt_gk_free(sel), ds4rt_gk_free(ns);
    ds4rt_gk_free(a.sinks), ds4rt_gk_free(a.q), ds4rt_gk_free(a.out), ds4rt_gk_free(a.scratch);
    ds4rt_gk_free(a.tickets);
}

/* ---- indexer ---- */

typedef struct index_ctx {
    void *pass;
    int64_t n, max_comp;
    float *iq, *iw, *rows;
    int32_t *sel, *ns;
    void *scratch;
    size_t sb;
} index_ctx;

static int call_index(void *c) {
    index_ctx *x = c;
    return ds4rt_gk_indexer_topk(x->pass, x->n, 64, 128, 512, x->max_comp, x->iq, x->iw, x->rows, x->sel, x->ns,
                                 x->scratch, x->sb, stream);
}

static void bench_indexer(int64_t n, int64_t n_vis) {
    index_ctx x;
    x.n = n;
    x.max_comp = n_vis + n;
    x.pass = dev_pass(4 * n_vis);
    x.iq = dev_random((size_t)n * 64 * 128);
    x.iw = dev_random((size_t)n * 64);
    x.rows = dev_random((size_t)x.max_comp * 128);
    x.sel = dev_zero((size_t)n * 512 * 4);
    x.ns = dev_zero((size_t)n * 4);
    x.sb = ds4rt_gk_indexer_topk_scratch_bytes(n, x.max_comp);
    x.scratch = dev_zero(x.sb);
    const double us = time_us(call_index, &x, quick ? 2 : 100);
    char shape[96];
    snprintf(shape, sizeof shape, "n %lld, 64 heads x 128, top 512 of %lld rows", (long long)n, (long long)n_vis);
    record("indexer_topk", shape, us, (double)n_vis * 128 * 4);
    ds4rt_gk_free(x.pass), ds4rt_gk_free(x.iq), ds4rt_gk_free(x.iw), ds4rt_gk_free(x.rows);
    ds4rt_gk_free(x.sel), ds4rt_gk_free(x.ns), ds4rt_gk_free(x.scratch);
}

/* ---- compressor ---- */

typedef struct comp_ctx {
    void *pass;
    int64_t n;
    ds4rt_gk_comp_desc c;
    ds4rt_gk_comp_state s;
    float *u, *g;
} comp_ctx;

static int call_comp(void *p) {
    comp_ctx *x = p;
    return ds4rt_gk_comp_update(x->pass, x->n, &x->c, &x->s, x->u, x->g, stream);
}

static void bench_compressor(int64_t n, uint32_t R, uint32_t d, int post) {
    comp_ctx x;
    const uint32_t coff = R == 4 ? 2 : 1, w = coff * d;
    x.n = n;
    x.pass = dev_pass(R * 100 + (R - 1) - (n > 1 ? n / 2 : 0)); /* the pass closes a block */
    x.c = (ds4rt_gk_comp_desc){.ratio = R, .dim = d, .d_nope = post == DS4RT_GK_COMP_POST_FP8 ? d - 64 : 0,
                               .d_ape = dev_random((size_t)R * w), .d_norm = dev_random(d), .rms_eps = 1e-6f,
                               .rope = {.n_rot = 64, .base = 160000, .yarn = 1, .yarn_scale = 1.0 / 16,
                                        .yarn_lo = 4, .yarn_hi = 20},
                               .post = post};
    const size_t fr = (size_t)coff * R * w;
    x.s = (ds4rt_gk_comp_state){.d_kv = dev_zero(fr * 4), .d_score = dev_zero(fr * 4), .d_snap_kv = dev_zero(fr * 4),
                                .d_snap_score = dev_zero(fr * 4), .d_journal = dev_zero((size_t)17 * 2 * w * 4),
                                .d_out = dev_zero((size_t)200 * d * 4), .rows = coff * R, .width = w, .cap = 200};
    gk(ds4rt_gk_comp_reset(&x.s, stream), "reset");
    x.u = dev_random((size_t)n * w);
    x.g = dev_random((size_t)n * w);
    const double us = time_us(call_comp, &x, quick ? 2 : 200);
    static const char *posts[] = {"none", "fp8", "hadamard+fp4", "hadamard"};
    char shape[96];
    snprintf(shape, sizeof shape, "n %lld, ratio %u, dim %u, %s", (long long)n, R, d, posts[post]);
    record("comp_update", shape, us, 0);
    ds4rt_gk_free(x.pass), ds4rt_gk_free((void *)x.c.d_ape), ds4rt_gk_free((void *)x.c.d_norm);
    ds4rt_gk_free(x.s.d_kv), ds4rt_gk_free(x.s.d_score), ds4rt_gk_free(x.s.d_snap_kv);
    ds4rt_gk_free(x.s.d_snap_score), ds4rt_gk_free(x.s.d_journal), ds4rt_gk_free(x.s.d_out);
    ds4rt_gk_free(x.u), ds4rt_gk_free(x.g);
}

/* ---- row ops ---- */

typedef struct row_ctx {
    void *pass;
    int64_t rows;
    uint32_t width;
    float *x, *w;
} row_ctx;

static int call_norm(void *p) {
    row_ctx *r = p;
    return ds4rt_gk_rms_norm(r->rows, r->width, r->x, r->w, 1e-6f, r->x, stream);
}
static int call_rope(void *p) {
    row_ctx *r = p;
    const ds4rt_gk_rope_params rp = {.n_rot = 64, .base = 160000, .yarn = 1, .yarn_scale = 1.0 / 16, .yarn_lo = 4,
                                     .yarn_hi = 20};
    return ds4rt_gk_rope(r->pass, r->rows, 64, 512, &rp, 1, r->x, stream);
}

static void bench_rows(int64_t n) {
    row_ctx r = {.pass = dev_pass(5000), .rows = n * 64, .width = 512};
    r.x = dev_random((size_t)n * 64 * 512);
    r.w = dev_random(4096);
    char shape[96];
    snprintf(shape, sizeof shape, "%lld rows of 512 (per-head q norm, n %lld)", (long long)(n * 64), (long long)n);
    record("rms_norm", shape, time_us(call_norm, &r, quick ? 2 : 500), 0);
    r.rows = n;
    r.width = 4096;
    snprintf(shape, sizeof shape, "%lld rows of 4096", (long long)n);
    record("rms_norm", shape, time_us(call_norm, &r, quick ? 2 : 500), 0);
    snprintf(shape, sizeof shape, "n %lld, 64 heads x 512, 64 rotated", (long long)n);
    record("rope", shape, time_us(call_rope, &r, quick ? 2 : 500), 0);
    ds4rt_gk_free(r.pass), ds4rt_gk_free(r.x), ds4rt_gk_free(r.w);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            fprintf(stderr, "usage: bench_attn [--quick]\n");
            return 2;
        }
    }
    int devices = 0;
    if (ds4rt_gk_device_count(&devices) != DS4RT_GK_OK || devices == 0) {
        fprintf(stderr, "bench_attn: no GPU device (%s)\n", ds4rt_gk_last_error());
        return 77;
    }
    char name[256] = "";
    int integrated = 0, n_sm = 0;
    uint64_t total = 0;
    gk(ds4rt_gk_device_info(0, name, sizeof name, &integrated, &total, NULL, &n_sm), "device info");
    gk(ds4rt_gk_stream_create(&stream), "stream");
    printf("{\n  \"device\": \"%s\",\n  \"quick\": %s,\n  \"records\": [", name, quick ? "true" : "false");
    static const int64_t ns_full[] = {1, 2, 4, 8, 16}, ns_quick[] = {1, 4};
    const int64_t *ns = quick ? ns_quick : ns_full;
    const int nn = quick ? 2 : 5;
    static const int64_t comps_full[] = {0, 1024, 8192}, comps_quick[] = {0, 256};
    for (int a = 0; a < nn; a++) {
        for (int c = 0; c < (quick ? 2 : 3); c++) bench_attention(ns[a], (quick ? comps_quick : comps_full)[c], 0);
        bench_attention(ns[a], quick ? 600 : 16384, 1);
    }
    static const int64_t vis_full[] = {1024, 4096, 16384, 65536}, vis_quick[] = {1024};
    for (int v = 0; v < (quick ? 1 : 4); v++) {
        bench_indexer(1, (quick ? vis_quick : vis_full)[v]);
        if (!quick) bench_indexer(8, vis_full[v]);
    }
    for (int a = 0; a < nn; a++) {
        bench_compressor(ns[a], 4, 512, DS4RT_GK_COMP_POST_FP8);
        bench_compressor(ns[a], 128, 512, DS4RT_GK_COMP_POST_FP8);
        bench_compressor(ns[a], 4, 128, DS4RT_GK_COMP_POST_HADAMARD_FP4);
        bench_rows(ns[a]);
    }
    printf("\n  ]\n}\n");
    ds4rt_gk_stream_destroy(stream);
    return 0;
}
