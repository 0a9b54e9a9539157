/*
 * test_mm.c - the GPU matrix products (hip/mm.h) against the CPU backend's (docs/GPU.md).
 *
 * The oracle is what the CPU backend's matmul and get_rows ops call (src/backend/cpu/
 * cpu_matmul.c, cpu_rows.c): ds4rt_matmul and ds4rt_dequantize_row. For every weight type, on
 * random blocks with sane scales and random activations (with all-zero blocks, tied maxima and
 * large values mixed in), odd shapes (rows not a multiple of any tile; the smallest and a few
 * larger column counts; 16-byte aligned and unaligned rows), it checks, all BITWISE:
 *   - the activation conversion against ds4rt_quantize_activation;
 *   - matmul of n = 1..17 and 40 rows against the CPU;
 *   - batch invariance on the GPU: each row computed alone equals the row in the batch;
 *   - the expert-stack product (ids on the device, x per token and per slot) against the CPU
 *     product of each slot's expert, and an invalid id giving NaN rows;
 *   - get_rows (with copies) against the CPU dequantiser, and an invalid id giving NaN.
 * Prints one line per check and "test_mm: N checks, M failed"; exit status 1 on any failure.
 * Usage: test_mm [--seed N] [--type NAME] [--quick] [--shape RxC [--misalign]] (one shape
 * instead of the built-in set). tests/test_gpu_mm.py runs it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds4rt.h"
#include "ds4rt_testing.h"
#include "gk.h"
#include "matmul.h"
#include "mm.h"
#include "mm_random.h"
#include "ops.h"

static int n_checks, n_failed;

static void check(int ok, const char *type, const char *what, const char *detail) {
    n_checks++;
    if (!ok) n_failed++;
    printf("%-4s %-8s %-44s %s\n", ok ? "ok" : "FAIL", type, what, detail ? detail : "");
}

/* ---- device helpers ---- */

static void *stream;

static void *dalloc(size_t bytes) {
    void *p = NULL;
    if (ds4rt_gk_malloc(&p, bytes ? bytes : 16) != DS4RT_GK_OK) {
        fprintf(stderr, "device allocation of %zu bytes failed: %s\n", bytes, ds4rt_gk_last_error());
        exit(2);
    }
    return p;
}

static void up(void *d, const void *h, size_t bytes) {
    if (ds4rt_gk_memcpy_h2d(d, h, bytes, stream) != DS4RT_GK_OK || ds4rt_gk_stream_sync(stream) != DS4RT_GK_OK) {
        fprintf(stderr, "upload: %s\n", ds4rt_gk_last_error());
        exit(2);
    }
}

static void down(void *h, const void *d, size_t bytes) {
    if (ds4rt_gk_memcpy_d2h(h, d, bytes, stream) != DS4RT_GK_OK || ds4rt_gk_stream_sync(stream) != DS4RT_GK_OK) {
        fprintf(stderr, "download: %s\n", ds4rt_gk_last_error());
        exit(2);
    }
}

static int gk_ok(int st, const char *what) {
    if (st == DS4RT_GK_OK) st = ds4rt_gk_stream_sync(stream);
    if (st != DS4RT_GK_OK) fprintf(stderr, "%s: %s\n", what, ds4rt_gk_last_error());
    return st == DS4RT_GK_OK;
}

/* First differing float (bitwise; NaN-safe), or -1. */
static int64_t first_diff(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4) != 0) return i;
    return -1;
}

static void report_diff(const type_case *tc, const char *what, const float *got, const float *ref, int64_t n) {
    char d[160] = "";
    const int64_t i = first_diff(got, ref, n);
    if (i >= 0) snprintf(d, sizeof d, "first difference at %lld: gpu %.9g cpu %.9g", (long long)i, got[i], ref[i]);
    check(i < 0, tc->name, what, d);
}

/* ---- the checks of one type and shape ---- */

#define NMAX 40

