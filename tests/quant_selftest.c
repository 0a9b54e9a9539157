/*
 * quant_selftest.c - checks every CPU kernel path this binary can run against the scalar path;
 * the Meson target quant_selftest, linked with the kernel libraries alone (so it can be
 * cross-compiled and run under qemu, or copied to a machine with a wider ISA:
 * tools/quant_selftest.py).
 *
 * For each path and weight type, on random blocks (finite f16 scales) and random activations:
 *   - y of a batch of 17 tokens is bitwise equal to the scalar path's;
 *   - y[t] is bitwise equal whether computed alone (n_tok = 1) or in batches of 2..17, and with
 *     1 or 3 threads (row-wise batch invariance);
 *   - odd shapes (1 row, 6 rows, 37 rows, several column counts) agree as well, including the
 *     short rows that the whole-row kernels take (kernels.h, ds4rt_rows_fn).
 * Q8_0 weights repacked into the X8 layout (repack.h) are checked the same way against the scalar
 * path on the file's bytes, also for rows that end with a half group. Also checks dequantised-weight * rounded-activation in float64 against the kernel (<= 1e-5
 * relative to the row's sum of |terms|). Prints one line per path and type; exit status 1 on any
 * failure, 0 otherwise.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "ds4rt_testing.h"
#include "kernels.h"
#include "matmul.h"
#include "qtypes.h"
#include "repack.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float rnd_normal(void) { /* sum of uniforms: good enough for test data */
    float s = 0;
    for (int i = 0; i < 4; i++) s += (float)(rnd() >> 40) / (float)(1u << 24);
    return (s - 2.0f) * 1.7f;
}
static void put_f16(uint8_t *p, float v) {
    const uint16_t h = ds4rt_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* Random bytes, then finite scales where the format keeps f16/E8M0 scales. */
static void random_weights(uint32_t type, uint8_t *w, int64_t rows, int64_t cols) {
    const ds4rt_type_info *info = ds4rt_type_lookup(type);
    const int64_t nb = rows * cols / info->block_elems;
    const size_t bs = info->block_bytes;
    for (int64_t i = 0; i < nb * (int64_t)bs; i++) w[i] = (uint8_t)rnd();
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * bs;
        const float s = 0.002f + 0.01f * (float)(rnd() % 1000) / 1000.0f;
        switch (type) {
        case DS4RT_TYPE_F32:
            for (int i = 0; i < 1; i++) {
                const float v = rnd_normal();
                memcpy(blk, &v, 4);
            }
            break;
        case DS4RT_TYPE_F16: put_f16(blk, rnd_normal()); break;
        case DS4RT_TYPE_BF16: {
            const uint16_t h = ds4rt_f32_to_bf16(rnd_normal());
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            break;
        }
        case DS4RT_TYPE_Q8_0:
        case DS4RT_TYPE_Q4_0:
        case DS4RT_TYPE_IQ2_XXS: put_f16(blk, s); break;
        case DS4RT_TYPE_Q4_K:
        case DS4RT_TYPE_Q5_K:
            put_f16(blk, s);
            put_f16(blk + 2, s);
            break;
        case DS4RT_TYPE_Q2_K:
            put_f16(blk + 80, s);
            put_f16(blk + 82, s);
            break;
        case DS4RT_TYPE_Q6_K: put_f16(blk + 208, s * 0.1f); break;
        case DS4RT_TYPE_MXFP4: blk[0] = (uint8_t)(118 + rnd() % 12); break;
        default: break;
        }
    }
}

static int failures;

