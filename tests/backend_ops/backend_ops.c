/*
 * backend_ops.c - op conformance of every compiled-in backend (in the spirit of llama.cpp's
 * test-backend-ops): each op of the table (src/backend/backend.h) runs on random data
 *   1. against an independent float64 reference written here (the CPU backend's acceptance),
 *   2. against the CPU backend on the same inputs (how a GPU kernel is accepted: bitwise where
 *      the op is exact, within the op's tolerance otherwise), and
 *   3. for batch invariance: every row of an n-row call is bitwise the row computed alone.
 * Matrix ops run for every weight type the backend says it supports.
 *
 * With --refusal TARGET.gguf it checks the load-time capability check instead: for each op, a
 * CPU backend that reports the op missing must refuse to bind the model (or to enable DSpark)
 * with DS4RT_ERR_BACKEND naming the op.
 *
 * Usage: backend_ops [--seed N] [--backend NAME] [--op NAME]. Prints one line per check,
 * then "backend-ops: N checks, M failed"; exit status 1 if any failed. tests/meson.build defines
 * it; tests/test_backend_ops.py builds it (tests/meson_programs.py) and runs it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "ds4rt.h"
#include "ds4rt_testing.h"
#include "dspark.h"
#include "target.h"
#include "matmul.h"
#include "qtypes.h"

/* ---- harness ------------------------------------------------------------------------------- */

static int n_checks, n_failed;
static const char *only_op;
static bool quiet; /* the CPU's reference run: its checks are reported once, in its own run */

typedef struct env env;
static const env *under_test; /* whose supports() picks the weight types of both runs */

static void report(const char *backend, const char *op, const char *what, bool ok, double err, double tol) {
    if (quiet) return;
    n_checks++;
    if (!ok) n_failed++;
    printf("%-4s %-6s %-18s %-34s err %.3g tol %.3g\n", ok ? "ok" : "FAIL", backend, op, what, err, tol);
}

static uint64_t rng_state;
static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next_u64() >> 11) * 0x1.0p-53); }
static void fill(float *v, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) v[i] = uniform(lo, hi);
}

/* A backend under test and the CPU backend it is compared with. */
struct env {
    ds4rt_backend *be;
    ds4rt_bctx *ctx;
    const ds4rt_backend_ops *o;
    const char *name;
};

static void die(const char *what) {
    fprintf(stderr, "backend-ops: %s: %s\n", what, ds4rt_last_error());
    exit(2);
}

static ds4rt_dbuf *buf_from(env *e, const void *host, size_t bytes) {
    ds4rt_dbuf *b;
    if (e->o->alloc(e->be, DS4RT_MEM_SCRATCH, bytes ? bytes : 4, &b) != DS4RT_OK) die("alloc");
    if (host && bytes && e->o->upload(e->ctx, b, 0, host, bytes) != DS4RT_OK) die("upload");
    return b;
}
/* Every output read back is also recorded on the run's tape, so a backend's run can be held
 * against the CPU's run of the same inputs afterwards (same seed, same code path). */
typedef struct tape_entry {
    const char *op;
    bool ints;
    size_t bytes;
    uint8_t *data;
} tape_entry;
typedef struct tape {
    tape_entry *e;
    size_t n, cap;
} tape;
static tape *cur_tape;
static const char *cur_op = "?";

static void record(const void *host, size_t bytes, bool ints) {
    if (cur_tape == NULL) return;
    if (cur_tape->n == cur_tape->cap) {
        cur_tape->cap = cur_tape->cap ? 2 * cur_tape->cap : 256;
        cur_tape->e = realloc(cur_tape->e, cur_tape->cap * sizeof *cur_tape->e);
    }
    tape_entry *t = &cur_tape->e[cur_tape->n++];
    *t = (tape_entry){.op = cur_op, .ints = ints, .bytes = bytes, .data = malloc(bytes ? bytes : 1)};
    memcpy(t->data, host, bytes);
}

static void fetch(env *e, ds4rt_dbuf *b, void *host, size_t bytes) {
    if (e->o->download(e->ctx, b, 0, host, bytes) != DS4RT_OK) die("download");
    record(host, bytes, false);
}
static void fetch_i(env *e, ds4rt_dbuf *b, void *host, size_t bytes) {
    if (e->o->download(e->ctx, b, 0, host, bytes) != DS4RT_OK) die("download");
    record(host, bytes, true);
}
static void drop(env *e, ds4rt_dbuf *b) { e->o->release(e->be, b); }

static ds4rt_dpass pass_block(env *e, int64_t pos0, int64_t base, const int32_t *tokens, int64_t n) {
    ds4rt_dbuf *b;
    if (e->o->alloc(e->be, DS4RT_MEM_SCRATCH, ds4rt_pass_bytes(n), &b) != DS4RT_OK) die("alloc pass");
    ds4rt_dpass in = {b};
    if (ds4rt_pass_upload(e->ctx, in, pos0, base, tokens, n) != DS4RT_OK) die("pass upload");
    return in;
}

#define CHECK(e, call)                                                                       \
    do {                                                                                     \
        if ((call) != DS4RT_OK) die(#call);                                                  \
    } while (0)

/* max |got - ref| / (|ref| + scale) */
static double rel_err(const float *got, const double *ref, size_t n, double scale) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs(ref[i]) + scale);
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}
static bool same_bits(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

static const uint32_t TYPES[];
static const size_t N_TYPES;

/* Whether the backend under test runs `op` for some type (a GPU build's backend before all of
 * its kernel families are in: the ops it lacks are reported as skipped, in both runs alike). */
static bool op_supported(const char *op) {
    for (int o = 0; o < DS4RT_OP_COUNT; o++) {
        if (strcmp(ds4rt_op_name((ds4rt_op)o), op) != 0) continue;
        for (size_t t = 0; t < N_TYPES; t++)
            if (under_test->o->supports(under_test->be, (ds4rt_op)o, TYPES[t])) return true;
        return false;
    }
    return true;
}

static bool want(const char *op) {
    if (only_op != NULL && strcmp(only_op, op) != 0) return false;
    if (!op_supported(op)) {
        if (!quiet) printf("skip %-6s %-18s not supported by this build\n", under_test->name, op);
        return false;
    }
    cur_op = op;
    return true;
}

/* Shapes of a small DeepSeek V4 block (every dimension from here, as from GGUF). */
static ds4rt_hparams small_hp(uint32_t *ratio) {
    ds4rt_hparams hp = {0};
    hp.n_layer = 1;
    hp.n_embd = 64;
    hp.n_vocab = 50;
    hp.n_head = 4;
    hp.head_dim = 96; /* d_nope 64: the FP8 block */
    hp.rope_dim = 32;
    hp.q_lora = 32;
    hp.o_groups = 2;
    hp.o_lora = 16;
    hp.window = 5;
    hp.idx_heads = 2;
    hp.idx_dim = 32;
    hp.idx_topk = 3;
    hp.n_expert = 6;
    hp.n_expert_used = 2;
    hp.expert_ff = 32;
    hp.n_shared = 1;
    hp.expert_scale = 1.5f;
    hp.expert_norm = true;
    hp.hc = 4;
    hp.sinkhorn_iters = 20;
    hp.hc_eps = 1e-6f;
    hp.rms_eps = 1e-6f;
    hp.ratio = ratio;
    hp.d_nope = hp.head_dim - hp.rope_dim;
    hp.q_dim = hp.n_head * hp.head_dim;
    hp.group_dim = (hp.n_head / hp.o_groups) * hp.head_dim;
    hp.o_low_dim = hp.o_groups * hp.o_lora;
    hp.hc_dim = hp.hc * hp.n_embd;
    hp.hc_mix = (2 + hp.hc) * hp.hc;
    hp.idx_q_dim = hp.idx_heads * hp.idx_dim;
    hp.shared_ff = hp.expert_ff * hp.n_shared;
    return hp;
}

static const ds4rt_rope ROPE = {.n_rot = 32, .base = 10000.0, .yarn = false, .yarn_scale = 1.0};

/* ---- float64 references ------------------------------------------------------------------- */

static void ref_rms(const float *x, uint32_t n, const float *w, double eps, double *out) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++) out[i] = x[i] * inv * (w ? w[i] : 1.0);
}

static void ref_rope(double *v, uint32_t dim, const ds4rt_rope *r, int64_t pos, int sign) {
    double *tail = v + dim - r->n_rot;
    for (uint32_t k = 0; k < r->n_rot / 2; k++) {
        double th = (double)pos * pow(r->base, -2.0 * k / r->n_rot), c = cos(th), s = sign * sin(th);
        double a = tail[2 * k], b = tail[2 * k + 1];
        tail[2 * k] = a * c - b * s;
        tail[2 * k + 1] = a * s + b * c;
    }
}

