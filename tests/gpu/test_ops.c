/*
 * test_ops.c - the kernels of hip/ops.h against the CPU backend (the oracle), on random data:
 * HC pre/post/head, capture, argmax, add, nonfinite, the DSpark confidence head, the float
 * product, and the MoE op composed from the router, SwiGLU and combine kernels (learned and
 * hash routing, with exact ties) against the CPU's moe op. Every op is also checked for batch
 * invariance on the device: each row of an n-row call (n = 1..17) is bitwise the row alone.
 *
 * Acceptance (docs/GPU.md, "Row ops, HC and MoE pieces"): ops whose arithmetic order the
 * kernels reproduce must agree bitwise; ops with a float64 sum in another order (RMS norms,
 * the confidence head) or float64 transcendentals of the device's libm (Sinkhorn, sigmoid,
 * softplus, and, on a GPU, expf as float64 exp) are held to a tolerance and the count of
 * elements that still agree bitwise is printed. Under HIP-CPU the libm is the host's, so only
 * the sums' order can differ there.
 *
 * Usage: test_ops [--seed N] [--only matmul|hc|argmax|add|confidence|swiglu|moe|sample]. Prints one line per check and "test-ops: N checks, M failed";
 * exit status 1 if any failed, 77 when no device is present (a skip).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "ds4rt.h"
#include "fp16.h"
#include "gk.h"
#include "ops.h"
#include "sampling.h"
#include "topk.h"

/* ---- harness --------------------------------------------------------------------------------- */

static int n_checks, n_failed;
static void *stream;

static void report(const char *op, const char *what, bool ok, double err, double tol, size_t same, size_t total) {
    n_checks++;
    if (!ok) n_failed++;
    printf("%-4s %-18s %-40s err %.3g tol %.3g bitwise %zu/%zu\n", ok ? "ok" : "FAIL", op, what, err, tol, same, total);
}

static void die(const char *what, const char *msg) {
    fprintf(stderr, "test-ops: %s: %s\n", what, msg);
    exit(2);
}
#define GK(call)                                                                                  \
    do {                                                                                          \
        if ((call) != 0) die(#call, ds4rt_gk_last_error());                                       \
    } while (0)
#define CPU(call)                                                                                 \
    do {                                                                                          \
        if ((call) != DS4RT_OK) die(#call, ds4rt_last_error());                                   \
    } while (0)

static uint64_t rng;
static uint64_t next_u64(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next_u64() >> 11) * 0x1.0p-53); }
static float *rnd(size_t n, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = uniform(lo, hi);
    return v;
}

/* device memory */
static void *dev(const void *host, size_t bytes) {
    void *d;
    GK(ds4rt_gk_malloc(&d, bytes ? bytes : 4));
    if (host != NULL && bytes) GK(ds4rt_gk_memcpy_h2d(d, host, bytes, stream));
    else GK(ds4rt_gk_memset(d, 0, bytes ? bytes : 4, stream));
    return d;
}
static void get(void *host, const void *d, size_t bytes) {
    GK(ds4rt_gk_memcpy_d2h(host, d, bytes, stream));
    GK(ds4rt_gk_stream_sync(stream));
}

/* the CPU backend */
static ds4rt_backend *cbe;
static ds4rt_bctx *cctx;
static const ds4rt_backend_ops *co;

static ds4rt_dbuf *cbuf(const void *host, size_t bytes) {
    ds4rt_dbuf *b;
    CPU(co->alloc(cbe, DS4RT_MEM_SCRATCH, bytes ? bytes : 4, &b));
    if (host && bytes) memcpy(b->ptr, host, bytes);
    return b;
}
static float *cf(ds4rt_dbuf *b) { return (float *)b->ptr; }

/* Same bits, or both NaN: a NaN's sign and payload are not part of any op's contract (x86
 * propagates an input NaN's payload, a GPU returns its canonical NaN). */
static bool same_f32(const float *a, const float *b) { return memcmp(a, b, 4) == 0 || (isnan(*a) && isnan(*b)); }

/* got vs ref: bitwise count; worst |got - ref| / (|ref| + scale); inf and NaN must agree. */
static double compare(const float *got, const float *ref, size_t n, double scale, size_t *same) {
    double worst = 0;
    *same = 0;
    for (size_t i = 0; i < n; i++) {
        if (same_f32(&got[i], &ref[i])) {
            (*same)++;
            continue;
        }
        double e = (isfinite(got[i]) && isfinite(ref[i])) ? fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + scale)
                                                         : INFINITY;
        if (!(e <= worst)) worst = e;
    }
    return worst;
}
static void expect_close(const char *op, const char *what, const float *got, const float *ref, size_t n, double scale,
                         double tol) {
    size_t same;
    double e = compare(got, ref, n, scale, &same);
    report(op, what, e <= tol, e, tol, same, n);
}
static void expect_bits(const char *op, const char *what, const void *got, const void *ref, size_t n) {
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += memcmp((const char *)got + 4 * i, (const char *)ref + 4 * i, 4) == 0;
    report(op, what, same == n, 0, 0, same, n);
}

/* The tolerance of results that pass through a float64 sum in another order or the device's
 * float64 libm before being rounded to float: a few float ulps, relative to the value plus a
 * scale of the data. Under HIP-CPU only the sums' order differs. */
#define TOL_F64_PATH 4e-6

/* ---- shapes ---------------------------------------------------------------------------------- */

static ds4rt_hparams make_hp(uint32_t N, uint32_t D) {
    ds4rt_hparams hp = {0};
    hp.n_layer = 1;
    hp.n_embd = D;
    hp.n_vocab = 97;
    hp.n_head = 2;
    hp.head_dim = 64;
    hp.rope_dim = 16;
    hp.q_lora = 32;
    hp.o_groups = 1;
    hp.o_lora = 16;
    hp.window = 4;
    hp.idx_heads = 1;
    hp.idx_dim = 32;
    hp.idx_topk = 2;
    hp.n_expert = 12;
    hp.n_expert_used = 4;
    hp.expert_ff = 40;
    hp.n_shared = 1;
    hp.expert_scale = 1.5f;
    hp.expert_norm = true;
    hp.hc = N;
    hp.sinkhorn_iters = 20;
    hp.hc_eps = 1e-6f;
    hp.rms_eps = 1e-6f;
    hp.d_nope = hp.head_dim - hp.rope_dim;
    hp.q_dim = hp.n_head * hp.head_dim;
    hp.group_dim = (hp.n_head / hp.o_groups) * hp.head_dim;
    hp.o_low_dim = hp.o_groups * hp.o_lora;
    hp.hc_dim = N * D;
    hp.hc_mix = (2 + N) * N;
    hp.idx_q_dim = hp.idx_heads * hp.idx_dim;
    hp.shared_ff = hp.expert_ff * hp.n_shared;
    return hp;
}