static void check_shape(const type_case *tc, int64_t rows, int64_t cols, int misalign, int quick) {
    uint64_t rb = 0;
    if (ds4rt_type_row_bytes(tc->type, cols, &rb) != DS4RT_OK) return;
    /* misaligned: rows 2 bytes past a 16-byte boundary (row_bytes stays as packed) */
    const size_t off = misalign ? 2 : 0;
    const size_t wbytes = (size_t)(rb * rows);
    char what[96];

    uint8_t *w = malloc(wbytes);
    random_rows(tc, w, rows, cols, rb);
    float *x = malloc(sizeof(float) * NMAX * cols);
    random_x(x, NMAX, cols);
    float *ref = malloc(sizeof(float) * NMAX * rows), *got = malloc(sizeof(float) * NMAX * rows);
    float *one = malloc(sizeof(float) * rows);

    uint8_t *dw_base = dalloc(wbytes + 16);
    const void *dw = dw_base + off;
    up(dw_base + off, w, wbytes);
    float *dx = dalloc(sizeof(float) * NMAX * cols), *dy = dalloc(sizeof(float) * NMAX * rows);
    up(dx, x, sizeof(float) * NMAX * cols);
    const size_t sb = ds4rt_gk_matmul_scratch_bytes(tc->type, cols, NMAX);
    void *dact = dalloc(sb);
    const ds4rt_gk_weight gw = {tc->type, dw, rows, cols, rb};
    const ds4rt_weight cw = {.type = tc->type, .data = w, .rows = rows, .cols = cols, .row_bytes = rb};
    const char *al = misalign ? "unaligned" : "aligned";

    /* matmul of n rows, n = 1..17 and 40 (a second token tile) */
    for (int n = 1; n <= NMAX; n++) {
        if (n > 17 && n != NMAX) continue;
        if (quick && n > 3 && n != 17 && n != NMAX) continue;
        if (ds4rt_matmul(NULL, &cw, x, n, ref) != DS4RT_OK) {
            check(0, tc->name, "cpu matmul", ds4rt_last_error());
            continue;
        }
        snprintf(what, sizeof what, "matmul %lldx%lld n=%d %s", (long long)rows, (long long)cols, n, al);
        if (!gk_ok(ds4rt_gk_matmul(&gw, dx, n, dy, dact, sb, stream), what)) {
            check(0, tc->name, what, ds4rt_gk_last_error());
            continue;
        }
        down(got, dy, sizeof(float) * n * rows);
        report_diff(tc, what, got, ref, (int64_t)n * rows);
    }

    /* batch invariance on the GPU: each row of the 17-row batch alone */
    if (!gk_ok(ds4rt_gk_matmul(&gw, dx, 17, dy, dact, sb, stream), "matmul 17")) exit(2);
    down(got, dy, sizeof(float) * 17 * rows);
    int inv_ok = 1;
    for (int i = 0; i < 17 && inv_ok; i++) {
        if (!gk_ok(ds4rt_gk_matmul(&gw, dx + (size_t)i * cols, 1, dy, dact, sb, stream), "matmul 1")) exit(2);
        down(one, dy, sizeof(float) * rows);
        inv_ok = first_diff(one, got + (size_t)i * rows, rows) < 0;
    }
    snprintf(what, sizeof what, "batch invariance %lldx%lld %s", (long long)rows, (long long)cols, al);
    check(inv_ok, tc->name, what, NULL);

    /* the activation conversion itself, row 0..3 (quantised pairings) */
    if (!is_float_type(tc->type) && !misalign) {
        int8_t *q = malloc((size_t)cols);
        float *sc = malloc(sizeof(float) * cols);
        uint8_t *act = malloc(sb);
        if (!gk_ok(ds4rt_gk_act_convert(tc->type, dx, NMAX, cols, dact, sb, stream), "act_convert")) exit(2);
        down(act, dact, sb);
        const size_t stride = sb / NMAX;
        const int64_t blk = tc->type == DS4RT_TYPE_Q8_0 || tc->type == DS4RT_TYPE_Q4_0 || tc->type == DS4RT_TYPE_MXFP4 ? 32 : 256;
        const size_t d_off = ((size_t)cols + 15) & ~(size_t)15;
        int ok = 1;
        for (int t = 0; t < 6 && ok; t++) {
            ds4rt_quantize_activation(tc->type, x + (size_t)t * cols, cols, q, sc);
            ok = memcmp(q, act + t * stride, (size_t)cols) == 0 &&
                 memcmp(sc, act + t * stride + d_off, sizeof(float) * (size_t)(cols / blk)) == 0;
        }
        snprintf(what, sizeof what, "activation conversion cols=%lld", (long long)cols);
        check(ok, tc->name, what, NULL);
        free(q), free(sc), free(act);
    }

    /* grouped product (the attention's grouped output): G groups of `rows` rows, group g on
     * columns [g cols, (g + 1) cols) of each row, against the CPU's product of each group */
    if (!misalign && ds4rt_gk_matmul_grouped_supported(&(ds4rt_gk_weight){tc->type, dw, 4 * rows, cols, rb}, 4, 1)) {
        const int G = 4;
        uint8_t *wg = malloc(wbytes * G);
        random_rows(tc, wg, G * rows, cols, rb);
        float *xg = malloc(sizeof(float) * 8 * G * cols), *yg = malloc(sizeof(float) * 8 * G * rows);
        random_x(xg, 8, G * cols);
        uint8_t *dwg = dalloc(wbytes * G);
        up(dwg, wg, wbytes * G);
        float *dxg = dalloc(sizeof(float) * 8 * G * cols), *dyg = dalloc(sizeof(float) * 8 * G * rows);
        up(dxg, xg, sizeof(float) * 8 * G * cols);
        const size_t sbg = ds4rt_gk_act_bytes(tc->type, G * cols, 8);
        void *dactg = dalloc(sbg);
        const ds4rt_gk_weight gwg = {tc->type, dwg, G * rows, cols, rb};
        int ok = 1;
        char d[160] = "";
        for (int n = 1; n <= 8 && ok; n += n < 2 ? 1 : 3) {
            if (!gk_ok(ds4rt_gk_act_convert(tc->type, dxg, n, G * cols, dactg, sbg, stream), "act_convert") ||
                !gk_ok(ds4rt_gk_matmul_grouped_act(&gwg, (uint32_t)G, dactg, n, dyg, stream), "matmul_grouped"))
                exit(2);
            down(yg, dyg, sizeof(float) * n * G * rows);
            for (int g = 0; g < G && ok; g++)
                for (int i = 0; i < n && ok; i++) {
                    const ds4rt_weight wc = {
                        .type = tc->type, .data = wg + (size_t)g * rows * rb, .rows = rows, .cols = cols, .row_bytes = rb};
                    ds4rt_matmul(NULL, &wc, xg + (size_t)i * G * cols + (size_t)g * cols, 1, one);
                    const int64_t at = first_diff(yg + (size_t)i * G * rows + (size_t)g * rows, one, rows);
                    ok = at < 0;
                    if (!ok) snprintf(d, sizeof d, "n=%d group %d token %d row %lld", n, g, i, (long long)at);
                }
        }
        snprintf(what, sizeof what, "grouped %dx%lldx%lld", G, (long long)rows, (long long)cols);
        check(ok, tc->name, what, d);
        /* the fused form (each block converts its group's activations) where it is taken */
        for (int n = 1; n <= 4; n++) {
            if (!ds4rt_gk_matmul_grouped_fused_supported(&gwg, (uint32_t)G, n)) continue;
            float *yf = malloc(sizeof(float) * n * G * rows);
            if (!gk_ok(ds4rt_gk_act_convert(tc->type, dxg, n, G * cols, dactg, sbg, stream), "act_convert") ||
                !gk_ok(ds4rt_gk_matmul_grouped_act(&gwg, (uint32_t)G, dactg, n, dyg, stream), "matmul_grouped"))
                exit(2);
            down(yg, dyg, sizeof(float) * n * G * rows);
            if (!gk_ok(ds4rt_gk_matmul_grouped_fused(&gwg, (uint32_t)G, dxg, n, dyg, stream), "matmul_grouped_fused"))
                exit(2);
            down(yf, dyg, sizeof(float) * n * G * rows);
            snprintf(what, sizeof what, "grouped fused n=%d %dx%lldx%lld", n, G, (long long)rows, (long long)cols);
            check(first_diff(yf, yg, (int64_t)n * G * rows) < 0, tc->name, what, NULL);
            free(yf);
        }
        ds4rt_gk_free(dwg), ds4rt_gk_free(dxg), ds4rt_gk_free(dyg), ds4rt_gk_free(dactg);
        free(wg), free(xg), free(yg);
    }

    /* the SwiGLU computed inside the conversion (the MoE's down activations) equals the SwiGLU
     * kernel followed by the conversion, byte for byte, for the rows of x as g and rows 8.. as u */
    if (!misalign) {
        const int nr = 6;
        const float clamp = 1.5f; /* clamps part of the random values */
        float wt[6] = {1.0f, 0.25f, -0.5f, 3.0f, 1e-3f, 0.75f};
        float *dwt = dalloc(sizeof wt), *dh = dalloc(sizeof(float) * nr * cols);
        up(dwt, wt, sizeof wt);
        uint8_t *zero = calloc(1, sb), *a1 = malloc(sb), *a2 = malloc(sb);
        void *dact2 = dalloc(sb);
        up(dact, zero, sb);
        up(dact2, zero, sb);
        const float *dg = dx, *du = dx + (size_t)8 * cols;
        int ok = 1;
        for (int weighted = 0; weighted < 2 && ok; weighted++) {
            if (!gk_ok(ds4rt_gk_swiglu(nr, (uint32_t)cols, dg, (uint64_t)cols, du, (uint64_t)cols, clamp,
                                       weighted ? dwt : NULL, dh, (uint64_t)cols, stream),
                       "swiglu") ||
                !gk_ok(ds4rt_gk_act_convert(tc->type, dh, nr, cols, dact, sb, stream), "act_convert") ||
                !gk_ok(ds4rt_gk_swiglu_act(tc->type, nr, (uint32_t)cols, dg, du, clamp, weighted ? dwt : NULL, dact2,
                                           sb, stream),
                       "swiglu_act"))
                exit(2);
            down(a1, dact, sb);
            down(a2, dact2, sb);
            ok = memcmp(a1, a2, sb) == 0;
        }
        snprintf(what, sizeof what, "swiglu_act == swiglu + act_convert cols=%lld", (long long)cols);
        check(ok, tc->name, what, NULL);
        ds4rt_gk_free(dwt), ds4rt_gk_free(dh), ds4rt_gk_free(dact2);
        free(zero), free(a1), free(a2);
    }

    /* expert stack: E copies of random matrices, stride padded to a 16-byte multiple + 16 */
    {
        const uint32_t E = 5, k = 3;
        const int ntok = quick ? 3 : 7;
        const uint64_t stride = ((rb * rows + 15) & ~(uint64_t)15) + 16 + off * 0;
        uint8_t *ws = calloc(E, stride);
        for (uint32_t e = 0; e < E; e++) random_rows(tc, ws + e * stride, rows, cols, rb);
        uint8_t *dws_base = dalloc(E * stride + 16);
        up(dws_base + off, ws, E * stride);
        int32_t ids[NMAX];
        for (int j = 0; j < ntok * (int)k; j++) ids[j] = (int32_t)(next_u64() % E);
        ids[4] = -1; /* an invalid id: NaN rows, nothing read */
        int32_t *dids = dalloc(sizeof ids);
        up(dids, ids, sizeof ids);
        const ds4rt_gk_weight g0 = {tc->type, dws_base + off, rows, cols, rb};
        for (int per_slot = 0; per_slot < 2; per_slot++) {
            const int n_slots = ntok * (int)k, x_div = per_slot ? 1 : (int)k, nx = n_slots / x_div;
            if (!gk_ok(ds4rt_gk_act_convert(tc->type, dx, nx, cols, dact, sb, stream), "act_convert")) exit(2);
            if (!gk_ok(ds4rt_gk_matmul_experts_act(&g0, stride, E, dids, n_slots, (uint32_t)x_div, dact, dy, stream),
                       "matmul_experts"))
                exit(2);
            down(got, dy, sizeof(float) * n_slots * rows);
            int ok = 1;
            char d[160] = "";
            for (int j = 0; j < n_slots && ok; j++) {
                if (ids[j] < 0) {
                    for (int64_t r = 0; r < rows && ok; r++) ok = isnan(got[(size_t)j * rows + r]);
                    if (!ok) snprintf(d, sizeof d, "slot %d with an invalid id is not NaN", j);
                    continue;
                }
                const ds4rt_weight we = {
                    .type = tc->type, .data = ws + ids[j] * stride, .rows = rows, .cols = cols, .row_bytes = rb};
                ds4rt_matmul(NULL, &we, x + (size_t)(j / x_div) * cols, 1, one);
                const int64_t i = first_diff(got + (size_t)j * rows, one, rows);
                ok = i < 0;
                if (!ok) snprintf(d, sizeof d, "slot %d expert %d row %lld: gpu %.9g cpu %.9g", j, ids[j], (long long)i,
                                  got[(size_t)j * rows + i], one[i]);
            }
            snprintf(what, sizeof what, "experts %lldx%lld %s %s", (long long)rows, (long long)cols,
                     per_slot ? "x/slot" : "x/token", al);
            check(ok, tc->name, what, d);
        }
        /* a pair of stacks in one launch (the MoE's gate and up) equals the two launches */
        {
            uint8_t *ws2 = calloc(E, stride);
            for (uint32_t e = 0; e < E; e++) random_rows(tc, ws2 + e * stride, rows, cols, rb);
            uint8_t *dws2_base = dalloc(E * stride + 16);
            up(dws2_base + off, ws2, E * stride);
            const ds4rt_gk_weight g1 = {tc->type, dws2_base + off, rows, cols, rb};
            const int n_slots = ntok * (int)k;
            float *dy2 = dalloc(sizeof(float) * NMAX * rows), *pair = malloc(sizeof(float) * 2 * n_slots * rows);
            if (!gk_ok(ds4rt_gk_act_convert(tc->type, dx, ntok, cols, dact, sb, stream), "act_convert") ||
                !gk_ok(ds4rt_gk_matmul_experts2_act(&g0, &g1, stride, E, dids, n_slots, k, dact, dy, dy2, stream),
                       "matmul_experts2"))
                exit(2);
            down(pair, dy, sizeof(float) * n_slots * rows);
            down(pair + (size_t)n_slots * rows, dy2, sizeof(float) * n_slots * rows);
            int ok = 1;
            for (int m = 0; m < 2 && ok; m++) {
                if (!gk_ok(ds4rt_gk_matmul_experts_act(m ? &g1 : &g0, stride, E, dids, n_slots, k, dact, dy, stream),
                           "matmul_experts"))
                    exit(2);
                down(got, dy, sizeof(float) * n_slots * rows);
                const float *p = pair + (size_t)m * n_slots * rows;
                for (int64_t i = 0; i < (int64_t)n_slots * rows && ok; i++) /* NaN rows included, as bits */
                    ok = memcmp(&p[i], &got[i], sizeof(float)) == 0;
            }
            snprintf(what, sizeof what, "expert pair == two expert products %s", al);
            check(ok, tc->name, what, NULL);
            const ds4rt_gk_weight other = {tc->type, dws2_base + off, rows + 1, cols, rb};
            check(ds4rt_gk_matmul_experts2_act(&g0, &other, stride, E, dids, n_slots, k, dact, dy, dy2, stream) ==
                      DS4RT_GK_ERR_ARGUMENT,
                  tc->name, "expert pair of unlike stacks refused", ds4rt_gk_last_error());
            ds4rt_gk_free(dws2_base), ds4rt_gk_free(dy2);
            free(ws2), free(pair);
        }
        /* the expert product equals the dense product of that expert (GPU against GPU) */
        {
            const ds4rt_gk_weight ge = {tc->type, dws_base + off + ids[0] * stride, rows, cols, rb};
            if (!gk_ok(ds4rt_gk_act_convert(tc->type, dx, ntok, cols, dact, sb, stream), "act_convert")) exit(2);
            if (!gk_ok(ds4rt_gk_matmul_experts_act(&g0, stride, E, dids, 1, k, dact, dy, stream), "experts 1")) exit(2);
            down(one, dy, sizeof(float) * rows);
            if (!gk_ok(ds4rt_gk_matmul_act(&ge, dact, 1, dy, stream), "matmul_act")) exit(2);
            down(got, dy, sizeof(float) * rows);
            snprintf(what, sizeof what, "experts == per-expert matmul %s", al);
            check(first_diff(one, got, rows) < 0, tc->name, what, NULL);
        }
        ds4rt_gk_free(dids);
        ds4rt_gk_free(dws_base);
        free(ws);
    }

    /* get_rows with 2 copies, and an invalid id */
    {
        const int nid = 5;
        int32_t ids[5] = {(int32_t)(rows - 1), 0, (int32_t)(next_u64() % rows), (int32_t)rows, (int32_t)(rows / 2)};
        int32_t *dids = dalloc(sizeof ids);
        up(dids, ids, sizeof ids);
        float *dout = dalloc(sizeof(float) * nid * 2 * cols);
        float *out = malloc(sizeof(float) * nid * 2 * cols), *deq = malloc(sizeof(float) * cols);
        if (!gk_ok(ds4rt_gk_get_rows(&gw, dids, nid, 2, dout, stream), "get_rows")) exit(2);
        down(out, dout, sizeof(float) * nid * 2 * cols);
        int ok = 1;
        for (int i = 0; i < nid && ok; i++)
            for (int c = 0; c < 2 && ok; c++) {
                const float *o = out + ((size_t)i * 2 + c) * cols;
                if (ids[i] >= rows) {
                    for (int64_t e = 0; e < cols && ok; e++) ok = isnan(o[e]);
                    continue;
                }
                ds4rt_dequantize_row(tc->type, w + (size_t)ids[i] * rb, cols, deq);
                ok = first_diff(o, deq, cols) < 0;
            }
        snprintf(what, sizeof what, "get_rows %lldx%lld %s", (long long)rows, (long long)cols, al);
        check(ok, tc->name, what, NULL);
        ds4rt_gk_free(dids), ds4rt_gk_free(dout);
        free(out), free(deq);
    }

    ds4rt_gk_free(dw_base), ds4rt_gk_free(dx), ds4rt_gk_free(dy), ds4rt_gk_free(dact);
    free(w), free(x), free(ref), free(got), free(one);
}