static void fail(const char *isa, const char *type, const char *what) {
    printf("FAIL %s %s: %s\n", isa, type, what);
    failures++;
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static const uint32_t types[] = {DS4RT_TYPE_F32,  DS4RT_TYPE_F16,  DS4RT_TYPE_BF16, DS4RT_TYPE_Q8_0,
                                 DS4RT_TYPE_Q4_0, DS4RT_TYPE_MXFP4, DS4RT_TYPE_Q2_K, DS4RT_TYPE_Q4_K,
                                 DS4RT_TYPE_Q5_K, DS4RT_TYPE_Q6_K, DS4RT_TYPE_IQ2_XXS};

/* Column counts to try: block multiples that leave remainders in every kernel's loops.
 * Variant 2 is wide enough that 16 tokens split the columns into chunks (matmul.c); variants 3
 * and 4 have the short rows, multiples of 32 columns, that the whole-row kernels take (kernels.h):
 * all 17 tokens at once, resp. the sub-batches of up to 6 tokens, 6 rows resp. 37. */
#define N_VARIANTS 5
static int64_t pick_cols(uint32_t type, int variant) {
    int ok;
    const uint32_t at = ds4rt_act_type_for(type, &ok);
    static const int64_t q8_k[N_VARIANTS] = {256 * 9, 256, 256 * 13, 256, 256 * 3};
    static const int64_t q8_0[N_VARIANTS] = {32 * 27, 32, 32 * 75, 256, 32 * 24};
    static const int64_t f32[N_VARIANTS] = {1000, 7, 1000 + 64, 128, 1024};
    return at == DS4RT_TYPE_Q8_K ? q8_k[variant] : at == DS4RT_TYPE_Q8_0 ? q8_0[variant] : f32[variant];
}

static void check_type(const char *isa, uint32_t type, ds4rt_pool *pool1, ds4rt_pool *pool3) {
    const char *tname = ds4rt_type_lookup(type)->name;
    for (int variant = 0; variant < N_VARIANTS; variant++) {
        const int64_t cols = pick_cols(type, variant);
        const int64_t rows = variant == 1 ? 1 : variant == 3 ? 6 : 37;
        const int64_t n_tok = 17;
        uint64_t rb;
        ds4rt_type_row_bytes(type, cols, &rb);
        uint8_t *w = malloc((size_t)(rb * rows));
        float *x = malloc(sizeof(float) * (size_t)(n_tok * cols));
        float *y_ref = malloc(sizeof(float) * (size_t)(n_tok * rows));
        float *y = malloc(sizeof(float) * (size_t)(n_tok * rows));
        float *y1 = malloc(sizeof(float) * (size_t)rows);
        random_weights(type, w, rows, cols);
        for (int64_t i = 0; i < n_tok * cols; i++) x[i] = rnd_normal() * (i % 97 == 0 ? 40.0f : 1.0f);
        const ds4rt_weight wt = {.type = type, .data = w, .rows = rows, .cols = cols, .row_bytes = rb};

        /* reference: the scalar path, one thread, whole batch */
        ds4rt_cpu_isa_set("scalar");
        if (ds4rt_matmul(pool1, &wt, x, n_tok, y_ref) != DS4RT_OK) fail(isa, tname, ds4rt_last_error());
        ds4rt_cpu_isa_set(isa);

        /* this path, whole batch, 1 and 3 threads */
        if (ds4rt_matmul(pool1, &wt, x, n_tok, y) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(n_tok * rows)))
            fail(isa, tname, "batch of 17 (1 thread) differs from the scalar path");
        if (ds4rt_matmul(pool3, &wt, x, n_tok, y) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(n_tok * rows)))
            fail(isa, tname, "batch of 17 (3 threads) differs from the scalar path");
        /* batch invariance: every token alone, and batches of 2..16 starting anywhere */
        for (int64_t t = 0; t < n_tok; t++) {
            if (ds4rt_matmul(pool1, &wt, x + t * cols, 1, y1) != DS4RT_OK ||
                !same_bits(y1, y_ref + t * rows, (size_t)rows))
                fail(isa, tname, "n_tok=1 differs from the batched result");
        }
        for (int64_t nb = 2; nb < n_tok; nb++) {
            const int64_t t0 = (nb * 5) % (n_tok - nb + 1);
            if (ds4rt_matmul(pool3, &wt, x + t0 * cols, nb, y) != DS4RT_OK ||
                !same_bits(y, y_ref + t0 * rows, (size_t)(nb * rows)))
                fail(isa, tname, "a sub-batch differs from the full batch");
        }
        /* float64 check of the kernel against dequant(W) . dequant(rounded x) */
        if (variant == 0) {
            float *wd = malloc(sizeof(float) * (size_t)cols);
            int8_t *q = malloc((size_t)cols);
            float *sc = malloc(sizeof(float) * (size_t)cols);
            double *xv = malloc(sizeof(double) * (size_t)cols);
            int ok;
            const uint32_t at = ds4rt_act_type_for(type, &ok);
            const int64_t blk = at == DS4RT_TYPE_Q8_K ? 256 : at == DS4RT_TYPE_Q8_0 ? 32 : 1;
            double worst = 0;
            for (int64_t t = 0; t < 3; t++) {
                ds4rt_quantize_activation(type, x + t * cols, cols, q, sc);
                for (int64_t c = 0; c < cols; c++) xv[c] = blk == 1 ? sc[c] : (double)sc[c / blk] * q[c];
                for (int64_t r = 0; r < rows; r++) {
                    ds4rt_dequantize(type, w + r * rb, cols, wd);
                    double s = 0, mag = 0;
                    for (int64_t c = 0; c < cols; c++) {
                        s += (double)wd[c] * xv[c];
                        mag += fabs((double)wd[c] * xv[c]);
                    }
                    const double err = fabs(y_ref[t * rows + r] - s) / (mag > 0 ? mag : 1);
                    if (err > worst) worst = err;
                }
            }
            if (worst > 1e-5) fail(isa, tname, "kernel disagrees with float64 of the rounded operands");
            free(wd);
            free(q);
            free(sc);
            free(xv);
        }
        free(w);
        free(x);
        free(y_ref);
        free(y);
        free(y1);
    }
}