/* A fresh CPU context per shape: cpu_workspace_reserve keys its early return on the limits
 * alone, so a context reserved for one hparams is not regrown for a wider one. */
static void reserve(const ds4rt_hparams *hp, int64_t rows) {
    co->ctx_free(cctx);
    CPU(co->ctx_create(cbe, 1, &cctx));
    ds4rt_limits lim = {.max_rows = rows, .max_keys = 64, .max_comp = 64};
    CPU(co->ctx_reserve(cctx, hp, &lim));
}

#define MAXN 17

/* ---- weights of the float types ------------------------------------------------------------ */

static const uint32_t FTYPES[3] = {DS4RT_GK_TYPE_F32, DS4RT_GK_TYPE_F16, DS4RT_GK_TYPE_BF16};
static const char *tname(uint32_t t) { return t == 0 ? "F32" : t == 1 ? "F16" : "BF16"; }

/* rows x cols random weights of type t; returns the bytes, *row_bytes set. */
static void *weights(uint32_t t, int64_t rows, int64_t cols, float amp, uint64_t *row_bytes) {
    size_t esz = t == DS4RT_GK_TYPE_F32 ? 4 : 2;
    *row_bytes = (uint64_t)cols * esz;
    uint8_t *w = malloc((size_t)(rows * cols) * esz + 4);
    for (int64_t i = 0; i < rows * cols; i++) {
        float v = uniform(-amp, amp);
        if (t == DS4RT_GK_TYPE_F32) memcpy(w + 4 * i, &v, 4);
        else {
            uint16_t h = t == DS4RT_GK_TYPE_F16 ? ds4rt_f32_to_f16(v) : ds4rt_f32_to_bf16(v);
            memcpy(w + 2 * i, &h, 2);
        }
    }
    return w;
}

static ds4rt_dweight cweight(uint32_t t, const void *w, int64_t rows, int64_t cols, uint64_t row_bytes) {
    ds4rt_dbuf *b = cbuf(w, (size_t)(rows * (int64_t)row_bytes));
    return (ds4rt_dweight){.type = t, .data = {b, 0}, .rows = rows, .cols = cols, .row_bytes = row_bytes};
}

/* ---- the float product ---------------------------------------------------------------------- */

static void test_matmul_float(void) {
    static const int64_t COLS[] = {1, 31, 300, 2048, 2049, 4700};
    for (int ti = 0; ti < 3; ti++)
        for (size_t ci = 0; ci < sizeof COLS / sizeof COLS[0]; ci++) {
            const uint32_t t = FTYPES[ti];
            const int64_t rows = 1 + (int64_t)(next_u64() % 37), cols = COLS[ci], n = MAXN;
            uint64_t rb;
            void *w = weights(t, rows, cols, 1.0f, &rb);
            float *x = rnd((size_t)(n * cols), -2, 2);
            float *ref = malloc((size_t)(n * rows) * 4), *got = malloc((size_t)(n * rows) * 4),
                  *one = malloc((size_t)rows * 4);
            ds4rt_dweight cw = cweight(t, w, rows, cols, rb);
            ds4rt_dbuf *cx = cbuf(x, (size_t)(n * cols) * 4), *cy = cbuf(NULL, (size_t)(n * rows) * 4);
            CPU(co->matmul(cctx, &cw, ds4rt_f32(cx), n, ds4rt_f32(cy)));
            memcpy(ref, cf(cy), (size_t)(n * rows) * 4);
            void *dw = dev(w, (size_t)(rows * (int64_t)rb));
            float *dx = dev(x, (size_t)(n * cols) * 4), *dy = dev(NULL, (size_t)(n * rows) * 4);
            GK(ds4rt_gk_matmul_float(t, dw, rows, cols, rb, dx, n, dy, stream));
            get(got, dy, (size_t)(n * rows) * 4);
            char what[64];
            snprintf(what, sizeof what, "%s %lldx%lld n=%lld vs cpu", tname(t), (long long)rows, (long long)cols,
                     (long long)n);
            expect_bits("matmul_float", what, got, ref, (size_t)(n * rows));
            /* batch invariance: row i alone */
            size_t same = 0;
            for (int64_t i = 0; i < n; i++) {
                GK(ds4rt_gk_matmul_float(t, dw, rows, cols, rb, dx + i * cols, 1, dy, stream));
                get(one, dy, (size_t)rows * 4);
                same += memcmp(one, got + i * rows, (size_t)rows * 4) == 0;
            }
            snprintf(what, sizeof what, "%s cols %lld rows alone == in batch", tname(t), (long long)cols);
            report("matmul_float", what, same == (size_t)n, 0, 0, same, (size_t)n);
            ds4rt_gk_free(dw);
            ds4rt_gk_free(dx);
            ds4rt_gk_free(dy);
            co->release(cbe, cw.data.buf);
            co->release(cbe, cx);
            co->release(cbe, cy);
            free(w);
            free(x);
            free(ref);
            free(got);
            free(one);
        }
}

/* ---- hyper-connections ------------------------------------------------------------------------ */