/* The E4M3 / E2M1 grids, enumerated (not computed the way the CPU computes them). */
static double nearest_on_grid(double x, const double *grid, int n) {
    double a = fabs(x), best = grid[0];
    int bi = 0;
    for (int i = 1; i < n; i++)
        if (fabs(grid[i] - a) < fabs(best - a) || (fabs(grid[i] - a) == fabs(best - a) && (i % 2 == 0) && (bi % 2)))
            best = grid[i], bi = i;
    return copysign(best, x);
}
static int e4m3_grid(double *g) {
    int n = 0;
    for (int e = 0; e < 16; e++)
        for (int m = 0; m < 8; m++) {
            double v = e == 0 ? m / 8.0 * ldexp(1, -6) : (1 + m / 8.0) * ldexp(1, e - 7);
            if (v <= 448) g[n++] = v;
        }
    return n;
}
static int e2m1_grid(double *g) {
    static const double v[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    memcpy(g, v, sizeof v);
    return 8;
}
static void ref_block_round(double *v, uint32_t n, uint32_t block, double maxv, double amin, const double *grid,
                            int ng) {
    for (uint32_t b = 0; b < n; b += block) {
        double amax = 0;
        for (uint32_t i = 0; i < block; i++) amax = fmax(amax, fabs(v[b + i]));
        amax = fmax(amax, amin);
        double s = ldexp(1, (int)ceil(log2(amax / maxv)));
        for (uint32_t i = 0; i < block; i++) {
            double y = fmax(-maxv, fmin(maxv, v[b + i] / s));
            v[b + i] = nearest_on_grid(y, grid, ng) * s;
        }
    }
}

static void ref_hadamard(double *v, uint32_t n) {
    for (uint32_t h = 1; h < n; h *= 2)
        for (uint32_t i = 0; i < n; i += 2 * h)
            for (uint32_t j = i; j < i + h; j++) {
                double a = v[j], b = v[j + h];
                v[j] = a + b;
                v[j + h] = a - b;
            }
    for (uint32_t i = 0; i < n; i++) v[i] /= sqrt((double)n);
}

/* ---- stage-timer marks ------------------------------------------------------------------------- */

/* mark / mark_ms on a fresh context: an interval around real work is positive and ordered,
 * the reverse interval is not, and an unmade mark or a slot out of range is an error, never
 * a read of garbage. */
static void test_marks(env *e) {
    if (only_op != NULL && strcmp(only_op, "marks") != 0) return;
    ds4rt_bctx *ctx;
    if (e->o->ctx_create(e->be, 1, &ctx) != DS4RT_OK) die("ctx_create");
    double ms = -1;
    report(e->name, "marks", "interval before any mark fails",
           e->o->mark_ms(ctx, 0, 1, &ms) == DS4RT_ERR_INTERNAL && ms == -1, 0, 0);
    report(e->name, "marks", "slot out of range fails", e->o->mark(ctx, DS4RT_MARK_SLOTS) == DS4RT_ERR_INTERNAL, 0,
           0);
    enum { W = 4096, N = 64 };
    static float x[N * W];
    fill(x, N * W, -1, 1);
    ds4rt_dbuf *bx = buf_from(e, x, sizeof x);
    CHECK(e, e->o->mark(ctx, 0));
    for (int k = 0; k < 8; k++) CHECK(e, e->o->rms_norm(ctx, N, W, ds4rt_f32(bx), (ds4rt_df32){0}, 1e-6f, ds4rt_f32(bx)));
    CHECK(e, e->o->mark(ctx, 1));
    CHECK(e, e->o->mark(ctx, 2));
    double work = 0, idle = -1, back = 1;
    CHECK(e, e->o->mark_ms(ctx, 0, 1, &work));
    CHECK(e, e->o->mark_ms(ctx, 1, 2, &idle));
    CHECK(e, e->o->mark_ms(ctx, 1, 0, &back));
    report(e->name, "marks", "interval around work > 0", work > 0, work, 0);
    report(e->name, "marks", "intervals ordered", idle >= 0 && back <= 0 && idle <= work, idle, work);
    drop(e, bx);
    e->o->ctx_free(ctx);
}

/* ---- row ops -------------------------------------------------------------------------------- */

/* norm_rope: bitwise rms_norm then rope on the same backend, near the float64 reference, and a
 * row alone == the row in the batch. The query form (6 heads: a group of 4 and one of 2 on the
 * CPU, no weight) and the key form (1 head, a weight) at a width past one element per thread of
 * the GPU's one-launch kernel (1040 > 1024), where it takes the two launches. */
static void test_norm_rope(env *e) {
    static const struct {
        uint32_t heads, dim;
        bool weight;
    } C[] = {{6, 48, false}, {1, 96, true}, {1, 1040, true}};
    enum { N = 5, MAXW = 6 * 48 > 1040 ? 6 * 48 : 1040 };
    static float x[N * MAXW], w[1040], got[N * MAXW], two[N * MAXW], alone[MAXW];
    static double ref[N * MAXW];
    ds4rt_rope r = ROPE;
    r.n_rot = 16;
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        const uint32_t heads = C[c].heads, dim = C[c].dim, rw = heads * dim;
        char what[96];
        snprintf(what, sizeof what, "%u heads of %u%s", heads, dim, C[c].weight ? ", weight" : "");
        fill(x, (size_t)N * rw, -3, 3);
        fill(w, dim, 0.5f, 1.5f);
        ds4rt_dpass in = pass_block(e, 37, 0, NULL, 0), in3 = pass_block(e, 40, 0, NULL, 0);
        ds4rt_dbuf *bx = buf_from(e, x, (size_t)N * rw * 4), *by = buf_from(e, x, (size_t)N * rw * 4);
        ds4rt_dbuf *bw = buf_from(e, w, sizeof w), *b3 = buf_from(e, x + 3 * rw, (size_t)rw * 4);
        const ds4rt_df32 dw = C[c].weight ? ds4rt_f32(bw) : (ds4rt_df32){0};
        CHECK(e, e->o->norm_rope(e->ctx, in, N, heads, dim, dw, 1e-6f, &r, ds4rt_f32(bx)));
        fetch(e, bx, got, (size_t)N * rw * 4);
        CHECK(e, e->o->rms_norm(e->ctx, N * heads, dim, ds4rt_f32(by), dw, 1e-6f, ds4rt_f32(by)));
        CHECK(e, e->o->rope(e->ctx, in, N, heads, dim, &r, +1, ds4rt_f32(by)));
        fetch(e, by, two, (size_t)N * rw * 4);
        report(e->name, "norm_rope", what, same_bits(got, two, (size_t)N * rw * 4), 0, 0);
        for (int64_t i = 0; i < N; i++)
            for (uint32_t h = 0; h < heads; h++) {
                const size_t o = ((size_t)i * heads + h) * dim;
                ref_rms(x + o, dim, C[c].weight ? w : NULL, 1e-6, ref + o);
                ref_rope(ref + o, dim, &r, 37 + i, +1);
            }
        const double err = rel_err(got, ref, (size_t)N * rw, 1e-3);
        report(e->name, "norm_rope", "vs float64 at pos0 + i", err < 1e-5, err, 1e-5);
        CHECK(e, e->o->norm_rope(e->ctx, in3, 1, heads, dim, dw, 1e-6f, &r, ds4rt_f32(b3)));
        fetch(e, b3, alone, (size_t)rw * 4);
        report(e->name, "norm_rope", "batch invariance", same_bits(alone, got + 3 * rw, (size_t)rw * 4), 0, 0);
        drop(e, bx), drop(e, by), drop(e, bw), drop(e, b3), drop(e, in.buf), drop(e, in3.buf);
    }
}

