/*
 * bench_mm.c - speed of the GPU matrix products (hip/mm.h) against the byte floor.
 *
 * For each weight type and n (rows of x) it times the product alone (ds4rt_gk_matmul_act, the
 * activations converted beforehand) and with the conversion (ds4rt_gk_matmul), averaging many
 * back-to-back launches on one stream (wall clock around a synchronised batch, so launch costs
 * are included the way a non-graph pass pays them). It also times the MoE expert product
 * (ds4rt_gk_matmul_experts_act: n tokens x k slots of a stack of experts, ids on the device) and
 * a device-to-device copy, whose bandwidth (bytes read + bytes written per second) defines the
 * floor: floor_us = weight bytes the call must read / copy bandwidth; of_floor = floor_us / us.
 *
 * Output: one JSON object on stdout. Usage:
 *   bench_mm [--rows R] [--cols C] [--types F16,Q8_0,...] [--ns 1,2,4,8,16,17] [--reps N]
 *            [--experts E] [--k K] [--erows R] [--ecols C] [--quick]
 * Defaults: 4096 x 4096 dense, 256 experts of 2048 x 4096, k = 6, every type, n = 1 2 3 4 6 8 12
 * 16 17 32. tools/gpu_device_run.sh (the H200 run) calls it; --quick is for HIP-CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ds4rt.h"
#include "gk.h"
#include "mm.h"
#include "mm_random.h"

static void *stream;

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void die(const char *what) {
    fprintf(stderr, "bench_mm: %s: %s\n", what, ds4rt_gk_last_error());
    exit(2);
}

static void *dalloc(size_t bytes) {
    void *p = NULL;
    if (ds4rt_gk_malloc(&p, bytes) != DS4RT_GK_OK) die("malloc");
    return p;
}

static void sync_or_die(void) {
    if (ds4rt_gk_stream_sync(stream) != DS4RT_GK_OK) die("sync");
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

static const type_case *type_by_name(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (strlen(TYPES[i].name) == len && !strncmp(TYPES[i].name, name, len)) return &TYPES[i];
    return NULL;
}

/* Random weights on the device: `count` matrices of rows x cols, `stride` bytes apart. */
static void *device_weights(const type_case *tc, int64_t rows, int64_t cols, uint64_t rb, uint32_t count,
                            uint64_t stride) {
    uint8_t *h = malloc((size_t)(rb * rows));
    uint8_t *d = dalloc((size_t)(stride * count));
    random_rows(tc, h, rows, cols, rb);
    for (uint32_t e = 0; e < count; e++) /* the same bytes in every expert: speed does not care */
        if (ds4rt_gk_memcpy_h2d(d + e * stride, h, (size_t)(rb * rows), stream) != DS4RT_GK_OK) die("upload");
    sync_or_die();
    free(h);
    return d;
}