static void test_hc(uint32_t N, uint32_t D) {
    ds4rt_hparams hp = make_hp(N, D);
    reserve(&hp, MAXN);
    const int64_t n = MAXN, W = (int64_t)N * D, M = (int64_t)hp.hc_mix;
    ds4rt_gk_hc_dims dims = {.n_hc = N, .d = D, .sinkhorn_iters = hp.sinkhorn_iters, .hc_eps = hp.hc_eps,
                             .rms_eps = hp.rms_eps};
    float *X = rnd((size_t)(n * W), -2, 2), *scale = rnd(3, 0.5f, 2.0f), *base = rnd((size_t)M, -1, 1),
          *norm = rnd(D, 0.5f, 1.5f), *f = rnd((size_t)(n * D), -2, 2);
    float *dX = dev(X, (size_t)(n * W) * 4), *dscale = dev(scale, 12), *dbase = dev(base, (size_t)M * 4),
          *dnorm = dev(norm, D * 4u), *df = dev(f, (size_t)(n * D) * 4);
    ds4rt_dbuf *cX = cbuf(X, (size_t)(n * W) * 4), *cscale = cbuf(scale, 12), *cbase = cbuf(base, (size_t)M * 4),
               *cnorm = cbuf(norm, D * 4u), *cf_ = cbuf(f, (size_t)(n * D) * 4);
    size_t scr_bytes = ds4rt_gk_hc_scratch_bytes(n, N, D);
    void *scr = dev(NULL, scr_bytes);
    char what[80];

    for (int ti = 0; ti < 3; ti++) {
        const uint32_t t = FTYPES[ti];
        uint64_t rb;
        void *fn = weights(t, M, W, 0.3f, &rb);
        ds4rt_hc_weights hw = {.fn = cweight(t, fn, M, W, rb), .scale = ds4rt_f32(cscale), .base = ds4rt_f32(cbase)};
        void *dfn = dev(fn, (size_t)(M * (int64_t)rb));
        /* CPU */
        ds4rt_dbuf *cxn = cbuf(NULL, (size_t)(n * D) * 4), *cpost = cbuf(NULL, (size_t)(n * N) * 4),
                   *ccomb = cbuf(NULL, (size_t)(n * N * N) * 4);
        CPU(co->hc_pre(cctx, &hp, n, &hw, ds4rt_f32(cnorm), ds4rt_f32(cX), ds4rt_f32(cxn), ds4rt_f32(cpost),
                       ds4rt_f32(ccomb)));
        /* GPU */
        float *dxn = dev(NULL, (size_t)(n * D) * 4), *dpost = dev(NULL, (size_t)(n * N) * 4),
              *dcomb = dev(NULL, (size_t)(n * N * N) * 4);
        GK(ds4rt_gk_hc_pre(&dims, n, t, dfn, rb, dscale, dbase, dnorm, dX, dxn, dpost, dcomb, scr, scr_bytes, stream));
        float *xn = malloc((size_t)(n * D) * 4), *post = malloc((size_t)(n * N) * 4),
              *comb = malloc((size_t)(n * N * N) * 4);
        get(xn, dxn, (size_t)(n * D) * 4);
        get(post, dpost, (size_t)(n * N) * 4);
        get(comb, dcomb, (size_t)(n * N * N) * 4);
        snprintf(what, sizeof what, "%s N=%u D=%u xn vs cpu", tname(t), N, D);
        expect_close("hc_pre", what, xn, cf(cxn), (size_t)(n * D), 1.0, TOL_F64_PATH);
        snprintf(what, sizeof what, "%s N=%u D=%u post vs cpu", tname(t), N, D);
        expect_close("hc_pre", what, post, cf(cpost), (size_t)(n * N), 1.0, TOL_F64_PATH);
        snprintf(what, sizeof what, "%s N=%u D=%u comb vs cpu", tname(t), N, D);
        expect_close("hc_pre", what, comb, cf(ccomb), (size_t)(n * N * N), 1.0, TOL_F64_PATH);
        /* batch invariance: the first m rows as a batch, m = 1..17 */
        float *bx = malloc((size_t)(n * D) * 4), *bp = malloc((size_t)(n * N) * 4), *bc = malloc((size_t)(n * N * N) * 4);
        size_t same = 0, total = 0;
        for (int64_t m = 1; m <= n; m++) {
            GK(ds4rt_gk_hc_pre(&dims, m, t, dfn, rb, dscale, dbase, dnorm, dX, dxn, dpost, dcomb, scr, scr_bytes,
                               stream));
            get(bx, dxn, (size_t)(m * D) * 4);
            get(bp, dpost, (size_t)(m * N) * 4);
            get(bc, dcomb, (size_t)(m * N * N) * 4);
            total++;
            same += !memcmp(bx, xn, (size_t)(m * D) * 4) && !memcmp(bp, post, (size_t)(m * N) * 4) &&
                    !memcmp(bc, comb, (size_t)(m * N * N) * 4);
        }
        snprintf(what, sizeof what, "%s batches 1..17 == batch of 17", tname(t));
        report("hc_pre", what, same == total, 0, 0, same, total);
        same = 0;
        for (int64_t i = 0; i < n; i++) {
            GK(ds4rt_gk_hc_pre(&dims, 1, t, dfn, rb, dscale, dbase, dnorm, dX + i * W, dxn, dpost, dcomb, scr,
                               scr_bytes, stream));
            get(bx, dxn, D * 4u);
            get(bp, dpost, N * 4u);
            get(bc, dcomb, N * N * 4u);
            same += !memcmp(bx, xn + i * D, D * 4u) && !memcmp(bp, post + i * N, N * 4u) &&
                    !memcmp(bc, comb + i * N * N, N * N * 4u);
        }
        snprintf(what, sizeof what, "%s row alone == in batch", tname(t));
        report("hc_pre", what, same == (size_t)n, 0, 0, same, (size_t)n);

        /* hc_head: its own fn of N rows, scale[1] */
        uint64_t hrb;
        void *hfn = weights(t, N, W, 0.3f, &hrb);
        ds4rt_hc_weights hh = {.fn = cweight(t, hfn, N, W, hrb), .scale = ds4rt_f32(cscale), .base = ds4rt_f32(cbase)};
        void *dhfn = dev(hfn, (size_t)(N * hrb));
        ds4rt_dbuf *cy = cbuf(NULL, (size_t)(n * D) * 4);
        CPU(co->hc_head(cctx, &hp, n, &hh, ds4rt_f32(cX), ds4rt_f32(cy)));
        GK(ds4rt_gk_hc_head(&dims, n, t, dhfn, hrb, dscale, dbase, dX, dxn, scr, scr_bytes, stream));
        get(xn, dxn, (size_t)(n * D) * 4);
        snprintf(what, sizeof what, "%s N=%u D=%u y vs cpu", tname(t), N, D);
        expect_close("hc_head", what, xn, cf(cy), (size_t)(n * D), 1.0, TOL_F64_PATH);
        same = 0;
        for (int64_t i = 0; i < n; i++) {
            GK(ds4rt_gk_hc_head(&dims, 1, t, dhfn, hrb, dscale, dbase, dX + i * W, dxn, scr, scr_bytes, stream));
            get(bx, dxn, D * 4u);
            same += !memcmp(bx, xn + i * D, D * 4u);
        }
        snprintf(what, sizeof what, "%s row alone == in batch", tname(t));
        report("hc_head", what, same == (size_t)n, 0, 0, same, (size_t)n);

        /* hc_post from the CPU's own post/comb: bitwise */
        if (ti == 0) {
            float *dp = dev(cf(cpost), (size_t)(n * N) * 4), *dc = dev(cf(ccomb), (size_t)(n * N * N) * 4),
                  *dXo = dev(NULL, (size_t)(n * W) * 4);
            ds4rt_dbuf *cXo = cbuf(NULL, (size_t)(n * W) * 4);
            CPU(co->hc_post(cctx, &hp, n, ds4rt_f32(cX), ds4rt_f32(cf_), ds4rt_f32(cpost), ds4rt_f32(ccomb),
                            ds4rt_f32(cXo)));
            GK(ds4rt_gk_hc_post(&dims, n, dX, df, dp, dc, dXo, stream));
            float *Xo = malloc((size_t)(n * W) * 4), *one = malloc((size_t)W * 4);
            get(Xo, dXo, (size_t)(n * W) * 4);
            snprintf(what, sizeof what, "N=%u D=%u vs cpu", N, D);
            expect_bits("hc_post", what, Xo, cf(cXo), (size_t)(n * W));
            same = 0;
            for (int64_t i = 0; i < n; i++) {
                GK(ds4rt_gk_hc_post(&dims, 1, dX + i * W, df + i * D, dp + i * N, dc + i * N * N, dXo, stream));
                get(one, dXo, (size_t)W * 4);
                same += !memcmp(one, Xo + i * W, (size_t)W * 4);
            }
            report("hc_post", "row alone == in batch", same == (size_t)n, 0, 0, same, (size_t)n);
            ds4rt_gk_free(dp);
            ds4rt_gk_free(dc);
            ds4rt_gk_free(dXo);
            co->release(cbe, cXo);
            free(Xo);
            free(one);
        }
        ds4rt_gk_free(dfn);
        ds4rt_gk_free(dhfn);
        ds4rt_gk_free(dxn);
        ds4rt_gk_free(dpost);
        ds4rt_gk_free(dcomb);
        co->release(cbe, hw.fn.data.buf);
        co->release(cbe, hh.fn.data.buf);
        co->release(cbe, cxn);
        co->release(cbe, cpost);
        co->release(cbe, ccomb);
        co->release(cbe, cy);
        free(fn);
        free(hfn);
        free(xn);
        free(post);
        free(comb);
        free(bx);
        free(bp);
        free(bc);
    }

    /* capture, with a destination stride wider than D */
    {
        const uint64_t stride = D + 3;
        ds4rt_dbuf *cd = cbuf(NULL, (size_t)(n * stride) * 4);
        float *dd = dev(NULL, (size_t)(n * stride) * 4), *got = malloc((size_t)(n * stride) * 4);
        CPU(co->capture(cctx, &hp, n, ds4rt_f32(cX), ds4rt_f32(cd), stride));
        GK(ds4rt_gk_capture(N, D, n, dX, dd, stride, stream));
        get(got, dd, (size_t)(n * stride) * 4);
        snprintf(what, sizeof what, "N=%u D=%u stride %llu vs cpu", N, D, (unsigned long long)stride);
        expect_bits("capture", what, got, cf(cd), (size_t)(n * stride));
        ds4rt_gk_free(dd);
        co->release(cbe, cd);
        free(got);
    }
    ds4rt_gk_free(dX);
    ds4rt_gk_free(dscale);
    ds4rt_gk_free(dbase);
    ds4rt_gk_free(dnorm);
    ds4rt_gk_free(df);
    ds4rt_gk_free(scr);
    co->release(cbe, cX);
    co->release(cbe, cscale);
    co->release(cbe, cbase);
    co->release(cbe, cnorm);
    co->release(cbe, cf_);
    free(X);
    free(scale);
    free(base);
    free(norm);
    free(f);
}