/* The X8 layout (repack.h): Q8_0 rows repacked for this path give bitwise the scalar path's
 * result on the file's bytes, alone, in batches (1 and 3 threads) and inside a matmul batch
 * beside file-layout jobs; rows padded past their blocks keep their padding; a layout that
 * does not fit the columns is refused. */
static void check_x8(const char *isa, ds4rt_pool *pool1, ds4rt_pool *pool3) {
    /* 128 and 256 * 3 + 128: rows that end with a half group (repack.h) */
    static const int64_t col_list[] = {256, 256 * 9, 256 * 13, 128, 256 * 3 + 128};
    static const int64_t row_list[] = {1, 37, 37, 37, 6};
    for (size_t v = 0; v < sizeof col_list / sizeof col_list[0]; v++) {
        const int64_t cols = col_list[v], rows = row_list[v], n_tok = 17;
        const uint64_t rb = (uint64_t)cols / 32 * 34 + (v == 1 ? 16 : 0); /* v == 1: padded rows */
        uint8_t *w = malloc((size_t)(rb * rows)), *w8 = malloc((size_t)(rb * rows));
        float *x = malloc(sizeof(float) * (size_t)(n_tok * cols));
        float *y_ref = malloc(sizeof(float) * (size_t)(n_tok * rows)), *y = malloc(sizeof(float) * (size_t)(n_tok * rows));
        for (int64_t r = 0; r < rows; r++) random_weights(DS4RT_TYPE_Q8_0, w + r * rb, 1, cols);
        for (int64_t i = 0; i < n_tok * cols; i++) x[i] = rnd_normal() * (i % 97 == 0 ? 40.0f : 1.0f);
        ds4rt_repack_q8_0_x8(w, w8, rows, cols, rb);
        if (v == 1 && memcmp(w8 + rb - 16, w + rb - 16, 16) != 0) fail(isa, "Q8_0 X8", "row padding not kept");
        const ds4rt_weight wt = {.type = DS4RT_TYPE_Q8_0, .data = w, .rows = rows, .cols = cols, .row_bytes = rb};
        ds4rt_weight w8t = wt;
        w8t.data = w8;
        w8t.layout = DS4RT_LAYOUT_Q8_0_X8;
        ds4rt_cpu_isa_set("scalar");
        if (ds4rt_matmul(pool1, &wt, x, n_tok, y_ref) != DS4RT_OK) fail(isa, "Q8_0 X8", ds4rt_last_error());
        ds4rt_cpu_isa_set(isa);
        if (ds4rt_matmul(pool1, &w8t, x, n_tok, y) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(n_tok * rows)))
            fail(isa, "Q8_0 X8", "batch of 17 (1 thread) differs from the scalar path on the file layout");
        if (ds4rt_matmul(pool3, &w8t, x, n_tok, y) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(n_tok * rows)))
            fail(isa, "Q8_0 X8", "batch of 17 (3 threads) differs from the scalar path on the file layout");
        for (int64_t t = 0; t < n_tok; t++)
            if (ds4rt_matmul(pool1, &w8t, x + t * cols, 1, y) != DS4RT_OK || !same_bits(y, y_ref + t * rows, (size_t)rows))
                fail(isa, "Q8_0 X8", "n_tok=1 differs from the batched result");
        for (int64_t nb = 2; nb < n_tok; nb++) {
            const int64_t t0 = (nb * 5) % (n_tok - nb + 1);
            if (ds4rt_matmul(pool3, &w8t, x + t0 * cols, nb, y) != DS4RT_OK ||
                !same_bits(y, y_ref + t0 * rows, (size_t)(nb * rows)))
                fail(isa, "Q8_0 X8", "a sub-batch differs from the full batch");
        }
        /* one dispatch with a file-layout job reading the same rows */
        float *y2 = malloc(sizeof(float) * (size_t)(3 * rows));
        const ds4rt_matmul_job jobs[2] = {{.w = w8t, .x = x, .n_tok = 3, .y = y}, {.w = wt, .x = x, .n_tok = 3, .y = y2}};
        if (ds4rt_matmul_batch(pool3, jobs, 2) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(3 * rows)) ||
            !same_bits(y2, y_ref, (size_t)(3 * rows)))
            fail(isa, "Q8_0 X8", "X8 and file-layout jobs of one batch differ from the scalar path");
        free(y2);
        free(w);
        free(w8);
        free(x);
        free(y_ref);
        free(y);
    }
    /* 32 * 9 columns: not whole groups of 8 blocks, nor a half group of 4 */
    uint8_t blk[9 * 34] = {0};
    float x[288] = {0}, y1;
    const ds4rt_weight bad = {.type = DS4RT_TYPE_Q8_0, .data = blk, .rows = 1, .cols = 288, .row_bytes = 9 * 34,
                              .layout = DS4RT_LAYOUT_Q8_0_X8};
    if (ds4rt_matmul(pool1, &bad, x, 1, &y1) != DS4RT_ERR_INVALID_ARGUMENT)
        fail(isa, "Q8_0 X8", "an X8 weight of 288 columns was accepted");
}

