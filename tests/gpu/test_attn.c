/*
 * test_attn.c - the attention-side GPU kernels (hip/attn.h) against the CPU backend's ops on
 * random data (docs/GPU.md, "Attention kernels", states each tolerance and why):
 *   - bitwise where the kernel follows the CPU's arithmetic order: FP8/FP4, Hadamard, KV store,
 *     the indexer's scores and selection, the compressor frontier; RoPE and the compressor's
 *     emitted rows too where both sides use the same libm (HIP-CPU), else within an ulp-level
 *     tolerance (a GPU's cos/sin/exp differ from glibc's by an ulp of float64);
 *   - within a stated tolerance where the GPU reduces in another order: RMS norm (two float ulps),
 *     attention (float32 split-key softmax);
 *   - batch invariance on the GPU, bitwise: row i alone equals row i of a batch of up to 17;
 *   - compressor rollback at every keep length across ratio-4 and ratio-128 emissions, and
 *     the frontier after one batched pass equal to the frontier after one-row passes;
 *   - the raw ring and attention's window across ring wrap.
 * Prints one line per check and "test_attn: N checks, M failed"; exit status 1 if any failed.
 * Usage: test_attn [--seed N]. Built as a Meson target (tests/meson.build, gpu configuration)
 * and run by tests/test_gpu_attn.py.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "backend_impl.h"
#include "ds4rt.h"
#include "gk.h"

#if defined(DS4RT_WITH_HIP_CPU)
#define SAME_LIBM 1 /* HIP-CPU kernels call the host's libm, as the CPU backend does */
#else
#define SAME_LIBM 0
#endif

/* ---- harness ----------------------------------------------------------------------------- */

static int n_checks, n_failed;

static void report(const char *op, const char *what, int ok, double err, double tol) {
    n_checks++;
    if (!ok) n_failed++;
    printf("%-4s %-13s %-58s err %.3g tol %.3g\n", ok ? "ok" : "FAIL", op, what, err, tol);
    fflush(stdout);
}

static uint64_t rng_state;
static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint32_t rnd(uint32_t n) { return (uint32_t)(next_u64() % n); }
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next_u64() >> 11) * 0x1.0p-53); }
static float *rand_vec(size_t n, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = uniform(lo, hi);
    return v;
}

static void die(const char *what, const char *msg) {
    fprintf(stderr, "test_attn: %s: %s\n", what, msg);
    exit(2);
}

/* the CPU backend: the oracle */
static ds4rt_backend *cbe;
static ds4rt_bctx *cctx;
static const ds4rt_backend_ops *co;

static ds4rt_dbuf *cbuf(const void *host, size_t bytes) {
    ds4rt_dbuf *b;
    if (co->alloc(cbe, DS4RT_MEM_SCRATCH, bytes ? bytes : 4, &b) != DS4RT_OK) die("cpu alloc", ds4rt_last_error());
    if (host != NULL && bytes) memcpy(b->ptr, host, bytes);
    return b;
}
static float *cf(ds4rt_dbuf *b) { return (float *)b->ptr; }
static float *F_host(ds4rt_df32 t) { return (float *)t.buf->ptr + t.off; }
static int32_t *I_host(ds4rt_di32 t) { return (int32_t *)t.buf->ptr + t.off; }
static ds4rt_dpass cpass(int64_t pos0, int64_t base) {
    ds4rt_dbuf *b = cbuf(NULL, DS4RT_PASS_HEADER_BYTES);
    memcpy(b->ptr, &pos0, 8);
    memcpy((uint8_t *)b->ptr + 8, &base, 8);
    return (ds4rt_dpass){b};
}
static void cfree(ds4rt_dbuf *b) { co->release(cbe, b); }
static void cok(ds4rt_status st, const char *what) {
    if (st != DS4RT_OK) die(what, ds4rt_last_error());
}

/* the GPU */
static void *stream;
static void gk(int st, const char *what) {
    if (st != DS4RT_GK_OK) die(what, ds4rt_gk_last_error());
}
static void *gdev(size_t bytes) {
    void *p;
    gk(ds4rt_gk_malloc(&p, bytes ? bytes : 4), "device alloc");
    gk(ds4rt_gk_memset(p, 0, bytes ? bytes : 4, stream), "device memset");
    return p;
}
static void *gup(const void *h, size_t bytes) {
    void *p = gdev(bytes);
    gk(ds4rt_gk_memcpy_h2d(p, h, bytes, stream), "upload");
    gk(ds4rt_gk_stream_sync(stream), "sync");
    return p;
}
static void gdown(void *h, const void *d, size_t bytes) {
    gk(ds4rt_gk_memcpy_d2h(h, d, bytes, stream), "download");
    gk(ds4rt_gk_stream_sync(stream), "sync");
}
static void *gpass(int64_t pos0, int64_t base) {
    int64_t hdr[2] = {pos0, base};
    return gup(hdr, sizeof hdr);
}
static float *gdown_f(const void *d, size_t count) {
    float *h = malloc((count ? count : 1) * sizeof *h);
    gdown(h, d, count * sizeof *h);
    return h;
}