/* Arguments the launchers must refuse, with the status they must give. */
static void check_refusals(void) {
    int8_t dummy[64];
    const ds4rt_gk_weight q3 = {DS4RT_TYPE_Q3_K, dummy, 1, 256, 110};
    check(ds4rt_gk_mm_supports(DS4RT_TYPE_Q3_K) == 0, "-", "Q3_K is not supported", NULL);
    check(ds4rt_gk_matmul_act(&q3, dummy, 1, (float *)(void *)dummy, stream) == DS4RT_GK_ERR_UNSUPPORTED, "-",
          "unsupported type refused", ds4rt_gk_last_error());
    const ds4rt_gk_weight bad = {DS4RT_TYPE_Q8_0, dummy, 4, 48, 34 * 2};
    check(ds4rt_gk_matmul_act(&bad, dummy, 1, (float *)(void *)dummy, stream) == DS4RT_GK_ERR_ARGUMENT, "-",
          "cols not a block multiple refused", ds4rt_gk_last_error());
    const ds4rt_gk_weight shortrow = {DS4RT_TYPE_Q8_0, dummy, 4, 64, 34};
    check(ds4rt_gk_matmul_act(&shortrow, dummy, 1, (float *)(void *)dummy, stream) == DS4RT_GK_ERR_ARGUMENT, "-",
          "row_bytes too small refused", ds4rt_gk_last_error());
    check(ds4rt_gk_act_convert(DS4RT_TYPE_Q8_0, (float *)(void *)dummy, 1, 32, dummy, 8, stream) == DS4RT_GK_ERR_ARGUMENT,
          "-", "scratch too small refused", ds4rt_gk_last_error());
    /* the GPU computes exactly the types the CPU computes (the type ids agree, too: a wrong id
     * would fail every product below) */
    int same = 1;
    char d[64] = "";
    for (uint32_t t = 0; t < DS4RT_TYPE_COUNT; t++) {
        ds4rt_type_info ti;
        const int cpu = ds4rt_type_get_info(t, &ti) == DS4RT_OK && ti.compute;
        if (cpu != ds4rt_gk_mm_supports(t)) {
            same = 0;
            snprintf(d, sizeof d, "type %u: cpu %d gpu %d", t, cpu, ds4rt_gk_mm_supports(t));
        }
    }
    check(same, "-", "supported types are the CPU's", d);
}