static void test_rows(env *e, env *cpu) {
    const int64_t n = 5;
    const uint32_t W = 96;
    float x[5 * 96], w[96], got[5 * 96], alone[96];
    double ref[5 * 96];
    fill(x, n * W, -3, 3);
    fill(w, W, 0.5f, 1.5f);

    if (want("rms_norm")) {
        ds4rt_dbuf *bx = buf_from(e, x, sizeof x), *bw = buf_from(e, w, sizeof w), *bo = buf_from(e, NULL, sizeof x);
        CHECK(e, e->o->rms_norm(e->ctx, n, W, ds4rt_f32(bx), ds4rt_f32(bw), 1e-6f, ds4rt_f32(bo)));
        fetch(e, bo, got, sizeof got);
        for (int64_t r = 0; r < n; r++) ref_rms(x + r * W, W, w, 1e-6, ref + r * W);
        double err = rel_err(got, ref, n * W, 1e-3);
        report(e->name, "rms_norm", "vs float64", err < 1e-5, err, 1e-5);
        CHECK(e, e->o->rms_norm(e->ctx, 1, W, ds4rt_f32_at(ds4rt_f32(bx), 3 * W), ds4rt_f32(bw), 1e-6f, ds4rt_f32(bo)));
        fetch(e, bo, alone, sizeof alone);
        report(e->name, "rms_norm", "batch invariance", same_bits(alone, got + 3 * W, sizeof alone), 0, 0);
        drop(e, bx), drop(e, bw), drop(e, bo);
    }
    if (want("rope")) {
        const uint32_t heads = 2, dim = 48;
        ds4rt_rope r = ROPE;
        r.n_rot = 16;
        ds4rt_dpass in = pass_block(e, 37, 0, NULL, 0);
        ds4rt_dbuf *bx = buf_from(e, x, sizeof x);
        CHECK(e, e->o->rope(e->ctx, in, n, heads, dim, &r, +1, ds4rt_f32(bx)));
        fetch(e, bx, got, sizeof got);
        for (int64_t i = 0; i < n; i++)
            for (uint32_t h = 0; h < heads; h++) {
                double *v = ref + (i * heads + h) * dim;
                for (uint32_t j = 0; j < dim; j++) v[j] = x[(i * heads + h) * dim + j];
                ref_rope(v, dim, &r, 37 + i, +1);
            }
        double err = rel_err(got, ref, n * heads * dim, 1e-3);
        report(e->name, "rope", "vs float64 at pos0 + i", err < 1e-6, err, 1e-6);
        CHECK(e, e->o->rope(e->ctx, in, n, heads, dim, &r, -1, ds4rt_f32(bx)));
        fetch(e, bx, got, sizeof got);
        for (size_t i = 0; i < n * heads * dim; i++) ref[i] = x[i];
        err = rel_err(got, ref, n * heads * dim, 1e-3);
        report(e->name, "rope", "inverse undoes forward", err < 1e-6, err, 1e-6);
        drop(e, bx), drop(e, in.buf);
    }
    if (want("norm_rope")) test_norm_rope(e);
    if (want("fp8_round") || want("fp4_round") || want("hadamard")) {
        double g8[256], g4[8];
        int n8 = e4m3_grid(g8), n4 = e2m1_grid(g4);
        const struct { const char *op; int kind; } K[] = {{"fp8_round", 8}, {"fp4_round", 4}, {"hadamard", 0}};
        for (int k = 0; k < 3; k++) {
            if (!want(K[k].op)) continue;
            ds4rt_dbuf *bx = buf_from(e, x, sizeof x);
            const uint32_t width = K[k].kind == 8 ? 64 : 32;
            if (K[k].kind == 8) CHECK(e, e->o->fp8_round(e->ctx, n, W, width, ds4rt_f32(bx)));
            else if (K[k].kind == 4) CHECK(e, e->o->fp4_round(e->ctx, n, W, width, ds4rt_f32(bx)));
            else CHECK(e, e->o->hadamard(e->ctx, n * W / width, width, ds4rt_f32(bx)));
            fetch(e, bx, got, sizeof got);
            for (size_t i = 0; i < n * W; i++) ref[i] = x[i];
            for (int64_t r = 0; r < (K[k].kind ? n : n * W / width); r++) {
                double *v = ref + r * (K[k].kind ? W : width);
                if (K[k].kind == 8) ref_block_round(v, width, 64, 448, 1e-4, g8, n8);
                else if (K[k].kind == 4) ref_block_round(v, width, 32, 6, 6 * 0x1p-126, g4, n4);
                else ref_hadamard(v, width);
            }
            double tol = K[k].kind ? 0 : 1e-6, err = rel_err(got, ref, n * W, 1.0);
            report(e->name, K[k].op, K[k].kind ? "vs the enumerated grid" : "vs float64", err <= tol, err, tol);
            drop(e, bx);
        }
    }
    if (want("add") || want("argmax") || want("nonfinite")) {
        ds4rt_dbuf *ba = buf_from(e, x, sizeof x), *bb = buf_from(e, x + 96, 96 * 4), *bo = buf_from(e, NULL, 96 * 4);
        if (want("add")) {
            CHECK(e, e->o->add(e->ctx, 96, ds4rt_f32(ba), ds4rt_f32(bb), ds4rt_f32(bo)));
            fetch(e, bo, got, 96 * 4);
            bool ok = true;
            for (int i = 0; i < 96; i++) ok &= got[i] == x[i] + x[96 + i];
            report(e->name, "add", "exact", ok, 0, 0);
        }
        if (want("argmax")) {
            float v[3 * 96];
            fill(v, 3 * 96, -1, 1);
            v[17] = 5, v[40] = 5;            /* tie: the lower index wins */
            v[96 + 3] = NAN, v[96 + 60] = 2; /* NaN never wins */
            ds4rt_dbuf *bv = buf_from(e, v, sizeof v), *bi = buf_from(e, NULL, 3 * 4);
            CHECK(e, e->o->argmax(e->ctx, 3, 96, ds4rt_f32(bv), ds4rt_i32(bi)));
            int32_t ids[3];
            fetch_i(e, bi, ids, sizeof ids);
            int32_t best = 0;
            for (int i = 1; i < 96; i++)
                if (v[192 + i] > v[192 + best]) best = i;
            report(e->name, "argmax", "ties low, NaN never", ids[0] == 17 && ids[1] == 60 && ids[2] == best, 0, 0);
            drop(e, bv), drop(e, bi);
        }
        if (want("nonfinite")) {
            float v[64];
            fill(v, 64, -1, 1);
            v[3] = INFINITY, v[9] = NAN, v[50] = -INFINITY;
            ds4rt_dbuf *bv = buf_from(e, v, sizeof v), *bi = buf_from(e, NULL, 4);
            CHECK(e, e->o->nonfinite(e->ctx, 64, ds4rt_f32(bv), ds4rt_i32(bi)));
            int32_t c;
            fetch_i(e, bi, &c, 4);
            report(e->name, "nonfinite", "counts inf and NaN", c == 3, 0, 0);
            drop(e, bv), drop(e, bi);
        }
        drop(e, ba), drop(e, bb), drop(e, bo);
    }
    if (want("dspark_confidence")) {
        ds4rt_dbuf *bp = buf_from(e, x, 96 * 4), *bh = buf_from(e, x + 96, 64 * 4), *bs = buf_from(e, x + 200, 32 * 4),
                   *bo = buf_from(e, NULL, 4);
        CHECK(e, e->o->dspark_confidence(e->ctx, 64, 32, ds4rt_f32(bp), ds4rt_f32(bh), ds4rt_f32(bs), ds4rt_f32(bo)));
        float c;
        fetch(e, bo, &c, 4);
        double acc = 0;
        for (int i = 0; i < 64; i++) acc += (double)x[i] * x[96 + i];
        for (int i = 0; i < 32; i++) acc += (double)x[64 + i] * x[200 + i];
        double r = 1 / (1 + exp(-acc)), err = fabs(c - r) / r;
        report(e->name, "dspark_confidence", "vs float64", err < 1e-6, err, 1e-6);
        drop(e, bp), drop(e, bh), drop(e, bs), drop(e, bo);
    }
    (void)cpu;
}

/* ---- HC ops: hc_post and capture against float64; hc_pre/hc_head against the CPU (they are
 * checked against the float64 model reference per sublayer by tests/test_model_reference.py) --- */

static void test_hc(env *e, env *cpu, const ds4rt_hparams *hp) {
    const int64_t n = 3;
    const uint32_t N = hp->hc, D = hp->n_embd;
    float *X = malloc(n * hp->hc_dim * 4), *f = malloc(n * D * 4), *post = malloc(n * N * 4),
          *comb = malloc(n * N * N * 4), *got = malloc(n * hp->hc_dim * 4);
    double *ref = malloc(n * hp->hc_dim * 8);
    fill(X, n * hp->hc_dim, -2, 2);
    fill(f, n * D, -1, 1);
    fill(post, n * N, 0, 2);
    fill(comb, n * N * N, 0, 1);
    ds4rt_dbuf *bX = buf_from(e, X, n * hp->hc_dim * 4), *bf = buf_from(e, f, n * D * 4),
               *bp = buf_from(e, post, n * N * 4), *bc = buf_from(e, comb, n * N * N * 4),
               *bo = buf_from(e, NULL, n * hp->hc_dim * 4);
    if (want("hc_post")) {
        CHECK(e, e->o->hc_post(e->ctx, hp, n, ds4rt_f32(bX), ds4rt_f32(bf), ds4rt_f32(bp), ds4rt_f32(bc), ds4rt_f32(bo)));
        fetch(e, bo, got, n * hp->hc_dim * 4);
        for (int64_t t = 0; t < n; t++)
            for (uint32_t j = 0; j < N; j++)
                for (uint32_t d = 0; d < D; d++) {
                    double acc = (double)post[t * N + j] * f[t * D + d];
                    for (uint32_t i = 0; i < N; i++) acc += (double)comb[t * N * N + i * N + j] * X[t * hp->hc_dim + i * D + d];
                    ref[t * hp->hc_dim + j * D + d] = acc;
                }
        double err = rel_err(got, ref, n * hp->hc_dim, 1.0);
        report(e->name, "hc_post", "vs float64", err < 1e-6, err, 1e-6);
    }
    if (want("capture")) {
        CHECK(e, e->o->capture(e->ctx, hp, n, ds4rt_f32(bX), ds4rt_f32(bo), D + 7)); /* strided rows */
        fetch(e, bo, got, n * (D + 7) * 4);
        double err = 0;
        for (int64_t t = 0; t < n; t++)
            for (uint32_t d = 0; d < D; d++) {
                double m = 0;
                for (uint32_t h = 0; h < N; h++) m += X[t * hp->hc_dim + h * D + d];
                m /= N;
                err = fmax(err, fabs(got[t * (D + 7) + d] - m) / (fabs(m) + 1));
            }
        report(e->name, "capture", "stream mean, strided", err < 1e-6, err, 1e-6);
    }
    (void)cpu;
    drop(e, bX), drop(e, bf), drop(e, bp), drop(e, bc), drop(e, bo);
    free(X), free(f), free(post), free(comb), free(got), free(ref);
}

/* ---- weights: random blocks with sane scales, per type ----------------------------------------- */

typedef struct scale_at {
    uint32_t type;
    int f16[2];  /* byte offsets of f16 scales in a block (-1: none) */
    int e8m0;    /* byte offset of an e8m0 scale (-1: none) */
} scale_at;
static const scale_at SCALES[] = {
    {DS4RT_TYPE_Q8_0, {0, -1}, -1},  {DS4RT_TYPE_Q4_0, {0, -1}, -1},   {DS4RT_TYPE_MXFP4, {-1, -1}, 0},
    {DS4RT_TYPE_Q2_K, {80, 82}, -1}, {DS4RT_TYPE_Q4_K, {0, 2}, -1},    {DS4RT_TYPE_Q5_K, {0, 2}, -1},
    {DS4RT_TYPE_Q6_K, {208, -1}, -1}, {DS4RT_TYPE_IQ2_XXS, {0, -1}, -1},
};

static uint16_t f16_of(float v) { /* small positive normal values only */
    int e;
    float m = frexpf(v, &e); /* v = m 2^e, m in [0.5, 1) */
    return (uint16_t)(((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024));
}

/* rows x cols of `type` with values of order 1; NULL if the CPU does not dequantise it. */
static uint8_t *random_weight(uint32_t type, int64_t rows, int64_t cols, uint64_t *row_bytes) {
    if (ds4rt_type_row_bytes(type, cols, row_bytes) != DS4RT_OK) return NULL;
    size_t bytes = (size_t)(*row_bytes * rows);
    uint8_t *w = malloc(bytes);
    ds4rt_type_info ti;
    ds4rt_type_get_info(type, &ti);
    if (type == DS4RT_TYPE_F32 || type == DS4RT_TYPE_F16 || type == DS4RT_TYPE_BF16) {
        for (int64_t i = 0; i < rows * cols; i++) {
            float v = uniform(-1, 1);
            if (fabsf(v) < 1e-3f) v = 0; /* keep F16 values normal */
            if (type == DS4RT_TYPE_F32) memcpy(w + 4 * i, &v, 4);
            else if (type == DS4RT_TYPE_BF16) {
                uint32_t u;
                memcpy(&u, &v, 4);
                uint16_t h = (uint16_t)(u >> 16);
                memcpy(w + 2 * i, &h, 2);
            } else {
                uint16_t h = v == 0 ? 0 : (uint16_t)(f16_of(fabsf(v)) | (v < 0 ? 0x8000 : 0));
                memcpy(w + 2 * i, &h, 2);
            }
        }
        return w;
    }
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)next_u64();
    for (size_t k = 0; k < sizeof SCALES / sizeof SCALES[0]; k++) {
        if (SCALES[k].type != type) continue;
        size_t nb = bytes / ti.block_bytes;
        for (size_t b = 0; b < nb; b++) {
            uint8_t *blk = w + b * ti.block_bytes;
            for (int s = 0; s < 2; s++)
                if (SCALES[k].f16[s] >= 0) {
                    uint16_t h = f16_of(uniform(0.005f, 0.05f));
                    memcpy(blk + SCALES[k].f16[s], &h, 2);
                }
            if (SCALES[k].e8m0 >= 0) blk[SCALES[k].e8m0] = (uint8_t)(127 - 3 + next_u64() % 3);
        }
        return w;
    }
    free(w);
    return NULL; /* a computable type this harness cannot make random blocks of */
}