/* The R16 layout (repack.h): Q8_0 matrices of up to 384 columns in panels of 16 rows give
 * bitwise the scalar path's result on the file's bytes, alone, in batches (1 and 3 threads: the
 * pool's chunks do not fall on panel boundaries), every token alone and in sub-batches, and
 * inside a matmul batch beside X8 and file-layout jobs; shapes it cannot hold are refused. */
static void check_r16(const char *isa, ds4rt_pool *pool1, ds4rt_pool *pool3) {
    static const int64_t col_list[] = {256, 128, 384, 256};
    static const int64_t row_list[] = {64, 48, 32, 528}; /* 528: 33 panels, not a multiple of 4 */
    for (size_t v = 0; v < sizeof col_list / sizeof col_list[0]; v++) {
        const int64_t cols = col_list[v], rows = row_list[v], n_tok = 17;
        const uint64_t rb = (uint64_t)cols / 32 * 34;
        uint8_t *w = malloc((size_t)(rb * rows)), *wr = malloc((size_t)(rb * rows)), *w8 = malloc((size_t)(rb * rows));
        float *x = malloc(sizeof(float) * (size_t)(n_tok * cols));
        float *y_ref = malloc(sizeof(float) * (size_t)(n_tok * rows)), *y = malloc(sizeof(float) * (size_t)(n_tok * rows));
        for (int64_t r = 0; r < rows; r++) random_weights(DS4RT_TYPE_Q8_0, w + r * rb, 1, cols);
        for (int64_t i = 0; i < n_tok * cols; i++) x[i] = rnd_normal() * (i % 97 == 0 ? 40.0f : 1.0f);
        ds4rt_repack_q8_0_r16(w, wr, rows, cols, rb);
        ds4rt_repack_q8_0_x8(w, w8, rows, cols, rb);
        const ds4rt_weight wt = {.type = DS4RT_TYPE_Q8_0, .data = w, .rows = rows, .cols = cols, .row_bytes = rb};
        ds4rt_weight wrt = wt, w8t = wt;
        wrt.data = wr;
        wrt.layout = DS4RT_LAYOUT_Q8_0_R16;
        w8t.data = w8;
        w8t.layout = DS4RT_LAYOUT_Q8_0_X8;
        ds4rt_cpu_isa_set("scalar");
        if (ds4rt_matmul(pool1, &wt, x, n_tok, y_ref) != DS4RT_OK) fail(isa, "Q8_0 R16", ds4rt_last_error());
        ds4rt_cpu_isa_set(isa);
        if (ds4rt_matmul(pool1, &wrt, x, n_tok, y) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(n_tok * rows)))
            fail(isa, "Q8_0 R16", "batch of 17 (1 thread) differs from the scalar path on the file layout");
        if (ds4rt_matmul(pool3, &wrt, x, n_tok, y) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(n_tok * rows)))
            fail(isa, "Q8_0 R16", "batch of 17 (3 threads) differs from the scalar path on the file layout");
        for (int64_t t = 0; t < n_tok; t++)
            if (ds4rt_matmul(pool3, &wrt, x + t * cols, 1, y) != DS4RT_OK ||
                !same_bits(y, y_ref + t * rows, (size_t)rows))
                fail(isa, "Q8_0 R16", "n_tok=1 differs from the batched result");
        for (int64_t nb = 2; nb < n_tok; nb++) {
            const int64_t t0 = (nb * 5) % (n_tok - nb + 1);
            if (ds4rt_matmul(pool3, &wrt, x + t0 * cols, nb, y) != DS4RT_OK ||
                !same_bits(y, y_ref + t0 * rows, (size_t)(nb * rows)))
                fail(isa, "Q8_0 R16", "a sub-batch differs from the full batch");
        }
        /* one dispatch with X8 and file-layout jobs reading the same rows */
        float *y2 = malloc(sizeof(float) * (size_t)(3 * rows)), *y3 = malloc(sizeof(float) * (size_t)(3 * rows));
        const ds4rt_matmul_job jobs[3] = {{.w = w8t, .x = x, .n_tok = 3, .y = y2},
                                          {.w = wrt, .x = x, .n_tok = 3, .y = y},
                                          {.w = wt, .x = x, .n_tok = 3, .y = y3}};
        if (ds4rt_matmul_batch(pool3, jobs, 3) != DS4RT_OK || !same_bits(y, y_ref, (size_t)(3 * rows)) ||
            !same_bits(y2, y_ref, (size_t)(3 * rows)) || !same_bits(y3, y_ref, (size_t)(3 * rows)))
            fail(isa, "Q8_0 R16", "R16, X8 and file-layout jobs of one batch differ from the scalar path");
        free(y2);
        free(y3);
        free(w);
        free(wr);
        free(w8);
        free(x);
        free(y_ref);
        free(y);
    }
    /* rows not a multiple of 16, rows longer than 384 columns, padded rows */
    static uint8_t blk[32 * 16 * 34];
    static float x[512], y1[32];
    const ds4rt_weight bad[3] = {
        {.type = DS4RT_TYPE_Q8_0, .data = blk, .rows = 20, .cols = 256, .row_bytes = 8 * 34, .layout = DS4RT_LAYOUT_Q8_0_R16},
        {.type = DS4RT_TYPE_Q8_0, .data = blk, .rows = 16, .cols = 512, .row_bytes = 16 * 34, .layout = DS4RT_LAYOUT_Q8_0_R16},
        {.type = DS4RT_TYPE_Q8_0, .data = blk, .rows = 16, .cols = 256, .row_bytes = 8 * 34 + 2, .layout = DS4RT_LAYOUT_Q8_0_R16}};
    for (int i = 0; i < 3; i++)
        if (ds4rt_matmul(pool1, &bad[i], x, 1, y1) != DS4RT_ERR_INVALID_ARGUMENT)
            fail(isa, "Q8_0 R16", "a weight R16 cannot hold was accepted");
}