/* distance in float ulps (sign-magnitude mapped onto an ordered integer line) */
static int64_t ordered(float x) {
    int32_t i;
    memcpy(&i, &x, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}
static uint64_t ulps(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : UINT64_MAX;
    int64_t d = ordered(a) - ordered(b);
    return (uint64_t)(d < 0 ? -d : d);
}
static uint64_t max_ulps(const float *a, const float *b, size_t n, size_t *differ) {
    uint64_t worst = 0;
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t u = ulps(a[i], b[i]);
        nd += u != 0;
        if (u > worst) worst = u;
    }
    if (differ) *differ = nd;
    return worst;
}
static int same_bits(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }
static double max_abs(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* ---- RMS norm ------------------------------------------------------------------------------ */

/* The CPU sums the squares sequentially in float64, the GPU in a fixed tree: the sums agree to
 * ~1e-13 relative, so the float scale differs by at most one ulp (and only near a rounding
 * boundary), and an output, two roundings later, by at most two. */
static void test_rms_norm(void) {
    static const uint32_t widths[] = {1, 7, 64, 100, 512, 1024, 4096};
    uint64_t worst = 0;
    size_t differ = 0, total = 0;
    int invariant = 1, alias_ok = 1;
    for (int trial = 0; trial < 14; trial++) {
        const int64_t rows = 1 + rnd(40);
        const uint32_t width = widths[trial % 7];
        const int weighted = trial % 2 == 0;
        const size_t cnt = (size_t)rows * width;
        float *x = rand_vec(cnt, -3, 3), *w = rand_vec(width, 0.5f, 1.5f);
        ds4rt_dbuf *cx = cbuf(x, cnt * 4), *cw = cbuf(w, width * 4), *cout = cbuf(NULL, cnt * 4);
        cok(co->rms_norm(cctx, rows, width, ds4rt_f32(cx), weighted ? ds4rt_f32(cw) : (ds4rt_df32){0}, 1e-6f,
                         ds4rt_f32(cout)),
            "cpu rms_norm");
        float *gx = gup(x, cnt * 4), *gw = gup(w, width * 4), *gout = gdev(cnt * 4);
        gk(ds4rt_gk_rms_norm(rows, width, gx, weighted ? gw : NULL, 1e-6f, gout, stream), "rms_norm");
        float *res = gdown_f(gout, cnt);
        size_t nd;
        uint64_t u = max_ulps(res, cf(cout), cnt, &nd);
        if (u > worst) worst = u;
        differ += nd;
        total += cnt;
        for (int64_t r = 0; r < rows; r++) { /* row alone */
            gk(ds4rt_gk_rms_norm(1, width, gx + r * width, weighted ? gw : NULL, 1e-6f, gout + r * width, stream),
               "rms_norm row");
        }
        float *alone = gdown_f(gout, cnt);
        invariant &= same_bits(alone, res, cnt * 4);
        gk(ds4rt_gk_rms_norm(rows, width, gx, weighted ? gw : NULL, 1e-6f, gx, stream), "rms_norm in place");
        float *inplace = gdown_f(gx, cnt);
        alias_ok &= same_bits(inplace, res, cnt * 4);
        free(x), free(w), free(res), free(alone), free(inplace);
        cfree(cx), cfree(cw), cfree(cout);
        ds4rt_gk_free(gx), ds4rt_gk_free(gw), ds4rt_gk_free(gout);
    }
    char what[96];
    snprintf(what, sizeof what, "vs cpu, ulps (%zu of %zu values differ)", differ, total);
    report("rms_norm", what, worst <= 2, (double)worst, 2);
    report("rms_norm", "row alone == row in batch (bitwise)", invariant, !invariant, 0);
    report("rms_norm", "out aliasing x (bitwise)", alias_ok, !alias_ok, 0);
}

/* ---- RoPE ---------------------------------------------------------------------------------- */

static ds4rt_rope random_rope(uint32_t n_rot) {
    ds4rt_rope r = {.n_rot = n_rot, .base = rnd(2) ? 10000.0 : 160000.0, .yarn = rnd(2) != 0,
                    .yarn_scale = 1.0 / 16, .yarn_lo = uniform(0, 8), .yarn_hi = uniform(8, 24)};
    return r;
}
static ds4rt_gk_rope_params gk_rope(const ds4rt_rope *r) {
    return (ds4rt_gk_rope_params){.n_rot = r->n_rot, .base = r->base, .yarn = r->yarn, .yarn_scale = r->yarn_scale,
                                  .yarn_lo = r->yarn_lo, .yarn_hi = r->yarn_hi};
}

static void test_rope(void) {
    uint64_t worst = 0;
    size_t differ = 0, total = 0;
    int invariant = 1;
    for (int trial = 0; trial < 16; trial++) {
        const int64_t n = 1 + rnd(17);
        const uint32_t heads = 1 + rnd(8), dim = 32 * (1 + rnd(16));
        const uint32_t n_rot = 2 * (1 + rnd(dim / 2 < 64 ? dim / 2 : 64));
        const ds4rt_rope r = random_rope(n_rot);
        const ds4rt_gk_rope_params gr = gk_rope(&r);
        const int sign = trial % 2 ? -1 : 1;
        const int64_t pos0 = trial % 4 == 3 ? 1000000 + rnd(100000) : rnd(70000);
        const size_t cnt = (size_t)n * heads * dim;
        float *x = rand_vec(cnt, -2, 2);
        ds4rt_dbuf *cx = cbuf(x, cnt * 4);
        ds4rt_dpass cp = cpass(pos0, 0);
        cok(co->rope(cctx, cp, n, heads, dim, &r, sign, ds4rt_f32(cx)), "cpu rope");
        float *gx = gup(x, cnt * 4);
        void *gp = gpass(pos0, 0);
        gk(ds4rt_gk_rope(gp, n, heads, dim, &gr, sign, gx, stream), "rope");
        float *res = gdown_f(gx, cnt);
        size_t nd;
        uint64_t u = max_ulps(res, cf(cx), cnt, &nd);
        if (u > worst) worst = u;
        differ += nd;
        total += cnt;
        float *gy = gup(x, cnt * 4);
        for (int64_t i = 0; i < n; i++) {
            void *gpi = gpass(pos0 + i, 0);
            gk(ds4rt_gk_rope(gpi, 1, heads, dim, &gr, sign, gy + (size_t)i * heads * dim, stream), "rope row");
            gk(ds4rt_gk_stream_sync(stream), "sync");
            ds4rt_gk_free(gpi);
        }
        float *alone = gdown_f(gy, cnt);
        invariant &= same_bits(alone, res, cnt * 4);
        free(x), free(res), free(alone);
        cfree(cx), cfree(cp.buf);
        ds4rt_gk_free(gx), ds4rt_gk_free(gy), ds4rt_gk_free(gp);
    }
    char what[96];
    snprintf(what, sizeof what, "vs cpu, ulps (%zu of %zu values differ)", differ, total);
    report("rope", what, worst <= (SAME_LIBM ? 0u : 1u), (double)worst, SAME_LIBM ? 0 : 1);
    report("rope", "row alone == row in batch (bitwise)", invariant, !invariant, 0);
}

/* ---- FP8 / FP4 / Hadamard ---------------------------------------------------------------------- */

/* Values over many binades, zero blocks and blocks below the minimum scale. */
static float *lowp_data(size_t cnt, uint32_t block) {
    float *x = malloc(cnt * sizeof *x);
    for (size_t b = 0; b < cnt; b += block) {
        const int kind = rnd(8);
        const float scale = ldexpf(1.0f, (int)rnd(60) - 40);
        for (size_t i = b; i < b + block && i < cnt; i++)
            x[i] = kind == 0 ? 0.0f : (kind == 1 ? uniform(-1e-9f, 1e-9f) : uniform(-1, 1) * scale);
    }
    return x;
}

static void test_lowp(int fp4) {
    const uint32_t blk = fp4 ? 32 : 64;
    int ok = 1, invariant = 1;
    size_t total = 0;
    for (int trial = 0; trial < 10; trial++) {
        const int64_t rows = 1 + rnd(20);
        const uint32_t width = blk * (1 + rnd(8)), stride = width + rnd(3) * blk + (trial % 2);
        const size_t cnt = (size_t)rows * stride;
        float *x = lowp_data(cnt, blk);
        ds4rt_dbuf *cx = cbuf(x, cnt * 4);
        cok((fp4 ? co->fp4_round : co->fp8_round)(cctx, rows, stride, width, ds4rt_f32(cx)), "cpu round");
        float *gx = gup(x, cnt * 4);
        gk((fp4 ? ds4rt_gk_fp4_round : ds4rt_gk_fp8_round)(rows, stride, width, gx, stream), "round");
        float *res = gdown_f(gx, cnt);
        ok &= same_bits(res, cf(cx), cnt * 4); /* the untouched tail of each row included */
        total += cnt;
        gk(ds4rt_gk_memcpy_h2d(gx, x, cnt * 4, stream), "upload");
        for (int64_t r = 0; r < rows; r++)
            gk((fp4 ? ds4rt_gk_fp4_round : ds4rt_gk_fp8_round)(1, stride, width, gx + r * stride, stream), "row");
        float *alone = gdown_f(gx, cnt);
        invariant &= same_bits(alone, res, cnt * 4);
        free(x), free(res), free(alone);
        cfree(cx);
        ds4rt_gk_free(gx);
    }
    char what[96];
    snprintf(what, sizeof what, "vs cpu, bitwise over %zu values (strided rows)", total);
    report(fp4 ? "fp4_round" : "fp8_round", what, ok, !ok, 0);
    report(fp4 ? "fp4_round" : "fp8_round", "row alone == row in batch (bitwise)", invariant, !invariant, 0);
}

static void test_hadamard(void) {
    int ok = 1, invariant = 1;
    for (uint32_t width = 1; width <= DS4RT_GK_HADAMARD_MAX; width *= 2) {
        const int64_t rows = 1 + rnd(9);
        const size_t cnt = (size_t)rows * width;
        float *x = rand_vec(cnt, -4, 4);
        ds4rt_dbuf *cx = cbuf(x, cnt * 4);
        cok(co->hadamard(cctx, rows, width, ds4rt_f32(cx)), "cpu hadamard");
        float *gx = gup(x, cnt * 4);
        gk(ds4rt_gk_hadamard(rows, width, gx, stream), "hadamard");
        float *res = gdown_f(gx, cnt);
        ok &= same_bits(res, cf(cx), cnt * 4);
        gk(ds4rt_gk_memcpy_h2d(gx, x, cnt * 4, stream), "upload");
        for (int64_t r = 0; r < rows; r++) gk(ds4rt_gk_hadamard(1, width, gx + r * width, stream), "hadamard row");
        float *alone = gdown_f(gx, cnt);
        invariant &= same_bits(alone, res, cnt * 4);
        free(x), free(res), free(alone);
        cfree(cx);
        ds4rt_gk_free(gx);
    }
    report("hadamard", "vs cpu, bitwise, widths 1..4096", ok, !ok, 0);
    report("hadamard", "row alone == row in batch (bitwise)", invariant, !invariant, 0);
}

/* ---- KV ring -------------------------------------------------------------------------------- */

static void test_kv_store(void) {
    int ok = 1;
    for (int trial = 0; trial < 12; trial++) {
        const int64_t n = 1 + rnd(17);
        const uint32_t dim = 1 + rnd(300), cap = trial % 3 == 0 ? 1 + rnd(8) : 16 + rnd(140);
        const int64_t pos0 = rnd(5000);
        float *ring = rand_vec((size_t)cap * dim, -1, 1), *src = rand_vec((size_t)n * dim, -1, 1);
        ds4rt_dbuf *cr = cbuf(ring, (size_t)cap * dim * 4), *cs = cbuf(src, (size_t)n * dim * 4);
        ds4rt_dpass cp = cpass(pos0, 0);
        cok(co->kv_store(cctx, cp, n, dim, ds4rt_f32(cs), ds4rt_f32(cr), cap), "cpu kv_store");
        float *gr = gup(ring, (size_t)cap * dim * 4), *gs = gup(src, (size_t)n * dim * 4);
        void *gp = gpass(pos0, 0);
        gk(ds4rt_gk_kv_store(gp, n, dim, gs, gr, cap, stream), "kv_store");
        float *res = gdown_f(gr, (size_t)cap * dim);
        ok &= same_bits(res, cf(cr), (size_t)cap * dim * 4);
        free(ring), free(src), free(res);
        cfree(cr), cfree(cs), cfree(cp.buf);
        ds4rt_gk_free(gr), ds4rt_gk_free(gs), ds4rt_gk_free(gp);
    }
    report("kv_store", "vs cpu, bitwise, ring wrap and passes longer than the ring", ok, !ok, 0);
}

/* ---- compressor ------------------------------------------------------------------------------ */

typedef struct comp_pair {
    /* CPU */
    ds4rt_comp_desc cd;
    ds4rt_comp_state cs;
    ds4rt_dbuf *bufs[8];
    /* GPU: the batched run and a run that pushes the same rows one pass per row */
    ds4rt_gk_comp_desc gd;
    ds4rt_gk_comp_state gs, g1;
    size_t fr, outn;
} comp_pair;

static void gk_state(ds4rt_gk_comp_state *s, uint32_t rows, uint32_t width, uint32_t cap, uint32_t dim) {
    const size_t fr = (size_t)rows * width;
    *s = (ds4rt_gk_comp_state){.d_kv = gdev(fr * 4), .d_score = gdev(fr * 4), .d_snap_kv = gdev(fr * 4),
                               .d_snap_score = gdev(fr * 4), .d_journal = gdev((size_t)17 * 2 * width * 4),
                               .d_out = gdev((size_t)cap * dim * 4), .rows = rows, .width = width, .cap = cap};
}

/* GPU state against CPU state: the frontier bitwise; emitted rows bitwise under the same libm.
 * On a GPU the pooling's float64 exp (and RoPE's cos/sin) may differ by an ulp, which moves a
 * float across a rounding boundary rarely: a value is "near" when within 4 ulps or 1e-5 of
 * its row's largest magnitude (the Hadamard sums a row's rounding differences); at most 0.1%
 * of values may be farther, and only under FP8/FP4, by at most one quantisation step (the
 * largest is FP4's 4 -> 6 of a block's 6: a third of the row's magnitude). */
typedef struct comp_err {
    int frontier_ok;
    uint64_t worst_ulps;
    size_t far, total;
    double worst_rel; /* |diff| / row magnitude over the far values */
} comp_err;

static void comp_compare(const comp_pair *p, const ds4rt_gk_comp_state *g, comp_err *e) {
    float *kv = gdown_f(g->d_kv, p->fr), *sc = gdown_f(g->d_score, p->fr), *out = gdown_f(g->d_out, p->outn);
    e->frontier_ok &= same_bits(kv, F_host(p->cs.kv), p->fr * 4) && same_bits(sc, F_host(p->cs.score), p->fr * 4);
    const float *ref = F_host(p->cs.out);
    const uint32_t d = p->cd.dim;
    for (size_t r0 = 0; r0 < p->outn; r0 += d) {
        double rmax = 0;
        for (size_t i = r0; i < r0 + d; i++) rmax = fabs((double)ref[i]) > rmax ? fabs((double)ref[i]) : rmax;
        for (size_t i = r0; i < r0 + d; i++) {
            const uint64_t u = ulps(out[i], ref[i]);
            const double diff = fabs((double)out[i] - ref[i]);
            if (u > e->worst_ulps) e->worst_ulps = u;
            if (u > 4 && !(diff <= 1e-5 * rmax)) {
                e->far++;
                const double rel = rmax > 0 ? diff / rmax : INFINITY;
                if (!(rel <= e->worst_rel)) e->worst_rel = rel;
            }
        }
    }
    e->total += p->outn;
    free(kv), free(sc), free(out);
}

static comp_pair comp_make(uint32_t R, uint32_t d, uint32_t n_rot, int post, uint32_t d_nope, int64_t positions) {
    comp_pair p;
    memset(&p, 0, sizeof p);
    const uint32_t coff = R == 4 ? 2 : 1, rows = coff * R, width = coff * d;
    const uint32_t cap = (uint32_t)(positions / R + 2);
    float *ape = rand_vec((size_t)R * width, -0.5f, 0.5f), *norm = rand_vec(d, 0.5f, 1.5f);
    ds4rt_rope r = random_rope(n_rot);
    r.base = 160000.0;
    r.yarn = true;
    p.fr = (size_t)rows * width;
    p.outn = (size_t)cap * d;
    ds4rt_dbuf *b[8] = {cbuf(ape, (size_t)R * width * 4), cbuf(norm, d * 4), cbuf(NULL, p.fr * 4),
                        cbuf(NULL, p.fr * 4), cbuf(NULL, p.fr * 4), cbuf(NULL, p.fr * 4),
                        cbuf(NULL, (size_t)17 * 2 * width * 4), cbuf(NULL, p.outn * 4)};
    memcpy(p.bufs, b, sizeof b);
    p.cd = (ds4rt_comp_desc){.ratio = R, .dim = d, .d_nope = d_nope, .ape = ds4rt_f32(b[0]), .norm = ds4rt_f32(b[1]),
                             .rms_eps = 1e-6f, .rope = r, .post = (ds4rt_comp_post)post};
    p.cs = (ds4rt_comp_state){.kv = ds4rt_f32(b[2]), .score = ds4rt_f32(b[3]), .snap_kv = ds4rt_f32(b[4]),
                              .snap_score = ds4rt_f32(b[5]), .journal = ds4rt_f32(b[6]), .out = ds4rt_f32(b[7]),
                              .rows = rows, .width = width, .cap = cap};
    p.gd = (ds4rt_gk_comp_desc){.ratio = R, .dim = d, .d_nope = d_nope, .d_ape = gup(ape, (size_t)R * width * 4),
                                .d_norm = gup(norm, d * 4), .rms_eps = 1e-6f, .rope = gk_rope(&r), .post = post};
    gk_state(&p.gs, rows, width, cap, d);
    gk_state(&p.g1, rows, width, cap, d);
    cok(co->comp_reset(cctx, &p.cs), "cpu comp_reset");
    gk(ds4rt_gk_comp_reset(&p.gs, stream), "comp_reset");
    gk(ds4rt_gk_comp_reset(&p.g1, stream), "comp_reset");
    free(ape), free(norm);
    return p;
}

static void comp_free(comp_pair *p) {
    for (int i = 0; i < 8; i++) cfree(p->bufs[i]);
    ds4rt_gk_free((void *)p->gd.d_ape), ds4rt_gk_free((void *)p->gd.d_norm);
    ds4rt_gk_comp_state *s[2] = {&p->gs, &p->g1};
    for (int k = 0; k < 2; k++) {
        ds4rt_gk_free(s[k]->d_kv), ds4rt_gk_free(s[k]->d_score), ds4rt_gk_free(s[k]->d_snap_kv);
        ds4rt_gk_free(s[k]->d_snap_score), ds4rt_gk_free(s[k]->d_journal), ds4rt_gk_free(s[k]->d_out);
    }
}

static const char *post_name(int post) {
    static const char *names[] = {"none", "fp8", "hadamard+fp4", "hadamard"};
    return names[post];
}

/* Streams `positions` positions in passes of 1..17 rows. After each pass: compare; roll back
 * to every keep length 0..n and compare; keep a random prefix; push the kept rows one pass
 * per row into the second GPU state and compare the two GPU states bitwise. */
static void test_compressor(uint32_t R, uint32_t d, uint32_t n_rot, int post, uint32_t d_nope, int64_t positions) {
    comp_pair p = comp_make(R, d, n_rot, post, d_nope, positions);
    const uint32_t w = p.cs.width;
    comp_err e = {.frontier_ok = 1}, erb = {.frontier_ok = 1};
    int invariant = 1, rollbacks = 0;
    for (int64_t pos = 0; pos < positions;) {
        int64_t n = 1 + rnd(17);
        if (n > positions - pos) n = positions - pos;
        float *u = rand_vec((size_t)n * w, -2, 2), *g = rand_vec((size_t)n * w, -3, 3);
        ds4rt_dbuf *cu = cbuf(u, (size_t)n * w * 4), *cg = cbuf(g, (size_t)n * w * 4);
        float *gu = gup(u, (size_t)n * w * 4), *gg = gup(g, (size_t)n * w * 4);
        ds4rt_dpass cp = cpass(pos, 0);
        void *gp = gpass(pos, 0);
        cok(co->comp_snapshot(cctx, &p.cs), "cpu snapshot");
        gk(ds4rt_gk_comp_snapshot(&p.gs, stream), "comp_snapshot");
        cok(co->comp_update(cctx, cp, n, &p.cd, &p.cs, ds4rt_f32(cu), ds4rt_f32(cg)), "cpu comp_update");
        gk(ds4rt_gk_comp_update(gp, n, &p.gd, &p.gs, gu, gg, stream), "comp_update");
        comp_compare(&p, &p.gs, &e);
        for (int64_t keep = 0; keep <= n; keep++) {
            cok(co->comp_rollback(cctx, &p.cd, &p.cs, pos, keep), "cpu comp_rollback");
            gk(ds4rt_gk_comp_rollback(&p.gd, &p.gs, pos, keep, stream), "comp_rollback");
            comp_compare(&p, &p.gs, &erb);
            rollbacks++;
        }
        const int64_t keep = 1 + rnd((uint32_t)n);
        cok(co->comp_rollback(cctx, &p.cd, &p.cs, pos, keep), "cpu comp_rollback");
        gk(ds4rt_gk_comp_rollback(&p.gd, &p.gs, pos, keep, stream), "comp_rollback");
        for (int64_t i = 0; i < keep; i++) {
            void *gpi = gpass(pos + i, 0);
            gk(ds4rt_gk_comp_update(gpi, 1, &p.gd, &p.g1, gu + (size_t)i * w, gg + (size_t)i * w, stream),
               "comp_update row");
            gk(ds4rt_gk_stream_sync(stream), "sync");
            ds4rt_gk_free(gpi);
        }
        float *a = gdown_f(p.gs.d_kv, p.fr), *b = gdown_f(p.g1.d_kv, p.fr);
        float *as = gdown_f(p.gs.d_score, p.fr), *bs = gdown_f(p.g1.d_score, p.fr);
        invariant &= same_bits(a, b, p.fr * 4) && same_bits(as, bs, p.fr * 4);
        free(a), free(b), free(as), free(bs);
        /* emitted rows: those of positions < pos + keep (the batched state also keeps rows a
         * rolled-back pass emitted, as the CPU does) */
        const size_t valid = (size_t)((pos + keep) / R) * d;
        float *oa = gdown_f(p.gs.d_out, p.outn), *ob = gdown_f(p.g1.d_out, p.outn);
        invariant &= same_bits(oa, ob, valid * 4);
        free(oa), free(ob);
        pos += keep;
        free(u), free(g);
        cfree(cu), cfree(cg), cfree(cp.buf);
        ds4rt_gk_free(gu), ds4rt_gk_free(gg), ds4rt_gk_free(gp);
    }
    char what[120];
    const int lowp = post == DS4RT_GK_COMP_POST_FP8 || post == DS4RT_GK_COMP_POST_HADAMARD_FP4;
    comp_err *es[2] = {&e, &erb};
    const char *label[2] = {"update", "rollback"};
    for (int k = 0; k < 2; k++) {
        const comp_err *x = es[k];
        snprintf(what, sizeof what, "R %u d %u %s %s: frontier bitwise", R, d, post_name(post), label[k]);
        report("compressor", what, x->frontier_ok, !x->frontier_ok, 0);
        int ok;
        double err, tol;
        if (SAME_LIBM) {
            ok = x->worst_ulps == 0;
            err = (double)x->worst_ulps;
            tol = 0;
            snprintf(what, sizeof what, "R %u d %u %s %s: rows bitwise (ulps)", R, d, post_name(post), label[k]);
        } else {
            ok = x->far * 1000 <= x->total && (x->far == 0 || (lowp && x->worst_rel <= 1.0 / 3));
            err = (double)x->far / (double)(x->total ? x->total : 1);
            tol = 1e-3;
            snprintf(what, sizeof what, "R %u d %u %s %s: rows, fraction not near", R, d, post_name(post),
                     label[k]);
        }
        report("compressor", what, ok, err, tol);
    }
    snprintf(what, sizeof what, "R %u d %u %s: %d rollbacks; batched == one row a pass", R, d, post_name(post),
             rollbacks);
    report("compressor", what, invariant, !invariant, 0);
    comp_free(&p);
}

/* ---- indexer --------------------------------------------------------------------------------- */

static void test_indexer(uint32_t Hi, uint32_t di, uint32_t topk, int64_t max_comp, int trials) {
    int ok = 1, invariant = 1, checked_big = 0;
    for (int trial = 0; trial < trials; trial++) {
        const int64_t n = 1 + rnd(17);
        /* even trials: rows see nearly max_comp rows (more than the top-k keeps); odd: anywhere */
        const int64_t most = max_comp - 40;
        const int64_t lo = trial % 2 == 0 ? 4 * most : 0;
        const int64_t pos0 = lo + rnd((uint32_t)(4 * max_comp - n - 3 - lo));
        float *rows = rand_vec((size_t)max_comp * di, -1, 1);
        for (int64_t r = 0; r < max_comp; r++) { /* ties: repeated rows and zero rows */
            uint32_t k = rnd(10);
            if (k == 0 && r > 0) memcpy(rows + r * di, rows + (r - 1 - rnd((uint32_t)r)) * di, di * 4);
            if (k == 1) memset(rows + r * di, 0, di * 4);
        }
        float *iq = rand_vec((size_t)n * Hi * di, -1, 1), *iw = rand_vec((size_t)n * Hi, -1, 1);
        ds4rt_hparams hp = {0};
        hp.idx_heads = Hi;
        hp.idx_dim = di;
        hp.idx_topk = topk;
        hp.idx_q_dim = Hi * di;
        ds4rt_dbuf *crows = cbuf(rows, (size_t)max_comp * di * 4), *ciq = cbuf(iq, (size_t)n * Hi * di * 4),
                   *ciw = cbuf(iw, (size_t)n * Hi * 4), *csel = cbuf(NULL, (size_t)n * topk * 4),
                   *cns = cbuf(NULL, (size_t)n * 4);
        ds4rt_dpass cp = cpass(pos0, 0);
        cok(co->indexer_topk(cctx, cp, &hp, n, ds4rt_f32(ciq), ds4rt_f32(ciw), ds4rt_f32(crows), ds4rt_i32(csel),
                             ds4rt_i32(cns)),
            "cpu indexer_topk");
        float *grows = gup(rows, (size_t)max_comp * di * 4), *giq = gup(iq, (size_t)n * Hi * di * 4),
              *giw = gup(iw, (size_t)n * Hi * 4);
        int32_t *gsel = gdev((size_t)n * topk * 4), *gns = gdev((size_t)n * 4);
        const size_t sb = ds4rt_gk_indexer_topk_scratch_bytes(n, max_comp);
        void *scratch = gdev(sb), *gp = gpass(pos0, 0);
        gk(ds4rt_gk_indexer_topk(gp, n, Hi, di, topk, max_comp, giq, giw, grows, gsel, gns, scratch, sb, stream),
           "indexer_topk");
        int32_t *sel = malloc((size_t)n * topk * 4), *ns = malloc((size_t)n * 4);
        gdown(sel, gsel, (size_t)n * topk * 4);
        gdown(ns, gns, (size_t)n * 4);
        const int32_t *csel_h = I_host(ds4rt_i32(csel)), *cns_h = I_host(ds4rt_i32(cns));
        for (int64_t i = 0; i < n; i++) {
            ok &= ns[i] == cns_h[i];
            if (ns[i] == cns_h[i] && ns[i] > 0)
                ok &= same_bits(sel + i * topk, csel_h + i * topk, (size_t)ns[i] * 4);
            if (cns_h[i] == (int32_t)topk && (pos0 + i + 1) / 4 > (int64_t)topk) checked_big = 1;
        }
        for (int64_t i = 0; i < n; i++) { /* row alone */
            void *gpi = gpass(pos0 + i, 0);
            gk(ds4rt_gk_indexer_topk(gpi, 1, Hi, di, topk, max_comp, giq + (size_t)i * Hi * di, giw + (size_t)i * Hi,
                                     grows, gsel, gns, scratch, sb, stream),
               "indexer_topk row");
            int32_t one_n, *one = malloc((size_t)topk * 4);
            gdown(&one_n, gns, 4);
            gdown(one, gsel, (size_t)topk * 4);
            invariant &= one_n == ns[i] && (one_n <= 0 || same_bits(one, sel + i * topk, (size_t)one_n * 4));
            free(one);
            ds4rt_gk_free(gpi);
        }
        free(rows), free(iq), free(iw), free(sel), free(ns);
        cfree(crows), cfree(ciq), cfree(ciw), cfree(csel), cfree(cns), cfree(cp.buf);
        ds4rt_gk_free(grows), ds4rt_gk_free(giq), ds4rt_gk_free(giw), ds4rt_gk_free(gsel), ds4rt_gk_free(gns);
        ds4rt_gk_free(scratch), ds4rt_gk_free(gp);
    }
    char what[120];
    snprintf(what, sizeof what, "Hi %u d_i %u top %u: selection == cpu (exact)%s", Hi, di, topk,
             checked_big ? "" : " [no row above top-k!]");
    report("indexer_topk", what, ok && checked_big, !ok, 0);
    snprintf(what, sizeof what, "Hi %u d_i %u top %u: row alone == row in batch", Hi, di, topk);
    report("indexer_topk", what, invariant, !invariant, 0);
}

/* A row that sees more rows than the scratch was sized for is marked, not silently cut. */
static void test_indexer_overflow(void) {
    const uint32_t Hi = 2, di = 32, topk = 4;
    const int64_t max_comp = 8;
    float *rows = rand_vec(64 * di, -1, 1), *iq = rand_vec(Hi * di, -1, 1), *iw = rand_vec(Hi, -1, 1);
    float *grows = gup(rows, 64 * di * 4), *giq = gup(iq, Hi * di * 4), *giw = gup(iw, Hi * 4);
    int32_t *gsel = gdev(topk * 4), *gns = gdev(4);
    const size_t sb = ds4rt_gk_indexer_topk_scratch_bytes(1, max_comp);
    void *scratch = gdev(sb), *gp = gpass(4 * 20, 0); /* 20 visible rows > 8 */
    gk(ds4rt_gk_indexer_topk(gp, 1, Hi, di, topk, max_comp, giq, giw, grows, gsel, gns, scratch, sb, stream),
       "indexer_topk overflow");
    int32_t ns;
    gdown(&ns, gns, 4);
    report("indexer_topk", "more visible rows than max_comp: n_sel = -1", ns == -1, ns, -1);
    free(rows), free(iq), free(iw);
    ds4rt_gk_free(grows), ds4rt_gk_free(giq), ds4rt_gk_free(giw), ds4rt_gk_free(gsel), ds4rt_gk_free(gns);
    ds4rt_gk_free(scratch), ds4rt_gk_free(gp);
}

/* ---- attention ----------------------------------------------------------------------------- */

/* Attention's tolerance: both sides accumulate in float32, the CPU key by key, the GPU per
 * split with online-softmax rescaling and a tree of partial dots, with the device's expf (2
 * ulp). Outputs are convex combinations of key values in [-1, 1]; the observed differences
 * are ~1e-7, the bound allows for thousands of keys. */
#define ATT_TOL 2e-5

typedef struct attn_case {
    int64_t n, pos0, base;
    uint32_t heads, dim, window, ring_cap;
    int block;
    uint32_t comp_ratio;
    int selected;
    int64_t n_comp; /* compressed rows held */
} attn_case;

static void run_attention(const attn_case *c, const char *label) {
    const uint32_t H = c->heads, d = c->dim;
    const int64_t n = c->n;
    const size_t qn = (size_t)n * H * d, stride = 64;
    float *q = rand_vec(qn, -1, 1), *ring = rand_vec((size_t)c->ring_cap * d, -1, 1);
    float *brows = rand_vec((size_t)n * d, -1, 1), *comp = rand_vec((size_t)(c->n_comp ? c->n_comp : 1) * d, -1, 1);
    float *sinks = rand_vec(H, -1, 2);
    int32_t *sel = calloc((size_t)n * stride, 4), *ns = calloc((size_t)n, 4);
    for (int64_t i = 0; i < n; i++) { /* an ascending random subset of the visible rows */
        int64_t vis = c->comp_ratio ? (c->pos0 + i + 1) / c->comp_ratio : 0;
        if (vis > c->n_comp) vis = c->n_comp;
        int32_t m = 0;
        for (int64_t r = 0; r < vis && m < (int32_t)stride; r++)
            if (rnd(3) == 0) sel[i * stride + m++] = (int32_t)r;
        ns[i] = m;
    }
    ds4rt_dbuf *cq = cbuf(q, qn * 4), *cout = cbuf(NULL, qn * 4), *cring = cbuf(ring, (size_t)c->ring_cap * d * 4),
               *cb = cbuf(brows, (size_t)n * d * 4), *cc = cbuf(comp, (size_t)(c->n_comp ? c->n_comp : 1) * d * 4),
               *csk = cbuf(sinks, H * 4), *csel = cbuf(sel, (size_t)n * stride * 4), *cns = cbuf(ns, (size_t)n * 4);
    ds4rt_attn_keys ck = {.ring = ds4rt_f32(cring), .ring_cap = c->ring_cap, .window = c->window, .block = c->block,
                          .block_rows = ds4rt_f32(cb), .comp_ratio = c->comp_ratio, .comp = ds4rt_f32(cc),
                          .sel = c->selected ? ds4rt_i32(csel) : (ds4rt_di32){0},
                          .n_sel = c->selected ? ds4rt_i32(cns) : (ds4rt_di32){0}, .sel_stride = (uint32_t)stride};
    ds4rt_dpass cp = cpass(c->pos0, c->base);
    cok(co->attention(cctx, cp, n, H, d, &ck, ds4rt_f32(csk), ds4rt_f32(cq), ds4rt_f32(cout), NULL), "cpu attention");

    float *gq = gup(q, qn * 4), *gout = gdev(qn * 4), *gring = gup(ring, (size_t)c->ring_cap * d * 4);
    float *gb = gup(brows, (size_t)n * d * 4), *gc = gup(comp, (size_t)(c->n_comp ? c->n_comp : 1) * d * 4);
    float *gsk = gup(sinks, H * 4);
    int32_t *gsel = gup(sel, (size_t)n * stride * 4), *gns = gup(ns, (size_t)n * 4);
    ds4rt_gk_attn_keys gkk = {.d_ring = gring, .ring_cap = c->ring_cap, .window = c->window, .block = c->block,
                              .d_block_rows = gb, .comp_ratio = c->comp_ratio, .d_comp = gc,
                              .d_sel = c->selected ? gsel : NULL, .d_n_sel = c->selected ? gns : NULL,
                              .sel_stride = (uint32_t)stride};
    const size_t sb = ds4rt_gk_attention_scratch_bytes(n, H, d);
    void *scratch = gdev(sb), *gp = gpass(c->pos0, c->base);
    uint32_t *tickets = gdev((size_t)n * H * 4); /* zero; every call leaves them zero */
    gk(ds4rt_gk_attention(gp, n, H, d, &gkk, gsk, gq, gout, NULL, scratch, sb, tickets, stream), "attention");
    float *res = gdown_f(gout, qn);
    const double err = max_abs(res, cf(cout), qn);
    char what[140];
    snprintf(what, sizeof what, "%s: vs cpu, max |diff|", label);
    report("attention", what, err <= ATT_TOL, err, ATT_TOL);

    gk(ds4rt_gk_attention(gp, n, H, d, &gkk, gsk, gq, gq, NULL, scratch, sb, tickets, stream), "attention in place");
    float *inplace = gdown_f(gq, qn);
    int alias_ok = same_bits(inplace, res, qn * 4);
    if (!c->block) { /* batch invariance: in block mode a row's keys are the whole block */
        gk(ds4rt_gk_memcpy_h2d(gq, q, qn * 4, stream), "upload");
        int invariant = 1;
        for (int64_t i = 0; i < n; i++) {
            void *gpi = gpass(c->pos0 + i, c->base);
            ds4rt_gk_attn_keys one = gkk;
            if (c->selected) {
                one.d_sel = gsel + i * stride;
                one.d_n_sel = gns + i;
            }
            gk(ds4rt_gk_attention(gpi, 1, H, d, &one, gsk, gq + (size_t)i * H * d, gout + (size_t)i * H * d, NULL, scratch,
                                  sb, tickets, stream),
               "attention row");
            gk(ds4rt_gk_stream_sync(stream), "sync");
            ds4rt_gk_free(gpi);
        }
        float *alone = gdown_f(gout, qn);
        invariant = same_bits(alone, res, qn * 4);
        snprintf(what, sizeof what, "%s: row alone == row in batch", label);
        report("attention", what, invariant, !invariant, 0);
        free(alone);
    }
    snprintf(what, sizeof what, "%s: out aliasing q", label);
    report("attention", what, alias_ok, !alias_ok, 0);
    free(q), free(ring), free(brows), free(comp), free(sinks), free(sel), free(ns), free(res), free(inplace);
    cfree(cq), cfree(cout), cfree(cring), cfree(cb), cfree(cc), cfree(csk), cfree(csel), cfree(cns), cfree(cp.buf);
    ds4rt_gk_free(gq), ds4rt_gk_free(gout), ds4rt_gk_free(gring), ds4rt_gk_free(gb), ds4rt_gk_free(gc);
    ds4rt_gk_free(gsk), ds4rt_gk_free(gsel), ds4rt_gk_free(gns), ds4rt_gk_free(scratch), ds4rt_gk_free(gp);
    ds4rt_gk_free(tickets);
}

static void test_attention(void) {
    /* 512 and 256: the one-read-per-key value path (dim a multiple of the block); the others
     * the general one; 640: two slices of the key tile */
    static const uint32_t dims[] = {32, 96, 512, 640, 256, 384};
    for (int trial = 0; trial < 14; trial++) {
        attn_case c = {0};
        c.n = 1 + rnd(17);
        c.heads = 1 + rnd(trial % 3 == 0 ? 17 : 6);
        c.dim = dims[trial % 6];
        c.window = 1 + rnd(40);
        c.ring_cap = c.window + 17 + rnd(5);
        c.pos0 = rnd(3) == 0 ? rnd(c.window) : 200 + rnd(4000); /* ring wrap for most */
        c.base = trial % 5 == 4 ? c.pos0 - rnd(4) : 0;
        if (c.base < 0) c.base = 0;
        c.block = trial % 4 == 1;
        const int kind = trial % 3; /* 0: no compressed rows, 1: all visible, 2: selected */
        c.comp_ratio = kind == 0 ? 0 : (rnd(2) ? 4 : 128);
        c.selected = kind == 2;
        c.n_comp = c.comp_ratio ? (c.pos0 + c.n) / c.comp_ratio + 1 : 0;
        char label[120];
        snprintf(label, sizeof label, "n %lld H %u d %u W %u pos0 %lld%s%s%s", (long long)c.n, c.heads, c.dim,
                 c.window, (long long)c.pos0, c.block ? " block" : "", c.comp_ratio ? (c.selected ? " sel" : " comp") : "",
                 c.base ? " base" : "");
        run_attention(&c, label);
    }
    /* the real width: 64 heads of 512, window 128, a thousand compressed rows */
    attn_case real = {.n = 2, .pos0 = 128 * 1000 + 5, .heads = 64, .dim = 512, .window = 128, .ring_cap = 160,
                      .comp_ratio = 128, .n_comp = 1001};
    run_attention(&real, "real width, 1000 compressed rows");
}

/* ---- graph replay (CUDA): a captured pass stays valid at another position ------------------- */

#if defined(DS4RT_WITH_CUDA)
#include <cuda_runtime.h>

typedef struct graph_case {
    void *pass;
    float *x, *ring, *out, *iq, *iw, *rows, *sinks, *u, *g;
    int32_t *sel, *ns;
    void *ascratch, *iscratch;
    uint32_t *tickets;
    size_t asb, isb;
    ds4rt_gk_comp_desc cd;
    ds4rt_gk_comp_state cs;
} graph_case;

enum { G_N = 3, G_H = 4, G_D = 128, G_CAP = 64, G_W = 16, G_HI = 4, G_DI = 32, G_TOP = 8, G_COMP = 400 };

/* One small pass: RoPE, ring store, compressor push, indexer, attention over ring + selected
 * compressed rows. Everything it reads that changes per pass is in the pass block. */
static void graph_pass(graph_case *c) {
    const ds4rt_gk_rope_params rp = {.n_rot = 32, .base = 10000, .yarn = 0};
    gk(ds4rt_gk_rope(c->pass, G_N, 1, G_D, &rp, 1, c->x, stream), "rope");
    gk(ds4rt_gk_kv_store(c->pass, G_N, G_D, c->x, c->ring, G_CAP, stream), "kv_store");
    gk(ds4rt_gk_comp_update(c->pass, G_N, &c->cd, &c->cs, c->u, c->g, stream), "comp_update");
    gk(ds4rt_gk_indexer_topk(c->pass, G_N, G_HI, G_DI, G_TOP, G_COMP, c->iq, c->iw, c->rows, c->sel, c->ns,
                             c->iscratch, c->isb, stream),
       "indexer_topk");
    const ds4rt_gk_attn_keys k = {.d_ring = c->ring, .ring_cap = G_CAP, .window = G_W, .comp_ratio = 4,
                                  .d_comp = c->rows, .d_sel = c->sel, .d_n_sel = c->ns, .sel_stride = G_TOP};
    gk(ds4rt_gk_attention(c->pass, G_N, G_H, G_D, &k, c->sinks, c->ring, c->out, NULL, c->ascratch, c->asb, c->tickets,
                          stream),
       "attention");
}

/* Sets the inputs and state to the same start, the pass block to pos0; returns the outputs. */
static float *graph_run(graph_case *c, const float *x0, const float *ring0, int64_t pos0, int use_graph,
                        cudaGraphExec_t exec) {
    int64_t hdr[2] = {pos0, 0};
    gk(ds4rt_gk_memcpy_h2d(c->pass, hdr, sizeof hdr, stream), "pass");
    gk(ds4rt_gk_memcpy_h2d(c->x, x0, (size_t)G_N * G_D * 4, stream), "x");
    gk(ds4rt_gk_memcpy_h2d(c->ring, ring0, (size_t)G_CAP * G_D * 4, stream), "ring");
    gk(ds4rt_gk_comp_reset(&c->cs, stream), "comp_reset");
    if (use_graph) gk(cudaGraphLaunch(exec, (cudaStream_t)stream) == cudaSuccess ? 0 : 4, "graph launch");
    else graph_pass(c);
    const size_t on = (size_t)G_N * G_H * G_D, cn = (size_t)c->cs.cap * c->cd.dim;
    float *res = malloc((on + cn + (size_t)G_N * G_TOP) * sizeof *res);
    gdown(res, c->out, on * 4);
    gdown(res + on, c->cs.d_out, cn * 4);
    gdown(res + on + cn, c->sel, (size_t)G_N * G_TOP * 4);
    return res;
}

static void test_graph_replay(void) {
    graph_case c;
    memset(&c, 0, sizeof c);
    float *x0 = rand_vec((size_t)G_N * G_D, -1, 1), *ring0 = rand_vec((size_t)G_CAP * G_D, -1, 1);
    c.pass = gdev(16);
    c.x = gdev((size_t)G_N * G_D * 4);
    c.ring = gdev((size_t)G_CAP * G_D * 4);
    c.out = gdev((size_t)G_N * G_H * G_D * 4);
    float *h;
    c.iq = gup(h = rand_vec((size_t)G_N * G_HI * G_DI, -1, 1), (size_t)G_N * G_HI * G_DI * 4), free(h);
    c.iw = gup(h = rand_vec((size_t)G_N * G_HI, -1, 1), (size_t)G_N * G_HI * 4), free(h);
    c.rows = gup(h = rand_vec((size_t)G_COMP * G_D, -1, 1), (size_t)G_COMP * G_D * 4), free(h);
    c.sinks = gup(h = rand_vec(G_H, -1, 1), G_H * 4), free(h);
    c.u = gup(h = rand_vec((size_t)G_N * 2 * G_DI, -1, 1), (size_t)G_N * 2 * G_DI * 4), free(h);
    c.g = gup(h = rand_vec((size_t)G_N * 2 * G_DI, -1, 1), (size_t)G_N * 2 * G_DI * 4), free(h);
    c.sel = gdev((size_t)G_N * G_TOP * 4);
    c.ns = gdev((size_t)G_N * 4);
    c.asb = ds4rt_gk_attention_scratch_bytes(G_N, G_H, G_D);
    c.isb = ds4rt_gk_indexer_topk_scratch_bytes(G_N, G_COMP);
    c.ascratch = gdev(c.asb);
    c.tickets = gdev((size_t)G_N * G_H * 4);
    c.iscratch = gdev(c.isb);
    c.cd = (ds4rt_gk_comp_desc){.ratio = 4, .dim = G_DI, .d_ape = gup(h = rand_vec(4 * 2 * G_DI, -1, 1), 4 * 2 * G_DI * 4),
                                .d_norm = NULL, .rms_eps = 1e-6f, .rope = {.n_rot = 16, .base = 160000, .yarn = 1,
                                .yarn_scale = 1.0 / 16, .yarn_lo = 2, .yarn_hi = 6},
                                .post = DS4RT_GK_COMP_POST_HADAMARD_FP4};
    free(h);
    gk_state(&c.cs, 8, 2 * G_DI, 400, G_DI);
    /* the graph is captured once, with whatever the pass block holds */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int ok = cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        graph_pass(&c);
        ok = cudaStreamEndCapture((cudaStream_t)stream, &graph) == cudaSuccess &&
             cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    }
    int same = ok;
    static const int64_t positions[] = {21, 1000, 1499, 63};
    for (int p = 0; ok && p < 4; p++) {
        float *direct = graph_run(&c, x0, ring0, positions[p], 0, exec);
        float *replay = graph_run(&c, x0, ring0, positions[p], 1, exec);
        const size_t count = (size_t)G_N * G_H * G_D + (size_t)c.cs.cap * G_DI + (size_t)G_N * G_TOP;
        same &= same_bits(direct, replay, count * 4);
        free(direct), free(replay);
    }
    if (ok) {
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    }
    report("graph", "one capture replayed at 4 positions == direct launches", same, !same, 0);
    free(x0), free(ring0);
}
#endif