/* All GGUF types a backend might support. */
static const uint32_t TYPES[] = {DS4RT_TYPE_F32,  DS4RT_TYPE_F16,  DS4RT_TYPE_BF16, DS4RT_TYPE_Q8_0,
                                 DS4RT_TYPE_Q4_0, DS4RT_TYPE_MXFP4, DS4RT_TYPE_Q2_K, DS4RT_TYPE_Q4_K,
                                 DS4RT_TYPE_Q5_K, DS4RT_TYPE_Q6_K, DS4RT_TYPE_IQ2_XXS};
static const size_t N_TYPES = sizeof TYPES / sizeof TYPES[0];

static ds4rt_dweight dweight(ds4rt_dbuf *b, uint32_t type, int64_t rows, int64_t cols, uint64_t rb) {
    return (ds4rt_dweight){.type = type, .data = {b, 0}, .rows = rows, .cols = cols, .row_bytes = rb};
}

static void test_weight_ops(env *e, env *cpu) {
    const int64_t rows = 24, cols = 256, n = 5;
    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        const uint32_t type = TYPES[ti];
        ds4rt_type_info tinfo;
        ds4rt_type_get_info(type, &tinfo);
        const char *tname = tinfo.name;
        bool mm = under_test->o->supports(under_test->be, DS4RT_OP_MATMUL, type),
             gr = under_test->o->supports(under_test->be, DS4RT_OP_GET_ROWS, type);
        if (!mm && !gr) {
            if (!quiet && cpu->o->supports(cpu->be, DS4RT_OP_MATMUL, type))
                printf("skip %-6s %-18s %s: not supported\n", e->name, "matmul", tname);
            continue;
        }
        uint64_t rb;
        uint8_t *w = random_weight(type, rows, cols, &rb);
        if (w == NULL) {
            report(e->name, "matmul", tname, false, INFINITY, 0); /* the harness must cover every type */
            continue;
        }
        float *deq = malloc(rows * cols * 4), *x = malloc(n * cols * 4), *y = malloc(n * rows * 4),
              **alone = malloc(rows * 4);
        if (ds4rt_dequantize(type, w, rows * cols, deq) != DS4RT_OK) die("dequantize");
        fill(x, n * cols, -1, 1);
        ds4rt_dbuf *bw = buf_from(e, w, rb * rows), *bx = buf_from(e, x, n * cols * 4), *by = buf_from(e, NULL, n * rows * 4);
        ds4rt_dweight dw = dweight(bw, type, rows, cols, rb);
        char what[64];
        static char labels[sizeof TYPES / sizeof TYPES[0]][2][40]; /* tape labels per type */
        snprintf(labels[ti][0], sizeof labels[ti][0], "matmul %s", tname);
        if (mm && want("matmul")) {
            cur_op = labels[ti][0];
            CHECK(e, e->o->matmul(e->ctx, &dw, ds4rt_f32(bx), n, ds4rt_f32(by)));
            fetch(e, by, y, n * rows * 4);
            /* reference: float64 dot of the dequantised weight with the activation rounded as the
             * type pairs it (ds4rt_quantize_activation, docs/QUANTS.md) */
            double worst = 0;
            int8_t *q = malloc(cols);
            float *sc = malloc(cols * 4);
            for (int64_t t = 0; t < n; t++) {
                CHECK(e, ds4rt_quantize_activation(type, x + t * cols, cols, q, sc));
                ds4rt_type_info info;
                ds4rt_type_get_info(type, &info);
                bool fl = type == DS4RT_TYPE_F32 || type == DS4RT_TYPE_F16 || type == DS4RT_TYPE_BF16;
                int64_t blk = type == DS4RT_TYPE_Q8_0 || type == DS4RT_TYPE_Q4_0 || type == DS4RT_TYPE_MXFP4 ? 32 : 256;
                for (int64_t r = 0; r < rows; r++) {
                    double acc = 0, mag = 0;
                    for (int64_t c = 0; c < cols; c++) {
                        double xa = fl ? sc[c] : (double)sc[c / blk] * q[c];
                        acc += (double)deq[r * cols + c] * xa;
                        mag += fabs((double)deq[r * cols + c] * xa);
                    }
                    worst = fmax(worst, fabs(y[t * rows + r] - acc) / (mag + 1e-30));
                }
            }
            free(q), free(sc);
            snprintf(what, sizeof what, "%s vs float64", tname);
            report(e->name, "matmul", what, worst < 1e-5, worst, 1e-5);
            CHECK(e, e->o->matmul(e->ctx, &dw, ds4rt_f32_at(ds4rt_f32(bx), 2 * cols), 1, ds4rt_f32(by)));
            fetch(e, by, alone, rows * 4);
            snprintf(what, sizeof what, "%s batch invariance", tname);
            report(e->name, "matmul", what, same_bits(alone, y + 2 * rows, rows * 4), 0, 0);
        }
        snprintf(labels[ti][1], sizeof labels[ti][1], "get_rows %s", tname);
        if (gr && want("get_rows")) {
            cur_op = labels[ti][1];
            int32_t ids[4] = {3, 0, 23, 3};
            ds4rt_dbuf *bi = buf_from(e, ids, sizeof ids), *bo = buf_from(e, NULL, 4 * 2 * cols * 4);
            CHECK(e, e->o->get_rows(e->ctx, &dw, ds4rt_i32(bi), 4, 2, ds4rt_f32(bo)));
            float *got = malloc(4 * 2 * cols * 4);
            fetch(e, bo, got, 4 * 2 * cols * 4);
            bool ok = true;
            for (int i = 0; i < 4; i++)
                for (int c = 0; c < 2; c++) ok &= same_bits(got + (i * 2 + c) * cols, deq + ids[i] * cols, cols * 4);
            snprintf(what, sizeof what, "%s = dequantise, x2 copies", tname);
            report(e->name, "get_rows", what, ok, 0, 0);
            free(got);
            drop(e, bi), drop(e, bo);
        }
        drop(e, bw), drop(e, bx), drop(e, by);
        free(w), free(deq), free(x), free(y), free(alone);
    }
}

/* ---- attention with keys by index, against float64 -------------------------------------------- */

static void ref_attend(const float *q, const float *const *keys, int64_t nk, const float *sinks, uint32_t H,
                       uint32_t d, double *out) {
    for (uint32_t h = 0; h < H; h++) {
        double *sc = malloc((nk + 1) * 8), mx = sinks[h], den;
        for (int64_t k = 0; k < nk; k++) {
            double dot = 0;
            for (uint32_t i = 0; i < d; i++) dot += (double)q[h * d + i] * keys[k][i];
            sc[k] = dot / sqrt((double)d);
            mx = fmax(mx, sc[k]);
        }
        den = exp(sinks[h] - mx);
        for (int64_t k = 0; k < nk; k++) den += (sc[k] = exp(sc[k] - mx));
        for (uint32_t i = 0; i < d; i++) {
            double acc = 0;
            for (int64_t k = 0; k < nk; k++) acc += sc[k] * keys[k][i];
            out[h * d + i] = acc / den;
        }
        free(sc);
    }
}