/* ---- row ops ---------------------------------------------------------------------------------- */

static void test_argmax(void) {
    static const uint32_t WIDTHS[] = {1, 7, 256, 1000, 5003, 20000};
    for (size_t wi = 0; wi < sizeof WIDTHS / sizeof WIDTHS[0]; wi++) {
        const uint32_t w = WIDTHS[wi];
        const int64_t rows = MAXN;
        float *x = rnd((size_t)rows * w, -3, 3);
        for (int64_t r = 0; r < rows; r++) {
            float *v = x + r * w;
            switch (r % 6) {
            case 1: /* ties of the maximum: a repeated value at random places */
                for (int k = 0; k < 4; k++) v[next_u64() % w] = 7.0f;
                break;
            case 2: /* NaNs, one where the maximum would be */
                for (int k = 0; k < 5; k++) v[next_u64() % w] = NAN;
                v[0] = NAN;
                break;
            case 3: /* nothing above -inf */
                for (uint32_t i = 0; i < w; i++) v[i] = (i % 3) ? -INFINITY : NAN;
                break;
            case 4: /* +0 and -0 ties as the maximum */
                for (uint32_t i = 0; i < w; i++) v[i] = -1.0f - (float)(i % 5);
                v[w / 2] = -0.0f;
                v[w - 1] = 0.0f;
                break;
            case 5: /* +inf wins over everything, first of two */
                v[next_u64() % w] = INFINITY;
                v[w - 1] = INFINITY;
                break;
            default: break;
            }
        }
        ds4rt_dbuf *cx = cbuf(x, (size_t)rows * w * 4), *ci = cbuf(NULL, (size_t)rows * 4);
        CPU(co->argmax(cctx, rows, w, ds4rt_f32(cx), (ds4rt_di32){ci, 0}));
        float *dx = dev(x, (size_t)rows * w * 4);
        int32_t *di = dev(NULL, (size_t)rows * 4), got[MAXN], one;
        GK(ds4rt_gk_argmax(rows, w, dx, di, stream));
        get(got, di, (size_t)rows * 4);
        char what[64];
        snprintf(what, sizeof what, "width %u, ties/NaN/-inf/+-0/inf rows", w);
        expect_bits("argmax", what, got, ci->ptr, (size_t)rows);
        size_t same = 0;
        for (int64_t r = 0; r < rows; r++) {
            GK(ds4rt_gk_argmax(1, w, dx + r * w, di, stream));
            get(&one, di, 4);
            same += one == got[r];
        }
        report("argmax", "row alone == in batch", same == (size_t)rows, 0, 0, same, (size_t)rows);
        /* the split version: the same ids */
        size_t sb = ds4rt_gk_argmax_scratch_bytes(rows, w);
        void *scr = dev(NULL, sb);
        int32_t split[MAXN];
        GK(ds4rt_gk_argmax_split(rows, w, dx, di, scr, sb, stream));
        get(split, di, (size_t)rows * 4);
        snprintf(what, sizeof what, "split, width %u vs cpu", w);
        expect_bits("argmax", what, split, ci->ptr, (size_t)rows);
        ds4rt_gk_free(scr);
        ds4rt_gk_free(dx);
        ds4rt_gk_free(di);
        co->release(cbe, cx);
        co->release(cbe, ci);
        free(x);
    }
}