int main(int argc, char **argv) {
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: test_attn [--seed N]\n");
            return 2;
        }
    }
    rng_state = seed;
    int devices = 0;
    if (ds4rt_gk_device_count(&devices) != DS4RT_GK_OK || devices == 0) {
        printf("test_attn: no GPU device (%s)\n", ds4rt_gk_last_error());
        return 77;
    }
    gk(ds4rt_gk_stream_create(&stream), "stream");
    cok(ds4rt_backend_open(DS4RT_BKIND_CPU, 0, 2, &cbe), "open cpu backend");
    co = ds4rt_backend_get_ops(cbe);
    cok(co->ctx_create(cbe, 2, &cctx), "cpu context");
    ds4rt_hparams hp = {0};
    hp.n_embd = 64;
    hp.hc = 1;
    hp.head_dim = 4096;
    hp.idx_dim = 128;
    hp.rope_dim = 256;
    hp.n_expert_used = 1;
    hp.n_expert = 1;
    hp.expert_ff = 1;
    ds4rt_limits lim = {.max_rows = 17, .max_keys = 8192, .max_comp = 20000};
    cok(co->ctx_reserve(cctx, &hp, &lim), "cpu reserve");

    test_rms_norm();
    test_rope();
    test_lowp(0);
    test_lowp(1);
    test_hadamard();
    test_kv_store();
    test_compressor(4, 512, 64, DS4RT_GK_COMP_POST_FP8, 448, 70);
    test_compressor(128, 512, 64, DS4RT_GK_COMP_POST_FP8, 448, 300);
    test_compressor(4, 128, 64, DS4RT_GK_COMP_POST_HADAMARD_FP4, 0, 60);
    test_compressor(4, 128, 64, DS4RT_GK_COMP_POST_HADAMARD, 0, 40);
    test_compressor(8, 96, 32, DS4RT_GK_COMP_POST_NONE, 0, 60);
    test_indexer(4, 32, 8, 200, 6);
    test_indexer(16, 256, 16, 300, 4); /* two slices of d_i */
    test_indexer(64, 128, 512, 1200, 2);
    test_indexer(2, 32, 64, 17000, 2); /* more tiles than the score kernel's grid */
    test_indexer_overflow();
    test_attention();
#if defined(DS4RT_WITH_CUDA)
    test_graph_replay();
#endif

    co->ctx_free(cctx);
    ds4rt_backend_close(cbe);
    ds4rt_gk_stream_destroy(stream);
    printf("test_attn: %d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