int main(int argc, char **argv) {
    int64_t rows = 4096, cols = 4096, erows = 2048, ecols = 4096;
    int ns[32] = {1, 2, 3, 4, 6, 8, 12, 16, 17, 32}, n_ns = 10, reps = 200, quick = 0;
    uint32_t E = 256, k = 6;
    const char *types = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) { quick = 1; continue; }
        if (v == NULL) { fprintf(stderr, "bench_mm: %s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "--rows")) rows = atoll(v);
        else if (!strcmp(a, "--cols")) cols = atoll(v);
        else if (!strcmp(a, "--erows")) erows = atoll(v);
        else if (!strcmp(a, "--ecols")) ecols = atoll(v);
        else if (!strcmp(a, "--experts")) E = (uint32_t)atoi(v);
        else if (!strcmp(a, "--k")) k = (uint32_t)atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--types")) types = v;
        else if (!strcmp(a, "--ns")) n_ns = parse_list(v, ns, 32);
        else { fprintf(stderr, "bench_mm: unknown option %s\n", a); return 2; }
    }
    if (quick) {
        rows = 256, cols = 512, erows = 128, ecols = 512, E = 8, reps = 2;
        n_ns = parse_list("1,2,17", ns, 32);
    }
    int ndev = 0;
    if (ds4rt_gk_device_count(&ndev) != DS4RT_GK_OK || ndev == 0) {
        fprintf(stderr, "bench_mm: no GPU device\n");
        return 77;
    }
    char dev[256] = "";
    int integrated = 0, n_sm = 0;
    uint64_t total = 0, freeb = 0;
    ds4rt_gk_device_info(0, dev, sizeof dev, &integrated, &total, &freeb, &n_sm);
    if (ds4rt_gk_stream_create(&stream) != DS4RT_GK_OK) die("stream");

    /* copy bandwidth: 256 MiB device to device (4 MiB under --quick) */
    const size_t cbytes = quick ? ((size_t)4 << 20) : ((size_t)256 << 20);
    void *ca = dalloc(cbytes), *cb = dalloc(cbytes);
    ds4rt_gk_memset(ca, 1, cbytes, stream);
    ds4rt_gk_memcpy_d2d(cb, ca, cbytes, stream);
    sync_or_die();
    const int creps = quick ? 2 : 20;
    double t0 = now_us();
    for (int r = 0; r < creps; r++) ds4rt_gk_memcpy_d2d(cb, ca, cbytes, stream);
    sync_or_die();
    const double copy_gbps = 2.0 * (double)cbytes * creps / ((now_us() - t0) * 1e3); /* read + write */
    ds4rt_gk_free(ca), ds4rt_gk_free(cb);

    printf("{\n  \"device\": \"%s\", \"n_sm\": %d, \"copy_gbps\": %.1f, \"reps\": %d,\n", dev, n_sm, copy_gbps, reps);
    printf("  \"forms\": \"%s\",\n", ds4rt_gk_mm_forms()); /* DS4RT_GPU_QS_IQ2, DS4RT_GPU_QS_Q2K */
    printf("  \"note\": \"us per call, averaged over back-to-back launches; gbps = weight bytes / us; floor_us = weight bytes / copy_gbps\",\n");
    printf("  \"results\": [\n");
    int first = 1;
    int nmax = 1;
    for (int i = 0; i < n_ns; i++) nmax = ns[i] > nmax ? ns[i] : nmax;

    for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++) {
        const type_case *tc = &TYPES[ti];
        if (types) { /* a comma-separated list of names */
            int found = 0;
            for (const char *s = types; *s;) {
                const char *c = strchr(s, ',');
                const size_t len = c ? (size_t)(c - s) : strlen(s);
                if (type_by_name(s, len) == tc) found = 1;
                if (!c) break;
                s = c + 1;
            }
            if (!found) continue;
        }
        for (int kind = 0; kind < 2; kind++) { /* 0: dense rows x cols; 1: experts */
            const int64_t R = kind ? erows : rows, C = kind ? ecols : cols;
            uint64_t rb = 0;
            if (ds4rt_type_row_bytes(tc->type, C, &rb) != DS4RT_OK) continue;
            const uint64_t mbytes = rb * (uint64_t)R, stride = (mbytes + 255) & ~(uint64_t)255;
            /* at most 4 GiB of experts (float types would need 8 GiB for 256) */
            uint32_t count = kind ? E : 1;
            if ((uint64_t)count * stride > ((uint64_t)4 << 30)) count = (uint32_t)(((uint64_t)4 << 30) / stride);
            void *dw = device_weights(tc, R, C, rb, count, stride);
            const int64_t xrows = kind ? (int64_t)nmax * k : nmax;
            float *hx = malloc(sizeof(float) * (size_t)(xrows * C));
            random_x(hx, xrows, C);
            float *dx = dalloc(sizeof(float) * (size_t)(xrows * C)), *dy = dalloc(sizeof(float) * (size_t)(xrows * R));
            if (ds4rt_gk_memcpy_h2d(dx, hx, sizeof(float) * (size_t)(xrows * C), stream) != DS4RT_GK_OK) die("upload x");
            const size_t sb = ds4rt_gk_matmul_scratch_bytes(tc->type, C, xrows);
            void *dact = dalloc(sb);
            int32_t *ids = malloc(sizeof(int32_t) * (size_t)xrows), *dids = dalloc(sizeof(int32_t) * (size_t)xrows);
            for (int64_t j = 0; j < xrows; j++) ids[j] = (int32_t)(next_u64() % count); /* distinct-ish experts */
            if (ds4rt_gk_memcpy_h2d(dids, ids, sizeof(int32_t) * (size_t)xrows, stream) != DS4RT_GK_OK) die("upload ids");
            sync_or_die();
            const ds4rt_gk_weight w = {tc->type, dw, R, C, rb};
            for (int ni = 0; ni < n_ns; ni++) {
                const int n = ns[ni];
                const int64_t slots = kind ? (int64_t)n * k : n;
                if (ds4rt_gk_act_convert(tc->type, dx, n, C, dact, sb, stream) != DS4RT_GK_OK) die("convert");
                for (int with_conv = 0; with_conv < (kind ? 1 : 2); with_conv++) {
                    /* warm up, then time */
                    for (int r = 0; r < 3; r++) {
                        int st = kind ? ds4rt_gk_matmul_experts_act(&w, stride, count, dids, slots, k, dact, dy, stream)
                                 : with_conv ? ds4rt_gk_matmul(&w, dx, n, dy, dact, sb, stream)
                                             : ds4rt_gk_matmul_act(&w, dact, n, dy, stream);
                        if (st != DS4RT_GK_OK) die("matmul");
                    }
                    sync_or_die();
                    t0 = now_us();
                    for (int r = 0; r < reps; r++) {
                        if (kind) ds4rt_gk_matmul_experts_act(&w, stride, count, dids, slots, k, dact, dy, stream);
                        else if (with_conv) ds4rt_gk_matmul(&w, dx, n, dy, dact, sb, stream);
                        else ds4rt_gk_matmul_act(&w, dact, n, dy, stream);
                    }
                    sync_or_die();
                    const double us = (now_us() - t0) / reps;
                    /* bytes that must be read: each distinct expert of the slots once */
                    uint64_t distinct = 1;
                    if (kind) {
                        distinct = 0;
                        for (int64_t j = 0; j < slots; j++) {
                            int seen = 0;
                            for (int64_t q = 0; q < j; q++) seen |= ids[q] == ids[j];
                            distinct += !seen;
                        }
                    }
                    const double bytes = (double)mbytes * (double)distinct;
                    printf("%s    {\"op\": \"%s\", \"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"n\": %d, "
                           "\"slots\": %lld, \"matrices_read\": %llu, \"us\": %.3f, \"gbps\": %.4g, \"floor_us\": %.3f, "
                           "\"of_floor\": %.4g}",
                           first ? "" : ",\n", kind ? "experts" : with_conv ? "matmul+convert" : "matmul",
                           tc->name, (long long)R, (long long)C, n, (long long)slots, (unsigned long long)distinct, us,
                           bytes / (us * 1e3), bytes / (copy_gbps * 1e3),
                           bytes / (copy_gbps * 1e3) / us);
                    first = 0;
                }
            }
            ds4rt_gk_free(dw), ds4rt_gk_free(dx), ds4rt_gk_free(dy), ds4rt_gk_free(dact), ds4rt_gk_free(dids);
            free(hx), free(ids);
        }
    }
    printf("\n  ]\n}\n");
    ds4rt_gk_stream_destroy(stream);
    return 0;
}