/* parallel_for: every item exactly once, whatever the thread count, size and grain; and pools
 * destroyed right after creation (workers that have not started yet must still stop). */
typedef struct {
    _Atomic int *hits;
} cover_ctx;

static void cover_fn(void *vctx, int64_t b, int64_t e, int thread) {
    cover_ctx *c = vctx;
    (void)thread;
    for (int64_t i = b; i < e; i++) c->hits[i]++;
}

static void check_pool(void) {
    for (int i = 0; i < 200; i++) {
        ds4rt_pool *p = NULL;
        if (ds4rt_pool_create(1 + i % 5, &p) != DS4RT_OK) fail("pool", "-", "create");
        ds4rt_pool_destroy(p);
    }
    static const int64_t sizes[] = {1, 2, 7, 64, 1000, 100003};
    _Atomic int *hits = calloc(100003, sizeof *hits);
    for (int th = 1; th <= 6; th += 1) {
        ds4rt_pool *p = NULL;
        ds4rt_pool_create(th, &p);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (int64_t grain = 1; grain <= 4096; grain *= 8)
                for (int rep = 0; rep < 3; rep++) {
                    const int64_t n = sizes[k];
                    for (int64_t i = 0; i < n; i++) hits[i] = 0;
                    cover_ctx c = {hits};
                    ds4rt_pool_parallel_for(p, n, grain, cover_fn, &c);
                    for (int64_t i = 0; i < n; i++)
                        if (hits[i] != 1) {
                            fail("pool", "-", "parallel_for visited an item other than once");
                            i = n;
                        }
                }
        ds4rt_pool_destroy(p);
    }
    free(hits);
    printf("%s pool\n", failures ? "FAIL" : "OK");
}