static void test_add_nonfinite(void) {
    static const int64_t COUNTS[] = {1, 255, 256, 1000, 70001};
    for (size_t ci = 0; ci < sizeof COUNTS / sizeof COUNTS[0]; ci++) {
        const int64_t count = COUNTS[ci];
        float *a = rnd((size_t)count, -5, 5), *b = rnd((size_t)count, -5, 5);
        int bad = (int)(next_u64() % 9);
        for (int k = 0; k < bad; k++) a[next_u64() % count] = (k % 3 == 0) ? NAN : (k % 3 == 1 ? INFINITY : -INFINITY);
        ds4rt_dbuf *ca = cbuf(a, (size_t)count * 4), *cb = cbuf(b, (size_t)count * 4), *co_ = cbuf(NULL, (size_t)count * 4),
                   *cn = cbuf(NULL, 4);
        CPU(co->add(cctx, count, ds4rt_f32(ca), ds4rt_f32(cb), ds4rt_f32(co_)));
        CPU(co->nonfinite(cctx, count, ds4rt_f32(ca), (ds4rt_di32){cn, 0}));
        float *da = dev(a, (size_t)count * 4), *db = dev(b, (size_t)count * 4), *dout = dev(NULL, (size_t)count * 4);
        int32_t *dn = dev(NULL, 4), got_n;
        float *got = malloc((size_t)count * 4);
        GK(ds4rt_gk_add(count, da, db, dout, stream));
        GK(ds4rt_gk_nonfinite(count, da, dn, stream));
        get(got, dout, (size_t)count * 4);
        get(&got_n, dn, 4);
        char what[64];
        snprintf(what, sizeof what, "count %lld vs cpu", (long long)count);
        size_t same = 0;
        for (int64_t i = 0; i < count; i++) same += same_f32(&got[i], &cf(co_)[i]);
        report("add", what, same == (size_t)count, 0, 0, same, (size_t)count);
        snprintf(what, sizeof what, "count %lld (cpu %d) vs cpu", (long long)count, *(int32_t *)cn->ptr);
        expect_bits("nonfinite", what, &got_n, cn->ptr, 1);
        /* run twice: the count is replaced, not accumulated */
        GK(ds4rt_gk_nonfinite(count, da, dn, stream));
        get(&got_n, dn, 4);
        expect_bits("nonfinite", "second run replaces the count", &got_n, cn->ptr, 1);
        ds4rt_gk_free(da);
        ds4rt_gk_free(db);
        ds4rt_gk_free(dout);
        ds4rt_gk_free(dn);
        co->release(cbe, ca);
        co->release(cbe, cb);
        co->release(cbe, co_);
        co->release(cbe, cn);
        free(a);
        free(b);
        free(got);
    }
}

static void test_confidence(void) {
    static const uint32_t DS[][2] = {{64, 8}, {1000, 0}, {4096, 33}, {5, 300}};
    for (size_t k = 0; k < sizeof DS / sizeof DS[0]; k++) {
        const uint32_t d = DS[k][0], r = DS[k][1];
        float *p = rnd(d + r, -0.1f, 0.1f), *h = rnd(d, -2, 2), *s = rnd(r, -2, 2);
        ds4rt_dbuf *cp = cbuf(p, (d + r) * 4u), *ch = cbuf(h, d * 4u), *cs = cbuf(s, r * 4u), *cout = cbuf(NULL, 4);
        CPU(co->dspark_confidence(cctx, d, r, ds4rt_f32(cp), ds4rt_f32(ch), ds4rt_f32(cs), ds4rt_f32(cout)));
        float *dp = dev(p, (d + r) * 4u), *dh = dev(h, d * 4u), *ds = dev(s, r * 4u), *dout = dev(NULL, 4), got;
        GK(ds4rt_gk_dspark_confidence(d, r, dp, dh, ds, dout, stream));
        get(&got, dout, 4);
        char what[64];
        snprintf(what, sizeof what, "d %u r %u vs cpu (float64 sum, another order)", d, r);
        expect_close("dspark_confidence", what, &got, cf(cout), 1, 1.0, TOL_F64_PATH);
        ds4rt_gk_free(dp);
        ds4rt_gk_free(dh);
        ds4rt_gk_free(ds);
        ds4rt_gk_free(dout);
        co->release(cbe, cp);
        co->release(cbe, ch);
        co->release(cbe, cs);
        co->release(cbe, cout);
        free(p);
        free(h);
        free(s);
    }
}

/* ---- MoE: router + SwiGLU + combine around float matmuls, against the CPU's moe op ------------ */

/* The router's documented rule on the host (docs/MODEL.md; the CPU backend's): ids and weights
 * from the logits, for the direct check of the ids the device wrote. */
static void host_route(const ds4rt_hparams *hp, const float *logits, const float *bias, const int32_t *tid2eid,
                       const int32_t *tokens, int64_t n, int32_t *ids, float *wts) {
    const uint32_t E = hp->n_expert, k = hp->n_expert_used;
    float p[64], key[64];
    for (int64_t t = 0; t < n; t++) {
        for (uint32_t e = 0; e < E; e++) {
            float x = logits[t * E + e];
            double sp = x > 20.0f ? (double)x : (x < -20.0f ? exp((double)x) : log1p(exp((double)x)));
            p[e] = (float)sqrt(sp);
            if (bias) key[e] = p[e] + bias[e];
        }
        int32_t *sel = ids + t * k;
        if (tid2eid) memcpy(sel, tid2eid + (size_t)tokens[t] * k, k * 4);
        else ds4rt_topk_small(key, E, k, sel);
        float sum = 0.0f;
        for (uint32_t i = 0; i < k; i++) sum += p[sel[i]];
        float nm = hp->expert_norm ? 1.0f / (sum > 6.103515625e-5f ? sum : 6.103515625e-5f) : 1.0f;
        for (uint32_t i = 0; i < k; i++) wts[t * k + i] = p[sel[i]] * nm * hp->expert_scale;
    }
}

typedef struct moe_dev {
    float *gate_inp, *bias, *gexp, *uexp, *dexp, *gsh, *ush, *dsh;
    int32_t *tid2eid;
    /* scratch */
    float *logits, *wts, *g, *u, *y, *shg, *shu, *shy;
    int32_t *ids;
} moe_dev;

/* f[0..n) on the device for the n rows at x: the op as gpubackend composes it, with the expert
 * products done slot by slot by ds4rt_gk_matmul_float (the ids are read back for that here;
 * the model's expert-stack matmul reads them on the device). */