static void test_attention(env *e, env *cpu, const ds4rt_hparams *hp) {
    if (!want("attention") && !want("indexer_topk") && !want("kv_store")) return;
    (void)cpu;
    const uint32_t H = 4, d = 32, cap = 12, window = 5, R = 4, ncomp = 10;
    const int64_t n = 4, pos0 = 17;
    float q[4 * 4 * 32], ring[12 * 32], block[4 * 32], comp[10 * 32], sinks[4], got[4 * 4 * 32];
    double ref[4 * 4 * 32];
    fill(q, sizeof q / 4, -1, 1);
    fill(ring, sizeof ring / 4, -1, 1);
    fill(block, sizeof block / 4, -1, 1);
    fill(comp, sizeof comp / 4, -1, 1);
    fill(sinks, 4, -1, 1);
    int32_t sel[4 * 3] = {0, 2, 3, 1, 4, 0, 2, 0, 0, 3, 1, 2}, nsel[4] = {3, 2, 1, 3};
    ds4rt_dpass in = pass_block(e, pos0, 14, NULL, 0);
    ds4rt_dbuf *bq = buf_from(e, q, sizeof q), *br = buf_from(e, ring, sizeof ring), *bb = buf_from(e, block, sizeof block),
               *bc = buf_from(e, comp, sizeof comp), *bs = buf_from(e, sinks, sizeof sinks),
               *bsel = buf_from(e, sel, sizeof sel), *bn = buf_from(e, nsel, sizeof nsel), *bo = buf_from(e, NULL, sizeof q);
    struct { const char *what; ds4rt_attn_keys k; } modes[] = {
        {"causal window", {.ring = ds4rt_f32(br), .ring_cap = cap, .window = window}},
        {"window + comp by count", {.ring = ds4rt_f32(br), .ring_cap = cap, .window = window, .comp_ratio = R,
                                    .comp = ds4rt_f32(bc)}},
        {"window + comp by index", {.ring = ds4rt_f32(br), .ring_cap = cap, .window = window, .comp_ratio = R,
                                    .comp = ds4rt_f32(bc), .sel = ds4rt_i32(bsel), .n_sel = ds4rt_i32(bn), .sel_stride = 3}},
        {"DSpark block, base 14", {.ring = ds4rt_f32(br), .ring_cap = cap, .window = window, .block = true,
                                   .block_rows = ds4rt_f32(bb)}},
    };
    for (int m = 0; m < 4 && want("attention"); m++) {
        const ds4rt_attn_keys *k = &modes[m].k;
        CHECK(e, e->o->attention(e->ctx, in, n, H, d, k, ds4rt_f32(bs), ds4rt_f32(bq), ds4rt_f32(bo), NULL));
        fetch(e, bo, got, sizeof got);
        for (int64_t i = 0; i < n; i++) {
            const float *keys[64];
            int64_t nk = 0, pos = pos0 + i, last = k->block ? pos0 - 1 : pos, first = last - window + 1;
            if (first < 14) first = 14;
            for (int64_t p = first; p <= last; p++) keys[nk++] = ring + (p % cap) * d;
            if (k->block)
                for (int64_t j = 0; j < n; j++) keys[nk++] = block + j * d;
            if (k->comp_ratio && k->sel.buf)
                for (int j = 0; j < nsel[i]; j++) keys[nk++] = comp + sel[i * 3 + j] * d;
            else if (k->comp_ratio)
                for (int64_t j = 0; j < (pos + 1) / R && j < ncomp; j++) keys[nk++] = comp + j * d;
            ref_attend(q + i * H * d, keys, nk, sinks, H, d, ref + i * H * d);
        }
        double err = rel_err(got, ref, n * H * d, 0.1);
        report(e->name, "attention", modes[m].what, err < 1e-5, err, 1e-5);
        {
            /* with unrope: bitwise the output followed by rope -1 (q in place, as the block does) */
            ds4rt_rope r = ROPE;
            r.n_rot = 16;
            float un[4 * 4 * 32], two[4 * 4 * 32];
            ds4rt_dbuf *bu = buf_from(e, q, sizeof q);
            CHECK(e, e->o->attention(e->ctx, in, n, H, d, k, ds4rt_f32(bs), ds4rt_f32(bu), ds4rt_f32(bu), &r));
            fetch(e, bu, un, sizeof un);
            CHECK(e, e->o->rope(e->ctx, in, n, H, d, &r, -1, ds4rt_f32(bo)));
            fetch(e, bo, two, sizeof two);
            char what[80];
            snprintf(what, sizeof what, "%s: unrope == rope -1 after", modes[m].what);
            report(e->name, "attention", what, same_bits(un, two, sizeof un), 0, 0);
            drop(e, bu);
        }
        /* the last row alone, at its own position (block mode: the block is the batch, skip) */
        if (!k->block) {
            ds4rt_dpass in1 = pass_block(e, pos0 + 3, 14, NULL, 0);
            CHECK(e, e->o->attention(e->ctx, in1, 1, H, d, k, ds4rt_f32(bs), ds4rt_f32_at(ds4rt_f32(bq), 3 * H * d),
                                     ds4rt_f32(bo), NULL));
            float a1[4 * 32];
            fetch(e, bo, a1, sizeof a1);
            char what[64];
            snprintf(what, sizeof what, "%s: batch invariance", modes[m].what);
            /* the index list is per row: row 3's is now row 0's */
            bool ok = modes[m].k.sel.buf ? true : same_bits(a1, got + 3 * H * d, sizeof a1);
            if (!modes[m].k.sel.buf) report(e->name, "attention", what, ok, 0, 0);
            drop(e, in1.buf);
        }
    }
    if (want("kv_store")) {
        float ring2[12 * 32];
        memcpy(ring2, ring, sizeof ring);
        ds4rt_dbuf *b2 = buf_from(e, ring2, sizeof ring2);
        CHECK(e, e->o->kv_store(e->ctx, in, n, d, ds4rt_f32(bb), ds4rt_f32(b2), cap));
        fetch(e, b2, ring2, sizeof ring2);
        bool ok = true;
        for (uint32_t slot = 0; slot < cap; slot++) {
            int64_t p = -1;
            for (int64_t i = 0; i < n; i++)
                if ((pos0 + i) % cap == slot) p = i;
            ok &= same_bits(ring2 + slot * d, p >= 0 ? block + p * d : ring + slot * d, d * 4);
        }
        report(e->name, "kv_store", "rows at (pos0 + i) % cap", ok, 0, 0);
        drop(e, b2);
    }
    if (want("indexer_topk")) {
        /* rows visible to row i: floor((pos + 1) / 4); scores against float64, choice = top-k */
        const uint32_t Hi = hp->idx_heads, di = hp->idx_dim, K = hp->idx_topk;
        float iq[4 * 2 * 32], iw[4 * 2], rows[10 * 32];
        fill(iq, sizeof iq / 4, -1, 1);
        fill(iw, sizeof iw / 4, 0, 1);
        fill(rows, sizeof rows / 4, -1, 1);
        ds4rt_dbuf *biq = buf_from(e, iq, sizeof iq), *biw = buf_from(e, iw, sizeof iw), *brw = buf_from(e, rows, sizeof rows),
                   *bsl = buf_from(e, NULL, n * K * 4), *bns = buf_from(e, NULL, n * 4);
        ds4rt_dpass in2 = pass_block(e, 10, 0, NULL, 0); /* rows visible: 2, 3, 3, 3 -> >top_k from row 1 */
        CHECK(e, e->o->indexer_topk(e->ctx, in2, hp, n, ds4rt_f32(biq), ds4rt_f32(biw), ds4rt_f32(brw), ds4rt_i32(bsl),
                                    ds4rt_i32(bns)));
        int32_t gsel[4 * 3], gn[4];
        fetch_i(e, bsl, gsel, sizeof gsel);
        fetch_i(e, bns, gn, sizeof gn);
        drop(e, in2.buf);
        in2 = pass_block(e, 20, 0, NULL, 0); /* 5, 5, 5, 6 visible: a real choice */
        CHECK(e, e->o->indexer_topk(e->ctx, in2, hp, n, ds4rt_f32(biq), ds4rt_f32(biw), ds4rt_f32(brw), ds4rt_i32(bsl),
                                    ds4rt_i32(bns)));
        fetch_i(e, bsl, gsel, sizeof gsel);
        fetch_i(e, bns, gn, sizeof gn);
        bool ok = true;
        for (int64_t i = 0; i < n; i++) {
            int64_t vis = (20 + i + 1) / 4;
            double sc[16];
            for (int64_t r = 0; r < vis; r++) {
                sc[r] = 0;
                for (uint32_t h = 0; h < Hi; h++) {
                    double dot = 0;
                    for (uint32_t j = 0; j < di; j++) dot += (double)iq[(i * Hi + h) * di + j] * rows[r * di + j];
                    sc[r] += iw[i * Hi + h] / sqrt((double)di * Hi) * (dot > 0 ? dot : 0);
                }
            }
            ok &= gn[i] == (int32_t)(vis < K ? vis : K);
            /* ascending indices, and no unchosen row scores above a chosen one */
            for (int j = 0; j < gn[i]; j++) {
                ok &= j == 0 || gsel[i * K + j] > gsel[i * K + j - 1];
                for (int64_t r = 0; r < vis; r++) {
                    bool chosen = false;
                    for (int jj = 0; jj < gn[i]; jj++) chosen |= gsel[i * K + jj] == r;
                    if (!chosen) ok &= sc[r] <= sc[gsel[i * K + j]] + 1e-6;
                }
            }
        }
        report(e->name, "indexer_topk", "top-k of float64 scores", ok, 0, 0);
        drop(e, biq), drop(e, biw), drop(e, brw), drop(e, bsl), drop(e, bns), drop(e, in2.buf);
    }
    drop(e, bq), drop(e, br), drop(e, bb), drop(e, bc), drop(e, bs), drop(e, bsel), drop(e, bn), drop(e, bo),
        drop(e, in.buf);
}

/* ---- compressor: float64 pooling of one emission; rollback + replay = the shorter run ----------- */