/* ds4rt_matmul_batch: every job's y bitwise what ds4rt_matmul gives it alone, with jobs of
 * mixed types, sizes and token counts, some sharing their input rows (one conversion) and one
 * empty; and more jobs than allowed is an error that computes nothing. */
static void check_batch(const char *isa, ds4rt_pool *pool) {
    enum { NJ = 9, XS = 3 };
    static const uint32_t jt[NJ] = {DS4RT_TYPE_IQ2_XXS, DS4RT_TYPE_IQ2_XXS, DS4RT_TYPE_Q2_K, DS4RT_TYPE_Q8_0,
                                    DS4RT_TYPE_Q8_0,    DS4RT_TYPE_F16,     DS4RT_TYPE_Q4_K, DS4RT_TYPE_F32,
                                    DS4RT_TYPE_Q6_K};
    const int64_t cols = 512, max_tok = 5;
    float *xs[XS];
    for (int i = 0; i < XS; i++) {
        xs[i] = malloc(sizeof(float) * (size_t)(max_tok * cols));
        for (int64_t k = 0; k < max_tok * cols; k++) xs[i][k] = rnd_normal();
    }
    ds4rt_matmul_job jobs[NJ];
    float *want[NJ];
    uint8_t *ws[NJ];
    for (int j = 0; j < NJ; j++) {
        const int64_t rows = 1 + (int64_t)(rnd() % 70);
        const int64_t n_tok = j == 4 ? 0 : 1 + (int64_t)(j % 3 == 0 ? 0 : rnd() % max_tok);
        uint64_t rb;
        ds4rt_type_row_bytes(jt[j], cols, &rb);
        ws[j] = malloc((size_t)(rb * (uint64_t)rows));
        random_weights(jt[j], ws[j], rows, cols);
        jobs[j] = (ds4rt_matmul_job){.w = {.type = jt[j], .data = ws[j], .rows = rows, .cols = cols, .row_bytes = rb},
                                     .x = xs[j % XS], /* jobs j, j+3, j+6 share their rows */
                                     .n_tok = n_tok,
                                     .y = malloc(sizeof(float) * (size_t)(max_tok * rows))};
        want[j] = malloc(sizeof(float) * (size_t)(max_tok * rows));
        if (ds4rt_matmul(pool, &jobs[j].w, jobs[j].x, n_tok, want[j]) != DS4RT_OK) fail(isa, "batch", ds4rt_last_error());
    }
    if (ds4rt_matmul_batch(pool, jobs, NJ) != DS4RT_OK) fail(isa, "batch", ds4rt_last_error());
    for (int j = 0; j < NJ; j++)
        if (!same_bits(jobs[j].y, want[j], (size_t)(jobs[j].n_tok * jobs[j].w.rows)))
            fail(isa, "batch", "a job of a batch differs from the same product alone");
    if (ds4rt_matmul_batch(pool, jobs, DS4RT_MATMUL_MAX_JOBS + 1) != DS4RT_ERR_INVALID_ARGUMENT)
        fail(isa, "batch", "more than DS4RT_MATMUL_MAX_JOBS jobs accepted");
    for (int j = 0; j < NJ; j++) {
        free(ws[j]);
        free(jobs[j].y);
        free(want[j]);
    }
    for (int i = 0; i < XS; i++) free(xs[i]);
}

