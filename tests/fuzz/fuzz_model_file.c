/*
 * fuzz_model_file.c - libFuzzer targets for the model loader (fuzz_model) and the DSpark
 * support-model loader (fuzz_support, built with -DFUZZ_SUPPORT=1); docs/ROBUSTNESS.md.
 *
 * A model file is large and mostly weights, so the input is not the file but a list of patches
 * to a valid seed file: records of [kind u8][offset u24 LE][n u8][n bytes]. An even kind
 * overwrites at offset within the first 64 KiB (metadata and tensor records), an odd kind
 * anywhere in the file (offset scaled to its size); kind 0xff truncates the file there. The
 * patched file is written to a memfd and loaded through its /proc path, as a host would load
 * a file. What loads is used: a session evaluates a prompt and generates (speculatively, with
 * the support model, for fuzz_support).
 *
 *   DS4RT_FUZZ_TARGET=target.gguf [DS4RT_FUZZ_SUPPORT=support.gguf] fuzz_model|fuzz_support ...
 *
 * fuzz_model patches the target; fuzz_support loads the target as it is and patches the
 * support file. Checks beyond the sanitizers: a refusal has a message, no handle and is never
 * DS4RT_ERR_INTERNAL; a loaded model's session calls return statuses, never crash.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ds4rt.h"
#include "fuzz_target.h"

#ifndef FUZZ_SUPPORT
#define FUZZ_SUPPORT 0
#endif

#define REQUIRE(cond)                                                                                \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "fuzz_model_file: %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
                    ds4rt_last_error());                                                             \
            abort();                                                                                 \
        }                                                                                            \
    } while (0)

#define HEADER_SPAN (64u << 10)

static uint8_t *seed, *work;
static size_t seed_size;
static int fd = -1;
static char path[64];
static ds4rt_model *target; /* fuzz_support: the intact target */
static unsigned long long n_inputs, n_loaded, n_generated;

/* With DS4RT_FUZZ_STATS set, the outcome counts at exit, so a run shows it reached both
 * outcomes (a seed that never loads would fuzz nothing but the first check). */
static void report(void) {
    fprintf(stderr, "{\"target\": \"%s\", \"inputs\": %llu, \"loaded\": %llu, \"generated\": %llu}\n",
            FUZZ_SUPPORT ? "fuzz_support" : "fuzz_model", n_inputs, n_loaded, n_generated);
}

static uint8_t *read_all(const char *p, size_t *size) {
    FILE *f = p ? fopen(p, "rb") : NULL;
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void setup(void) {
    const char *tp = getenv("DS4RT_FUZZ_TARGET");
    const char *sp = FUZZ_SUPPORT ? getenv("DS4RT_FUZZ_SUPPORT") : tp;
    seed = read_all(sp, &seed_size);
    if (seed == NULL) {
        fprintf(stderr, "fuzz_model_file: set DS4RT_FUZZ_TARGET%s to a readable seed file\n",
                FUZZ_SUPPORT ? " and DS4RT_FUZZ_SUPPORT" : "");
        exit(2);
    }
    work = malloc(seed_size);
    fd = memfd_create("ds4rt-fuzz", 0);
    REQUIRE(work != NULL && fd >= 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ds4rt_model_params mp;
    REQUIRE(ds4rt_model_params_init(&mp, sizeof mp) == DS4RT_OK);
    mp.n_threads = 1;
    if (FUZZ_SUPPORT) REQUIRE(ds4rt_model_load(tp, &mp, &target) == DS4RT_OK);
    if (getenv("DS4RT_FUZZ_STATS") != NULL) atexit(report);
}

static size_t apply(const uint8_t *data, size_t size) {
    memcpy(work, seed, seed_size);
    size_t n = seed_size;
    while (size >= 5) {
        uint8_t kind = data[0], len = data[4];
        uint32_t off = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16;
        data += 5;
        size -= 5;
        if (len > size) len = (uint8_t)size;
        if (kind == 0xff) {
            size_t at = (size_t)((uint64_t)off * seed_size >> 24);
            if (at < n) n = at;
        } else if (n > 0) {
            size_t at = kind % 2 == 0 ? off % (n < HEADER_SPAN ? n : HEADER_SPAN)
                                      : (size_t)((uint64_t)off * n >> 24);
            size_t k = len;
            if (at + k > n) k = n - at;
            memcpy(work + at, data, k);
        }
        data += len;
        size -= len;
    }
    return n;
}

static void use(ds4rt_model *m, ds4rt_dspark *d) {
    ds4rt_session_params sp;
    REQUIRE(ds4rt_session_params_init(&sp, sizeof sp) == DS4RT_OK);
    sp.n_ctx = 32;
    sp.max_batch = 17;
    ds4rt_session *s = NULL;
    if (ds4rt_session_create(m, &sp, &s) != DS4RT_OK) {
        REQUIRE(s == NULL);
        return;
    }
    const int32_t prompt[] = {0, 1, 2};
    (void)ds4rt_session_eval(s, prompt, 3, NULL);
    ds4rt_generate_params gp;
    REQUIRE(ds4rt_generate_params_init(&gp, sizeof gp) == DS4RT_OK);
    gp.max_tokens = 4;
    ds4rt_spec_params spec;
    REQUIRE(ds4rt_spec_params_init(&spec, sizeof spec) == DS4RT_OK);
    if (d != NULL) {
        spec.dspark = d;
        gp.spec = &spec;
    }
    int32_t out[4];
    size_t n_out = 0;
    ds4rt_status st = ds4rt_generate(s, prompt, 1, &gp, out, 4, &n_out);
    REQUIRE(n_out <= 4);
    if (st == DS4RT_OK) {
        REQUIRE(ds4rt_session_position(s) <= sp.n_ctx);
        n_generated++;
    }
    ds4rt_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (seed == NULL) setup();
    size_t n = apply(data, size);
    n_inputs++;
    REQUIRE(ftruncate(fd, 0) == 0 && ftruncate(fd, (off_t)n) == 0);
    REQUIRE(pwrite(fd, work, n, 0) == (ssize_t)n);
    ds4rt_status st;
    if (FUZZ_SUPPORT) {
        ds4rt_dspark *d = NULL;
        st = ds4rt_dspark_load(target, path, NULL, &d);
        REQUIRE((st == DS4RT_OK) == (d != NULL));
        if (d != NULL) {
            n_loaded++;
            use(target, d);
            ds4rt_dspark_free(d);
        }
    } else {
        ds4rt_model_params mp;
        REQUIRE(ds4rt_model_params_init(&mp, sizeof mp) == DS4RT_OK);
        mp.n_threads = 1;
        ds4rt_model *m = NULL;
        st = ds4rt_model_load(path, &mp, &m);
        REQUIRE((st == DS4RT_OK) == (m != NULL));
        if (m != NULL) {
            n_loaded++;
            use(m, NULL);
            ds4rt_model_free(m);
        }
    }
    if (st != DS4RT_OK) REQUIRE(st != DS4RT_ERR_INTERNAL && ds4rt_last_error()[0] != '\0');
    return 0;
}