static void test_compressor(env *e, env *cpu, uint32_t R) {
    if (!want("compressor")) return;
    (void)cpu;
    const uint32_t d = 32, coff = R == 4 ? 2 : 1, width = coff * d, rows = coff * R, cap = 16;
    const int64_t n = 2 * R + 1, pos0 = 0;
    float *u = malloc(n * width * 4), *g = malloc(n * width * 4), ape[8 * 64], norm[32];
    fill(u, n * width, -1, 1);
    fill(g, n * width, -2, 2);
    fill(ape, R * width, -0.5f, 0.5f);
    fill(norm, d, 0.5f, 1.5f);
    size_t fr = (size_t)rows * width;
    ds4rt_dbuf *st = buf_from(e, NULL, (4 * fr + (size_t)n * 2 * width + cap * d) * 4), *bu = buf_from(e, u, n * width * 4),
               *bg = buf_from(e, g, n * width * 4), *ba = buf_from(e, ape, R * width * 4), *bn = buf_from(e, norm, d * 4);
    ds4rt_df32 base = ds4rt_f32(st);
    ds4rt_comp_state cs = {.kv = base, .score = ds4rt_f32_at(base, fr), .snap_kv = ds4rt_f32_at(base, 2 * fr),
                           .snap_score = ds4rt_f32_at(base, 3 * fr), .journal = ds4rt_f32_at(base, 4 * fr),
                           .out = ds4rt_f32_at(base, 4 * fr + n * 2 * width), .rows = rows, .width = width, .cap = cap};
    ds4rt_rope rope = ROPE;
    rope.n_rot = 16;
    ds4rt_comp_desc c = {.ratio = R, .dim = d, .ape = ds4rt_f32(ba), .norm = ds4rt_f32(bn), .rms_eps = 1e-6f,
                         .rope = rope, .post = DS4RT_COMP_POST_NONE};
    CHECK(e, e->o->comp_reset(e->ctx, &cs));
    CHECK(e, e->o->comp_snapshot(e->ctx, &cs));
    ds4rt_dpass in = pass_block(e, pos0, 0, NULL, 0);
    CHECK(e, e->o->comp_update(e->ctx, in, n, &c, &cs, ds4rt_f32(bu), ds4rt_f32(bg)));
    float out[16 * 32], again[16 * 32];
    CHECK(e, e->o->download(e->ctx, st, (4 * fr + n * 2 * width) * 4, out, cap * d * 4));
    record(out, cap * d * 4, false);
    /* float64 reference of the second emitted row (position 2R-1): softmax pooling per feature
     * over its block (and, overlapping, the previous block's first half), RMSNorm, RoPE */
    const int64_t last = 2 * R - 1, b0 = last + 1 - R;
    double z[32], ref[32];
    for (uint32_t j = 0; j < d; j++) {
        double num = 0, den = 0, mx = -INFINITY, s[16], v[16];
        int m = 0;
        if (R == 4)
            for (int64_t p = b0 - R; p < b0; p++) s[m] = g[p * width + j] + ape[(p % R) * width + j], v[m++] = u[p * width + j];
        for (int64_t p = b0; p <= last; p++) {
            uint32_t off = R == 4 ? d : 0;
            s[m] = g[p * width + off + j] + ape[(p % R) * width + off + j];
            v[m++] = u[p * width + off + j];
        }
        for (int i = 0; i < m; i++) mx = fmax(mx, s[i]);
        for (int i = 0; i < m; i++) num += exp(s[i] - mx) * v[i], den += exp(s[i] - mx);
        z[j] = num / den;
    }
    float zf[32];
    for (uint32_t j = 0; j < d; j++) zf[j] = (float)z[j];
    ref_rms(zf, d, norm, 1e-6, ref);
    ref_rope(ref, d, &rope, b0, +1);
    double err = rel_err(out + d, ref, d, 1e-2);
    char what[64];
    snprintf(what, sizeof what, "ratio %u emission vs float64", R);
    report(e->name, "compressor", what, err < 1e-5, err, 1e-5);
    /* rollback to keep = R + 1 then the rest again == the straight run */
    CHECK(e, e->o->comp_rollback(e->ctx, &c, &cs, pos0, R + 1));
    ds4rt_dpass in2 = pass_block(e, pos0 + R + 1, 0, NULL, 0);
    CHECK(e, e->o->comp_snapshot(e->ctx, &cs));
    CHECK(e, e->o->comp_update(e->ctx, in2, n - (R + 1), &c, &cs, ds4rt_f32_at(ds4rt_f32(bu), (R + 1) * width),
                               ds4rt_f32_at(ds4rt_f32(bg), (R + 1) * width)));
    CHECK(e, e->o->download(e->ctx, st, (4 * fr + n * 2 * width) * 4, again, cap * d * 4));
    record(again, cap * d * 4, false);
    snprintf(what, sizeof what, "ratio %u rollback + replay exact", R);
    report(e->name, "compressor", what, same_bits(out, again, 2 * d * 4), 0, 0);
    drop(e, st), drop(e, bu), drop(e, bg), drop(e, ba), drop(e, bn), drop(e, in.buf), drop(e, in2.buf);
    free(u), free(g);
}


/* ---- the coarse ops (hc_pre, hc_head, grouped_out, moe) with F32 weights: float64 references,
 * batch invariance, and the same inputs on the CPU backend ------------------------------------ */

static double sigm(double x) { return 1 / (1 + exp(-x)); }

/* w [rows][cols] f32 times x (float64). */
static void ref_mv(const float *w, const double *x, int64_t rows, int64_t cols, double *y) {
    for (int64_t r = 0; r < rows; r++) {
        double acc = 0;
        for (int64_t c = 0; c < cols; c++) acc += (double)w[r * cols + c] * x[c];
        y[r] = acc;
    }
}

static void ref_hc_pre(const ds4rt_hparams *hp, const float *fn, const float *scale, const float *base, const float *norm,
                       const float *X, double *xn, double *post, double *comb) {
    const uint32_t N = hp->hc, D = hp->n_embd;
    double nx[1024], mix[64], c[16 * 16], pre[16];
    double ss = 0;
    for (uint32_t i = 0; i < hp->hc_dim; i++) ss += (double)X[i] * X[i];
    for (uint32_t i = 0; i < hp->hc_dim; i++) nx[i] = X[i] / sqrt(ss / hp->hc_dim + hp->rms_eps);
    ref_mv(fn, nx, hp->hc_mix, hp->hc_dim, mix);
    for (uint32_t i = 0; i < N; i++) pre[i] = sigm(scale[0] * mix[i] + base[i]) + hp->hc_eps;
    for (uint32_t a = 0; a < N; a++) { /* row softmax + eps, then Sinkhorn (columns, rows) */
        double mx = -INFINITY, sum = 0;
        for (uint32_t b = 0; b < N; b++) mx = fmax(mx, c[a * N + b] = scale[2] * mix[2 * N + a * N + b] + base[2 * N + a * N + b]);
        for (uint32_t b = 0; b < N; b++) sum += (c[a * N + b] = exp(c[a * N + b] - mx));
        for (uint32_t b = 0; b < N; b++) c[a * N + b] = c[a * N + b] / sum + hp->hc_eps;
    }
    for (uint32_t it = 0; it < hp->sinkhorn_iters; it++) {
        for (uint32_t a = 0; a < N && it > 0; a++) {
            double sum = 0;
            for (uint32_t b = 0; b < N; b++) sum += c[a * N + b];
            for (uint32_t b = 0; b < N; b++) c[a * N + b] /= sum + hp->hc_eps;
        }
        for (uint32_t b = 0; b < N; b++) {
            double sum = 0;
            for (uint32_t a = 0; a < N; a++) sum += c[a * N + b];
            for (uint32_t a = 0; a < N; a++) c[a * N + b] /= sum + hp->hc_eps;
        }
    }
    for (uint32_t i = 0; i < N * N; i++) comb[i] = c[i];
    for (uint32_t i = 0; i < N; i++) post[i] = 2 * sigm(scale[1] * mix[N + i] + base[N + i]);
    double x[256];
    for (uint32_t d = 0; d < D; d++) {
        x[d] = 0;
        for (uint32_t h = 0; h < N; h++) x[d] += pre[h] * X[h * D + d];
    }
    float xf[256];
    for (uint32_t d = 0; d < D; d++) xf[d] = (float)x[d];
    ref_rms(xf, D, norm, hp->rms_eps, xn);
}

/* Runs `op` on e and on the CPU with the same inputs; checks rows alone == rows in the batch. */
/* grouped_out with a Q8_0 first factor, rows padded to 16 bytes (the alignment of real files,
 * which the GPU's one-launch path for up to 8 tokens needs): n = 1 and 5 take that path, n = 9
 * the per-group one; every row of each call must be bitwise the row computed alone, and the
 * outputs go on the tape (against the CPU run). */
static void test_grouped_out_q8(env *e, const ds4rt_hparams *hp) {
    const uint32_t G = hp->o_groups, Ro = hp->o_lora, gd = hp->group_dim, D = hp->n_embd;
    const int64_t nmax = 9, sizes[] = {5, 9};
    uint64_t rb;
    uint8_t *wq = random_weight(DS4RT_TYPE_Q8_0, G * Ro, gd, &rb);
    if (wq == NULL) die("random Q8_0 weight");
    const uint64_t rbp = (rb + 15) & ~(uint64_t)15;
    uint8_t *wpad = calloc(G * Ro, rbp);
    for (uint32_t r = 0; r < G * Ro; r++) memcpy(wpad + r * rbp, wq + r * rb, rb);
    float *o = malloc(nmax * hp->q_dim * 4), *wb = malloc(D * G * Ro * 4), *got = malloc(nmax * D * 4),
          *alone = malloc(nmax * D * 4);
    fill(o, nmax * hp->q_dim, -1, 1);
    fill(wb, D * G * Ro, -0.2f, 0.2f);
    ds4rt_dbuf *bo = buf_from(e, o, nmax * hp->q_dim * 4), *bwa = buf_from(e, wpad, G * Ro * rbp),
               *bwb = buf_from(e, wb, D * G * Ro * 4), *bf = buf_from(e, NULL, nmax * D * 4);
    ds4rt_dweight da = dweight(bwa, DS4RT_TYPE_Q8_0, G * Ro, gd, rbp), db = dweight(bwb, DS4RT_TYPE_F32, D, G * Ro, G * Ro * 4);
    cur_op = "grouped_out Q8_0";
    for (int64_t t = 0; t < nmax; t++) { /* each row alone (n = 1: the one-launch path) */
        ds4rt_df32 ot = ds4rt_f32(bo);
        ot.off += (uint64_t)t * hp->q_dim; /* in elements */
        CHECK(e, e->o->grouped_out(e->ctx, hp, 1, &da, &db, ot, ds4rt_f32(bf)));
        fetch(e, bf, alone + t * D, D * 4);
    }
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int64_t n = sizes[k];
        CHECK(e, e->o->grouped_out(e->ctx, hp, n, &da, &db, ds4rt_f32(bo), ds4rt_f32(bf)));
        fetch(e, bf, got, n * D * 4);
        char what[48];
        snprintf(what, sizeof what, "Q8_0 batch invariance n=%lld", (long long)n);
        report(e->name, "grouped_out", what, same_bits(got, alone, n * D * 4), 0, 0);
    }
    drop(e, bo), drop(e, bwa), drop(e, bwb), drop(e, bf);
    free(wq), free(wpad), free(o), free(wb), free(got), free(alone);
}