static void gpu_moe(const ds4rt_hparams *hp, const moe_dev *m, bool hash, const void *dpass, int64_t n, const float *dx,
                    float clamp, float clamp_sh, float *df, int32_t *ids_out) {
    const uint32_t E = hp->n_expert, k = hp->n_expert_used, D = hp->n_embd, F = hp->expert_ff, Fs = hp->shared_ff;
    ds4rt_gk_moe_dims md = {.n_expert = E, .n_used = k, .expert_norm = hp->expert_norm, .expert_scale = hp->expert_scale};
    GK(ds4rt_gk_matmul_float(DS4RT_GK_TYPE_F32, m->gate_inp, E, D, D * 4u, dx, n, m->logits, stream));
    GK(ds4rt_gk_moe_route(&md, n, m->logits, hash ? NULL : m->bias, hash ? m->tid2eid : NULL, dpass, m->ids, m->wts,
                          stream));
    int32_t ids[MAXN * 64];
    get(ids, m->ids, (size_t)(n * k) * 4);
    if (ids_out) memcpy(ids_out, ids, (size_t)(n * k) * 4);
    for (int64_t t = 0; t < n; t++)
        for (uint32_t s = 0; s < k; s++) {
            const int64_t e = ids[t * k + s], r = t * k + s;
            GK(ds4rt_gk_matmul_float(DS4RT_GK_TYPE_F32, m->gexp + e * F * D, F, D, D * 4u, dx + t * D, 1, m->g + r * F,
                                     stream));
            GK(ds4rt_gk_matmul_float(DS4RT_GK_TYPE_F32, m->uexp + e * F * D, F, D, D * 4u, dx + t * D, 1, m->u + r * F,
                                     stream));
        }
    GK(ds4rt_gk_swiglu(n * k, F, m->g, F, m->u, F, clamp, m->wts, m->g, F, stream));
    for (int64_t t = 0; t < n; t++)
        for (uint32_t s = 0; s < k; s++) {
            const int64_t e = ids[t * k + s], r = t * k + s;
            GK(ds4rt_gk_matmul_float(DS4RT_GK_TYPE_F32, m->dexp + e * D * F, D, F, F * 4u, m->g + r * F, 1, m->y + r * D,
                                     stream));
        }
    GK(ds4rt_gk_matmul_float(DS4RT_GK_TYPE_F32, m->gsh, Fs, D, D * 4u, dx, n, m->shg, stream));
    GK(ds4rt_gk_matmul_float(DS4RT_GK_TYPE_F32, m->ush, Fs, D, D * 4u, dx, n, m->shu, stream));
    GK(ds4rt_gk_swiglu(n, Fs, m->shg, Fs, m->shu, Fs, clamp_sh, NULL, m->shg, Fs, stream));
    GK(ds4rt_gk_matmul_float(DS4RT_GK_TYPE_F32, m->dsh, D, Fs, Fs * 4u, m->shg, n, m->shy, stream));
    GK(ds4rt_gk_moe_combine(n, k, D, m->y, m->shy, df, stream));
}

static void test_moe(bool hash) {
    ds4rt_hparams hp = make_hp(4, 96);
    reserve(&hp, MAXN);
    const uint32_t E = hp.n_expert, k = hp.n_expert_used, D = hp.n_embd, F = hp.expert_ff, Fs = hp.shared_ff,
                   V = hp.n_vocab;
    const int64_t n = MAXN;
    const float clamp = 1.5f, clamp_sh = 2.0f; /* small, so the clamps bite */
    float *gate_inp = rnd((size_t)E * D, -0.3f, 0.3f), *bias = rnd(E, -0.2f, 0.2f);
    /* exact ties of the biased score: experts 3 and 7 (and 8) get identical router rows and bias,
     * and different expert weights, so picking the wrong one of a tie changes the output */
    memcpy(gate_inp + 7 * D, gate_inp + 3 * D, D * 4u);
    memcpy(gate_inp + 8 * D, gate_inp + 3 * D, D * 4u);
    bias[7] = bias[8] = bias[3] = 0.5f; /* and favoured, so the tie is inside the top k */
    float *gexp = rnd((size_t)E * F * D, -0.4f, 0.4f), *uexp = rnd((size_t)E * F * D, -0.4f, 0.4f),
          *dexp = rnd((size_t)E * D * F, -0.3f, 0.3f), *gsh = rnd((size_t)Fs * D, -0.4f, 0.4f),
          *ush = rnd((size_t)Fs * D, -0.4f, 0.4f), *dsh = rnd((size_t)D * Fs, -0.3f, 0.3f);
    int32_t *tid2eid = malloc((size_t)V * k * 4);
    for (uint32_t v = 0; v < V; v++)
        for (uint32_t s = 0; s < k; s++) tid2eid[v * k + s] = (int32_t)((v * 5 + s * 3 + (v % 7)) % E);
    float *x = rnd((size_t)n * D, -2, 2);
    int32_t tokens[MAXN];
    for (int64_t t = 0; t < n; t++) tokens[t] = (int32_t)(next_u64() % V);

    /* CPU */
    ds4rt_moe_weights w = {0};
    w.gate_inp = cweight(0, gate_inp, E, D, D * 4u);
    if (hash) w.tid2eid = (ds4rt_di32){cbuf(tid2eid, (size_t)V * k * 4), 0};
    else w.bias = ds4rt_f32(cbuf(bias, E * 4u));
    ds4rt_dweight ge = cweight(0, gexp, (int64_t)E * F, D, D * 4u), ue = cweight(0, uexp, (int64_t)E * F, D, D * 4u),
                  de = cweight(0, dexp, (int64_t)E * D, F, F * 4u);
    ge.rows = F;
    ue.rows = F;
    de.rows = D;
    w.gate_exps = (ds4rt_dweight3){.first = ge, .count = E, .stride = (uint64_t)F * D * 4};
    w.up_exps = (ds4rt_dweight3){.first = ue, .count = E, .stride = (uint64_t)F * D * 4};
    w.down_exps = (ds4rt_dweight3){.first = de, .count = E, .stride = (uint64_t)D * F * 4};
    w.gate_sh = cweight(0, gsh, Fs, D, D * 4u);
    w.up_sh = cweight(0, ush, Fs, D, D * 4u);
    w.down_sh = cweight(0, dsh, D, Fs, Fs * 4u);
    ds4rt_dbuf *cx = cbuf(x, (size_t)n * D * 4), *cfo = cbuf(NULL, (size_t)n * D * 4), *cpass;
    CPU(co->alloc(cbe, DS4RT_MEM_SCRATCH, ds4rt_pass_bytes(n), &cpass));
    CPU(ds4rt_pass_upload(cctx, (ds4rt_dpass){cpass}, 0, 0, tokens, n));
    CPU(co->moe(cctx, (ds4rt_dpass){cpass}, &hp, n, &w, clamp, clamp_sh, ds4rt_f32(cx), ds4rt_f32(cfo)));

    /* GPU */
    moe_dev m = {0};
    m.gate_inp = dev(gate_inp, (size_t)E * D * 4);
    m.bias = dev(bias, E * 4u);
    m.tid2eid = dev(tid2eid, (size_t)V * k * 4);
    m.gexp = dev(gexp, (size_t)E * F * D * 4);
    m.uexp = dev(uexp, (size_t)E * F * D * 4);
    m.dexp = dev(dexp, (size_t)E * D * F * 4);
    m.gsh = dev(gsh, (size_t)Fs * D * 4);
    m.ush = dev(ush, (size_t)Fs * D * 4);
    m.dsh = dev(dsh, (size_t)D * Fs * 4);
    m.logits = dev(NULL, (size_t)n * E * 4);
    m.wts = dev(NULL, (size_t)n * k * 4);
    m.ids = dev(NULL, (size_t)n * k * 4);
    m.g = dev(NULL, (size_t)n * k * F * 4);
    m.u = dev(NULL, (size_t)n * k * F * 4);
    m.y = dev(NULL, (size_t)n * k * D * 4);
    m.shg = dev(NULL, (size_t)n * Fs * 4);
    m.shu = dev(NULL, (size_t)n * Fs * 4);
    m.shy = dev(NULL, (size_t)n * D * 4);
    uint8_t pass_img[16 + 4 * MAXN] = {0};
    memcpy(pass_img + 16, tokens, (size_t)n * 4);
    void *dpass = dev(pass_img, sizeof pass_img);
    float *dx = dev(x, (size_t)n * D * 4), *dfo = dev(NULL, (size_t)n * D * 4);
    float *got = malloc((size_t)n * D * 4), *one = malloc(D * 4u);
    int32_t ids[MAXN * 64], ref_ids[MAXN * 64];
    gpu_moe(&hp, &m, hash, dpass, n, dx, clamp, clamp_sh, dfo, ids);
    get(got, dfo, (size_t)n * D * 4);

    /* ids and weights against the host rule applied to the device's own logits */
    float *logits = malloc((size_t)n * E * 4), *wts = malloc((size_t)n * k * 4), *ref_w = malloc((size_t)n * k * 4);
    get(logits, m.logits, (size_t)n * E * 4);
    get(wts, m.wts, (size_t)n * k * 4);
    host_route(&hp, logits, hash ? NULL : bias, hash ? tid2eid : NULL, tokens, n, ref_ids, ref_w);
    const char *kind = hash ? "hash" : "learned";
    char what[80];
    int ties = 0;
    for (int64_t t = 0; t < n && !hash; t++)
        for (uint32_t s = 0; s < k; s++) ties += ids[t * k + s] == 3 || ids[t * k + s] == 7 || ids[t * k + s] == 8;
    snprintf(what, sizeof what, "%s: ids (%d slots on tied experts)", kind, ties);
    expect_bits("moe_route", what, ids, ref_ids, (size_t)(n * k));
    snprintf(what, sizeof what, "%s: weights", kind);
    expect_close("moe_route", what, wts, ref_w, (size_t)(n * k), 1.0, TOL_F64_PATH);
    snprintf(what, sizeof what, "%s: composed moe f vs cpu moe", kind);
    expect_close("moe", what, got, cf(cfo), (size_t)n * D, 1.0, TOL_F64_PATH);
    /* batch invariance of the composition: row alone (its token at byte 16 of its own block) */
    size_t same = 0;
    for (int64_t t = 0; t < n; t++) {
        uint8_t img[16 + 4] = {0};
        memcpy(img + 16, &tokens[t], 4);
        GK(ds4rt_gk_memcpy_h2d(dpass, img, sizeof img, stream));
        gpu_moe(&hp, &m, hash, dpass, 1, dx + t * D, clamp, clamp_sh, dfo, NULL);
        get(one, dfo, D * 4u);
        same += !memcmp(one, got + t * D, D * 4u);
    }
    snprintf(what, sizeof what, "%s: row alone == in batch", kind);
    report("moe", what, same == (size_t)n, 0, 0, same, (size_t)n);

    void *all[] = {m.gate_inp, m.bias, m.tid2eid, m.gexp, m.uexp, m.dexp, m.gsh, m.ush, m.dsh, m.logits, m.wts,
                   m.ids, m.g, m.u, m.y, m.shg, m.shu, m.shy, dpass, dx, dfo};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ds4rt_gk_free(all[i]);
    free(gate_inp);
    free(bias);
    free(gexp);
    free(uexp);
    free(dexp);
    free(gsh);
    free(ush);
    free(dsh);
    free(tid2eid);
    free(x);
    free(got);
    free(one);
    free(logits);
    free(wts);
    free(ref_w);
}

