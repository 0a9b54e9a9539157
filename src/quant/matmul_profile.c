/* matmul_profile.c - the counters of matmul_profile.h and their JSON report at exit. */
#include "matmul_profile.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ds4rt.h"
#include "qtypes.h"

typedef struct {
    _Atomic int64_t calls, tok, ns;
    _Atomic uint64_t bytes;
} type_counters;

static type_counters by_type[DS4RT_TYPE_COUNT];
static _Atomic int64_t batches, quant_ns, total_ns;
static char out_path[1024];
static int on;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void report(void) {
    FILE *f = strcmp(out_path, "-") == 0 ? stderr : fopen(out_path, "w");
    if (f == NULL) {
        fprintf(stderr, "ds4rt: DS4RT_PROFILE: cannot write %s\n", out_path);
        return;
    }
    fprintf(f, "{\"batches\": %lld, \"quant_ns\": %lld, \"total_ns\": %lld, \"types\": {",
            (long long)batches, (long long)quant_ns, (long long)total_ns);
    const char *sep = "";
    for (uint32_t t = 0; t < DS4RT_TYPE_COUNT; t++) {
        if (by_type[t].calls == 0) continue;
        const ds4rt_type_info *info = ds4rt_type_lookup(t);
        fprintf(f, "%s\"%s\": {\"products\": %lld, \"token_rows\": %lld, \"ns\": %lld, \"weight_bytes\": %llu}", sep,
                info ? info->name : "?", (long long)by_type[t].calls, (long long)by_type[t].tok,
                (long long)by_type[t].ns, (unsigned long long)by_type[t].bytes);
        sep = ", ";
    }
    fprintf(f, "}}\n");
    if (f != stderr) fclose(f);
}

static void init(void) {
    const char *p = getenv("DS4RT_PROFILE");
    if (p == NULL || *p == '\0' || strlen(p) >= sizeof out_path) return;
    strcpy(out_path, p);
    on = atexit(report) == 0;
}

int ds4rt_mmprof_on(void) {
    pthread_once(&once, init);
    return on;
}

int64_t ds4rt_mmprof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ds4rt_mmprof_add(uint32_t type, int64_t ns, uint64_t weight_bytes, int64_t n_tok) {
    if (type >= DS4RT_TYPE_COUNT) return;
    atomic_fetch_add_explicit(&by_type[type].calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&by_type[type].tok, n_tok, memory_order_relaxed);
    atomic_fetch_add_explicit(&by_type[type].ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&by_type[type].bytes, weight_bytes, memory_order_relaxed);
}

void ds4rt_mmprof_batch(int64_t q_ns, int64_t t_ns) {
    atomic_fetch_add_explicit(&batches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&quant_ns, q_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&total_ns, t_ns, memory_order_relaxed);
}