static void test_coarse(env *e, env *cpu, const ds4rt_hparams *hp) {
    const int64_t n = 4;
    const uint32_t N = hp->hc, D = hp->n_embd, E = hp->n_expert, F = hp->expert_ff, k = hp->n_expert_used;
    float *X = malloc(n * hp->hc_dim * 4), *fn = malloc(hp->hc_mix * hp->hc_dim * 4), scale[3], base[64], norm[256];
    fill(X, n * hp->hc_dim, -2, 2);
    fill(fn, hp->hc_mix * hp->hc_dim, -0.2f, 0.2f);
    fill(scale, 3, 0.5f, 1.5f);
    fill(base, 64, -0.5f, 0.5f);
    fill(norm, D, 0.5f, 1.5f);
    ds4rt_dbuf *bX = buf_from(e, X, n * hp->hc_dim * 4), *bfn = buf_from(e, fn, hp->hc_mix * hp->hc_dim * 4),
               *bsc = buf_from(e, scale, 12), *bba = buf_from(e, base, 64 * 4), *bno = buf_from(e, norm, D * 4),
               *bxn = buf_from(e, NULL, n * D * 4), *bpo = buf_from(e, NULL, n * N * 4), *bco = buf_from(e, NULL, n * N * N * 4);
    float *got = malloc(n * 4096 * 4), *alone = malloc(4096 * 4);
    double *ref = malloc(n * 4096 * 8);
    uint64_t rb = hp->hc_dim * 4;
    if (want("hc_pre")) {
        ds4rt_hc_weights w = {.fn = dweight(bfn, DS4RT_TYPE_F32, hp->hc_mix, hp->hc_dim, rb), .scale = ds4rt_f32(bsc),
                              .base = ds4rt_f32(bba)};
        CHECK(e, e->o->hc_pre(e->ctx, hp, n, &w, ds4rt_f32(bno), ds4rt_f32(bX), ds4rt_f32(bxn), ds4rt_f32(bpo), ds4rt_f32(bco)));
        fetch(e, bxn, got, n * D * 4);
        float gpost[64], gcomb[256];
        double rpost[64], rcomb[256];
        fetch(e, bpo, gpost, n * N * 4);
        fetch(e, bco, gcomb, n * N * N * 4);
        for (int64_t t = 0; t < n; t++)
            ref_hc_pre(hp, fn, scale, base, norm, X + t * hp->hc_dim, ref + t * D, rpost + t * N, rcomb + t * N * N);
        double err = rel_err(got, ref, n * D, 1e-2);
        report(e->name, "hc_pre", "xn vs float64", err < 1e-4, err, 1e-4);
        err = rel_err(gpost, rpost, n * N, 1e-2);
        report(e->name, "hc_pre", "post vs float64", err < 1e-5, err, 1e-5);
        err = rel_err(gcomb, rcomb, n * N * N, 1e-2);
        report(e->name, "hc_pre", "Sinkhorn comb vs float64", err < 1e-5, err, 1e-5);
        CHECK(e, e->o->hc_pre(e->ctx, hp, 1, &w, ds4rt_f32(bno), ds4rt_f32_at(ds4rt_f32(bX), 2 * hp->hc_dim), ds4rt_f32(bxn),
                              ds4rt_f32(bpo), ds4rt_f32(bco)));
        fetch(e, bxn, alone, D * 4);
        report(e->name, "hc_pre", "batch invariance", same_bits(alone, got + 2 * D, D * 4), 0, 0);
    }
    if (want("hc_head")) {
        ds4rt_hc_weights w = {.fn = dweight(bfn, DS4RT_TYPE_F32, N, hp->hc_dim, rb), .scale = ds4rt_f32(bsc),
                              .base = ds4rt_f32(bba)};
        CHECK(e, e->o->hc_head(e->ctx, hp, n, &w, ds4rt_f32(bX), ds4rt_f32(bxn)));
        fetch(e, bxn, got, n * D * 4);
        for (int64_t t = 0; t < n; t++) {
            const float *Xt = X + t * hp->hc_dim;
            double nx[1024], mix[16], ss = 0;
            for (uint32_t i = 0; i < hp->hc_dim; i++) ss += (double)Xt[i] * Xt[i];
            for (uint32_t i = 0; i < hp->hc_dim; i++) nx[i] = Xt[i] / sqrt(ss / hp->hc_dim + hp->rms_eps);
            ref_mv(fn, nx, N, hp->hc_dim, mix);
            for (uint32_t d = 0; d < D; d++) {
                ref[t * D + d] = 0;
                for (uint32_t h = 0; h < N; h++) ref[t * D + d] += (sigm(scale[0] * mix[h] + base[h]) + hp->hc_eps) * Xt[h * D + d];
            }
        }
        double err = rel_err(got, ref, n * D, 1e-2);
        report(e->name, "hc_head", "vs float64", err < 1e-4, err, 1e-4);
    }
    if (want("grouped_out")) {
        const uint32_t G = hp->o_groups, Ro = hp->o_lora, gd = hp->group_dim;
        float *o = malloc(n * hp->q_dim * 4), *wa = malloc(G * Ro * gd * 4), *wb = malloc(D * G * Ro * 4);
        fill(o, n * hp->q_dim, -1, 1);
        fill(wa, G * Ro * gd, -0.2f, 0.2f);
        fill(wb, D * G * Ro, -0.2f, 0.2f);
        ds4rt_dbuf *bo = buf_from(e, o, n * hp->q_dim * 4), *bwa = buf_from(e, wa, G * Ro * gd * 4),
                   *bwb = buf_from(e, wb, D * G * Ro * 4), *bf = buf_from(e, NULL, n * D * 4);
        ds4rt_dweight da = dweight(bwa, DS4RT_TYPE_F32, G * Ro, gd, gd * 4), db = dweight(bwb, DS4RT_TYPE_F32, D, G * Ro, G * Ro * 4);
        CHECK(e, e->o->grouped_out(e->ctx, hp, n, &da, &db, ds4rt_f32(bo), ds4rt_f32(bf)));
        fetch(e, bf, got, n * D * 4);
        for (int64_t t = 0; t < n; t++) {
            double low[256], og[512];
            for (uint32_t g = 0; g < G; g++) {
                for (uint32_t i = 0; i < gd; i++) og[i] = o[t * hp->q_dim + g * gd + i];
                ref_mv(wa + g * Ro * gd, og, Ro, gd, low + g * Ro);
            }
            ref_mv(wb, low, D, G * Ro, ref + t * D);
        }
        double err = rel_err(got, ref, n * D, 1e-1);
        report(e->name, "grouped_out", "vs float64", err < 1e-5, err, 1e-5);
        drop(e, bo), drop(e, bwa), drop(e, bwb), drop(e, bf);
        free(o), free(wa), free(wb);
    }
    if (want("grouped_out") && under_test->o->supports(under_test->be, DS4RT_OP_GROUPED_OUT, DS4RT_TYPE_Q8_0))
        test_grouped_out_q8(e, hp);
    if (want("moe")) {
        for (int hash = 0; hash < 2; hash++) {
            float *x = malloc(n * D * 4), *wg = malloc(E * D * 4), *bias = malloc(E * 4), *ge = malloc(E * F * D * 4),
                  *ue = malloc(E * F * D * 4), *de = malloc(E * D * F * 4), *gs = malloc(F * D * 4), *us = malloc(F * D * 4),
                  *ds = malloc(D * F * 4);
            fill(x, n * D, -1, 1), fill(wg, E * D, -0.3f, 0.3f), fill(bias, E, -0.2f, 0.2f);
            fill(ge, E * F * D, -0.3f, 0.3f), fill(ue, E * F * D, -0.3f, 0.3f), fill(de, E * D * F, -0.3f, 0.3f);
            fill(gs, F * D, -0.3f, 0.3f), fill(us, F * D, -0.3f, 0.3f), fill(ds, D * F, -0.3f, 0.3f);
            int32_t tokens[4] = {3, 11, 3, 40}, tid2eid[50 * 2];
            for (int i = 0; i < 50 * 2; i++) tid2eid[i] = (int32_t)(next_u64() % E);
            for (int i = 0; i < 50; i++)
                if (tid2eid[2 * i] == tid2eid[2 * i + 1]) tid2eid[2 * i + 1] = (tid2eid[2 * i] + 1) % (int32_t)E;
            ds4rt_dpass in = pass_block(e, 0, 0, tokens, n);
            ds4rt_dbuf *bx = buf_from(e, x, n * D * 4), *bwg = buf_from(e, wg, E * D * 4), *bbi = buf_from(e, bias, E * 4),
                       *bge = buf_from(e, ge, E * F * D * 4), *bue = buf_from(e, ue, E * F * D * 4),
                       *bde = buf_from(e, de, E * D * F * 4), *bgs = buf_from(e, gs, F * D * 4), *bus = buf_from(e, us, F * D * 4),
                       *bds = buf_from(e, ds, D * F * 4), *bt = buf_from(e, tid2eid, sizeof tid2eid), *bf = buf_from(e, NULL, n * D * 4);
            ds4rt_moe_weights w = {
                .gate_inp = dweight(bwg, DS4RT_TYPE_F32, E, D, D * 4),
                .bias = hash ? (ds4rt_df32){0} : ds4rt_f32(bbi),
                .tid2eid = hash ? ds4rt_i32(bt) : (ds4rt_di32){0},
                .gate_exps = {dweight(bge, DS4RT_TYPE_F32, F, D, D * 4), E, (uint64_t)F * D * 4},
                .up_exps = {dweight(bue, DS4RT_TYPE_F32, F, D, D * 4), E, (uint64_t)F * D * 4},
                .down_exps = {dweight(bde, DS4RT_TYPE_F32, D, F, F * 4), E, (uint64_t)D * F * 4},
                .gate_sh = dweight(bgs, DS4RT_TYPE_F32, F, D, D * 4),
                .up_sh = dweight(bus, DS4RT_TYPE_F32, F, D, D * 4),
                .down_sh = dweight(bds, DS4RT_TYPE_F32, D, F, F * 4)};
            const float clamp = 0.6f, clamp_sh = 0.8f;
            CHECK(e, e->o->moe(e->ctx, in, hp, n, &w, clamp, clamp_sh, ds4rt_f32(bx), ds4rt_f32(bf)));
            fetch(e, bf, got, n * D * 4);
            for (int64_t t = 0; t < n; t++) {
                double xd[256], lg[64], prob[64], h[64], hu[64], y[256];
                for (uint32_t i = 0; i < D; i++) xd[i] = x[t * D + i], ref[t * D + i] = 0;
                ref_mv(wg, xd, E, D, lg);
                for (uint32_t i = 0; i < E; i++) prob[i] = sqrt(log1p(exp(lg[i])));
                int32_t sel[8];
                if (hash) memcpy(sel, tid2eid + tokens[t] * k, k * 4);
                else
                    for (uint32_t j = 0; j < k; j++) { /* biased top-k, ties to the lower index */
                        int32_t best = -1;
                        for (uint32_t i = 0; i < E; i++) {
                            bool used = false;
                            for (uint32_t jj = 0; jj < j; jj++) used |= sel[jj] == (int32_t)i;
                            if (!used && (best < 0 || prob[i] + bias[i] > prob[best] + bias[best])) best = (int32_t)i;
                        }
                        sel[j] = best;
                    }
                double sum = 0;
                for (uint32_t j = 0; j < k; j++) sum += prob[sel[j]];
                for (uint32_t j = 0; j <= k; j++) { /* k routed experts, then the shared one */
                    const bool sh = j == k;
                    const float *G = sh ? gs : ge + (size_t)sel[j] * F * D, *U = sh ? us : ue + (size_t)sel[j] * F * D,
                                *Dn = sh ? ds : de + (size_t)sel[j] * D * F;
                    double c = sh ? clamp_sh : clamp, wt = sh ? 1 : prob[sel[j]] / fmax(sum, 6.103515625e-5) * hp->expert_scale;
                    ref_mv(G, xd, F, D, h);
                    ref_mv(U, xd, F, D, hu);
                    for (uint32_t i = 0; i < F; i++) {
                        double gi = fmin(h[i], c), ui = fmax(-c, fmin(c, hu[i]));
                        h[i] = gi * sigm(gi) * ui * wt;
                    }
                    ref_mv(Dn, h, D, F, y);
                    for (uint32_t i = 0; i < D; i++) ref[t * D + i] += y[i];
                }
            }
            double err = rel_err(got, ref, n * D, 1e-1);
            report(e->name, "moe", hash ? "hash routing vs float64" : "biased top-k vs float64", err < 1e-4, err, 1e-4);
            ds4rt_dpass in1 = pass_block(e, 0, 0, tokens + 3, 1);
            CHECK(e, e->o->moe(e->ctx, in1, hp, 1, &w, clamp, clamp_sh, ds4rt_f32_at(ds4rt_f32(bx), 3 * D), ds4rt_f32(bf)));
            fetch(e, bf, alone, D * 4);
            report(e->name, "moe", hash ? "hash: batch invariance" : "top-k: batch invariance",
                   same_bits(alone, got + 3 * D, D * 4), 0, 0);
            drop(e, in.buf), drop(e, in1.buf), drop(e, bx), drop(e, bwg), drop(e, bbi), drop(e, bge), drop(e, bue), drop(e, bde),
                drop(e, bgs), drop(e, bus), drop(e, bds), drop(e, bt), drop(e, bf);
            free(x), free(wg), free(bias), free(ge), free(ue), free(de), free(gs), free(us), free(ds);
        }
    }
    (void)cpu;
    drop(e, bX), drop(e, bfn), drop(e, bsc), drop(e, bba), drop(e, bno), drop(e, bxn), drop(e, bpo), drop(e, bco);
    free(X), free(fn), free(got), free(alone), free(ref);
}