/* SwiGLU alone on values around the clamp, with NaN and inf inputs (the clamp's ternaries). */
static void test_swiglu(void) {
    const int64_t rows = 9;
    const uint32_t width = 301;
    const float c = 3.0f;
    float *g = rnd((size_t)rows * width, -8, 8), *u = rnd((size_t)rows * width, -8, 8), *wt = rnd((size_t)rows, 0, 2);
    g[5] = NAN;
    u[6] = NAN;
    g[7] = INFINITY;
    u[8] = -INFINITY;
    g[9] = c;
    u[10] = -c;
    float *ref = malloc((size_t)rows * width * 4), *got = malloc((size_t)rows * width * 4);
    /* the CPU's swiglu (cpu_moe.c) written out: min(g, c), clamp(u, -c, c), silu(g) * u * w */
    for (int64_t r = 0; r < rows; r++)
        for (uint32_t j = 0; j < width; j++) {
            float gi = g[r * width + j] < c ? g[r * width + j] : c;
            float ui = u[r * width + j] < -c ? -c : (u[r * width + j] > c ? c : u[r * width + j]);
            ref[r * width + j] = gi / (1.0f + expf(-gi)) * ui * wt[r];
        }
    float *dg = dev(g, (size_t)rows * width * 4), *du = dev(u, (size_t)rows * width * 4), *dw = dev(wt, (size_t)rows * 4),
          *dh = dev(NULL, (size_t)rows * width * 4);
    GK(ds4rt_gk_swiglu(rows, width, dg, width, du, width, c, dw, dh, width, stream));
    get(got, dh, (size_t)rows * width * 4);
#if defined(DS4RT_WITH_HIP_CPU)
    expect_bits("swiglu", "clamp edges, NaN, inf (same expf)", got, ref, (size_t)rows * width);
#else
    expect_close("swiglu", "clamp edges, NaN, inf (device exp)", got, ref, (size_t)rows * width, 1.0, TOL_F64_PATH);
#endif
    ds4rt_gk_free(dg);
    ds4rt_gk_free(du);
    ds4rt_gk_free(dw);
    ds4rt_gk_free(dh);
    free(g);
    free(u);
    free(wt);
    free(ref);
    free(got);
}

/* The device sampler against the CPU's sampling functions with the same uniforms: ids must
 * agree except where u * total falls within float64 rounding of a cumulative boundary, which
 * random data essentially never hits; the final distributions within TOL_F64_PATH. */