int main(void) {
    check_pool();
    ds4rt_pool *pool1 = NULL, *pool3 = NULL;
    if (ds4rt_pool_create(1, &pool1) != DS4RT_OK || ds4rt_pool_create(3, &pool3) != DS4RT_OK) {
        printf("FAIL pool_create: %s\n", ds4rt_last_error());
        return 1;
    }
    static const char *isas[] = {"scalar", "avx2", "avx512", "avx512-vnni", "neon", "neon-dotprod"};
    int ran = 0;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const char *why = NULL;
        if (ds4rt_cpu_lookup(isas[i], &why) == NULL) {
            printf("SKIP %s: %s\n", isas[i], why);
            continue;
        }
        const int before = failures;
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) check_type(isas[i], types[k], pool1, pool3);
        for (int rep = 0; rep < 4; rep++) check_batch(isas[i], rep % 2 ? pool3 : pool1);
        check_x8(isas[i], pool1, pool3);
        check_r16(isas[i], pool1, pool3);
        printf("%s %s: %zu types\n", failures == before ? "OK" : "FAIL", isas[i], sizeof types / sizeof types[0]);
        ran++;
    }
    ds4rt_pool_destroy(pool1);
    ds4rt_pool_destroy(pool3);
    printf("%s: %d paths, %d failures\n", failures ? "FAILED" : "PASSED", ran, failures);
    return failures ? 1 : 0;
}