/* ---- main ------------------------------------------------------------------------------------ */

static void run_all(env *e, env *cpu, const ds4rt_hparams *hp, uint64_t seed, bool reference_run) {
    quiet = reference_run;
    rng_state = seed;
    test_marks(e);
    rng_state = seed;
    test_rows(e, cpu);
    test_hc(e, cpu, hp);
    test_weight_ops(e, cpu);
    test_coarse(e, cpu, hp);
    test_attention(e, cpu, hp);
    test_compressor(e, cpu, 4);
    test_compressor(e, cpu, 8);
    quiet = false;
}

/* Per op: every output of the backend's run against the CPU's run, max |a - b| / (|b| + 1). */
static void compare_tapes(const char *name, const tape *ref, const tape *run, double tol) {
    if (ref->n != run->n) {
        report(name, "all", "same outputs as the cpu run", false, INFINITY, tol);
        return;
    }
    for (size_t i = 0; i < run->n;) {
        const char *op = run->e[i].op;
        double worst = 0;
        size_t j = i, count = 0;
        for (; j < run->n && run->e[j].op == op; j++) {
            const tape_entry *a = &run->e[j], *b = &ref->e[j];
            if (a->bytes != b->bytes || a->op != b->op) {
                worst = INFINITY;
                continue;
            }
            if (a->ints || tol == 0) {
                if (memcmp(a->data, b->data, a->bytes)) worst = INFINITY;
            } else {
                const float *x = (const float *)a->data, *y = (const float *)b->data;
                for (size_t k = 0; k < a->bytes / 4; k++) {
                    double d = fabs((double)x[k] - y[k]) / (fabs(y[k]) + 1);
                    if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
                }
            }
            count += a->bytes;
        }
        char what[64];
        snprintf(what, sizeof what, "vs cpu run (%zu bytes)", count);
        report(name, op, what, worst <= tol, worst, tol);
        i = j;
    }
}

/* ---- the load-time check: a backend lacking an op is refused, naming it ---------------------- */

static ds4rt_op refused_op;
static const ds4rt_backend_ops *real_ops;
static bool refuse_one(const ds4rt_backend *be, ds4rt_op op, uint32_t type) {
    return op != refused_op && real_ops->supports(be, op, type);
}

static int refusal_checks(const char *path) {
    ds4rt_gguf *g;
    if (ds4rt_gguf_open(path, &g) != DS4RT_OK) die("open the model");
    ds4rt_backend *cpu;
    if (ds4rt_backend_open(DS4RT_BKIND_CPU, 0, 1, &cpu) != DS4RT_OK) die("open cpu");
    real_ops = cpu->ops;
    ds4rt_backend_ops restricted = *cpu->ops;
    restricted.supports = refuse_one;
    ds4rt_backend lacking = *cpu; /* the CPU backend, except for what it says it runs */
    lacking.ops = &restricted;
    for (int op = 0; op < DS4RT_OP_COUNT; op++) {
        refused_op = (ds4rt_op)op;
        ds4rt_target t;
        ds4rt_status st = ds4rt_target_bind(g, true, &lacking, NULL, &t);
        char what[80];
        const char *name = ds4rt_op_name(refused_op);
        bool named = st == DS4RT_ERR_BACKEND && strstr(ds4rt_last_error(), name) != NULL;
        if (st == DS4RT_OK) {
            /* an op the target pass does not use: the drafter must need it */
            struct ds4rt_dspark d;
            memset(&d, 0, sizeof d);
            d.sim_fp8 = true;
            st = ds4rt_dspark_require_ops(&d, &lacking);
            named = st == DS4RT_ERR_BACKEND && strstr(ds4rt_last_error(), name) != NULL;
            ds4rt_target_free(&t);
            snprintf(what, sizeof what, "without it: DSpark refused");
        } else {
            snprintf(what, sizeof what, "without it: model refused");
        }
        report("cpu", name, what, named, 0, 0);
        if (!named) printf("     status %s: %s\n", ds4rt_status_name(st), ds4rt_last_error());
    }
    ds4rt_backend_close(cpu);
    ds4rt_gguf_close(g);
    printf("backend-ops: %d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}

static env open_env(ds4rt_bkind kind, const char *name) {
    env e = {.name = name};
    if (ds4rt_backend_open(kind, 0, 2, &e.be) != DS4RT_OK) die("open backend");
    e.o = ds4rt_backend_get_ops(e.be);
    if (e.o->ctx_create(e.be, 2, &e.ctx) != DS4RT_OK) die("context");
    return e;
}

int main(int argc, char **argv) {
    uint64_t seed = 1;
    const char *only_backend = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) only_backend = argv[++i];
        else if (!strcmp(argv[i], "--op") && i + 1 < argc) only_op = argv[++i];
        else if (!strcmp(argv[i], "--refusal") && i + 1 < argc) return refusal_checks(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--seed N] [--backend NAME] [--op NAME] | --refusal TARGET.gguf\n", argv[0]);
            return 2;
        }
    }
    uint32_t ratio = 4;
    ds4rt_hparams hp = small_hp(&ratio);
    env cpu = open_env(DS4RT_BKIND_CPU, "cpu");
    ds4rt_limits lim = {.max_rows = 16, .max_keys = 64, .max_comp = 64};
    if (cpu.o->ctx_reserve(cpu.ctx, &hp, &lim) != DS4RT_OK) die("reserve");
    const ds4rt_backend_entry *const *reg;
    size_t nb = ds4rt_backend_registry(&reg);
    for (size_t b = 0; b < nb; b++) {
        if (only_backend && strcmp(only_backend, reg[b]->name)) continue;
        if (reg[b]->device_count() == 0) {
            printf("skip %-6s (no device visible)\n", reg[b]->name);
            continue;
        }
        env e = reg[b]->kind == DS4RT_BKIND_CPU ? cpu : open_env(reg[b]->kind, reg[b]->name);
        if (e.ctx != cpu.ctx && e.o->ctx_reserve(e.ctx, &hp, &lim) != DS4RT_OK) die("reserve");
        /* the CPU's run of the same inputs (for the CPU itself: a second run, which must be
         * bitwise the first - run-to-run determinism) */
        tape ref_tape = {0}, run_tape = {0};
        under_test = &e;
        cur_tape = &ref_tape;
        run_all(&cpu, &cpu, &hp, seed, true);
        cur_tape = &run_tape;
        run_all(&e, &cpu, &hp, seed, false);
        cur_tape = NULL;
        compare_tapes(e.name, &ref_tape, &run_tape, e.ctx == cpu.ctx ? 0.0 : 1e-4);
        if (e.ctx != cpu.ctx) {
            e.o->ctx_free(e.ctx);
            ds4rt_backend_close(e.be);
        }
    }
    cpu.o->ctx_free(cpu.ctx);
    ds4rt_backend_close(cpu.be);
    printf("backend-ops: %d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