static void test_sample(void) {
    static const struct {
        float t;
        int32_t k;
        float p, mp;
    } CASES[] = {{1.0f, 0, 1.0f, 0.0f},  {0.7f, 40, 1.0f, 0.0f}, {1.3f, 0, 0.9f, 0.0f}, {0.9f, 0, 1.0f, 0.05f},
                 {1.0f, 50, 0.8f, 0.02f}, {1.0f, 0, 0.0f, 0.0f},  {2.0f, 3, 0.5f, 0.0f}, {0.0f, 0, 1.0f, 0.0f}};
    const int64_t rows = 6;
    const uint32_t V = 3001;
    float *x = rnd((size_t)rows * V, -4, 4);
    for (uint32_t i = 0; i < 30; i++) x[V + 100 + i] = 3.5f; /* ties of the top values */
    x[2 * V + 5] = NAN;
    for (uint32_t i = 0; i < V; i++) x[3 * V + i] = (float)(i % 7); /* many exact ties */
    float *dx = dev(x, (size_t)rows * V * 4);
    const uint64_t counter = 41;
    uint64_t *dc = dev(&counter, 8);
    int32_t *di = dev(NULL, (size_t)rows * 4), got[8], ref[8];
    size_t sb = ds4rt_gk_sample_scratch_bytes(rows, V);
    float *scr = dev(NULL, sb), *gp = malloc((size_t)rows * V * 4), *rp = malloc((size_t)rows * V * 4);
    int32_t *widx = malloc(V * 4u);
    float *wval = malloc(V * 4u);
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        ds4rt_gk_sample_params gpar = {.temperature = CASES[c].t, .top_k = CASES[c].k, .top_p = CASES[c].p,
                                       .min_p = CASES[c].mp, .seed = 1234 + c};
        ds4rt_sampler_params cpar;
        CPU(ds4rt_sampler_params_init(&cpar, sizeof cpar));
        cpar.temperature = CASES[c].t;
        cpar.top_k = CASES[c].k;
        cpar.top_p = CASES[c].p;
        cpar.min_p = CASES[c].mp;
        GK(ds4rt_gk_sample(&gpar, rows, V, dx, dc, di, scr, sb, stream));
        get(got, di, (size_t)rows * 4);
        for (int64_t r = 0; r < rows; r++) {
            if (CASES[c].t > 0.0f) {
                ds4rt_sampling_probs(&cpar, x + r * V, V, rp + r * V, widx, wval);
                ref[r] = ds4rt_sample_probs(rp + r * V, V, ds4rt_gk_sample_uniform(gpar.seed, counter + (uint64_t)r));
            } else {
                ref[r] = ds4rt_argmax(x + r * V, V);
            }
        }
        char what[96];
        snprintf(what, sizeof what, "T %.1f k %d p %.2f min_p %.2f: ids vs cpu", CASES[c].t, CASES[c].k, CASES[c].p,
                 CASES[c].mp);
        expect_bits("sample", what, got, ref, (size_t)rows);
        if (CASES[c].t > 0.0f) {
            get(gp, scr, (size_t)rows * V * 4);
            snprintf(what, sizeof what, "T %.1f k %d p %.2f min_p %.2f: distribution", CASES[c].t, CASES[c].k,
                     CASES[c].p, CASES[c].mp);
            expect_close("sample", what, gp, rp, (size_t)rows * V, 1e-3, TOL_F64_PATH);
            /* batch invariance */
            size_t same = 0;
            for (int64_t r = 0; r < rows; r++) {
                uint64_t cr = counter + (uint64_t)r;
                GK(ds4rt_gk_memcpy_h2d(dc, &cr, 8, stream));
                GK(ds4rt_gk_sample(&gpar, 1, V, dx + r * V, dc, di, scr, sb, stream));
                int32_t one;
                get(&one, di, 4);
                same += one == got[r];
            }
            GK(ds4rt_gk_memcpy_h2d(dc, &counter, 8, stream));
            GK(ds4rt_gk_stream_sync(stream));
            report("sample", "row alone == in batch", same == (size_t)rows, 0, 0, same, (size_t)rows);
        }
    }
    ds4rt_gk_free(dx);
    ds4rt_gk_free(dc);
    ds4rt_gk_free(di);
    ds4rt_gk_free(scr);
    free(x);
    free(gp);
    free(rp);
    free(widx);
    free(wval);
}

int main(int argc, char **argv) {
    uint64_t seed = 1;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    }
    rng = seed;
    int count = 0;
    if (ds4rt_gk_device_count(&count) != 0 || count == 0) {
        printf("test-ops: no GPU device (%s)\n", ds4rt_gk_last_error());
        return 77;
    }
    GK(ds4rt_gk_stream_create(&stream));
    CPU(ds4rt_backend_open(DS4RT_BKIND_CPU, 0, 1, &cbe));
    co = ds4rt_backend_get_ops(cbe);
    CPU(co->ctx_create(cbe, 1, &cctx));
    printf("info forms %s\n", ds4rt_gk_hc_forms());

#define RUN(name, call)                                                                           \
    do {                                                                                          \
        if (only == NULL || strcmp(only, name) == 0) call;                                        \
    } while (0)
    RUN("matmul", test_matmul_float());
    RUN("hc", test_hc(4, 72));
    RUN("hc", test_hc(3, 131));
    /* the real width (N = 4, D = 4096) and a partial last step: with DS4RT_GPU_HC_RMS_IN_MIX=1
     * (and DS4RT_GPU_FS1=16) up to 16 tokens' HC mix forms the RMS scale inside the product
     * (ds4rt_gk_matmul_rms_rows, mm_fs1_kernel), so "batches 1..17 == batch of 17" compares that
     * launch with the two-launch path of 17 tokens; without it, mm_fs1_kernel with mm_fs_kernel; with
     * DS4RT_GPU_HC_PRE1=1 hc_pre of 1..16 tokens is one launch (gk_hc_pre1_kernel), compared with
     * the CPU and with the launches of 17 tokens likewise */
    RUN("hc", test_hc(4, 4096));
    RUN("hc", test_hc(3, 1500));
    RUN("argmax", test_argmax());
    RUN("add", test_add_nonfinite());
    RUN("confidence", test_confidence());
    RUN("swiglu", test_swiglu());
    RUN("moe", test_moe(false));
    RUN("moe", test_moe(true));
    RUN("sample", test_sample());

    co->ctx_free(cctx);
    ds4rt_backend_close(cbe);
    ds4rt_gk_stream_destroy(stream);
    printf("test-ops: %d checks, %d failed (seed %llu)\n", n_checks, n_failed, (unsigned long long)seed);
    return n_failed ? 1 : 0;
}