int main(int argc, char **argv) {
    uint64_t seed = 1;
    const char *only = NULL;
    int quick = 0, misalign_only = 0;
    long long shape_rows = 0, shape_cols = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--type") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            if (sscanf(argv[++i], "%lldx%lld", &shape_rows, &shape_cols) != 2) shape_rows = 0;
        } else if (!strcmp(argv[i], "--misalign")) misalign_only = 1;
        else {
            fprintf(stderr, "usage: test_mm [--seed N] [--type NAME] [--quick] [--shape RxC [--misalign]]\n");
            return 2;
        }
    }
    rng = seed;
    int ndev = 0;
    if (ds4rt_gk_device_count(&ndev) != DS4RT_GK_OK || ndev == 0) {
        printf("test_mm: no GPU device (%s)\n", ds4rt_gk_last_error());
        return 77;
    }
    if (ds4rt_gk_stream_create(&stream) != DS4RT_GK_OK) {
        fprintf(stderr, "stream: %s\n", ds4rt_gk_last_error());
        return 2;
    }
    /* the forms this process takes (DS4RT_GPU_QS_IQ2, DS4RT_GPU_QS_Q2K): tests/test_gpu_mm.py runs
     * the program under each and checks that the line says so */
    printf("info forms %s\n", ds4rt_gk_mm_forms());
    check_refusals();
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) {
        const type_case *tc = &TYPES[i];
        if (only && strcmp(only, tc->name)) continue;
        const int k = is_float_type(tc->type) ? 1 : (tc->type == DS4RT_TYPE_Q8_0 || tc->type == DS4RT_TYPE_Q4_0 ||
                                                     tc->type == DS4RT_TYPE_MXFP4) ? 32 : 256;
        /* shapes: rows not multiples of the tiles; cols: one block, odd block counts, one that
         * spans several staging steps; float types also a count that is no lane period */
        if (shape_rows > 0) { /* one given shape (tests/test_gpu_mm.py searches them) */
            check_shape(tc, shape_rows, shape_cols, misalign_only, quick);
            continue;
        }
        /* float types also 4160 columns: mm_fs_kernel's 4096- and 2048-column steps with a partial
         * last step (352 and 96 take its 1024-column variant) */
        const int64_t shapes[][2] = {{13, k == 1 ? 7 : k}, {37, k == 1 ? 96 : 3 * k}, {9, k == 1 ? 352 : k == 32 ? 2080 : 4352},
                                     {5, 4160}};
        /* 4160 is also the 32-element types' two staging steps of mm_qt_kernel (128 + 2 blocks) */
        const size_t n_shapes = sizeof shapes / sizeof shapes[0] - (k == 256 ? 1 : 0);
        for (size_t s = 0; s < n_shapes; s++)
            for (int mis = 0; mis < 2; mis++) {
                if (quick && mis && s != 1) continue;
                check_shape(tc, shapes[s][0], shapes[s][1], mis, quick);
            }
        /* float types: the hyper-connection mix's shape (up to 16 tokens: mm_fs1_kernel, four steps) */
        if (k == 1) check_shape(tc, 24, 16384, 0, quick);
    }
    ds4rt_gk_stream_destroy(stream);
    printf("test_mm: %d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
